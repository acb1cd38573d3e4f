/* pack_kernel.cu - the fusion's batched copy on a GPU (see pack.h): ONE
 * kernel over a descriptor array.  Block (x, y) takes descriptors y,
 * y + gridDim.y, ...; the gridDim.x blocks of a row share a descriptor's
 * bytes.  Plain copies move 16-byte words when both ends and the length
 * allow it, else bytes; scaled copies (preScale) load, multiply and store
 * one element at a time, through float32 for the 16-bit types. */
#ifndef KOLO_HAVE_CUDA
#define KOLO_HAVE_CUDA 1 /* this file is the CUDA build */
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda/device_prims.cuh"
#include "fusion/pack.h"
#include "kolo.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxRowBlocks = 32;
constexpr size_t kBytesPerBlock = 64 * 1024;

/* Bytes; when both ends share their offset within 16 bytes (the usual
 * case: the fusion buffer's slots and cudaMalloc'd tensors are 16-byte
 * aligned), a byte head, 16-byte words, and a byte tail. */
__device__ void copy_bytes(char *o, const char *s, size_t bytes, size_t t, size_t stride) {
  size_t head = bytes, words = 0;
  if ((((uintptr_t)o ^ (uintptr_t)s) & 15) == 0) {
    head = (16 - ((uintptr_t)o & 15)) & 15;
    if (head > bytes) head = bytes;
    words = (bytes - head) / 16;
  }
  for (size_t i = t; i < head; i += stride) o[i] = s[i];
  const uint4 *s4 = reinterpret_cast<const uint4 *>(s + head);
  uint4 *o4 = reinterpret_cast<uint4 *>(o + head);
  for (size_t i = t; i < words; i += stride) o4[i] = s4[i];
  for (size_t i = head + words * 16 + t; i < bytes; i += stride) o[i] = s[i];
}

/* One element at any alignment. */
template <typename T>
__device__ T load_any(const char *p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
__device__ void store_any(char *p, T v) {
  memcpy(p, &v, sizeof(T));
}

__device__ float widen(__half h) { return __half2float(h); }
__device__ float widen(__nv_bfloat16 h) { return __bfloat162float(h); }
__device__ float widen(float f) { return f; }
template <typename T> __device__ T narrow(float f);
template <> __device__ __half narrow<__half>(float f) { return __float2half_rn(f); }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }
template <> __device__ float narrow<float>(float f) { return f; }

template <typename T>
__device__ void scale_elems(char *o, const char *s, size_t bytes, double scale, size_t t, size_t stride) {
  for (size_t i = t; i < bytes / sizeof(T); i += stride) {
    T x = load_any<T>(s + i * sizeof(T));
    store_any<T>(o + i * sizeof(T), narrow<T>(widen(x) * (float)scale));
  }
}

template <>
__device__ void scale_elems<double>(char *o, const char *s, size_t bytes, double scale, size_t t, size_t stride) {
  for (size_t i = t; i < bytes / sizeof(double); i += stride)
    store_any<double>(o + i * sizeof(double), load_any<double>(s + i * sizeof(double)) * scale);
}

__global__ void __launch_bounds__(kThreads) kf_pack_kernel(const kf_copy *d, int n, int dtype, double scale) {
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
  for (int k = blockIdx.y; k < n; k += gridDim.y) {
    kf_copy c = d[k];
    char *o = static_cast<char *>(c.dst);
    const char *s = static_cast<const char *>(c.src);
    if (scale == 1.0) {
      if (o != s) copy_bytes(o, s, c.bytes, t, stride);
      continue;
    }
    switch (dtype) {
    case koloFloat16: scale_elems<__half>(o, s, c.bytes, scale, t, stride); break;
    case koloBfloat16: scale_elems<__nv_bfloat16>(o, s, c.bytes, scale, t, stride); break;
    case koloFloat32: scale_elems<float>(o, s, c.bytes, scale, t, stride); break;
    case koloFloat64: scale_elems<double>(o, s, c.bytes, scale, t, stride); break;
    default: if (o != s) copy_bytes(o, s, c.bytes, t, stride); break; /* integers: never scaled */
    }
  }
}

}  // namespace

extern "C" int kf_pack_cuda(const kf_copy *d, int n, size_t max_bytes, int dtype, double scale,
                            void *stream) {
  if (n <= 0) return (int)cudaSuccess;
  size_t row = (max_bytes + kBytesPerBlock - 1) / kBytesPerBlock;
  dim3 grid((unsigned)(row < 1 ? 1 : row > kMaxRowBlocks ? kMaxRowBlocks : row),
            (unsigned)(n < 65535 ? n : 65535));
  return (int)kolo_dev::launch<kf_pack_kernel>(grid, kThreads, 0, static_cast<cudaStream_t>(stream), d, n, dtype,
                                               scale);
}
