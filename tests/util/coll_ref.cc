// coll_ref.cc - see coll_ref.h.
#include "util/coll_ref.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace kt {

// ---- types --------------------------------------------------------------

size_t type_size(koloDataType_t t) {
  switch (t) {
  case koloInt8: case koloUint8: case koloFloat8e4m3: case koloFloat8e5m2: return 1;
  case koloFloat16: case koloBfloat16: return 2;
  case koloInt32: case koloUint32: case koloFloat32: return 4;
  case koloInt64: case koloUint64: case koloFloat64: return 8;
  default: return 0;
  }
}

const char *type_name(koloDataType_t t) {
  switch (t) {
  case koloInt8: return "int8";
  case koloUint8: return "uint8";
  case koloInt32: return "int32";
  case koloUint32: return "uint32";
  case koloInt64: return "int64";
  case koloUint64: return "uint64";
  case koloFloat16: return "float16";
  case koloBfloat16: return "bfloat16";
  case koloFloat32: return "float32";
  case koloFloat64: return "float64";
  case koloFloat8e4m3: return "float8e4m3";
  case koloFloat8e5m2: return "float8e5m2";
  default: return "invalid";
  }
}

const char *op_name(koloRedOp_t op) {
  switch (op) {
  case koloSum: return "sum";
  case koloProd: return "prod";
  case koloMax: return "max";
  case koloMin: return "min";
  case koloAvg: return "avg";
  case kPreMulSum: return "premulsum";
  default: return "invalid";
  }
}

bool is_fp8(koloDataType_t t) { return t == koloFloat8e4m3 || t == koloFloat8e5m2; }

bool is_float(koloDataType_t t) {
  return t == koloFloat16 || t == koloBfloat16 || t == koloFloat32 || t == koloFloat64 || is_fp8(t);
}

bool is_signed(koloDataType_t t) { return t == koloInt8 || t == koloInt32 || t == koloInt64; }

int precision(koloDataType_t t) {
  switch (t) {
  case koloFloat16: return 11;
  case koloBfloat16: return 8;
  case koloFloat32: return 24;
  case koloFloat64: return 53;
  case koloFloat8e4m3: return 4;
  case koloFloat8e5m2: return 3;
  default: return 0;
  }
}

double unit_roundoff(koloDataType_t t) { return std::ldexp(1.0, -precision(t)); }

double min_subnormal(koloDataType_t t) {
  switch (t) {
  case koloFloat16: return std::ldexp(1.0, -24);
  case koloBfloat16: return std::ldexp(1.0, -133);
  case koloFloat32: return std::ldexp(1.0, -149);
  case koloFloat64: return std::ldexp(1.0, -1074);
  case koloFloat8e4m3: return std::ldexp(1.0, -9);
  case koloFloat8e5m2: return std::ldexp(1.0, -16);
  default: return 0;
  }
}

// ---- 16-bit floats ------------------------------------------------------
// A binary format with `mant` stored significand bits and `ebits` exponent
// bits.  Encoding scales |x| so that one unit is the quantum of x's binade
// (or of the subnormal range) and rounds with nearbyint (nearest even in the
// default rounding mode); a carry into the next binade is a plain increment
// of the packed exponent|significand.

namespace {

struct Fmt {
  int mant, ebits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
};
constexpr Fmt kF16{10, 5}, kBf16{7, 8};

uint32_t encode(double x, Fmt f) {
  uint32_t sign = std::signbit(x) ? 1u << (f.mant + f.ebits) : 0u;
  uint32_t inf = ((1u << f.ebits) - 1u) << f.mant;
  if (std::isnan(x)) return sign | inf | (1u << (f.mant - 1));
  double a = std::fabs(x);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e = std::ilogb(a);  // a in [2^e, 2^(e+1))
  int emin = 1 - f.bias();
  if (e < emin) e = emin;  // subnormal range: quantum 2^(emin - mant)
  double q = std::nearbyint(std::ldexp(a, f.mant - e));  // significand with hidden bit
  // packed = (biased exponent << mant) + fraction; a subnormal has no hidden
  // bit and exponent field 0, a carry to 2^(mant+1) moves up one binade:
  // both come out of the same addition.
  uint64_t packed = (uint64_t)(e - emin) * (1ull << f.mant) + (uint64_t)q;
  if (packed >= inf) return sign | inf;
  return sign | (uint32_t)packed;
}

double decode(uint32_t bits, Fmt f) {
  uint32_t sign = (bits >> (f.mant + f.ebits)) & 1u;
  uint32_t e = (bits >> f.mant) & ((1u << f.ebits) - 1u);
  uint32_t m = bits & ((1u << f.mant) - 1u);
  double v;
  if (e == (1u << f.ebits) - 1u) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp((double)m, 1 - f.bias() - f.mant);
  else v = std::ldexp((double)(m + (1u << f.mant)), (int)e - f.bias() - f.mant);
  return sign ? -v : v;
}

// float8: `mant` stored significand bits, exponent bias, whether the top
// exponent is IEEE's inf / NaN (e5m2) or a binade of its own whose last
// pattern is NaN (e4m3), and the pattern of the largest finite value.
struct F8 {
  int mant, bias;
  bool ieee;
  uint32_t max_bits;
};
constexpr F8 kE4m3{3, 7, false, 0x7e}, kE5m2{2, 15, true, 0x7b};

double decode8(uint32_t b, F8 f) {
  uint32_t e = (b & 0x7fu) >> f.mant, m = b & ((1u << f.mant) - 1u);
  bool nan = f.ieee ? (b & 0x7fu) > 0x7cu : (b & 0x7fu) == 0x7fu;
  double v;
  if (nan) v = NAN;
  else if (f.ieee && (b & 0x7fu) == 0x7cu) v = INFINITY;
  else if (e == 0) v = std::ldexp((double)m, 1 - f.bias - f.mant);
  else v = std::ldexp((double)(m + (1u << f.mant)), (int)e - f.bias - f.mant);
  return (b & 0x80u) ? -v : v;
}

// As encode() above; a pattern past the largest finite one saturates.
uint32_t encode8(double x, F8 f) {
  if (std::isnan(x)) return 0x7fu;
  uint32_t sign = std::signbit(x) ? 0x80u : 0u;
  double a = std::fabs(x);
  if (std::isinf(a)) return sign | f.max_bits;
  if (a == 0) return sign;
  int e = std::ilogb(a), emin = 1 - f.bias;
  if (e < emin) e = emin;
  double q = std::nearbyint(std::ldexp(a, f.mant - e));
  uint64_t packed = (uint64_t)(e - emin) * (1ull << f.mant) + (uint64_t)q;
  return sign | (uint32_t)(packed > f.max_bits ? f.max_bits : packed);
}

}  // namespace

uint8_t f64_to_fp8(double x, koloDataType_t t) { return (uint8_t)encode8(x, t == koloFloat8e4m3 ? kE4m3 : kE5m2); }
double fp8_to_f64(uint8_t b, koloDataType_t t) { return decode8(b, t == koloFloat8e4m3 ? kE4m3 : kE5m2); }

uint16_t f64_to_f16(double x) { return (uint16_t)encode(x, kF16); }
double f16_to_f64(uint16_t h) { return decode(h, kF16); }
uint16_t f64_to_bf16(double x) { return (uint16_t)encode(x, kBf16); }
// bfloat16 is the top half of a float32: widening is a shift.
double bf16_to_f64(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Fixed-size copies (little endian), so that the compiler inlines them.
template <size_t N>
static inline uint64_t load_n(const void *p, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char *>(p) + i * N, N);
  return v;
}
template <size_t N>
static inline void store_n(void *p, size_t i, uint64_t v) {
  std::memcpy(static_cast<char *>(p) + i * N, &v, N);
}

uint64_t load_bits(const void *p, size_t i, koloDataType_t t) {
  switch (type_size(t)) {
  case 1: return load_n<1>(p, i);
  case 2: return load_n<2>(p, i);
  case 4: return load_n<4>(p, i);
  default: return load_n<8>(p, i);
  }
}

void store_bits(void *p, size_t i, koloDataType_t t, uint64_t bits) {
  switch (type_size(t)) {
  case 1: store_n<1>(p, i, bits); break;
  case 2: store_n<2>(p, i, bits); break;
  case 4: store_n<4>(p, i, bits); break;
  default: store_n<8>(p, i, bits); break;
  }
}

// float16 values by table (built with f16_to_f64 once).
static const double *f16_table() {
  static const std::vector<double> table = [] {
    std::vector<double> v(65536);
    for (uint32_t h = 0; h < 65536; h++) v[h] = f16_to_f64((uint16_t)h);
    return v;
  }();
  return table.data();
}

// float8 values by table, per format.
static const double *fp8_table(koloDataType_t t) {
  static const std::vector<double> e4m3 = [] {
    std::vector<double> v(256);
    for (uint32_t b = 0; b < 256; b++) v[b] = fp8_to_f64((uint8_t)b, koloFloat8e4m3);
    return v;
  }();
  static const std::vector<double> e5m2 = [] {
    std::vector<double> v(256);
    for (uint32_t b = 0; b < 256; b++) v[b] = fp8_to_f64((uint8_t)b, koloFloat8e5m2);
    return v;
  }();
  return t == koloFloat8e4m3 ? e4m3.data() : e5m2.data();
}

static double value_of_bits(uint64_t b, koloDataType_t t) {
  switch (t) {
  case koloFloat8e4m3: case koloFloat8e5m2: return fp8_table(t)[b & 0xff];
  case koloFloat16: return f16_table()[b & 0xffff];
  case koloBfloat16: return bf16_to_f64((uint16_t)b);
  case koloFloat32: {
    float f;
    uint32_t u = (uint32_t)b;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  case koloFloat64: {
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  }
  default: return 0;
  }
}

double load_value(const void *p, size_t i, koloDataType_t t) {
  return value_of_bits(load_bits(p, i, t), t);
}

uint64_t float_bits(double v, koloDataType_t t) {
  switch (t) {
  case koloFloat16: return f64_to_f16(v);
  case koloBfloat16: return f64_to_bf16(v);
  case koloFloat32: {
    float f = (float)v;
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
  }
  case koloFloat8e4m3: case koloFloat8e5m2: return f64_to_fp8(v, t);
  default: {
    uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  }
  }
}

static int64_t sign_extend(uint64_t v, koloDataType_t t) {
  unsigned sh = 64 - 8 * (unsigned)type_size(t);
  return (int64_t)(v << sh) >> sh;
}

std::string element_string(uint64_t bits, koloDataType_t t) {
  std::ostringstream s;
  if (is_float(t)) {
    s.precision(17);
    s << value_of_bits(bits, t) << " (0x" << std::hex << bits << ")";
  } else if (is_signed(t)) {
    s << sign_extend(bits, t);
  } else {
    s << bits;
  }
  return s.str();
}

// ---- inputs ---------------------------------------------------------------
// The hot loops (fill, expected, compare) are instantiated per dtype through
// `dispatch`, so that sizes and formats are compile-time constants.

namespace {

template <koloDataType_t T>
using TypeTag = std::integral_constant<koloDataType_t, T>;

template <typename F>
void dispatch(koloDataType_t t, F &&f) {
  switch (t) {
  case koloInt8: f(TypeTag<koloInt8>{}); break;
  case koloUint8: f(TypeTag<koloUint8>{}); break;
  case koloInt32: f(TypeTag<koloInt32>{}); break;
  case koloUint32: f(TypeTag<koloUint32>{}); break;
  case koloInt64: f(TypeTag<koloInt64>{}); break;
  case koloUint64: f(TypeTag<koloUint64>{}); break;
  case koloFloat16: f(TypeTag<koloFloat16>{}); break;
  case koloBfloat16: f(TypeTag<koloBfloat16>{}); break;
  case koloFloat32: f(TypeTag<koloFloat32>{}); break;
  case koloFloat64: f(TypeTag<koloFloat64>{}); break;
  case koloFloat8e4m3: f(TypeTag<koloFloat8e4m3>{}); break;
  case koloFloat8e5m2: f(TypeTag<koloFloat8e5m2>{}); break;
  default: std::abort();
  }
}

constexpr bool c_fp8(koloDataType_t t) { return t == koloFloat8e4m3 || t == koloFloat8e5m2; }
constexpr size_t c_size(koloDataType_t t) {
  return t == koloInt8 || t == koloUint8 || c_fp8(t) ? 1
         : t == koloFloat16 || t == koloBfloat16 ? 2
         : t == koloInt32 || t == koloUint32 || t == koloFloat32 ? 4
                                                                 : 8;
}
constexpr bool c_float(koloDataType_t t) {
  return t == koloFloat16 || t == koloBfloat16 || t == koloFloat32 || t == koloFloat64 || c_fp8(t);
}
constexpr bool c_signed(koloDataType_t t) { return t == koloInt8 || t == koloInt32 || t == koloInt64; }
constexpr int c_prec(koloDataType_t t) {
  return t == koloFloat16      ? 11
         : t == koloBfloat16   ? 8
         : t == koloFloat32    ? 24
         : t == koloFloat8e4m3 ? 4
         : t == koloFloat8e5m2 ? 3
                               : 53;
}
constexpr int c_ebits(koloDataType_t t) {
  return t == koloFloat16 || t == koloFloat8e5m2 ? 5 : t == koloFloat64 ? 11 : t == koloFloat8e4m3 ? 4 : 8;
}
constexpr uint64_t c_mask(koloDataType_t t) {
  return c_size(t) == 8 ? ~0ull : (1ull << (8 * c_size(t))) - 1;
}

template <koloDataType_t T>
inline uint64_t load_t(const void *p, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char *>(p) + i * c_size(T), c_size(T));
  return v;
}
template <koloDataType_t T>
inline void store_t(void *p, size_t i, uint64_t v) {
  std::memcpy(static_cast<char *>(p) + i * c_size(T), &v, c_size(T));
}

template <koloDataType_t T>
inline int64_t sext_t(uint64_t v) {
  constexpr unsigned sh = 64 - 8 * (unsigned)c_size(T);
  return (int64_t)(v << sh) >> sh;
}

template <koloDataType_t T>
inline double value_t(uint64_t b) {
  if constexpr (c_fp8(T)) {
    return fp8_table(T)[b & 0xff];
  } else if constexpr (T == koloFloat16) {
    return f16_table()[b & 0xffff];
  } else if constexpr (T == koloBfloat16) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  } else if constexpr (T == koloFloat32) {
    uint32_t u = (uint32_t)b;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  } else {
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  }
}

// Bits of a float built from its fields: sign, biased exponent and the
// p - 1 stored significand bits (exact, no floating-point arithmetic).
template <koloDataType_t T>
inline uint64_t pack_t(uint64_t sign, int biased_exp, uint64_t frac) {
  return sign << (c_prec(T) - 1 + c_ebits(T)) | (uint64_t)biased_exp << (c_prec(T) - 1) | frac;
}

// float8 inputs (see the header): sums, products and premul products exact.
template <koloDataType_t T>
inline uint64_t input_fp8_t(uint64_t seed, uint64_t h, size_t i, koloRedOp_t op) {
  if (op == koloMax || op == koloMin) {  // any finite pattern
    uint64_t b = h & 0xff;
    if (T == koloFloat8e4m3 && (b & 0x7f) == 0x7f) b ^= 1;      // NaN -> +-448
    if (T == koloFloat8e5m2 && (b & 0x7f) >= 0x7c) b &= ~4ull;  // inf, NaN -> finite
    return b;
  }
  if (op == koloProd) return f64_to_fp8(std::ldexp((h & 1) ? -1.0 : 1.0, (int)((h >> 1) % 3) - 1), T);
  // m * 2^E: m in {-1, 0, 1} from this rank's hash, E from the element's alone
  uint64_t he = mix64(seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)));
  const int lo = T == koloFloat8e4m3 ? -9 : -16, hi = T == koloFloat8e4m3 ? 4 : 11;
  int e = lo + (int)(he % (uint64_t)(hi - lo + 1));
  return f64_to_fp8(std::ldexp((double)((int)(h % 3) - 1), e), T);
}

template <koloDataType_t T>
inline uint64_t input_t(uint64_t seed, int rank, size_t i, koloRedOp_t op) {
  uint64_t h = mix64(seed + 0x632be59bd9b4e019ull * (uint64_t)(uint32_t)rank +
                     0xd1b54a32d192ed03ull * (uint64_t)i);
  if constexpr (c_fp8(T)) {
    return input_fp8_t<T>(seed, h, i, op);
  } else if constexpr (!c_float(T)) {
    if (op != koloProd) return h & c_mask(T);
    if constexpr (c_signed(T)) return (uint64_t)((int64_t)(h % 5) - 2) & c_mask(T);
    else return 1 + h % 3;
  } else {
    constexpr int p = c_prec(T), bias = (1 << (c_ebits(T) - 1)) - 1;
    uint64_t frac = (h >> 10) & ((1ull << (p - 1)) - 1);  // p - 1 <= 52 random bits
    if (op == koloProd) {
      if (h & 1) return pack_t<T>(0, bias - 1, frac);  // [0.5, 1)
      return pack_t<T>(0, bias, frac >> 1);             // [1, 1.5)
    }
    if ((h & 63) == 0) return 0;  // +0
    int k = (int)((h >> 6) & 7);
    return pack_t<T>((h >> 9) & 1, bias - 1 - k, frac);  // +-[2^-(k+1), 2^-k)
  }
}

}  // namespace

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t base_seed() {
  const char *s = std::getenv("KOLO_TEST_SEED");
  return s && *s ? std::strtoull(s, nullptr, 0) : 0x6b6f6c6f2d653265ull;
}

namespace {

template <koloDataType_t T>
uint64_t premul_scalar_t(uint64_t seed, int rank) {
  uint64_t h = mix64(seed ^ 0x7072656d756c7375ull ^ (0xd6e8feb86659fd93ull * (uint64_t)(rank + 1)));
  if constexpr (!c_float(T)) {
    return h & c_mask(T);
  } else if constexpr (c_fp8(T)) {
    double v = T == koloFloat8e5m2 || (h & 2) ? 2.0 : 1.0;  // e4m3 +-1 or +-2, e5m2 +-2
    return f64_to_fp8((h & 1) ? -v : v, T);
  } else {
    constexpr int p = c_prec(T), bias = (1 << (c_ebits(T) - 1)) - 1;
    uint64_t frac = (h >> 10) & ((1ull << (p - 1)) - 1);
    return pack_t<T>(h & 1, bias - 1 + (int)((h >> 1) & 1), frac);  // +-[0.5, 2)
  }
}

}  // namespace

uint64_t premul_scalar_bits(uint64_t seed, int rank, koloDataType_t t) {
  uint64_t r = 0;
  dispatch(t, [&](auto tag) { r = premul_scalar_t<decltype(tag)::value>(seed, rank); });
  return r;
}

uint64_t input_bits(uint64_t seed, int rank, size_t i, koloDataType_t t, koloRedOp_t op) {
  uint64_t r = 0;
  dispatch(t, [&](auto tag) { r = input_t<decltype(tag)::value>(seed, rank, i, op); });
  return r;
}

void fill_input(void *dst, size_t n, uint64_t seed, int rank, size_t first, koloDataType_t t,
                koloRedOp_t op) {
  dispatch(t, [&](auto tag) {
    constexpr koloDataType_t T = decltype(tag)::value;
    for (size_t k = 0; k < n; k++) store_t<T>(dst, k, input_t<T>(seed, rank, first + k, op));
  });
}

// ---- expected results -----------------------------------------------------

void expect_init(Expected *e, koloDataType_t t, bool exact, size_t n) {
  e->type = t;
  e->exact = exact;
  e->n = n;
  e->raw.clear();
  e->ref.clear();
  e->tol.clear();
  if (exact) {
    e->raw.resize(n * type_size(t));
  } else {
    e->ref.resize(n);
    e->tol.resize(n);
  }
}

bool reduction_is_exact(koloDataType_t t, koloRedOp_t op) {
  return !is_float(t) || op == koloMax || op == koloMin || (is_fp8(t) && op != koloAvg);
}

namespace {

// Rank r's addend of a premul-sum: its input times its scalar, wrapping.
template <koloDataType_t T>
uint64_t int_addend_t(uint64_t seed, int r, size_t i, koloRedOp_t op) {
  uint64_t x = input_t<T>(seed, r, i, op);
  return op == kPreMulSum ? (x * premul_scalar_t<T>(seed, r)) & c_mask(T) : x;
}

template <koloDataType_t T>
uint64_t reduce_int_t(uint64_t seed, int nranks, size_t i, koloRedOp_t op) {
  uint64_t acc = int_addend_t<T>(seed, 0, i, op);
  for (int r = 1; r < nranks; r++) {
    uint64_t x = int_addend_t<T>(seed, r, i, op);
    switch (op) {
    case koloProd: acc *= x; break;
    case koloMax:
      if (c_signed(T) ? sext_t<T>(x) > sext_t<T>(acc) : x > acc) acc = x;
      break;
    case koloMin:
      if (c_signed(T) ? sext_t<T>(x) < sext_t<T>(acc) : x < acc) acc = x;
      break;
    default: acc += x; break;  // sum, avg
    }
    acc &= c_mask(T);
  }
  if (op == koloAvg) {
    if (c_signed(T)) acc = (uint64_t)(sext_t<T>(acc) / (int64_t)nranks);
    else acc = acc / (uint64_t)nranks;
  }
  return acc & c_mask(T);
}

// Float max / min: the winning input, bit for bit (float8: +0 is above -0,
// as NCCL's __hmax / __hmin; the other floats' inputs have no -0).
template <koloDataType_t T>
uint64_t select_float_t(uint64_t seed, int nranks, size_t i, koloRedOp_t op) {
  uint64_t best = input_t<T>(seed, 0, i, op);
  double bv = value_t<T>(best);
  for (int r = 1; r < nranks; r++) {
    uint64_t b = input_t<T>(seed, r, i, op);
    double v = value_t<T>(b);
    bool zeros = c_fp8(T) && v == bv && std::signbit(v) != std::signbit(bv);
    if (zeros ? std::signbit(op == koloMax ? bv : v) : op == koloMax ? v > bv : v < bv) {
      best = b;
      bv = v;
    }
  }
  return best;
}

// A double rounded to T (float64: itself), by the test's own conversions.
template <koloDataType_t T>
inline double round_t(double x) {
  if constexpr (T == koloFloat16) return f16_to_f64(f64_to_f16(x));
  else if constexpr (T == koloBfloat16) return bf16_to_f64(f64_to_bf16(x));
  else if constexpr (T == koloFloat32) return (double)(float)x;
  else if constexpr (c_fp8(T)) return fp8_table(T)[f64_to_fp8(x, T)];
  else return x;
}

// Rank r's addend: its input, or for a premul-sum its input times its
// scalar rounded to T (NCCL's float8 avg: times 1/nranks rounded to T).
template <koloDataType_t T>
inline double float_addend_t(uint64_t seed, int nranks, int r, size_t i, koloRedOp_t op) {
  double x = value_t<T>(input_t<T>(seed, r, i, op));
  if (op == kPreMulSum) return round_t<T>(x * value_t<T>(premul_scalar_t<T>(seed, r)));
  if (c_fp8(T) && op == koloAvg) return round_t<T>(x * round_t<T>(1.0 / nranks));
  return x;
}

// Sum or product of the ranks' element i (their addends), and the sum of
// magnitudes.  Acc is double for the 16- and 32-bit types (their sums here
// are exact in double: at most 8 addends of <= 24 bits spanning 8 binades;
// a premul product spans 2 more) and long double for float64 (exact on x86's
// 64-bit significand).
// The first addend starts the sum, not +0: a sum of -0s is -0 (float8's
// premul-sum products are exact, so their zeros' signs are compared).
template <koloDataType_t T, typename Acc>
inline void combine_t(uint64_t seed, int nranks, size_t i, koloRedOp_t op, Acc *acc, Acc *mag) {
  *acc = float_addend_t<T>(seed, nranks, 0, i, op);
  *mag = std::fabs((double)*acc);
  for (int r = 1; r < nranks; r++) {
    double x = float_addend_t<T>(seed, nranks, r, i, op);
    if (op == koloProd) *acc *= x;
    else *acc += x;
    *mag += std::fabs(x);
  }
}

template <koloDataType_t T>
void fill_float_t(Expected *e, uint64_t seed, int nranks, size_t begin, size_t end, koloRedOp_t op) {
  using Acc = std::conditional_t<T == koloFloat64, long double, double>;
  const double u = unit_roundoff(T), tiny = nranks * min_subnormal(T);
  for (size_t i = begin; i < end; i++) {
    Acc acc, mag;
    combine_t<T>(seed, nranks, i, op, &acc, &mag);
    double ref = (double)acc, tol;
    if (op == koloProd) {
      tol = (nranks + 2) * u * std::fabs(ref) + tiny;
    } else if (op == koloAvg && !c_fp8(T)) {
      ref = (double)(acc / nranks);
      tol = ((nranks + 1) * u * (double)mag) / nranks + 2 * u * std::fabs(ref) + tiny;
    } else {
      tol = (nranks + 1) * u * (double)mag + u * std::fabs(ref) + tiny;
    }
    e->ref[i] = ref;
    e->tol[i] = (float)(tol * (1 + 1e-6));  // float storage: round the bound up
  }
}

}  // namespace

void fill_reduction(Expected *e, uint64_t seed, int nranks, size_t begin, size_t end,
                    koloRedOp_t op) {
  dispatch(e->type, [&](auto tag) {
    constexpr koloDataType_t T = decltype(tag)::value;
    unsigned char *raw = e->raw.data();
    if constexpr (!c_float(T)) {
      for (size_t i = begin; i < end; i++) store_t<T>(raw, i, reduce_int_t<T>(seed, nranks, i, op));
    } else if constexpr (c_fp8(T)) {
      if (e->exact && (op == koloMax || op == koloMin)) {
        for (size_t i = begin; i < end; i++) store_t<T>(raw, i, select_float_t<T>(seed, nranks, i, op));
      } else if (e->exact) {  // sums and products exact in double: one rounding
        for (size_t i = begin; i < end; i++) {
          double acc, mag;
          combine_t<T>(seed, nranks, i, op, &acc, &mag);
          store_t<T>(raw, i, f64_to_fp8(acc, T));
        }
      } else {
        fill_float_t<T>(e, seed, nranks, begin, end, op);
      }
    } else {
      if (e->exact) {
        for (size_t i = begin; i < end; i++) store_t<T>(raw, i, select_float_t<T>(seed, nranks, i, op));
      } else {
        fill_float_t<T>(e, seed, nranks, begin, end, op);
      }
    }
  });
}

void fill_concat(Expected *e, uint64_t seed, size_t count, size_t begin, size_t end,
                 koloRedOp_t op) {
  dispatch(e->type, [&](auto tag) {
    constexpr koloDataType_t T = decltype(tag)::value;
    for (size_t j = begin; j < end; j++)
      store_t<T>(e->raw.data(), j, input_t<T>(seed, (int)(j / count), j % count, op));
  });
}

void fill_copy(Expected *e, uint64_t seed, int rank, size_t begin, size_t end, koloRedOp_t op) {
  dispatch(e->type, [&](auto tag) {
    constexpr koloDataType_t T = decltype(tag)::value;
    for (size_t i = begin; i < end; i++) store_t<T>(e->raw.data(), i, input_t<T>(seed, rank, i, op));
  });
}

std::string compare(const void *got, const Expected &e, size_t first, size_t n) {
  const koloDataType_t t = e.type;
  const size_t esz = type_size(t);
  if (n == 0) return "";  // nothing to compare (and memcmp must not see a null pointer)
  if (e.exact && std::memcmp(got, e.raw.data() + first * esz, n * esz) == 0) return "";
  size_t bad = 0;
  std::ostringstream s;
  s.precision(17);
  dispatch(t, [&](auto tag) {
    constexpr koloDataType_t T = decltype(tag)::value;
    for (size_t k = 0; k < n; k++) {
      uint64_t g = load_t<T>(got, k);
      size_t j = first + k;
      bool ok;
      if (e.exact) {
        ok = g == load_t<T>(e.raw.data(), j);
      } else {
        double v = value_t<T>(g);
        ok = std::fabs(v - e.ref[j]) <= (double)e.tol[j];  // false for NaN
      }
      if (ok) continue;
      if (bad < 4) {
        s << (bad ? "; " : "") << "element " << k << ": got " << element_string(g, t) << ", want ";
        if (e.exact) s << element_string(e.bits(j), t);
        else s << e.ref[j] << " +- " << e.tol[j];
      }
      bad++;
    }
  });
  if (bad == 0) return "";
  std::ostringstream out;
  out << bad << " of " << n << " elements wrong: " << s.str();
  return out.str();
}

void fill_transpose(Expected *e, uint64_t seed, int nranks, size_t count, size_t begin, size_t end,
                    koloRedOp_t op) {
  dispatch(e->type, [&](auto tag) {
    constexpr koloDataType_t T = decltype(tag)::value;
    for (size_t k = begin; k < end; k++) {
      size_t r = k / count / (size_t)nranks, j = k / count % (size_t)nranks, i = k % count;
      store_t<T>(e->raw.data(), k, input_t<T>(seed, (int)j, r * count + i, op));
    }
  });
}

}  // namespace kt
