/* perf_check.c - check data: generator, conversions, expected values. */
#include "perf/perf_check.h"

#include <math.h>
#include <string.h>

typedef union {
  float f;
  uint32_t u;
} f32_bits;

static uint16_t perf_float_to_bf16(float f) {
  uint32_t u = (f32_bits){.f = f}.u;
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float perf_bf16_to_float(uint16_t h) { return (f32_bits){.u = (uint32_t)h << 16}.f; }

/* float16 and float8 (e4m3: bias 7, 3 mantissa bits, no inf, largest 448,
 * 0x7f NaN; e5m2: bias 15, 2 mantissa bits, IEEE-like, largest 57344): the
 * largest finite code, and the code of larger values (float16: inf; float8
 * saturates, as kolo and the CUDA toolkit's __NV_SATFINITE). */
typedef struct {
  int mb, bias;
  unsigned sign, max, over;
} minifloat;

static minifloat minifloat_of(perf_type t) {
  if (t == PERF_FLOAT16) return (minifloat){10, 15, 0x8000u, 0x7bffu, 0x7c00u};
  if (t == PERF_FLOAT8E4M3) return (minifloat){3, 7, 0x80u, 0x7eu, 0x7eu};
  return (minifloat){2, 15, 0x80u, 0x7bu, 0x7bu};
}

/* Nearest even; NaN is float16's quiet NaN, float8's 0x7f. */
static unsigned perf_to_minifloat(perf_type t, double x) {
  minifloat f = minifloat_of(t);
  unsigned sign = signbit(x) ? f.sign : 0;
  if (isnan(x)) return t == PERF_FLOAT16 ? sign | 0x7e00u : 0x7fu;
  double a = fabs(x);
  if (a == 0) return sign;
  int emin = 1 - f.bias, e = isinf(a) ? 1000 : ilogb(a);
  if (e > 100) return sign | f.over;
  if (e < emin) e = emin;
  unsigned long q = (unsigned long)nearbyint(ldexp(a, f.mb - e)); /* significand, hidden bit included */
  unsigned long packed = (unsigned long)(e - emin) * (1ul << f.mb) + q;
  return sign | (packed > f.max ? f.over : (unsigned)packed);
}

static double perf_from_minifloat(perf_type t, unsigned b) {
  minifloat f = minifloat_of(t);
  unsigned mmask = (1u << f.mb) - 1u, m = b & mmask;
  unsigned e = (b & (f.sign - 1u)) >> f.mb;
  unsigned top = 2u * f.bias + 1u; /* the all-ones exponent */
  double v;
  if (e == top && t != PERF_FLOAT8E4M3) v = m == 0 ? INFINITY : NAN; /* float16, e5m2: IEEE-like */
  else if (e == top && m == mmask) v = NAN;                          /* e4m3's only NaN */
  else if (e == 0) v = ldexp((double)m, 1 - f.bias - f.mb);          /* subnormal */
  else v = ldexp((double)(m + mmask + 1u), (int)e - f.bias - f.mb);
  return (b & f.sign) ? -v : v;
}

void perf_store(perf_type t, void *buf, size_t i, double x) {
  char *p = (char *)buf + i * perf_type_size(t);
  /* integers: exact value, then the low bits (conversion to unsigned wraps) */
  int64_t ix = (t <= PERF_UINT64) ? (int64_t)x : 0;
  uint8_t u8 = (uint8_t)ix;
  uint32_t u32 = (uint32_t)ix;
  uint64_t u64 = (uint64_t)ix;
  uint16_t u16;
  float f;
  switch (t) {
    case PERF_FLOAT8E4M3:
    case PERF_FLOAT8E5M2: u8 = (uint8_t)perf_to_minifloat(t, x); memcpy(p, &u8, 1); break;
    case PERF_INT8:
    case PERF_UINT8: memcpy(p, &u8, 1); break;
    case PERF_INT32:
    case PERF_UINT32: memcpy(p, &u32, 4); break;
    case PERF_INT64:
    case PERF_UINT64: memcpy(p, &u64, 8); break;
    case PERF_FLOAT16: u16 = (uint16_t)perf_to_minifloat(t, (float)x); memcpy(p, &u16, 2); break;
    case PERF_BFLOAT16: u16 = perf_float_to_bf16((float)x); memcpy(p, &u16, 2); break;
    case PERF_FLOAT32: f = (float)x; memcpy(p, &f, 4); break;
    case PERF_FLOAT64: memcpy(p, &x, 8); break;
    default: break;
  }
}

static double perf_load(perf_type t, const void *buf, size_t i) {
  const char *p = (const char *)buf + i * perf_type_size(t);
  int8_t i8; uint8_t u8; int32_t i32; uint32_t u32; int64_t i64; uint64_t u64;
  uint16_t u16; float f; double d;
  switch (t) {
    case PERF_INT8: memcpy(&i8, p, 1); return i8;
    case PERF_UINT8: memcpy(&u8, p, 1); return u8;
    case PERF_INT32: memcpy(&i32, p, 4); return i32;
    case PERF_UINT32: memcpy(&u32, p, 4); return u32;
    case PERF_INT64: memcpy(&i64, p, 8); return (double)i64;
    case PERF_UINT64: memcpy(&u64, p, 8); return (double)u64;
    case PERF_FLOAT16: memcpy(&u16, p, 2); return perf_from_minifloat(t, u16);
    case PERF_BFLOAT16: memcpy(&u16, p, 2); return perf_bf16_to_float(u16);
    case PERF_FLOAT32: memcpy(&f, p, 4); return f;
    case PERF_FLOAT64: memcpy(&d, p, 8); return d;
    case PERF_FLOAT8E4M3:
    case PERF_FLOAT8E5M2: memcpy(&u8, p, 1); return perf_from_minifloat(t, u8);
    default: return 0;
  }
}

/* x as the type holds it: integers wrapped, floats rounded. */
static double in_type(perf_type t, double x) {
  unsigned char w[8];
  perf_store(t, w, 0, x);
  return perf_load(t, w, 0);
}

/* Largest |sum| the type holds exactly, and the most factors of 2 a product
 * may have and stay exact (and within the double the reference uses). */
static const double exact_sum[PERF_NUM_TYPES] = {
    127, 255, 2147483647.0, 4294967295.0, 4611686018427387904.0, 4611686018427387904.0,
    2048, 16777216.0, 9007199254740992.0, 256, 16, 8};
static const int prod_bits[PERF_NUM_TYPES] = {6, 7, 30, 31, 62, 62, 15, 60, 60, 60, 8, 15};

static int is_unsigned(perf_type t) { return t == PERF_UINT8 || t == PERF_UINT32 || t == PERF_UINT64; }
static int is_float(perf_type t) { return t >= PERF_FLOAT16; }

void perf_gen_init(perf_gen *g, perf_type type, perf_op op, int nranks, uint64_t seed) {
  *g = (perf_gen){.type = type, .op = op, .nranks = nranks, .seed = seed};
  /* a premul-sum's scalars are -1, 1 or 2: its addends twice as large */
  double amp = exact_sum[type] / (nranks > 0 ? nranks : 1) / (op == PERF_MULSUM ? 2 : 1);
  g->amp = amp >= 8 ? 8 : amp >= 1 ? (int)amp : 1; /* past that, integers wrap as checked */
  g->prod_two = nranks <= prod_bits[type];
}

uint64_t perf_mix64(uint64_t z) { /* splitmix64's finalizer */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Rank `rank`'s input element `index`: a small integer. */
static double perf_gen_value(const perf_gen *g, int rank, size_t index) {
  uint64_t r = perf_mix64(g->seed * 0x9e3779b97f4a7c15ull + (uint64_t)rank * 0xd1b54a32d192ed03ull + (uint64_t)index);
  static const double prod_set[3] = {-1, 1, 2}; /* unsigned: {1, 2} */
  if (g->op == PERF_PROD && is_unsigned(g->type)) return g->prod_two ? prod_set[1 + r % 2] : 1;
  if (g->op == PERF_PROD) return prod_set[r % (g->prod_two ? 3u : 2u)];
  if (is_unsigned(g->type)) return (double)(r % (uint64_t)(g->amp + 1));
  return (double)(int64_t)(r % (uint64_t)(2 * g->amp + 1)) - g->amp;
}

double perf_premul_scalar(int rank) { return rank % 3 == 2 ? 2 : (rank & 1) ? -1 : 1; }

void perf_fill(const perf_gen *g, int rank, void *buf, size_t first, size_t n) {
  for (size_t i = 0; i < n; i++) perf_store(g->type, buf, i, perf_gen_value(g, rank, first + i));
}

void perf_poison(perf_type t, void *buf, size_t n) {
  /* NaN for every float type; 0xa5.. for integers, far outside small sums */
  memset(buf, is_float(t) ? 0xff : 0xa5, n * perf_type_size(t));
}

/* Rank r's addend: its value, times its scalar for a premul-sum. */
static double addend(const perf_gen *g, int r, size_t index) {
  double v = perf_gen_value(g, r, index);
  return g->op == PERF_MULSUM ? v * perf_premul_scalar(r) : v;
}

static double reduce_exact(const perf_gen *g, size_t index) {
  double acc = addend(g, 0, index);
  for (int r = 1; r < g->nranks; r++) {
    double v = addend(g, r, index);
    switch (g->op) {
      case PERF_PROD: acc *= v; break;
      case PERF_MAX: acc = v > acc ? v : acc; break;
      case PERF_MIN: acc = v < acc ? v : acc; break;
      default: acc += v; break; /* sum, avg */
    }
  }
  return acc;
}

/* got[i] equals x stored in the type, bit for bit. */
static int same_bits(perf_type t, const void *got, size_t i, double x) {
  unsigned char want[8];
  size_t es = perf_type_size(t);
  perf_store(t, want, 0, x);
  return memcmp((const char *)got + i * es, want, es) == 0;
}

/* float8's average is NCCL's: each value times 1/n rounded to the type,
 * rounded, then summed (each partial sum rounded, in the ring's order): the
 * exact sum of the rounded products, within the sum's rounding bound. */
static int fp8_avg_ok(const perf_gen *g, const void *got, size_t i, size_t index) {
  perf_type t = g->type;
  double s = in_type(t, 1.0 / g->nranks), want = 0, mag = 0;
  for (int r = 0; r < g->nranks; r++) {
    double p = in_type(t, perf_gen_value(g, r, index) * s);
    want += p;
    mag += fabs(p);
  }
  minifloat f = minifloat_of(t);
  double u = ldexp(1.0, -(f.mb + 1)), tiny = g->nranks * ldexp(1.0, 1 - f.bias - f.mb);
  return fabs(perf_load(t, got, i) - want) <= (g->nranks + 1) * u * mag + tiny; /* false for NaN */
}

/* The average of an exact sum, as kolo computes it, checked within one ulp
 * for floating types (float8: fp8_avg_ok). */
static int avg_ok(const perf_gen *g, const void *got, size_t i, double sum, size_t index) {
  perf_type t = g->type;
  int n = g->nranks;
  if (t == PERF_FLOAT8E4M3 || t == PERF_FLOAT8E5M2) return fp8_avg_ok(g, got, i, index);
  if (!is_float(t)) return same_bits(t, got, i, (double)((int64_t)in_type(t, sum) / n)); /* the wrapped sum */
  double want = in_type(t, t == PERF_FLOAT64 ? sum / n : (double)((float)sum / (float)n));
  static const double ulp[PERF_NUM_TYPES] = {0, 0, 0, 0, 0, 0, 0x1p-10, 0x1p-23, 0x1p-52, 0x1p-7};
  return fabs(perf_load(t, got, i) - want) <= ulp[t] * fabs(want); /* false for NaN */
}

uint64_t perf_check_reduced(const perf_gen *g, const void *got, size_t first, size_t n) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; i++) {
    double x = reduce_exact(g, first + i);
    wrong += !(g->op != PERF_AVG ? same_bits(g->type, got, i, x) : avg_ok(g, got, i, x, first + i));
  }
  return wrong;
}

uint64_t perf_check_copied(const perf_gen *g, int src, const void *got, size_t first, size_t n) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += !same_bits(g->type, got, i, perf_gen_value(g, src, first + i));
  return wrong;
}

uint64_t perf_check_transposed(const perf_gen *g, const void *got, int rank, size_t per_rank) {
  uint64_t wrong = 0;
  size_t es = perf_type_size(g->type);
  for (int r = 0; r < g->nranks; r++)
    wrong += perf_check_copied(g, r, (const char *)got + (size_t)r * per_rank * es, (size_t)rank * per_rank, per_rank);
  return wrong;
}

void perf_divide(perf_type t, void *buf, size_t n, int div) {
  if (div <= 1) return;
  for (size_t i = 0; i < n; i++) {
    double x = perf_load(t, buf, i), q;
    char *p64 = (char *)buf + i * 8; /* 64-bit integers: in their own type, past a double's 53 bits */
    int64_t s64;
    uint64_t u64;
    switch (t) {
      case PERF_INT64: memcpy(&s64, p64, 8); s64 /= div; memcpy(p64, &s64, 8); continue;
      case PERF_UINT64: memcpy(&u64, p64, 8); u64 /= (uint64_t)div; memcpy(p64, &u64, 8); continue;
      case PERF_FLOAT64: q = x / div; break;
      case PERF_FLOAT16:
      case PERF_BFLOAT16:
      case PERF_FLOAT32: q = (float)x / (float)div; break;
      default: q = trunc(x / div); break; /* integers up to 32 bits */
    }
    perf_store(t, buf, i, q);
  }
}
