// test_errors.cc - bad input and failing peers.
//
//  - Bad arguments get koloInvalidArgument (koloInvalidUsage for a group end
//    without a start) and a koloGetLastError sentence naming the argument; the
//    communicator stays usable afterwards.
//  - Bad configs and ranks out of range fail at init.
//  - A rank killed before or during a collective, a rank that never arrives at
//    init, a rank that never calls, and koloCommAbort on a peer: the others'
//    calls return an error naming that rank within a bounded time (the
//    communicators' timeout is 2 s; every test measures its time to error and
//    asserts an upper bound), and no /dev/shm/kolo-* segment is left behind.
#include <gtest/gtest.h>

#include <signal.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "transport/bootstrap.h"  // kolo_uid: an id of a root that is not there
}

#include "util/coll_ref.h"
#include "util/comm_peek.h"
#include "util/expect_text.h"
#include "util/coll_run.h"
#include "util/free_port.h"
#include "util/proc_util.h"
#include "util/thread_world.h"
#include "util/time_scale.h"

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);

constexpr int kTimeoutMs = 2000;
// Upper bound on any time to error: the timeout plus 3 s of slack (2 cores,
// loaded CI machines), the slack scaled under sanitizers.
const double kBoundMs = kTimeoutMs + kt_ms(3000);

// KOLO_TIMEOUT_MS for the scope (the root thread started by koloGetUniqueId
// and forked children read it).
struct ScopedTimeoutEnv : ScopedEnv {
  explicit ScopedTimeoutEnv(int ms) : ScopedEnv("KOLO_TIMEOUT_MS", std::to_string(ms)) {}
};

koloConfig_t timeout_config(int ms) {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = ms;
  return cfg;
}

// ---- ranks that fail: processes ------------------------------------------------------
// These come first in the file (gtest runs tests in file order) so that they
// fork from a process in which no communicator was made yet: see
// ProcsAfterThreads.ForkAfterCommunicatorsInParent in test_e2e_procs.cc for
// what goes wrong otherwise.

// Parses "RESULT <rc> <ms> <text>" lines written by children.
struct RankReport {
  bool found = false;
  int rc = -1;
  double ms = 0;
  std::string text;
};

RankReport parse_report(const std::string &out) {
  RankReport r;
  size_t at = out.find("RESULT ");
  if (at == std::string::npos) return r;
  size_t eol = out.find('\n', at);
  std::string line = out.substr(at + 7, eol == std::string::npos ? std::string::npos : eol - at - 7);
  char *end = nullptr;
  r.rc = (int)std::strtol(line.c_str(), &end, 10);
  r.ms = std::strtod(end, &end);
  while (*end == ' ') end++;
  r.text = end;
  r.found = true;
  return r;
}

void report(int rank, koloResult_t rc, double ms, const char *text) {
  (void)rank;
  std::fprintf(stderr, "RESULT %d %.1f %s\n", (int)rc, ms, text);
}

// `expect_fail` ranks must report an error naming `culprit` in time.
void expect_failed_in_time(const std::vector<ChildResult> &res, const std::vector<int> &ranks,
                           const char *culprit, double bound_ms) {
  for (int r : ranks) {
    const ChildResult &c = res[(size_t)r];
    RankReport rep = parse_report(c.output);
    EXPECT_TRUE(rep.found) << "rank " << r << " did not report: " << c.describe();
    if (!rep.found) continue;
    EXPECT_TRUE(c.exited && c.code == 0) << "rank " << r << ": " << c.describe();
    EXPECT_TRUE(rep.rc == koloRemoteError || rep.rc == koloTimeout)
        << "rank " << r << " returned " << koloGetErrorString((koloResult_t)rep.rc) << ": " << rep.text;
    EXPECT_CONTAINS(rep.text, culprit) << "rank " << r;
    EXPECT_LT(rep.ms, bound_ms) << "rank " << r << "'s time to error; its error: " << rep.text;
    std::printf("  rank %d: %s after %.0f ms: %s\n", r, koloGetErrorString((koloResult_t)rep.rc), rep.ms,
                rep.text.c_str());
  }
}

// 3 processes, timeout 2 s; rank 2 is killed (SIGKILL) either just before a
// large all-reduce that ranks 0 and 1 are in, or 50 ms into it.
void killed_rank(bool during) {
  ScopedTimeoutEnv env(kTimeoutMs);
  const int n = 3;
  const size_t count = (size_t)64 << 20;  // 256 MiB of float32: long enough to die in
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  auto res = run_children_with_id(n, [&](int rank, const koloUniqueId &id) {
    koloConfig_t cfg = timeout_config(kTimeoutMs);
    koloComm_t comm;
    koloResult_t rc = koloCommInitRankConfig(&comm, n, id, rank, &cfg);
    if (rc != koloSuccess) {
      std::fprintf(stderr, "init failed: %s\n", koloGetLastError(nullptr));
      return 2;
    }
    float one = 1, sum = 0;  // warm-up: everyone connected
    rc = koloAllReduce(&one, &sum, 1, koloFloat32, koloSum, comm, nullptr);
    if (rc != koloSuccess || sum != 3) {
      std::fprintf(stderr, "warm-up all-reduce failed: %s\n", koloGetLastError(comm));
      return 2;
    }
    std::vector<float> x(count, 1.0f);
    if (rank == 2 && !during) {
      // Paces only, and decides nothing: usually a peer's slices arrive here
      // first (it is inside the all-reduce when rank 2 dies), but they may
      // have come before the count was taken, and the peers must name rank 2
      // either way.  Bounded well under the peers' timeout, so that they are
      // still waiting when it dies.
      (void)kt_wait_slices_in(comm, kt_slices_in(comm), 200);
      raise(SIGKILL);
    }
    if (rank == 2) {
      std::thread([] {
        // Paces only: rank 2 is inside its call by then on any machine; were
        // it not, its peers would fail naming it all the same.
        usleep(50 * 1000);
        raise(SIGKILL);
      }).detach();
    }
    double t0 = now_ms();
    rc = koloAllReduce(x.data(), x.data(), count, koloFloat32, koloSum, comm, nullptr);
    double ms = now_ms() - t0;
    report(rank, rc, ms, koloGetLastError(comm));
    // the communicator stays failed, and fails fast
    t0 = now_ms();
    koloResult_t again = koloAllReduce(x.data(), x.data(), 16, koloFloat32, koloSum, comm, nullptr);
    if (rc != koloSuccess && (again == koloSuccess || now_ms() - t0 > 1000))
      std::fprintf(stderr, "a call after the failure returned %s after %.0f ms\n", koloGetErrorString(again), now_ms() - t0);
    koloCommDestroy(comm);
    return 0;
  }, 120000, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_FALSE(res[2].exited) << res[2].describe();
  EXPECT_EQ(res[2].signal, SIGKILL) << res[2].describe();
  expect_failed_in_time(res, {0, 1}, "rank 2", kBoundMs);
  for (int r : {0, 1})
    EXPECT_EQ(res[r].output.find("a call after the failure"), std::string::npos) << res[r].output;
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm: " << ::testing::PrintToString(leaks);
}

TEST(FailingProcs, RankKilledBeforeCollective) { killed_rank(false); }
TEST(FailingProcs, RankKilledDuringCollective) { killed_rank(true); }

// A communicator of rank `rank` of n with the test's timeout, connected by
// a warm-up all-reduce whose sum is checked; nullptr (said on stderr) when
// either fails.
koloComm_t init_warm(int n, const koloUniqueId &id, int rank) {
  koloConfig_t cfg = timeout_config(kTimeoutMs);
  koloComm_t comm;
  if (koloCommInitRankConfig(&comm, n, id, rank, &cfg) != koloSuccess) {
    std::fprintf(stderr, "init failed: %s\n", koloGetLastError(nullptr));
    return nullptr;
  }
  float one = 1, sum = 0;
  if (koloAllReduce(&one, &sum, 1, koloFloat32, koloSum, comm, nullptr) != koloSuccess || sum != (float)n) {
    std::fprintf(stderr, "warm-up all-reduce failed: %s\n", koloGetLastError(comm));
    koloCommDestroy(comm);
    return nullptr;
  }
  return comm;
}

// How rank 1 of 2 goes while rank 0 waits for it in an all-reduce, and
// what rank 0 says about it.
enum class Going { kLeft, kExited, kKilled };

void rank_goes(Going how, const char *sentence) {
  ScopedTimeoutEnv env(kTimeoutMs);
  const int n = 2;
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  auto res = run_children_with_id(n, [&](int rank, const koloUniqueId &id) {
    koloComm_t comm = init_warm(n, id, rank);
    if (comm == nullptr) return 2;
    if (rank == 1) {
      // Paces only, and decides nothing: rank 0's slices usually arrive here
      // first (it is inside the all-reduce when rank 1 goes), but they may
      // have come before the count was taken, and rank 0 must name rank 1
      // either way.  Bounded well under rank 0's timeout.
      (void)kt_wait_slices_in(comm, kt_slices_in(comm), 200);
      if (how == Going::kKilled) raise(SIGKILL);
      if (how == Going::kExited) exit(0);  // the communicator is never destroyed
      koloCommDestroy(comm);
      usleep(kTimeoutMs * 1000);  // alive, but gone from the communicator
      return 0;
    }
    std::vector<float> x(1 << 20, 1.0f);
    double t0 = now_ms();
    koloResult_t rc = koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, comm, nullptr);
    report(rank, rc, now_ms() - t0, koloGetLastError(comm));
    koloCommDestroy(comm);
    return 0;
  }, 60000, [&](const std::vector<pid_t> &p) { pids = p; });
  if (how == Going::kKilled) EXPECT_EQ(res[1].signal, SIGKILL) << res[1].describe();
  else EXPECT_TRUE(res[1].exited && res[1].code == 0) << res[1].describe();
  expect_failed_in_time(res, {0}, sentence, kBoundMs);
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm: " << ::testing::PrintToString(leaks);
}

TEST(FailingProcs, RankThatDestroyedItsCommunicatorLeft) {
  rank_goes(Going::kLeft, "rank 1 left (destroyed its communicator)");
}
TEST(FailingProcs, RankThatExitedWithoutDestroyingExited) {
  rank_goes(Going::kExited, "rank 1 exited without destroying its communicator");
}
TEST(FailingProcs, RankKilledWasLostWithoutAWord) {
  rank_goes(Going::kKilled, "rank 1 was lost without a word (killed or crashed; its connection closed)");
}

// Reads n bytes from fd within bound_ms; whether they came.
bool read_bytes(int fd, int n, double bound_ms) {
  const double t0 = now_ms();
  char c;
  for (int got = 0; got < n;) {
    pollfd pf = {fd, POLLIN, 0};
    int left = (int)(bound_ms - (now_ms() - t0));
    if (left <= 0 || poll(&pf, 1, left) != 1 || read(fd, &c, 1) != 1) return false;
    got++;
  }
  return true;
}

// Rank r sends x to rank r + 1 and receives from rank r - 1 (a chain).
koloResult_t warm_p2p(koloComm_t comm, int rank, std::vector<float> &x) {
  koloResult_t rc = koloGroupStart();
  if (rc == koloSuccess && rank < 2) rc = koloSend(x.data(), x.size(), koloFloat32, rank + 1, comm, nullptr);
  if (rc == koloSuccess && rank > 0) rc = koloRecv(x.data(), x.size(), koloFloat32, rank - 1, comm, nullptr);
  koloResult_t end = koloGroupEnd();
  return rc != koloSuccess ? rc : end;
}

// Rank 0 is killed; rank 1, waiting for it, fails and destroys its
// communicator (its goodbye blames rank 0); rank 2, waiting for rank 1,
// must name rank 0, the origin, not only rank 1, the last to leave.
// With p2p_warm, the pipes 0->1 and 1->2 exist before (the executor sees
// rank 1 go); without, connecting them fails (the bootstrap sees it).
void leaver_blamed(bool p2p_warm) {
  ScopedTimeoutEnv env(kTimeoutMs);
  const int n = 3;
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  int warmed[2];  // ranks 1 and 2 write a byte each once warmed up
  ASSERT_EQ(pipe(warmed), 0);
  auto res = run_children_with_id(n, [&](int rank, const koloUniqueId &id) {
    koloComm_t comm = init_warm(n, id, rank);
    if (comm == nullptr) return 2;
    std::vector<float> x(1 << 16, 1.0f);
    if (p2p_warm && warm_p2p(comm, rank, x) != koloSuccess) {
      std::fprintf(stderr, "warm-up send/recv failed: %s\n", koloGetLastError(comm));
      return 2;
    }
    if (rank != 0 && write(warmed[1], "w", 1) != 1) return 6;
    if (rank == 0) {
      // Dies only once the others have their warm-up (its sends received,
      // a net proxy's included): they must fail in the call below.
      if (!read_bytes(warmed[0], 2, kt_ms(10000))) {
        std::fprintf(stderr, "rank 0: the others never finished their warm-up\n");
        return 5;
      }
      raise(SIGKILL);
    }
    double t0 = now_ms();
    koloResult_t rc = koloRecv(x.data(), x.size(), koloFloat32, rank - 1, comm, nullptr);
    report(rank, rc, now_ms() - t0, koloGetLastError(comm));
    koloCommDestroy(comm);
    if (rank == 1) usleep(kTimeoutMs * 1000);  // alive, but gone from the communicator
    return 0;
  }, 60000, [&](const std::vector<pid_t> &p) { pids = p; });
  close(warmed[0]);
  close(warmed[1]);
  EXPECT_EQ(res[0].signal, SIGKILL) << res[0].describe();
  expect_failed_in_time(res, {1, 2}, "rank 0", kBoundMs);
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm: " << ::testing::PrintToString(leaks);
}

TEST(FailingProcs, SurvivorNamesTheRankALeaverBlamedAtConnect) { leaver_blamed(false); }
TEST(FailingProcs, SurvivorNamesTheRankALeaverBlamedInACall) { leaver_blamed(true); }
TEST(FailingProcs, SurvivorNamesTheRankALeaverBlamedOverNet) {
  ScopedEnv net("KOLO_NET_FORCE", "1");
  leaver_blamed(true);
}

// 3 ranks expected, only ranks 0 and 1 start: their init fails in bounded
// time naming rank 2.
TEST(FailingProcs, RankNeverArrivesAtInit) {
  ScopedTimeoutEnv env(kTimeoutMs);
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  auto res = run_children_with_id(2, [&](int rank, const koloUniqueId &id) {
    koloConfig_t cfg = timeout_config(kTimeoutMs);
    koloComm_t comm = nullptr;
    double t0 = now_ms();
    koloResult_t rc = koloCommInitRankConfig(&comm, 3, id, rank, &cfg);
    report(rank, rc, now_ms() - t0, koloGetLastError(nullptr));
    if (rc == koloSuccess) koloCommDestroy(comm);
    return 0;
  }, 60000, [&](const std::vector<pid_t> &p) { pids = p; });
  expect_failed_in_time(res, {0, 1}, "rank 2", kBoundMs);
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm: " << ::testing::PrintToString(leaks);
}

// ---- bad arguments -----------------------------------------------------------

// One call with bad arguments: expected result and a word its sentence must
// contain.
struct BadCall {
  const char *what;
  std::function<koloResult_t(koloComm_t, int rank)> call;  // rank: the caller's
  const char *must_name;
};

std::vector<BadCall> bad_calls(int nranks) {
  static float buf[64];
  const size_t huge = SIZE_MAX / 2;
  const auto bad_t = (koloDataType_t)99;
  const auto bad_op = (koloRedOp_t)99;
  return {
      {"AllReduce NULL sendbuff", [](koloComm_t c, int) { return koloAllReduce(nullptr, buf, 4, koloFloat32, koloSum, c, nullptr); }, "sendbuff"},
      {"AllReduce NULL recvbuff", [](koloComm_t c, int) { return koloAllReduce(buf, nullptr, 4, koloFloat32, koloSum, c, nullptr); }, "recvbuff"},
      {"AllReduce datatype 99", [=](koloComm_t c, int) { return koloAllReduce(buf, buf, 4, bad_t, koloSum, c, nullptr); }, "datatype"},
      {"AllReduce op 99", [=](koloComm_t c, int) { return koloAllReduce(buf, buf, 4, koloFloat32, bad_op, c, nullptr); }, "op"},
      {"AllReduce count SIZE_MAX/2", [=](koloComm_t c, int) { return koloAllReduce(buf, buf, huge, koloFloat32, koloSum, c, nullptr); }, "count"},
      {"ReduceScatter NULL sendbuff", [](koloComm_t c, int) { return koloReduceScatter(nullptr, buf, 1, koloFloat32, koloSum, c, nullptr); }, "sendbuff"},
      {"ReduceScatter NULL recvbuff", [](koloComm_t c, int) { return koloReduceScatter(buf, nullptr, 1, koloFloat32, koloSum, c, nullptr); }, "recvbuff"},
      {"ReduceScatter datatype 99", [=](koloComm_t c, int) { return koloReduceScatter(buf, buf, 1, bad_t, koloSum, c, nullptr); }, "datatype"},
      {"ReduceScatter op 99", [=](koloComm_t c, int) { return koloReduceScatter(buf, buf, 1, koloFloat32, bad_op, c, nullptr); }, "op"},
      {"ReduceScatter count SIZE_MAX/2", [=](koloComm_t c, int) { return koloReduceScatter(buf, buf, huge, koloFloat32, koloSum, c, nullptr); }, "count"},
      {"AllGather NULL sendbuff", [](koloComm_t c, int) { return koloAllGather(nullptr, buf, 1, koloFloat32, c, nullptr); }, "sendbuff"},
      {"AllGather NULL recvbuff", [](koloComm_t c, int) { return koloAllGather(buf, nullptr, 1, koloFloat32, c, nullptr); }, "recvbuff"},
      {"AllGather datatype 99", [=](koloComm_t c, int) { return koloAllGather(buf, buf, 1, bad_t, c, nullptr); }, "datatype"},
      {"AllGather count SIZE_MAX/2", [=](koloComm_t c, int) { return koloAllGather(buf, buf, huge, koloFloat32, c, nullptr); }, "count"},
      {"Broadcast NULL sendbuff on the root", [](koloComm_t c, int r) { return koloBroadcast(nullptr, buf, 4, koloFloat32, r, c, nullptr); }, "sendbuff"},
      {"Broadcast NULL recvbuff", [](koloComm_t c, int) { return koloBroadcast(buf, nullptr, 4, koloFloat32, 0, c, nullptr); }, "recvbuff"},
      {"Broadcast datatype 99", [=](koloComm_t c, int) { return koloBroadcast(buf, buf, 4, bad_t, 0, c, nullptr); }, "datatype"},
      {"Broadcast root -1", [](koloComm_t c, int) { return koloBroadcast(buf, buf, 4, koloFloat32, -1, c, nullptr); }, "root"},
      {"Broadcast root nranks", [=](koloComm_t c, int) { return koloBroadcast(buf, buf, 4, koloFloat32, nranks, c, nullptr); }, "root"},
      {"Broadcast count SIZE_MAX/2", [=](koloComm_t c, int) { return koloBroadcast(buf, buf, huge, koloFloat32, 0, c, nullptr); }, "count"},
      {"Reduce NULL sendbuff", [](koloComm_t c, int) { return koloReduce(nullptr, buf, 4, koloFloat32, koloSum, 0, c, nullptr); }, "sendbuff"},
      {"Reduce NULL recvbuff on the root", [](koloComm_t c, int r) { return koloReduce(buf, nullptr, 4, koloFloat32, koloSum, r, c, nullptr); }, "recvbuff"},
      {"Reduce datatype 99", [=](koloComm_t c, int) { return koloReduce(buf, buf, 4, bad_t, koloSum, 0, c, nullptr); }, "datatype"},
      {"Reduce op 99", [=](koloComm_t c, int) { return koloReduce(buf, buf, 4, koloFloat32, bad_op, 0, c, nullptr); }, "op"},
      {"Reduce root -1", [](koloComm_t c, int) { return koloReduce(buf, buf, 4, koloFloat32, koloSum, -1, c, nullptr); }, "root"},
      {"Reduce root nranks", [=](koloComm_t c, int) { return koloReduce(buf, buf, 4, koloFloat32, koloSum, nranks, c, nullptr); }, "root"},
      {"Reduce count SIZE_MAX/2", [=](koloComm_t c, int) { return koloReduce(buf, buf, huge, koloFloat32, koloSum, 0, c, nullptr); }, "count"},
      {"Send NULL sendbuff", [](koloComm_t c, int) { return koloSend(nullptr, 4, koloFloat32, 0, c, nullptr); }, "sendbuff"},
      {"Send datatype 99", [=](koloComm_t c, int) { return koloSend(buf, 4, bad_t, 0, c, nullptr); }, "datatype"},
      {"Send peer -1", [](koloComm_t c, int) { return koloSend(buf, 4, koloFloat32, -1, c, nullptr); }, "peer"},
      {"Send peer nranks", [=](koloComm_t c, int) { return koloSend(buf, 4, koloFloat32, nranks, c, nullptr); }, "peer"},
      {"Send count SIZE_MAX/2", [=](koloComm_t c, int) { return koloSend(buf, huge, koloFloat32, 0, c, nullptr); }, "count"},
      {"Recv NULL recvbuff", [](koloComm_t c, int) { return koloRecv(nullptr, 4, koloFloat32, 0, c, nullptr); }, "recvbuff"},
      {"Recv datatype 99", [=](koloComm_t c, int) { return koloRecv(buf, 4, bad_t, 0, c, nullptr); }, "datatype"},
      {"Recv peer -1", [](koloComm_t c, int) { return koloRecv(buf, 4, koloFloat32, -1, c, nullptr); }, "peer"},
      {"Recv peer nranks", [=](koloComm_t c, int) { return koloRecv(buf, 4, koloFloat32, nranks, c, nullptr); }, "peer"},
      {"Recv count SIZE_MAX/2", [=](koloComm_t c, int) { return koloRecv(buf, huge, koloFloat32, 0, c, nullptr); }, "count"},
      {"AlltoAll NULL sendbuff", [](koloComm_t c, int) { return koloAlltoAll(nullptr, buf, 1, koloFloat32, c, nullptr); }, "sendbuff"},
      {"AlltoAll NULL recvbuff", [](koloComm_t c, int) { return koloAlltoAll(buf, nullptr, 1, koloFloat32, c, nullptr); }, "recvbuff"},
      {"AlltoAll datatype 99", [=](koloComm_t c, int) { return koloAlltoAll(buf, buf + 32, 1, bad_t, c, nullptr); }, "datatype"},
      {"AlltoAll count SIZE_MAX/2", [=](koloComm_t c, int) { return koloAlltoAll(buf, buf + 32, huge, koloFloat32, c, nullptr); }, "count"},
      {"AlltoAll in place", [](koloComm_t c, int) { return koloAlltoAll(buf, buf, 4, koloFloat32, c, nullptr); }, "overlap"},
      {"AlltoAll overlapping", [](koloComm_t c, int) { return koloAlltoAll(buf, buf + 2, 4, koloFloat32, c, nullptr); }, "in-place"},
      {"Gather NULL sendbuff", [](koloComm_t c, int) { return koloGather(nullptr, buf, 4, koloFloat32, 0, c, nullptr); }, "sendbuff"},
      {"Gather NULL recvbuff on the root", [](koloComm_t c, int r) { return koloGather(buf, nullptr, 4, koloFloat32, r, c, nullptr); }, "recvbuff"},
      {"Gather datatype 99", [=](koloComm_t c, int) { return koloGather(buf, buf + 32, 4, bad_t, 0, c, nullptr); }, "datatype"},
      {"Gather root -1", [](koloComm_t c, int) { return koloGather(buf, buf + 32, 4, koloFloat32, -1, c, nullptr); }, "root"},
      {"Gather root nranks", [=](koloComm_t c, int) { return koloGather(buf, buf + 32, 4, koloFloat32, nranks, c, nullptr); }, "root"},
      {"Gather count SIZE_MAX/2", [=](koloComm_t c, int) { return koloGather(buf, buf + 32, huge, koloFloat32, 0, c, nullptr); }, "count"},
      {"Gather sendbuff inside recvbuff, off its block", [](koloComm_t c, int r) { return koloGather(buf + 1, buf, 4, koloFloat32, r, c, nullptr); }, "root*count"},
      {"Scatter NULL recvbuff", [](koloComm_t c, int) { return koloScatter(buf, nullptr, 4, koloFloat32, 0, c, nullptr); }, "recvbuff"},
      {"Scatter NULL sendbuff on the root", [](koloComm_t c, int r) { return koloScatter(nullptr, buf, 4, koloFloat32, r, c, nullptr); }, "sendbuff"},
      {"Scatter datatype 99", [=](koloComm_t c, int) { return koloScatter(buf, buf + 32, 4, bad_t, 0, c, nullptr); }, "datatype"},
      {"Scatter root -1", [](koloComm_t c, int) { return koloScatter(buf, buf + 32, 4, koloFloat32, -1, c, nullptr); }, "root"},
      {"Scatter root nranks", [=](koloComm_t c, int) { return koloScatter(buf, buf + 32, 4, koloFloat32, nranks, c, nullptr); }, "root"},
      {"Scatter count SIZE_MAX/2", [=](koloComm_t c, int) { return koloScatter(buf, buf + 32, huge, koloFloat32, 0, c, nullptr); }, "count"},
      {"Scatter recvbuff inside sendbuff, off its block", [](koloComm_t c, int r) { return koloScatter(buf, buf + 1, 4, koloFloat32, r, c, nullptr); }, "root*count"},
      {"Bcast NULL buff", [](koloComm_t c, int) { return koloBcast(nullptr, 4, koloFloat32, 0, c, nullptr); }, "buff"},
      {"Bcast datatype 99", [=](koloComm_t c, int) { return koloBcast(buf, 4, bad_t, 0, c, nullptr); }, "datatype"},
      {"Bcast root -1", [](koloComm_t c, int) { return koloBcast(buf, 4, koloFloat32, -1, c, nullptr); }, "root"},
      {"Bcast root nranks", [=](koloComm_t c, int) { return koloBcast(buf, 4, koloFloat32, nranks, c, nullptr); }, "root"},
      {"Bcast count SIZE_MAX/2", [=](koloComm_t c, int) { return koloBcast(buf, huge, koloFloat32, 0, c, nullptr); }, "count"},
  };
}

// A valid all-reduce on every rank (threads) succeeds and is right.
void expect_usable(ThreadWorld &w) {
  CollCase c;
  c.coll = Coll::AllReduce;
  c.nranks = w.nranks();
  c.count = 1001;
  seed_case(&c);
  Expected e;
  expected_for(c, &e);
  std::vector<std::string> errs((size_t)w.nranks());
  w.pool.run([&](int r) { errs[r] = run_rank(c, r, w.comms[r], e); });
  for (int r = 0; r < w.nranks(); r++) EXPECT_EQ(errs[r], "") << "rank " << r << " after the bad calls";
}

TEST(BadArguments, InvalidArgumentNamingTheArgument) {
  for (int n : {1, 2}) {
    ThreadWorld w(n, ThreadWorld::Init::kInitAll);
    ASSERT_TRUE(w.ok()) << w.init_error;
    for (const BadCall &b : bad_calls(n)) {
      for (int r = 0; r < n; r++) {  // each rank alone: no peer takes part
        double t0 = now_ms();
        koloResult_t res = b.call(w.comms[r], r);
        double ms = now_ms() - t0;
        EXPECT_EQ(res, koloInvalidArgument) << b.what << " (" << n << " ranks, rank " << r << ")";
        EXPECT_CONTAINS(koloGetLastError(w.comms[r]), b.must_name) << b.what;
        EXPECT_LT(ms, kt_ms(1000)) << b.what;
      }
    }
    expect_usable(w);
  }
}

TEST(BadArguments, NullCommunicator) {
  float buf[4] = {0};
  struct Call {
    const char *what;
    koloResult_t res;
  };
  std::vector<Call> calls = {
      {"koloAllReduce", koloAllReduce(buf, buf, 4, koloFloat32, koloSum, nullptr, nullptr)},
      {"koloReduceScatter", koloReduceScatter(buf, buf, 1, koloFloat32, koloSum, nullptr, nullptr)},
      {"koloAllGather", koloAllGather(buf, buf, 1, koloFloat32, nullptr, nullptr)},
      {"koloBroadcast", koloBroadcast(buf, buf, 4, koloFloat32, 0, nullptr, nullptr)},
      {"koloReduce", koloReduce(buf, buf, 4, koloFloat32, koloSum, 0, nullptr, nullptr)},
      {"koloSend", koloSend(buf, 4, koloFloat32, 0, nullptr, nullptr)},
      {"koloRecv", koloRecv(buf, 4, koloFloat32, 0, nullptr, nullptr)},
      {"koloAlltoAll", koloAlltoAll(buf, buf + 2, 1, koloFloat32, nullptr, nullptr)},
      {"koloGather", koloGather(buf, buf, 1, koloFloat32, 0, nullptr, nullptr)},
      {"koloScatter", koloScatter(buf, buf, 1, koloFloat32, 0, nullptr, nullptr)},
      {"koloBcast", koloBcast(buf, 4, koloFloat32, 0, nullptr, nullptr)},
  };
  for (const Call &c : calls) {
    EXPECT_EQ(c.res, koloInvalidArgument) << c.what;
  }
  // the thread's last error is the last call's
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm");
  int x;
  koloResult_t async;
  EXPECT_EQ(koloCommCount(nullptr, &x), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm");
  EXPECT_EQ(koloCommUserRank(nullptr, &x), koloInvalidArgument);
  EXPECT_EQ(koloCommGetAsyncError(nullptr, &async), koloInvalidArgument);
  EXPECT_EQ(koloCommDestroy(nullptr), koloInvalidArgument);
  EXPECT_EQ(koloCommFinalize(nullptr), koloInvalidArgument);
  EXPECT_EQ(koloCommAbort(nullptr), koloInvalidArgument);
  EXPECT_EQ(koloGetVersion(nullptr), koloInvalidArgument);
  EXPECT_EQ(koloGetUniqueId(nullptr), koloInvalidArgument);
  EXPECT_EQ(koloCommInitRank(nullptr, 1, koloUniqueId{}, 0), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm");
}

// NCCL's rules: broadcast and scatter read sendbuff on the root only, reduce
// and gather write recvbuff on the root only, so NULL is fine elsewhere.
TEST(BadArguments, NullWhereTheApiAllowsIt) {
  const int n = 3;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    std::vector<int32_t> x(100, r + 1), y(100, -1);
    koloResult_t res = koloBroadcast(r == 1 ? x.data() : nullptr, y.data(), 100, koloInt32, 1, w.comms[r], nullptr);
    if (res != koloSuccess) {
      errs[r] = result_text("koloBroadcast", res, w.comms[r]);
      return;
    }
    for (int v : y)
      if (v != 2) errs[r] = "broadcast from rank 1 gave " + std::to_string(v);
    std::vector<int32_t> z(100, -1);
    res = koloReduce(x.data(), r == 2 ? z.data() : nullptr, 100, koloInt32, koloSum, 2, w.comms[r], nullptr);
    if (res != koloSuccess) {
      errs[r] = result_text("koloReduce", res, w.comms[r]);
      return;
    }
    if (r == 2)
      for (int v : z)
        if (v != 1 + 2 + 3) errs[r] = "reduce to rank 2 gave " + std::to_string(v);
    // gather writes recvbuff on the root only, scatter reads sendbuff there only
    std::vector<int32_t> all(300, -1);
    res = koloGather(x.data(), r == 0 ? all.data() : nullptr, 100, koloInt32, 0, w.comms[r], nullptr);
    if (res != koloSuccess) {
      errs[r] = result_text("koloGather", res, w.comms[r]);
      return;
    }
    for (size_t i = 0; r == 0 && i < all.size(); i++)
      if (all[i] != (int)(i / 100) + 1) errs[r] = "gather to rank 0 gave " + std::to_string(all[i]) + " at " + std::to_string(i);
    for (size_t i = 0; i < all.size(); i++) all[i] = (int32_t)i;
    res = koloScatter(r == 1 ? all.data() : nullptr, y.data(), 100, koloInt32, 1, w.comms[r], nullptr);
    if (res != koloSuccess) {
      errs[r] = result_text("koloScatter", res, w.comms[r]);
      return;
    }
    for (size_t i = 0; i < y.size(); i++)
      if (y[i] != (int32_t)(r * 100 + i)) errs[r] = "scatter from rank 1 gave " + std::to_string(y[i]);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
}

TEST(BadArguments, GroupEndWithoutStart) {
  double t0 = now_ms();
  EXPECT_EQ(koloGroupEnd(), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "koloGroupStart");
  // a balanced group still works afterwards, and nesting counts
  EXPECT_EQ(koloGroupStart(), koloSuccess);
  EXPECT_EQ(koloGroupStart(), koloSuccess);
  EXPECT_EQ(koloGroupEnd(), koloSuccess);
  EXPECT_EQ(koloGroupEnd(), koloSuccess);
  EXPECT_EQ(koloGroupEnd(), koloInvalidUsage);
  EXPECT_LT(now_ms() - t0, kt_ms(1000));
}

// A bad call inside a group fails at once, and the rest of the group (and
// the communicator) still works.
TEST(BadArguments, BadCallInsideGroup) {
  const int n = 2;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs((size_t)n);
  std::vector<koloResult_t> bad((size_t)n), end((size_t)n);
  w.pool.run([&](int r) {
    std::vector<float> x(64, 1.0f);
    koloGroupStart();
    bad[r] = koloAllReduce(x.data(), x.data(), 64, (koloDataType_t)99, koloSum, w.comms[r], nullptr);
    koloResult_t ok = koloAllReduce(x.data(), x.data(), 64, koloFloat32, koloSum, w.comms[r], nullptr);
    end[r] = koloGroupEnd();
    if (ok != koloSuccess) errs[r] = result_text("valid call in the group", ok, w.comms[r]);
    else if (end[r] == koloSuccess && x[0] != 2.0f) errs[r] = "valid call in the group gave " + std::to_string(x[0]);
  });
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(bad[r], koloInvalidArgument);
    EXPECT_EQ(errs[r], "") << "rank " << r;
    EXPECT_TRUE(end[r] == koloSuccess || end[r] == koloInvalidArgument) << koloGetErrorString(end[r]);
  }
  expect_usable(w);
}

// ---- bad init ------------------------------------------------------------------

TEST(BadInit, ConfigWithBadMagicOrSize) {
  koloComm_t comms[2] = {nullptr, nullptr};
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678;
  double t0 = now_ms();
  EXPECT_EQ(koloCommInitAllConfig(comms, 2, nullptr, &cfg), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "magic");
  EXPECT_EQ(comms[0], nullptr);
  EXPECT_EQ(comms[1], nullptr);
  cfg = KOLO_CONFIG_INITIALIZER;
  cfg.size = 4;
  EXPECT_EQ(koloCommInitAllConfig(comms, 1, nullptr, &cfg), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "config");
  cfg = KOLO_CONFIG_INITIALIZER;
  cfg.magic = 0;
  koloUniqueId id;
  ASSERT_EQ(koloGetUniqueId(&id), koloSuccess);
  koloComm_t c = nullptr;
  EXPECT_EQ(koloCommInitRankConfig(&c, 1, id, 0, &cfg), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "magic");
  EXPECT_EQ(c, nullptr);
  // other out-of-range fields
  cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = -5;
  EXPECT_EQ(koloCommInitAllConfig(comms, 1, nullptr, &cfg), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "timeoutMs");
  cfg = KOLO_CONFIG_INITIALIZER;
  cfg.nChannels = 0;
  EXPECT_EQ(koloCommInitAllConfig(comms, 1, nullptr, &cfg), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "nChannels");
  EXPECT_LT(now_ms() - t0, kBoundMs);
}

TEST(BadInit, RankOrSizeOutOfRange) {
  koloUniqueId id;
  ASSERT_EQ(koloGetUniqueId(&id), koloSuccess);
  koloComm_t c = nullptr;
  double t0 = now_ms();
  EXPECT_EQ(koloCommInitRank(&c, 2, id, 2), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "rank 2");
  EXPECT_EQ(koloCommInitRank(&c, 2, id, -1), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "rank -1");
  EXPECT_EQ(koloCommInitRank(&c, 0, id, 0), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "nranks");
  EXPECT_EQ(c, nullptr);
  koloComm_t comms[1];
  EXPECT_EQ(koloCommInitAll(comms, 0, nullptr), koloInvalidArgument);
  EXPECT_EQ(koloCommInitAll(nullptr, 2, nullptr), koloInvalidArgument);
  koloUniqueId garbage;
  std::memset(&garbage, 0x42, sizeof garbage);
  EXPECT_EQ(koloCommInitRank(&c, 1, garbage, 0), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "unique id");
  EXPECT_LT(now_ms() - t0, kBoundMs);
}

// ---- ranks that fail: threads -------------------------------------------------------

// Threads: rank 1 never calls; rank 0's all-reduce times out naming rank 1.
TEST(FailingRanks, PeerNeverCallsTimesOut) {
  koloConfig_t cfg = timeout_config(kTimeoutMs);
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<float> x(1 << 16, 1.0f);
  double t0 = now_ms();
  koloResult_t rc = koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, w.comms[0], nullptr);
  double ms = now_ms() - t0;
  EXPECT_EQ(rc, koloTimeout) << koloGetLastError(w.comms[0]);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "rank 1");
  EXPECT_GE(ms, kTimeoutMs * 0.9);
  EXPECT_LT(ms, kBoundMs);
}

// Threads: rank 1 waits in an all-reduce; rank 0 calls koloCommAbort: rank
// 1's call returns an error naming rank 0 well before its timeout.  With 3
// ranks, ranks 1 and 2 both wait.
TEST(FailingRanks, AbortWakesWaitingPeers) {
  for (int n : {2, 3}) {
    const int timeout = 10000;
    koloConfig_t cfg = timeout_config(timeout);
    ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    std::vector<koloResult_t> rc((size_t)n, koloSuccess);
    std::vector<std::string> text((size_t)n);
    std::vector<double> done_at((size_t)n, 0);
    double abort_at = 0;
    const uint64_t arrived = kt_slices_in(w.comms[0]);
    w.pool.run([&](int r) {
      if (r == 0) {
        // Aborts once a peer is inside its all-reduce (its slices reach rank 0).
        EXPECT_TRUE(kt_wait_slices_in(w.comms[0], arrived, kt_ms(5000))) << "no peer entered the all-reduce";
        abort_at = now_ms();
        rc[0] = koloCommAbort(w.comms[0]);
        w.comms[0] = nullptr;  // freed by the abort
        return;
      }
      std::vector<float> x(1 << 20, 1.0f);
      rc[r] = koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, w.comms[r], nullptr);
      done_at[r] = now_ms();
      text[r] = koloGetLastError(w.comms[r]);
    });
    EXPECT_EQ(rc[0], koloSuccess);
    for (int r = 1; r < n; r++) {
      EXPECT_TRUE(rc[r] == koloRemoteError || rc[r] == koloTimeout) << koloGetErrorString(rc[r]);
      EXPECT_CONTAINS(text[r], "rank 0") << n << " ranks, rank " << r;
      double ms = done_at[r] - abort_at;
      EXPECT_LT(ms, kt_ms(3000)) << n << " ranks, rank " << r << " returned " << ms << " ms after the abort: " << text[r];
      std::printf("  %d ranks: rank %d: %s %.0f ms after the abort: %s\n", n, r, koloGetErrorString(rc[r]), ms,
                  text[r].c_str());
    }
  }
}


// ---- NCCL 2.28 calls: bad input ------------------------------------------------------

// Result codes: 8 is NCCL's ncclNumResults, never kolo's; kolo's codes
// start at 9, and every one has its own string.
static_assert(koloTimeout == 9 && koloNumResults == 10, "the ABI: koloTimeout 9, koloNumResults 10");
TEST(ResultCodes, EightIsReservedEveryCodeNamed) {
  EXPECT_CONTAINS(koloGetErrorString((koloResult_t)8), "reserved");
  EXPECT_CONTAINS(koloGetErrorString(koloTimeout), "koloTimeout");
  std::set<std::string> seen;
  for (int r = 0; r < koloNumResults; r++) {
    if (r == 8) continue;
    std::string text = koloGetErrorString((koloResult_t)r);
    EXPECT_EQ(text.find("unknown"), std::string::npos) << r;
    EXPECT_TRUE(seen.insert(text).second) << r << ": " << text;
  }
  EXPECT_CONTAINS(koloGetErrorString(koloNumResults), "unknown");
}

// Registration: every bad handle gets its own sentence, and the
// communicator's registrations are gone once it is destroyed.
TEST(BadRegistration, HandlesOfOthersTwiceOrNone) {
  ThreadWorld a(1), b(1);
  ASSERT_TRUE(a.ok() && b.ok()) << a.init_error << b.init_error;
  koloComm_t ca = a.comms[0], cb = b.comms[0];
  std::vector<float> buf(1024);
  void *h = nullptr, *h2 = nullptr;
  EXPECT_EQ(koloCommRegister(nullptr, buf.data(), 4096, &h), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm is NULL");
  EXPECT_EQ(koloCommRegister(ca, nullptr, 4096, &h), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "buff is NULL");
  EXPECT_EQ(koloCommRegister(ca, buf.data(), 4096, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "handle is NULL");
  ASSERT_EQ(koloCommRegister(ca, buf.data(), 4096, &h), koloSuccess) << koloGetLastError(ca);
  ASSERT_EQ(koloCommRegister(ca, buf.data() + 16, 64, &h2), koloSuccess);  // overlapping: allowed
  EXPECT_EQ(kt_reg_count(ca), 2);
  EXPECT_EQ(koloCommDeregister(cb, h), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(cb), "belongs to another communicator");
  EXPECT_EQ(koloCommDeregister(ca, h), koloSuccess);
  EXPECT_EQ(koloCommDeregister(ca, h), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "deregistered already");
  EXPECT_EQ(koloCommDeregister(ca, buf.data()), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "not a registration");
  EXPECT_EQ(koloCommDeregister(ca, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "handle is NULL");
  koloWindow_t win = nullptr;
  ASSERT_EQ(koloCommWindowRegister(ca, buf.data(), 4096, &win, KOLO_WIN_DEFAULT), koloSuccess);
  EXPECT_EQ(koloCommDeregister(ca, (void *)win), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "koloCommWindowDeregister");
  EXPECT_EQ(koloCommWindowDeregister(ca, (koloWindow_t)h2), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "koloCommDeregister");
  EXPECT_EQ(koloCommWindowRegister(ca, buf.data(), 4096, &win, 0x4), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "winFlags");
  EXPECT_EQ(koloCommWindowRegister(ca, buf.data(), 4096, &win, KOLO_WIN_COLL_SYMMETRIC), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(ca), "koloMemAlloc");
  EXPECT_EQ(kt_reg_count(ca), 2);  // h2 and the window
  // destroy releases them: h2 is then nobody's
  koloCommDestroy(a.comms[0]);
  a.comms[0] = nullptr;
  EXPECT_EQ(koloCommDeregister(cb, h2), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(cb), "not a registration of any communicator");
}

// koloMemAlloc / koloMemFree: bad arguments, a stray or inner pointer, a
// double free; a window over memory of one koloMemAlloc block is accepted
// with KOLO_WIN_COLL_SYMMETRIC (host memory here: no GPU in this process).
TEST(BadMemAlloc, NullZeroStrayAndTwice) {
  void *p = nullptr;
  EXPECT_EQ(koloMemAlloc(nullptr, 64), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "ptr is NULL");
  EXPECT_EQ(koloMemAlloc(&p, 0), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "size is 0");
  ASSERT_EQ(koloMemAlloc(&p, 10000), koloSuccess) << koloGetLastError(nullptr);
  int dev = kt_mem_device(p, 10000);
  ASSERT_GE(dev, -1);
  EXPECT_EQ(kt_mem_device(p, 10001), -2);
  EXPECT_EQ(koloMemFree((char *)p + 8), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "not its start");
  int local = 0;
  EXPECT_EQ(koloMemFree(&local), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "not returned by koloMemAlloc");
  if (dev < 0) {  // host memory: page-aligned, zeroed, registrable as a symmetric window
    EXPECT_EQ((uintptr_t)p % 4096, 0u);
    for (int i = 0; i < 10000; i++) ASSERT_EQ(((unsigned char *)p)[i], 0) << i;
    ThreadWorld w(1);
    ASSERT_TRUE(w.ok()) << w.init_error;
    koloWindow_t win = nullptr;
    EXPECT_EQ(koloCommWindowRegister(w.comms[0], (char *)p + 4096, 4096, &win, KOLO_WIN_COLL_SYMMETRIC), koloSuccess)
        << koloGetLastError(w.comms[0]);
    EXPECT_EQ(koloCommWindowDeregister(w.comms[0], win), koloSuccess);
  }
  EXPECT_EQ(koloMemFree(p), koloSuccess);
  EXPECT_EQ(koloMemFree(p), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "freed already");
  EXPECT_EQ(koloMemFree(nullptr), koloSuccess);
}

// koloCommCuDevice on a host communicator: -1 and koloInvalidUsage (NCCL
// has no host communicators); NULL arguments.
TEST(BadQueries, CuDeviceOfAHostCommunicator) {
  ThreadWorld w(1);
  ASSERT_TRUE(w.ok()) << w.init_error;
  int dev = 5;
  EXPECT_EQ(koloCommCuDevice(w.comms[0], &dev), koloInvalidUsage);
  EXPECT_EQ(dev, -1);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "host communicator");
  EXPECT_EQ(koloCommCuDevice(w.comms[0], nullptr), koloInvalidArgument);
  EXPECT_EQ(koloCommCuDevice(nullptr, &dev), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm is NULL");
}

TEST(BadRevoke, FlagsAndNull) {
  ThreadWorld w(1);
  ASSERT_TRUE(w.ok()) << w.init_error;
  EXPECT_EQ(koloCommRevoke(nullptr, 0), koloInvalidArgument);
  EXPECT_EQ(koloCommRevoke(w.comms[0], 1), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "revokeFlags");
  float x = 2;  // not revoked by the refused call
  EXPECT_EQ(koloAllReduce(&x, &x, 1, koloFloat32, koloSum, w.comms[0], nullptr), koloSuccess);
}

// koloCommShrink: each bad argument named; the parent stays usable.
TEST(BadShrink, ListFlagsAndNull) {
  ThreadWorld w(3);
  ASSERT_TRUE(w.ok()) << w.init_error;
  koloComm_t c = w.comms[0], out = nullptr;
  struct Bad {
    std::vector<int> list;
    int count, flags;
    const char *names;
  };
  std::vector<Bad> bad = {
      {{1}, 1, 0x4, "shrinkFlags"},         {{}, 1, 0, "excludeRanksList NULL"},
      {{1, 2, 1}, 3, 0, "excludeRanksCount"}, {{3}, 1, 0, "excludeRanksList[0] = 3"},
      {{-1}, 1, 0, "outside 0..2"},           {{2, 2}, 2, 0, "twice"},
      {{0}, 1, 0, "excludes itself"},         {{1}, -1, 0, "excludeRanksCount = -1"},
  };
  for (Bad &b : bad) {
    int *list = b.list.empty() ? nullptr : b.list.data();
    EXPECT_EQ(koloCommShrink(c, list, b.count, &out, nullptr, b.flags), koloInvalidArgument) << b.names;
    EXPECT_CONTAINS(koloGetLastError(c), b.names);
  }
  EXPECT_EQ(koloCommShrink(nullptr, nullptr, 0, &out, nullptr, 0), koloInvalidArgument);
  EXPECT_EQ(koloCommShrink(c, nullptr, 0, nullptr, nullptr, 0), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "newcomm is NULL");
  expect_usable(w);
}

// koloCommInitRankScalable: the ids and their count checked before anything
// connects.
TEST(BadInit, ScalableIds) {
  koloUniqueId ids[3];
  for (koloUniqueId &id : ids) ASSERT_EQ(koloGetUniqueId(&id), koloSuccess);
  koloComm_t c = nullptr;
  EXPECT_EQ(koloCommInitRankScalable(&c, 4, 0, 0, ids, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "nId = 0");
  EXPECT_EQ(koloCommInitRankScalable(&c, 2, 0, 3, ids, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "outside 1..nranks (2)");
  EXPECT_EQ(koloCommInitRankScalable(&c, 4, 0, 2, nullptr, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "commIds is NULL");
  EXPECT_EQ(koloCommInitRankScalable(&c, 4, 4, 2, ids, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "rank 4");
  koloUniqueId dup[2] = {ids[0], ids[0]};
  EXPECT_EQ(koloCommInitRankScalable(&c, 4, 0, 2, dup, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "commIds[0] and commIds[1] are the same id");
  koloUniqueId garbage[2] = {ids[1], {}};
  std::memset(&garbage[1], 0x42, sizeof garbage[1]);
  EXPECT_EQ(koloCommInitRankScalable(&c, 4, 0, 2, garbage, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "commIds[1]");
  EXPECT_EQ(c, nullptr);
}

// Each block of ranks really meets at its own root: with the root of
// commIds[1] not there (an id for a port nobody listens on), rank 1 cannot
// join, naming that root, and rank 0 hears that the root of commIds[1] never
// forwarded its block; both within the bound.  (An init that met at
// commIds[0] only would succeed here.)
TEST(FailingInit, ScalableRootOfABlockIsDown) {
  ScopedTimeoutEnv env(kTimeoutMs);
  koloUniqueId ids[2];
  ASSERT_EQ(koloGetUniqueId(&ids[0]), koloSuccess);
  kolo_uid dead;
  ASSERT_EQ(kolo_uid_decode(&ids[0], &dead, nullptr), koloSuccess);
  int port = kt_free_port();
  ASSERT_GT(port, 0);
  sockaddr_in *a = reinterpret_cast<sockaddr_in *>(&dead.root);
  std::memset(&dead.root, 0, sizeof dead.root);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a->sin_port = htons((uint16_t)port);
  kolo_uid_encode(&dead, &ids[1]);
  std::vector<koloResult_t> rc(2, koloSuccess);
  std::vector<std::string> text(2);
  std::vector<double> ms(2, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; r++)
    ranks.emplace_back([&, r] {
      koloConfig_t cfg = timeout_config(kTimeoutMs);
      koloComm_t c = nullptr;
      double t0 = now_ms();
      rc[r] = koloCommInitRankScalable(&c, 2, r, 2, ids, &cfg);
      ms[r] = now_ms() - t0;
      text[r] = koloGetLastError(nullptr);
      if (rc[r] == koloSuccess) koloCommDestroy(c);
    });
  for (std::thread &t : ranks) t.join();
  EXPECT_EQ(rc[1], koloTimeout) << text[1];
  EXPECT_CONTAINS(text[1], "root 127.0.0.1:" + std::to_string(port) + " did not answer");
  EXPECT_EQ(rc[0], koloTimeout) << text[0];
  EXPECT_CONTAINS(text[0], "the root of commIds 1 did not forward its ranks");
  for (int r = 0; r < 2; r++) EXPECT_LT(ms[r], kBoundMs) << "rank " << r << ": " << text[r];
}

// Groups: init and other calls do not mix (NCCL's rule); the init's handle
// then says why it was not run, and must still be destroyed.
TEST(BadGroups, InitsAndCallsDoNotMix) {
  ThreadWorld w(1);
  ASSERT_TRUE(w.ok()) << w.init_error;
  koloUniqueId id;
  ASSERT_EQ(koloGetUniqueId(&id), koloSuccess);
  koloComm_t c = nullptr;
  float x = 1;
  koloGroupStart();
  EXPECT_EQ(koloCommInitRank(&c, 1, id, 0), koloSuccess);
  EXPECT_EQ(koloAllReduce(&x, &x, 1, koloFloat32, koloSum, w.comms[0], nullptr), koloSuccess);
  EXPECT_EQ(koloGroupEnd(), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "either communicator inits or other calls");
  ASSERT_NE(c, nullptr);
  koloResult_t async = koloSuccess;
  EXPECT_EQ(koloCommGetAsyncError(c, &async), koloSuccess);
  EXPECT_EQ(async, koloInvalidUsage);
  EXPECT_EQ(koloAllReduce(&x, &x, 1, koloFloat32, koloSum, c, nullptr), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "init failed");
  EXPECT_EQ(koloCommDestroy(c), koloSuccess);
  expect_usable(w);
}

// koloGroupSimulateEnd: a simInfo not from KOLO_SIM_INFO_INITIALIZER, NULL,
// no group; the refused call leaves the group open.
TEST(BadGroups, SimulateEndArguments) {
  koloSimInfo_t info = KOLO_SIM_INFO_INITIALIZER;
  EXPECT_EQ(koloGroupSimulateEnd(&info), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "koloGroupStart");
  koloGroupStart();
  EXPECT_EQ(koloGroupSimulateEnd(nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "simInfo is NULL");
  info.magic = 0;
  EXPECT_EQ(koloGroupSimulateEnd(&info), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "KOLO_SIM_INFO_INITIALIZER");
  info = KOLO_SIM_INFO_INITIALIZER;
  EXPECT_EQ(koloGroupSimulateEnd(&info), koloSuccess);  // the group was still open
  EXPECT_EQ(info.estimatedTime, 0.0f);                  // and empty
}

// ---- logging ---------------------------------------------------------------------

std::string read_text(const std::string &path) {
  std::string s;
  if (FILE *f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

// KOLO_DEBUG=INFO with KOLO_DEBUG_FILE (%p: one file per process): each of 2
// processes logs its channels, slot sizes and the transport of every pipe
// (shared memory between processes), and a rejected call's sentence.
TEST(Logging, InfoNamesTransportsChannelsAndFailures) {
  char dir[] = "/tmp/kolo-log-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pattern = std::string(dir) + "/rank-%p.log";
  std::vector<pid_t> pids;
  std::vector<ChildResult> res = run_children_with_id(2, [&](int rank, const koloUniqueId &id) {
    setenv("KOLO_DEBUG", "INFO", 1);
    setenv("KOLO_DEBUG_FILE", pattern.c_str(), 1);
    koloComm_t comm = nullptr;
    if (koloCommInitRank(&comm, 2, id, rank) != koloSuccess) return 2;
    float x[4] = {1, 2, 3, 4};
    int bad = koloAllReduce(nullptr, x, 4, koloFloat32, koloSum, comm, nullptr) == koloInvalidArgument;
    int good = koloAllReduce(x, x, 4, koloFloat32, koloSum, comm, nullptr) == koloSuccess;
    koloCommDestroy(comm);
    return bad && good ? 0 : 1;
  }, 60000, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_EQ(children_failures(res), "");
  for (size_t r = 0; r < pids.size(); r++) {
    std::string path = std::string(dir) + "/rank-" + std::to_string(pids[r]) + ".log";
    std::string log = read_text(path);
    int peer = 1 - (int)r;
    EXPECT_CONTAINS(log, "channel(s)");
    EXPECT_CONTAINS(log, "slots of");
    EXPECT_CONTAINS(log, "pipe from rank " + std::to_string(peer));
    EXPECT_CONTAINS(log, "over shm");
    EXPECT_CONTAINS(log, "sendbuff");
    if (::testing::Test::HasFailure()) std::fprintf(stderr, "%s:\n%s", path.c_str(), log.c_str());
    unlink(path.c_str());
  }
  rmdir(dir);
}

// koloResetDebugInit reads KOLO_DEBUG_FILE again: lines logged after it
// go to the new file.
TEST(Logging, ResetDebugInitRereadsTheEnvironment) {
  char dir[] = "/tmp/kolo-reset-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/after.log";
  {
    ScopedEnv level("KOLO_DEBUG", "WARN");
    ScopedEnv file("KOLO_DEBUG_FILE", path);
    koloResetDebugInit();
    EXPECT_EQ(koloAllReduce(nullptr, nullptr, 4, koloFloat32, koloSum, nullptr, nullptr), koloInvalidArgument);
  }
  koloResetDebugInit();  // back to the test's own settings
  EXPECT_EQ(koloAllReduce(nullptr, nullptr, 4, koloFloat32, koloSum, nullptr, nullptr), koloInvalidArgument);
  std::string log = read_text(path);
  EXPECT_CONTAINS(log, "koloAllReduce: comm is NULL");
  EXPECT_EQ(log.find("comm is NULL"), log.rfind("comm is NULL")) << "logged to the file after the second reset:\n"
                                                                   << log;
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
