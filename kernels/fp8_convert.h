/* fp8_convert.h - float8 <-> float on the host, bit for bit as the CUDA
 * toolkit converts them (cuda_fp8.h: __nv_fp8_e4m3 / __nv_fp8_e5m2 to
 * float, and float to them with __NV_SATFINITE, which is what NCCL's
 * reductions use and what the CUDA kernels here use):
 *
 *   e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinity,
 *         S.1111.111 is NaN; largest finite 448, smallest 2^-9.
 *   e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (the
 *         top byte of a float16); largest finite 57344, smallest 2^-16.
 *
 * To float: exact; a NaN gives the toolkit's canonical NaN, 0x7fffffff,
 * whatever its sign.  From float: round to
 * nearest, ties to even; a magnitude beyond the largest finite value,
 * infinity included, saturates to that value (sign kept); any NaN gives
 * 0x7f.  Branch-free (selects only), so that reduce loops vectorize, as the
 * float16 conversions of host_reduce.c. */
#ifndef KOLO_KERNELS_FP8_CONVERT_H
#define KOLO_KERNELS_FP8_CONVERT_H

#include <stdint.h>
#include <string.h>

#define KOLO_F8_INLINE static inline __attribute__((always_inline))
#define KOLO_F8_NAN 0x7fffffffu

KOLO_F8_INLINE uint32_t kolo_f8_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

KOLO_F8_INLINE float kolo_f8_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Zero and subnormals are m * 2^-sub_exp (m < 8), exact in float; normals
 * rebias the exponent.  Merged with masks rather than selects of floats
 * (see host_reduce.c's half_to_float: -ftrapping-math). */
KOLO_F8_INLINE float kolo_e4m3_to_float_inline(uint8_t x) {
  uint32_t sign = (uint32_t)(x & 0x80u) << 24, em = x & 0x7fu;
  uint32_t normal = (em << 20) + ((uint32_t)(127 - 7) << 23);
  uint32_t sub = kolo_f8_bits((float)(int32_t)em * 0x1p-9f);
  uint32_t is_sub = 0u - (uint32_t)(em < 0x08u);
  uint32_t r = ((sub & is_sub) | (normal & ~is_sub)) | sign;
  return kolo_f8_float(em == 0x7fu ? KOLO_F8_NAN : r);
}

KOLO_F8_INLINE float kolo_e5m2_to_float_inline(uint8_t x) {
  uint32_t sign = (uint32_t)(x & 0x80u) << 24, em = x & 0x7fu;
  uint32_t normal = (em << 21) + ((uint32_t)(127 - 15) << 23);
  uint32_t sub = kolo_f8_bits((float)(int32_t)em * 0x1p-16f);
  uint32_t is_sub = 0u - (uint32_t)(em < 0x04u);
  uint32_t r = ((sub & is_sub) | (normal & ~is_sub)) | sign;
  r = em == 0x7cu ? (0x7f800000u | sign) : r; /* infinity */
  return kolo_f8_float(em > 0x7cu ? KOLO_F8_NAN : r);
}

/* |f| = a (float bits without the sign).  Normal results: rebias and round
 * the `drop` low bits to nearest-even (a carry may ripple into the exponent).
 * Subnormal results: the 24-bit significand shifted right by s = sub_shift -
 * exponent with the same rounding (s clamped to 31 for tiny inputs, which
 * round to 0 anyway). */
KOLO_F8_INLINE uint32_t kolo_f8_round(uint32_t a, uint32_t rebias, uint32_t drop, uint32_t sub_shift,
                                      uint32_t min_normal) {
  uint32_t normal = (a - (rebias << 23) + ((1u << (drop - 1)) - 1u) + ((a >> drop) & 1u)) >> drop;
  uint32_t m = (a & 0x007fffffu) | 0x00800000u;
  uint32_t s = sub_shift - (a >> 23);
  s = (s > drop && s <= 31u) ? s : 31u;
  uint32_t sub = (m + (1u << (s - 1)) - 1u + ((m >> s) & 1u)) >> s;
  return a >= min_normal ? normal : sub;
}

/* 464 = 448 + half an ulp: from there on (a tie that rounds to 448 too)
 * the result saturates. */
KOLO_F8_INLINE uint8_t kolo_float_to_e4m3_inline(float f) {
  uint32_t u = kolo_f8_bits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  uint32_t r = a >= 0x43e80000u ? 0x7eu : kolo_f8_round(a, 127 - 7, 20, 141, 0x3c800000u);
  return (uint8_t)(a > 0x7f800000u ? 0x7fu : r | sign);
}

/* 61440 = 57344 + half an ulp, a tie that rounds to 65536: overflow. */
KOLO_F8_INLINE uint8_t kolo_float_to_e5m2_inline(float f) {
  uint32_t u = kolo_f8_bits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  uint32_t r = a >= 0x47700000u ? 0x7bu : kolo_f8_round(a, 127 - 15, 21, 134, 0x38800000u);
  return (uint8_t)(a > 0x7f800000u ? 0x7fu : r | sign);
}

/* The same, out of line (tests, core). */
float kolo_e4m3_to_float(uint8_t x);
float kolo_e5m2_to_float(uint8_t x);
uint8_t kolo_float_to_e4m3(float f);
uint8_t kolo_float_to_e5m2(float f);

#endif
