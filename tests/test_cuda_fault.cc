// test_cuda_fault.cc - a device fault under kolo's kernels, on the CUDA
// model only (KOLO_SIM_FAULT, through kolo_sim_set_fault): a GPU's illegal
// address loses the whole context, with a sticky error.
//
// Ranks as threads of this process, rank 0 alone on model device 0 and the
// others on device 1 (a context per device: the fault of device 0 leaves
// device 1's alive, as another process's would be).  After a warm-up
// all-reduce, the next executor kernel launched on device 0 faults while
// every rank calls an all-reduce.  Then, within the communicators' timeout
// and a bound:
//   - rank 0: its stream reports cudaErrorIllegalAddress, and kolo reports
//     koloUnhandledCudaError naming the CUDA error (from the call itself
//     when the launch faulted at once, else from koloCommGetAsyncError);
//   - the others: their kernels give up on rank 0 (koloTimeout, or
//     koloRemoteError from a peer that stopped first), naming rank 0 or,
//     with 3 ranks, the peer that stopped because of it;
//   - every communicator is destroyed in bounded time, and no device
//     memory of the model outlives the test (its /dev/shm objects).
// CudaPressure: a bounded launch queue (KOLO_SIM_MAX_PENDING) under a group
// of several ranks' calls issued from one thread.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cudasim/kolo_sim.h"
#include "util/cuda_bufs.h"
#include "util/expect_text.h"

using namespace kt;

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kCount = 1000;      // 4000 bytes: the LL protocol
constexpr int kTimeoutMs = 3000;     // the communicators' timeout
constexpr double kSlackMs = 10000;   // what a loaded 2-core host may add to it

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The model's device memory objects of this process (/dev/shm/cudasim-<pid>-*).
int model_objects() {
  DIR *d = opendir("/dev/shm");
  if (d == nullptr) return -1;
  const std::string prefix = "cudasim-" + std::to_string(getpid()) + "-";
  int n = 0;
  for (dirent *e; (e = readdir(d)) != nullptr;) n += std::string(e->d_name).rfind(prefix, 0) == 0;
  closedir(d);
  return n;
}

// n ranks: rank 0 on device 0, the others on device 1.
struct FaultWorld {
  int n;
  std::vector<int> dev;
  std::vector<koloComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float *> bufs;
  explicit FaultWorld(int nranks) : n(nranks), dev((size_t)nranks, 1), comms((size_t)nranks, nullptr),
                                    streams((size_t)nranks, nullptr), bufs((size_t)nranks, nullptr) {
    dev[0] = 0;
  }
  // "" or what failed.
  std::string init() {
    koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
    cfg.memory = koloMemCuda;
    cfg.timeoutMs = kTimeoutMs;
    koloResult_t r = koloCommInitAllConfig(comms.data(), n, dev.data(), &cfg);
    if (r != koloSuccess) return std::string("koloCommInitAllConfig: ") + koloGetErrorString(r);
    for (int i = 0; i < n; i++) {
      cudaSetDevice(dev[(size_t)i]);
      std::string e = cuda_text("cudaStreamCreateWithFlags",
                                cudaStreamCreateWithFlags(&streams[(size_t)i], cudaStreamNonBlocking));
      if (e.empty()) e = cuda_text("cudaMalloc", cudaMalloc(reinterpret_cast<void **>(&bufs[(size_t)i]), kCount * 4));
      if (e.empty()) e = cuda_text("cudaMemset", cudaMemset(bufs[(size_t)i], 0, kCount * 4));
      if (!e.empty()) return e;
    }
    return "";
  }
  // `calls` all-reduces on each rank of `ranks` (all: empty), each rank
  // from its own thread, into rc (the first failure of each rank).
  void all_reduce(std::vector<koloResult_t> &rc, int calls = 1, std::vector<int> ranks = {}) {
    if (ranks.empty())
      for (int i = 0; i < n; i++) ranks.push_back(i);
    std::vector<std::thread> ts;
    for (int i : ranks)
      ts.emplace_back([this, &rc, i, calls] {
        cudaSetDevice(dev[(size_t)i]);
        for (int k = 0; k < calls && rc[(size_t)i] == koloSuccess; k++)
          rc[(size_t)i] = koloAllReduce(bufs[(size_t)i], bufs[(size_t)i], kCount, koloFloat32, koloSum,
                                        comms[(size_t)i], streams[(size_t)i]);
      });
    for (auto &t : ts) t.join();
  }
  // Destroys everything; the time it took, in ms.
  double teardown() {
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int i = 0; i < n; i++)
      ts.emplace_back([this, i] {
        cudaSetDevice(dev[(size_t)i]);
        if (comms[(size_t)i]) koloCommDestroy(comms[(size_t)i]);
        if (bufs[(size_t)i]) cudaFree(bufs[(size_t)i]);
        if (streams[(size_t)i]) cudaStreamDestroy(streams[(size_t)i]);
      });
    for (auto &t : ts) t.join();
    comms.assign((size_t)n, nullptr);
    return ms_since(t0);
  }
};

struct Outcome {
  std::string stream;  // wait_stream's verdict
  koloResult_t async = koloSuccess;
  std::string text;    // koloGetLastError after koloCommGetAsyncError
  double ms = 0;       // from the calls to the stream's end
};

// Each rank's stream (bounded), then its communicator's asynchronous error.
std::vector<Outcome> outcomes(FaultWorld &w, Clock::time_point t0) {
  std::vector<Outcome> out((size_t)w.n);
  std::vector<std::thread> ts;
  for (int i = 0; i < w.n; i++)
    ts.emplace_back([&w, &out, t0, i] {
      cudaSetDevice(w.dev[(size_t)i]);
      Outcome &o = out[(size_t)i];
      o.stream = wait_stream(w.streams[(size_t)i], kTimeoutMs + kSlackMs);
      o.ms = ms_since(t0);
      if (koloCommGetAsyncError(w.comms[(size_t)i], &o.async) != koloSuccess) o.async = koloNumResults;
      o.text = koloGetLastError(w.comms[(size_t)i]);
    });
  for (auto &t : ts) t.join();
  return out;
}

// Whether text names a rank other than `self`, rank 0 first.
bool names_peer(const std::string &text, int n, int self) {
  for (int k = 0; k < n; k++)
    if (k != self && text.find("rank " + std::to_string(k) + " ") != std::string::npos) return true;
  return false;
}

// at_launch: the faulting launch started during the call, which reports
// it; else it faulted later, in the queue, and only the context can say.
void check_faulting_rank(bool at_launch, koloResult_t call, const Outcome &o) {
  EXPECT_EQ(call, at_launch ? koloUnhandledCudaError : koloSuccess) << koloGetErrorString(call);
  if (!at_launch) {
    EXPECT_CONTAINS(o.text, "cudaErrorIllegalAddress");
  }
  EXPECT_CONTAINS(o.stream, "an illegal memory access was encountered");
  EXPECT_EQ(o.async, koloUnhandledCudaError) << koloGetErrorString(o.async) << ": " << o.text;
  EXPECT_CONTAINS(o.text, "rank 0");
  EXPECT_CONTAINS(o.text, "an illegal memory access was encountered");
}

void check_peer(int n, int r, const Outcome &o) {
  EXPECT_EQ(o.stream, "") << "rank " << r << "'s stream (device 1 is alive)";
  EXPECT_TRUE(o.async == koloTimeout || o.async == koloRemoteError)
      << "rank " << r << ": " << koloGetErrorString(o.async) << ": " << o.text;
  EXPECT_TRUE(names_peer(o.text, n, r)) << "rank " << r << ": \"" << o.text << "\" names no peer";
  if (n == 2) {
    EXPECT_CONTAINS(o.text, "rank 0");
  }
  EXPECT_LT(o.ms, kTimeoutMs + kSlackMs) << "rank " << r;
}

// n ranks; whether the faulting kernel starts during its launch call (its
// stream idle) or later, queued behind a kernel that waits for the peers.
class CudaDeviceFault : public ::testing::TestWithParam<std::tuple<int, bool>> {};

// at_launch: every rank calls once, and rank 0's launch faults at once.
// Queued: rank 0 calls twice before the others call (its second kernel
// waits behind the first, which waits for them), then they call twice;
// the first call completes everywhere, and rank 0's second kernel faults
// when it starts.
TEST_P(CudaDeviceFault, EveryRankReportsItAndTearsDown) {
  KT_REQUIRE_CUDA();
  const auto [n, at_launch] = GetParam();
  const int objects = model_objects();
  {
    FaultWorld w(n);
    ASSERT_EQ(w.init(), "");
    std::vector<koloResult_t> rc((size_t)n, koloSuccess);
    w.all_reduce(rc);  // warm-up: pipes set up
    for (int i = 0; i < n; i++) ASSERT_EQ(rc[(size_t)i], koloSuccess) << "warm-up, rank " << i;
    for (int i = 0; i < n; i++) ASSERT_EQ(wait_stream(w.streams[(size_t)i], 60000), "") << "warm-up, rank " << i;
    ASSERT_EQ(kolo_sim_set_fault(at_launch ? "kolo_exec_kernel:1:0" : "kolo_exec_kernel:2:0"), 0);
    const auto t0 = Clock::now();
    if (at_launch) {
      w.all_reduce(rc);
    } else {
      w.all_reduce(rc, 2, {0});
      std::vector<int> others;
      for (int i = 1; i < n; i++) others.push_back(i);
      w.all_reduce(rc, 2, others);
    }
    std::vector<Outcome> out = outcomes(w, t0);
    check_faulting_rank(at_launch, rc[0], out[0]);
    for (int r = 1; r < n; r++) {
      EXPECT_EQ(rc[(size_t)r], koloSuccess) << "rank " << r;
      check_peer(n, r, out[(size_t)r]);
    }
    for (int r = 0; r < n; r++)
      std::printf("  rank %d: %s after %.0f ms: %s\n", r, koloGetErrorString(out[(size_t)r].async),
                  out[(size_t)r].ms, out[(size_t)r].text.c_str());
    EXPECT_LT(w.teardown(), kTimeoutMs + kSlackMs) << "teardown";
  }
  kolo_sim_clear_faults();
  EXPECT_EQ(model_objects(), objects) << "device memory of the model outlived the communicators";
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaDeviceFault, ::testing::Combine(::testing::Values(2, 3), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<CudaDeviceFault::ParamType> &p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  (std::get<1>(p.param) ? "at_launch" : "queued");
                         });

// Launch pressure (KOLO_SIM_MAX_PENDING, kolo_sim_set_max_pending): one
// thread issues a group of 2 all-reduces for each of 4 ranks on one device
// while the device holds only 2 pending kernels per rank.  Each rank's
// kernel waits for the others', so all of the group's launches must fit
// at once: kolo's do (one kernel per rank and batch), and the group
// completes, correct, in bounded time.  (Fewer than one launch per rank
// would hang here as on a GPU: docs/dev/cuda-model.md.)
TEST(CudaPressure, AOneThreadGroupFitsTheLaunchQueue) {
  KT_REQUIRE_CUDA();
  constexpr int n = 4;
  std::vector<int> devs(n, 0);
  std::vector<koloComm_t> comms(n, nullptr);
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 30000;
  ASSERT_EQ(koloCommInitAllConfig(comms.data(), n, devs.data(), &cfg), koloSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  std::vector<cudaStream_t> streams(n, nullptr);
  std::vector<float *> bufs(n, nullptr);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&bufs[r]), 2 * kCount * 4), cudaSuccess);
    std::vector<float> ones(2 * kCount, 1.0f);
    ASSERT_EQ(cudaMemcpy(bufs[r], ones.data(), ones.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  kolo_sim_set_max_pending(2 * n);
  const auto t0 = Clock::now();
  ASSERT_EQ(koloGroupStart(), koloSuccess);
  for (int r = 0; r < n; r++)
    for (int k = 0; k < 2; k++)
      EXPECT_EQ(koloAllReduce(bufs[r] + k * kCount, bufs[r] + k * kCount, kCount, koloFloat32, koloSum, comms[r],
                              streams[r]),
                koloSuccess);
  EXPECT_EQ(koloGroupEnd(), koloSuccess);
  for (int r = 0; r < n; r++) EXPECT_EQ(wait_stream(streams[r], 60000), "") << "rank " << r;
  EXPECT_LT(ms_since(t0), 60000);
  kolo_sim_set_max_pending(1024);
  for (int r = 0; r < n; r++) {
    std::vector<float> got(2 * kCount, 0.0f);
    EXPECT_EQ(cudaMemcpy(got.data(), bufs[r], got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got[0], (float)n) << "rank " << r;
    EXPECT_EQ(got[2 * kCount - 1], (float)n) << "rank " << r;
    EXPECT_EQ(koloCommDestroy(comms[r]), koloSuccess);
    cudaFree(bufs[r]);
    cudaStreamDestroy(streams[r]);
  }
}

}  // namespace
