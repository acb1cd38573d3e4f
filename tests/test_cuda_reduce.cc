// test_cuda_reduce.cc - the CUDA reduce primitives (kernels/cuda/) against
// the host reference of tests/util/reduce_ref.h.
//
// Through kolo_cuda_reduce (kernels/cuda_reduce.h), on device buffers: every
// dtype x op and copies (b == NULL), sizes 0 .. 65539, operands at byte
// offsets 0/1/3 from a 256-byte aligned base (all 27 combinations below
// 1000 elements) plus equal offsets 2/4/8/12 (the 16-byte vector path with
// a scalar head), out0 separate / equal to a / equal to b, out1 present or
// NULL, div 1 and 3.  Outputs start as 0xA5 bytes; the bytes around every
// buffer and inputs that are not outputs must come back untouched.  Results
// are compared bit for bit (any NaN matches any NaN); see reduce_ref.h.
//
// Without a CUDA build or without a device every test is a visible skip.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "util/reduce_ref.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda_reduce.h"
#endif

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

  // One case; "" when it passed, else what went wrong.
  std::string run_case(koloDataType_t type, koloRedOp_t op, size_t n, Offsets off, Alias alias,
                       bool with_b, bool with_out1, int div, std::mt19937_64 &rng);

  void *arena_ = nullptr;
};

std::string CudaReduceTest::run_case(koloDataType_t type, koloRedOp_t op, size_t n, Offsets off,
                                     Alias alias, bool with_b, bool with_out1, int div,
                                     std::mt19937_64 &rng) {
  size_t bytes = n * type_size(type);
  size_t offs[kNumRegions] = {off.a, off.b, off.out, off.b};
  std::vector<unsigned char> a_in(bytes + 1), b_in(bytes + 1), want(bytes + 1);
  fill_random(a_in.data(), n, type, rng);
  fill_random(b_in.data(), n, type, rng);
  reference(want.data(), a_in.data(), with_b ? b_in.data() : nullptr, n, type, op, div);

  if (cudaMemset(arena_, kPoison, kNumRegions * kRegionStride) != cudaSuccess) return "memset";
  if (cudaMemcpy(region(kA) + off.a, a_in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(region(kB) + off.b, b_in.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    return "upload";
  void *a = region(kA) + off.a, *b = region(kB) + off.b;
  void *o0 = alias == kOut0IsA ? a : alias == kOut0IsB ? b : region(kOut0) + off.out;
  void *o1 = with_out1 ? region(kOut1) + off.b : nullptr;
  int rc = kolo_cuda_reduce(o0, o1, a, with_b ? b : nullptr, n, type, op, div, nullptr);
  if (rc != cudaSuccess) return std::string("launch: ") + cudaGetErrorString((cudaError_t)rc);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return std::string("kernel: ") + cudaGetErrorString(e);

  // Every region back, guards included.
  size_t used = 16 + bytes + kGuard;
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

TEST_P(CudaReduceTest, MatchesReference) {
  koloDataType_t type = (koloDataType_t)std::get<0>(GetParam());
  int op_param = std::get<1>(GetParam());
  bool with_b = op_param < koloNumOps; /* koloNumOps: copies */
  koloRedOp_t op = with_b ? (koloRedOp_t)op_param : koloAvg;
  std::mt19937_64 rng(1000003u * (unsigned)type + 7919u * (unsigned)op_param);
  int failures = 0;
  for (size_t n : kSizes)
    for (Offsets off : offsets_for(n))
      for (int alias = kSeparate; alias <= kOut0IsB; alias++) {
        if (!with_b && alias == kOut0IsB) continue;
        for (bool with_out1 : {false, true})
          for (int div : {1, 3}) {
            std::string err =
                run_case(type, op, n, off, (Alias)alias, with_b, with_out1, div, rng);
            if (err.empty()) continue;
            ADD_FAILURE() << type_name(type) << " " << (with_b ? op_name(op) : "copy")
                          << " n=" << n << " offsets a/b/out=" << off.a << "/" << off.b << "/"
                          << off.out << " alias=" << alias << " out1=" << with_out1
                          << " div=" << div << ": " << err;
            if (++failures >= 5) return;
          }
      }
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, CudaReduceTest,
                         ::testing::Combine(::testing::Range(0, (int)koloNumTypes),
                                            ::testing::Range(0, (int)koloNumOps + 1)),
                         [](const ::testing::TestParamInfo<CudaReduceTest::ParamType> &info) {
                           int op = std::get<1>(info.param);
                           return std::string(type_name((koloDataType_t)std::get<0>(info.param))) +
                                  "_" + (op < koloNumOps ? op_name((koloRedOp_t)op) : "copy");
                         });

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
