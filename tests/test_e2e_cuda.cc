// test_e2e_cuda.cc - end-to-end tests of koloMemCuda communicators: the
// host suites (test_e2e_threads.cc, test_e2e_procs.cc) run with device
// buffers on one GPU, plus what only a GPU has: CUDA graph capture, and
// kernels that spin on a peer (abort, timeout).
//
// Ranks as threads: koloCommInitAllConfig with devlist {0, 0, ...} (or
// koloCommInitRank[Config] from the ranks' threads), one cudaStreamNonBlocking
// stream per rank, calls issued either by each rank's own thread, all at once
// ("threads"), or by one thread for every rank inside one
// koloGroupStart / koloGroupEnd ("onethread").  A call only enqueues; the
// test then waits for each stream (polling, with a bound), copies the device
// buffers back and checks them with util/coll_run.h's check():
//   CudaGrid        every collective x dtype x op x ranks {1,2,3,4,8} x
//                   counts {0,1,7,4095} x in/out of place, both issue modes;
//                   a third of the calls with device buffers 0..7 elements
//                   past a 64-byte boundary (different per rank and buffer)
//   CudaLargeGrid   count 1 MiB + 3 (test_e2e_threads.cc's sampled grid:
//                   over the rank counts every dtype and op comes up), both modes
//   CudaHugeGrid    64 MiB messages, float32 and bfloat16 sum, 4 ranks
//   CudaProtocolSwitch  counts one element below, at and above the LL/SIMPLE
//                   switch (KOLO_LL_THRESHOLD bytes, default 64 KiB), in bytes of
//                   the count and, for reduce-scatter / all-gather, of the total
//   CudaInitRankThreads, CudaMemoryEnv  other ways to make CUDA communicators
//                   (koloCommInitRankConfig with cudaDev; KOLO_MEMORY=cuda with
//                   koloCommInitAll and koloCommInitRank on the current device)
//   CudaBatch       several calls per stream before one wait: back to back,
//                   in one group per rank, and every rank's calls in one group
//   CudaP2P         all-to-all of send/recv in groups (first send/recv to a
//                   peer sets up its pipes), both issue modes
//   CudaGraph       an all-reduce captured per rank after a warm-up call,
//                   replayed 3 times with new inputs; then an eager call
//   CudaAbort       koloCommAbort ends a kernel spinning on a peer that never
//                   calls (LL- and SIMPLE-sized calls)
//   CudaAbortPeers  peers waiting on an aborted rank stop with an error
//   CudaTimeout     KOLO_TIMEOUT_MS / config.timeoutMs: the kernel gives up,
//                   koloCommGetAsyncError reports koloTimeout naming the rank
//   CudaPeerGrid, CudaPeerLargeGrid, CudaPeerProtocolSwitch, CudaPeerBatch,
//   CudaPeerGraph, CudaPeerTimeout  all-to-all, gather, scatter and bcast
//                   (multi-peer programs): the grid (dtypes in turn), 1 MiB + 3,
//                   LL/SIMPLE, mixed batches with send/recv, graphs, a peer
//                   that never calls
// Ranks as processes (rank % devices; on the model under its MPS, or a device
// per process with KOLO_SIM_SHARE=timeslice): the test process makes
// the unique id, forks one child per rank and each child execs a fresh copy
// of this binary that runs only CudaProcsChild.DISABLED_Rank (CUDA does not
// survive fork; exec makes the child clean even when this process already
// used CUDA):
//   CudaProcs       test_e2e_procs.cc's subset (4 dtype/op pairs, counts
//                   {0,1,7,4095}, 1 MiB + 3 for some) plus the protocol switch,
//                   and all-to-all, gather, scatter, bcast
//   CudaProcsTimeout  a peer process that never calls: koloTimeout naming it
//   CudaNetProcs    the CudaProcs grid with KOLO_NET_FORCE=1 and KOLO_NET=socket:
//                   the ranks talk through net pipes as across hosts (device
//                   buffers staged through pinned host slots, the proxy
//                   polling them for the kernels' posted slices, no LL)
//   CudaHierProcs   the grid on 2 "hosts" (KOLO_HOSTID) of 2 and of 3 with
//                   KOLO_ALGO=hier: the hierarchical all-reduce's phases as
//                   consecutive launches, device pipes within a host, net
//                   pipes between
//   CudaSharedGpu   2 processes on one model GPU: under MPS the channels are
//                   capped for the ranks of both; without MPS init is refused
//
// Every test is a visible skip ("no CUDA device: ...") without a usable
// device.  Large and Huge grids are skipped in sanitizer builds
// (KOLO_TEST_FULL=1 runs them) and their names match the LargeGrid|HugeGrid
// filters of tests/run_all.sh.  KOLO_TEST_SEED changes the inputs,
// KOLO_TEST_VERBOSE=1 prints per-case times.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

extern "C" {
#include "core/op.h"
#include "ring/algo.h"
}

#include "util/coll_ref.h"
#include "util/comm_peek.h"
#include "util/expect_text.h"
#include "util/coll_run.h"
#include "util/cuda_bufs.h"
#include "util/cuda_peek.h"
#include "util/proc_util.h"
#include "util/thread_world.h"
#include "util/time_scale.h"

#ifdef KOLO_CUDA_SIM
#include "cudasim/kolo_sim.h"
#endif

extern char **environ;

using namespace kt;

namespace {

// A hang becomes an error after 60 s (the kernels' own timeout) instead of
// ctest's timeout; forked children inherit it.
const bool kTimeoutSet = (default_test_timeout(60000), true);

// Up to 8 ranks share the device here, each with its stream and kolo's
// setup stream: one hardware queue per stream (CUDA_DEVICE_MAX_CONNECTIONS,
// read when CUDA starts, so before main), else a rank's work queued behind
// a kernel waiting for a peer holds the peer back (kolo warns at init;
// CudaQueues tests that case).
const bool kQueuesSet = (setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0), true);

// The byte size at which calls switch from LL to SIMPLE: KOLO_LL_THRESHOLD
// when set (for the library and this test alike), else the 64 KiB default.
size_t ll_threshold() {
  const char *v = std::getenv("KOLO_LL_THRESHOLD");
  long x = v ? std::strtol(v, nullptr, 10) : 0;
  return x > 0 ? (size_t)x : (size_t)65536;
}

// Counts one element below, at and above the switch, measured on the call's
// count and, for reduce-scatter / all-gather, on the whole array (n *
// count); float32 sum, bfloat16 and int8 (one element = one byte) with
// another op, in and out of place.
std::vector<CollCase> protocol_cases(Coll coll, int n) {
  struct TO {
    koloDataType_t t;
    koloRedOp_t op;
  };
  static const TO kPicks[] = {{koloFloat32, koloSum}, {koloBfloat16, koloAvg}, {koloInt8, koloMax}};
  const size_t T = ll_threshold();
  std::vector<CollCase> cases;
  int variant = 1;
  for (const TO &p : kPicks) {
    const size_t esz = type_size(p.t);
    std::set<size_t> counts;
    for (size_t unit : {esz, (size_t)n * esz}) {
      if (unit != esz && coll != Coll::ReduceScatter && coll != Coll::AllGather) continue;
      size_t at = T / unit;
      if (at < 2) continue;
      for (size_t c : {at - 1, at, at + 1}) counts.insert(c);
    }
    for (size_t count : counts)
      for (int ip = has_out_of_place(coll) ? 0 : 1; ip <= (has_in_place(coll) ? 1 : 0); ip++)
        cases.push_back(make_case(coll, p.t, p.op, n, count, ip == 1, variant++));
  }
  return cases;
}

std::string param_name(Coll coll, int n) {
  return std::string(coll_name(coll)) + "_" + std::to_string(n) + "ranks";
}

const Issue kBothIssues[] = {Issue::kPerThread, Issue::kOneThread};

using GridParam = std::tuple<Coll, int, Issue>;
std::string grid_param_name(const ::testing::TestParamInfo<GridParam> &p) {
  return param_name(std::get<0>(p.param), std::get<1>(p.param)) + "_" + issue_name(std::get<2>(p.param));
}

// ---- processes (declared here: the tests run first, see below) -----------------------

constexpr double kChildTimeoutMs = 300000;

std::vector<CollCase> cuda_proc_grid(int n);
// per_host > 0: rank i gets KOLO_HOSTID=host-(i / per_host).
void run_cuda_procs(const std::string &mode, int n, int per_host = 0);

}  // namespace

// ===== ranks as processes ======================================================
// (The children exec a fresh copy of this binary, so these tests work
// whatever ran before them in this process.)

class CudaProcs : public ::testing::TestWithParam<int> {};

// Each of n processes joins with koloCommInitRankConfig (koloMemCuda, device
// 0) and runs cuda_proc_grid(n) with device buffers; all must exit 0 and
// leave no /dev/shm/kolo-* segment.
TEST_P(CudaProcs, Grid) {
  KT_REQUIRE_CUDA();
  run_cuda_procs("grid", GetParam());
}

INSTANTIATE_TEST_SUITE_P(CudaProcs, CudaProcs, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "procs";
                         });

// The same grid through the network path a CUDA comm takes between hosts.
class CudaNetProcs : public ::testing::TestWithParam<int> {};

TEST_P(CudaNetProcs, Grid) {
  KT_REQUIRE_CUDA();
  ScopedEnv force("KOLO_NET_FORCE", "1");
  ScopedEnv net("KOLO_NET", "socket");
  run_cuda_procs("grid", GetParam());
}

INSTANTIATE_TEST_SUITE_P(CudaNetProcs, CudaNetProcs, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "procs";
                         });

// The hierarchical all-reduce on CUDA communicators: processes on "hosts"
// (KOLO_HOSTID) of 2 or 3, KOLO_ALGO=hier: the intra-host phases run over
// device pipes, the inter-host phase over net pipes (socket, staged), each
// phase in its own launches; the grid as above, and each child checks that
// its all-reduces really run hierarchically (a silent fallback to the ring
// would pass the grid).
class CudaHierProcs : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CudaHierProcs, Grid) {
  KT_REQUIRE_CUDA();
  auto [hosts, per_host] = GetParam();
  ScopedEnv algo("KOLO_ALGO", "hier");
  ScopedEnv net("KOLO_NET", "socket");
  run_cuda_procs("hier", hosts * per_host, per_host);
}

INSTANTIATE_TEST_SUITE_P(CudaHierProcs, CudaHierProcs,
                         ::testing::Values(std::make_tuple(2, 2), std::make_tuple(2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>> &p) {
                           return std::to_string(std::get<0>(p.param)) + "hostsOf" +
                                  std::to_string(std::get<1>(p.param));
                         });

// 2 processes, KOLO_TIMEOUT_MS=2000: after a warm-up all-reduce, rank 1
// stays alive but never calls again; rank 0's next all-reduce enqueues and
// returns, its kernel gives up after about 2 s, the stream ends without a
// CUDA error, and koloCommGetAsyncError reports koloTimeout naming rank 1.
TEST(CudaProcsTimeout, PeerNeverCallsKernelGivesUp) {
  KT_REQUIRE_CUDA();
  ScopedEnv timeout("KOLO_TIMEOUT_MS", "2000");
  run_cuda_procs("timeout", 2);
}

// Ranks of 2 processes on one model device.  Under MPS (KOLO_SIM_SHARE=mps)
// both processes' blocks share its SMs: on a device of 6 SMs holding one
// executor block each, 4 channels asked become 3 per rank (6 over the 2
// ranks of both processes), and a checked all-reduce of 64 Ki floats over
// them completes.  Without MPS (the model's time slices, a GPU's default)
// init fails on both ranks with the sentence.
TEST(CudaSharedGpu, ProcessesUnderMpsShareTheBudget) {
  KT_REQUIRE_CUDA();
#ifndef KOLO_CUDA_SIM
  GTEST_SKIP() << "needs the CUDA model (KOLO_SIM_SHARE, KOLO_SIM_SMS)";
#endif
  ScopedEnv mps("KOLO_SIM_SHARE", "mps");
  ScopedEnv sms("KOLO_SIM_SMS", "6");
  ScopedEnv timeout("KOLO_TIMEOUT_MS", "5000");
  ScopedEnv min_ch("KOLO_MIN_CHANNEL_BYTES", "4096");
  run_cuda_procs("mps_budget", 2);
}

TEST(CudaSharedGpu, ProcessesWithoutMpsAreRefused) {
  KT_REQUIRE_CUDA();
#ifndef KOLO_CUDA_SIM
  GTEST_SKIP() << "needs the CUDA model (KOLO_SIM_SHARE)";
#endif
  ScopedEnv timeslice("KOLO_SIM_SHARE", "timeslice");
  run_cuda_procs("refused", 2);
}

// Calls that do not match, processes: over device pipes (CUDA
// IPC) and over net pipes (socket, the proxy carrying signatures and the
// report): every rank fails naming the highest rank's call (child_mismatch).
class CudaMismatchProcs : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(CudaMismatchProcs, EveryRankFails) {
  KT_REQUIRE_CUDA();
  auto [net, n] = GetParam();
  std::unique_ptr<ScopedEnv> force, kind;
  if (net) {
    force.reset(new ScopedEnv("KOLO_NET_FORCE", "1"));
    kind.reset(new ScopedEnv("KOLO_NET", "socket"));
  }
  run_cuda_procs("mismatch", n);
}

INSTANTIATE_TEST_SUITE_P(CudaMismatchProcs, CudaMismatchProcs,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<bool, int>> &p) {
                           return std::string(std::get<0>(p.param) ? "Net_" : "Device_") +
                                  std::to_string(std::get<1>(p.param)) + "procs";
                         });

// ===== ranks as threads: the grids ==============================================

class CudaGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(CudaGrid, SmallCounts) {
  KT_REQUIRE_CUDA();
  auto [coll, n, how] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  GridReport rep = run_cuda_grid(w, small_grid(coll, n), how);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaGrid,
                         ::testing::Combine(::testing::ValuesIn(kAllColls), ::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::ValuesIn(kBothIssues)),
                         grid_param_name);

class CudaLargeGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(CudaLargeGrid, OneMiBPlus3) {
  KT_REQUIRE_CUDA();
  if (sanitized_build()) GTEST_SKIP() << "large counts skipped in sanitizer builds (KOLO_TEST_FULL=1 runs them)";
  auto [coll, n, how] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  GridReport rep = run_cuda_grid(w, large_grid(coll, n), how);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaLargeGrid,
                         ::testing::Combine(::testing::ValuesIn(kAllColls), ::testing::Values(2, 3, 4, 8),
                                            ::testing::ValuesIn(kBothIssues)),
                         grid_param_name);

class CudaHugeGrid : public ::testing::TestWithParam<Coll> {};

TEST_P(CudaHugeGrid, SixtyFourMiB) {
  KT_REQUIRE_CUDA();
  if (sanitized_build()) GTEST_SKIP() << "64 MiB skipped in sanitizer builds (KOLO_TEST_FULL=1 runs it)";
  const Coll coll = GetParam();
  const int n = 4;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases;
  int variant = 5;
  for (koloDataType_t t : {koloFloat32, koloBfloat16}) {
    size_t count = (64u << 20) / type_size(t);
    if (coll == Coll::ReduceScatter || coll == Coll::AllGather) count /= n;
    cases.push_back(make_case(coll, t, koloSum, n, count, false, variant++));
  }
  GridReport rep = run_cuda_grid(w, cases, Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaHugeGrid, ::testing::ValuesIn(kAllColls),
                         [](const ::testing::TestParamInfo<Coll> &p) {
                           return std::string(coll_name(p.param)) + "_4ranks";
                         });

class CudaProtocolSwitch : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

// Both issue modes on one set of communicators: LL and SIMPLE calls follow
// each other on the same connectors.
TEST_P(CudaProtocolSwitch, AroundLLThreshold) {
  KT_REQUIRE_CUDA();
  auto [coll, n] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases = protocol_cases(coll, n);
  for (Issue how : kBothIssues) {
    GridReport rep = run_cuda_grid(w, cases, how);
    EXPECT_GRID_OK(rep) << " (threshold " << ll_threshold() << " bytes)";
    if (rep.call_failed) break;
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaThreads, CudaProtocolSwitch,
    ::testing::Combine(::testing::ValuesIn(kAllColls), ::testing::Values(1, 2, 3, 4, 8)),
    [](const ::testing::TestParamInfo<CudaProtocolSwitch::ParamType> &p) {
      return param_name(std::get<0>(p.param), std::get<1>(p.param));
    });

// ===== all-to-all, gather, scatter, bcast (multi-peer programs) ==================
//
// Their tasks reach several peers' point-to-point pipes through end tables
// in device memory (kernels/cuda_exec.h); the planner keeps a multi-peer
// task apart from launch-mates that could share one of its ends.

class CudaPeerGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(CudaPeerGrid, SmallCounts) {
  KT_REQUIRE_CUDA();
  auto [coll, n, how] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  GridReport rep = run_cuda_grid(w, peer_grid(coll, n), how);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaPeerGrid,
                         ::testing::Combine(::testing::ValuesIn(kPeerColls), ::testing::Values(1, 2, 3, 8),
                                            ::testing::ValuesIn(kBothIssues)),
                         grid_param_name);

class CudaPeerLargeGrid : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

TEST_P(CudaPeerLargeGrid, OneMiBPlus3) {
  KT_REQUIRE_CUDA();
  if (sanitized_build()) GTEST_SKIP() << "large counts skipped in sanitizer builds (KOLO_TEST_FULL=1 runs them)";
  auto [coll, n] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> all = peer_grid(coll, n, true), big(all.end() - 2, all.end());
  GridReport rep = run_cuda_grid(w, big, Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaPeerLargeGrid,
                         ::testing::Combine(::testing::Values(Coll::AlltoAll, Coll::Gather, Coll::Scatter),
                                            ::testing::Values(3)),
                         [](const ::testing::TestParamInfo<std::tuple<Coll, int>> &p) {
                           return param_name(std::get<0>(p.param), std::get<1>(p.param));
                         });

// LL and SIMPLE calls around the switch follow each other on the same
// point-to-point pipes, in both issue modes.
TEST(CudaPeerProtocolSwitch, AroundLLThreshold) {
  KT_REQUIRE_CUDA();
  const int n = 3;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases;
  for (Coll coll : {Coll::AlltoAll, Coll::Gather, Coll::Scatter})
    for (const CollCase &c : protocol_cases(coll, n))
      if (c.type != koloInt8) cases.push_back(c);
  for (Issue how : kBothIssues) {
    GridReport rep = run_cuda_grid(w, cases, how);
    EXPECT_GRID_OK(rep) << " (threshold " << ll_threshold() << " bytes)";
    if (rep.call_failed) break;
  }
}

// ===== other ways to make CUDA communicators ======================================

class CudaInitRankThreads : public ::testing::TestWithParam<int> {};

// koloGetUniqueId here, koloCommInitRankConfig (memory = koloMemCuda,
// cudaDev = 0) on n threads at once; then a sample of every collective.
TEST_P(CudaInitRankThreads, CollectivesWork) {
  KT_REQUIRE_CUDA();
  const int n = GetParam();
  CudaWorld w(n, CudaWorld::Init::kInitRankThreads);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (int r = 0; r < n; r++) {
    int count = -1, rank = -1;
    EXPECT_EQ(koloCommCount(w.comms[r], &count), koloSuccess);
    EXPECT_EQ(koloCommUserRank(w.comms[r], &rank), koloSuccess);
    EXPECT_EQ(count, n);
    EXPECT_EQ(rank, r);
  }
  GridReport rep = run_cuda_grid(w, sample_cases(n, {1, 7, 4095, 70001}), Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaInitRankThreads, ::testing::Values(2, 3, 5),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

// A launch's result is the launch's own, not an earlier
// error of the calling thread that cudaGetLastError would also return.
// Rank 0 makes a call its peer has not made yet, queries its stream (busy:
// NotReady, which CUDA does not keep as the last error), makes an error of
// its own (cudaFree of a pointer no allocation gave: cudaErrorInvalidValue,
// not sticky), and makes a second call: it must launch (kolo once read the
// launch result with cudaGetLastError and failed the communicator here),
// and the user's error stays the user's to read.
TEST(CudaLaunch, AnEarlierErrorOfTheThreadIsNotTheLaunchsOwn) {
  KT_REQUIRE_CUDA();
  const int n = 2;
  const size_t count = 1024;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<float *> buf((size_t)n, nullptr);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&buf[(size_t)r]), count * sizeof(float)), cudaSuccess);
    std::vector<float> v(count, (float)(r + 1));
    ASSERT_EQ(cudaMemcpy(buf[(size_t)r], v.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<koloResult_t> second((size_t)n, koloInternalError);
  cudaError_t query = cudaSuccess, own = cudaSuccess, left = cudaSuccess;
  auto call = [&](int r) {
    return koloAllReduce(buf[(size_t)r], buf[(size_t)r], count, koloFloat32, koloSum, w.comms[(size_t)r],
                         w.streams[(size_t)r]);
  };
  w.pool.run([&](int r) {
    if (r != 0) return;
    cudaSetDevice(w.dev);
    (void)cudaGetLastError();
    if (call(0) != koloSuccess) return;
    query = cudaStreamQuery(w.streams[0]);  // rank 1 has not called: busy
    own = cudaFree(reinterpret_cast<void *>(0x1));
    second[0] = call(0);
    left = cudaGetLastError();
  });
  w.pool.run([&](int r) {
    if (r == 0) return;
    cudaSetDevice(w.dev);
    if (call(r) == koloSuccess) second[(size_t)r] = call(r);
  });
  EXPECT_EQ(query, cudaErrorNotReady);
  EXPECT_EQ(second[0], koloSuccess) << koloGetLastError(w.comms[0]);
  EXPECT_EQ(second[1], koloSuccess) << koloGetLastError(w.comms[1]);
  EXPECT_EQ(own, cudaErrorInvalidValue);
  EXPECT_EQ(left, cudaErrorInvalidValue) << "kolo consumed the thread's own error";
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(wait_stream(w.streams[(size_t)r], kStreamWaitMs), "");
    EXPECT_EQ(async_error_text(w.comms[(size_t)r]), "");
    std::vector<float> got(count, 0.0f);
    ASSERT_EQ(cudaMemcpy(got.data(), buf[(size_t)r], count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < count; i++) ASSERT_EQ(got[i], 6.0f) << "rank " << r << " element " << i;  // (1+2) twice
    cudaFree(buf[(size_t)r]);
  }
}

// One hardware queue for every stream (CUDA_DEVICE_MAX_CONNECTIONS=1, set
// by ctest's CudaQueues.OneQueue entry before CUDA starts; the test skips
// elsewhere): kolo warns at init that ranks share the device with fewer
// queues than streams, and a group of both ranks' calls issued from one
// thread still completes: the group's event records come after all of its
// launches (recorded between them, the first rank's record waited in the
// queue for its kernel, which waited for the second rank's kernel queued
// behind the record).
TEST(CudaQueues, OneQueueWarnsAndAGroupFromOneThreadCompletes) {
  KT_REQUIRE_CUDA();
  const char *q = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const char *log = std::getenv("KOLO_DEBUG_FILE");
  if (q == nullptr || std::string(q) != "1" || log == nullptr)
    GTEST_SKIP() << "runs from ctest's CudaQueues.OneQueue entry (one hardware queue, a log file)";
  std::remove(log);  // this process logs nothing before its comms' init
  const int n = 2;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  GridReport rep = run_cuda_grid(w, sample_cases(n, {7, 70001}), Issue::kOneThread);
  EXPECT_GRID_OK(rep);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_CONTAINS(text, "hardware queues (CUDA_DEVICE_MAX_CONNECTIONS)");
  EXPECT_CONTAINS(text, "CUDA_DEVICE_MAX_CONNECTIONS=32");
}

// KOLO_MEMORY=cuda makes koloCommInitAll (devlist {0,0,0}) create CUDA
// communicators: device buffers work with them.
TEST(CudaMemoryEnv, KoloMemoryCudaInitAll) {
  KT_REQUIRE_CUDA();
  ScopedEnv mem("KOLO_MEMORY", "cuda");
  const int n = 3;
  CudaWorld w(n, CudaWorld::Init::kInitAllPlain);
  ASSERT_TRUE(w.ok()) << w.init_error;
  GridReport rep = run_cuda_grid(w, sample_cases(n, {7, 70001}), Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

// KOLO_MEMORY=cuda with koloCommInitRank (no config: the current device,
// set with cudaSetDevice(0) on each rank's thread), and with
// koloCommInitRankConfig where memory is left undefined and cudaDev = -1.
TEST(CudaMemoryEnv, KoloMemoryCudaInitRankCurrentDevice) {
  KT_REQUIRE_CUDA();
  ScopedEnv mem("KOLO_MEMORY", "cuda");
  const int n = 2;
  {
    CudaWorld w(n, CudaWorld::Init::kInitRankPlain);
    ASSERT_TRUE(w.ok()) << w.init_error;
    GridReport rep = run_cuda_grid(w, sample_cases(n, {4095}), Issue::kPerThread);
    EXPECT_GRID_OK(rep);
  }
  {
    koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
    cfg.cudaDev = -1;
    CudaWorld w(n, CudaWorld::Init::kInitRankThreads, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    GridReport rep = run_cuda_grid(w, sample_cases(n, {4095}, 3), Issue::kOneThread);
    EXPECT_GRID_OK(rep);
  }
}

// koloAdasum on a koloMemCuda communicator is refused with its sentence,
// on every rank, before any exchange (so this thread calls for each rank),
// with device buffers as a user would pass them; the output is untouched
// and the communicators still run a checked all-reduce afterwards.
TEST(CudaAdasum, RefusedOnACudaCommunicatorWithItsSentence) {
  KT_REQUIRE_CUDA();
  const int n = 2;
  const size_t count = 37;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  float *dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dev), 2 * count * sizeof(float)), cudaSuccess);
  std::vector<float> in(count, 1.5f), out(count, 0.0f);
  ASSERT_EQ(cudaMemcpy(dev, in.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev + count, 0, count * sizeof(float)), cudaSuccess);
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(koloAdasum(dev, dev + count, count, koloFloat32, w.comms[r], w.streams[r]), koloInvalidUsage);
    EXPECT_CONTAINS(koloGetLastError(w.comms[r]),
                    "koloAdasum: rank " + std::to_string(r) + ": the communicator moves CUDA memory, and Adasum "
                    "runs on host communicators only");
    EXPECT_CONTAINS(koloGetLastError(w.comms[r]), "copy the buffer to host memory and call it on a host communicator");
  }
  ASSERT_EQ(cudaMemcpy(out.data(), dev + count, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, std::vector<float>(count, 0.0f)) << "a refused koloAdasum wrote its output";
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  GridReport rep = run_cuda_grid(w, sample_cases(n, {7, 4095}), Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

// ===== several calls in flight =======================================================

namespace {

enum class Batch {
  kBackToBack,      // each rank's thread: the calls one after the other, no group
  kGroupPerRank,    // each rank's thread: all its calls in one group
  kOneThreadGroup,  // this thread: every rank's calls in one group
};

const char *batch_name(Batch b) {
  switch (b) {
  case Batch::kBackToBack: return "BackToBack";
  case Batch::kGroupPerRank: return "GroupPerRank";
  case Batch::kOneThreadGroup: return "OneThreadGroup";
  }
  return "?";
}

// Enqueues every case of `cases` on every rank's stream (per `how`) without
// waiting in between, then waits once per stream and checks every result.
std::string run_batch(CudaWorld &w, const std::vector<CollCase> &cases, Batch how) {
  const int n = w.nranks();
  std::string err = w.reserve(dev_sum_case_bytes(cases));
  if (!err.empty()) return err;
  std::vector<Expected> exp(cases.size());
  w.pool.run([&](int r) {
    for (size_t i = (size_t)r; i < cases.size(); i += (size_t)n) expected_for(cases[i], &exp[i]);
  });
  std::vector<std::vector<std::unique_ptr<DevRankBufs>>> bufs((size_t)n);
  std::vector<std::string> errs((size_t)n);
  std::vector<char> failed((size_t)n, 0);
  auto issue_rank = [&](int r) {
    koloResult_t res = koloSuccess;
    for (size_t i = 0; i < cases.size() && res == koloSuccess; i++) {
      res = dev_issue(cases[i], r, *bufs[r][i], w.comms[r], w.streams[r]);
      if (res != koloSuccess) errs[r] += cases[i].str() + ": " + result_text(coll_name(cases[i].coll), res, w.comms[r]);
    }
    return res;
  };
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    w.arenas[r].reset();
    for (const CollCase &c : cases) {
      bufs[r].emplace_back(new DevRankBufs);
      std::string e = dev_prepare(c, r, &w.arenas[r], w.streams[r], bufs[r].back().get());
      if (!e.empty()) {
        errs[r] = c.str() + ": " + e;
        failed[r] = 1;
        return;
      }
    }
    if (how == Batch::kOneThreadGroup) return;
    koloResult_t res = koloSuccess;
    if (how == Batch::kGroupPerRank) res = koloGroupStart();
    if (res == koloSuccess) res = issue_rank(r);
    if (how == Batch::kGroupPerRank) {
      koloResult_t end = koloGroupEnd();
      if (end != koloSuccess) errs[r] += " " + result_text("koloGroupEnd", end, w.comms[r]);
      if (res == koloSuccess) res = end;
    }
    failed[r] = res != koloSuccess;
  });
  if (how == Batch::kOneThreadGroup &&
      std::none_of(failed.begin(), failed.end(), [](char f) { return f != 0; })) {
    cudaSetDevice(w.dev);
    koloResult_t res = koloGroupStart();
    for (int r = 0; r < n && res == koloSuccess; r++) {
      res = issue_rank(r);
      failed[r] = res != koloSuccess;
    }
    koloResult_t end = koloGroupEnd();
    if (end != koloSuccess) {
      errs[0] += " " + result_text("koloGroupEnd", end, w.comms[0]);
      failed[0] = 1;
    }
  }
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    bool busy = false;
    std::string werr = wait_stream(w.streams[r], kStreamWaitMs, nullptr, &busy);
    if (busy) w.wedge();
    if (!werr.empty()) errs[r] += " " + werr;
    if (failed[r] || !werr.empty()) return;
    std::string aerr = async_error_text(w.comms[r]);
    if (!aerr.empty()) {
      errs[r] = aerr;
      return;
    }
    for (size_t i = 0; i < cases.size(); i++) {
      std::string e = dev_check(cases[i], r, bufs[r][i].get(), w.streams[r], exp[i]);
      if (!e.empty()) errs[r] += "\n    " + cases[i].str() + ": " + e;
    }
  });
  std::string all;
  for (int r = 0; r < n; r++)
    if (!errs[r].empty()) all += "\n  rank " + std::to_string(r) + ": " + errs[r];
  return all;
}

}  // namespace

class CudaBatch : public ::testing::TestWithParam<std::tuple<Batch, int>> {};

// Batches of 7 calls per rank (every collective, different dtypes, ops,
// roots, counts, in and out of place) enqueued on each rank's stream before
// one wait: the calls return without synchronizing, run in stream order, and
// consecutive kernels on a connector continue where the last stopped.
TEST_P(CudaBatch, ManyCallsThenOneWait) {
  KT_REQUIRE_CUDA();
  auto [how, n] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases = sample_cases(n, {0, 7, 4095, 250001});
  const size_t batch = 7;
  for (size_t first = 0; first < cases.size(); first += batch) {
    std::vector<CollCase> part(cases.begin() + (long)first,
                               cases.begin() + (long)std::min(cases.size(), first + batch));
    std::string errs = run_batch(w, part, how);
    ASSERT_EQ(errs, "") << "batch starting at case " << first;
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaThreads, CudaBatch,
    ::testing::Combine(::testing::Values(Batch::kBackToBack, Batch::kGroupPerRank, Batch::kOneThreadGroup),
                       ::testing::Values(1, 2, 4)),
    [](const ::testing::TestParamInfo<CudaBatch::ParamType> &p) {
      return std::string(batch_name(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) +
             "ranks";
    });

// Every multi-peer collective in one batch with send/recv shifts and ring
// collectives (the send/recv pairs share the multi-peer collectives'
// point-to-point pipes), in the three ways of issuing them.  Runs of calls
// of one dtype and protocol (the first five LL, then two SIMPLE) could share
// a launch but for their ends: the planner must keep them apart.
class CudaPeerBatch : public ::testing::TestWithParam<std::tuple<Batch, int>> {};

TEST_P(CudaPeerBatch, MixedWithSendRecvAndRings) {
  KT_REQUIRE_CUDA();
  auto [how, n] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  int v = 1;
  const koloDataType_t f32 = koloFloat32;
  std::vector<CollCase> cases = {make_case(Coll::SendRecv, f32, koloSum, n, 3, false, v++),
                                 make_case(Coll::AlltoAll, f32, koloSum, n, 4095, false, v++),
                                 make_case(Coll::Gather, f32, koloSum, n, 7, true, v++),
                                 make_case(Coll::Scatter, f32, koloSum, n, 1001, false, v++),
                                 make_case(Coll::SendRecv, f32, koloSum, n, 5, false, v++),
                                 make_case(Coll::AllReduce, koloInt32, koloMax, n, 7, true, v++),
                                 make_case(Coll::AlltoAll, f32, koloSum, n, 70001, false, v++),
                                 make_case(Coll::Gather, f32, koloSum, n, 70001, false, v++),
                                 make_case(Coll::Bcast, koloFloat16, koloSum, n, 70001, true, v++),
                                 make_case(Coll::AlltoAll, koloUint8, koloSum, n, 5, false, v++)};
  EXPECT_EQ(run_batch(w, cases, how), "");
}

INSTANTIATE_TEST_SUITE_P(
    CudaThreads, CudaPeerBatch,
    ::testing::Combine(::testing::Values(Batch::kBackToBack, Batch::kGroupPerRank, Batch::kOneThreadGroup),
                       ::testing::Values(1, 3, 4)),
    [](const ::testing::TestParamInfo<CudaPeerBatch::ParamType> &p) {
      return std::string(batch_name(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) +
             "ranks";
    });

// ===== point-to-point in groups =========================================================

namespace {

// Data of a message: rank `src` sends message `tag` (distinct per message).
uint64_t msg_seed(uint64_t seed, int src, int tag) {
  return mix64(seed ^ ((uint64_t)src << 32) ^ (uint64_t)tag);
}

// All-to-all with device buffers: rank r sends block j (tag j) of its send
// buffer to rank j, in rotated order (r, r+1, ...), and receives block j of
// its receive buffer from rank j (plain order), itself included, all in one
// group (per rank thread, or every rank in one group from this thread).
// Checks every block, the device guards, and that the send buffer is unchanged.
std::string run_all_to_all(CudaWorld &w, koloDataType_t t, size_t count, uint64_t seed, Issue how) {
  const int n = w.nranks();
  const size_t esz = type_size(t), bytes = (size_t)n * count * esz;
  const unsigned char poison = 0x5a;
  std::string err = w.reserve(2 * dev_region_bytes(bytes));
  if (!err.empty()) return err;
  std::vector<std::vector<unsigned char>> in((size_t)n);
  std::vector<DevBuf> din((size_t)n), dout((size_t)n);
  std::vector<std::string> errs((size_t)n);
  std::vector<char> failed((size_t)n, 0);
  auto issue_rank = [&](int r) {
    koloResult_t res = koloSuccess;
    for (int k = 0; k < n && res == koloSuccess; k++) {
      int j = (r + k) % n;
      res = koloSend(din[r].data() + (size_t)j * count * esz, count, t, j, w.comms[r], w.streams[r]);
    }
    for (int j = 0; j < n && res == koloSuccess; j++)
      res = koloRecv(dout[r].data() + (size_t)j * count * esz, count, t, j, w.comms[r], w.streams[r]);
    if (res != koloSuccess) errs[r] = result_text("send/recv", res, w.comms[r]);
    return res;
  };
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    w.arenas[r].reset();
    in[r].resize(bytes);
    for (int j = 0; j < n; j++)
      fill_input(in[r].data() + (size_t)j * count * esz, count, msg_seed(seed, r, j), 0, 0, t, koloSum);
    std::string e = dev_buf_place(&w.arenas[r], bytes, (size_t)(r % 4) * esz, &din[r]);
    if (e.empty()) e = dev_buf_place(&w.arenas[r], bytes, (size_t)((r + 1) % 4) * esz, &dout[r]);
    if (e.empty()) e = dev_buf_upload(din[r], in[r].data(), poison, w.streams[r]);
    if (e.empty()) e = dev_buf_upload(dout[r], nullptr, poison, w.streams[r]);
    if (!e.empty()) {
      errs[r] = e;
      failed[r] = 1;
      return;
    }
    if (how != Issue::kPerThread) return;
    koloResult_t res = koloGroupStart();
    if (res == koloSuccess) res = issue_rank(r);
    koloResult_t end = koloGroupEnd();
    if (end != koloSuccess) errs[r] += " " + result_text("koloGroupEnd", end, w.comms[r]);
    failed[r] = res != koloSuccess || end != koloSuccess;
  });
  if (how == Issue::kOneThread && std::none_of(failed.begin(), failed.end(), [](char f) { return f != 0; })) {
    cudaSetDevice(w.dev);
    koloResult_t res = koloGroupStart();
    for (int r = 0; r < n && res == koloSuccess; r++) {
      res = issue_rank(r);
      failed[r] = res != koloSuccess;
    }
    koloResult_t end = koloGroupEnd();
    if (end != koloSuccess) {
      errs[0] += " " + result_text("koloGroupEnd", end, w.comms[0]);
      failed[0] = 1;
    }
  }
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    bool busy = false;
    std::string werr = wait_stream(w.streams[r], kStreamWaitMs, nullptr, &busy);
    if (busy) w.wedge();
    if (!werr.empty()) errs[r] += " " + werr;
    if (failed[r] || !werr.empty()) return;
    std::string e = async_error_text(w.comms[r]);
    if (!e.empty()) {
      errs[r] = e;
      return;
    }
    std::vector<unsigned char> back_in, back_out;
    e = dev_buf_download(din[r], &back_in, w.streams[r]);
    if (e.empty()) e = dev_buf_download(dout[r], &back_out, w.streams[r]);
    if (e.empty()) e = cuda_text("cudaStreamSynchronize", cudaStreamSynchronize(w.streams[r]));
    if (e.empty()) e = dev_buf_guards("send buffer", din[r], back_in, poison);
    if (e.empty()) e = dev_buf_guards("recv buffer", dout[r], back_out, poison);
    if (e.empty() && bytes && std::memcmp(back_in.data() + din[r].data_off, in[r].data(), bytes) != 0)
      e = "the send buffer was modified";
    Expected want;
    for (int j = 0; j < n && e.empty(); j++) {
      expect_init(&want, t, true, count);
      fill_copy(&want, msg_seed(seed, j, r), 0, 0, count, koloSum);
      std::string d = compare(back_out.data() + dout[r].data_off + (size_t)j * count * esz, want, 0, count);
      if (!d.empty()) e = "block from rank " + std::to_string(j) + ": " + d;
    }
    errs[r] += e;
  });
  std::string all;
  for (int r = 0; r < n; r++)
    if (!errs[r].empty()) all += "\n  rank " + std::to_string(r) + ": " + errs[r];
  return all;
}

}  // namespace

class CudaP2P : public ::testing::TestWithParam<std::tuple<int, Issue>> {};

TEST_P(CudaP2P, AllToAll) {
  KT_REQUIRE_CUDA();
  auto [n, how] = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (koloDataType_t t : {koloInt8, koloBfloat16, koloFloat64})
    for (size_t count : {(size_t)0, (size_t)3, (size_t)33333, (size_t)300001}) {
      std::string errs = run_all_to_all(w, t, count, base_seed() ^ (count * 31 + t), how);
      ASSERT_EQ(errs, "") << type_name(t) << " count " << count;
    }
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaP2P,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8), ::testing::ValuesIn(kBothIssues)),
                         [](const ::testing::TestParamInfo<CudaP2P::ParamType> &p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  issue_name(std::get<1>(p.param));
                         });

// ===== CUDA graphs ===========================================================================

namespace {

// One case captured per rank after a warm-up call (eager, checked): each
// rank's thread captures the call on its stream (cudaStreamCaptureModeThreadLocal)
// into a graph; the capture must not run it (an out-of-place output keeps its
// poison); then 3 replays, each after new inputs and fresh poison are copied
// into the same device buffers, each result checked; then `after`, an eager
// call on the same communicators (step counters stayed consistent).
void capture_replay(CudaWorld &w, const CollCase &c, const CollCase &after) {
  const int n = w.nranks();
  SCOPED_TRACE(c.str());
  GridReport warm = run_cuda_grid(w, {c}, Issue::kPerThread);
  ASSERT_GRID_OK(warm) << " (warm-up)";
  ASSERT_EQ(w.reserve(dev_case_bytes(c)), "");
  std::vector<std::unique_ptr<DevRankBufs>> bufs((size_t)n);
  std::vector<cudaGraph_t> graphs((size_t)n, nullptr);
  std::vector<cudaGraphExec_t> execs((size_t)n, nullptr);
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    cudaStream_t s = w.streams[r];
    w.arenas[r].reset();
    bufs[r].reset(new DevRankBufs);
    std::string e = dev_prepare(c, r, &w.arenas[r], s, bufs[r].get());
    if (e.empty()) e = cuda_text("cudaStreamSynchronize", cudaStreamSynchronize(s));
    if (!e.empty()) {
      errs[r] = e;
      return;
    }
    cudaError_t ce = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (ce != cudaSuccess) {
      errs[r] = cuda_text("cudaStreamBeginCapture", ce);
      return;
    }
    koloResult_t res = dev_issue(c, r, *bufs[r], w.comms[r], s);
    ce = cudaStreamEndCapture(s, &graphs[r]);
    if (res != koloSuccess) {
      errs[r] = result_text((std::string(coll_name(c.coll)) + " during capture").c_str(), res, w.comms[r]);
      return;
    }
    if (ce != cudaSuccess) {
      errs[r] = cuda_text("cudaStreamEndCapture", ce) + " (the call did something a capture refuses)";
      return;
    }
    ce = cudaGraphInstantiateWithFlags(&execs[r], graphs[r], 0);
    if (ce != cudaSuccess) {
      execs[r] = nullptr;
      errs[r] = cuda_text("cudaGraphInstantiateWithFlags", ce);
      return;
    }
    // Nothing ran: the stream is idle and an out-of-place result still poison.
    ce = cudaStreamQuery(s);
    if (ce != cudaSuccess) {
      errs[r] = cuda_text("cudaStreamQuery after the capture", ce);
      return;
    }
    if (!c.in_place) {
      std::vector<unsigned char> out;
      e = dev_buf_download(bufs[r]->b, &out, s);
      if (e.empty()) e = cuda_text("cudaStreamSynchronize", cudaStreamSynchronize(s));
      if (e.empty()) {
        for (size_t i = 0; i < bufs[r]->b.bytes; i++)
          if (out[bufs[r]->b.data_off + i] != bufs[r]->poison) {
            e = "the capture ran the call: byte " + std::to_string(i) + " of recvbuff was written";
            break;
          }
      }
      errs[r] = e;
    }
  });
  bool captured = true;
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(errs[r], "") << "capture, rank " << r;
    captured &= errs[r].empty();
  }
  if (captured) {
    Expected e;
    for (int k = 0; k < 3; k++) {
      CollCase ck = c;
      ck.seed = mix64(c.seed + 1 + (uint64_t)k);
      expected_init(ck, &e);
      w.pool.run([&](int r) {
        size_t per = (e.n + (size_t)n - 1) / (size_t)n, b = std::min(e.n, per * (size_t)r);
        expected_fill(ck, &e, b, std::min(e.n, b + per));
      });
      w.pool.run([&](int r) {
        cudaSetDevice(w.dev);
        cudaStream_t s = w.streams[r];
        std::string err = dev_reprepare(ck, r, s, bufs[r].get());
        if (err.empty()) err = cuda_text("cudaGraphLaunch", cudaGraphLaunch(execs[r], s));
        bool busy = false;
        if (err.empty()) err = wait_stream(s, kStreamWaitMs, nullptr, &busy);
        if (busy) w.wedge();
        if (err.empty()) err = async_error_text(w.comms[r]);
        if (err.empty()) err = dev_check(ck, r, bufs[r].get(), s, e);
        errs[r] = err;
      });
      bool ok = true;
      for (int r = 0; r < n; r++) {
        EXPECT_EQ(errs[r], "") << "replay " << k << ", rank " << r;
        ok &= errs[r].empty();
      }
      if (!ok) break;
    }
  }
  for (int r = 0; r < n; r++) {
    if (execs[r]) cudaGraphExecDestroy(execs[r]);
    if (graphs[r]) cudaGraphDestroy(graphs[r]);
  }
  if (!captured || w.wedged) return;
  GridReport rep = run_cuda_grid(w, {after}, Issue::kPerThread);
  EXPECT_GRID_OK(rep) << " (eager call after the replays)";
}

}  // namespace

class CudaGraph : public ::testing::TestWithParam<int> {};

// Per case (an LL-sized float32 sum, a SIMPLE-sized bfloat16 sum in place,
// a misaligned int32 max, a float32 premul-sum whose scalar is in device
// memory, so that each replay must read the scalar its reprepare wrote):
// a warm-up call (eager, checked), then each rank's
// thread captures the same call on its stream (cudaStreamCaptureModeThreadLocal)
// into a graph: the capture must not run it (an out-of-place output keeps its
// poison); then 3 replays, each after new inputs and fresh poison are copied
// into the same device buffers, each result checked; then an eager call on
// the same communicators (step counters stayed consistent).
TEST_P(CudaGraph, CaptureReplayAllReduce) {
  KT_REQUIRE_CUDA();
  const int n = GetParam();
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  struct Pick {
    koloDataType_t t;
    koloRedOp_t op;
    size_t count;
    bool in_place;
    int variant;
  };
  const Pick picks[] = {{koloFloat32, koloSum, 4095, false, 1},
                        {koloBfloat16, koloSum, kLargeCount, true, 2},
                        {koloInt32, koloMax, 70001, false, 3},
                        {koloFloat32, kPreMulSum, 4095, false, 4}};
  for (const Pick &p : picks) {
    CollCase c = make_case(Coll::AllReduce, p.t, p.op, n, p.count, p.in_place, p.variant);
    // the residence comes from the seed: the premul pick needs koloScalarDevice
    for (int v = p.variant + 100; is_premul(c) && premul_residence(c) != koloScalarDevice; v += 100)
      c = make_case(Coll::AllReduce, p.t, p.op, n, p.count, p.in_place, v);
    capture_replay(w, c, make_case(Coll::AllReduce, p.t, p.op, n, p.count, p.in_place, p.variant + 30));
    if (w.wedged) return;
  }
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaGraph, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

// The first all-to-all makes the pipes to every peer, which allocates
// device memory: captured, it is refused (koloInvalidUsage, naming the call
// and the way out), and the communicator goes on (the same call, eager).
TEST(CudaPeerGraph, CapturedFirstCallIsRefused) {
  KT_REQUIRE_CUDA();
  const int n = 2;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  const CollCase c = make_case(Coll::AlltoAll, koloFloat32, koloSum, n, 100, false, 1);
  ASSERT_EQ(w.reserve(dev_case_bytes(c)), "");
  std::vector<koloResult_t> res((size_t)n, koloSuccess);
  std::vector<std::string> errs((size_t)n), texts((size_t)n);
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    w.arenas[r].reset();
    DevRankBufs d;
    errs[r] = dev_prepare(c, r, &w.arenas[r], w.streams[r], &d);
    if (errs[r].empty()) errs[r] = cuda_text("cudaStreamSynchronize", cudaStreamSynchronize(w.streams[r]));
    if (!errs[r].empty()) return;
    errs[r] = cuda_text("cudaStreamBeginCapture", cudaStreamBeginCapture(w.streams[r], cudaStreamCaptureModeThreadLocal));
    if (!errs[r].empty()) return;
    res[r] = dev_issue(c, r, d, w.comms[r], w.streams[r]);
    texts[r] = koloGetLastError(w.comms[r]);
    cudaGraph_t g = nullptr;
    errs[r] = cuda_text("cudaStreamEndCapture", cudaStreamEndCapture(w.streams[r], &g));
    if (g) cudaGraphDestroy(g);
  });
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(errs[r], "") << "rank " << r;
    EXPECT_EQ(res[r], koloInvalidUsage) << "rank " << r;
    EXPECT_CONTAINS(texts[r], "AlltoAll");
    EXPECT_CONTAINS(texts[r], "warm-up");
  }
  GridReport rep = run_cuda_grid(w, {c}, Issue::kPerThread);
  EXPECT_GRID_OK(rep) << " (eager, after the refusal)";
}

// All-to-all (LL-sized), gather in place and scatter (SIMPLE-sized) after
// their warm-ups made the pipes: capture_replay.
TEST(CudaPeerGraph, CaptureReplayMultiPeer) {
  KT_REQUIRE_CUDA();
  const int n = 3;
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  const CollCase cases[] = {make_case(Coll::AlltoAll, koloFloat32, koloSum, n, 1001, false, 1),
                            make_case(Coll::Gather, koloBfloat16, koloSum, n, 70001, true, 2),
                            make_case(Coll::Scatter, koloInt32, koloSum, n, 70001, false, 4)};
  for (const CollCase &c : cases) {
    CollCase after = make_case(c.coll, c.type, koloSum, n, c.count, c.in_place, 30);
    capture_replay(w, c, after);
    if (w.wedged) return;
  }
}

// ===== kernels that wait for a peer: abort and timeout ==========================================

namespace {

// Upper bound on the time from koloCommAbort (or a timeout's expiry) to the
// end of the kernels it must stop (2 loaded cores, a busy GPU).
const double kStopBoundMs = kt_ms(5000);

// float32 counts of the waiting calls: 4 KiB (LL) and 256 KiB (SIMPLE),
// for the default LL threshold of 64 KiB.
const size_t kWaitCounts[] = {1024, 1 << 16};
std::string wait_count_name(size_t count) {
  return count * 4 <= ll_threshold() ? "LL" : "Simple";
}

// What issue_on left: per rank the call's buffers, result and time.
struct Lonely {
  std::vector<std::unique_ptr<DevRankBufs>> bufs;
  std::vector<koloResult_t> res;
  std::vector<double> call_ms;
  std::vector<std::string> errs;
  double issued_at = 0;
};

// An all-reduce of `count` float32 on every rank, checked: pipes made,
// kernels loaded, before a test leaves a rank out.
void warm_up(CudaWorld &w, size_t count, int variant) {
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, w.nranks(), count, false, variant);
  GridReport rep = run_cuda_grid(w, {c}, Issue::kPerThread);
  ASSERT_GRID_OK(rep) << " (warm-up with every rank)";
}

// Issues `c` on the ranks in `callers` only (their threads at once); the
// calls must succeed and return within 1 s (they only enqueue).
void issue_on(CudaWorld &w, const CollCase &c, const std::vector<int> &callers, Lonely *l) {
  const int n = w.nranks();
  l->bufs.resize((size_t)n);
  l->res.assign((size_t)n, koloSuccess);
  l->call_ms.assign((size_t)n, 0);
  l->errs.assign((size_t)n, "");
  ASSERT_EQ(w.reserve(dev_case_bytes(c)), "");
  l->issued_at = now_ms();
  w.pool.run([&](int r) {
    if (std::find(callers.begin(), callers.end(), r) == callers.end()) return;
    cudaSetDevice(w.dev);
    w.arenas[r].reset();
    l->bufs[r].reset(new DevRankBufs);
    l->errs[r] = dev_prepare(c, r, &w.arenas[r], w.streams[r], l->bufs[r].get());
    if (!l->errs[r].empty()) return;
    double t0 = now_ms();
    l->res[r] = dev_issue(c, r, *l->bufs[r], w.comms[r], w.streams[r]);
    l->call_ms[r] = now_ms() - t0;
  });
  for (int r : callers) {
    ASSERT_EQ(l->errs[r], "") << "rank " << r;
    ASSERT_EQ(l->res[r], koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[r]);
    EXPECT_LT(l->call_ms[r], kt_ms(1000)) << "rank " << r << ": the call must enqueue and return, not wait for its peers";
  }
}

}  // namespace

class CudaAbort : public ::testing::TestWithParam<size_t> {};

// 2 ranks (timeout 30 s, so only the abort can end the kernel in time):
// after a warm-up, rank 0 calls an all-reduce (LL-sized, or SIMPLE-sized)
// that rank 1 never joins; its kernel spins (the stream is still busy 500 ms
// later); koloCommAbort on rank 0's communicator from this thread ends it:
// the stream is done within 5 s of the abort call, without a CUDA error (no
// sticky error: the device stays usable, which a fresh 2-rank CUDA world then
// shows).  (koloCommAbort frees the communicator, so an error can only be
// reported on the peers: CudaAbortPeers.)
TEST_P(CudaAbort, AbortEndsSpinningKernel) {
  KT_REQUIRE_CUDA();
  const size_t count = GetParam();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 30000;
  {
    CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    warm_up(w, count, 1);
    if (HasFatalFailure()) return;
    CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, count, false, 2);
    Lonely l;
    issue_on(w, c, {0}, &l);
    if (HasFatalFailure()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cudaError_t q = cudaStreamQuery(w.streams[0]);
    EXPECT_EQ(q, cudaErrorNotReady) << "rank 0's kernel should still wait for rank 1: " << cudaGetErrorName(q);
    const double t0 = now_ms();
    EXPECT_EQ(koloCommAbort(w.comms[0]), koloSuccess);
    w.comms[0] = nullptr;  // freed by the abort
    const double abort_ms = now_ms() - t0;
    bool busy = false;
    std::string werr = wait_stream(w.streams[0], 60000, nullptr, &busy);
    const double ms = now_ms() - t0;
    if (busy) w.wedge();
    EXPECT_EQ(werr, "") << "rank 0's stream after the abort";
    EXPECT_LT(ms, kStopBoundMs) << "rank 0's kernel ended " << ms << " ms after koloCommAbort";
    std::printf("  koloCommAbort took %.0f ms; rank 0's stream was done %.0f ms after it was called\n",
                abort_ms, ms);
    if (busy) return;
  }
  CudaWorld w2(2);
  ASSERT_TRUE(w2.ok()) << w2.init_error;
  GridReport rep = run_cuda_grid(w2, sample_cases(2, {4095}), Issue::kPerThread);
  EXPECT_GRID_OK(rep) << " (a new world after the abort)";
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaAbort, ::testing::ValuesIn(kWaitCounts),
                         [](const ::testing::TestParamInfo<size_t> &p) { return wait_count_name(p.param); });

class CudaAbortPeers : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// n ranks (timeout 30 s): after a warm-up, ranks 1..n-1 call an all-reduce
// that rank 0 never joins; 300 ms later (their kernels still spin)
// koloCommAbort on rank 0's communicator: every other rank's stream is done
// within 5 s without a CUDA error, and its koloCommGetAsyncError reports
// koloRemoteError (or koloTimeout) with koloGetLastError naming the peer it
// waited on: rank 0 (2 ranks), or with 3 ranks possibly the other waiting
// rank that stopped because of rank 0 (a stop on the device does not carry
// its origin; koloCommGetAsyncError passes it on).
TEST_P(CudaAbortPeers, AbortWakesWaitingPeers) {
  KT_REQUIRE_CUDA();
  auto [n, count] = GetParam();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 30000;
  CudaWorld w(n, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  warm_up(w, count, 3);
  if (HasFatalFailure()) return;
  std::vector<int> callers;
  for (int r = 1; r < n; r++) callers.push_back(r);
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, n, count, false, 4);
  Lonely l;
  issue_on(w, c, callers, &l);
  if (HasFatalFailure()) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int r : callers) {
    cudaError_t q = cudaStreamQuery(w.streams[r]);
    EXPECT_EQ(q, cudaErrorNotReady) << "rank " << r << "'s kernel should still wait for rank 0: " << cudaGetErrorName(q);
  }
  const double t0 = now_ms();
  EXPECT_EQ(koloCommAbort(w.comms[0]), koloSuccess);
  w.comms[0] = nullptr;  // freed by the abort
  std::vector<std::string> werr((size_t)n), text((size_t)n);
  std::vector<double> done_ms((size_t)n, 0);
  std::vector<koloResult_t> async((size_t)n, koloSuccess);
  w.pool.run([&](int r) {
    if (r == 0) return;
    cudaSetDevice(w.dev);
    bool busy = false;
    werr[r] = wait_stream(w.streams[r], 60000, nullptr, &busy);
    done_ms[r] = now_ms() - t0;
    if (busy) {
      w.wedge();
      return;
    }
    if (koloCommGetAsyncError(w.comms[r], &async[r]) != koloSuccess) async[r] = koloNumResults;
    text[r] = koloGetLastError(w.comms[r]);
  });
  for (int r = 1; r < n; r++) {
    EXPECT_EQ(werr[r], "") << "rank " << r << "'s stream";
    EXPECT_LT(done_ms[r], kStopBoundMs) << "rank " << r << "'s kernel ended " << done_ms[r] << " ms after the abort";
    EXPECT_TRUE(async[r] == koloRemoteError || async[r] == koloTimeout)
        << "rank " << r << ": koloCommGetAsyncError reports " << koloGetErrorString(async[r]);
    // The rank it waited on: rank 0 itself, or (n > 2, a rank not next to
    // rank 0 in the ring) a peer that stopped because of rank 0.
    bool names_peer = text[r].find("rank 0") != std::string::npos;
    for (int k = 1; k < n && n > 2; k++)
      names_peer |= k != r && text[r].find("rank " + std::to_string(k)) != std::string::npos;
    EXPECT_TRUE(names_peer) << n << " ranks, rank " << r << ": \"" << text[r] << "\" names no peer";
    if (n == 2) {
      EXPECT_CONTAINS(text[r], "rank 0");
    }
    std::printf("  %d ranks: rank %d: %s %.0f ms after the abort: %s\n", n, r, koloGetErrorString(async[r]),
                done_ms[r], text[r].c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaAbortPeers,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::ValuesIn(kWaitCounts)),
                         [](const ::testing::TestParamInfo<CudaAbortPeers::ParamType> &p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  wait_count_name(std::get<1>(p.param));
                         });

class CudaTimeout : public ::testing::TestWithParam<std::tuple<bool, size_t>> {};

// 2 ranks with a 2 s timeout (KOLO_TIMEOUT_MS=2000, or config.timeoutMs =
// 2000): after a warm-up, rank 0 calls an all-reduce (LL- or SIMPLE-sized)
// that rank 1 (alive) never joins.  The call returns at once; the kernel
// gives up after the timeout (not before 90% of it, within 5 s after it),
// the stream ends without a CUDA error, koloCommGetAsyncError reports
// koloTimeout and koloGetLastError names rank 1.
TEST_P(CudaTimeout, PeerNeverCallsKernelGivesUp) {
  KT_REQUIRE_CUDA();
  auto [from_env, count] = GetParam();
  const int timeout_ms = 2000;
  std::unique_ptr<ScopedEnv> env;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  if (from_env) env.reset(new ScopedEnv("KOLO_TIMEOUT_MS", std::to_string(timeout_ms)));
  else cfg.timeoutMs = timeout_ms;
  CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  warm_up(w, count, 5);
  if (HasFatalFailure()) return;
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, count, false, 6);
  Lonely l;
  issue_on(w, c, {0}, &l);
  if (HasFatalFailure()) return;
  bool busy = false;
  std::string werr = wait_stream(w.streams[0], 60000, nullptr, &busy);
  const double ms = now_ms() - l.issued_at;
  if (busy) w.wedge();
  EXPECT_EQ(werr, "") << "rank 0's stream";
  EXPECT_GE(ms, timeout_ms * 0.9) << "the kernel gave up before the timeout";
  EXPECT_LT(ms, timeout_ms + kStopBoundMs) << "the kernel gave up " << ms << " ms after the call";
  koloResult_t async = koloSuccess;
  ASSERT_EQ(koloCommGetAsyncError(w.comms[0], &async), koloSuccess);
  EXPECT_EQ(async, koloTimeout) << koloGetErrorString(async) << ": " << koloGetLastError(w.comms[0]);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "rank 1");
  std::printf("  rank 0's kernel stopped %.0f ms after the call: %s: %s\n", ms, koloGetErrorString(async),
              koloGetLastError(w.comms[0]));
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaTimeout,
                         ::testing::Combine(::testing::Bool(), ::testing::ValuesIn(kWaitCounts)),
                         [](const ::testing::TestParamInfo<CudaTimeout::ParamType> &p) {
                           return std::string(std::get<0>(p.param) ? "KoloTimeoutMsEnv_" : "ConfigTimeoutMs_") +
                                  wait_count_name(std::get<1>(p.param));
                         });

// 3 ranks, 2 s timeout: after an all-to-all on every rank (the pipes
// exist), ranks 0 and 1 call another and rank 2 does not.  The calls return
// at once; rank 0's kernel, waiting to receive from rank 2, gives up after
// the timeout, and koloCommGetAsyncError names rank 2; rank 1's fails too
// (it also waits for rank 2, or is stopped by rank 0).
TEST(CudaPeerTimeout, AllToAllNamesTheRankThatNeverCalls) {
  KT_REQUIRE_CUDA();
  const int n = 3, timeout_ms = 2000;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = timeout_ms;
  CudaWorld w(n, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  CollCase c = make_case(Coll::AlltoAll, koloFloat32, koloSum, n, 1000, false, 3);
  GridReport warm = run_cuda_grid(w, {c}, Issue::kPerThread);
  ASSERT_GRID_OK(warm) << " (warm-up with every rank)";
  Lonely l;
  issue_on(w, c, {0, 1}, &l);
  if (HasFatalFailure()) return;
  for (int r = 0; r < 2; r++) {
    bool busy = false;
    std::string werr = wait_stream(w.streams[(size_t)r], 60000, nullptr, &busy);
    const double ms = now_ms() - l.issued_at;
    if (busy) w.wedge();
    EXPECT_EQ(werr, "") << "rank " << r << "'s stream";
    EXPECT_LT(ms, timeout_ms + kStopBoundMs) << "rank " << r;
    koloResult_t async = koloSuccess;
    ASSERT_EQ(koloCommGetAsyncError(w.comms[(size_t)r], &async), koloSuccess);
    EXPECT_NE(async, koloSuccess) << "rank " << r;
    if (r == 0) {
      EXPECT_GE(ms, timeout_ms * 0.9) << "the kernel gave up before the timeout";
      EXPECT_EQ(async, koloTimeout) << koloGetLastError(w.comms[0]);
      EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "rank 2");
    }
  }
}

// ===== ranks as processes: the parent's and the children's sides ===========================

namespace {

struct TypeOp {
  koloDataType_t t;
  koloRedOp_t op;
};
const TypeOp kProcTypes[] = {
    {koloFloat32, koloSum}, {koloInt32, koloMax}, {koloBfloat16, koloSum}, {koloFloat16, koloAvg}};

// test_e2e_procs.cc's grid, lighter at 1 MiB + 3 (kernels of several
// processes on one GPU are time-sliced): every collective for the four
// dtype/op pairs at counts {0,1,7,4095} in and out of place; at 1 MiB + 3
// float32 sum out of place (and in place for N <= 4) and, for N <= 4, the
// other pairs out of place; the all-reduce around the LL/SIMPLE switch.
std::vector<CollCase> cuda_proc_grid(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : kAllColls)
    for (const TypeOp &to : kProcTypes) {
      for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)4095})
        for (int ip = 0; ip < (has_in_place(coll) ? 2 : 1); ip++)
          cases.push_back(make_case(coll, to.t, to.op, n, count, ip == 1, v++));
      if (sanitized_build()) continue;
      bool f32sum = to.t == koloFloat32 && to.op == koloSum;
      if (n <= 4 || f32sum) cases.push_back(make_case(coll, to.t, to.op, n, kLargeCount, false, v++));
      if (f32sum && n <= 4 && has_in_place(coll)) cases.push_back(make_case(coll, to.t, to.op, n, kLargeCount, true, v++));
    }
  for (const CollCase &c : protocol_cases(Coll::AllReduce, n))
    if (c.type == koloFloat32) cases.push_back(c);
  // all-to-all, gather, scatter, bcast: dtypes in turn, and 1 MiB + 3 (in
  // all, for all-to-all) at n <= 4
  for (Coll coll : kPeerColls) {
    for (size_t count : {(size_t)0, (size_t)7, (size_t)4095})
      for (int ip = has_out_of_place(coll) ? 0 : 1; ip <= (has_in_place(coll) ? 1 : 0); ip++, v++)
        cases.push_back(make_case(coll, kProcTypes[v % 4].t, koloSum, n, count, ip == 1, v));
    if (!sanitized_build() && n <= 4)
      cases.push_back(make_case(coll, koloFloat32, koloSum, n, coll == Coll::AlltoAll ? kLargeCount / (size_t)n : kLargeCount,
                                coll == Coll::Bcast, v++));
  }
  return cases;
}

std::string to_hex(const void *p, size_t n) {
  static const char *d = "0123456789abcdef";
  std::string s;
  const unsigned char *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; i++) {
    s += d[b[i] >> 4];
    s += d[b[i] & 15];
  }
  return s;
}

bool from_hex(const std::string &s, void *p, size_t n) {
  if (s.size() != 2 * n) return false;
  unsigned char *b = static_cast<unsigned char *>(p);
  for (size_t i = 0; i < n; i++) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    b[i] = (unsigned char)v;
  }
  return true;
}

std::string leaks_text(const std::vector<std::string> &leaks) {
  std::string s;
  for (const std::string &l : leaks) s += " " + l;
  return s;
}

constexpr const char *kChildVar = "KOLO_TEST_CUDA_CHILD";  // "<mode> <n> <rank>"
constexpr const char *kIdVar = "KOLO_TEST_CUDA_ID";        // the unique id in hex

// Forks n children, each execs this binary running CudaProcsChild.DISABLED_Rank
// as rank i of a job of `mode`; asserts they all exit 0 and leave no
// kolo-* segment in /dev/shm.  Each must have run and passed that test:
// an exit status of 0 alone would also pass a child that skipped it.
void run_cuda_procs(const std::string &mode, int n, int per_host) {
#ifndef KOLO_CUDA_SIM
  // On GPUs, n processes take device rank % devices: with fewer devices than
  // processes some share one, which kolo refuses without MPS (checked on
  // the model by CudaSharedGpu).
  int devices = 0, mps = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0 && devices < n &&
      (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, 0) != cudaSuccess || mps == 0))
    GTEST_SKIP() << n << " processes, " << devices << " GPU(s), MPS off: needs a GPU per process or MPS "
                 << "(nvidia-cuda-mps-control -d)";
#endif
  koloUniqueId id;
  ASSERT_EQ(koloGetUniqueId(&id), koloSuccess) << koloGetLastError(nullptr);
  const std::string hex = to_hex(&id, sizeof id);
  // Everything a child needs is built here: between fork and exec it only
  // calls dup2 and execve.
  std::vector<std::string> base;
  for (char **e = environ; *e; e++) {
    std::string kv = *e;
    if (kv.compare(0, 6, "GTEST_") == 0 || kv.compare(0, 14, "KOLO_TEST_CUDA") == 0) continue;
    base.push_back(kv);
  }
  // Each child takes device rank % devices, on the model under its MPS or a
  // device of its own; "refused" keeps its test's time slices on one device.
  if (mode != "refused")
    for (const auto &kv : model_gpus_for_procs(n)) base.push_back(kv.first + "=" + kv.second);
  std::vector<std::vector<std::string>> env_str((size_t)n, base);
  std::vector<std::vector<char *>> envp((size_t)n);
  for (int i = 0; i < n; i++) {
    env_str[i].push_back(std::string(kChildVar) + "=" + mode + " " + std::to_string(n) + " " + std::to_string(i));
    env_str[i].push_back(std::string(kIdVar) + "=" + hex);
    if (per_host > 0) env_str[i].push_back("KOLO_HOSTID=host-" + std::to_string(i / per_host));
    for (std::string &s : env_str[i]) envp[i].push_back(&s[0]);
    envp[i].push_back(nullptr);
  }
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=CudaProcsChild.DISABLED_Rank",
              disabled = "--gtest_also_run_disabled_tests", color = "--gtest_color=no";
  std::vector<char *> argv = {&exe[0], &filter[0], &disabled[0], &color[0], nullptr};
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  std::vector<ChildResult> res = run_children(
      n,
      [&](int i) {
        dup2(2, 1);  // the child's gtest report goes to the pipe the parent shows on failure
        execve(exe.c_str(), argv.data(), envp[i].data());
        std::fprintf(stderr, "execve(%s): %s\n", exe.c_str(), std::strerror(errno));
        return 127;
      },
      kChildTimeoutMs, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_EQ(children_gtest_failures(res, 1), "") << "each child runs CudaProcsChild.DISABLED_Rank";
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm:" << leaks_text(leaks);
}

// ---- the child's side -----------------------------------------------------------------

// Prints why and counts a failure.
#define CHILD_FAIL(...)                         \
  do {                                          \
    std::fprintf(stderr, "rank %d: ", rank);    \
    std::fprintf(stderr, __VA_ARGS__);          \
    std::fprintf(stderr, "\n");                 \
    failures++;                                 \
  } while (0)

// Runs one case as `rank` (one thread per process); "" or what went wrong;
// *fatal when the communicator is unusable afterwards.
std::string child_case(const CollCase &c, int rank, koloComm_t comm, cudaStream_t s, DevArena *arena,
                       bool *fatal) {
  Expected e;
  expected_for_rank(c, rank, &e);
  arena->reset();
  DevRankBufs d;
  *fatal = true;
  std::string err = dev_prepare(c, rank, arena, s, &d);
  if (!err.empty()) return err;
  koloResult_t res = dev_issue(c, rank, d, comm, s);
  if (res != koloSuccess) return result_text(coll_name(c.coll), res, comm);
  bool busy = false;
  err = wait_stream(s, kStreamWaitMs, nullptr, &busy);
  if (busy) arena->freeable = false;
  if (!err.empty()) return err;
  err = async_error_text(comm);
  if (!err.empty()) return err;
  *fatal = false;
  return dev_check(c, rank, &d, s, e);
}

// Mode "mismatch": after a warm-up all-reduce (call #1), the
// highest rank calls all-reduce #2 with 99000 float32s and the others with
// 100000; every rank's kernel must stop with koloInvalidUsage and the
// sentence naming that rank and both calls, well before the 60 s timeout.
// Returns the failures; *abort_comm when the stream never finished.
int child_mismatch(int n, int rank, koloComm_t comm, cudaStream_t s, DevArena *arena, bool *abort_comm) {
  int failures = 0;
  CollCase warm = make_case(Coll::AllReduce, koloFloat32, koloSum, n, 1, false, 1);
  std::string err = arena->reserve(100000 * sizeof(float) + dev_case_bytes(warm));
  bool fatal = false;
  if (err.empty()) err = child_case(warm, rank, comm, s, arena, &fatal);
  if (!err.empty()) {
    CHILD_FAIL("warm-up: %s", err.c_str());
    return failures;
  }
  char *buf = arena->take(100000 * sizeof(float));
  const size_t count = rank == n - 1 ? 99000 : 100000;
  const double t0 = now_ms();
  koloResult_t res = koloAllReduce(buf, buf, count, koloFloat32, koloSum, comm, s);
  if (res != koloSuccess) CHILD_FAIL("%s", result_text("koloAllReduce", res, comm).c_str());
  bool busy = false;
  err = wait_stream(s, 30000, nullptr, &busy);
  if (busy) {
    arena->freeable = false;
    *abort_comm = true;
    CHILD_FAIL("the kernel still runs %.0f ms after the call", now_ms() - t0);
  }
  if (!err.empty()) CHILD_FAIL("%s", err.c_str());
  koloResult_t async = koloSuccess;
  koloCommGetAsyncError(comm, &async);
  const std::string text = koloGetLastError(comm);
  const std::string odd = "rank " + std::to_string(n - 1) + " called AllReduce(count=99000, float32, sum) #2";
  if (async != koloInvalidUsage)
    CHILD_FAIL("koloCommGetAsyncError reports %s (want koloInvalidUsage): %s", koloGetErrorString(async), text.c_str());
  if (text.find(odd) == std::string::npos || text.find("AllReduce(count=100000, float32, sum) #2") == std::string::npos)
    CHILD_FAIL("koloGetLastError does not name both calls: \"%s\"", text.c_str());
  std::fprintf(stderr, "  rank %d after %.0f ms: %s\n", rank, now_ms() - t0, text.c_str());
  return failures;
}

// "refused": ranks of different processes on one GPU without MPS: init
// fails on every rank, naming the ranks, the GPU and what to do.
int child_refused(koloResult_t res, const char *text, int rank) {
  int failures = 0;
  if (res != koloInvalidUsage) CHILD_FAIL("init returned %s, not koloInvalidUsage: %s", koloGetErrorString(res), text);
  static const char *const parts[] = {
      "ranks 0 and 1, of processes",
      "share a GPU (rank 0's CUDA device 0 is rank 1's CUDA device 0) without MPS",
      "give each process its own GPU", "MPS (nvidia-cuda-mps-control -d)"};
  for (const char *part : parts)
    if (std::strstr(text, part) == nullptr) CHILD_FAIL("\"%s\" does not say \"%s\"", text, part);
  return failures;
}

// "mps_budget": 2 processes on one device of 6 SMs holding one executor
// block each, 4 channels asked: under MPS the blocks of both processes
// share the SMs, so each rank gets 3 channels.
int child_mps_budget(int rank, koloComm_t comm) {
  int failures = 0, nch = 0;
  uint32_t nslots = 0;
  size_t slot = 0, min_ch = 0;
  kt_comm_shape(comm, &nch, &nslots, &slot, &min_ch);
  if (nch != 3) CHILD_FAIL("%d channels, not 3: 2 processes' ranks x 3 fill the 6 SMs", nch);
  return failures;
}

// Rank 0 calls alone after a warm-up; the kernel must give up at the timeout
// and name rank 1, which is alive but never calls again.
int child_timeout(int n, int rank, koloComm_t comm, cudaStream_t s, DevArena *arena, bool *abort_comm) {
  int failures = 0;
  const char *tv = std::getenv("KOLO_TIMEOUT_MS");
  const double timeout_ms = tv ? std::atof(tv) : 0;
  if (timeout_ms <= 0) CHILD_FAIL("KOLO_TIMEOUT_MS is not set");
  CollCase warm = make_case(Coll::AllReduce, koloFloat32, koloSum, n, 1 << 16, false, 1);
  CollCase lone = make_case(Coll::AllReduce, koloFloat32, koloSum, n, 1 << 16, false, 2);
  std::string err = arena->reserve(dev_case_bytes(warm));
  bool fatal = false;
  if (err.empty()) err = child_case(warm, rank, comm, s, arena, &fatal);
  if (!err.empty()) {
    CHILD_FAIL("warm-up: %s", err.c_str());
  } else if (rank != 0) {
    // alive, but never calls again
    std::this_thread::sleep_for(std::chrono::milliseconds((long)timeout_ms + 4000));
  } else {
    arena->reset();
    DevRankBufs d;
    err = dev_prepare(lone, rank, arena, s, &d);
    if (!err.empty()) CHILD_FAIL("%s", err.c_str());
    double t0 = now_ms();
    koloResult_t res = err.empty() ? dev_issue(lone, rank, d, comm, s) : koloInternalError;
    double call_ms = now_ms() - t0;
    if (err.empty() && res != koloSuccess)
      CHILD_FAIL("%s", result_text("koloAllReduce", res, comm).c_str());
    if (res == koloSuccess) {
      if (call_ms > 1000) CHILD_FAIL("the call took %.0f ms: it must enqueue and return", call_ms);
      bool busy = false;
      err = wait_stream(s, 60000, nullptr, &busy);
      double ms = now_ms() - t0;
      if (busy) {
        arena->freeable = false;
        *abort_comm = true;
      }
      if (!err.empty()) CHILD_FAIL("%s", err.c_str());
      if (ms < 0.9 * timeout_ms) CHILD_FAIL("the kernel gave up after %.0f ms, before the timeout", ms);
      if (ms > timeout_ms + 5000) CHILD_FAIL("the kernel gave up only after %.0f ms", ms);
      koloResult_t async = koloSuccess;
      koloCommGetAsyncError(comm, &async);
      std::string text = koloGetLastError(comm);
      if (async != koloTimeout)
        CHILD_FAIL("koloCommGetAsyncError reports %s (want koloTimeout): %s", koloGetErrorString(async), text.c_str());
      if (text.find("rank 1") == std::string::npos)
        CHILD_FAIL("koloGetLastError does not name rank 1: \"%s\"", text.c_str());
    }
  }
  return failures;
}

int child_main(const std::string &mode, int n, int rank, const koloUniqueId &id) {
  int failures = 0;
  int ndev = 0;
  cudaError_t ce = cudaGetDeviceCount(&ndev);
  const int dev = ce == cudaSuccess && ndev > 0 ? rank % ndev : 0;
  if (ce == cudaSuccess) ce = cudaSetDevice(dev);
  if (ce != cudaSuccess) {
    CHILD_FAIL("%s", cuda_text("cudaSetDevice", ce).c_str());
    return failures;
  }
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.cudaDev = dev;
  if (mode == "refused" || mode == "mps_budget") cfg.cudaDev = 0;
  if (mode == "mps_budget") {
#ifdef KOLO_CUDA_SIM
    kolo_sim_set_kernel_resources("kolo_exec_kernel", 255, 0);  // 255 x 256 registers: one block per SM
#endif
    cfg.nChannels = 4;
  }
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRankConfig(&comm, n, id, rank, &cfg);
  if (mode == "refused") {
    if (res == koloSuccess) koloCommDestroy(comm);
    return child_refused(res, koloGetLastError(nullptr), rank);
  }
  if (res == koloSuccess && mode == "mps_budget") failures += child_mps_budget(rank, comm);
  if (res != koloSuccess) {
    CHILD_FAIL("koloCommInitRankConfig: %s: %s", koloGetErrorString(res), koloGetLastError(nullptr));
    return failures;
  }
  cudaStream_t s = nullptr;
  ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (ce != cudaSuccess) {
    CHILD_FAIL("%s", cuda_text("cudaStreamCreateWithFlags", ce).c_str());
    koloCommDestroy(comm);
    return failures;
  }
  DevArena arena;
  bool abort_comm = false;
  if (mode == "hier")
    for (size_t count : {(size_t)7, (size_t)100003})
      if (kolo_comm_all_reduce_algo(comm, count, koloFloat32) != KOLO_ALGO_HIER)
        CHILD_FAIL("an all-reduce of %zu float32 runs %s, not hier", count,
                   kolo_algo_name(kolo_comm_all_reduce_algo(comm, count, koloFloat32)));
  if (mode == "grid" || mode == "hier" || mode == "mps_budget") {
    std::vector<CollCase> cases = cuda_proc_grid(n);
    if (mode == "mps_budget") cases = {make_case(Coll::AllReduce, koloFloat32, koloSum, n, 1 << 16, false, 1)};
    std::string err = arena.reserve(dev_max_case_bytes(cases));
    if (!err.empty()) CHILD_FAIL("%s", err.c_str());
    for (size_t i = 0; i < cases.size() && err.empty(); i++) {
      bool fatal = false;
      std::string e = child_case(cases[i], rank, comm, s, &arena, &fatal);
      if (!e.empty()) CHILD_FAIL("%s: %s", cases[i].str().c_str(), e.c_str());
      if (fatal) {
        abort_comm = !arena.freeable;
        break;  // the communicator is unusable after a failed call
      }
    }
  } else if (mode == "timeout") {
    failures += child_timeout(n, rank, comm, s, &arena, &abort_comm);
  } else if (mode == "mismatch") {
    failures += child_mismatch(n, rank, comm, s, &arena, &abort_comm);
  } else {
    CHILD_FAIL("unknown mode %s", mode.c_str());
  }
  if (abort_comm) koloCommAbort(comm);
  else if ((res = koloCommDestroy(comm)) != koloSuccess && (mode == "grid" || mode == "hier"))
    CHILD_FAIL("koloCommDestroy: %s", koloGetErrorString(res));
  if (arena.freeable) cudaStreamDestroy(s);
  arena.release();
  return failures;
}

}  // namespace

// The body of one child of the CudaProcs tests (run by exec'd copies of this
// binary only; disabled otherwise).
TEST(CudaProcsChild, DISABLED_Rank) {
  const char *spec = std::getenv(kChildVar);
  const char *hex = std::getenv(kIdVar);
  if (spec == nullptr || hex == nullptr) GTEST_SKIP() << "helper of the CudaProcs tests: run by them only";
  char mode[32] = {0};
  int n = 0, rank = -1;
  ASSERT_EQ(std::sscanf(spec, "%31s %d %d", mode, &n, &rank), 3) << spec;
  koloUniqueId id;
  ASSERT_TRUE(from_hex(hex, &id, sizeof id)) << "bad " << kIdVar;
  int failures = child_main(mode, n, rank, id);
  EXPECT_EQ(failures, 0) << "rank " << rank << " of " << n << " (" << mode << ")";
}

// ===== what the CPU model of the GPU found =================================================
//   CudaResidency     ranks of one process share a device: the channels are
//                     capped to the blocks it holds at once (KOLO_SIM_SMS), and
//                     what cannot be resident even with one channel is refused
//   CudaStepWrap      LL flags across the 32-bit wrap of the step counts
//   CudaGraphRace     a graph replayed concurrently with an eager call of the
//                     same communicator: reported, not silent corruption
//   CudaFinalize      koloCommFinalize completes the work in flight, then
//                     refuses calls

namespace {

// Runs case c on every rank, rank `late` issuing delay_ms after the others
// (whose kernels wait for it meanwhile), then checks every result element by
// element; "" or what went wrong.
std::string run_late(CudaWorld &w, const CollCase &c, int late, int delay_ms) {
  const int n = w.nranks();
  std::string err = w.reserve(dev_case_bytes(c));
  if (!err.empty()) return err;
  Expected e;
  expected_for(c, &e);
  std::vector<DevRankBufs> bufs((size_t)n);
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    cudaSetDevice(w.dev);
    w.arenas[r].reset();
    std::string x = dev_prepare(c, r, &w.arenas[r], w.streams[r], &bufs[r]);
    if (x.empty() && r == late) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    koloResult_t res = x.empty() ? dev_issue(c, r, bufs[r], w.comms[r], w.streams[r]) : koloInternalError;
    if (x.empty() && res != koloSuccess) x = result_text(coll_name(c.coll), res, w.comms[r]);
    bool busy = false;
    if (x.empty()) x = wait_stream(w.streams[r], kStreamWaitMs, nullptr, &busy);
    if (busy) w.wedge();
    if (x.empty()) x = async_error_text(w.comms[r]);
    if (x.empty()) x = dev_check(c, r, &bufs[r], w.streams[r], e);
    errs[r] = x;
  });
  std::string all;
  for (int r = 0; r < n; r++)
    if (!errs[r].empty()) all += "\n  rank " + std::to_string(r) + ": " + errs[r];
  return all;
}

// kt_cuda_set_steps on every rank's communicator.
std::string set_steps(CudaWorld &w, uint32_t step) {
  std::vector<int> res((size_t)w.nranks(), 0);
  w.pool.run([&](int r) { res[r] = kt_cuda_set_steps(w.comms[r], step); });
  for (int r = 0; r < w.nranks(); r++)
    if (res[r] != 0) return "rank " + std::to_string(r) + ": " + cuda_text("setting the step counts", (cudaError_t)res[r]);
  return "";
}

constexpr const char *kModelChildVar = "KOLO_TEST_CUDA_MODEL_CHILD";

// Runs the disabled test `name` of this binary in a fresh process with the
// extra environment `env` (NAME=value each: the model reads its settings
// once per process); asserts that it passed.
void run_model_child(const std::string &name, const std::vector<std::string> &env) {
  std::vector<std::string> vars;
  for (char **e = environ; *e; e++) {
    std::string kv = *e;
    bool replaced = kv.compare(0, 6, "GTEST_") == 0;
    for (const std::string &x : env) replaced |= kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced) vars.push_back(kv);
  }
  for (const std::string &x : env) vars.push_back(x);
  vars.push_back(std::string(kModelChildVar) + "=1");
  std::vector<char *> envp;
  for (std::string &s : vars) envp.push_back(&s[0]);
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + name, disabled = "--gtest_also_run_disabled_tests",
              color = "--gtest_color=no";
  std::vector<char *> argv = {&exe[0], &filter[0], &disabled[0], &color[0], nullptr};
  std::vector<ChildResult> res = run_children(
      1,
      [&](int) {
        dup2(2, 1);
        execve(exe.c_str(), argv.data(), envp.data());
        std::fprintf(stderr, "execve(%s): %s\n", exe.c_str(), std::strerror(errno));
        return 127;
      },
      kChildTimeoutMs);
  EXPECT_EQ(children_gtest_failures(res, 1), "") << "the child runs " << name;
}

}  // namespace

// ---- co-residency ------------------------------------------------------------------------

// In a process of its own on a model of a device with 6 SMs whose every SM
// holds one block of the executor kernel (kolo_sim_set_kernel_resources):
// 7 ranks cannot all be resident even with one channel: init fails with
// koloInvalidUsage, naming the numbers; 3 ranks asking for 4 channels get 2
// (3 x 2 blocks fit), every rank alike, and an all-reduce over both
// channels and an all-to-all (whose launches the planner cuts at 2 blocks)
// are right.  (Without the cap the 3 ranks' 12 blocks do not fit: the model
// places the first ranks' kernels, which wait for the others' until the
// timeout.)
TEST(CudaResidency, ChannelsCappedToWhatTheDeviceHolds) {
  KT_REQUIRE_CUDA();
#ifndef KOLO_CUDA_SIM
  GTEST_SKIP() << "needs the CUDA model (KOLO_SIM_SMS chooses its SM count)";
#endif
  if (tsan_build()) GTEST_SKIP() << "TSan does not support fork() from a multi-threaded process";
  run_model_child("CudaResidencyChild.DISABLED_SmallDevice",
                  {"KOLO_SIM_SMS=6", "KOLO_TIMEOUT_MS=5000", "KOLO_MIN_CHANNEL_BYTES=4096"});
}

TEST(CudaResidencyChild, DISABLED_SmallDevice) {
  if (std::getenv(kModelChildVar) == nullptr) GTEST_SKIP() << "helper of CudaResidency: run by it only";
#ifdef KOLO_CUDA_SIM
  kolo_sim_set_kernel_resources("kolo_exec_kernel", 255, 0);  // 255 x 256 registers: one block per SM
#endif
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.nChannels = 4;
  {
    CudaWorld w(7, CudaWorld::Init::kInitAll, &cfg);
    EXPECT_EQ(w.init_result, koloInvalidUsage) << w.init_error;
    EXPECT_CONTAINS(w.init_error, "7 ranks of one process share CUDA device 0, whose 6 SMs hold 6 block(s)");
    EXPECT_CONTAINS(w.init_error, "even with one channel");
  }
  {
    CudaWorld w(3, CudaWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    for (int r = 0; r < 3; r++) {
      int nch = 0;
      uint32_t nslots = 0;
      size_t slot = 0, min_ch = 0;
      kt_comm_shape(w.comms[r], &nch, &nslots, &slot, &min_ch);
      EXPECT_EQ(nch, 2) << "rank " << r << ": 3 ranks x 2 channels fill the 6 SMs";
    }
    CollCase big = make_case(Coll::AllReduce, koloFloat32, koloSum, 3, 1 << 16, false, 1);
    GridReport rep = run_cuda_grid(w, {big}, Issue::kPerThread);
    EXPECT_GRID_OK(rep);
    if (rep.failed_cases) return;
    EXPECT_EQ(run_all_to_all(w, koloFloat32, 33333, base_seed() + 7, Issue::kPerThread), "");
  }
}

// ---- LL flags across the 32-bit wrap ------------------------------------------------------

// 2 ranks, every step count started where a long job has it
// (kt_cuda_set_steps); LL all-reduces of 4096 float32 (each rank's chunk one
// whole LL slice), rank 1 calling 300 ms after rank 0, results checked
// element by element:
//  - counts at 0xffffffff on fresh pipes: rank 0's first receive is the
//    slice of step 0xffffffff, whose flag must not be 0, what the zeroed
//    LL region holds;
//  - then calls of every collective at LL and SIMPLE sizes across the wrap;
//  - 2^32 steps replayed: counts at 0x100, a full-slice call; counts at the
//    cleaning window 0x7fffffc0, six one-line calls (which leave the rest of
//    each slot as it was, but for the cleaning); counts at 0x100 again (what
//    2^32 more slices would leave), a full-slice call with new data: the
//    lines of the first call carry the same flags, and only the cleaning
//    keeps rank 0 from taking them for rank 1's.
TEST(CudaStepWrap, LLFlagsAcrossTheWrap) {
  KT_REQUIRE_CUDA();
  CudaWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  ASSERT_EQ(set_steps(w, 0xffffffffu), "");
  CollCase full = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 4096, false, 1);
  ASSERT_EQ(run_late(w, full, 1, 300), "") << " (the first slices after step 0xffffffff)";
  ASSERT_EQ(set_steps(w, 0xfffffff0u), "");
  GridReport rep = run_cuda_grid(w, sample_cases(2, {1, 4095, 70001}, 5), Issue::kPerThread);
  EXPECT_GRID_OK(rep) << " (across the wrap)";
  ASSERT_EQ(set_steps(w, 0x100u), "");
  ASSERT_EQ(run_late(w, full, 1, 0), "") << " (first full-slice call)";
  ASSERT_EQ(set_steps(w, 0x7fffffc0u), "");
  std::vector<CollCase> lines;
  for (int k = 0; k < 6; k++) lines.push_back(make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 2, false, 10 + k));
  rep = run_cuda_grid(w, lines, Issue::kPerThread);
  ASSERT_GRID_OK(rep) << " (one-line calls in the cleaning window)";
  ASSERT_EQ(set_steps(w, 0x100u), "");
  CollCase again = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 4096, false, 2);
  EXPECT_EQ(run_late(w, again, 1, 300), "") << " (the same steps 2^32 slices later)";
}

// ---- a graph replayed concurrently with an eager call ----------------------------------

// 2 ranks (timeout 5 s): rank 0 captures an all-reduce into a graph on its
// stream, then replays it there and, on a second stream, unordered, makes
// the same call eagerly; rank 1 makes the two calls 300 ms later, one after
// the other.  Both kernels of rank 0 hold the same pipe ends: one of them
// must find the other there and stop them both (and rank 1's), so that the
// streams end without waiting for the timeout and koloCommGetAsyncError
// reports koloInvalidUsage on rank 0 with the sentence that says what
// happened, and an error on rank 1.  (Unchecked, the two kernels of rank 0
// would start from one step count and mix their slices.)
TEST(CudaGraphRace, ReplayConcurrentWithEagerCallIsReported) {
  KT_REQUIRE_CUDA();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 5000;
  CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 4095, false, 1);
  GridReport warm = run_cuda_grid(w, {c}, Issue::kPerThread);
  ASSERT_GRID_OK(warm) << " (warm-up)";
  ASSERT_EQ(w.reserve(2 * dev_case_bytes(c)), "");
  cudaSetDevice(w.dev);
  cudaStream_t a = w.streams[0], b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  w.arenas[0].reset();
  w.arenas[1].reset();
  DevRankBufs ga, eb, r1[2];
  ASSERT_EQ(dev_prepare(c, 0, &w.arenas[0], a, &ga), "");
  ASSERT_EQ(dev_prepare(c, 0, &w.arenas[0], b, &eb), "");
  for (DevRankBufs &d : r1) ASSERT_EQ(dev_prepare(c, 1, &w.arenas[1], w.streams[1], &d), "");
  for (cudaStream_t s : {a, b, w.streams[1]}) ASSERT_EQ(wait_stream(s, 10000), "");
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  koloResult_t res = dev_issue(c, 0, ga, w.comms[0], a);
  ASSERT_EQ(cudaStreamEndCapture(a, &g), cudaSuccess);
  ASSERT_EQ(res, koloSuccess) << koloGetLastError(w.comms[0]);
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&ge, g, 0), cudaSuccess);
  const double t0 = now_ms();
  EXPECT_EQ(cudaGraphLaunch(ge, a), cudaSuccess);
  EXPECT_EQ(dev_issue(c, 0, eb, w.comms[0], b), koloSuccess) << koloGetLastError(w.comms[0]);
  // Rank 0's two kernels meet on its pipes whatever rank 1 does (the one
  // that starts second finds the ends held): wait until rank 0 says so
  // before rank 1 calls.  A fixed 300 ms was not always enough under load:
  // a kernel that started late let rank 1's calls pair with rank 0's two,
  // one after the other, and every call succeeded.
  koloResult_t seen = koloSuccess;
  while ((seen == koloSuccess || seen == koloInProgress) && now_ms() - t0 < kt_ms(4000)) {
    ASSERT_EQ(koloCommGetAsyncError(w.comms[0], &seen), koloSuccess);
    if (seen == koloSuccess || seen == koloInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seen_at = now_ms();  // what the bound below counts from
  EXPECT_EQ(seen, koloInvalidUsage) << "rank 0 did not see its two kernels meet within " << kt_ms(4000) << " ms";
  for (DevRankBufs &d : r1) {  // enqueued, or refused at once: its first call already failed
    koloResult_t r = dev_issue(c, 1, d, w.comms[1], w.streams[1]);
    EXPECT_TRUE(r == koloSuccess || r == koloRemoteError) << koloGetErrorString(r);
  }
  bool busy[3] = {false, false, false};
  EXPECT_EQ(wait_stream(a, 30000, nullptr, &busy[0]), "");
  EXPECT_EQ(wait_stream(b, 30000, nullptr, &busy[1]), "");
  EXPECT_EQ(wait_stream(w.streams[1], 30000, nullptr, &busy[2]), "");
  const double ms = now_ms() - seen_at;
  if (busy[0] || busy[1] || busy[2]) w.wedge();
  EXPECT_LT(ms, kt_ms(3000)) << "the kernels ended only " << ms << " ms after rank 0 saw them meet";
  std::string r1_async = async_error_text(w.comms[1]);
  EXPECT_NE(r1_async, "") << "rank 1's calls met rank 0's two kernels and succeeded";
  Expected e;
  expected_for(c, &e);
  for (DevRankBufs *d : {&ga, &eb})
    if (!busy[0] && !busy[1] && r1_async.empty())
      std::printf("  rank 0's result: %s\n", dev_check(c, 0, d, a, e).c_str());
  koloResult_t async = koloSuccess;
  ASSERT_EQ(koloCommGetAsyncError(w.comms[0], &async), koloSuccess);
  EXPECT_EQ(async, koloInvalidUsage) << koloGetErrorString(async) << ": " << koloGetLastError(w.comms[0]);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]),
                  "two kernels of this communicator ran at once on one pipe (with rank 1): a CUDA graph of its "
                  "calls replayed concurrently with other calls of it; order them on one stream");
  std::printf("  rank 0's kernels ended %.0f ms after the replay: %s\n", ms, koloGetLastError(w.comms[0]));
  std::printf("  rank 1: %s\n", r1_async.c_str());
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  if (!busy[1]) cudaStreamDestroy(b);
}

// ---- koloCommFinalize ---------------------------------------------------------------------

// 2 ranks (timeout 10 s): rank 0 calls a SIMPLE-sized all-reduce, rank 1
// only 500 ms later (from another thread); koloCommFinalize on rank 0 right
// after its call returns once the call is complete (not before rank 1
// called, its stream done), with koloSuccess; both results are right; then
// rank 0's calls, a second koloCommFinalize and koloCommSplit are refused
// (koloInvalidUsage, naming koloCommFinalize); rank 1's Finalize succeeds.
TEST(CudaFinalize, CompletesIssuedWorkThenRefusesCalls) {
  KT_REQUIRE_CUDA();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 10000;
  CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  warm_up(w, 1 << 16, 1);
  if (HasFatalFailure()) return;
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 1 << 16, false, 2);
  ASSERT_EQ(w.reserve(dev_case_bytes(c)), "");
  Expected e;
  expected_for(c, &e);
  std::vector<DevRankBufs> bufs(2);
  cudaSetDevice(w.dev);
  for (int r = 0; r < 2; r++) {
    w.arenas[r].reset();
    ASSERT_EQ(dev_prepare(c, r, &w.arenas[r], w.streams[r], &bufs[r]), "");
  }
  ASSERT_EQ(dev_issue(c, 0, bufs[0], w.comms[0], w.streams[0]), koloSuccess) << koloGetLastError(w.comms[0]);
  const double t0 = now_ms();
  koloResult_t late = koloInternalError;
  std::thread rank1([&] {
    cudaSetDevice(w.dev);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    late = dev_issue(c, 1, bufs[1], w.comms[1], w.streams[1]);
  });
  koloResult_t fin = koloCommFinalize(w.comms[0]);
  const double ms = now_ms() - t0;
  const cudaError_t q = cudaStreamQuery(w.streams[0]);
  rank1.join();
  EXPECT_EQ(fin, koloSuccess) << koloGetLastError(w.comms[0]);
  EXPECT_GE(ms, 400) << "koloCommFinalize returned before rank 1 called";
  EXPECT_EQ(q, cudaSuccess) << "rank 0's stream was still busy when koloCommFinalize returned";
  ASSERT_EQ(late, koloSuccess) << koloGetLastError(w.comms[1]);
  bool busy = false;
  ASSERT_EQ(wait_stream(w.streams[1], 30000, nullptr, &busy), "");
  if (busy) w.wedge();
  for (int r = 0; r < 2; r++) EXPECT_EQ(dev_check(c, r, &bufs[r], w.streams[r], e), "") << "rank " << r;
  EXPECT_EQ(dev_issue(c, 0, bufs[0], w.comms[0], w.streams[0]), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "koloCommFinalize");
  EXPECT_EQ(koloCommFinalize(w.comms[0]), koloInvalidUsage);
  koloComm_t sub = nullptr;
  EXPECT_EQ(koloCommSplit(w.comms[0], 0, 0, &sub, nullptr), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "koloCommFinalize");
  EXPECT_EQ(koloCommFinalize(w.comms[1]), koloSuccess) << koloGetLastError(w.comms[1]);
  std::printf("  koloCommFinalize returned %.0f ms after rank 0's call (rank 1 called at 500 ms)\n", ms);
}

// ===== NCCL 2.28 calls on CUDA communicators =====================================

// One thread makes every rank in a group, on device 1 (the current device
// when each init is called; the inits run on other threads, whose current
// device is 0): koloCommCuDevice says 1 on every rank, and every collective
// is right.
TEST(CudaGroupInit, OneThreadOnTheCurrentDevice) {
  KT_REQUIRE_CUDA();
  int ndev = 0;
  ASSERT_EQ(cudaGetDeviceCount(&ndev), cudaSuccess);
  const int dev = ndev > 1 ? 1 : 0;
  CudaWorld w(3, CudaWorld::Init::kGroupOneThread, nullptr, dev);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (int r = 0; r < 3; r++) {
    int d = -5;
    EXPECT_EQ(koloCommCuDevice(w.comms[r], &d), koloSuccess) << koloGetLastError(w.comms[r]);
    EXPECT_EQ(d, dev) << "rank " << r;
  }
  GridReport rep = run_cuda_grid(w, sample_cases(3, {1, 4095, 70001}), Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

namespace {

// n ranks' all-reduce (float32 sum, in place when in_place) on buffers of
// koloMemAlloc: random integer-valued inputs (exact sums), outputs poisoned
// with NaN first, every element checked against a sum made here.
std::string memalloc_all_reduce(CudaWorld &w, size_t count, bool in_place, uint64_t seed) {
  const int n = w.nranks();
  std::vector<void *> in((size_t)n, nullptr), out((size_t)n, nullptr);
  std::vector<std::vector<float>> host((size_t)n, std::vector<float>(count));
  std::vector<float> want(count, 0.0f), nan(count, std::nanf(""));
  std::string err;
  cudaSetDevice(w.dev);
  for (int r = 0; r < n && err.empty(); r++) {
    for (size_t i = 0; i < count; i++) host[r][i] = (float)(mix64(seed ^ ((uint64_t)r << 40) ^ i) % 2001) - 1000.0f;
    for (size_t i = 0; i < count; i++) want[i] += host[r][i];
    if (koloMemAlloc(&in[r], count * 4) != koloSuccess) err = koloGetLastError(nullptr);
    else if (kt_mem_device(in[r], count * 4) != w.dev) err = "koloMemAlloc did not give memory of the current device";
    else if (!in_place && koloMemAlloc(&out[r], count * 4) != koloSuccess) err = koloGetLastError(nullptr);
    if (!err.empty()) break;
    if (in_place) out[r] = in[r];
    cudaMemcpy(in[r], host[r].data(), count * 4, cudaMemcpyHostToDevice);
    if (!in_place) cudaMemcpy(out[r], nan.data(), count * 4, cudaMemcpyHostToDevice);
  }
  koloGroupStart();
  for (int r = 0; r < n && err.empty(); r++) {
    koloResult_t res = koloAllReduce(in[r], out[r], count, koloFloat32, koloSum, w.comms[r], w.streams[r]);
    if (res != koloSuccess) err = result_text("koloAllReduce", res, w.comms[r]);
  }
  koloResult_t end = koloGroupEnd();
  if (err.empty() && end != koloSuccess) err = result_text("koloGroupEnd", end, w.comms[0]);
  for (int r = 0; r < n && err.empty(); r++) err = wait_stream(w.streams[r], kStreamWaitMs);
  std::vector<float> got(count);
  for (int r = 0; r < n && err.empty(); r++) {
    cudaMemcpy(got.data(), out[r], count * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count && err.empty(); i++)
      if (!(got[i] == want[i]))
        err = "rank " + std::to_string(r) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) +
              ", want " + std::to_string(want[i]);
  }
  for (int r = 0; r < n; r++) {
    if (out[r] && out[r] != in[r] && koloMemFree(out[r]) != koloSuccess) err += koloGetLastError(nullptr);
    if (in[r] && koloMemFree(in[r]) != koloSuccess) err += koloGetLastError(nullptr);
  }
  return err;
}

}  // namespace

// koloMemAlloc gives device memory of the current device (as ncclMemAlloc);
// its buffers, registered as symmetric windows, carry an all-reduce of 3
// ranks, in and out of place, odd counts, every element checked.
TEST(CudaMemAlloc, BuffersInACollective) {
  KT_REQUIRE_CUDA();
  CudaWorld w(3);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (size_t count : {(size_t)1, (size_t)4095, (size_t)70001})
    for (bool in_place : {false, true})
      EXPECT_EQ(memalloc_all_reduce(w, count, in_place, 0x5eed + count), "") << count << (in_place ? " in place" : "");
  void *p = nullptr;
  ASSERT_EQ(koloMemAlloc(&p, 1 << 16), koloSuccess);
  koloWindow_t win = nullptr;
  EXPECT_EQ(koloCommWindowRegister(w.comms[0], p, 1 << 16, &win, KOLO_WIN_COLL_SYMMETRIC), koloSuccess)
      << koloGetLastError(w.comms[0]);
  EXPECT_EQ(koloCommWindowDeregister(w.comms[0], win), koloSuccess);
  EXPECT_EQ(koloMemFree(p), koloSuccess);
}

// Registration on a CUDA communicator: memory of its device is accepted,
// host memory and memory of another device are refused, naming why; double
// deregistration is refused; the comm still runs its calls.
TEST(CudaRegister, DeviceBuffersOnly) {
  KT_REQUIRE_CUDA();
  CudaWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  ASSERT_EQ(w.reserve(1 << 20), "");
  void *h = nullptr;
  char *dbuf = w.arenas[0].take(1 << 20);
  ASSERT_NE(dbuf, nullptr);
  ASSERT_EQ(koloCommRegister(w.comms[0], dbuf, 1 << 20, &h), koloSuccess) << koloGetLastError(w.comms[0]);
  std::vector<char> host(4096);
  void *h2 = nullptr;
  EXPECT_EQ(koloCommRegister(w.comms[0], host.data(), host.size(), &h2), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "is not device memory");
  int ndev = 0;
  cudaGetDeviceCount(&ndev);
  if (ndev > 1) {
    void *other = nullptr;
    cudaSetDevice(1);
    ASSERT_EQ(cudaMalloc(&other, 4096), cudaSuccess);
    cudaSetDevice(w.dev);
    EXPECT_EQ(koloCommRegister(w.comms[0], other, 4096, &h2), koloInvalidArgument);
    EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "memory of CUDA device 1");
    cudaFree(other);
  }
  EXPECT_EQ(koloCommDeregister(w.comms[1], h), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(w.comms[1]), "another communicator");
  EXPECT_EQ(koloCommDeregister(w.comms[0], h), koloSuccess);
  EXPECT_EQ(koloCommDeregister(w.comms[0], h), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "deregistered already");
  w.arenas[0].reset();
  GridReport rep = run_cuda_grid(w, sample_cases(2, {4095}), Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

// koloCommRevoke ends a kernel spinning on a peer that never calls: the
// stream is done within the bound, koloCommGetAsyncError goes to koloSuccess
// (the stop is the revoke's doing), calls are refused naming the revoke.
TEST(CudaRevoke, EndsSpinningKernel) {
  KT_REQUIRE_CUDA();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 30000;
  CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  warm_up(w, 1 << 16, 1);
  if (HasFatalFailure()) return;
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 1 << 16, false, 2);
  Lonely l;
  issue_on(w, c, {0}, &l);
  if (HasFatalFailure()) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(cudaStreamQuery(w.streams[0]), cudaErrorNotReady) << "rank 0's kernel should wait for rank 1";
  const double t0 = now_ms();
  ASSERT_EQ(koloCommRevoke(w.comms[0], KOLO_REVOKE_DEFAULT), koloSuccess) << koloGetLastError(w.comms[0]);
  bool busy = false;
  EXPECT_EQ(wait_stream(w.streams[0], 60000, nullptr, &busy), "");
  if (busy) w.wedge();
  EXPECT_LT(now_ms() - t0, kStopBoundMs);
  koloResult_t async = koloInProgress;
  while (async == koloInProgress && now_ms() - t0 < 10000) koloCommGetAsyncError(w.comms[0], &async);
  EXPECT_EQ(async, koloSuccess) << koloGetLastError(w.comms[0]);
  EXPECT_EQ(dev_issue(c, 0, *l.bufs[0], w.comms[0], w.streams[0]), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "koloCommRevoke");
  int d = -1;
  EXPECT_EQ(koloCommCuDevice(w.comms[0], &d), koloSuccess);  // queries stay allowed
  EXPECT_EQ(d, w.dev);
}
