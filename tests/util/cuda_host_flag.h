// cuda_host_flag.h - a word of mapped pinned memory that the host sets and
// kernels spin on, with a counter kernels add to, and bounded waits on
// streams and on such kernels: what tests of CUDA streams and residency
// need so that a broken rule fails instead of hanging.  Header-only, on the
// CUDA runtime API and GoogleTest alone (no kolo), so that both
// test_cudasim.cc (the model's own checks) and test_cuda_runtime_rules.cu
// (nvcc's build for a GPU too) use it.
#ifndef KOLO_TESTS_UTIL_CUDA_HOST_FLAG_H
#define KOLO_TESTS_UTIL_CUDA_HOST_FLAG_H

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdint.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace kolo_test {

// The flag at byte 0, the counter at byte 64 (its own cache line), both
// through their host and their device pointers.
struct HostFlag {
  uint32_t *host = nullptr, *dev = nullptr;
  unsigned long long *count = nullptr, *count_dev = nullptr;
  HostFlag() {
    void *p = nullptr;
    EXPECT_EQ(cudaHostAlloc(&p, 256, cudaHostAllocMapped), cudaSuccess);
    std::memset(p, 0, 256);
    host = static_cast<uint32_t *>(p);
    count = reinterpret_cast<unsigned long long *>(static_cast<char *>(p) + 64);
    void *d = nullptr;
    EXPECT_EQ(cudaHostGetDevicePointer(&d, p, 0), cudaSuccess);
    dev = static_cast<uint32_t *>(d);
    count_dev = reinterpret_cast<unsigned long long *>(static_cast<char *>(d) + 64);
  }
  // A kernel still spinning on the flag ends before its memory goes.
  ~HostFlag() {
    set();
    cudaDeviceSynchronize();
    cudaFreeHost(host);
  }
  HostFlag(const HostFlag &) = delete;
  HostFlag &operator=(const HostFlag &) = delete;
  void set() { __atomic_store_n(host, 1u, __ATOMIC_RELEASE); }
  unsigned long long started() const { return __atomic_load_n(count, __ATOMIC_ACQUIRE); }
};

// Polls the stream for up to ms; true when its work finished.  A failed
// query is cleared from the thread's last error.
inline bool done_within(cudaStream_t s, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady || std::chrono::steady_clock::now() > end) {
      (void)cudaGetLastError();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Waits up to ms until n blocks counted themselves in f's counter (they
// are running).
inline bool started_within(const HostFlag &f, unsigned long long n, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (f.started() < n)
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

}  // namespace kolo_test

#endif  // KOLO_TESTS_UTIL_CUDA_HOST_FLAG_H
