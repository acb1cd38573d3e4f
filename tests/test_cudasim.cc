// test_cudasim.cc - what only the CPU model of the GPU (cudasim/,
// docs/dev/cuda-model.md) has: its charge of kernel resources, the
// strictness it adds to CUDA (refused handles and ranges, poisoned fresh
// bytes, a guard page), its checks of a block's threads (warp leaders,
// barrier call sites), its fault injection, launch pressure and seeded
// orders.  Built only with -DKOLO_CUDA=SIM: its kernels are host code
// launched through kernels/cuda/device_prims.cuh, as kolo's are, and some
// call the model's own hooks (cudasim/kolo_sim.h).  The rules of the CUDA
// runtime the model copies (stream order, the legacy stream, hardware
// queues, residency, events, errors, capture, memory, IPC, fork) are in
// test_cuda_runtime_rules.cu, which also builds with nvcc and runs on a GPU.
//
// Kernels that must wait for the host spin on a word of mapped pinned
// memory; every wait of the test is bounded, so a rule the model breaks is
// a failure, not a hang.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cudasim/kolo_sim.h"
#include "kernels/cuda/device_prims.cuh"
#include "kernels/cuda_exec.h"
#include "kolo.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // nvcc's #pragma unroll
#include "kernels/cuda/reduce_prims.cuh"
#pragma GCC diagnostic pop
#include "util/cuda_host_flag.h"

namespace {

using Clock = std::chrono::steady_clock;

// ---- kernels ---------------------------------------------------------------------

// Spins until *flag is non-zero; thread 0 of each block counts itself in
// *started first.
__global__ void spin_until(const uint32_t *flag, unsigned long long *started) {
  if (threadIdx.x == 0) kolo_dev::add(started, 1ull);
  while (kolo_dev::ld_acquire(flag) == 0) kolo_dev::poll();
}

// Every block counts itself in (w[0]), then waits until all `n` are in or
// `timeout_ns` passed (w[1] counts those that gave up); w[2] counts the
// blocks that left, and the last block to arrive notes in w[3] how many had
// left before it came.
__global__ void all_resident(unsigned long long *w, unsigned long long n, uint64_t timeout_ns) {
  if (threadIdx.x != 0) return;
  unsigned long long left = __atomic_load_n(&w[2], __ATOMIC_ACQUIRE);
  if (kolo_dev::add(&w[0], 1ull) + 1 == n) __atomic_store_n(&w[3], left, __ATOMIC_RELEASE);
  uint64_t t0 = kolo_dev::global_ns();
  while (__atomic_load_n(&w[0], __ATOMIC_ACQUIRE) < n) {
    if (kolo_dev::global_ns() - t0 > timeout_ns) {
      kolo_dev::add(&w[1], 1ull);
      break;
    }
    kolo_dev::poll();
  }
  kolo_dev::add(&w[2], 1ull);
}

// out[i] = i * k for i < n, every thread striding by blockDim.x.
__global__ void iota_times(uint32_t *out, size_t n, uint32_t k) {
  for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    out[i] = (uint32_t)i * k;
}

// Reads one LL line at p (16 bytes) into out[0..1].
__global__ void read_line(const char *p, uint64_t *out) {
  uint64_t lo = 0, hi = 0;
  kolo_dev::ld_line(p, lo, hi);
  if (threadIdx.x == 0) out[0] = lo, out[1] = hi;
}

// out[i] = in[i] for i < n, through the executor's data primitive.
__global__ void copy_floats(float *out, const float *in, size_t n) {
  kolo_cuda::reduce_block<float, kolo_cuda::kOpCopy>(out, nullptr, in, nullptr, n, 1);
}

// Each thread notes in lead[threadIdx.x] whether it is its warp's leader
// with every thread of the block running (converged); then the lanes
// 16-31 note it again, in lead[blockDim.x + threadIdx.x], after the lower
// half of each warp ended.
__global__ void note_leaders(int *lead) {
  lead[threadIdx.x] = kolo_dev::warp_leader();
  kolo_dev::block_sync();
  if ((threadIdx.x & 31) < 16) return;
  lead[blockDim.x + threadIdx.x] = kolo_dev::warp_leader();
}

// Thread 0 makes one access through word primitive `which` (kWordPrims) at p.
__global__ void touch_word(char *p, int which) {
  if (threadIdx.x != 0) return;
  uint64_t lo = 0, hi = 0;
  uint32_t *w = reinterpret_cast<uint32_t *>(p);
  uint8_t *b = reinterpret_cast<uint8_t *>(p);
  switch (which) {
  case 0: (void)kolo_dev::ld_acquire(w); break;
  case 1: (void)kolo_dev::ld_relaxed(w); break;
  case 2: kolo_dev::st_release(w, 1u); break;
  case 3: kolo_dev::st_relaxed(w, 1u); break;
  case 4: (void)kolo_dev::ld_acquire_u8(b); break;
  case 5: (void)kolo_dev::ld_relaxed_u8(b); break;
  case 6: kolo_dev::st_release_u8(b, 1u); break;
  case 7: kolo_dev::st_relaxed_u8(b, 1u); break;
  case 8: (void)kolo_dev::cas(w, 0u, 1u); break;
  case 9: (void)kolo_dev::add(reinterpret_cast<unsigned long long *>(p), 1ull); break;
  case 10: kolo_dev::ld_line(p, lo, hi); break;
  case 11: kolo_dev::st_line(p, lo, hi); break;
  case 12: (void)kolo_dev::hint_get(reinterpret_cast<const int *>(p)); break;
  default: kolo_dev::hint_set(reinterpret_cast<int *>(p), 1); break;
  }
}
constexpr const char *kWordPrims[] = {"ld_acquire",    "ld_relaxed",    "st_release", "st_relaxed", "ld_acquire_u8",
                                      "ld_relaxed_u8", "st_release_u8", "st_relaxed_u8", "cas",      "add",
                                      "ld_line",       "st_line",       "hint_get",   "hint_set"};

// Thread 0 polls *flag (a counter a peer bumps) until it is non-zero.
__global__ void poll_flag(const uint32_t *flag) {
  if (threadIdx.x == 0)
    while (kolo_dev::ld_acquire(flag) == 0) kolo_dev::poll();
}

// The block's hint (block-shared, as the executor's stop hint): thread 0
// sets it, every thread reads it back into out[threadIdx.x].
__global__ void shared_hint(int *out) {
  KOLO_BLOCK_SHARED int hint;
  if (threadIdx.x == 0) kolo_dev::hint_set(&hint, 7);
  kolo_dev::block_sync();
  out[threadIdx.x] = kolo_dev::hint_get(&hint);
}

// Thread 0 waits at one barrier, the others at another: undefined in CUDA.
__global__ void split_barrier(int *out) {
  if (threadIdx.x == 0) {
    kolo_dev::block_sync();
  } else {
    kolo_dev::block_sync();
  }
  out[threadIdx.x] = 1;
}

// Thread 0 waits at __syncthreads_or, the others at __syncthreads, on one
// line: a barrier of another kind is another barrier.
__global__ void mixed_barrier_kinds(int *out) {
  out[threadIdx.x] = threadIdx.x == 0 ? kolo_dev::block_sync_or(1) : (kolo_dev::block_sync(), 0);
}

// The block's last thread sets a word of its shared storage that every
// thread then reads, with no barrier between: a race on a GPU.  In the
// model's fixed order the last thread to reach a barrier (the block's last)
// goes on first, which hides it; seeded orders (KOLO_SIM_SEED) show it.
__global__ void unsynced_broadcast(int *out) {
  KOLO_BLOCK_SHARED int word;
  if (threadIdx.x == 0) word = 0;
  kolo_dev::block_sync();
  if (threadIdx.x == blockDim.x - 1) word = 42;
  out[blockIdx.x * blockDim.x + threadIdx.x] = word;  // the barrier that belongs before this is missing
}

// ---- helpers ---------------------------------------------------------------------

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

using kolo_test::done_within;
using kolo_test::HostFlag;
using kolo_test::started_within;

cudaStream_t new_stream(unsigned flags = cudaStreamNonBlocking) {
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, flags), cudaSuccess);
  return s;
}

// ---- residency --------------------------------------------------------------------------

TEST(CudaSimResidency, OccupancyComesFromTheChargedRegisters) {
  kolo_sim_set_kernel_resources("all_resident", 128, 0);
  int per_sm = 0;
  ASSERT_CUDA((kolo_dev::occupancy<all_resident>(&per_sm, 256, 0)));
  EXPECT_EQ(per_sm, 2);  // 128 x 256 registers: 2 blocks of 65536
  kolo_sim_set_kernel_resources("all_resident", 255, 0);
  ASSERT_CUDA((kolo_dev::occupancy<all_resident>(&per_sm, 256, 0)));
  EXPECT_EQ(per_sm, 1);
  EXPECT_EQ((kolo_dev::launch<all_resident>(1, 1024, 0, nullptr, nullptr, 0ull, uint64_t(0))),
            cudaErrorLaunchOutOfResources);  // 255 x 1024 registers fit no SM
  (void)cudaGetLastError();
  kolo_sim_set_kernel_resources("all_resident", -1, 0);
}

// ---- errors: the model's strictness ---------------------------------------------------------

// A destroyed stream's handle, a copy whose device side is not device memory
// and a set past an allocation's end are refused; on a GPU they are
// undefined (a crash, a fault later, or nothing).
TEST(CudaSimErrors, BadHandlesAndRangesAreRefused) {
  cudaStream_t s = new_stream();
  ASSERT_CUDA(cudaStreamDestroy(s));
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  char host[8];
  EXPECT_EQ(cudaMemcpy(host, host + 1, 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);  // not device memory
  void *small = nullptr;
  ASSERT_CUDA(cudaMalloc(&small, 16));
  EXPECT_EQ(cudaMemset(small, 0, 17), cudaErrorInvalidValue);  // past its end
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  cudaFree(small);
}

// ---- memory ----------------------------------------------------------------------------------------

TEST(CudaSimMemory, FreshBytesArePoisonedAndTheEndIsGuarded) {
  unsigned char *p = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&p), 100));
  unsigned char b[100];
  ASSERT_CUDA(cudaMemcpy(b, p, 100, cudaMemcpyDeviceToHost));
  for (unsigned char x : b) ASSERT_EQ(x, 0xa5);
  // A write past the allocation's 256-byte rounding faults, as on a GPU.
  EXPECT_DEATH({ p[256] = 1; }, "");
  cudaFree(p);
}

// ---- host and device apart (KOLO_SIM_APART) ----------------------------------------

// A host read of device memory, as the test's body runs it in a child
// (gtest's threadsafe style: the child starts the model itself).
int host_read(const volatile unsigned char *p) { return p[0]; }

// The model checks host access with memory protection keys, which not every
// x86 CPU or hypervisor offers (pkey_alloc fails with EINVAL there): the
// model then says so and runs unchecked, and this test has nothing to see.
// The probe's key is allocated without access rights, as Linux starts every
// thread: pkey_free leaves the thread's rights to a key as they were, the
// model's pkey_alloc gets the same key back, and a thread this one starts
// before the model would inherit open rights to it.
bool have_pkeys() {
  int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
  if (key < 0) return false;
  pkey_free(key);
  return true;
}

TEST(CudaSimApart, AHostThreadReadingDeviceMemoryDies) {
  if (!have_pkeys()) GTEST_SKIP() << "no memory protection keys on this CPU: the model cannot check host access";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        unsigned char *p = nullptr;
        if (cudaMalloc(reinterpret_cast<void **>(&p), 100) == cudaSuccess) host_read(p + 3);
      },
      "HOST ACCESS TO DEVICE MEMORY: thread [0-9]+ .* read 0x[0-9a-f]+, byte 3 of the 100-byte "
      "cudaMalloc allocation at 0x[0-9a-f]+ \\(device 0\\)");
  // A thread started before the model is refused too (Linux starts every
  // thread without the key's rights).
  EXPECT_DEATH(
      {
        std::atomic<unsigned char *> shared{nullptr};
        std::thread early([&] {
          while (shared.load() == nullptr) std::this_thread::yield();
          host_read(shared.load());
        });
        unsigned char *p = nullptr;
        if (cudaMalloc(reinterpret_cast<void **>(&p), 64) != cudaSuccess) std::abort();
        shared.store(p);
        early.join();
      },
      "HOST ACCESS TO DEVICE MEMORY.*byte 0 of the 64-byte cudaMalloc");
}

TEST(CudaSimApart, CopiesKernelsAndModelledDmaMayTouchIt) {
  uint32_t *p = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&p), 64 * sizeof(uint32_t)));
  ASSERT_CUDA(cudaMemset(p, 0, 64 * sizeof(uint32_t)));
  cudaStream_t s = new_stream();
  ASSERT_CUDA((kolo_dev::launch<iota_times>(1, 8, 0, s, p, (size_t)64, 3u)));
  ASSERT_CUDA(cudaStreamSynchronize(s));
  uint32_t h[64];
  ASSERT_CUDA(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT_EQ(h[63], 63u * 3u);
  unsigned saved = kolo_sim_dma_begin();  // a NIC reading the buffer
  EXPECT_EQ(p[5], 15u);
  kolo_sim_dma_end(saved);
  cudaStreamDestroy(s);
  cudaFree(p);
}

TEST(CudaSimApart, MisalignedLinesTrap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        char *p = nullptr;
        uint64_t *out = nullptr;
        if (cudaMalloc(reinterpret_cast<void **>(&p), 256) != cudaSuccess ||
            cudaMalloc(reinterpret_cast<void **>(&out), 16) != cudaSuccess)
          std::abort();
        (void)kolo_dev::launch<read_line>(1, 1, 0, nullptr, static_cast<const char *>(p + 8), out);
        (void)cudaDeviceSynchronize();
      },
      "MISALIGNED ADDRESS: ld_line of 16 bytes at 0x[0-9a-f]+8 \\(not a multiple of 16\\).*thread 0 of block 0");
}

// Launches copy_floats(out, in, n) on the legacy stream and waits.
cudaError_t copy_on_device(float *out, const float *in, size_t n) {
  cudaError_t e = kolo_dev::launch<copy_floats>(1, 8, 0, nullptr, out, in, n);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

TEST(CudaSimApart, KernelsReachDeviceAndPinnedMemoryOnly) {
  float *dev = nullptr, *pinned = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&dev), 64 * sizeof(float)));
  ASSERT_CUDA(cudaHostAlloc(reinterpret_cast<void **>(&pinned), 64 * sizeof(float), cudaHostAllocMapped));
  for (int i = 0; i < 64; i++) pinned[i] = (float)i;
  ASSERT_CUDA(copy_on_device(dev, pinned, 64));
  std::vector<float> back(64);
  ASSERT_CUDA(cudaMemcpy(back.data(), dev, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back[63], 63.0f);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(copy_on_device(dev, back.data(), 64),  // pageable: a GPU faults
               "KERNEL ACCESS OUTSIDE DEVICE-REACHABLE MEMORY: the source a, 256 bytes at 0x[0-9a-f]+, at "
               ".*reduce_prims.cuh:[0-9]+, in no allocation of the model");
  EXPECT_DEATH(copy_on_device(dev, pinned, 65), "the source a, 260 bytes .* running past its allocation's end");
  cudaFreeHost(pinned);
  cudaFree(dev);
}

// Launches touch_word(p, which) on the legacy stream and waits.
cudaError_t touch_on_device(char *p, int which) {
  cudaError_t e = kolo_dev::launch<touch_word>(1, 8, 0, nullptr, p, which);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

// The words and counters kernels read and write through the primitives
// reach device-reachable memory only, as the data primitives' buffers do;
// the hints, block-shared storage too.
TEST(CudaSimApart, WordPrimitivesReachDeviceAndPinnedMemoryOnly) {
  char *dev = nullptr, *pinned = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&dev), 64));
  ASSERT_CUDA(cudaMemset(dev, 0, 64));
  ASSERT_CUDA(cudaHostAlloc(reinterpret_cast<void **>(&pinned), 64, cudaHostAllocMapped));
  std::memset(pinned, 0, 64);
  constexpr int n = sizeof kWordPrims / sizeof kWordPrims[0];
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(touch_on_device(dev, i), cudaSuccess) << kWordPrims[i];
    EXPECT_EQ(touch_on_device(pinned, i), cudaSuccess) << kWordPrims[i];
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  alignas(16) static char pageable[64];  // a GPU faults on any of these
  for (int i = 0; i < n; i++)
    EXPECT_DEATH(touch_on_device(pageable, i), std::string("KERNEL ACCESS OUTSIDE DEVICE-REACHABLE MEMORY: ") +
                                                   kWordPrims[i] + ", [0-9]+ bytes at 0x[0-9a-f]+, at .*device_prims.cuh")
        << kWordPrims[i];
  cudaFreeHost(pinned);
  cudaFree(dev);
}

// A kernel waiting for a counter in a malloc'd buffer (set: it would end at
// once on x86) is stopped, as a GPU faults on its first poll.
TEST(CudaSimApart, APollOfPageableMemoryDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        uint32_t *flag = static_cast<uint32_t *>(std::malloc(64));
        *flag = 1;
        (void)kolo_dev::launch<poll_flag>(1, 8, 0, nullptr, static_cast<const uint32_t *>(flag));
        (void)cudaDeviceSynchronize();
      },
      "OUTSIDE DEVICE-REACHABLE MEMORY: ld_acquire, 4 bytes at 0x[0-9a-f]+, .*in no allocation of the model");
}

// One executor task copying 64 floats IN -> OUT by a one-step program at
// `steps` (the program must be in device memory, as the planner puts it).
kolo_dev_batch copy_batch(const kolo_step *steps, float *in, float *out) {
  kolo_dev_batch b;
  std::memset(&b, 0, sizeof b);
  b.ntasks = 1;
  b.protocol = KOLO_PROTO_SIMPLE;
  kolo_dev_task &t = b.tasks[0];
  t.steps = steps;
  t.nsteps = 1;
  t.geo = kolo_geometry{64, sizeof(float), 1, 1, 64, KOLO_LAYOUT_RING};
  t.in = reinterpret_cast<char *>(in), t.out = reinterpret_cast<char *>(out);
  t.type = koloFloat32, t.op = koloSum, t.div = 1;
  return b;
}

TEST(CudaSimApart, TheExecutorsProgramIsDeviceMemory) {
  const kolo_step copy = {KOLO_STEP_COPY, 0, KOLO_BUF_IN, KOLO_BUF_OUT, 0, 0, 0, 0};
  kolo_step *steps = nullptr;
  float *buf = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&steps), sizeof copy));
  ASSERT_CUDA(cudaMemcpy(steps, &copy, sizeof copy, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&buf), 128 * sizeof(float)));
  std::vector<float> h(64, 3.0f);
  ASSERT_CUDA(cudaMemcpy(buf, h.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  kolo_dev_batch b = copy_batch(steps, buf, buf + 64);
  ASSERT_EQ(kolo_cuda_exec_launch(&b, nullptr), (int)cudaSuccess);
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> back(64);
  ASSERT_CUDA(cudaMemcpy(back.data(), buf + 64, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, h);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  b.tasks[0].steps = &copy;  // the host's copy: pageable, a GPU faults on the first step
  EXPECT_DEATH(
      {
        (void)kolo_cuda_exec_launch(&b, nullptr);
        (void)cudaDeviceSynchronize();
      },
      "OUTSIDE DEVICE-REACHABLE MEMORY: the task's step program, 16 bytes at .*in no allocation of the model");
  cudaFree(buf);
  cudaFree(steps);
}

// KOLO_SIM_APART=0 (its own process: CudaSimApart.Off in CMakeLists.txt).
TEST(CudaSimApartOff, DISABLED_TheHostReadsDeviceMemory) {
  unsigned char *p = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&p), 100));
  EXPECT_EQ(host_read(p), 0xa5);
  cudaFree(p);
}

// ---- blocks as a GPU runs them -------------------------------------------------

// Runs kernel K with one block of `threads` model threads (blockDim.x) and
// `words` ints of mapped memory it writes; returns them.
template <auto K>
std::vector<int> run_block(int threads, size_t words) {
  int before = kolo_sim_block_threads();
  kolo_sim_set_block_threads(threads);
  void *p = nullptr;
  EXPECT_EQ(cudaHostAlloc(&p, words * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  std::memset(p, 0xff, words * sizeof(int));
  void *d = nullptr;
  EXPECT_EQ(cudaHostGetDevicePointer(&d, p, 0), cudaSuccess);
  cudaStream_t s = new_stream();
  EXPECT_EQ((kolo_dev::launch<K>(1, (unsigned)threads, 0, s, static_cast<int *>(d))), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<int> out(static_cast<int *>(p), static_cast<int *>(p) + words);
  cudaStreamDestroy(s);
  cudaFreeHost(p);
  kolo_sim_set_block_threads(before);
  return out;
}

// A hint in block-shared storage (the runner's thread-local storage on the
// model) is the block's, not pageable host memory.
TEST(CudaSimApart, HintsReachBlockSharedStorage) {
  EXPECT_EQ(run_block<shared_hint>(8, 8), std::vector<int>(8, 7));
}

TEST(CudaSimBlocks, OneLeaderPerWarpTheLowestRunningLane) {
  // Seeded orders run a higher lane before a lower one, and it leads too,
  // as lanes that diverged do on a GPU (__activemask names only its group).
  const char *seed = std::getenv("KOLO_SIM_SEED");
  if (seed != nullptr && std::strtoull(seed, nullptr, 0) != 0)
    GTEST_SKIP() << "the lowest-lane rule is the fixed order's (KOLO_SIM_SEED is set)";
  const int threads = 72;  // two whole warps and one of 8 lanes
  std::vector<int> lead = run_block<note_leaders>(threads, 2 * threads);
  for (int t = 0; t < threads; t++) {
    EXPECT_EQ(lead[t], t % 32 == 0) << "converged, thread " << t;
    // Once lanes 0-15 ended, lane 16 leads: the lowest lane still running.
    int expect = t % 32 < 16 ? -1 : t % 32 == 16;
    EXPECT_EQ(lead[threads + t], expect) << "lanes 0-15 ended, thread " << t;
  }
}

TEST(CudaSimBlocks, ThreadsAtDifferentBarriersAreUndefined) {
  // A forked child cannot use the model its parent started (as CUDA): the
  // child runs this test again from exec.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run_block<split_barrier>(8, 8), "thread [1-7] of block 0 waits at __syncthreads .*every live thread");
  EXPECT_DEATH(run_block<mixed_barrier_kinds>(8, 8), "__syncthreads_or.*every live thread of a block");
}

TEST(CudaSimBlocks, ThreadsAtOneBarrierPass) {
  std::vector<int> out = run_block<split_barrier>(1, 1);  // one thread: nobody waits elsewhere
  EXPECT_EQ(out[0], 1);
}

}  // namespace

// ---- faults (KOLO_SIM_FAULT) -----------------------------------------------------------

// The second iota_times launched on device 0 faults: that launch (its stream
// was idle, so it starts during the call) and every later call on device
// 0's context return cudaErrorIllegalAddress, reading it does not clear it,
// the kernel spinning on another stream of the device is killed, and device
// 1's context goes on.
TEST(CudaSimFaults, AFaultIsStickyOnItsContextOnly) {
  ASSERT_CUDA(cudaSetDevice(0));
  HostFlag f;
  cudaStream_t a = new_stream(), b = new_stream();
  uint32_t *buf = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&buf), 4096));
  ASSERT_EQ(kolo_sim_set_fault("iota_times:2:0"), 0);
  ASSERT_CUDA((kolo_dev::launch<iota_times>(1, 32, 0, a, buf, (size_t)1024, 3u)));
  ASSERT_CUDA(cudaStreamSynchronize(a));
  ASSERT_CUDA((kolo_dev::launch<spin_until>(1, 32, 0, b, f.dev, f.count_dev)));
  ASSERT_TRUE(started_within(f, 1, 5000));
  const auto t0 = Clock::now();
  EXPECT_EQ((kolo_dev::launch<iota_times>(1, 32, 0, a, buf, (size_t)1024, 5u)), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaErrorIllegalAddress);
  // b's kernel spins until the flag is set: only the fault ends it
  std::atomic<int> synced{0};
  cudaError_t b_sync = cudaSuccess;
  std::thread t([&] {
    cudaSetDevice(0);
    b_sync = cudaStreamSynchronize(b);
    synced = 1;
  });
  while (!synced && Clock::now() - t0 < std::chrono::seconds(5)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(synced.load(), 1) << "the kernel spinning on another stream of the device was not killed";
  f.set();  // (ends it otherwise)
  t.join();
  EXPECT_EQ(b_sync, cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress) << "a sticky error is not cleared by reading it";
  EXPECT_STREQ(cudaGetErrorString(cudaGetLastError()), "an illegal memory access was encountered");
  void *more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, 256), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaMemsetAsync(buf, 0, 64, a), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaFree(buf), cudaErrorIllegalAddress);  // freed all the same: no leak
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  ASSERT_CUDA(cudaSetDevice(1));
  uint32_t *other = nullptr;
  cudaStream_t c = new_stream();
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&other), 4096));
  EXPECT_EQ((kolo_dev::launch<iota_times>(1, 32, 0, c, other, (size_t)1024, 3u)), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(c), cudaSuccess) << "device 1's context is another one";
  cudaFree(other);
  cudaStreamDestroy(c);
  kolo_sim_clear_faults();
  ASSERT_CUDA(cudaSetDevice(0));
  (void)cudaGetLastError();  // the thread's last error, no longer sticky, clears as any other
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Run by ctest alone, with KOLO_SIM_FAULT=iota_times:2:1 in its environment
// (tests/CMakeLists.txt): the variable arms the fault at the model's start.
TEST(CudaSimFaultsEnv, DISABLED_TheEnvironmentArmsAFault) {
  const char *spec = std::getenv("KOLO_SIM_FAULT");
  ASSERT_STREQ(spec ? spec : "", "iota_times:2:1");
  ASSERT_CUDA(cudaSetDevice(1));
  cudaStream_t a = new_stream();
  uint32_t *buf = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&buf), 4096));
  ASSERT_CUDA((kolo_dev::launch<iota_times>(1, 32, 0, a, buf, (size_t)1024, 3u)));
  ASSERT_CUDA(cudaStreamSynchronize(a));
  cudaError_t launch = kolo_dev::launch<iota_times>(1, 32, 0, a, buf, (size_t)1024, 3u);
  EXPECT_TRUE(launch == cudaSuccess || launch == cudaErrorIllegalAddress) << cudaGetErrorName(launch);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaFree(buf), cudaErrorIllegalAddress);
  cudaStreamDestroy(a);
  kolo_sim_clear_faults();
}

TEST(CudaSimFaults, MalformedSpecsAreRefused) {
  EXPECT_EQ(kolo_sim_set_fault("iota_times"), -1);
  EXPECT_EQ(kolo_sim_set_fault("iota_times:0"), -1);
  EXPECT_EQ(kolo_sim_set_fault(":3"), -1);
  EXPECT_EQ(kolo_sim_set_fault("iota_times:2:x"), -1);
  EXPECT_EQ(kolo_sim_set_fault(nullptr), 0);
}

// ---- pressure (KOLO_SIM_MAX_PENDING) -----------------------------------------------------

// With room for 2 pending kernels, 2 spinning ones fill the device's launch
// queue: a third launch blocks its host thread until one of them ends.
TEST(CudaSimPressure, LaunchesBeyondTheBoundBlockUntilTheDeviceDrains) {
  ASSERT_CUDA(cudaSetDevice(0));
  kolo_sim_set_max_pending(2);
  HostFlag f;
  cudaStream_t a = new_stream(), b = new_stream(), c = new_stream();
  uint32_t *buf = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&buf), 4096));
  ASSERT_CUDA((kolo_dev::launch<spin_until>(1, 32, 0, a, f.dev, f.count_dev)));
  ASSERT_CUDA((kolo_dev::launch<spin_until>(1, 32, 0, b, f.dev, f.count_dev)));
  std::atomic<int> returned{0};
  std::thread t([&] {
    cudaSetDevice(0);
    EXPECT_EQ((kolo_dev::launch<iota_times>(1, 32, 0, c, buf, (size_t)1024, 3u)), cudaSuccess);
    returned = 1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(returned.load(), 0) << "a launch beyond KOLO_SIM_MAX_PENDING did not block";
  f.set();
  const auto t0 = Clock::now();
  while (returned.load() == 0 && Clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(returned.load(), 1) << "the blocked launch did not return once the device drained";
  t.join();
  EXPECT_TRUE(done_within(c, 5000));
  kolo_sim_set_max_pending(1024);
  cudaFree(buf);
  for (cudaStream_t s : {a, b, c}) cudaStreamDestroy(s);
}

// ---- seeded orders (KOLO_SIM_SEED) --------------------------------------------------------

// The number of threads of 4 launches of unsynced_broadcast (4 blocks
// each) that read the word before the last thread set it.
int stale_reads(cudaStream_t s, int *dev, int threads) {
  const size_t n = 4u * (size_t)threads;
  int stale = 0;
  for (int launch = 0; launch < 4; launch++) {
    EXPECT_EQ((kolo_dev::launch<unsynced_broadcast>(4, threads, 0, s, dev)), cudaSuccess);
    std::vector<int> out(n, -1);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), dev, n * sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    for (int v : out) stale += v != 42;
  }
  return stale;
}

// The fixed order hides the missing barrier; seeded orders show it.
TEST(CudaSimSeed, SeededOrdersShowAMissingBarrier) {
  ASSERT_CUDA(cudaSetDevice(0));
  const int threads = kolo_sim_block_threads();
  if (threads < 2) GTEST_SKIP() << "one thread per block: no order to vary";
  cudaStream_t s = new_stream();
  int *dev = nullptr;
  ASSERT_CUDA(cudaMalloc(reinterpret_cast<void **>(&dev), 4u * (size_t)threads * sizeof(int)));
  kolo_sim_set_seed(0);
  EXPECT_EQ(stale_reads(s, dev, threads), 0) << "the fixed order runs the last thread first after a barrier";
  int shown = 0;
  for (uint64_t seed = 1; seed <= 3; seed++) {
    kolo_sim_set_seed(seed);
    shown += stale_reads(s, dev, threads) > 0;
  }
  kolo_sim_set_seed(0);
  EXPECT_EQ(shown, 3) << "seeds under which a thread read the word before the last thread set it";
  cudaFree(dev);
  cudaStreamDestroy(s);
}
