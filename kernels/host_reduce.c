/* host_reduce.c - the host executor's data primitives (see host_reduce.h).
 *
 * Shape.  Every element function below (load, combine, post-divide, store)
 * is a small static inline; one macro turns them into a plain loop per
 * dtype x op, and one list (KOLO_HOST_TYPES x KOLO_HOST_OPS) instantiates
 * the loops and fills the dispatch tables.  The loops are plain enough for
 * GCC's vectorizer: no calls, no early exits, selects instead of branches.
 *
 * Alignment and aliasing.  The executor passes arbitrary byte offsets (a
 * user buffer at ptr+1 is legal), so elements are never read through typed
 * pointers: each load and store is a memcpy of one element, which GCC turns
 * into an unaligned (v)movu.  Buffers are `char *`, so the vectorizer
 * versions each loop on a run-time overlap check; that check lets an output
 * equal an input exactly (a write-after-read at the same index), so the
 * in-place cases run the vector loop too.  Partial overlap is not allowed by
 * the interface; it would take the scalar loop and still be well defined.
 *
 * ISAs.  On x86-64 with GCC 12 or later the loops are built three times
 * with target_clones -- x86-64-v4 (AVX-512 F/BW/DQ/VL), x86-64-v3 (AVX2)
 * and the SSE2 baseline -- and the dynamic loader picks one per function
 * through an ifunc, so the binary runs on any x86-64 and uses the widest
 * vectors it has.  float16 / bfloat16 have their own 8-wide AVX2 + F16C
 * loops (see below), chosen at run time.  With other compilers or targets,
 * or built with -DKOLO_NO_CLONES (how the tests reach the portable loops on
 * any CPU), every loop is built once for the target's baseline.  Only the
 * premul-sum has a multiply followed by an add, and the product must be
 * rounded on its own: this file is built with -ffp-contract=off.
 *
 * Semantics, shared with the CUDA primitives (kernels/cuda/reduce_prims.cuh):
 *   - integers wrap: sum and prod are computed in the unsigned type;
 *   - float max is (a > b || isnan(a)) ? a : b and min likewise with <:
 *     a NaN in either input gives NaN (a's NaN when both are), and for
 *     max(-0, +0) the second operand is returned;
 *   - float16 / bfloat16 are widened to float32, combined and divided in
 *     float32, and rounded back to nearest-even once; float32 and float64
 *     combine and divide in their own precision;
 *   - float8 (e4m3, e5m2) likewise through float32, rounded back with
 *     saturation (fp8_convert.h); their max / min are NCCL's: a NaN operand
 *     loses to the other, +0 is above -0.  One float32 operation rounded to
 *     float8 gives what NCCL's float16 operation rounded to float8 gives:
 *     checked on every pair of values (tests/test_cuda_reduce.cc);
 *   - premul-sum: pre(x) = x * scalar rounded to the type (integers wrap),
 *     then the sum, as NCCL's FuncPreMulSum;
 *   - post (div > 1): integers take C's division of the wrapped value
 *     (truncation toward zero).  For 32-bit types it is computed as
 *     (T)((double)x / div), for 8-bit ones as (T)((float)x / div): both
 *     exact (a non-integral quotient lies at least 1/div from an integer,
 *     more than the rounding error; with div > 255 an 8-bit quotient is
 *     below 1 and stays so) and, unlike integer division, they vectorize.
 *     64-bit types divide in the integer unit, one element at a time.
 */
#include "kernels/host_reduce.h"

#include <math.h>
#include <string.h>

#include "common/copy.h"
#include "kernels/fp8_convert.h"

#if defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 12 && !defined(__clang__) && \
    !defined(KOLO_NO_CLONES)
#define KOLO_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KOLO_CLONES
#endif

#define KOLO_ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- float16 / bfloat16 <-> float ---------------------------------------
 * Branch-free (selects only) so that the reduce loops vectorize.  They give
 * the same bits as x86 F16C (vcvtph2ps / vcvtps2ph with round-to-nearest):
 * a signalling NaN comes back quiet, its payload otherwise kept. */

KOLO_ALWAYS_INLINE uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

KOLO_ALWAYS_INLINE float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

KOLO_ALWAYS_INLINE float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu; /* exponent and mantissa */
  /* normal: rebias the exponent from 15 to 127 */
  uint32_t normal = (em << 13) + ((uint32_t)(127 - 15) << 23);
  /* inf / NaN: all exponent bits set, NaNs made quiet */
  uint32_t special = (em << 13) | 0x7f800000u | (em > 0x7c00u ? 0x00400000u : 0u);
  /* zero / subnormal: m * 2^-24, exact in float (and a normal float).  It
   * is merged with a mask, not a select: under -ftrapping-math GCC will not
   * if-convert a float operation that only one arm uses, and the loop would
   * not vectorize. */
  uint32_t subnormal = f32_bits((float)(int32_t)em * 0x1p-24f);
  uint32_t is_subnormal = 0u - (uint32_t)(em < 0x0400u);
  uint32_t r = (subnormal & is_subnormal) | ((em >= 0x7c00u ? special : normal) & ~is_subnormal);
  return f32_from_bits(r | sign);
}

KOLO_ALWAYS_INLINE uint16_t float_to_half(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  /* NaN: quiet, the top 9 payload bits kept */
  uint32_t nan = 0x7e00u | ((a >> 13) & 0x03ffu);
  /* normal half (2^-14 <= |f| < 2^16): rebias, round the 13 dropped bits
   * to nearest-even; a carry may ripple into the exponent, up to inf */
  uint32_t normal = (a - ((uint32_t)(127 - 15) << 23) + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  /* subnormal half (|f| < 2^-14): m = 24-bit significand, shifted right by
   * s = 126 - exponent in [14, 31] with the same rounding (s clamped so that
   * the unused lanes stay defined; s >= 25 rounds to 0 anyway) */
  uint32_t e = a >> 23;
  uint32_t m = (a & 0x007fffffu) | 0x00800000u;
  uint32_t s = 126u - e;
  s = (s >= 14u && s <= 31u) ? s : 31u;
  uint32_t subnormal = (m + (1u << (s - 1)) - 1u + ((m >> s) & 1u)) >> s;
  uint32_t r = a > 0x7f800000u    ? nan
               : a >= 0x47800000u ? 0x7c00u /* |f| >= 2^16, inf: overflow */
               : a >= 0x38800000u ? normal
                                  : subnormal;
  return (uint16_t)(r | sign);
}

KOLO_ALWAYS_INLINE float bf16_to_float(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

KOLO_ALWAYS_INLINE uint16_t float_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* nearest-even */
  uint32_t nan = (u >> 16) | 0x0040u;                        /* quiet */
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

float kolo_half_to_float(uint16_t h) { return half_to_float(h); }
uint16_t kolo_float_to_half(float f) { return float_to_half(f); }
float kolo_bf16_to_float(uint16_t h) { return bf16_to_float(h); }
uint16_t kolo_float_to_bf16(float f) { return float_to_bf16(f); }

/* ---- element functions, one set per dtype --------------------------------
 * For a dtype `name`: val_name (the type values are combined in),
 * ld_name / st_name (element i of an unaligned byte buffer), sum_ prod_
 * max_ min_ (the ops) and div_ (the post-op). */

#define KOLO_ELEM_ACCESS(name, T, V, TO_V, FROM_V)                              \
  typedef V val_##name;                                                       \
  KOLO_ALWAYS_INLINE V ld_##name(const char *p, size_t i) {                   \
    T x;                                                                      \
    memcpy(&x, p + i * sizeof(T), sizeof(T));                                 \
    return TO_V(x);                                                           \
  }                                                                           \
  KOLO_ALWAYS_INLINE void st_##name(char *p, size_t i, V v) {                 \
    T x = FROM_V(v);                                                          \
    memcpy(p + i * sizeof(T), &x, sizeof(T));                                 \
  }

#define KOLO_IDENTITY(x) (x)

/* Integers: U is the unsigned type of the same width (wrapping arithmetic),
 * DIV_T the type the post-op divides in (double, or T itself for 64 bits). */
#define KOLO_ELEMS_INT(name, T, U, DIV_T)                                          \
  KOLO_ELEM_ACCESS(name, T, T, KOLO_IDENTITY, KOLO_IDENTITY)                      \
  KOLO_ALWAYS_INLINE T sum_##name(T a, T b) { return (T)(U)((U)a + (U)b); }      \
  KOLO_ALWAYS_INLINE T prod_##name(T a, T b) { return (T)(U)((U)a * (U)b); }     \
  KOLO_ALWAYS_INLINE T max_##name(T a, T b) { return a > b ? a : b; }            \
  KOLO_ALWAYS_INLINE T min_##name(T a, T b) { return a < b ? a : b; }            \
  KOLO_ALWAYS_INLINE T div_##name(T a, int d) { return (T)((DIV_T)a / (DIV_T)d); }   \
  KOLO_ALWAYS_INLINE T pre_##name(T a, T s) { return prod_##name(a, s); }

/* Floats: V is the type values are combined and divided in.  pre_ is the
 * premul-sum's scaling, rounded to the type T as NCCL rounds it before the
 * sum.  HALF: the 16-bit types, kept apart because their loops are built
 * once (on x86 with F16C the SIMD path below replaces them).  FP8: float8,
 * whose max and min are NCCL's (__hmax / __hmin: a NaN operand loses, +0 is
 * above -0), not the NaN-propagating ones of the other floats. */
#define KOLO_FLOAT_ARITH(name, V)                                                  \
  KOLO_ALWAYS_INLINE V sum_##name(V a, V b) { return a + b; }                    \
  KOLO_ALWAYS_INLINE V prod_##name(V a, V b) { return a * b; }                   \
  KOLO_ALWAYS_INLINE V div_##name(V a, int d) { return a / (V)d; }
#define KOLO_NAN_WINS(name, V)                                                     \
  KOLO_ALWAYS_INLINE V max_##name(V a, V b) { return (a > b || isnan(a)) ? a : b; } \
  KOLO_ALWAYS_INLINE V min_##name(V a, V b) { return (a < b || isnan(a)) ? a : b; }
#define KOLO_ELEMS_FLOAT(name, T, V, TO_V, FROM_V)                                 \
  KOLO_ELEM_ACCESS(name, T, V, TO_V, FROM_V)                                      \
  KOLO_FLOAT_ARITH(name, V)                                                       \
  KOLO_NAN_WINS(name, V)                                                          \
  KOLO_ALWAYS_INLINE V pre_##name(V a, V s) { return a * s; }
#define KOLO_ELEMS_HALF(name, T, V, TO_V, FROM_V)                                  \
  KOLO_ELEM_ACCESS(name, T, V, TO_V, FROM_V)                                      \
  KOLO_FLOAT_ARITH(name, V)                                                       \
  KOLO_NAN_WINS(name, V)                                                          \
  KOLO_ALWAYS_INLINE V pre_##name(V a, V s) { return TO_V(FROM_V(a * s)); }
#define KOLO_ELEMS_FP8(name, T, V, TO_V, FROM_V)                                   \
  KOLO_ELEM_ACCESS(name, T, V, TO_V, FROM_V)                                      \
  KOLO_FLOAT_ARITH(name, V)                                                       \
  KOLO_ALWAYS_INLINE V max_##name(V a, V b) {                                     \
    V r = (a > b || isnan(b)) ? a : b;                                            \
    return a == b ? (signbit(a) ? b : a) : r;                                     \
  }                                                                               \
  KOLO_ALWAYS_INLINE V min_##name(V a, V b) {                                     \
    V r = (a < b || isnan(b)) ? a : b;                                            \
    return a == b ? (signbit(a) ? a : b) : r;                                     \
  }                                                                               \
  KOLO_ALWAYS_INLINE V pre_##name(V a, V s) { return TO_V(FROM_V(a * s)); }

/* The dtypes: X(dtype, name, KIND, arguments of KOLO_ELEMS_<KIND>).  Every
 * element function, loop and table entry below comes from this list. */
#define KOLO_HOST_TYPES(X)                                                    \
  X(koloInt8, i8, INT, int8_t, uint8_t, float)                                \
  X(koloUint8, u8, INT, uint8_t, uint8_t, float)                              \
  X(koloInt32, i32, INT, int32_t, uint32_t, double)                           \
  X(koloUint32, u32, INT, uint32_t, uint32_t, double)                         \
  X(koloInt64, i64, INT, int64_t, uint64_t, int64_t)                          \
  X(koloUint64, u64, INT, uint64_t, uint64_t, uint64_t)                       \
  X(koloFloat16, f16, HALF, uint16_t, float, half_to_float, float_to_half)   \
  X(koloFloat32, f32, FLOAT, float, float, KOLO_IDENTITY, KOLO_IDENTITY)      \
  X(koloFloat64, f64, FLOAT, double, double, KOLO_IDENTITY, KOLO_IDENTITY)    \
  X(koloBfloat16, bf16, HALF, uint16_t, float, bf16_to_float, float_to_bf16)  \
  X(koloFloat8e4m3, e4m3, FP8, uint8_t, float, kolo_e4m3_to_float_inline,     \
    kolo_float_to_e4m3_inline)                                                \
  X(koloFloat8e5m2, e5m2, FP8, uint8_t, float, kolo_e5m2_to_float_inline,     \
    kolo_float_to_e5m2_inline)

/* The combining ops; koloAvg runs as sum (its division is the post-op). */
#define KOLO_HOST_OPS(X, ...)                                  \
  X(koloSum, sum, __VA_ARGS__) X(koloProd, prod, __VA_ARGS__) \
  X(koloMax, max, __VA_ARGS__) X(koloMin, min, __VA_ARGS__)

#define KOLO_DEF_ELEMS(dtype, name, KIND, ...) KOLO_ELEMS_##KIND(name, __VA_ARGS__)
KOLO_HOST_TYPES(KOLO_DEF_ELEMS)

/* ---- loops ---------------------------------------------------------------
 * One loop body per (dtype, op); has_out1 and has_div are constants at each
 * inlined call, so every variant is a loop of its own, without tests. */

#define KOLO_CLONES_INT KOLO_CLONES
#define KOLO_CLONES_FLOAT KOLO_CLONES
#define KOLO_CLONES_HALF
#define KOLO_CLONES_FP8 KOLO_CLONES

typedef void (*kolo_reduce_fn)(char *out0, char *out1, const char *a, const char *b, size_t n,
                               int div);
typedef void (*kolo_copy_fn)(char *out0, char *out1, const char *a, size_t n, int div);

#define KOLO_DEF_REDUCE(dtype, op, name, CLONES)                                        \
  KOLO_ALWAYS_INLINE void reduce_##name##_##op##_body(char *o0, char *o1, const char *a,  \
                                                      const char *b, size_t n, int d,    \
                                                      int has_out1, int has_div) {       \
    for (size_t i = 0; i < n; i++) {                                                      \
      val_##name r = op##_##name(ld_##name(a, i), ld_##name(b, i));                        \
      if (has_div) r = div_##name(r, d);                                                  \
      st_##name(o0, i, r);                                                                \
      if (has_out1) st_##name(o1, i, r);                                                  \
    }                                                                                     \
  }                                                                                       \
  CLONES static void reduce_##name##_##op(char *o0, char *o1, const char *a, const char *b, \
                                          size_t n, int d) {                              \
    if (o1 && d > 1) reduce_##name##_##op##_body(o0, o1, a, b, n, d, 1, 1);               \
    else if (o1) reduce_##name##_##op##_body(o0, o1, a, b, n, d, 1, 0);                   \
    else if (d > 1) reduce_##name##_##op##_body(o0, o1, a, b, n, d, 0, 1);                \
    else reduce_##name##_##op##_body(o0, o1, a, b, n, d, 0, 0);                           \
  }

/* A copy that divides (the last step of an average with nothing to add). */
#define KOLO_DEF_COPY_DIV(name, CLONES)                                                   \
  KOLO_ALWAYS_INLINE void copy_div_##name##_body(char *o0, char *o1, const char *a,       \
                                                 size_t n, int d, int has_out1) {         \
    for (size_t i = 0; i < n; i++) {                                                      \
      val_##name r = div_##name(ld_##name(a, i), d);                                      \
      st_##name(o0, i, r);                                                                \
      if (has_out1) st_##name(o1, i, r);                                                  \
    }                                                                                     \
  }                                                                                       \
  CLONES static void copy_div_##name(char *o0, char *o1, const char *a, size_t n, int d) { \
    if (o1) copy_div_##name##_body(o0, o1, a, n, d, 1);                                   \
    else copy_div_##name##_body(o0, o1, a, n, d, 0);                                      \
  }

/* The premul-sum: out = a + pre(b), or pre(a) when there is no b. */
#define KOLO_DEF_PREMUL(name, CLONES)                                                     \
  KOLO_ALWAYS_INLINE void premul_##name##_body(char *o0, char *o1, const char *a,         \
                                               const char *b, size_t n, val_##name s,     \
                                               int has_out1, int has_b) {                 \
    for (size_t i = 0; i < n; i++) {                                                      \
      val_##name r = has_b ? sum_##name(ld_##name(a, i), pre_##name(ld_##name(b, i), s))  \
                           : pre_##name(ld_##name(a, i), s);                              \
      st_##name(o0, i, r);                                                                \
      if (has_out1) st_##name(o1, i, r);                                                  \
    }                                                                                     \
  }                                                                                       \
  CLONES static void premul_##name(char *o0, char *o1, const char *a, const char *b,     \
                                   size_t n, const char *scalar) {                        \
    val_##name s = ld_##name(scalar, 0);                                                  \
    if (o1 && b) premul_##name##_body(o0, o1, a, b, n, s, 1, 1);                          \
    else if (o1) premul_##name##_body(o0, o1, a, b, n, s, 1, 0);                          \
    else if (b) premul_##name##_body(o0, o1, a, b, n, s, 0, 1);                           \
    else premul_##name##_body(o0, o1, a, b, n, s, 0, 0);                                  \
  }

#define KOLO_DEF_LOOPS(dtype, name, KIND, ...)                \
  KOLO_HOST_OPS(KOLO_DEF_REDUCE, name, KOLO_CLONES_##KIND)    \
  KOLO_DEF_COPY_DIV(name, KOLO_CLONES_##KIND)                 \
  KOLO_DEF_PREMUL(name, KOLO_CLONES_##KIND)
KOLO_HOST_TYPES(KOLO_DEF_LOOPS)

#define KOLO_REDUCE_ENTRY(op_enum, op, name) [op_enum] = reduce_##name##_##op,
#define KOLO_REDUCE_ROW(dtype, name, ...) [dtype] = {KOLO_HOST_OPS(KOLO_REDUCE_ENTRY, name)},
static const kolo_reduce_fn reduce_fns[koloNumTypes][koloNumOps] = {
    KOLO_HOST_TYPES(KOLO_REDUCE_ROW)};

#define KOLO_COPY_ENTRY(dtype, name, ...) [dtype] = copy_div_##name,
static const kolo_copy_fn copy_div_fns[koloNumTypes] = {KOLO_HOST_TYPES(KOLO_COPY_ENTRY)};

typedef void (*kolo_premul_fn)(char *out0, char *out1, const char *a, const char *b, size_t n,
                               const char *scalar);
#define KOLO_PREMUL_ENTRY(dtype, name, ...) [dtype] = premul_##name,
static const kolo_premul_fn premul_fns[koloNumTypes] = {KOLO_HOST_TYPES(KOLO_PREMUL_ENTRY)};

#define KOLO_SIZE_ENTRY(dtype, name, KIND, T, ...) [dtype] = sizeof(T),
static const size_t elem_size[koloNumTypes] = {KOLO_HOST_TYPES(KOLO_SIZE_ENTRY)};

/* ---- float16 / bfloat16 on x86 with AVX2 and F16C -------------------------
 * GCC does not vectorize conversions to and from 16-bit floats well (the
 * loops above run at ~6 cycles per float16 element with AVX2), so on CPUs
 * with AVX2 + F16C (every x86-64-v3 CPU) these loops do 8 elements per step
 * with vcvtph2ps / vcvtps2ph (round to nearest-even, whatever MXCSR says)
 * and the bfloat16 shifts, and hand the last n % 8 elements to the portable
 * loops.  They compute exactly what the portable loops compute: the same
 * float32 operations, and conversions that give the same bits (checked by
 * tests/test_host_reduce.cc over every half and many floats). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(KOLO_NO_CLONES)
#define KOLO_HALF_SIMD 1 /* GCC: clang 14 cannot ask __builtin_cpu_supports for f16c */
#include <immintrin.h>

#define KOLO_V3 __attribute__((target("avx2,f16c")))
#define KOLO_V3_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))

KOLO_V3_INLINE __m256 v8_ld_f16(const char *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
KOLO_V3_INLINE void v8_st_f16(char *p, __m256 v) {
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128((__m128i *)(void *)p, h);
}
KOLO_V3_INLINE __m256 v8_ld_bf16(const char *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
KOLO_V3_INLINE void v8_st_bf16(char *p, __m256 v) { /* as float_to_bf16 */
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan); /* each lane <= 0xffff */
  __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128((__m128i *)(void *)p, h);
}

KOLO_V3_INLINE __m256 v8_sum(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
KOLO_V3_INLINE __m256 v8_prod(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
KOLO_V3_INLINE __m256 v8_max(__m256 a, __m256 b) { /* (a > b || isnan(a)) ? a : b */
  __m256 take_a = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take_a);
}
KOLO_V3_INLINE __m256 v8_min(__m256 a, __m256 b) { /* (a < b || isnan(a)) ? a : b */
  __m256 take_a = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take_a);
}

/* Loads happen before stores in each step, so an output may be an input. */
#define KOLO_DEF_HALF_SIMD_REDUCE(dtype, op, name)                                        \
  KOLO_V3 static void simd_reduce_##name##_##op(char *o0, char *o1, const char *a,          \
                                                const char *b, size_t n, int d) {           \
    __m256 vd = _mm256_set1_ps((float)d);                                                   \
    size_t i = 0;                                                                           \
    for (; i + 8 <= n; i += 8) {                                                            \
      __m256 r = v8_##op(v8_ld_##name(a + 2 * i), v8_ld_##name(b + 2 * i));                 \
      if (d > 1) r = _mm256_div_ps(r, vd);                                                  \
      v8_st_##name(o0 + 2 * i, r);                                                          \
      if (o1) v8_st_##name(o1 + 2 * i, r);                                                  \
    }                                                                                       \
    if (i < n)                                                                              \
      reduce_##name##_##op(o0 + 2 * i, o1 ? o1 + 2 * i : NULL, a + 2 * i, b + 2 * i, n - i, d); \
  }

#define KOLO_DEF_HALF_SIMD(name)                                                          \
  KOLO_HOST_OPS(KOLO_DEF_HALF_SIMD_REDUCE, name)                                          \
  KOLO_V3 static void simd_copy_div_##name(char *o0, char *o1, const char *a, size_t n,    \
                                           int d) {                                       \
    __m256 vd = _mm256_set1_ps((float)d);                                                   \
    size_t i = 0;                                                                           \
    for (; i + 8 <= n; i += 8) {                                                            \
      __m256 r = _mm256_div_ps(v8_ld_##name(a + 2 * i), vd);                                \
      v8_st_##name(o0 + 2 * i, r);                                                          \
      if (o1) v8_st_##name(o1 + 2 * i, r);                                                  \
    }                                                                                       \
    if (i < n) copy_div_##name(o0 + 2 * i, o1 ? o1 + 2 * i : NULL, a + 2 * i, n - i, d);    \
  }
KOLO_DEF_HALF_SIMD(f16)
KOLO_DEF_HALF_SIMD(bf16)

/* Every x86-64-v3 CPU has both; checked once per call (a load and a test). */
static int have_half_simd(void) {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
#endif /* KOLO_HALF_SIMD */

/* ---- dispatch ------------------------------------------------------------ */

static kolo_reduce_fn pick_reduce(koloDataType_t type, koloRedOp_t op) {
#if KOLO_HALF_SIMD
#define KOLO_SIMD_ENTRY(op_enum, op, name) [op_enum] = simd_reduce_##name##_##op,
  static const kolo_reduce_fn f16[koloNumOps] = {KOLO_HOST_OPS(KOLO_SIMD_ENTRY, f16)};
  static const kolo_reduce_fn bf16[koloNumOps] = {KOLO_HOST_OPS(KOLO_SIMD_ENTRY, bf16)};
  if (type == koloFloat16 && have_half_simd()) return f16[op];
  if (type == koloBfloat16 && have_half_simd()) return bf16[op];
#endif
  return reduce_fns[type][op];
}

static kolo_copy_fn pick_copy_div(koloDataType_t type) {
#if KOLO_HALF_SIMD
  if (type == koloFloat16 && have_half_simd()) return simd_copy_div_f16;
  if (type == koloBfloat16 && have_half_simd()) return simd_copy_div_bf16;
#endif
  return copy_div_fns[type];
}

/* out = a, skipped where out is a itself. */
static void copy_bytes(void *out, const void *a, size_t bytes) {
  if (out && out != a) kolo_copy(out, a, bytes);
}

void kolo_host_reduce(void *out0, void *out1, const void *a, const void *b, size_t n,
                      koloDataType_t type, koloRedOp_t op, int div) {
  if (n == 0 || (unsigned)type >= koloNumTypes || (unsigned)op >= koloNumOps) return;
  if (b == NULL && div <= 1) {
    copy_bytes(out0, a, n * elem_size[type]);
    copy_bytes(out1, a, n * elem_size[type]);
  } else if (b == NULL) {
    kolo_copy_fn f = pick_copy_div(type);
    if (f) f(out0, out1, a, n, div);
  } else {
    kolo_reduce_fn f = pick_reduce(type, op == koloAvg ? koloSum : op);
    if (f) f(out0, out1, a, b, n, div);
  }
}

void kolo_host_reduce_premul(void *out0, void *out1, const void *a, const void *b, size_t n,
                             koloDataType_t type, const void *scalar) {
  if (n == 0 || (unsigned)type >= koloNumTypes) return;
  premul_fns[type](out0, out1, a, b, n, scalar);
}
