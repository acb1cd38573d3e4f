// test_premul.cc - koloRedOpCreatePreMulSum / koloRedOpDestroy on host
// communicators (ranks as threads): op values, refusals with a sentence,
// when the scalar is read, an op destroyed while its calls are in flight,
// and NCCL's float8 avg.  The premul-sum itself runs in every reducing
// collective's grid (util/coll_run.h: kPreMulSum), on host and CUDA
// communicators.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/expect_text.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);

// A valid premul-sum all-reduce of 5 int32 on every rank of w gives
// sum_r (r + 1) * 3 * (r + 1): the communicator still works.
void expect_usable(ThreadWorld &w) {
  const int n = w.nranks();
  int32_t want = 0;
  for (int r = 0; r < n; r++) want += 3 * (r + 1) * (r + 1);
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    int32_t s = 3 * (r + 1), x[5] = {r + 1, r + 1, r + 1, r + 1, r + 1};
    koloRedOp_t op;
    koloResult_t res = koloRedOpCreatePreMulSum(&op, &s, koloInt32, koloScalarHostImmediate, w.comms[r]);
    if (res == koloSuccess) res = koloAllReduce(x, x, 5, koloInt32, op, w.comms[r], nullptr);
    if (res == koloSuccess) res = koloRedOpDestroy(op, w.comms[r]);
    if (res != koloSuccess) errs[r] = result_text("premul-sum all-reduce", res, w.comms[r]);
    else if (x[4] != want) errs[r] = "got " + std::to_string(x[4]) + ", want " + std::to_string(want);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
}

TEST(PreMulSumOps, ValuesAreDynamicAndBelongToTheirCommunicator) {
  ThreadWorld a(1), b(1);
  ASSERT_TRUE(a.ok() && b.ok()) << a.init_error << b.init_error;
  float s = 2.0f, v[4] = {1, 2, 3, 4};
  koloRedOp_t x, y, z;
  ASSERT_EQ(koloRedOpCreatePreMulSum(&x, &s, koloFloat32, koloScalarHostImmediate, a.comms[0]), koloSuccess);
  ASSERT_EQ(koloRedOpCreatePreMulSum(&y, &s, koloFloat32, koloScalarHostImmediate, a.comms[0]), koloSuccess);
  ASSERT_EQ(koloRedOpCreatePreMulSum(&z, &s, koloFloat32, koloScalarHostImmediate, b.comms[0]), koloSuccess);
  EXPECT_GE((int)x, (int)koloNumOps);
  EXPECT_NE(x, y);
  EXPECT_NE(x, z);
  EXPECT_EQ(koloAllReduce(v, v, 4, koloFloat32, x, b.comms[0], nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(b.comms[0]), "another communicator");
  EXPECT_EQ(koloRedOpDestroy(x, b.comms[0]), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(b.comms[0]), "another communicator");
  EXPECT_EQ(koloAllReduce(v, v, 4, koloFloat32, z, b.comms[0], nullptr), koloSuccess);
  EXPECT_EQ(v[3], 8.0f);  // one rank: 4 * 2
  for (koloRedOp_t op : {x, y}) EXPECT_EQ(koloRedOpDestroy(op, a.comms[0]), koloSuccess);
  EXPECT_EQ(koloRedOpDestroy(z, b.comms[0]), koloSuccess);
  expect_usable(a);
}

TEST(PreMulSumOps, DestroyedWrongTypeBuiltInAndGarbageRefused) {
  ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs(2);
  w.pool.run([&](int r) {
    koloComm_t c = w.comms[r];
    float s = 0.5f, v[8] = {0};
    double d[8] = {0};
    koloRedOp_t op, op2;
    auto expect_refused = [&](koloResult_t res, const char *what, const char *must_name) {
      std::string last = koloGetLastError(c);
      if (res != koloInvalidArgument) errs[r] += std::string(what) + ": returned " + koloGetErrorString(res) + "; ";
      else if (last.find(must_name) == std::string::npos) errs[r] += std::string(what) + ": said \"" + last + "\"; ";
    };
    if (koloRedOpCreatePreMulSum(&op, &s, koloFloat32, koloScalarHostImmediate, c) != koloSuccess) return;
    expect_refused(koloAllReduce(d, d, 8, koloFloat64, op, c, nullptr), "other datatype", "made for float32");
    expect_refused(koloReduce(d, d, 8, koloFloat64, op, 0, c, nullptr), "other datatype (reduce)", "float64");
    koloRedOpDestroy(op, c);
    expect_refused(koloAllReduce(v, v, 8, koloFloat32, op, c, nullptr), "destroyed", "destroyed");
    expect_refused(koloReduceScatter(v, v, 4, koloFloat32, op, c, nullptr), "destroyed (reduce-scatter)", "destroyed");
    expect_refused(koloRedOpDestroy(op, c), "destroyed twice", "destroyed");
    // the slot is reused: the old value stays refused, the new one works
    if (koloRedOpCreatePreMulSum(&op2, &s, koloFloat32, koloScalarHostImmediate, c) != koloSuccess) return;
    if (op2 == op) errs[r] += "a destroyed op's value came back; ";
    expect_refused(koloAllReduce(v, v, 8, koloFloat32, op, c, nullptr), "destroyed, slot reused", "destroyed");
    if (koloRedOpDestroy(op2, c) != koloSuccess) errs[r] += "destroy of the new op failed; ";
    expect_refused(koloRedOpDestroy(koloSum, c), "built-in", "built-in");
    expect_refused(koloRedOpDestroy(koloAvg, c), "built-in", "built-in");
    expect_refused(koloAllReduce(v, v, 8, koloFloat32, (koloRedOp_t)-3, c, nullptr), "negative op", "not a koloRedOp_t");
    expect_refused(koloAllReduce(v, v, 8, koloFloat32, koloMaxRedOp, c, nullptr), "koloMaxRedOp", "not a koloRedOp_t");
  });
  for (int r = 0; r < 2; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
  expect_usable(w);
}

TEST(PreMulSumOps, BadArgumentsNamed) {
  ThreadWorld w(1);
  ASSERT_TRUE(w.ok()) << w.init_error;
  koloComm_t c = w.comms[0];
  float s = 1;
  koloRedOp_t op = koloNumOps;
  EXPECT_EQ(koloRedOpCreatePreMulSum(&op, &s, koloFloat32, koloScalarHostImmediate, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm is NULL");
  EXPECT_EQ(koloRedOpDestroy(op, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm is NULL");
  // each call's sentence is checked right after it, while it is the last error
  auto expect_named = [&](koloResult_t res, const char *must_name) {
    EXPECT_EQ(res, koloInvalidArgument) << must_name;
    EXPECT_CONTAINS(koloGetLastError(c), must_name);
  };
  expect_named(koloRedOpCreatePreMulSum(nullptr, &s, koloFloat32, koloScalarHostImmediate, c), "op is NULL");
  expect_named(koloRedOpCreatePreMulSum(&op, nullptr, koloFloat32, koloScalarDevice, c), "scalar is NULL");
  expect_named(koloRedOpCreatePreMulSum(&op, &s, (koloDataType_t)12, koloScalarHostImmediate, c), "datatype 12");
  expect_named(koloRedOpCreatePreMulSum(&op, &s, (koloDataType_t)-1, koloScalarHostImmediate, c), "datatype -1");
  expect_named(koloRedOpCreatePreMulSum(&op, &s, koloFloat32, (koloScalarResidence_t)2, c), "residence 2");
  expect_named(koloRedOpDestroy((koloRedOp_t)(koloNumOps + 5), c), "not made on this communicator");
  expect_usable(w);
}

// koloScalarHostImmediate: read when the op is made.  koloScalarDevice (a
// host pointer here): read when the call runs, which for a call in a group
// is at koloGroupEnd; both ops are destroyed before that, as NCCL allows.
TEST(PreMulSumOps, ScalarReadWhenMadeOrWhenTheCallRuns) {
  const int n = 3;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  int64_t want_imm = 0, want_dev = 0;
  for (int r = 0; r < n; r++) {
    want_imm += (int64_t)(10 + r) * (r + 2);
    want_dev += (int64_t)(10 + r) * (r + 5);
  }
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    koloComm_t c = w.comms[r];
    int64_t s_imm = r + 2, s_dev = -1, x[3] = {10 + r, 10 + r, 10 + r}, y[3], z[3];
    koloRedOp_t imm, dev;
    if (koloRedOpCreatePreMulSum(&imm, &s_imm, koloInt64, koloScalarHostImmediate, c) != koloSuccess ||
        koloRedOpCreatePreMulSum(&dev, &s_dev, koloInt64, koloScalarDevice, c) != koloSuccess) {
      errs[r] = koloGetLastError(c);
      return;
    }
    s_imm = 1000;  // too late: read at creation
    koloGroupStart();
    koloResult_t a = koloAllReduce(x, y, 3, koloInt64, imm, c, nullptr);
    koloResult_t b = koloAllReduce(x, z, 3, koloInt64, dev, c, nullptr);
    koloResult_t d1 = koloRedOpDestroy(imm, c), d2 = koloRedOpDestroy(dev, c);
    s_dev = r + 5;  // in time: read when the group runs
    koloResult_t e = koloGroupEnd();
    if (a || b || d1 || d2 || e) errs[r] = std::string("a call failed: ") + koloGetLastError(c);
    else if (y[2] != want_imm) errs[r] = "immediate scalar: got " + std::to_string(y[2]);
    else if (z[2] != want_dev) errs[r] = "scalar read at run time: got " + std::to_string(z[2]);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// Non-blocking communicators: every call returns koloInProgress, its op is
// destroyed at once, and the work, run later on the progress thread, still
// reduces with it.
TEST(PreMulSumOps, DestroyedWhileTheCallsAreInFlight) {
  const int n = 3, calls = 12;
  const size_t count = 100003;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    koloComm_t c = w.comms[r];
    std::vector<std::vector<double>> out((size_t)calls, std::vector<double>(count, -1.0));
    std::vector<double> in(count);
    for (size_t i = 0; i < count; i++) in[i] = (double)(i % 1000) + r;
    for (int k = 0; k < calls; k++) {
      double s = 0.25 * (k + 1) * (r + 1);  // exact products and sums
      koloRedOp_t op;
      if (koloRedOpCreatePreMulSum(&op, &s, koloFloat64, koloScalarHostImmediate, c) != koloSuccess ||
          koloAllReduce(in.data(), out[k].data(), count, koloFloat64, op, c, nullptr) != koloInProgress ||
          koloRedOpDestroy(op, c) != koloSuccess) {
        errs[r] = std::string("call ") + std::to_string(k) + ": " + koloGetLastError(c);
        return;
      }
    }
    koloResult_t async = koloInProgress;
    while (async == koloInProgress)
      if (koloCommGetAsyncError(c, &async) != koloSuccess) break;
    if (async != koloSuccess) {
      errs[r] = result_text("koloCommGetAsyncError", async, c);
      return;
    }
    for (int k = 0; k < calls && errs[r].empty(); k++)
      for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int q = 0; q < n; q++) want += ((double)(i % 1000) + q) * 0.25 * (k + 1) * (q + 1);
        if (out[k][i] == want) continue;
        errs[r] = "call " + std::to_string(k) + " element " + std::to_string(i) + ": got " +
                  std::to_string(out[k][i]) + ", want " + std::to_string(want);
        break;
      }
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// NCCL's float8 average is a premul-sum by 1/nranks rounded to the type,
// not a sum divided: 3 ranks of e4m3 1.75 give 3 * rnd(1.75 * 0.34375) =
// 3 * 0.625 = 1.875, where the sum divided by 3 would give rnd(5.0 / 3) =
// 1.625 (the sum 5.25 rounds to 5.0 first).
TEST(PreMulSumOps, Float8AverageIsNcclsPremulSum) {
  const int n = 3;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    uint8_t x[5] = {0x3e, 0x3e, 0x3e, 0x3e, 0x3e}, y[5] = {0};  // 1.75
    koloResult_t res = koloAllReduce(x, y, 5, koloFloat8e4m3, koloAvg, w.comms[r], nullptr);
    if (res != koloSuccess) errs[r] = result_text("koloAllReduce", res, w.comms[r]);
    for (uint8_t v : y)
      if (errs[r].empty() && v != 0x3f) errs[r] = "got pattern " + std::to_string(v) + ", want 63 (0x3f, 1.875)";
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
}

}  // namespace
