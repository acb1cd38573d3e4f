// test_mismatch.cc - calls that do not match, and the stall warning, on host
// communicators.
//
//  - Three ranks; ranks 0 and 1 make one call, rank 2 one that differs in
//    count, dtype, op, root or collective: every rank fails with
//    koloInvalidUsage and a sentence naming rank 2 and both calls, in bounded
//    time (the timeout is far longer, so it is not what ends the wait);
//    koloCommDestroy / koloCommAbort afterwards leave nothing behind.  As
//    threads (local pipes), as processes (shared memory) and as processes
//    on "hosts" of their own (KOLO_HOSTID: net pipes over TCP, whose proxy
//    carries signatures and reports on its control channel).
//  - A send and a recv of different counts; a mismatch in the second call of
//    a group; matching calls in a group still succeed.
//  - A rank whose point-to-point pipes have other slots (KOLO_P2P_BUFFSIZE):
//    its pipes are refused at connect, with a sentence naming the variable.
//  - KOLO_STALL_WARN_S=1: a rank whose peer never calls logs, at WARN, the
//    call and the missing rank, before its timeout error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "util/coll_run.h"
#include "util/expect_text.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

constexpr int kTimeoutMs = 30000;   // far more than a mismatch may take
constexpr double kBoundMs = 10000;  // a mismatch's time to error, at most
// Elements of a call: more than a pipe's slots hold, so that no rank's part
// can finish by sending alone before the mismatch stops it (a broadcast's
// root sends into two ranks' slots, 2 x 4 MiB per channel, 2 channels).
constexpr size_t kCount = (size_t)8 << 20;

enum Kind { kAllReduce, kBroadcast };

struct Call {
  Kind kind;
  size_t count;
  koloDataType_t type;
  koloRedOp_t op;
  int root;
};

struct Case {
  const char *name;
  Call base, odd;       // ranks 0 and 1 call base, rank 2 odd
  const char *odd_text, *base_text;  // how the sentence describes them
};

const Call kBase = {kAllReduce, kCount, koloFloat32, koloSum, 0};

std::vector<Case> cases() {
  Call count = kBase, dtype = kBase, op = kBase, kind = kBase;
  count.count = kCount - 100;
  dtype.type = koloFloat64;
  op.op = koloMax;
  kind.kind = kBroadcast;
  Call bcast = {kBroadcast, kCount, koloFloat32, koloSum, 0}, root = bcast;
  root.root = 1;
  return {
      {"count", kBase, count, "rank 2 called AllReduce(count=8388508, float32, sum) #2",
       "AllReduce(count=8388608, float32, sum) #2"},
      {"dtype", kBase, dtype, "rank 2 called AllReduce(count=8388608, float64, sum) #2",
       "AllReduce(count=8388608, float32, sum) #2"},
      {"op", kBase, op, "rank 2 called AllReduce(count=8388608, float32, max) #2",
       "AllReduce(count=8388608, float32, sum) #2"},
      {"root", bcast, root, "rank 2 called Broadcast(count=8388608, float32, root=1) #2",
       "Broadcast(count=8388608, float32, root=0) #2"},
      {"collective", kBase, kind, "rank 2 called Broadcast(count=8388608, float32, root=0) #2",
       "AllReduce(count=8388608, float32, sum) #2"},
  };
}

koloConfig_t long_timeout() {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = kTimeoutMs;
  return cfg;
}

// A warm-up all-reduce (call #1: every pipe connected), then `c`.
koloResult_t warm_up(koloComm_t comm, int nranks) {
  float one = 1, sum = 0;
  koloResult_t rc = koloAllReduce(&one, &sum, 1, koloFloat32, koloSum, comm, nullptr);
  return rc == koloSuccess && sum != (float)nranks ? koloInternalError : rc;
}

koloResult_t issue(const Call &c, koloComm_t comm, std::vector<double> &buf) {
  if (buf.size() < c.count) buf.resize(c.count, 1.0);
  if (c.kind == kBroadcast)
    return koloBroadcast(buf.data(), buf.data(), c.count, c.type, c.root, comm, nullptr);
  return koloAllReduce(buf.data(), buf.data(), c.count, c.type, c.op, comm, nullptr);
}

// What one rank saw.
struct Outcome {
  koloResult_t rc = koloSuccess;
  double ms = 0;
  std::string text;
};

void expect_mismatch(const Case &k, int rank, const Outcome &o) {
  EXPECT_EQ(o.rc, koloInvalidUsage) << k.name << ", rank " << rank << ": " << o.text;
  EXPECT_CONTAINS(o.text, "calls do not match") << k.name << ", rank " << rank;
  EXPECT_CONTAINS(o.text, k.odd_text) << k.name << ", rank " << rank;
  EXPECT_CONTAINS(o.text, k.base_text) << k.name << ", rank " << rank;
  EXPECT_LT(o.ms, kBoundMs) << k.name << ", rank " << rank << ": " << o.text;
  std::printf("  %s: rank %d after %.0f ms: %s\n", k.name, rank, o.ms, o.text.c_str());
}

Outcome run_rank(const Case &k, int rank, koloComm_t comm) {
  Outcome o;
  std::vector<double> buf;
  o.rc = warm_up(comm, 3);
  if (o.rc != koloSuccess) {
    o.text = std::string("warm-up: ") + koloGetLastError(comm);
    return o;
  }
  double t0 = now_ms();
  o.rc = issue(rank == 2 ? k.odd : k.base, comm, buf);
  o.ms = now_ms() - t0;
  o.text = koloGetLastError(comm);
  return o;
}

// ---- processes (shared memory) first: they fork before this process has
// communicators of its own ----------------------------------------------------

// Outcome printed by a child, read back by the parent.
Outcome parse_outcome(const std::string &out, size_t at) {
  Outcome o;
  char *end = nullptr;
  o.rc = (koloResult_t)std::strtol(out.c_str() + at + 7, &end, 10);
  o.ms = std::strtod(end, &end);
  o.text = std::string(end + 1, out.find('\n', at) - (size_t)(end + 1 - out.c_str()));
  return o;
}

// Case k with 3 ranks as processes; host_of: each rank's KOLO_HOSTID
// (ranks on different "hosts" talk through the net transport: TCP and the
// proxy), empty: one host (shared memory).
void run_procs(const Case &k, const std::vector<std::string> &host_of) {
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  auto res = run_children_with_id(3, [&](int rank, const koloUniqueId &id) {
    if (!host_of.empty()) {
      setenv("KOLO_HOSTID", host_of[(size_t)rank].c_str(), 1);
      setenv("KOLO_NET", "socket", 1);
    }
    koloConfig_t cfg = long_timeout();
    koloComm_t comm;
    if (koloCommInitRankConfig(&comm, 3, id, rank, &cfg) != koloSuccess) return 2;
    Outcome o = run_rank(k, rank, comm);
    std::fprintf(stderr, "RESULT %d %.1f %s\n", (int)o.rc, o.ms, o.text.c_str());
    // after the failure: rank 0 aborts, the others destroy
    koloResult_t end = rank == 0 ? koloCommAbort(comm) : koloCommDestroy(comm);
    return end == koloSuccess ? 0 : 5;
  }, 120000, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_EQ(children_failures(res), "") << k.name;
  for (int r = 0; r < 3; r++) {
    const std::string &out = res[(size_t)r].output;
    size_t at = out.find("RESULT ");
    ASSERT_NE(at, std::string::npos) << k.name << ": rank " << r << ": " << res[(size_t)r].describe();
    expect_mismatch(k, r, parse_outcome(out, at));
  }
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << k.name << ": left in /dev/shm: " << ::testing::PrintToString(leaks);
}

TEST(MismatchProcs, EveryKindFailsEveryRank) {
  if (tsan_build()) GTEST_SKIP() << "TSan cannot follow fork() from a process with threads";
  for (const Case &k : cases()) run_procs(k, {});
}

// Every rank on a host of its own: every pipe is a net pipe, whose proxy
// carries the signatures and the report over TCP.
// Rank 2's point-to-point pipes have 8 KiB slots, the others' 128 KiB: the
// first pipe between them (at init for the latency algorithms' pipes, else
// at the first send) fails on both ends, naming KOLO_P2P_BUFFSIZE, in
// bounded time; every rank fails, and nothing is left in /dev/shm.
TEST(MismatchProcs, PointToPointSlotsThatDifferAreNamed) {
  if (tsan_build()) GTEST_SKIP() << "TSan cannot follow fork() from a process with threads";
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  auto res = run_children_with_id(3, [&](int rank, const koloUniqueId &id) {
    if (rank == 2) setenv("KOLO_P2P_BUFFSIZE", "65536", 1);
    koloConfig_t cfg = long_timeout();
    koloComm_t comm = nullptr;
    double t0 = now_ms();
    koloResult_t rc = koloCommInitRankConfig(&comm, 3, id, rank, &cfg);
    std::string text = rc == koloSuccess ? "" : koloGetLastError(nullptr);
    if (rc == koloSuccess) {
      std::vector<float> out(1000, 1.0f), in(1000);
      koloGroupStart();
      koloSend(out.data(), out.size(), koloFloat32, (rank + 1) % 3, comm, nullptr);
      koloRecv(in.data(), in.size(), koloFloat32, (rank + 2) % 3, comm, nullptr);
      rc = koloGroupEnd();
      text = koloGetLastError(comm);
    }
    std::fprintf(stderr, "RESULT %d %.1f %s\n", (int)rc, now_ms() - t0, text.c_str());
    if (comm) koloCommAbort(comm);
    return 0;
  }, 120000, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_EQ(children_failures(res), "");
  int named = 0;
  for (int r = 0; r < 3; r++) {
    const std::string &out = res[(size_t)r].output;
    size_t at = out.find("RESULT ");
    ASSERT_NE(at, std::string::npos) << "rank " << r << ": " << res[(size_t)r].describe();
    Outcome o = parse_outcome(out, at);
    EXPECT_NE(o.rc, koloSuccess) << "rank " << r;
    EXPECT_LT(o.ms, kBoundMs) << "rank " << r << ": " << o.text;
    named += o.text.find("KOLO_P2P_BUFFSIZE") != std::string::npos;
    std::printf("  rank %d after %.0f ms: %s\n", r, o.ms, o.text.c_str());
  }
  EXPECT_GE(named, 2) << "both ends of a refused pipe say why";
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm: " << ::testing::PrintToString(leaks);
}

TEST(MismatchHosts, EveryKindFailsEveryRankOverTcp) {
  if (tsan_build()) GTEST_SKIP() << "TSan cannot follow fork() from a process with threads";
  for (const Case &k : cases()) run_procs(k, {"host-a", "host-b", "host-c"});
}

// Ranks 0 and 2 share a host, rank 1 is alone: shared-memory and net pipes
// in one ring; the report crosses both kinds.
TEST(MismatchHosts, SharedMemoryAndTcpMixed) {
  if (tsan_build()) GTEST_SKIP() << "TSan cannot follow fork() from a process with threads";
  std::vector<Case> all = cases();
  for (size_t i = 0; i < 2; i++) run_procs(all[i], {"host-a", "host-b", "host-a"});  // count, dtype
}

// ---- threads (local pipes) ----------------------------------------------------

TEST(MismatchThreads, EveryKindFailsEveryRank) {
  for (const Case &k : cases()) {
    koloConfig_t cfg = long_timeout();
    ThreadWorld w(3, ThreadWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    std::vector<Outcome> out(3);
    w.pool.run([&](int r) { out[(size_t)r] = run_rank(k, r, w.comms[(size_t)r]); });
    for (int r = 0; r < 3; r++) expect_mismatch(k, r, out[(size_t)r]);
  }  // ~ThreadWorld destroys every communicator
}

// A send of 8 Mi float32 and a recv of 8 Mi - 8: both ranks fail naming
// both halves.
TEST(MismatchThreads, SendAndRecvCounts) {
  koloConfig_t cfg = long_timeout();
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<Outcome> out(2);
  w.pool.run([&](int r) {
    std::vector<float> buf(kCount, 1.0f);
    double t0 = now_ms();
    out[(size_t)r].rc = r == 0 ? koloSend(buf.data(), kCount, koloFloat32, 1, w.comms[0], nullptr)
                               : koloRecv(buf.data(), kCount - 8, koloFloat32, 0, w.comms[1], nullptr);
    out[(size_t)r].ms = now_ms() - t0;
    out[(size_t)r].text = koloGetLastError(w.comms[(size_t)r]);
  });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(out[(size_t)r].rc, koloInvalidUsage) << out[(size_t)r].text;
    EXPECT_CONTAINS(out[(size_t)r].text, "rank 1 called Recv(count=8388600, float32)");
    EXPECT_CONTAINS(out[(size_t)r].text, "rank 0 called Send(count=8388608, float32)");
    EXPECT_LT(out[(size_t)r].ms, kBoundMs);
  }
}

// Two all-reduces in one group per rank: matching ones succeed with the
// right sums; then rank 1's second one has another count: #4 is named.
TEST(MismatchThreads, InsideAGroup) {
  koloConfig_t cfg = long_timeout();
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<koloResult_t> rc(4);
  std::vector<std::string> text(2);
  std::vector<float> sums(2);
  w.pool.run([&](int r) {
    std::vector<float> a(1000, 1.0f), b(kCount, 2.0f);
    koloComm_t c = w.comms[(size_t)r];
    koloGroupStart();
    koloAllReduce(a.data(), a.data(), a.size(), koloFloat32, koloSum, c, nullptr);
    koloAllReduce(b.data(), b.data(), 1000, koloFloat32, koloSum, c, nullptr);
    rc[(size_t)r] = koloGroupEnd();
    sums[(size_t)r] = a[999] + b[999];
    koloGroupStart();
    koloAllReduce(a.data(), a.data(), a.size(), koloFloat32, koloSum, c, nullptr);
    koloAllReduce(b.data(), b.data(), r == 1 ? kCount - 1 : kCount, koloFloat32, koloSum, c, nullptr);
    rc[2 + (size_t)r] = koloGroupEnd();
    text[(size_t)r] = koloGetLastError(c);
  });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(rc[(size_t)r], koloSuccess);
    EXPECT_EQ(sums[(size_t)r], 2.0f + 4.0f);
    EXPECT_EQ(rc[2 + (size_t)r], koloInvalidUsage) << text[(size_t)r];
    EXPECT_CONTAINS(text[(size_t)r], "rank 1 called AllReduce(count=8388607, float32, sum) #4 but rank 0 called "
                                     "AllReduce(count=8388608, float32, sum) #4");
  }
}

// Signatures on shared-control pipes ride in two boxes on the tail's cache
// line (transport/connector.h): a broadcast root that runs calls ahead of
// ranks that start late waits for a free box, never overwrites one.  300
// tiny broadcasts, every element checked, then an all-reduce whose count
// differs on rank 2: the mismatch is still found and named, as call #301.
TEST(MismatchThreads, RootRunsAheadThenACountDiffers) {
  constexpr int kCalls = 300;
  koloConfig_t cfg = long_timeout();
  ThreadWorld w(3, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<int> wrong(3, 0);
  std::vector<koloResult_t> rc(3);
  std::vector<std::string> text(3);
  w.pool.run([&](int r) {
    koloComm_t c = w.comms[(size_t)r];
    if (r != 0) usleep(50000);  // the root runs ahead meanwhile
    for (int k = 0; k < kCalls; k++) {
      int32_t v[3] = {-1, -1, -1};
      if (r == 0) v[0] = k, v[1] = 7 * k + 1, v[2] = -k;
      if (koloBroadcast(v, v, 3, koloInt32, 0, c, nullptr) != koloSuccess) wrong[(size_t)r]++;
      if (v[0] != k || v[1] != 7 * k + 1 || v[2] != -k) wrong[(size_t)r]++;
    }
    int32_t a[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    rc[(size_t)r] = koloAllReduce(a, a, r == 2 ? 9 : 8, koloInt32, koloSum, c, nullptr);
    text[(size_t)r] = koloGetLastError(c);
  });
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(wrong[(size_t)r], 0) << "rank " << r;
    EXPECT_EQ(rc[(size_t)r], koloInvalidUsage) << text[(size_t)r];
    EXPECT_CONTAINS(text[(size_t)r], "rank 2 called AllReduce(count=9, int32, sum) #301");
    EXPECT_CONTAINS(text[(size_t)r], "called AllReduce(count=8, int32, sum) #301");
  }
}

// ---- the stall warning --------------------------------------------------------

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// KOLO_STALL_WARN_S=1, timeout 4 s: rank 0 is in its second all-reduce,
// rank 1 never makes it.  Rank 0 logs once, at WARN, the call and rank 1,
// then times out.
TEST(StallWarning, NamesTheMissingRankAndTheCallBeforeTheTimeout) {
  char dir[] = "/tmp/kolo-stall-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/log";
  koloResult_t rc;
  {
    ScopedEnv warn("KOLO_STALL_WARN_S", "1"), level("KOLO_DEBUG", "WARN"), file("KOLO_DEBUG_FILE", path);
    koloResetDebugInit();
    koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
    cfg.timeoutMs = 4000;
    ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    w.pool.run([&](int r) { EXPECT_EQ(warm_up(w.comms[(size_t)r], 2), koloSuccess); });
    std::vector<float> x(1000, 1.0f);
    rc = koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, w.comms[0], nullptr);
  }
  koloResetDebugInit();
  EXPECT_EQ(rc, koloTimeout);
  std::string log = read_file(path);
  const std::string warn = "rank 0: stalled for 1 s in AllReduce(count=1000, float32, sum) #2, waiting for rank 1";
  size_t at = log.find(warn);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_CONTAINS(log, "it has sent nothing of this call");
  EXPECT_EQ(at, log.rfind(warn)) << "warned more than once:\n" << log;
  size_t timeout_at = log.find("rank 0 waited 4000 ms");
  EXPECT_NE(timeout_at, std::string::npos) << log;
  EXPECT_LT(at, timeout_at) << "the warning must come before the timeout error:\n" << log;
  unlink(path.c_str());
  rmdir(dir);
}

// KOLO_STALL_WARN_S=0: never.
TEST(StallWarning, ZeroTurnsItOff) {
  char dir[] = "/tmp/kolo-stall-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/log";
  {
    ScopedEnv warn("KOLO_STALL_WARN_S", "0"), level("KOLO_DEBUG", "WARN"), file("KOLO_DEBUG_FILE", path);
    koloResetDebugInit();
    koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
    cfg.timeoutMs = 1500;
    ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    std::vector<float> x(1000, 1.0f);
    EXPECT_EQ(koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, w.comms[0], nullptr), koloTimeout);
  }
  koloResetDebugInit();
  std::string log = read_file(path);
  EXPECT_CONTAINS(log, "rank 0 waited 1500 ms");
  EXPECT_EQ(log.find("stalled for"), std::string::npos) << log;
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace
