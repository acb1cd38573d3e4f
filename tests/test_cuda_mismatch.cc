// test_cuda_mismatch.cc - calls that do not match on koloMemCuda
// communicators (the host executor's are in
// test_mismatch.cc): one rank's call differs from the others' in count,
// dtype or op.  The calls only enqueue; every rank's kernel must stop with
// koloCommGetAsyncError = koloInvalidUsage and a sentence naming the rank
// that differs and both calls, long before the kernels' own timeout, and
// the communicators must still be destroyed cleanly.
//
// Ranks as threads on one device (tests/util/cuda_bufs.h's CudaWorld), a
// warm-up all-reduce first (call #1 on every rank), then the mismatched
// call #2.  The rank that differs is the highest, so that every sentence
// names it first ("rank 2 called ... but rank 1 called ...").  Sizes pick
// the protocol (LL at or below 64 KiB, KOLO_LL_THRESHOLD): 1000 float32s
// are LL, 100000 SIMPLE; one case has a rank on each protocol, where a
// receiver must look at the signature before it waits for a slice that the
// other protocol never sends.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "util/coll_run.h"
#include "util/cuda_bufs.h"
#include "util/expect_text.h"

using namespace kt;

namespace {

// The kernels' own timeout: a mismatch must be reported well before it.
constexpr int kTimeoutMs = 60000;
constexpr double kBoundMs = 20000;

const bool kQueuesSet = (setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0), true);

enum Kind { kAllReduce, kAllToAll, kBroadcast };

struct Call {
  size_t count;
  koloDataType_t type;
  koloRedOp_t op;
  Kind kind = kAllReduce;
  int root = 0;
};

struct Case {
  const char *name;
  int nranks;
  Call base, odd;  // the highest rank calls odd, the others base
  const char *odd_text, *base_text;
};

constexpr Call kSimple = {100000, koloFloat32, koloSum};
constexpr Call kLL = {1000, koloFloat32, koloSum};

// Each rank's device buffer: the largest call (an 8 Mi-float32
// broadcast; all-to-all's input and output, each a half).
constexpr size_t kBufBytes = 8388608 * sizeof(double);

std::vector<Case> cases() {
  return {
      {"CountSimple2", 2, kSimple, {99000, koloFloat32, koloSum},
       "rank 1 called AllReduce(count=99000, float32, sum) #2", "AllReduce(count=100000, float32, sum) #2"},
      {"DtypeLL2", 2, kLL, {1000, koloFloat64, koloSum}, "rank 1 called AllReduce(count=1000, float64, sum) #2",
       "AllReduce(count=1000, float32, sum) #2"},
      {"CountAcrossProtocols2", 2, kSimple, kLL, "rank 1 called AllReduce(count=1000, float32, sum) #2",
       "AllReduce(count=100000, float32, sum) #2"},
      {"CountSimple3", 3, kSimple, {99000, koloFloat32, koloSum},
       "rank 2 called AllReduce(count=99000, float32, sum) #2", "AllReduce(count=100000, float32, sum) #2"},
      {"DtypeSimple3", 3, kSimple, {100000, koloFloat64, koloSum},
       "rank 2 called AllReduce(count=100000, float64, sum) #2", "AllReduce(count=100000, float32, sum) #2"},
      {"CountLL3", 3, kLL, {1001, koloFloat32, koloSum}, "rank 2 called AllReduce(count=1001, float32, sum) #2",
       "AllReduce(count=1000, float32, sum) #2"},
      {"OpLL3", 3, kLL, {1000, koloFloat32, koloMax}, "rank 2 called AllReduce(count=1000, float32, max) #2",
       "AllReduce(count=1000, float32, sum) #2"},
      // multi-peer programs: each rank receives from the one that differs
      {"AllToAllCountSimple3", 3, {30000, koloFloat32, koloSum, kAllToAll}, {29000, koloFloat32, koloSum, kAllToAll},
       "rank 2 called AlltoAll(count=29000, float32) #2", "AlltoAll(count=30000, float32) #2"},
      {"AllToAllDtypeLL3", 3, {300, koloFloat32, koloSum, kAllToAll}, {300, koloInt32, koloSum, kAllToAll},
       "rank 2 called AlltoAll(count=300, int32) #2", "AlltoAll(count=300, float32) #2"},
      // a chain: the root sends more than the two pipes ahead of it hold
      // (2 x 4 MiB per channel, 2 channels), so it waits and sees the stop
      {"BroadcastRootSimple3", 3, {8388608, koloFloat32, koloSum, kBroadcast, 0},
       {8388608, koloFloat32, koloSum, kBroadcast, 1}, "rank 2 called Broadcast(count=8388608, float32, root=1) #2",
       "Broadcast(count=8388608, float32, root=0) #2"},
  };
}

std::string case_name(const ::testing::TestParamInfo<Case> &p) { return p.param.name; }

// A device buffer of each rank, big enough for every call of the test.
struct Bufs {
  std::vector<void *> p;
  ~Bufs() {
    for (void *x : p)
      if (x != nullptr) cudaFree(x);
  }
};

std::string alloc_bufs(CudaWorld &w, size_t bytes, Bufs *b) {
  b->p.assign((size_t)w.nranks(), nullptr);
  for (int r = 0; r < w.nranks(); r++) {
    std::string e = cuda_text("cudaMalloc", cudaMalloc(&b->p[(size_t)r], bytes));
    if (e.empty()) e = cuda_text("cudaMemset", cudaMemset(b->p[(size_t)r], 0, bytes));
    if (!e.empty()) return e;
  }
  return "";
}

// Every rank calls c(rank) on its own thread; the calls only enqueue.
void issue(CudaWorld &w, Bufs &b, const std::function<Call(int)> &c) {
  std::vector<koloResult_t> rc((size_t)w.nranks(), koloSuccess);
  w.pool.run([&](int r) {
    Call x = c(r);
    void *p = b.p[(size_t)r], *q = (char *)p + kBufBytes / 2;
    koloComm_t comm = w.comms[(size_t)r];
    cudaStream_t s = w.streams[(size_t)r];
    rc[(size_t)r] = x.kind == kAllToAll    ? koloAlltoAll(p, q, x.count, x.type, comm, s)
                    : x.kind == kBroadcast ? koloBroadcast(p, p, x.count, x.type, x.root, comm, s)
                                           : koloAllReduce(p, p, x.count, x.type, x.op, comm, s);
  });
  for (int r = 0; r < w.nranks(); r++)
    ASSERT_EQ(rc[(size_t)r], koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[(size_t)r]);
}

class CudaMismatch : public ::testing::TestWithParam<Case> {};

TEST_P(CudaMismatch, EveryRankFailsNamingBothCalls) {
  KT_REQUIRE_CUDA();
  const Case &k = GetParam();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = kTimeoutMs;
  CudaWorld w(k.nranks, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  Bufs b;
  ASSERT_EQ(alloc_bufs(w, kBufBytes, &b), "");
  issue(w, b, [](int) { return Call{1, koloFloat32, koloSum}; }); /* #1: every rank alike */
  for (int r = 0; r < k.nranks; r++) ASSERT_EQ(wait_stream(w.streams[(size_t)r], kBoundMs), "") << "warm-up";
  const double t0 = now_ms();
  issue(w, b, [&](int r) { return r == k.nranks - 1 ? k.odd : k.base; });
  if (HasFatalFailure()) return;
  for (int r = 0; r < k.nranks; r++) {
    bool busy = false;
    std::string werr = wait_stream(w.streams[(size_t)r], kBoundMs, nullptr, &busy);
    if (busy) w.wedge();
    const double ms = now_ms() - t0;
    EXPECT_FALSE(busy) << "rank " << r << "'s kernel still runs " << ms << " ms after the calls";
    EXPECT_EQ(werr, "") << "rank " << r;
    koloResult_t async = koloSuccess;
    ASSERT_EQ(koloCommGetAsyncError(w.comms[(size_t)r], &async), koloSuccess);
    const std::string text = koloGetLastError(w.comms[(size_t)r]);
    EXPECT_EQ(async, koloInvalidUsage) << "rank " << r << ": " << text;
    EXPECT_CONTAINS(text, "calls do not match") << "rank " << r;
    EXPECT_CONTAINS(text, k.odd_text) << "rank " << r;
    EXPECT_CONTAINS(text, k.base_text) << "rank " << r;
    std::printf("  rank %d after %.0f ms: %s\n", r, ms, text.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaMismatch, ::testing::ValuesIn(cases()), case_name);

// Send / recv: rank 0 sends 1000 float32s, rank 1 receives 2000 (a
// matching pair first sets up the pipes).  The receiver fails naming both
// halves; the sender's slices fit the free slots, so its kernel may finish
// before the receiver looked: it fails with the same sentence on its next
// send to that peer (which looks at the pipe's stop word first).
TEST(CudaMismatchP2P, SendAndRecvCountsDiffer) {
  KT_REQUIRE_CUDA();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = kTimeoutMs;
  CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  Bufs b;
  ASSERT_EQ(alloc_bufs(w, 2000 * sizeof(float), &b), "");
  for (size_t recv_count : {(size_t)1000, (size_t)2000}) {
    std::vector<koloResult_t> rc(2, koloSuccess);
    w.pool.run([&](int r) {
      rc[(size_t)r] = r == 0 ? koloSend(b.p[0], 1000, koloFloat32, 1, w.comms[0], w.streams[0])
                             : koloRecv(b.p[1], recv_count, koloFloat32, 0, w.comms[1], w.streams[1]);
    });
    for (int r = 0; r < 2; r++) ASSERT_EQ(rc[(size_t)r], koloSuccess) << koloGetLastError(w.comms[(size_t)r]);
    for (int r = 0; r < 2; r++) {
      bool busy = false;
      EXPECT_EQ(wait_stream(w.streams[(size_t)r], kBoundMs, nullptr, &busy), "") << "rank " << r;
      if (busy) w.wedge();
    }
  }
  koloResult_t async = koloSuccess;
  ASSERT_EQ(koloCommGetAsyncError(w.comms[0], &async), koloSuccess);
  if (async == koloSuccess) { /* the sender finished first: its next send fails */
    ASSERT_EQ(koloSend(b.p[0], 1000, koloFloat32, 1, w.comms[0], w.streams[0]), koloSuccess)
        << koloGetLastError(w.comms[0]);
    bool busy = false;
    EXPECT_EQ(wait_stream(w.streams[0], kBoundMs, nullptr, &busy), "") << "rank 0's second send";
    if (busy) w.wedge();
  }
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(koloCommGetAsyncError(w.comms[(size_t)r], &async), koloSuccess);
    const std::string text = koloGetLastError(w.comms[(size_t)r]);
    EXPECT_EQ(async, koloInvalidUsage) << "rank " << r << ": " << text;
    EXPECT_CONTAINS(text, "rank 1 called Recv(count=2000, float32) but rank 0 called Send(count=1000, float32)")
        << "rank " << r;
    std::printf("  rank %d: %s\n", r, text.c_str());
  }
}

// Calls that match still work after many of them: the signature places of
// a pipe are reused every 64 steps, each cleared by its receiver.
TEST(CudaMismatchNone, ManyMatchingCallsSucceed) {
  KT_REQUIRE_CUDA();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = kTimeoutMs;
  CudaWorld w(3, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  Bufs b;
  ASSERT_EQ(alloc_bufs(w, kBufBytes, &b), "");
  for (int i = 0; i < 40; i++) {
    const Call c = i % 2 ? kLL : Call{(size_t)(20000 + i), koloFloat32, koloSum};
    issue(w, b, [&](int) { return c; });
    if (HasFatalFailure()) return;
  }
  for (int r = 0; r < 3; r++) {
    EXPECT_EQ(wait_stream(w.streams[(size_t)r], kBoundMs), "") << "rank " << r;
    EXPECT_EQ(async_error_text(w.comms[(size_t)r]), "") << "rank " << r;
  }
}

}  // namespace
