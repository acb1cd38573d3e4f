/* reduce_prims.cuh - device-side data primitives of the CUDA executor.
 *
 * kolo_cuda::reduce_block<T, OP>(out0, out1, a, b, n, div, scalar): one
 * thread block computes out0[i] (and out1[i] when out1 != nullptr) =
 * post(a[i] OP b[i]) for i < n; OP = kOpCopy reads no b (out = post(a[i])).
 * The premul-sum's two: kOpPreSum is a[i] + pre(b[i]) and kOpPreCopy
 * pre(a[i]) (no b), where pre(x) = x * scalar (`scalar`: the bits of one T)
 * rounded to T, as NCCL's FuncPreMulSum; integers wrap.
 * The semantics are host_reduce.h's, bit for bit where IEEE defines them:
 *   - integers wrap (sum and prod in the unsigned type); post divides the
 *     wrapped value with C's truncating division;
 *   - float max is (a > b || isnan(a)) ? a : b, min the same with <;
 *   - float16 / bfloat16 are widened to float32, combined and divided in
 *     float32 and rounded to nearest-even once (cvt.rn); float8 the same,
 *     rounded with the toolkit's __NV_SATFINITE conversion (cvt.rn.satfinite:
 *     kernels/fp8_convert.h is its host twin), with NCCL's max / min (a NaN
 *     operand loses, +0 above -0); float32 / float64
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
#include <cuda_fp8.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "kernels/cuda/device_prims.cuh"

namespace kolo_cuda {

#if KOLO_DEV_HOST_BUILD
using std::isnan;
using std::signbit;
#endif

enum RedOp { kOpSum = 0, kOpProd = 1, kOpMax = 2, kOpMin = 3, kOpCopy = 4, kOpPreSum = 5, kOpPreCopy = 6 };

/* Whether OP reads its second input. */
__host__ __device__ constexpr bool reads_b(int op) { return op != kOpCopy && op != kOpPreCopy; }

#define KOLO_DEV static __device__ __forceinline__

/* ---- arithmetic per element type ----------------------------------------
 * V is the type values are combined in; widen / narrow convert to and from
 * the stored type T; pre is the premul-sum's product, rounded to T. */

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
  KOLO_DEV V pre(V a, V s) { return prod(a, s); }
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
  KOLO_DEV float pre(float a, float s) { return kolo_dev::mul_rn(a, s); }
};
template <>
struct Arith<double> : FloatArith<double> {
  KOLO_DEV double widen(double x) { return x; }
  KOLO_DEV double narrow(double v) { return v; }
  KOLO_DEV double pre(double a, double s) { return kolo_dev::mul_rn(a, s); }
};
template <>
struct Arith<__half> : FloatArith<float> {
  KOLO_DEV float widen(__half x) { return __half2float(x); }
  KOLO_DEV __half narrow(float v) { return __float2half_rn(v); }
  KOLO_DEV float pre(float a, float s) { return widen(narrow(a * s)); }
};
template <>
struct Arith<__nv_bfloat16> : FloatArith<float> {
  KOLO_DEV float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
  KOLO_DEV __nv_bfloat16 narrow(float v) { return __float2bfloat16_rn(v); }
  KOLO_DEV float pre(float a, float s) { return widen(narrow(a * s)); }
};

/* float8: the toolkit's conversions (float from the stored byte; to it with
 * __NV_SATFINITE, nearest-even), and NCCL's __hmax / __hmin semantics. */
template <typename F8>
struct Fp8Arith : FloatArith<float> {
  KOLO_DEV float widen(F8 x) { return static_cast<float>(x); }
  KOLO_DEV F8 narrow(float v) { return F8(v); }
  KOLO_DEV float pre(float a, float s) { return widen(narrow(a * s)); }
  KOLO_DEV float max(float a, float b) {
    float r = (a > b || isnan(b)) ? a : b;
    return a == b ? (signbit(a) ? b : a) : r;
  }
  KOLO_DEV float min(float a, float b) {
    float r = (a < b || isnan(b)) ? a : b;
    return a == b ? (signbit(a) ? a : b) : r;
  }
};
template <>
struct Arith<__nv_fp8_e4m3> : Fp8Arith<__nv_fp8_e4m3> {};
template <>
struct Arith<__nv_fp8_e5m2> : Fp8Arith<__nv_fp8_e5m2> {};

template <typename T>
using ValOf = typename Arith<T>::V;

/* The premul-sum's scalar as a value: `bits` holds one T (little endian). */
template <typename T>
KOLO_DEV ValOf<T> scalar_value(uint64_t bits) {
  T x;
  memcpy(static_cast<void *>(&x), &bits, sizeof(T));
  return Arith<T>::widen(x);
}

/* One element: post(a OP b); s: the premul-sum's scalar.  A copy is the
 * element's bytes (an e5m2 infinity moved by a broadcast stays infinite:
 * only arithmetic saturates). */
template <typename T, int OP>
KOLO_DEV T reduce_elem(T a, T b, bool has_div, int d, ValOf<T> s) {
  using A = Arith<T>;
  if (OP == kOpCopy && !has_div) return a;
  typename A::V x = A::widen(a);
  if (OP == kOpPreCopy) x = A::pre(x, s);
  if (OP == kOpPreSum) x = A::sum(x, A::pre(A::widen(b), s));
  if (OP == kOpSum) x = A::sum(x, A::widen(b));
  if (OP == kOpProd) x = A::prod(x, A::widen(b));
  if (OP == kOpMax) x = A::max(x, A::widen(b));
  if (OP == kOpMin) x = A::min(x, A::widen(b));
  if (has_div) x = A::div(x, d);
  return A::narrow(x);
}

/* 16 bytes of elements at once. */
template <typename T, int OP>
KOLO_DEV uint4 reduce_pack(uint4 a, uint4 b, bool has_div, int d, ValOf<T> s) {
  constexpr int kN = 16 / sizeof(T);
  T x[kN], y[kN];
  memcpy(static_cast<void *>(x), &a, 16); /* void *: __half is a class */
  memcpy(static_cast<void *>(y), &b, 16);
#pragma unroll
  for (int j = 0; j < kN; j++) x[j] = reduce_elem<T, OP>(x[j], y[j], has_div, d, s);
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
/* Unaligned: the value's bits as opaque words, stored byte by byte
 * (kolo_dev::opaque_word says why). */
template <typename T, bool ALIGNED>
KOLO_DEV void store_elem(char *p, size_t i, T v) {
  if (ALIGNED) {
    kolo_dev::st_data(reinterpret_cast<T *>(p) + i, v);
    return;
  }
  uint32_t w[(sizeof(T) + 3) / 4] = {};
  memcpy(w, static_cast<const void *>(&v), sizeof(T));
#pragma unroll
  for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) kolo_dev::opaque_word(w[k]);
  kolo_dev::st_data_bytes(p + i * sizeof(T), w, sizeof(T));
}

/* Elements [lo, hi), one per thread per step. */
template <typename T, int OP, bool ALIGNED>
KOLO_DEV void reduce_elems(char *o0, char *o1, const char *a, const char *b, size_t lo, size_t hi,
                           bool has_div, int d, ValOf<T> s) {
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    T y = reads_b(OP) ? load_elem<T, ALIGNED>(b, i) : T();
    T r = reduce_elem<T, OP>(load_elem<T, ALIGNED>(a, i), y, has_div, d, s);
    store_elem<T, ALIGNED>(o0, i, r);
    if (o1) store_elem<T, ALIGNED>(o1, i, r);
  }
}

/* nvec 16-byte vectors, kUnroll per thread per step (all loads first). */
template <typename T, int OP>
KOLO_DEV void reduce_vectors(uint4 *o0, uint4 *o1, const uint4 *a, const uint4 *b, size_t nvec,
                             bool has_div, int d, ValOf<T> s) {
  constexpr int kUnroll = 4;
  const size_t nt = blockDim.x, step = kUnroll * nt;
  if (nvec > 0) { /* a slice shorter than its head moves no vector from where its vectors would start */
    kolo_dev::aligned(a, 16, "a 16-byte vector load"), kolo_dev::aligned(o0, 16, "a 16-byte vector store");
    if (reads_b(OP)) kolo_dev::aligned(b, 16, "a 16-byte vector load");
    if (o1) kolo_dev::aligned(o1, 16, "a 16-byte vector store");
  }
  size_t v = 0;
  for (; v + step <= nvec; v += step) {
    uint4 xa[kUnroll], xb[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) xa[u] = a[v + u * nt + threadIdx.x];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) xb[u] = reads_b(OP) ? b[v + u * nt + threadIdx.x] : uint4();
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      uint4 r = reduce_pack<T, OP>(xa[u], xb[u], has_div, d, s);
      kolo_dev::st_data(&o0[v + u * nt + threadIdx.x], r);
      if (o1) kolo_dev::st_data(&o1[v + u * nt + threadIdx.x], r);
    }
  }
  for (size_t i = v + threadIdx.x; i < nvec; i += nt) {
    uint4 r = reduce_pack<T, OP>(a[i], reads_b(OP) ? b[i] : uint4(), has_div, d, s);
    kolo_dev::st_data(&o0[i], r);
    if (o1) kolo_dev::st_data(&o1[i], r);
  }
}

template <typename T, int OP>
static __device__ __forceinline__ void reduce_block(void *out0, void *out1, const void *a,
                                                    const void *b, size_t n, int div,
                                                    uint64_t scalar = 0) {
  constexpr size_t kS = sizeof(T);
  const ValOf<T> s = scalar_value<T>(scalar);
  char *o0 = static_cast<char *>(out0), *o1 = static_cast<char *>(out1);
  const char *pa = static_cast<const char *>(a), *pb = static_cast<const char *>(b);
  const bool has_div = div > 1;
  kolo_dev::reachable(pa, n * kS, "the source a"), kolo_dev::reachable(o0, n * kS, "the output o0");
  if (reads_b(OP)) kolo_dev::reachable(pb, n * kS, "the source b");
  if (o1) kolo_dev::reachable(o1, n * kS, "the output o1");
  const uintptr_t mis = (uintptr_t)pa & 15;
  /* The premul-sum moves element by element: its vector loop raised the
   * registers of the executor kernels that instantiate it (a kernel is
   * charged its worst path), by 2 on the 16-bit and 8-bit ones. */
  bool vec = OP != kOpPreSum && OP != kOpPreCopy && mis % kS == 0 && ((uintptr_t)o0 & 15) == mis &&
             (!reads_b(OP) || ((uintptr_t)pb & 15) == mis) && (!o1 || ((uintptr_t)o1 & 15) == mis);
  if (!vec) {
    uintptr_t any = (uintptr_t)pa | (uintptr_t)o0 | (uintptr_t)o1;
    if (reads_b(OP)) any |= (uintptr_t)pb;
    if (any % kS == 0) reduce_elems<T, OP, true>(o0, o1, pa, pb, 0, n, has_div, div, s);
    else reduce_elems<T, OP, false>(o0, o1, pa, pb, 0, n, has_div, div, s);
    return;
  }
  size_t head = ((16 - mis) & 15) / kS;
  if (head > n) head = n;
  reduce_elems<T, OP, true>(o0, o1, pa, pb, 0, head, has_div, div, s);
  size_t nvec = (n - head) * kS / 16, done = head + nvec * 16 / kS;
  size_t off = head * kS;
  reduce_vectors<T, OP>(reinterpret_cast<uint4 *>(o0 + off),
                        o1 ? reinterpret_cast<uint4 *>(o1 + off) : nullptr,
                        reinterpret_cast<const uint4 *>(pa + off),
                        reads_b(OP) ? reinterpret_cast<const uint4 *>(pb + off) : nullptr, nvec,
                        has_div, div, s);
  reduce_elems<T, OP, true>(o0, o1, pa, pb, done, n, has_div, div, s);
}

#undef KOLO_DEV

}  // namespace kolo_cuda

#endif
