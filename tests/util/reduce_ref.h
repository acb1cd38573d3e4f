/* reduce_ref.h - reference for the reduce primitives (host and CUDA).
 *
 * An independent model of host_reduce.h's semantics, shared by
 * test_host_reduce.cc and test_cuda_reduce.cc:
 *   - integers in exact uint64 wrapping arithmetic, truncated to the width,
 *     division by `div` in int64 / uint64 (C truncation);
 *   - floats in double, rounded to the element's format by round_to_format
 *     below (a plain-integer round-to-nearest-even written without any of
 *     the bit tricks the code under test uses).
 *
 * Tolerance: none.  Every result is compared bit for bit, except that a NaN
 * only has to be a NaN (payloads differ between x86 and CUDA).  Exact
 * equality is right because each reference value is the correctly rounded
 * result of the one operation the spec performs:
 *   - float32 a+b: the double sum rounded to float.  The double sum may be
 *     inexact, but double-then-float rounding of +, *, / equals a single
 *     rounding because 53 >= 2*24 + 2 (Figueroa, "When is double rounding
 *     innocuous?", 1995); a*b is exact in double.
 *   - float16 / bfloat16: the spec computes in float32 and rounds once to
 *     16 bits; the reference does the same steps (round to float32, divide,
 *     round to float32, round to 16 bits) with its own rounding function.
 *   - float64: the double operation itself (IEEE defines it).
 *   - max/min: (a > b || isnan(a)) ? a : b, and the same with <.
 *   - float8 (e4m3, e5m2): decoded from the bit fields by their
 *     definition, computed in double, rounded to float32 where the spec
 *     rounds to float32 (the divide), then to the format by fp8_round below:
 *     nearest-even on the format's grid, saturating at the largest finite
 *     value (infinity too), NaN to NaN.  One rounding of the exact double
 *     result equals the spec's float32 result rounded again, since
 *     24 >= 2*4 + 2 (Figueroa, as above).  max/min are NCCL's: a NaN operand
 *     loses (both NaN: NaN), +0 is above -0.
 *   - premul-sum: pre(x) = x * s rounded to the type (integers wrap), then
 *     the sum as above.
 */
#ifndef KOLO_TESTS_UTIL_REDUCE_REF_H
#define KOLO_TESTS_UTIL_REDUCE_REF_H

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "kolo.h"

namespace kolo_ref {

inline size_t type_size(koloDataType_t t) {
  switch (t) {
  case koloInt8: case koloUint8: case koloFloat8e4m3: case koloFloat8e5m2: return 1;
  case koloFloat16: case koloBfloat16: return 2;
  case koloInt32: case koloUint32: case koloFloat32: return 4;
  case koloInt64: case koloUint64: case koloFloat64: return 8;
  default: return 0;
  }
}

inline const char *type_name(koloDataType_t t) {
  static const char *names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
                                "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return (unsigned)t < koloNumTypes ? names[t] : "?";
}

inline const char *op_name(koloRedOp_t op) {
  static const char *names[] = {"sum", "prod", "max", "min", "avg"};
  return (unsigned)op < koloNumOps ? names[op] : "?";
}

inline bool is_fp8(koloDataType_t t) { return t == koloFloat8e4m3 || t == koloFloat8e5m2; }

inline bool is_float(koloDataType_t t) {
  return t == koloFloat16 || t == koloFloat32 || t == koloFloat64 || t == koloBfloat16 || is_fp8(t);
}

inline bool is_signed_int(koloDataType_t t) {
  return t == koloInt8 || t == koloInt32 || t == koloInt64;
}

/* ---- binary floating-point formats ---------------------------------------
 * A format with p significand bits (hidden bit included) and `ebits`
 * exponent bits: half (11, 5), bfloat16 (8, 8), float (24, 8). */
struct Format {
  int p, ebits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
  int emin() const { return 1 - bias(); } /* exponent of the smallest normal */
  int emax() const { return bias(); }
};
constexpr Format kHalf{11, 5}, kBf16{8, 8}, kFloat{24, 8};

/* The value of a bit pattern, exactly (NaN for NaNs). */
inline double decode_format(uint32_t bits, Format f) {
  uint32_t mbits = (uint32_t)f.p - 1;
  uint32_t sign = (bits >> (mbits + f.ebits)) & 1u;
  uint32_t e = (bits >> mbits) & ((1u << f.ebits) - 1u);
  uint32_t m = bits & ((1u << mbits) - 1u);
  double v;
  if (e == (1u << f.ebits) - 1u) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp((double)m, f.emin() - (int)mbits);
  else v = std::ldexp((double)(m | (1u << mbits)), (int)e - f.bias() - (int)mbits);
  return sign ? -v : v;
}

/* Rounds a double to the format, nearest-even, and returns the bits; NaN
 * gives the quiet NaN with no payload.  Works on the integer significand:
 * scale x so that one unit is the format's quantum at x's binade, split
 * into integer and fraction, round, and re-assemble. */
inline uint32_t round_to_format(double x, Format f) {
  uint32_t mbits = (uint32_t)f.p - 1;
  uint32_t sign = std::signbit(x) ? 1u << (mbits + f.ebits) : 0u;
  uint32_t inf = ((1u << f.ebits) - 1u) << mbits;
  if (std::isnan(x)) return inf | (1u << (mbits - 1));
  x = std::fabs(x);
  if (x == 0) return sign;
  if (std::isinf(x) || x >= std::ldexp(2.0, f.emax())) return sign | inf;
  int e;
  (void)std::frexp(x, &e); /* x = fr * 2^e, fr in [0.5, 1): leading bit 2^(e-1) */
  int lead = e - 1 < f.emin() ? f.emin() : e - 1;
  int qexp = lead - (int)mbits; /* exponent of the last significand bit */
  double scaled = std::ldexp(x, -qexp); /* exact: a power-of-two scaling */
  double whole = std::floor(scaled), frac = scaled - whole;
  uint64_t r = (uint64_t)whole;
  if (frac > 0.5 || (frac == 0.5 && (r & 1u))) r++;
  if (r >> f.p) { /* carried into a new binade */
    r >>= 1;
    qexp++;
  }
  if (r >> mbits == 0) return sign | (uint32_t)r; /* subnormal (or zero) */
  int efield = qexp + (int)mbits + f.bias();
  if (efield >= (1 << f.ebits) - 1) return sign | inf;
  return sign | ((uint32_t)efield << mbits) | ((uint32_t)r & ((1u << mbits) - 1u));
}

inline double round_float(double x) { return decode_format(round_to_format(x, kFloat), kFloat); }

/* ---- float8 ---------------------------------------------------------------
 * e4m3: bias 7, 3 mantissa bits, exponent field 15 is a normal binade except
 * mantissa 7 (NaN); e5m2: bias 15, 2 mantissa bits, IEEE specials. */
struct Fp8 {
  int mbits, bias;
  bool ieee;     /* e5m2: all-ones exponent = inf / NaN */
  double max;    /* largest finite value */
};
constexpr Fp8 kE4m3{3, 7, false, 448.0}, kE5m2{2, 15, true, 57344.0};
inline Fp8 fp8_of(koloDataType_t t) { return t == koloFloat8e4m3 ? kE4m3 : kE5m2; }

inline bool fp8_is_nan(uint32_t x, Fp8 f) {
  return f.ieee ? (x & 0x7fu) > 0x7cu : (x & 0x7fu) == 0x7fu;
}

inline double fp8_decode(uint32_t x, Fp8 f) {
  uint32_t e = (x & 0x7fu) >> f.mbits, m = x & ((1u << f.mbits) - 1u);
  double v;
  if (fp8_is_nan(x, f)) v = NAN;
  else if (f.ieee && (x & 0x7fu) == 0x7cu) v = INFINITY;
  else if (e == 0) v = std::ldexp((double)m, 1 - f.bias - f.mbits);
  else v = std::ldexp((double)(m + (1u << f.mbits)), (int)e - f.bias - f.mbits);
  return (x & 0x80u) ? -v : v;
}

/* The rounded value: nearest-even on the grid of x's binade (the quantum
 * of the subnormals below the smallest normal), then saturated. */
inline double fp8_round_value(double x, Fp8 f) {
  if (std::isnan(x) || x == 0) return x;
  double a = std::fabs(x);
  int e = std::isinf(a) ? 1000 : std::ilogb(a);
  if (e < 1 - f.bias) e = 1 - f.bias;
  double r = std::isinf(a) ? a : std::ldexp(std::nearbyint(std::ldexp(a, f.mbits - e)), e - f.mbits);
  if (r > f.max) r = f.max;
  return std::copysign(r, x);
}

/* Bits of a value of the format (NaN: 0x7f): exponent and significand
 * read off the value, checked by decoding them again. */
inline uint32_t fp8_encode(double v, Fp8 f) {
  if (std::isnan(v)) return 0x7fu;
  uint32_t sign = std::signbit(v) ? 0x80u : 0u, x;
  double a = std::fabs(v);
  int emin = 1 - f.bias;
  if (std::isinf(a)) x = 0x7cu; /* e5m2 only */
  else if (a < std::ldexp(1.0, emin)) x = (uint32_t)std::ldexp(a, f.mbits - emin);
  else x = (uint32_t)(std::ilogb(a) + f.bias) << f.mbits | ((uint32_t)std::ldexp(a, f.mbits - std::ilogb(a)) & ((1u << f.mbits) - 1u));
  x |= sign;
  double back = fp8_decode(x, f);
  if (back != v || std::signbit(back) != std::signbit(v)) std::abort(); /* not a value of the format */
  return x;
}

inline uint32_t fp8_round(double x, Fp8 f) { return fp8_encode(fp8_round_value(x, f), f); }
inline uint16_t to_half(double x) { return (uint16_t)round_to_format(x, kHalf); }
inline uint16_t to_bf16(double x) { return (uint16_t)round_to_format(x, kBf16); }
inline double from_half(uint16_t h) { return decode_format(h, kHalf); }
inline double from_bf16(uint16_t h) { return decode_format(h, kBf16); }

/* ---- elements ------------------------------------------------------------ */

/* Raw bits of element i, zero-extended. */
inline uint64_t load_bits(const void *p, size_t i, koloDataType_t t) {
  uint64_t v = 0;
  std::memcpy(&v, (const char *)p + i * type_size(t), type_size(t)); /* little endian */
  return v;
}

inline void store_bits(void *p, size_t i, koloDataType_t t, uint64_t v) {
  std::memcpy((char *)p + i * type_size(t), &v, type_size(t));
}

/* Element i of a float type as a double (exact). */
inline double load_float(const void *p, size_t i, koloDataType_t t) {
  uint64_t b = load_bits(p, i, t);
  switch (t) {
  case koloFloat16: return from_half((uint16_t)b);
  case koloBfloat16: return from_bf16((uint16_t)b);
  case koloFloat32: return decode_format((uint32_t)b, kFloat);
  case koloFloat8e4m3: case koloFloat8e5m2: return fp8_decode((uint32_t)b, fp8_of(t));
  default: {
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  }
  }
}

/* NCCL's float8 max / min (__hmax / __hmin). */
inline double fp8_max(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
inline double fp8_min(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

inline double combine_float(double a, double b, koloRedOp_t op, koloDataType_t t) {
  switch (op) {
  case koloProd: return a * b;
  case koloMax: return is_fp8(t) ? fp8_max(a, b) : (a > b || std::isnan(a)) ? a : b;
  case koloMin: return is_fp8(t) ? fp8_min(a, b) : (a < b || std::isnan(a)) ? a : b;
  default: return a + b; /* sum, avg */
  }
}

/* A double rounded to the float type t, as a value (float64: itself). */
inline double round_to_type(double x, koloDataType_t t) {
  switch (t) {
  case koloFloat16: return from_half(to_half(x));
  case koloBfloat16: return from_bf16(to_bf16(x));
  case koloFloat32: return round_float(x);
  case koloFloat8e4m3: case koloFloat8e5m2: return fp8_round_value(x, fp8_of(t));
  default: return x;
  }
}

/* One float result, following the spec's steps.  b_present == false: copy. */
inline uint64_t reference_float(double a, double b, bool b_present, koloDataType_t t,
                                koloRedOp_t op, int div) {
  double r = b_present ? combine_float(a, b, op, t) : a;
  if (t == koloFloat64) {
    if (div > 1) r = r / (double)div;
    uint64_t bits;
    std::memcpy(&bits, &r, sizeof bits);
    return bits;
  }
  /* float32, and the float32 intermediate of float16 / bfloat16 */
  r = round_float(r);
  if (div > 1) r = round_float(r / (double)div);
  if (t == koloFloat16) return to_half(r);
  if (t == koloBfloat16) return to_bf16(r);
  if (is_fp8(t)) return fp8_round(r, fp8_of(t));
  return round_to_format(r, kFloat);
}

/* The premul-sum of one element: a + pre(b), or pre(a) with no b, where
 * pre(x) = x * s rounded to the type; floats through reference_float's
 * rounding of the sum. */
inline uint64_t reference_premul_float(double a, double b, bool b_present, double s, koloDataType_t t) {
  if (!b_present) return reference_float(round_to_type(a * s, t), 0, false, t, koloSum, 1);
  return reference_float(a, round_to_type(b * s, t), true, t, koloSum, 1);
}

inline uint64_t width_mask(koloDataType_t t) {
  return type_size(t) == 8 ? ~0ull : (1ull << (8 * type_size(t))) - 1;
}

/* Sign-extends the low bits of an integer type to int64. */
inline int64_t as_signed(uint64_t v, koloDataType_t t) {
  unsigned sh = 64 - 8 * (unsigned)type_size(t);
  return (int64_t)(v << sh) >> sh;
}

inline uint64_t reference_int(uint64_t a, uint64_t b, bool b_present, koloDataType_t t,
                              koloRedOp_t op, int div) {
  bool sgn = is_signed_int(t);
  uint64_t r = a;
  if (b_present) {
    switch (op) {
    case koloProd: r = a * b; break;
    case koloMax:
      r = sgn ? (as_signed(a, t) > as_signed(b, t) ? a : b) : (a > b ? a : b);
      break;
    case koloMin:
      r = sgn ? (as_signed(a, t) < as_signed(b, t) ? a : b) : (a < b ? a : b);
      break;
    default: r = a + b; break;
    }
  }
  r &= width_mask(t);
  if (div > 1) r = sgn ? (uint64_t)(as_signed(r, t) / (int64_t)div) : r / (uint64_t)div;
  return r & width_mask(t);
}

/* Integers: a + b*s, or a*s with no b, wrapping. */
inline uint64_t reference_premul_int(uint64_t a, uint64_t b, bool b_present, uint64_t s, koloDataType_t t) {
  if (!b_present) return (a * s) & width_mask(t);
  return (a + b * s) & width_mask(t);
}

/* out[i] = a[i] + pre(b[i]), or pre(a[i]) when b is NULL; scalar: the
 * bits of one element. */
inline void reference_premul(void *out, const void *a, const void *b, size_t n, koloDataType_t t,
                             uint64_t scalar) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r;
    if (is_float(t))
      r = reference_premul_float(load_float(a, i, t), b ? load_float(b, i, t) : 0.0, b != nullptr,
                                 load_float(&scalar, 0, t), t);
    else
      r = reference_premul_int(load_bits(a, i, t), b ? load_bits(b, i, t) : 0, b != nullptr, scalar, t);
    store_bits(out, i, t, r);
  }
}

/* out[i] = post(a[i] OP b[i]) for i < n (b may be NULL: copy; a copy
 * without a divisor is the bytes themselves, specials included). */
inline void reference(void *out, const void *a, const void *b, size_t n, koloDataType_t t,
                      koloRedOp_t op, int div) {
  if (b == nullptr && div <= 1) {
    if (n > 0) std::memcpy(out, a, n * type_size(t)); /* a, out may be NULL when n is 0 */
    return;
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t r;
    if (is_float(t))
      r = reference_float(load_float(a, i, t), b ? load_float(b, i, t) : 0.0, b != nullptr, t,
                          op, div);
    else
      r = reference_int(load_bits(a, i, t), b ? load_bits(b, i, t) : 0, b != nullptr, t, op,
                        div);
    store_bits(out, i, t, r);
  }
}

inline bool is_nan_bits(uint64_t v, koloDataType_t t) {
  switch (t) {
  case koloFloat16: return (v & 0x7fffu) > 0x7c00u;
  case koloBfloat16: return (v & 0x7fffu) > 0x7f80u;
  case koloFloat32: return (v & 0x7fffffffu) > 0x7f800000u;
  case koloFloat64: return (v & ~(1ull << 63)) > 0x7ff0000000000000ull;
  case koloFloat8e4m3: case koloFloat8e5m2: return fp8_is_nan((uint32_t)v, fp8_of(t));
  default: return false;
  }
}

/* "" when got == want (NaN matching any NaN), else a description of the
 * first mismatch with its inputs. */
inline std::string compare(const void *got, const void *want, const void *a, const void *b,
                           size_t n, koloDataType_t t) {
  for (size_t i = 0; i < n; i++) {
    uint64_t g = load_bits(got, i, t), w = load_bits(want, i, t);
    if (g == w || (is_nan_bits(g, t) && is_nan_bits(w, t))) continue;
    std::ostringstream s;
    s << std::hex << "element " << std::dec << i << " of " << n << std::hex << ": got 0x" << g
      << ", want 0x" << w << " (a = 0x" << load_bits(a, i, t);
    if (b) s << ", b = 0x" << load_bits(b, i, t);
    s << ")";
    if (is_float(t)) s << " = " << load_float(got, i, t) << " vs " << load_float(want, i, t);
    return s.str();
  }
  return "";
}

/* ---- inputs ---------------------------------------------------------------
 * Integers: random bits.  Floats: mostly values of moderate magnitude with
 * random significands (their sums and products round, often to ties), plus
 * zeros of both signs, infinities, NaNs, subnormals and the largest finite
 * values (overflow); 16-bit types also get random bit patterns. */
inline uint64_t random_float_bits(std::mt19937_64 &rng, koloDataType_t t) {
  uint64_t r = rng(), r2 = rng();
  if (is_fp8(t)) return r & 0xffu; /* every pattern, specials included */
  Format f = t == koloFloat16 ? kHalf : t == koloBfloat16 ? kBf16 : kFloat;
  int mbits = t == koloFloat64 ? 52 : f.p - 1, ebits = t == koloFloat64 ? 11 : f.ebits;
  int bias = (1 << (ebits - 1)) - 1;
  uint64_t sign = (r & 1) << (mbits + ebits), mant = r2 & ((1ull << mbits) - 1);
  uint64_t emask = (1ull << ebits) - 1;
  unsigned kind = (unsigned)((r >> 1) % 32);
  if (kind == 0) return sign;                                       /* +-0 */
  if (kind == 1) return sign | emask << mbits;                       /* +-inf */
  if (kind == 2) return sign | emask << mbits | 1ull << (mbits - 1) | (mant >> 2); /* NaN */
  if (kind == 3) return sign | (mant ? mant : 1);                    /* subnormal */
  if (kind == 4) return sign | (emask - 1) << mbits | ((1ull << mbits) - 1); /* max */
  if (kind == 5) return sign | 1ull << mbits | mant;                  /* smallest binade */
  if ((t == koloFloat16 || t == koloBfloat16) && kind < 12)
    return (r >> 16) & 0xffffu; /* any pattern */
  int span = t == koloFloat16 ? 6 : 12;
  uint64_t e = (uint64_t)(bias + (int)((r >> 32) % (2 * span + 1)) - span);
  return sign | e << mbits | mant;
}

inline void fill_random(void *p, size_t n, koloDataType_t t, std::mt19937_64 &rng) {
  for (size_t i = 0; i < n; i++)
    store_bits(p, i, t, is_float(t) ? random_float_bits(rng, t) : rng());
}

}  // namespace kolo_ref

#endif
