// test_cuda_reduce.cc - the CUDA reduce primitives (kernels/cuda/) against
// the host reference of tests/util/reduce_ref.h.
//
// Through kolo_cuda_reduce (kernels/cuda_reduce.h), on device buffers: every
// dtype x op, copies (b == NULL) and the premul-sum with and without b (a
// random scalar per case, kolo_cuda_reduce_premul), sizes 0 .. 65539, operands at byte
// offsets 0/1/3 from a 256-byte aligned base (all 27 combinations below
// 1000 elements) plus equal offsets 2/4/8/12 (the 16-byte vector path with
// a scalar head), out0 separate / equal to a / equal to b, out1 present or
// NULL, div 1 and 3.  Outputs start as 0xA5 bytes; the bytes around every
// buffer and inputs that are not outputs must come back untouched.  Results
// are compared bit for bit (any NaN matches any NaN); see reduce_ref.h.
//
// float8: the device's results equal the host's (kernels/host_reduce.c) bit
// for bit on every pair of the 256 values, for every op and the premul-sum,
// and those equal NCCL's, which computes in float16 (cuda_fp16.h's __hadd,
// __hmul, __hmax, __hmin, rounded to float8 by cuda_fp8.h), computed here
// with the toolkit's own conversions.
//
// Without a CUDA build or without a device every test is a visible skip.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "util/reduce_ref.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/cuda_reduce.h"
#endif

extern "C" {
#include "kernels/host_reduce.h"
}

using namespace kolo_ref;

namespace {

#ifdef KOLO_HAVE_CUDA

const size_t kSizes[] = {0, 1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 1000, 4095, 65536 + 3};
constexpr size_t kMaxElems = 65536 + 3;
constexpr size_t kGuard = 64;
constexpr size_t kRegion = kMaxElems * 8 + 16 + kGuard; /* one operand, any offset */
constexpr size_t kRegionStride = (kRegion + 255) / 256 * 256;
constexpr unsigned char kPoison = 0xA5;

enum Alias { kSeparate, kOut0IsA, kOut0IsB };
enum Region { kA, kB, kOut0, kOut1, kNumRegions };

// "" when a device is usable, else why not.
std::string no_device_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
  if (n == 0) return "cudaGetDeviceCount() = 0";
  return "";
}

struct Offsets {
  size_t a, b, out;
};

// The operand offsets to try for n elements.
std::vector<Offsets> offsets_for(size_t n) {
  std::vector<Offsets> v;
  const size_t odd[] = {0, 1, 3};
  if (n < 1000) {
    for (size_t a : odd)
      for (size_t b : odd)
        for (size_t o : odd) v.push_back({a, b, o});
  } else {
    v.push_back({0, 0, 0});
    v.push_back({1, 3, 1});
  }
  for (size_t e : {2, 4, 8, 12}) v.push_back({e, e, e});
  return v;
}

// Random operands of n elements, a scalar, and the host reference on them:
// drawn once for every case of a size (the reference is most of the time).
struct Operands {
  std::vector<unsigned char> a_in, b_in, want;
  uint64_t scalar = 0;
};

Operands make_operands(koloDataType_t type, koloRedOp_t op, size_t n, bool with_b, int div,
                       bool premul, std::mt19937_64 &rng) {
  size_t bytes = n * type_size(type);
  Operands o;
  o.a_in.resize(bytes + 1);
  o.b_in.resize(bytes + 1);
  o.want.resize(bytes + 1);
  fill_random(o.a_in.data(), n, type, rng);
  fill_random(o.b_in.data(), n, type, rng);
  fill_random(&o.scalar, 1, type, rng);
  const void *b = with_b ? o.b_in.data() : nullptr;
  if (premul)
    reference_premul(o.want.data(), o.a_in.data(), b, n, type, o.scalar);
  else
    reference(o.want.data(), o.a_in.data(), b, n, type, op, div);
  return o;
}

class CudaReduceTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void SetUp() override {
    std::string why = no_device_reason();
    if (!why.empty()) {
      GTEST_SKIP() << "no CUDA device: " << why;
    }
    ASSERT_EQ(cudaSuccess, cudaMalloc(&arena_, kNumRegions * kRegionStride));
  }
  void TearDown() override {
    if (arena_) {
      EXPECT_EQ(cudaSuccess, cudaFree(arena_));
    }
  }

  unsigned char *region(int r) { return static_cast<unsigned char *>(arena_) + r * kRegionStride; }

  // One case on ops' operands; "" when it passed, else what went wrong.
  // premul: the premul-sum with ops' scalar instead of op (div 1).
  std::string run_case(koloDataType_t type, koloRedOp_t op, size_t n, Offsets off, Alias alias,
                       bool with_b, bool with_out1, int div, const Operands &ops, bool premul);

  void *arena_ = nullptr;
};

std::string CudaReduceTest::run_case(koloDataType_t type, koloRedOp_t op, size_t n, Offsets off,
                                     Alias alias, bool with_b, bool with_out1, int div,
                                     const Operands &ops, bool premul) {
  size_t bytes = n * type_size(type);
  size_t offs[kNumRegions] = {off.a, off.b, off.out, off.b};
  const std::vector<unsigned char> &a_in = ops.a_in, &b_in = ops.b_in, &want = ops.want;
  const uint64_t scalar = ops.scalar;
  // Poison what is checked below (offset, operand, guard) in each region:
  // the whole arena would be 2 MiB per case, most of a test's time.
  size_t used = 16 + bytes + kGuard;
  for (int r = 0; r < kNumRegions; r++)
    if (cudaMemset(region(r), kPoison, used) != cudaSuccess) return "memset";
  if (cudaMemcpy(region(kA) + off.a, a_in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(region(kB) + off.b, b_in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    return "upload";
  void *a = region(kA) + off.a, *b = region(kB) + off.b;
  void *o0 = alias == kOut0IsA ? a : alias == kOut0IsB ? b : region(kOut0) + off.out;
  void *o1 = with_out1 ? region(kOut1) + off.b : nullptr;
  int rc = premul ? kolo_cuda_reduce_premul(o0, o1, a, with_b ? b : nullptr, n, type, scalar, nullptr)
                  : kolo_cuda_reduce(o0, o1, a, with_b ? b : nullptr, n, type, op, div, nullptr);
  if (rc != cudaSuccess) return std::string("launch: ") + cudaGetErrorString((cudaError_t)rc);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return std::string("kernel: ") + cudaGetErrorString(e);

  // Every region back, guards included.
  std::vector<unsigned char> got[kNumRegions];
  for (int r = 0; r < kNumRegions; r++) {
    got[r].resize(used);
    if (cudaMemcpy(got[r].data(), region(r), used, cudaMemcpyDeviceToHost) != cudaSuccess)
      return "download";
  }
  int o0_region = alias == kOut0IsA ? kA : alias == kOut0IsB ? kB : kOut0;
  const void *b_ref = with_b ? b_in.data() : nullptr;
  std::string err = compare(got[o0_region].data() + offs[o0_region], want.data(), a_in.data(),
                            b_ref, n, type);
  if (!err.empty()) return "out0: " + err;
  if (with_out1) {
    err = compare(got[kOut1].data() + off.b, want.data(), a_in.data(), b_ref, n, type);
    if (!err.empty()) return "out1: " + err;
  }
  for (int r = 0; r < kNumRegions; r++) {
    bool written = r == o0_region || (r == kOut1 && with_out1);
    bool input = r == kA || r == kB;
    for (size_t i = 0; i < used; i++) {
      bool inside = i >= offs[r] && i < offs[r] + bytes;
      if (inside && (written || input)) continue;
      if (got[r][i] != kPoison)
        return "wrote outside its outputs (region " + std::to_string(r) + ")";
    }
    if (input && !written) {
      const std::vector<unsigned char> &in = r == kA ? a_in : b_in;
      if (std::memcmp(got[r].data() + offs[r], in.data(), bytes) != 0) return "changed an input";
    }
  }
  return "";
}

// The op parameter: a koloRedOp_t, then these.
enum { kCopyParam = koloNumOps, kPremulParam, kPremulCopyParam, kNumOpParams };

std::string op_param_name(int op) {
  if (op < koloNumOps) return op_name((koloRedOp_t)op);
  return op == kCopyParam ? "copy" : op == kPremulParam ? "premulsum" : "premulcopy";
}

TEST_P(CudaReduceTest, MatchesReference) {
  koloDataType_t type = (koloDataType_t)std::get<0>(GetParam());
  int op_param = std::get<1>(GetParam());
  bool with_b = op_param < koloNumOps || op_param == kPremulParam;
  bool premul = op_param == kPremulParam || op_param == kPremulCopyParam;
  koloRedOp_t op = op_param < koloNumOps ? (koloRedOp_t)op_param : koloAvg;
  std::mt19937_64 rng(1000003u * (unsigned)type + 7919u * (unsigned)op_param);
  int failures = 0;
  for (size_t n : kSizes)
    for (int div : {1, 3}) {
      if (premul && div != 1) continue;
      const Operands ops = make_operands(type, op, n, with_b, div, premul, rng);
      for (Offsets off : offsets_for(n))
        for (int alias = kSeparate; alias <= kOut0IsB; alias++) {
          if (!with_b && alias == kOut0IsB) continue;
          for (bool with_out1 : {false, true}) {
            std::string err = run_case(type, op, n, off, (Alias)alias, with_b, with_out1, div, ops, premul);
            if (err.empty()) continue;
            ADD_FAILURE() << type_name(type) << " " << op_param_name(op_param)
                          << " n=" << n << " offsets a/b/out=" << off.a << "/" << off.b << "/"
                          << off.out << " alias=" << alias << " out1=" << with_out1
                          << " div=" << div << ": " << err;
            if (++failures >= 5) return;
          }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, CudaReduceTest,
                         ::testing::Combine(::testing::Range(0, (int)koloNumTypes),
                                            ::testing::Range(0, (int)kNumOpParams)),
                         [](const ::testing::TestParamInfo<CudaReduceTest::ParamType> &info) {
                           return std::string(type_name((koloDataType_t)std::get<0>(info.param))) +
                                  "_" + op_param_name(std::get<1>(info.param));
                         });

// ---- float8: device against host, and both against NCCL -------------------

const koloDataType_t kFp8Types[] = {koloFloat8e4m3, koloFloat8e5m2};

// a[i], b[i], i < 65536: every pair of patterns.
void every_pair(std::vector<uint8_t> *a, std::vector<uint8_t> *b) {
  a->resize(65536);
  b->resize(65536);
  for (uint32_t i = 0; i < 65536; i++) {
    (*a)[i] = (uint8_t)(i & 0xff);
    (*b)[i] = (uint8_t)(i >> 8);
  }
}

// out = the device's kolo_cuda_reduce(a, b, op, div), or with premul its
// kolo_cuda_reduce_premul(a, b, scalar) (b may be empty: none).
std::string device_run(koloDataType_t t, koloRedOp_t op, int div, bool premul, uint64_t scalar,
                       const std::vector<uint8_t> &a, const std::vector<uint8_t> &b, std::vector<uint8_t> *out) {
  const size_t n = a.size();
  uint8_t *d = nullptr;
  if (cudaMalloc(&d, 3 * n) != cudaSuccess) return "cudaMalloc";
  std::string err;
  const uint8_t *db = b.empty() ? nullptr : d + n;
  if (cudaMemcpy(d, a.data(), n, cudaMemcpyHostToDevice) != cudaSuccess ||
      (db && cudaMemcpy(d + n, b.data(), n, cudaMemcpyHostToDevice) != cudaSuccess))
    err = "upload";
  int rc = err.empty() ? (premul ? kolo_cuda_reduce_premul(d + 2 * n, nullptr, d, db, n, t, scalar, nullptr)
                                 : kolo_cuda_reduce(d + 2 * n, nullptr, d, db, n, t, op, div, nullptr))
                       : 0;
  if (err.empty() && rc != cudaSuccess) err = std::string("launch: ") + cudaGetErrorString((cudaError_t)rc);
  out->resize(n);
  if (err.empty() && cudaMemcpy(out->data(), d + 2 * n, n, cudaMemcpyDeviceToHost) != cudaSuccess)
    err = "download";
  cudaFree(d);
  return err;
}

// "" when the two arrays are equal byte for byte, else the first difference.
std::string first_difference(const std::vector<uint8_t> &x, const std::vector<uint8_t> &y,
                             const std::vector<uint8_t> &a, const std::vector<uint8_t> &b,
                             const char *xname = "device", const char *yname = "host") {
  for (size_t i = 0; i < x.size(); i++) {
    if (x[i] == y[i]) continue;
    char m[128];
    std::snprintf(m, sizeof m, "a = 0x%02x b = 0x%02x: %s 0x%02x, %s 0x%02x", a[i], b.empty() ? 0 : b[i], xname,
                  x[i], yname, y[i]);
    return m;
  }
  return "";
}

TEST(CudaFp8, DeviceEqualsHostOnEveryPair) {
  std::string why = no_device_reason();
  if (!why.empty()) {
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  std::vector<uint8_t> a, b, dev, host(65536);
  every_pair(&a, &b);
  for (koloDataType_t t : kFp8Types)
    for (koloRedOp_t op : {koloSum, koloProd, koloMax, koloMin, koloAvg}) {
      const int div = op == koloAvg ? 3 : 1;
      ASSERT_EQ("", device_run(t, op, div, false, 0, a, b, &dev));
      kolo_host_reduce(host.data(), nullptr, a.data(), b.data(), a.size(), t, op, div);
      EXPECT_EQ("", first_difference(dev, host, a, b)) << type_name(t) << " " << op_name(op);
    }
  // the premul-sum: every value against 16 scalars (the specials and random
  // ones), with b and without
  std::mt19937_64 rng(11);
  std::vector<uint8_t> x(256), y(256), none;
  for (int i = 0; i < 256; i++) x[i] = (uint8_t)i;
  for (koloDataType_t t : kFp8Types)
    for (int k = 0; k < 16; k++) {
      static const uint8_t kSpecial[8] = {0x00, 0x80, 0x7f, 0x7c, 0x7b, 0x7e, 0x01, 0x38};
      uint64_t s = k < 8 ? kSpecial[k] : rng() & 0xff;
      fill_random(y.data(), 256, t, rng);
      for (const std::vector<uint8_t> *bb : {&y, &none}) {
        ASSERT_EQ("", device_run(t, koloSum, 1, true, s, x, *bb, &dev));
        host.assign(256, 0);
        kolo_host_reduce_premul(host.data(), nullptr, x.data(), bb->empty() ? nullptr : bb->data(), 256, t, &s);
        EXPECT_EQ("", first_difference(dev, host, x, *bb)) << type_name(t) << " premul scalar 0x" << std::hex << s;
      }
    }
}

// NCCL 2.28 on sm_90 (src/device/reduce_kernel.h): float8 sum, prod, max,
// min and the premul-sum's product computed in float16 (__hadd, __hmul,
// __hmax, __hmin of the operands widened to __half) and rounded back with
// cuda_fp8.h's __NV_SATFINITE conversion.  kolo computes in float32: one
// operation's result is the same (float16 has 11 >= 2 * 4 + 2 bits), which
// this checks on every pair, with the toolkit's own host conversions.
template <typename F8>
uint8_t nccl_fp8(koloRedOp_t op, uint8_t x, uint8_t y) {
  F8 a, b;
  a.__x = x;
  b.__x = y;
  __half ha = __half(a), hb = __half(b), r;
  switch (op) {
  case koloSum: r = __hadd(ha, hb); break;
  case koloProd: r = __hmul(ha, hb); break;
  case koloMax: r = __hmax(ha, hb); break;
  default: r = __hmin(ha, hb); break;
  }
  return F8(r).__x;
}

TEST(Fp8MatchesNccl, Float16PathOnEveryPair) {
  std::vector<uint8_t> a, b, host(65536);
  every_pair(&a, &b);
  for (koloDataType_t t : kFp8Types)
    for (koloRedOp_t op : {koloSum, koloProd, koloMax, koloMin}) {
      kolo_host_reduce(host.data(), nullptr, a.data(), b.data(), a.size(), t, op, 1);
      std::vector<uint8_t> nccl(65536);
      for (size_t i = 0; i < 65536; i++)
        nccl[i] = t == koloFloat8e4m3 ? nccl_fp8<__nv_fp8_e4m3>(op, a[i], b[i]) : nccl_fp8<__nv_fp8_e5m2>(op, a[i], b[i]);
      EXPECT_EQ("", first_difference(host, nccl, a, b, "kolo", "NCCL")) << type_name(t) << " " << op_name(op);
    }
  // the premul-sum a + pre(b): pre is the product above, then the sum
  for (koloDataType_t t : kFp8Types)
    for (uint64_t s : {0x38u, 0xb9u, 0x01u, 0x7bu}) {
      kolo_host_reduce_premul(host.data(), nullptr, a.data(), b.data(), a.size(), t, &s);
      std::vector<uint8_t> nccl(65536);
      for (size_t i = 0; i < 65536; i++) {
        bool e4 = t == koloFloat8e4m3;
        uint8_t p = e4 ? nccl_fp8<__nv_fp8_e4m3>(koloProd, b[i], (uint8_t)s) : nccl_fp8<__nv_fp8_e5m2>(koloProd, b[i], (uint8_t)s);
        nccl[i] = e4 ? nccl_fp8<__nv_fp8_e4m3>(koloSum, a[i], p) : nccl_fp8<__nv_fp8_e5m2>(koloSum, a[i], p);
      }
      EXPECT_EQ("", first_difference(host, nccl, a, b, "kolo", "NCCL")) << type_name(t) << " premul scalar 0x"
                                                                       << std::hex << s;
    }
}

TEST(CudaReduce, RejectsBadArguments) {
  std::string why = no_device_reason();
  if (!why.empty()) {
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  EXPECT_EQ(cudaSuccess, kolo_cuda_reduce(nullptr, nullptr, nullptr, nullptr, 0, koloFloat32,
                                          koloSum, 1, nullptr));
  EXPECT_EQ(cudaErrorInvalidValue, kolo_cuda_reduce(nullptr, nullptr, nullptr, nullptr, 4,
                                                    koloNumTypes, koloSum, 1, nullptr));
  EXPECT_EQ(cudaErrorInvalidValue, kolo_cuda_reduce(nullptr, nullptr, nullptr, nullptr, 4,
                                                    koloFloat32, koloNumOps, 1, nullptr));
}

#else  // !KOLO_HAVE_CUDA

TEST(CudaReduce, MatchesReference) {
  GTEST_SKIP() << "no CUDA device: kolo was built without the CUDA kernels "
                  "(KOLO_CUDA=OFF or no nvcc)";
}

#endif

}  // namespace
