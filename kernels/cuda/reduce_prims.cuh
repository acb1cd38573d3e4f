/* reduce_prims.cuh - device-side data primitives of the CUDA executor.
 *
 * kolo_cuda::reduce_block<T, OP>(out0, out1, a, b, n, div): one thread
 * block computes out0[i] (and out1[i] when out1 != nullptr) =
 * post(a[i] OP b[i]) for i < n; OP = kOpCopy reads no b (out = post(a[i])).
 * The semantics are host_reduce.h's, bit for bit where IEEE defines them:
 *   - integers wrap (sum and prod in the unsigned type); post divides the
 *     wrapped value with C's truncating division;
 *   - float max is (a > b || isnan(a)) ? a : b, min the same with <;
 *   - float16 / bfloat16 are widened to float32, combined and divided in
 *     float32 and rounded to nearest-even once (cvt.rn); float32 / float64
 *     combine and divide in their own precision (IEEE division: this file
 *     must not be built with -use_fast_math / -prec-div=false / -ftz=true);
 *   - koloAvg is kOpSum with div = nranks on the final step.
 * NaN payloads may differ from the host's (the GPU returns its canonical
 * NaN); NaN-ness does not.
 *
 * Memory access: when every pointer has the same misalignment modulo 16
 * bytes (and it is a multiple of the element size), a scalar head brings
 * them to a 16-byte boundary, the body moves 16-byte vectors (uint4) with
 * four vectors of each input in flight per thread, and a scalar tail ends
 * it.  Otherwise every element is moved on its own: with typed loads when
 * each pointer is aligned to the element size, byte by byte when not (a
 * user buffer at ptr+1 is legal).  An element is read and written by the
 * same thread, loads before stores, so an output may equal an input (not
 * overlap it partially).  Loads are plain: a caller that reads data written
 * by a peer must acquire it first (ld.acquire / fence), as the executor's
 * connector protocol does.
 *
 * Every thread of the block must call it with the same arguments; it does
 * not synchronize the block.
 */
#ifndef KOLO_KERNELS_CUDA_REDUCE_PRIMS_CUH
#define KOLO_KERNELS_CUDA_REDUCE_PRIMS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "kernels/cuda/device_prims.cuh"

namespace kolo_cuda {

#if KOLO_DEV_HOST_BUILD
using std::isnan;
#endif

enum RedOp { kOpSum = 0, kOpProd = 1, kOpMax = 2, kOpMin = 3, kOpCopy = 4 };

#define KOLO_DEV static __device__ __forceinline__

/* ---- arithmetic per element type ----------------------------------------
 * V is the type values are combined in; widen / narrow convert to and from
 * the stored type T. */

template <typename T>
struct Arith { /* the integers */
  using V = T;
  using U = typename std::make_unsigned<T>::type;
  using W = decltype(T() + 0); /* division type: int for 8-bit types */
  KOLO_DEV V widen(T x) { return x; }
  KOLO_DEV T narrow(V v) { return v; }
  KOLO_DEV V sum(V a, V b) { return (T)(U)((U)a + (U)b); }
  KOLO_DEV V prod(V a, V b) { return (T)(U)((U)a * (U)b); }
  KOLO_DEV V max(V a, V b) { return a > b ? a : b; }
  KOLO_DEV V min(V a, V b) { return a < b ? a : b; }
  KOLO_DEV V div(V a, int d) { return (T)((W)a / (W)d); }
};

template <typename F>
struct FloatArith {
  using V = F;
  KOLO_DEV V sum(V a, V b) { return a + b; }
  KOLO_DEV V prod(V a, V b) { return a * b; }
  KOLO_DEV V max(V a, V b) { return (a > b || isnan(a)) ? a : b; }
  KOLO_DEV V min(V a, V b) { return (a < b || isnan(a)) ? a : b; }
  KOLO_DEV V div(V a, int d) { return a / (V)d; }
};

template <>
struct Arith<float> : FloatArith<float> {
  KOLO_DEV float widen(float x) { return x; }
  KOLO_DEV float narrow(float v) { return v; }
};
template <>
struct Arith<double> : FloatArith<double> {
  KOLO_DEV double widen(double x) { return x; }
  KOLO_DEV double narrow(double v) { return v; }
};
template <>
struct Arith<__half> : FloatArith<float> {
  KOLO_DEV float widen(__half x) { return __half2float(x); }
  KOLO_DEV __half narrow(float v) { return __float2half_rn(v); }
};
template <>
struct Arith<__nv_bfloat16> : FloatArith<float> {
  KOLO_DEV float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
  KOLO_DEV __nv_bfloat16 narrow(float v) { return __float2bfloat16_rn(v); }
};

/* One element: post(a OP b). */
template <typename T, int OP>
KOLO_DEV T reduce_elem(T a, T b, bool has_div, int d) {
  using A = Arith<T>;
  typename A::V x = A::widen(a);
  if (OP == kOpSum) x = A::sum(x, A::widen(b));
  if (OP == kOpProd) x = A::prod(x, A::widen(b));
  if (OP == kOpMax) x = A::max(x, A::widen(b));
  if (OP == kOpMin) x = A::min(x, A::widen(b));
  if (has_div) x = A::div(x, d);
  return A::narrow(x);
}

/* 16 bytes of elements at once. */
template <typename T, int OP>
KOLO_DEV uint4 reduce_pack(uint4 a, uint4 b, bool has_div, int d) {
  constexpr int kN = 16 / sizeof(T);
  T x[kN], y[kN];
  memcpy(static_cast<void *>(x), &a, 16); /* void *: __half is a class */
  memcpy(static_cast<void *>(y), &b, 16);
#pragma unroll
  for (int j = 0; j < kN; j++) x[j] = reduce_elem<T, OP>(x[j], y[j], has_div, d);
  uint4 r;
  memcpy(&r, x, 16);
  return r;
}

/* Element i of a byte buffer: a typed access, or bytes when unaligned. */
template <typename T, bool ALIGNED>
KOLO_DEV T load_elem(const char *p, size_t i) {
  if (ALIGNED) return reinterpret_cast<const T *>(p)[i];
  T x;
  memcpy(static_cast<void *>(&x), p + i * sizeof(T), sizeof(T));
  return x;
}
template <typename T, bool ALIGNED>
KOLO_DEV void store_elem(char *p, size_t i, T v) {
  if (ALIGNED) reinterpret_cast<T *>(p)[i] = v;
  else memcpy(p + i * sizeof(T), &v, sizeof(T));
}

/* Elements [lo, hi), one per thread per step. */
template <typename T, int OP, bool ALIGNED>
KOLO_DEV void reduce_elems(char *o0, char *o1, const char *a, const char *b, size_t lo, size_t hi,
                           bool has_div, int d) {
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    T y = OP == kOpCopy ? T() : load_elem<T, ALIGNED>(b, i);
    T r = reduce_elem<T, OP>(load_elem<T, ALIGNED>(a, i), y, has_div, d);
    store_elem<T, ALIGNED>(o0, i, r);
    if (o1) store_elem<T, ALIGNED>(o1, i, r);
  }
}

/* nvec 16-byte vectors, kUnroll per thread per step (all loads first). */
template <typename T, int OP>
KOLO_DEV void reduce_vectors(uint4 *o0, uint4 *o1, const uint4 *a, const uint4 *b, size_t nvec,
                             bool has_div, int d) {
  constexpr int kUnroll = 4;
  const size_t nt = blockDim.x, step = kUnroll * nt;
  size_t v = 0;
  for (; v + step <= nvec; v += step) {
    uint4 xa[kUnroll], xb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) xa[u] = a[v + u * nt + threadIdx.x];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) xb[u] = OP == kOpCopy ? uint4() : b[v + u * nt + threadIdx.x];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      uint4 r = reduce_pack<T, OP>(xa[u], xb[u], has_div, d);
      o0[v + u * nt + threadIdx.x] = r;
      if (o1) o1[v + u * nt + threadIdx.x] = r;
    }
  }
  for (size_t i = v + threadIdx.x; i < nvec; i += nt) {
    uint4 r = reduce_pack<T, OP>(a[i], OP == kOpCopy ? uint4() : b[i], has_div, d);
    o0[i] = r;
    if (o1) o1[i] = r;
  }
}

template <typename T, int OP>
static __device__ __forceinline__ void reduce_block(void *out0, void *out1, const void *a,
                                                    const void *b, size_t n, int div) {
  constexpr size_t kS = sizeof(T);
  char *o0 = static_cast<char *>(out0), *o1 = static_cast<char *>(out1);
  const char *pa = static_cast<const char *>(a), *pb = static_cast<const char *>(b);
  const bool has_div = div > 1;
  const uintptr_t mis = (uintptr_t)pa & 15;
  bool vec = mis % kS == 0 && ((uintptr_t)o0 & 15) == mis &&
             (OP == kOpCopy || ((uintptr_t)pb & 15) == mis) && (!o1 || ((uintptr_t)o1 & 15) == mis);
  if (!vec) {
    uintptr_t any = (uintptr_t)pa | (uintptr_t)o0 | (uintptr_t)o1;
    if (OP != kOpCopy) any |= (uintptr_t)pb;
    if (any % kS == 0) reduce_elems<T, OP, true>(o0, o1, pa, pb, 0, n, has_div, div);
    else reduce_elems<T, OP, false>(o0, o1, pa, pb, 0, n, has_div, div);
    return;
  }
  size_t head = ((16 - mis) & 15) / kS;
  if (head > n) head = n;
  reduce_elems<T, OP, true>(o0, o1, pa, pb, 0, head, has_div, div);
  size_t nvec = (n - head) * kS / 16, done = head + nvec * 16 / kS;
  size_t off = head * kS;
  reduce_vectors<T, OP>(reinterpret_cast<uint4 *>(o0 + off),
                        o1 ? reinterpret_cast<uint4 *>(o1 + off) : nullptr,
                        reinterpret_cast<const uint4 *>(pa + off),
                        OP == kOpCopy ? nullptr : reinterpret_cast<const uint4 *>(pb + off), nvec,
                        has_div, div);
  reduce_elems<T, OP, true>(o0, o1, pa, pb, done, n, has_div, div);
}

#undef KOLO_DEV

}  // namespace kolo_cuda

#endif
