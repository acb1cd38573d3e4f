// test_errbuf.cc - the rule of koloGetLastError (kolo.h) with several writers.
//
// A communicator's sentence is written by its caller, its progress thread
// and the network proxy.  The rule: the first failure sticks (every later
// failure shows it again), a call's own error (bad argument, bad usage)
// replaces what is shown, and no reader ever sees a torn sentence.  The
// suites are named *Threads so that the TSan run of CI (run_all.sh) runs them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "common/error.h"
}

#include "util/expect_text.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

// Writer w's k-th sentence: a head naming both, then a tail of one letter
// per writer, so that a sentence mixing two writes shows.
std::string sentence(int w, int k) {
  char head[64];
  std::snprintf(head, sizeof head, "writer %d sentence %d ", w, k);
  return std::string(head) + std::string(300, (char)('a' + w));
}

// A sentence read back is empty or one writer's whole sentence.
void expect_whole(const std::string &s) {
  if (s.empty()) return;
  int w = -1, k = -1;
  ASSERT_EQ(std::sscanf(s.c_str(), "writer %d sentence %d ", &w, &k), 2) << s;
  EXPECT_EQ(s, sentence(w, k)) << "a torn sentence";
}

}  // namespace

// Eight threads report failures into one communicator's buffer while a
// ninth reads: every read is a whole sentence, and what stays is the first
// failure, which is some writer's sentence 0.
TEST(ErrbufThreads, FirstFailureWinsAndNoSentenceIsTorn) {
  static kolo_errbuf eb;  // zeroed, as a communicator's (calloc)
  kolo_errbuf_make_sticky(&eb);
  const int writers = 8, each = 200;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    char out[KOLO_ERR_LEN];
    while (!done.load()) expect_whole(kolo_error_read(&eb, out, sizeof out));
  });
  std::vector<std::thread> ts;
  for (int w = 0; w < writers; w++)
    ts.emplace_back([w] {
      for (int k = 0; k < each; k++)
        kolo_error_quiet(&eb, k % 2 ? koloTimeout : koloRemoteError, "%s", sentence(w, k).c_str());
    });
  for (auto &t : ts) t.join();
  done = true;
  reader.join();
  char out[KOLO_ERR_LEN];
  std::string kept = kolo_error_read(&eb, out, sizeof out);
  expect_whole(kept);
  EXPECT_NE(kept.find(" sentence 0 "), std::string::npos) << "not a first failure: " << kept.substr(0, 40);
}

// A call's own error replaces what is shown; the next failure shows the
// first failure again.  A plain buffer (a thread's) shows the last write.
TEST(ErrbufThreads, CallErrorReplacesAndFailureComesBack) {
  static kolo_errbuf eb;
  kolo_errbuf_make_sticky(&eb);
  char out[KOLO_ERR_LEN];
  kolo_error_quiet(&eb, koloRemoteError, "rank 3 died");
  kolo_error_quiet(&eb, koloTimeout, "rank 0 timed out waiting for rank 3");
  EXPECT_STREQ(kolo_error_read(&eb, out, sizeof out), "rank 3 died");
  kolo_error_quiet(&eb, koloInvalidArgument, "count is negative");
  EXPECT_STREQ(kolo_error_read(&eb, out, sizeof out), "count is negative");
  kolo_error_quiet(&eb, koloSystemError, "the communicator failed earlier");
  EXPECT_STREQ(kolo_error_read(&eb, out, sizeof out), "rank 3 died");
  kolo_error_clear(&eb);
  kolo_error_quiet(&eb, koloTimeout, "a new first failure");
  EXPECT_STREQ(kolo_error_read(&eb, out, sizeof out), "a new first failure");

  kolo_errbuf plain{};
  kolo_error_quiet(&plain, koloRemoteError, "first");
  kolo_error_quiet(&plain, koloTimeout, "second");
  EXPECT_STREQ(kolo_error_read(&plain, out, sizeof out), "second");
}

// End to end: a bad datatype on rank 0 gets its own sentence; then rank 1
// never calls and rank 0 times out naming it (a failure replaces a call's
// sentence).  Every later call returns that failure, and
// koloGetLastError(comm) keeps showing the timeout's sentence, while the
// thread's buffer has the call's words ("failed earlier").
TEST(ErrbufThreads, CommunicatorKeepsItsFirstFailure) {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = 1000;
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<float> x(1 << 12, 1.0f);
  koloComm_t c = w.comms[0];
  EXPECT_EQ(koloAllReduce(x.data(), x.data(), x.size(), (koloDataType_t)99, koloSum, c, nullptr),
            koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(c), "datatype 99");
  ASSERT_EQ(koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, c, nullptr), koloTimeout);
  std::string first = koloGetLastError(c);
  EXPECT_CONTAINS(first, "rank 1");
  for (int t : {(int)koloFloat32, 99}) {  // an int: UBSan refuses an enum variable holding 99
    EXPECT_EQ(koloAllReduce(x.data(), x.data(), x.size(), (koloDataType_t)t, koloSum, c, nullptr), koloTimeout);
    EXPECT_EQ(std::string(koloGetLastError(c)), first);
    EXPECT_CONTAINS(koloGetLastError(nullptr), "failed earlier");
  }
}
