// test_cuda_status.cc - the host's read of the kernels' status words
// (core/cuda_status.c): the block that stops first claims the status word,
// then writes its block, the peer it names and, last, its stop word; a host
// that reads between the claim and the rest must wait for them, or its
// sentence names the wrong rank ("ran at once on one pipe (with rank 0)",
// said by rank 0).  The words here are plain memory that a thread of the
// test writes as the block does, with a pause after the claim: no device,
// no model.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "kernels/cuda_exec.h"
extern "C" {
#include "core/cuda_status.h"
}

namespace {

constexpr uint32_t kStopWord = KOLO_DEV_STOP_WORD(1, 0);  // an error, from rank 0

struct StatusWords {
  uint32_t w[KOLO_DEV_STATUS_WORDS] = {};
  // As record_stop does: the claim, then block and peer, the stop word last.
  void claim(uint32_t why) { __atomic_store_n(&w[0], why, __ATOMIC_RELEASE); }
  void finish(uint32_t block, uint32_t peer) {
    __atomic_store_n(&w[1], block, __ATOMIC_RELAXED);
    __atomic_store_n(&w[2], peer, __ATOMIC_RELAXED);
    __atomic_store_n(&w[KOLO_DEV_STATUS_WORD], kStopWord, __ATOMIC_RELEASE);
  }
};

TEST(CudaStatusWords, NoStopReadsNothingElse) {
  StatusWords s;
  s.w[2] = 7;  // stale: not read while no kernel stopped
  kolo_cuda_stop st = kolo_cuda_status_read(s.w);
  EXPECT_EQ(st.why, (uint32_t)KOLO_DEV_OK);
  EXPECT_EQ(st.peer, 0);
  EXPECT_EQ(st.word, 0u);
}

TEST(CudaStatusWords, AFinishedStopIsReadWhole) {
  StatusWords s;
  s.claim(KOLO_DEV_TIMEOUT);
  s.finish(5, 3);
  kolo_cuda_stop st = kolo_cuda_status_read(s.w);
  EXPECT_EQ(st.why, (uint32_t)KOLO_DEV_TIMEOUT);
  EXPECT_EQ(st.task, 5u);
  EXPECT_EQ(st.peer, 3);
  EXPECT_EQ(st.word, kStopWord);
}

// The read comes between the claim and the rest: it waits for them (the
// writer pauses 50 ms, a block's thread off its core on the CPU model).
TEST(CudaStatusWords, AReadDuringTheStopWaitsForBlockAndPeer) {
  for (int trial = 0; trial < 5; trial++) {
    StatusWords s;
    s.claim(KOLO_DEV_CONCURRENT);
    std::atomic<bool> reading{false};
    std::thread block([&] {
      while (!reading.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      s.finish(2, 1);
    });
    reading.store(true);
    kolo_cuda_stop st = kolo_cuda_status_read(s.w);
    block.join();
    EXPECT_EQ(st.why, (uint32_t)KOLO_DEV_CONCURRENT);
    EXPECT_EQ(st.peer, 1) << "trial " << trial << ": the peer read before the stopping block wrote it";
    EXPECT_EQ(st.task, 2u);
    EXPECT_EQ(st.word, kStopWord);
  }
}

// A stop whose block never finishes (its context died between): the read
// gives up, with the words as they are, and does not hang.
TEST(CudaStatusWords, AStopNeverFinishedIsReadAsItIs) {
  StatusWords s;
  s.claim(KOLO_DEV_PEER_STOPPED);
  s.w[2] = 4;
  kolo_cuda_stop st = kolo_cuda_status_read(s.w);
  EXPECT_EQ(st.why, (uint32_t)KOLO_DEV_PEER_STOPPED);
  EXPECT_EQ(st.peer, 4);
  EXPECT_EQ(st.word, 0u);
}

// Reads the report while a thread writes it `late_ms` after the read began
// (its state word turns 2 once the report is whole), the status word
// claimed for `why`: 1 with the report in *got, or 0.
int ReadReportWrittenLate(uint32_t why, int late_ms, kolo_call_mismatch *got) {
  StatusWords s;
  s.claim(why);
  s.finish(0, 3);
  kolo_call_mismatch want = {};
  want.rank[0] = 2;
  want.rank[1] = 5;
  want.sig[1].count = 12345;
  std::atomic<bool> reading{false};
  std::thread block([&] {
    while (!reading.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    std::memcpy(&s.w[KOLO_DEV_STATUS_REPORT], &want, sizeof want);
    __atomic_store_n(&s.w[KOLO_DEV_STATUS_REPORT_STATE], 2u, __ATOMIC_RELEASE);
  });
  reading.store(true);
  std::memset(got, 0xa5, sizeof *got);
  const int ok = kolo_cuda_status_report(s.w, got);
  block.join();
  return ok;
}

// The mismatch report beside the words: a read that came first waits for it.
TEST(CudaStatusWords, AReportWrittenLateIsRead) {
  kolo_call_mismatch got;
  ASSERT_EQ(ReadReportWrittenLate(KOLO_DEV_PEER_STOPPED, 20, &got), 1);
  EXPECT_EQ(got.rank[0], 2);
  EXPECT_EQ(got.rank[1], 5);
  EXPECT_EQ(got.sig[1].count, 12345u);
}

// Where this rank's kernel found the mismatch, a report always follows:
// the read waits for it as for the stop word, past the short wait (a
// block's thread off its core for half a second on the CPU model).
TEST(CudaStatusWords, AMismatchFoundHereWaitsForItsReport) {
  kolo_call_mismatch got;
  ASSERT_EQ(ReadReportWrittenLate(KOLO_DEV_MISMATCH, 500, &got), 1);
  EXPECT_EQ(got.rank[0], 2);
  EXPECT_EQ(got.rank[1], 5);
  EXPECT_EQ(got.sig[1].count, 12345u);
}

// No report (its state word stays short of 2): the read says so in about
// 0.16 s, and leaves *m alone.
TEST(CudaStatusWords, NoReportIsReadAsNone) {
  StatusWords s;
  s.w[KOLO_DEV_STATUS_REPORT_STATE] = 1;  // a writer that never finished
  kolo_call_mismatch got;
  std::memset(&got, 0xa5, sizeof got);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(kolo_cuda_status_report(s.w, &got), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(got.rank[0], (int32_t)0xa5a5a5a5);
}

}  // namespace
