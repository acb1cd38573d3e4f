// coll_ref.h - reference model and checker for kolo's collectives, written
// from the API's contract (kolo.h, NCCL's semantics), independent of the
// library's code (own float16 / bfloat16 conversions, own arithmetic).
//
// Inputs.  Element i of rank r's input is a pure function of (seed, r, i, type,
// op) (a counter-based hash), so any rank or process can rebuild every other
// rank's input without communication, and the expected result of a call is
// computed from first principles:
//   - integers, op sum/max/min/avg: random bits over the type's whole range;
//     prod: small values ({-2..2} signed, {1,2,3} unsigned) so that products of
//     up to 8 factors are meaningful (they still wrap, e.g. 2^8 in int8);
//   - floats, op sum/max/min/avg: +-m * 2^-(p+k) with a full p-bit significand
//     m (p = precision of the type) and k in 0..7, i.e. values in [2^-8, 1)
//     in magnitude, exactly representable, no subnormals, no -0 (and 1/64 of
//     them +0); prod: values in [0.5, 1.5), exactly representable;
//   - float8 (4 or 3 significant bits): sum/avg/premul-sum: m * 2^E with m in
//     {-1, 0, 1} per rank and E per element, the same on every rank (e4m3:
//     -9..4, subnormals included; e5m2: -16..11), so that every partial sum
//     of up to 8 ranks (and every premul product, below) is exact whatever
//     the order: the result is compared bit for bit; prod: +-2^k, k in
//     {-1, 0, 1} (exact products); max/min: any finite pattern, -0 included;
//   - premul-sum (kPreMulSum: the test makes each rank's op with
//     koloRedOpCreatePreMulSum): inputs as for sum; rank r's scalar is
//     premul_scalar_bits(seed, r): integers any bits, float16 ... float64
//     +-[0.5, 2) with a full significand, e4m3 +-1 or +-2, e5m2 +-2.
//
// References.
//   - integers: exact wrapping uint64 arithmetic truncated to the type (sum and
//     prod wrap like NCCL); max/min compare as the signed or unsigned type; avg
//     is the wrapped sum read as the signed / unsigned type divided by nranks
//     with C's truncating division.  Compared bit for bit.
//   - floats max/min, and every copy (all-gather, broadcast, send/recv):
//     compared bit for bit (the result is one of the inputs; float8 max/min
//     are NCCL's: +0 above -0).
//   - float8 sum/prod/premul-sum: exact (see the inputs), bit for bit; avg
//     is NCCL's, a premul-sum by 1/nranks rounded to the type: the sum of the
//     rounded products with the sum's tolerance (u = 2^-4 e4m3, 2^-3 e5m2).
//   - premul-sum of integers: wrapping sum of x_r * s_r, bit for bit; of
//     float16 ... float64: the sum of the products x_r * s_r each rounded to
//     the type, with the sum's tolerance.
//   - floats sum/avg/prod: reference in double; tolerance per element
//       sum:  |got - ref| <= (nranks + 1) * u * sum_i |x_i| + u * |ref| + tiny
//       avg:  |got - ref| <= ((nranks + 1) * u * sum_i |x_i|) / nranks
//                             + 2 * u * |ref| + tiny
//       prod: |got - ref| <= (nranks + 2) * u * |ref| + tiny
//     with u the unit roundoff of the type (2^-11 float16, 2^-8 bfloat16,
//     2^-24 float32, 2^-53 float64) and tiny = nranks * the smallest subnormal.
//     Why: a ring (or chain) adds the nranks inputs in some order, rounding
//     each partial sum to the type (partial sums travel through slots in the
//     element type): n - 1 roundings of at most u * sum|x_i| each; the final
//     result is rounded once more to the type (u * |ref|), avg divides once
//     (one more rounding in float32 and one to the 16-bit type); the "+ 1"
//     term covers the reference's own double rounding (float64).  A product
//     of n factors has n - 1 roundings, each relative.  Subnormal partial
//     results (not produced by these inputs, but allowed) are covered by tiny.
#ifndef KOLO_TESTS_UTIL_COLL_REF_H
#define KOLO_TESTS_UTIL_COLL_REF_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo.h"

namespace kt {

// ---- types --------------------------------------------------------------

constexpr koloDataType_t kAllTypes[] = {koloInt8,    koloUint8,   koloInt32,      koloUint32,
                                        koloInt64,   koloUint64,  koloFloat16,    koloBfloat16,
                                        koloFloat32, koloFloat64, koloFloat8e4m3, koloFloat8e5m2};
// The test's stand-in for an op made by koloRedOpCreatePreMulSum: each rank
// makes its own for the call (util/coll_run.h), with its own scalar.
constexpr koloRedOp_t kPreMulSum = koloNumOps;
constexpr koloRedOp_t kAllOps[] = {koloSum, koloProd, koloMax, koloMin, koloAvg, kPreMulSum};

size_t type_size(koloDataType_t t);
const char *type_name(koloDataType_t t);
const char *op_name(koloRedOp_t op);
bool is_float(koloDataType_t t);  // float8 included
bool is_fp8(koloDataType_t t);
bool is_signed(koloDataType_t t);
// Significand bits including the hidden one (11, 8, 24, 53); 0 for integers.
int precision(koloDataType_t t);
// Unit roundoff 2^-precision.
double unit_roundoff(koloDataType_t t);
// Smallest positive subnormal.
double min_subnormal(koloDataType_t t);

// ---- 16-bit floats (own conversions, round to nearest even) -------------

uint16_t f64_to_f16(double x);
double f16_to_f64(uint16_t h);
uint16_t f64_to_bf16(double x);
double bf16_to_f64(uint16_t h);
// float8 (t: koloFloat8e4m3 or koloFloat8e5m2): nearest even, saturating at
// the largest finite value (infinity too), NaN to 0x7f.
uint8_t f64_to_fp8(double x, koloDataType_t t);
double fp8_to_f64(uint8_t b, koloDataType_t t);

// Element i of a buffer: raw bits (zero-extended) or, for float types, value.
uint64_t load_bits(const void *p, size_t i, koloDataType_t t);
void store_bits(void *p, size_t i, koloDataType_t t, uint64_t bits);
double load_value(const void *p, size_t i, koloDataType_t t);
// Bits of a float value of type t (rounded to nearest even when inexact).
uint64_t float_bits(double v, koloDataType_t t);
// Human-readable element (value for floats, signed/unsigned for ints).
std::string element_string(uint64_t bits, koloDataType_t t);

// ---- inputs ---------------------------------------------------------------

// Bits of input element `i` of rank `rank` (see the header comment).
uint64_t input_bits(uint64_t seed, int rank, size_t i, koloDataType_t t, koloRedOp_t op);
// Bits of rank's premul-sum scalar in a case (see the header comment).
uint64_t premul_scalar_bits(uint64_t seed, int rank, koloDataType_t t);
// dst[k] = input_bits(seed, rank, first + k) for k < n.
void fill_input(void *dst, size_t n, uint64_t seed, int rank, size_t first, koloDataType_t t,
                koloRedOp_t op);

// ---- expected results -----------------------------------------------------

// Expected values of an array of n elements: exact (the elements' own
// bytes, compared with memcmp first), or a double reference with a
// per-element tolerance.
struct Expected {
  koloDataType_t type = koloFloat32;
  bool exact = true;
  size_t n = 0;
  std::vector<unsigned char> raw;  // exact: n elements as the type stores them
  std::vector<double> ref;         // !exact
  std::vector<float> tol;          // !exact
  uint64_t bits(size_t i) const { return load_bits(raw.data(), i, type); }
};

// Sizes e for n elements of type t (exact: bits, else ref + tol).
void expect_init(Expected *e, koloDataType_t t, bool exact, size_t n);
// Whether a reduction's result is compared bit for bit (integers, max, min,
// float8 but avg).
bool reduction_is_exact(koloDataType_t t, koloRedOp_t op);
// The fill functions set elements [begin, end) of an initialised e, so that
// threads can share the work:
// e[i] = reduction over ranks 0..nranks-1 of their input element i.
void fill_reduction(Expected *e, uint64_t seed, int nranks, size_t begin, size_t end,
                    koloRedOp_t op);
// e[j * count + i] = rank j's input element i (concatenation of inputs).
void fill_concat(Expected *e, uint64_t seed, size_t count, size_t begin, size_t end,
                 koloRedOp_t op);
// e[i] = rank's input element i.
void fill_copy(Expected *e, uint64_t seed, int rank, size_t begin, size_t end, koloRedOp_t op);

// e[(r * nranks + j) * count + i] = rank j's input element r * count + i:
// what rank r's all-to-all receives from rank j, for every r.
void fill_transpose(Expected *e, uint64_t seed, int nranks, size_t count, size_t begin, size_t end,
                    koloRedOp_t op);

// Compares got[k] with e[first + k], k < n.  "" when all match, else a
// description of the mismatches (count, and the first few).
std::string compare(const void *got, const Expected &e, size_t first, size_t n);

// ---- seeds ------------------------------------------------------------------

uint64_t mix64(uint64_t x);
// Base seed of the run: KOLO_TEST_SEED if set, else a constant.
uint64_t base_seed();

}  // namespace kt

#endif
