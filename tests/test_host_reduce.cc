// test_host_reduce.cc - kernels/host_reduce.c against tests/util/reduce_ref.h.
//
// The grid: every dtype x op, sizes 0 .. 65539, each operand at byte offset
// 0, 1 or 3 from its malloc'd base (all 27 combinations for sizes below
// 1000, two for the larger ones), out0 separate / equal to a / equal to b,
// out1 present or NULL, div 1 and 3, and b == NULL (copies); the same for
// the premul-sum (kolo_host_reduce_premul, a random scalar per case, any
// pattern), with and without b.  Outputs start as 0xA5 bytes; the bytes
// around every buffer and the inputs that are not outputs must come back
// untouched.
//
// Tolerance: none.  Results are compared bit for bit (a NaN only has to be a
// NaN): each reference value is the correctly rounded result of the one
// operation the spec performs; see reduce_ref.h for why that makes exact
// equality right, e.g. for a float32 sum (float)((double)a + (double)b).
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "util/reduce_ref.h"

extern "C" {
#include "kernels/fp8_convert.h"
#include "kernels/host_reduce.h"
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

using namespace kolo_ref;

namespace {

const size_t kSizes[] = {0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 1000, 4095, 65536 + 3};
const size_t kOffsets[] = {0, 1, 3};
constexpr size_t kGuard = 64;
constexpr unsigned char kPoison = 0xA5;

enum Alias { kSeparate, kOut0IsA, kOut0IsB };

// `bytes` bytes at byte offset `off` of a malloc'd block, poison around.
class Buf {
 public:
  Buf(size_t off, size_t bytes) : off_(off), bytes_(bytes), total_(off + bytes + kGuard) {
    base_ = static_cast<unsigned char *>(std::malloc(total_));
    std::memset(base_, kPoison, total_);
  }
  ~Buf() { std::free(base_); }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  void *p() { return base_ + off_; }
  std::vector<unsigned char> contents() const {
    return std::vector<unsigned char>(base_ + off_, base_ + off_ + bytes_);
  }
  bool guards_intact() const {
    for (size_t i = 0; i < total_; i++)
      if ((i < off_ || i >= off_ + bytes_) && base_[i] != kPoison) return false;
    return true;
  }
  bool all_poison() const {
    for (size_t i = 0; i < total_; i++)
      if (base_[i] != kPoison) return false;
    return true;
  }

 private:
  unsigned char *base_;
  size_t off_, bytes_, total_;
};

struct Case {
  koloDataType_t type;
  koloRedOp_t op;
  size_t n;
  size_t off_a, off_b, off_out;
  Alias alias;
  bool with_b, with_out1;
  int div;
  bool premul = false;
  uint64_t scalar = 0;

  std::string str() const {
    char sc[32];
    std::snprintf(sc, sizeof sc, "premul scalar=0x%llx", (unsigned long long)scalar);
    return std::string(type_name(type)) + " " + (premul ? sc : op_name(op)) + " " + layout() +
           (premul ? "" : " div=" + std::to_string(div));
  }
  std::string layout() const {
    static const char *aliases[] = {"separate", "out0==a", "out0==b"};
    return "n=" + std::to_string(n) + " offsets a/b/out=" + std::to_string(off_a) + "/" +
           std::to_string(off_b) + "/" + std::to_string(off_out) + " " + aliases[alias] +
           (with_b ? "" : " b=NULL") + (with_out1 ? " out1" : " out1=NULL");
  }
};

// Runs one case; "" when it passed, else what went wrong.
std::string run_case(const Case &c, std::mt19937_64 &rng) {
  size_t bytes = c.n * type_size(c.type);
  Buf a(c.off_a, bytes), b(c.off_b, bytes), out0(c.off_out, bytes), out1(c.off_b, bytes);
  fill_random(a.p(), c.n, c.type, rng);
  fill_random(b.p(), c.n, c.type, rng);
  std::vector<unsigned char> a_in = a.contents(), b_in = b.contents();
  std::vector<unsigned char> want(bytes + 1);
  if (c.premul)
    reference_premul(want.data(), a_in.data(), c.with_b ? b_in.data() : nullptr, c.n, c.type, c.scalar);
  else
    reference(want.data(), a_in.data(), c.with_b ? b_in.data() : nullptr, c.n, c.type, c.op, c.div);

  void *o0 = c.alias == kOut0IsA ? a.p() : c.alias == kOut0IsB ? b.p() : out0.p();
  void *o1 = c.with_out1 ? out1.p() : nullptr;
  if (c.premul)
    kolo_host_reduce_premul(o0, o1, a.p(), c.with_b ? b.p() : nullptr, c.n, c.type, &c.scalar);
  else
    kolo_host_reduce(o0, o1, a.p(), c.with_b ? b.p() : nullptr, c.n, c.type, c.op, c.div);

  const void *b_ref = c.with_b ? b_in.data() : nullptr;
  std::string err = compare(o0, want.data(), a_in.data(), b_ref, c.n, c.type);
  if (!err.empty()) return "out0: " + err;
  if (c.with_out1) {
    err = compare(out1.p(), want.data(), a_in.data(), b_ref, c.n, c.type);
    if (!err.empty()) return "out1: " + err;
  }
  if (!a.guards_intact() || !b.guards_intact() || !out0.guards_intact() || !out1.guards_intact())
    return "wrote outside a buffer";
  if (c.alias != kOut0IsA && a.contents() != a_in) return "changed input a";
  if (c.alias != kOut0IsB && b.contents() != b_in) return "changed input b";
  if (c.alias != kSeparate && !out0.all_poison()) return "wrote the unused out0 buffer";
  if (!c.with_out1 && !out1.all_poison()) return "wrote out1, which was NULL";
  return "";
}

// Every variant of (type, op) over the grid; b == NULL runs when with_b is
// false (then op does not matter and out0 == b is skipped).  premul: the
// premul-sum instead of op, a random scalar per case (div 1 only).
void run_grid(koloDataType_t type, koloRedOp_t op, bool with_b, bool premul = false) {
  std::mt19937_64 rng(1000003u * (unsigned)type + 7919u * (unsigned)op + (with_b ? 1 : 2) + (premul ? 4 : 0));
  int failures = 0;
  for (size_t n : kSizes) {
    for (size_t oa : kOffsets)
      for (size_t ob : kOffsets)
        for (size_t oo : kOffsets) {
          bool corner = (oa == 0 && ob == 0 && oo == 0) || (oa == 1 && ob == 3 && oo == 1);
          if (n >= 1000 && !corner) continue;
          for (int alias = kSeparate; alias <= kOut0IsB; alias++) {
            if (!with_b && alias == kOut0IsB) continue;
            for (bool with_out1 : {false, true})
              for (int div : {1, 3}) {
                if (premul && div != 1) continue;
                Case c{type, op, n, oa, ob, oo, (Alias)alias, with_b, with_out1, div};
                c.premul = premul;
                if (premul) fill_random(&c.scalar, 1, type, rng);
                std::string err = run_case(c, rng);
                if (!err.empty()) {
                  ADD_FAILURE() << c.str() << ": " << err;
                  if (++failures >= 5) return;
                }
              }
          }
        }
  }
}

// Parameters: (dtype, op) as ints.
class ReduceTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ReduceTest, MatchesReference) {
  run_grid((koloDataType_t)std::get<0>(GetParam()), (koloRedOp_t)std::get<1>(GetParam()), true);
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceTest,
                         ::testing::Combine(::testing::Range(0, (int)koloNumTypes),
                                            ::testing::Range(0, (int)koloNumOps)),
                         [](const ::testing::TestParamInfo<ReduceTest::ParamType> &info) {
                           return std::string(type_name((koloDataType_t)std::get<0>(info.param))) +
                                  "_" + op_name((koloRedOp_t)std::get<1>(info.param));
                         });

class CopyTest : public ::testing::TestWithParam<int> {};

TEST_P(CopyTest, MatchesReference) { run_grid((koloDataType_t)GetParam(), koloAvg, false); }

INSTANTIATE_TEST_SUITE_P(AllTypes, CopyTest, ::testing::Range(0, (int)koloNumTypes),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(type_name((koloDataType_t)info.param));
                         });

// The premul-sum: with b (a + pre(b)) and without (pre(a)).
class PremulTest : public ::testing::TestWithParam<int> {};

TEST_P(PremulTest, MatchesReference) {
  run_grid((koloDataType_t)GetParam(), koloSum, true, true);
  run_grid((koloDataType_t)GetParam(), koloSum, false, true);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, PremulTest, ::testing::Range(0, (int)koloNumTypes),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(type_name((koloDataType_t)info.param));
                         });

// ---- hand-picked semantics (readable versions of what the grid checks) ----

template <typename T>
std::vector<T> reduce2(const std::vector<T> &a, const std::vector<T> &b, koloDataType_t t,
                       koloRedOp_t op, int div) {
  std::vector<T> out(a.size());
  kolo_host_reduce(out.data(), nullptr, a.data(), b.data(), a.size(), t, op, div);
  return out;
}

TEST(HostReduceSemantics, IntegersWrap) {
  EXPECT_EQ(reduce2<int8_t>({127}, {1}, koloInt8, koloSum, 1)[0], -128);
  EXPECT_EQ(reduce2<uint8_t>({200}, {100}, koloUint8, koloSum, 1)[0], 44);
  EXPECT_EQ(reduce2<int32_t>({INT32_MIN}, {-1}, koloInt32, koloProd, 1)[0], INT32_MIN);
  EXPECT_EQ(reduce2<int64_t>({INT64_MAX}, {2}, koloInt64, koloProd, 1)[0], -2);
  EXPECT_EQ(reduce2<uint64_t>({~0ull}, {~0ull}, koloUint64, koloSum, 1)[0], ~0ull - 1);
  EXPECT_EQ(reduce2<int8_t>({-100}, {100}, koloInt8, koloMax, 1)[0], 100);
  EXPECT_EQ(reduce2<uint32_t>({0x80000000u}, {1}, koloUint32, koloMin, 1)[0], 1u);
}

TEST(HostReduceSemantics, IntegerAverageTruncatesTheWrappedSum) {
  EXPECT_EQ(reduce2<int32_t>({-7}, {0}, koloInt32, koloAvg, 3)[0], -2);
  EXPECT_EQ(reduce2<int8_t>({100}, {100}, koloInt8, koloAvg, 3)[0], (int8_t)-56 / 3);
  EXPECT_EQ(reduce2<uint32_t>({~0u}, {~0u}, koloUint32, koloAvg, 3)[0], 0xfffffffeu / 3);
  EXPECT_EQ(reduce2<int64_t>({INT64_MIN}, {0}, koloInt64, koloAvg, 3)[0], INT64_MIN / 3);
  EXPECT_EQ(reduce2<int32_t>({INT32_MIN}, {0}, koloInt32, koloAvg, 7)[0], INT32_MIN / 7);
}

// The grid divides by 3 only; integer division is computed through float
// or double for narrow types, so try divisors up to INT_MAX as well.
TEST(HostReduceSemantics, IntegerAverageIsExactForAnyDivisor) {
  const int divs[] = {2, 3, 5, 7, 127, 128, 255, 256, 1000, 65535, (1 << 24) + 1, INT32_MAX};
  const koloDataType_t types[] = {koloInt8,   koloUint8, koloInt32,
                                  koloUint32, koloInt64, koloUint64};
  std::mt19937_64 rng(7);
  const size_t n = 4099;
  std::vector<unsigned char> a(n * 8), b(n * 8), got(n * 8), want(n * 8);
  for (koloDataType_t t : types)
    for (int div : divs) {
      fill_random(a.data(), n, t, rng);
      fill_random(b.data(), n, t, rng);
      // extremes first: 0, -1, the smallest and largest values
      uint64_t top = 1ull << (8 * type_size(t) - 1);
      uint64_t edges[] = {0, ~0ull, top, top - 1};
      for (size_t i = 0; i < 4; i++) store_bits(a.data(), i, t, edges[i]);
      for (size_t i = 0; i < 4; i++) store_bits(b.data(), i, t, 0);
      for (bool with_b : {false, true}) {
        const void *pb = with_b ? b.data() : nullptr;
        kolo_host_reduce(got.data(), nullptr, a.data(), pb, n, t, koloAvg, div);
        reference(want.data(), a.data(), pb, n, t, koloAvg, div);
        ASSERT_EQ("", compare(got.data(), want.data(), a.data(), pb, n, t))
            << type_name(t) << " div=" << div << (with_b ? " sum" : " copy");
      }
    }
}

TEST(HostReduceSemantics, FloatMaxMinPropagateNaN) {
  float nan = NAN;
  std::vector<float> mx = reduce2<float>({nan, 1.0f, -0.0f, 0.0f}, {1.0f, nan, 0.0f, -0.0f},
                                         koloFloat32, koloMax, 1);
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_FALSE(std::signbit(mx[2]));  // neither is greater: the second operand
  EXPECT_TRUE(std::signbit(mx[3]));
  std::vector<double> mn = reduce2<double>({(double)nan, 1.0}, {1.0, (double)nan}, koloFloat64,
                                           koloMin, 1);
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_TRUE(std::isnan(mn[1]));
}

TEST(HostReduceSemantics, HalfAverageDividesInFloat32) {
  // 1 + 2^-10 (next half after 1) plus 1: 2 + 2^-10 is exact in float but
  // not in half; /3 in float, then one rounding to half.
  uint16_t a = 0x3c01, b = 0x3c00, out = 0;
  kolo_host_reduce(&out, nullptr, &a, &b, 1, koloFloat16, koloAvg, 3);
  float sum = 1.0f + 0x1p-10f + 1.0f;
  EXPECT_EQ(out, to_half((double)(sum / 3.0f)));
}

TEST(HostReduceSemantics, NothingHappensForNothing) {
  kolo_host_reduce(nullptr, nullptr, nullptr, nullptr, 0, koloFloat32, koloSum, 1);
  unsigned char buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, copy[8];
  std::memcpy(copy, buf, sizeof buf);
  kolo_host_reduce(buf, nullptr, buf, buf, 2, (koloDataType_t)koloNumTypes, koloSum, 1);
  kolo_host_reduce(buf, nullptr, buf, buf, 2, koloFloat32, (koloRedOp_t)koloNumOps, 1);
  EXPECT_EQ(0, std::memcmp(buf, copy, sizeof buf));
}

// ---- float16 / bfloat16 conversions ---------------------------------------

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(HalfConversion, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = kolo_half_to_float((uint16_t)h);
    double want = from_half((uint16_t)h);
    uint16_t back = kolo_float_to_half(f);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // NaNs come back quiet with their payload (as F16C does)
      ASSERT_EQ(back, h | 0x200u) << std::hex << h;
    } else {
      ASSERT_EQ((double)f, want) << std::hex << h;
      ASSERT_EQ(std::signbit(f), std::signbit(want)) << std::hex << h;
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Bf16Conversion, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = kolo_bf16_to_float((uint16_t)h);
    double want = from_bf16((uint16_t)h);
    uint16_t back = kolo_float_to_bf16(f);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(back, h | 0x40u) << std::hex << h;
    } else {
      ASSERT_EQ(bits_of(f), h << 16) << std::hex << h;
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// Floats that probe rounding: for float exponents around the 16-bit
// formats' range, random significands with the low k bits replaced by
// 100..0 (an exact tie at every possible rounding position) and by
// 011..1 / 100..01 (just below / above it); then random bit patterns.
std::vector<float> rounding_probes() {
  std::vector<float> v;
  std::mt19937_64 rng(42);
  for (uint32_t e = 0; e < 256; e++) {
    bool near = (e >= 90 && e <= 146) || e >= 250 || e <= 4;
    for (int j = 0; j < (near ? 300 : 8); j++) {
      uint32_t m = (uint32_t)rng() & 0x7fffffu, s = (uint32_t)(rng() & 1) << 31;
      v.push_back(float_of(s | e << 23 | m));
      for (int k = 1; k <= 23; k++) {
        uint32_t low = (1u << k) - 1, top = m & ~low;
        v.push_back(float_of(s | e << 23 | top | 1u << (k - 1)));
        v.push_back(float_of(s | e << 23 | top | ((1u << (k - 1)) - 1)));
        v.push_back(float_of(s | e << 23 | top | 1u << (k - 1) | (k > 1 ? 1u : 0u)));
      }
    }
  }
  for (int i = 0; i < 1000000; i++) v.push_back(float_of((uint32_t)rng()));
  return v;
}

// A NaN converts to a quiet NaN of the same sign with the top payload bits.
uint16_t nan_to_half(float f) {
  uint32_t u = bits_of(f);
  return (uint16_t)((u >> 16 & 0x8000u) | 0x7e00u | (u >> 13 & 0x3ffu));
}
uint16_t nan_to_bf16(float f) { return (uint16_t)(bits_of(f) >> 16 | 0x40u); }

TEST(HalfConversion, FloatToHalfRoundsToNearestEven) {
  struct {
    float f;
    uint16_t h;
  } edges[] = {
      {65504.0f, 0x7bff},   {65519.99f, 0x7bff},    {65520.0f, 0x7c00}, /* tie: to even = inf */
      {65536.0f, 0x7c00},   {1e10f, 0x7c00},        {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},  {-65520.0f, 0xfc00},    {0.0f, 0x0000},
      {-0.0f, 0x8000},      {1.0f, 0x3c00},         {1.0f + 0x1p-11f, 0x3c00}, /* tie, even */
      {1.0f + 0x3p-11f, 0x3c02}, /* tie, up */     {0x1p-14f, 0x0400},  /* smallest normal */
      {0x1p-24f, 0x0001},   {0x1p-25f, 0x0000},     /* tie between 0 and the smallest: 0 */
      {0x1.000002p-25f, 0x0001}, {0x3p-25f, 0x0002},  /* tie: 1.5 -> 2 */
      {0x5p-25f, 0x0002},   /* tie: 2.5 -> 2 */      {0x7fep-25f, 0x03ff},
      {0x7ffp-25f, 0x0400}, /* tie into the normals */ {FLT_MIN, 0x0000},
      {0x1p-149f, 0x0000},  {-0x1p-149f, 0x8000},   {FLT_MAX, 0x7c00},
      {0.1f, 0x2e66},       {-2.0f, 0xc000},        {0x1.ff8p-15f, 0x03ff},
  };
  for (const auto &e : edges) {
    EXPECT_EQ(kolo_float_to_half(e.f), e.h) << e.f;
    EXPECT_EQ(to_half((double)e.f), e.h) << "reference, " << e.f;
  }
  for (float f : rounding_probes()) {
    uint16_t got = kolo_float_to_half(f);
    if (std::isnan(f)) ASSERT_EQ(got, nan_to_half(f)) << std::hex << bits_of(f);
    else ASSERT_EQ(got, to_half((double)f)) << std::hexfloat << f;
  }
}

TEST(Bf16Conversion, FloatToBf16RoundsToNearestEven) {
  struct {
    float f;
    uint16_t h;
  } edges[] = {
      {1.0f, 0x3f80},       {1.0f + 0x1p-8f, 0x3f80}, /* tie, even */
      {1.0f + 0x3p-8f, 0x3f82}, {FLT_MAX, 0x7f80},   /* rounds up to inf */
      {0x1.fep127f, 0x7f7f}, {-0.0f, 0x8000},        {0x1p-149f, 0x0000},
      {0x3p-149f, 0x0000},  {0x1p-133f, 0x0001},     {INFINITY, 0x7f80},
  };
  for (const auto &e : edges) {
    EXPECT_EQ(kolo_float_to_bf16(e.f), e.h) << e.f;
    EXPECT_EQ(to_bf16((double)e.f), e.h) << "reference, " << e.f;
  }
  for (float f : rounding_probes()) {
    uint16_t got = kolo_float_to_bf16(f);
    if (std::isnan(f)) ASSERT_EQ(got, nan_to_bf16(f)) << std::hex << bits_of(f);
    else ASSERT_EQ(got, to_bf16((double)f)) << std::hexfloat << f;
  }
}

// ---- float8 conversions ---------------------------------------------------
// Against reduce_ref.h's model (the formats from their definition): every
// pattern to float, and the rounding probes back, with the edges spelled out.

float fp8_to_float(uint8_t x, koloDataType_t t) {
  return t == koloFloat8e4m3 ? kolo_e4m3_to_float(x) : kolo_e5m2_to_float(x);
}
uint8_t float_to_fp8(float f, koloDataType_t t) {
  return t == koloFloat8e4m3 ? kolo_float_to_e4m3(f) : kolo_float_to_e5m2(f);
}

TEST(Fp8Conversion, EveryPatternToFloatAndBack) {
  for (koloDataType_t t : {koloFloat8e4m3, koloFloat8e5m2})
    for (uint32_t x = 0; x < 256; x++) {
      float f = fp8_to_float((uint8_t)x, t);
      double want = fp8_decode(x, fp8_of(t));
      if (std::isnan(want)) {
        ASSERT_EQ(bits_of(f), 0x7fffffffu) << type_name(t) << std::hex << " " << x;  // the toolkit's NaN
        ASSERT_EQ(float_to_fp8(f, t), 0x7fu) << type_name(t) << std::hex << " " << x;
      } else {
        ASSERT_EQ((double)f, want) << type_name(t) << std::hex << " " << x;
        ASSERT_EQ(std::signbit(f), std::signbit(want)) << type_name(t) << std::hex << " " << x;
        // an e5m2 infinity saturates on the way back: only finite values round trip
        uint32_t back = std::isinf(want) ? (x & 0x80u) | 0x7bu : x;
        ASSERT_EQ(float_to_fp8(f, t), back) << type_name(t) << std::hex << " " << x;
      }
    }
}

TEST(Fp8Conversion, FloatToFp8RoundsToNearestEvenAndSaturates) {
  struct {
    float f;
    uint8_t e4m3, e5m2;
  } edges[] = {
      {0.0f, 0x00, 0x00},         {-0.0f, 0x80, 0x80},       {1.0f, 0x38, 0x3c},
      {448.0f, 0x7e, 0x5f},       {464.0f, 0x7e, 0x5f},      /* e4m3: tie between 448 and 480: even (448) */
      {464.01f, 0x7e, 0x5f},      /* above the tie: saturates */
      {-1e9f, 0xfe, 0xfb},        {INFINITY, 0x7e, 0x7b},    {-INFINITY, 0xfe, 0xfb},
      {57344.0f, 0x7e, 0x7b},     {61439.0f, 0x7e, 0x7b},    {61440.0f, 0x7e, 0x7b}, /* e5m2: tie into inf */
      {0x1p-9f, 0x01, 0x18},      {0x1p-10f, 0x00, 0x14},    /* e4m3: tie between 0 and the smallest: 0 */
      {0x1.000002p-10f, 0x01, 0x14}, {0x3p-10f, 0x02, 0x1a}, /* e4m3: 1.5 -> 2 */
      {0x1p-16f, 0x00, 0x01},     {0x1p-17f, 0x00, 0x00},    {0x3p-17f, 0x00, 0x02},
      {0x1p-6f, 0x08, 0x24},      {0x1.ep-7f, 0x08, 0x24},   /* ties up into the next binade */
      {1.0625f, 0x38, 0x3c},      {1.1875f, 0x3a, 0x3d},     /* ties to even (e4m3) */
      {NAN, 0x7f, 0x7f},          {-NAN, 0x7f, 0x7f},
  };
  for (const auto &e : edges) {
    EXPECT_EQ(kolo_float_to_e4m3(e.f), e.e4m3) << std::hexfloat << e.f;
    EXPECT_EQ(kolo_float_to_e5m2(e.f), e.e5m2) << std::hexfloat << e.f;
    EXPECT_EQ(fp8_round((double)e.f, kE4m3), e.e4m3) << "reference, " << std::hexfloat << e.f;
    EXPECT_EQ(fp8_round((double)e.f, kE5m2), e.e5m2) << "reference, " << std::hexfloat << e.f;
  }
  for (float f : rounding_probes())
    for (koloDataType_t t : {koloFloat8e4m3, koloFloat8e5m2})
      ASSERT_EQ(float_to_fp8(f, t), fp8_round((double)f, fp8_of(t))) << type_name(t) << " " << std::hexfloat << f;
}

// NCCL's float8 max / min: a NaN operand loses, +0 is above -0, and an e5m2
// infinity comes out saturated, as every reduction result does.
TEST(HostReduceSemantics, Fp8MaxMinAreNcclsAndSaturate) {
  // e5m2: NaN, 1.0, -0, +0, inf
  const uint8_t nan = 0x7f, one = 0x3c, mzero = 0x80, pzero = 0x00, inf = 0x7c;
  std::vector<uint8_t> a = {nan, one, mzero, pzero, inf, nan}, b = {one, nan, pzero, mzero, one, nan};
  std::vector<uint8_t> mx = reduce2<uint8_t>(a, b, koloFloat8e5m2, koloMax, 1);
  std::vector<uint8_t> mn = reduce2<uint8_t>(a, b, koloFloat8e5m2, koloMin, 1);
  std::vector<uint8_t> want_max = {one, one, pzero, pzero, 0x7b}, want_min = {one, one, mzero, mzero, one};
  for (size_t i = 0; i < want_max.size(); i++) {
    EXPECT_EQ(mx[i], want_max[i]) << "max of element " << i;
    EXPECT_EQ(mn[i], want_min[i]) << "min of element " << i;
  }
  EXPECT_TRUE(fp8_is_nan(mx[5], kE5m2) && fp8_is_nan(mn[5], kE5m2)) << "both NaN: NaN";
  // a sum past the largest finite value saturates (e4m3: 448 + 448)
  EXPECT_EQ(reduce2<uint8_t>({0x7e}, {0x7e}, koloFloat8e4m3, koloSum, 1)[0], 0x7e);
  // a plain copy moves bytes: an e5m2 infinity stays one
  uint8_t x = inf, out = 0;
  kolo_host_reduce(&out, nullptr, &x, nullptr, 1, koloFloat8e5m2, koloSum, 1);
  EXPECT_EQ(out, inf);
}

#if defined(__x86_64__) && defined(__GNUC__)
bool cpu_has_f16c() {
  unsigned a, b, c, d;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
__attribute__((target("f16c"))) uint16_t f16c_float_to_half(float f) {
  return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) float f16c_half_to_float(uint16_t h) { return _cvtsh_ss(h); }
#endif

// The reduce loops use F16C where the CPU has it and the portable
// conversions elsewhere (and for tails): both must give the same bits.
TEST(HalfConversion, PortableEqualsF16C) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!cpu_has_f16c()) {
    GTEST_SKIP() << "no F16C on this CPU";
  }
  for (uint32_t h = 0; h < 0x10000; h++)
    ASSERT_EQ(bits_of(kolo_half_to_float((uint16_t)h)), bits_of(f16c_half_to_float((uint16_t)h)))
        << std::hex << h;
  for (float f : rounding_probes())
    ASSERT_EQ(kolo_float_to_half(f), f16c_float_to_half(f)) << std::hex << bits_of(f);
#else
  GTEST_SKIP() << "not an x86-64 build: no F16C";
#endif
}

}  // namespace
