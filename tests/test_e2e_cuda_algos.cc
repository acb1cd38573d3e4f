// test_e2e_cuda_algos.cc - every flat all-reduce algorithm (ring, recursive
// doubling, Rabenseifner, direct), forced by KOLO_ALGO, on koloMemCuda
// communicators: the CUDA kernel runs the same programs as the host
// executor (test_e2e_algos.cc), over point-to-point device pipes for the
// multi-peer ones.  Ranks as threads on one device (util/cuda_bufs.h's
// CudaWorld; on the CUDA model in CI).
//   CudaAlgoGrid  n in {1, 2, 3, 4, 5, 8}: float32 sum and avg, int32 sum
//                 and avg, bfloat16 sum and a float32 premul-sum at counts
//                 {0, 1, 7, 4095} (LL), in and out of place, and 1 MiB + 3
//                 elements (SIMPLE: float32 sum, int32 avg in place) at
//                 n <= 4, every element checked (util/coll_run.h); each
//                 world first checks that its comm runs the forced
//                 algorithm.
//   CudaAlgoBits  a max of -0 and +0 (the second operand when neither is
//                 greater), under LL and SIMPLE: every rank gets the same
//                 bits (the kernel's src-first reductions, ring/doubling.h).
//                 (Not a sum of NaNs: which payload an add keeps is the
//                 compiler's and the hardware's, whatever the order.)
//   CudaTreeBcast the broadcast tree (KOLO_ALGO=broadcast:tree), n in {1,
//                 3, 5}: float32, int8 and float64 at the small counts
//                 (LL), in and out of place, every root, and 1 MiB + 3
//                 float32 (SIMPLE) at n = 3; unforced, a CUDA comm keeps
//                 the chain (no_auto_peers).
//   CudaBruckAllGather  Bruck's all-gather (KOLO_ALGO=allgather:bruck), n in
//                 {1, 3, 5}: float32, int8 and float64 at the small counts
//                 (LL), in and out of place, 20001 float32 in place at n = 5
//                 and 1 MiB + 3 float32 at n = 3 (SIMPLE); unforced, the
//                 ring.
// Large counts are skipped in sanitizer builds (KOLO_TEST_FULL=1 runs them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/cuda_bufs.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

extern "C" {
#include "core/op.h"
#include "ring/algo.h"
}

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);
// One hardware queue per stream (see test_e2e_cuda.cc).
const bool kQueuesSet = (setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0), true);

using Param = std::tuple<const char *, int>;
std::string param_name(const ::testing::TestParamInfo<Param> &p) {
  return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
}

std::vector<CollCase> grid(int n) {
  struct TO {
    koloDataType_t t;
    koloRedOp_t op;
  };
  const TO types[] = {{koloFloat32, koloSum}, {koloFloat32, koloAvg}, {koloInt32, koloSum},
                      {koloInt32, koloAvg},   {koloBfloat16, koloSum}, {koloFloat32, kPreMulSum}};
  std::vector<CollCase> cases;
  int v = 0;
  for (const TO &to : types)
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::AllReduce, to.t, to.op, n, count, ip, v++));
  if (n <= 4 && !sanitized_build()) {
    cases.push_back(make_case(Coll::AllReduce, koloFloat32, koloSum, n, kLargeCount, false, v++));
    cases.push_back(make_case(Coll::AllReduce, koloInt32, koloAvg, n, kLargeCount, true, v++));
  }
  return cases;
}

class CudaAlgoGrid : public ::testing::TestWithParam<Param> {};

TEST_P(CudaAlgoGrid, EveryElement) {
  KT_REQUIRE_CUDA();
  auto [algo, n] = GetParam();
  ScopedEnv force("KOLO_ALGO", algo);
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (size_t count : {(size_t)1, kLargeCount})
    ASSERT_EQ(kolo_comm_all_reduce_algo(w.comms[0], count, koloFloat32), kolo_algo_parse(algo)) << count;
  GridReport rep = run_cuda_grid(w, grid(n), Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaAlgoGrid,
                         ::testing::Combine(::testing::Values("ring", "rd", "rabenseifner", "direct", "oneshot"),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)),
                         param_name);

// Rank r's input of `count` float32 (as bits): zeros of signs from the
// bits of (element, rank).
std::vector<uint32_t> signed_zeros(int r, size_t count) {
  std::vector<uint32_t> x(count);
  for (size_t i = 0; i < count; i++) x[i] = ((uint32_t)((i * 2654435761u) >> (r % 24)) & 1u) << 31;
  return x;
}

class CudaAlgoBits : public ::testing::TestWithParam<Param> {};

TEST_P(CudaAlgoBits, MaxOfSignedZerosGivesTheSameBitsOnEveryRank) {
  KT_REQUIRE_CUDA();
  auto [algo, n] = GetParam();
  ScopedEnv force("KOLO_ALGO", algo);
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (size_t count : {(size_t)4097, (size_t)40001}) {  // LL, SIMPLE
    SCOPED_TRACE("max of " + std::to_string(count));
    // Allocation and copies apart from the calls: they may wait for the
    // device, whose kernels wait for the other ranks.
    std::vector<std::vector<uint32_t>> out((size_t)n);
    std::vector<std::string> errs((size_t)n);
    std::vector<void *> dev((size_t)n, nullptr);
    w.pool.run([&](int r) {
      std::vector<uint32_t> in = signed_zeros(r, count);
      if (cudaMalloc(&dev[(size_t)r], count * 4) != cudaSuccess ||
          cudaMemcpy(dev[(size_t)r], in.data(), count * 4, cudaMemcpyHostToDevice) != cudaSuccess)
        errs[(size_t)r] = "cudaMalloc or the upload failed";
    });
    for (int r = 0; r < n; r++) ASSERT_EQ(errs[(size_t)r], "") << "rank " << r;
    w.pool.run([&](int r) {
      koloResult_t res = koloAllReduce(dev[(size_t)r], dev[(size_t)r], count, koloFloat32, koloMax, w.comms[(size_t)r],
                                       w.streams[(size_t)r]);
      std::string &err = errs[(size_t)r];
      if (res != koloSuccess) err = result_text("koloAllReduce", res, w.comms[(size_t)r]);
      if (err.empty()) err = wait_stream(w.streams[(size_t)r], kStreamWaitMs);
      if (err.empty()) err = async_error_text(w.comms[(size_t)r]);
    });
    w.pool.run([&](int r) {
      out[(size_t)r].resize(count);
      if (cudaMemcpy(out[(size_t)r].data(), dev[(size_t)r], count * 4, cudaMemcpyDeviceToHost) != cudaSuccess &&
          errs[(size_t)r].empty())
        errs[(size_t)r] = "download failed";
      cudaFree(dev[(size_t)r]);
    });
    for (int r = 0; r < n; r++) ASSERT_EQ(errs[(size_t)r], "") << "rank " << r;
    for (size_t i = 0; i < count; i++) {
      const uint32_t x = out[0][i];
      ASSERT_EQ(x & 0x7fffffffu, 0u) << std::hex << x << " at " << std::dec << i;
      for (int r = 1; r < n; r++) ASSERT_EQ(out[(size_t)r][i], x) << "element " << i << ": rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaAlgoBits,
                         ::testing::Combine(::testing::Values("ring", "rd", "rabenseifner", "direct", "oneshot"), ::testing::Values(3, 4)),
                         param_name);

std::vector<CollCase> tree_grid(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  for (koloDataType_t t : {koloFloat32, koloInt8, koloFloat64})
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::Broadcast, t, koloSum, n, count, ip, v++));
  if (n == 3 && !sanitized_build()) cases.push_back(make_case(Coll::Broadcast, koloFloat32, koloSum, n, kLargeCount, false, v++));
  return cases;
}

class CudaTreeBcast : public ::testing::TestWithParam<int> {};

// A multi-peer algorithm of a collective with the ring and one other: an
// unforced CUDA communicator of n ranks keeps the ring (the model leaves
// multi-peer algorithms out on CUDA, ring/algo.h); forced by KOLO_ALGO=force
// (choose says what a call runs), it runs `algo` at every size and every
// element of `cases` is checked.
using AlgoOf = int (*)(koloComm_t, size_t, koloDataType_t);
void expect_forced_only(int n, AlgoOf choose, const char *force, int algo, const std::vector<CollCase> &cases) {
  {
    CudaWorld w(n);
    ASSERT_TRUE(w.ok()) << w.init_error;
    EXPECT_EQ(choose(w.comms[0], 1, koloFloat32), KOLO_ALGO_RING);
  }
  ScopedEnv forced("KOLO_ALGO", force);
  CudaWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (size_t count : {(size_t)1, kLargeCount}) ASSERT_EQ(choose(w.comms[0], count, koloFloat32), algo) << count;
  GridReport rep = run_cuda_grid(w, cases, Issue::kPerThread);
  EXPECT_GRID_OK(rep);
}

TEST_P(CudaTreeBcast, EveryElement) {
  KT_REQUIRE_CUDA();
  expect_forced_only(GetParam(), kolo_comm_bcast_algo, "broadcast:tree", KOLO_ALGO_TREE, tree_grid(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaTreeBcast, ::testing::Values(1, 3, 5),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// The reduce's trees, binomial and double binary (their inner ranks' sums
// in the launch's device scratch): every root, sum, avg and premul-sum,
// both protocols (20001 elements run SIMPLE), on 2 channels with every
// call spread over both (the double tree's two trees).
class CudaTreeReduce : public ::testing::TestWithParam<std::tuple<const char *, int>> {};

TEST_P(CudaTreeReduce, EveryElement) {
  KT_REQUIRE_CUDA();
  ScopedEnv channels("KOLO_NCHANNELS", "2");
  ScopedEnv spread("KOLO_MIN_CHANNEL_BYTES", "64");
  const char *algo = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());
  std::vector<CollCase> cases;
  int v = 0;
  const koloRedOp_t ops[] = {koloSum, koloAvg, kPreMulSum};
  for (koloDataType_t t : {koloFloat32, koloFloat64, koloBfloat16})
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) {
        const koloRedOp_t op = ops[v % 3];
        cases.push_back(make_case(Coll::Reduce, t, op, n, count, ip, v++));
      }
  cases.push_back(make_case(Coll::Reduce, koloFloat32, koloSum, n, 20001, true, v++));
  expect_forced_only(n, kolo_comm_reduce_algo, (std::string("reduce:") + algo).c_str(), kolo_algo_parse(algo), cases);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaTreeReduce,
                         ::testing::Combine(::testing::Values("tree", "dbtree"), ::testing::Values(1, 3, 4, 7)),
                         param_name);

// The double binary tree on 2 channels (its two trees), every call spread
// over both (KOLO_MIN_CHANNEL_BYTES=64), both protocols (20001 elements
// run SIMPLE).
class CudaDoubleTreeBcast : public ::testing::TestWithParam<int> {};

TEST_P(CudaDoubleTreeBcast, EveryElement) {
  KT_REQUIRE_CUDA();
  ScopedEnv channels("KOLO_NCHANNELS", "2");
  ScopedEnv spread("KOLO_MIN_CHANNEL_BYTES", "64");
  std::vector<CollCase> cases = tree_grid(GetParam());
  cases.push_back(make_case(Coll::Broadcast, koloFloat32, koloSum, GetParam(), 20001, true, 7));
  expect_forced_only(GetParam(), kolo_comm_bcast_algo, "broadcast:dbtree", KOLO_ALGO_DBTREE, cases);
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaDoubleTreeBcast, ::testing::Values(1, 3, 4, 6),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

std::vector<CollCase> bruck_grid(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  for (koloDataType_t t : {koloFloat32, koloInt8, koloFloat64})
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::AllGather, t, koloSum, n, count, ip, v++));
  if (n == 5) cases.push_back(make_case(Coll::AllGather, koloFloat32, koloSum, n, 20001, true, v++));  // SIMPLE
  if (n == 3 && !sanitized_build()) cases.push_back(make_case(Coll::AllGather, koloFloat32, koloSum, n, kLargeCount, false, v++));
  return cases;
}

class CudaBruckAllGather : public ::testing::TestWithParam<int> {};

TEST_P(CudaBruckAllGather, EveryElement) {
  KT_REQUIRE_CUDA();
  expect_forced_only(GetParam(), kolo_comm_ag_algo, "allgather:bruck", KOLO_ALGO_BRUCK, bruck_grid(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(CudaThreads, CudaBruckAllGather, ::testing::Values(1, 3, 5),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

}  // namespace
