/* reduce_kernels.cu - kolo_cuda_reduce_kernel<T, OP> and its host launcher
 * kolo_cuda_reduce (see kernels/cuda_reduce.h).  The executor's own kernel
 * calls kolo_cuda::reduce_block directly; this one exists to test the
 * primitive on whole buffers and to measure it. */
#ifndef KOLO_HAVE_CUDA
#define KOLO_HAVE_CUDA 1 /* this file is the CUDA build */
#endif

#include "kernels/cuda/device_prims.cuh"
#include "kernels/cuda/reduce_prims.cuh"
#include "kernels/cuda_reduce.h"
#include "kolo.h"

namespace {

using namespace kolo_cuda;

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 1024;

/* The block of blockIdx.x takes `per` elements (a multiple of 64, so every
 * part starts at the same misalignment as the whole buffer). */
template <typename T, int OP>
__global__ void __launch_bounds__(kThreads)
    kolo_cuda_reduce_kernel(void *out0, void *out1, const void *a, const void *b, size_t n,
                            size_t per, int div, uint64_t scalar) {
  size_t lo = (size_t)blockIdx.x * per;
  if (lo >= n) return;
  size_t cnt = n - lo < per ? n - lo : per, off = lo * sizeof(T);
  reduce_block<T, OP>(static_cast<char *>(out0) + off,
                      out1 ? static_cast<char *>(out1) + off : nullptr,
                      static_cast<const char *>(a) + off,
                      reads_b(OP) ? static_cast<const char *>(b) + off : nullptr, cnt, div, scalar);
}

template <typename T, int OP>
cudaError_t launch(void *out0, void *out1, const void *a, const void *b, size_t n, int div,
                   cudaStream_t stream, uint64_t scalar = 0) {
  /* enough blocks for four vectors per thread, at most kMaxBlocks */
  size_t per_block = (size_t)kThreads * 4 * (16 / sizeof(T));
  size_t blocks = (n + per_block - 1) / per_block;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  size_t per = (n + blocks - 1) / blocks;
  per = (per + 63) / 64 * 64;
  return kolo_dev::launch<kolo_cuda_reduce_kernel<T, OP>>((unsigned)blocks, kThreads, 0, stream, out0, out1, a, b, n,
                                                          per, div, scalar);
}

/* The instantiations: X(dtype, T); drop a line to drop its kernels. */
#define KOLO_CUDA_TYPES(X)                                                    \
  X(koloInt8, int8_t) X(koloUint8, uint8_t) X(koloInt32, int32_t)             \
  X(koloUint32, uint32_t) X(koloInt64, int64_t) X(koloUint64, uint64_t)       \
  X(koloFloat16, __half) X(koloFloat32, float) X(koloFloat64, double)         \
  X(koloBfloat16, __nv_bfloat16) X(koloFloat8e4m3, __nv_fp8_e4m3)             \
  X(koloFloat8e5m2, __nv_fp8_e5m2)

template <typename T>
cudaError_t launch_op(int op, void *out0, void *out1, const void *a, const void *b, size_t n,
                      int div, cudaStream_t s) {
  if (b == nullptr) return launch<T, kOpCopy>(out0, out1, a, b, n, div, s);
  switch (op) {
  case koloSum:
  case koloAvg: return launch<T, kOpSum>(out0, out1, a, b, n, div, s);
  case koloProd: return launch<T, kOpProd>(out0, out1, a, b, n, div, s);
  case koloMax: return launch<T, kOpMax>(out0, out1, a, b, n, div, s);
  case koloMin: return launch<T, kOpMin>(out0, out1, a, b, n, div, s);
  default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t launch_premul(void *out0, void *out1, const void *a, const void *b, size_t n, uint64_t scalar,
                          cudaStream_t s) {
  if (b == nullptr) return launch<T, kOpPreCopy>(out0, out1, a, b, n, 1, s, scalar);
  return launch<T, kOpPreSum>(out0, out1, a, b, n, 1, s, scalar);
}

}  // namespace

extern "C" int kolo_cuda_reduce(void *out0, void *out1, const void *a, const void *b, size_t n,
                                int type, int op, int div, void *stream) {
  if ((unsigned)op >= koloNumOps) return (int)cudaErrorInvalidValue;
  if (n == 0) return (int)cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
#define KOLO_CUDA_CASE(dtype, T) \
  case dtype: return (int)launch_op<T>(op, out0, out1, a, b, n, div, s);
    KOLO_CUDA_TYPES(KOLO_CUDA_CASE)
#undef KOLO_CUDA_CASE
  default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int kolo_cuda_reduce_premul(void *out0, void *out1, const void *a, const void *b, size_t n,
                                       int type, uint64_t scalar, void *stream) {
  if (n == 0) return (int)cudaSuccess;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
#define KOLO_CUDA_CASE(dtype, T) \
  case dtype: return (int)launch_premul<T>(out0, out1, a, b, n, scalar, s);
    KOLO_CUDA_TYPES(KOLO_CUDA_CASE)
#undef KOLO_CUDA_CASE
  default: return (int)cudaErrorInvalidValue;
  }
}
