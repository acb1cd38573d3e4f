/* prims_bench.cu - the launches of `kolo-perf prims` (see
 * kernels/cuda_prims_bench.h): kolo_cuda::reduce_block over a grid that
 * fills the GPU, as a production copy or reduce kernel launches, and the
 * fill / compare kernels that check its results. */
#ifndef KOLO_HAVE_CUDA
#define KOLO_HAVE_CUDA 1 /* this file is the CUDA build */
#endif

#include "kernels/cuda/device_prims.cuh"
#include "kernels/cuda/reduce_prims.cuh"
#include "kernels/cuda_prims_bench.h"
#include "kolo.h"

namespace {

using namespace kolo_cuda;

/* At most 512 threads per block, and registers for two such blocks per SM
 * (64 per thread): 1024 threads of an SM keep 64 KiB of loads in flight. */
constexpr int kMaxThreads = 512;
constexpr int kMinBlocksPerSM = 2;
/* The fill and compare kernels. */
constexpr int kCheckThreads = 256;
constexpr size_t kCheckMaxBlocks = 2048;

/* float8 sums convert each element to float and back; within the 64
 * registers of two 512-thread blocks per SM they spill (100 bytes, ptxas
 * for sm_90), so their kernels ask for one block per SM (128 registers). */
template <typename T>
struct BenchBlocksPerSM {
  static constexpr int value = kMinBlocksPerSM;
};
template <>
struct BenchBlocksPerSM<__nv_fp8_e4m3> {
  static constexpr int value = 1;
};
template <>
struct BenchBlocksPerSM<__nv_fp8_e5m2> {
  static constexpr int value = 1;
};

/* Block k takes elements [k*per, (k+1)*per) (per: a multiple of 64). */
template <typename T, int OP>
__global__ void __launch_bounds__(kMaxThreads, BenchBlocksPerSM<T>::value)
    prims_bench_kernel(void *out0, void *out1, const void *a, const void *b, size_t n, size_t per) {
  size_t lo = (size_t)blockIdx.x * per;
  if (lo >= n) return;
  size_t cnt = n - lo < per ? n - lo : per, off = lo * sizeof(T);
  reduce_block<T, OP>(static_cast<char *>(out0) + off,
                      out1 ? static_cast<char *>(out1) + off : nullptr,
                      static_cast<const char *>(a) + off,
                      OP == kOpCopy ? nullptr : static_cast<const char *>(b) + off, cnt, 1);
}

template <typename T>
cudaError_t launch_t(void *out0, void *out1, const void *a, const void *b, size_t n, int blocks,
                     int threads, cudaStream_t s) {
  size_t per = (n + (size_t)blocks - 1) / (size_t)blocks;
  per = (per + 63) / 64 * 64;
  if (b == nullptr)
    return kolo_dev::launch<prims_bench_kernel<T, kOpCopy>>((unsigned)blocks, (unsigned)threads, 0, s, out0, out1, a,
                                                            b, n, per);
  return kolo_dev::launch<prims_bench_kernel<T, kOpSum>>((unsigned)blocks, (unsigned)threads, 0, s, out0, out1, a, b,
                                                         n, per);
}

template <typename T>
cudaError_t grid_t(int reduce, int threads, int *blocks) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  if (reduce) err = kolo_dev::occupancy<prims_bench_kernel<T, kOpSum>>(&per_sm, threads, 0);
  else err = kolo_dev::occupancy<prims_bench_kernel<T, kOpCopy>>(&per_sm, threads, 0);
  if (err != cudaSuccess) return err;
  *blocks = sms * (per_sm > 0 ? per_sm : 1);
  return cudaSuccess;
}

/* The instantiations: X(dtype, T); drop a line to drop its kernels. */
#define KOLO_BENCH_TYPES(X)                                                   \
  X(koloInt8, int8_t) X(koloUint8, uint8_t) X(koloInt32, int32_t)             \
  X(koloUint32, uint32_t) X(koloInt64, int64_t) X(koloUint64, uint64_t)       \
  X(koloFloat16, __half) X(koloFloat32, float) X(koloFloat64, double)         \
  X(koloBfloat16, __nv_bfloat16) X(koloFloat8e4m3, __nv_fp8_e4m3)             \
  X(koloFloat8e5m2, __nv_fp8_e5m2)

/* ---- fill and compare --------------------------------------------------- */

/* Bytes of x that are not zero. */
__device__ __forceinline__ unsigned nonzero_bytes(uint64_t x) {
  x |= x >> 4;
  x |= x >> 2;
  x |= x >> 1;
  return (unsigned)kolo_dev::popc64(x & 0x0101010101010101ull);
}

__global__ void __launch_bounds__(kCheckThreads) fill_kernel(unsigned char *buf, size_t bytes, uint64_t pattern) {
  if (blockIdx.x == 0 && threadIdx.x == 0) kolo_dev::reachable(buf, bytes, "the buffer to fill");
  size_t words = bytes / 8, stride = (size_t)gridDim.x * blockDim.x;
  uint64_t *w = reinterpret_cast<uint64_t *>(buf);
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride) w[i] = pattern;
  /* the tail: byte words*8 + t is byte t of pattern (any block size) */
  for (size_t t = threadIdx.x; blockIdx.x == 0 && t < bytes % 8; t += blockDim.x)
    buf[words * 8 + t] = (unsigned char)(pattern >> (8 * t));
}

__global__ void __launch_bounds__(kCheckThreads)
    count_kernel(const unsigned char *buf, size_t bytes, uint64_t pattern, unsigned long long *count) {
  if (blockIdx.x == 0 && threadIdx.x == 0) kolo_dev::reachable(buf, bytes, "the buffer to compare");
  size_t words = bytes / 8, stride = (size_t)gridDim.x * blockDim.x;
  const uint64_t *w = reinterpret_cast<const uint64_t *>(buf);
  unsigned long long wrong = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
    wrong += nonzero_bytes(w[i] ^ pattern);
  for (size_t t = threadIdx.x; blockIdx.x == 0 && t < bytes % 8; t += blockDim.x)
    wrong += buf[words * 8 + t] != (unsigned char)(pattern >> (8 * t));
  if (wrong) kolo_dev::add(count, wrong);
}

unsigned check_blocks(size_t bytes) {
  size_t blocks = (bytes / 8 + kCheckThreads - 1) / kCheckThreads;
  if (blocks < 1) blocks = 1;
  return (unsigned)(blocks < kCheckMaxBlocks ? blocks : kCheckMaxBlocks);
}

}  // namespace

extern "C" int kolo_prims_bench_reduce(void *out0, void *out1, const void *a, const void *b, size_t n,
                                       int type, int blocks, int threads, void *stream) {
  if (blocks < 1 || threads < 32 || threads > kMaxThreads || threads % 32 != 0) return (int)cudaErrorInvalidValue;
  if (n == 0) return (int)cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
#define KOLO_BENCH_CASE(dtype, T) \
  case dtype: return (int)launch_t<T>(out0, out1, a, b, n, blocks, threads, s);
    KOLO_BENCH_TYPES(KOLO_BENCH_CASE)
#undef KOLO_BENCH_CASE
  default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int kolo_prims_bench_grid(int type, int reduce, int threads, int *blocks) {
  if (threads < 32 || threads > kMaxThreads || threads % 32 != 0) return (int)cudaErrorInvalidValue;
  switch (type) {
#define KOLO_BENCH_CASE(dtype, T) \
  case dtype: return (int)grid_t<T>(reduce, threads, blocks);
    KOLO_BENCH_TYPES(KOLO_BENCH_CASE)
#undef KOLO_BENCH_CASE
  default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int kolo_prims_bench_fill(void *buf, size_t bytes, uint64_t pattern, void *stream) {
  if (bytes == 0) return (int)cudaSuccess;
  return (int)kolo_dev::launch<fill_kernel>(check_blocks(bytes), kCheckThreads, 0, static_cast<cudaStream_t>(stream),
                                            static_cast<unsigned char *>(buf), bytes, pattern);
}

extern "C" int kolo_prims_bench_count(const void *buf, size_t bytes, uint64_t pattern, unsigned long long *count,
                                      void *stream) {
  if (bytes == 0) return (int)cudaSuccess;
  return (int)kolo_dev::launch<count_kernel>(check_blocks(bytes), kCheckThreads, 0, static_cast<cudaStream_t>(stream),
                                             static_cast<const unsigned char *>(buf), bytes, pattern, count);
}
