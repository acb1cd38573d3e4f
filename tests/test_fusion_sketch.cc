// test_fusion_sketch.cc - kolo_fusion.h's usage sketch, as its header shows
// it: TensorPtr fetched once after Commit, before the step loop, and the
// gradients written through it every step.  Backward marks the tensors in
// an order other than the declared one (as a real model's backward often
// does), the case in which the buckets used to be rebuilt after the first
// step by default, freeing the buckets that pointer points into: later
// steps wrote freed memory and reduced stale values.  Ranks as threads.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kolo_fusion.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

// A hang becomes an error after 30 s instead of ctest's timeout.
const bool kTimeoutSet = (default_test_timeout(30000), true);

constexpr int kSteps = 4;
constexpr int kTensors = 3;
const size_t kCounts[kTensors] = {300, 5000, 17};

#define SK_CHECK(call)                                                    \
  do {                                                                    \
    if ((call) != koloSuccess) return std::string(#call) + ": " + koloFusionGetLastError(f); \
  } while (0)

struct SketchOut {
  koloFusionStats_t stats{};
  int version_before = -1, version_after = -1;
};

// Rank r's gradient t in step s holds r + 1 + s + t; the average over
// nranks ranks is (nranks + 1) / 2 + s + t, exact in float32.
std::string sketch_rank(koloComm_t comm, int rank, int nranks, const koloFusionConfig_t &cfg, SketchOut *out) {
  koloFusion_t f = nullptr;
  if (koloFusionCreate(&f, comm, &cfg) != koloSuccess) return koloFusionGetLastError(nullptr);
  int id[kTensors];
  float *grad[kTensors];
  std::string err;
  auto run = [&]() -> std::string {
    for (int t = 0; t < kTensors; t++)
      SK_CHECK(koloFusionAddTensor(f, kCounts[t], koloFloat32, KOLO_FUSION_ALLOCATE, &id[t]));
    SK_CHECK(koloFusionCommit(f));
    for (int t = 0; t < kTensors; t++) SK_CHECK(koloFusionTensorPtr(f, id[t], (void **)&grad[t]));  // before the loop
    SK_CHECK(koloFusionLayoutVersion(f, &out->version_before));
    for (int s = 0; s < kSteps; s++) {
      SK_CHECK(koloFusionStepBegin(f));
      for (int t = kTensors - 1; t >= 0; t--) {  // not the declared order
        for (size_t i = 0; i < kCounts[t]; i++) grad[t][i] = (float)(rank + 1 + s + t);
        SK_CHECK(koloFusionMarkReady(f, id[t], nullptr, nullptr));
      }
      SK_CHECK(koloFusionStepEnd(f, nullptr));
      SK_CHECK(koloFusionWait(f));
      for (int t = 0; t < kTensors; t++) {
        float expect = (float)(nranks + 1) / 2.0f + (float)(s + t);
        for (size_t i = 0; i < kCounts[t]; i++)
          if (grad[t][i] != expect)
            return "rank " + std::to_string(rank) + " step " + std::to_string(s) + " tensor " + std::to_string(t) +
                   " element " + std::to_string(i) + ": " + std::to_string(grad[t][i]) + ", expected " +
                   std::to_string(expect);
      }
    }
    SK_CHECK(koloFusionLayoutVersion(f, &out->version_after));
    SK_CHECK(koloFusionGetStats(f, &out->stats));
    return "";
  };
  err = run();
  koloFusionDestroy(f);
  return err;
}

std::vector<std::string> run_sketch(ThreadWorld &w, const koloFusionConfig_t &cfg, std::vector<SketchOut> &outs) {
  int n = w.nranks();
  std::vector<std::string> errs(n);
  outs.assign(n, SketchOut{});
  std::vector<std::thread> th;
  for (int r = 0; r < n; r++)
    th.emplace_back([&, r] { errs[r] = sketch_rank(w.comms[r], r, n, cfg, &outs[r]); });
  for (auto &t : th) t.join();
  return errs;
}

}  // namespace

// The header's sketch with the default config: pointers fetched before the
// loop stay the tensors' for the life of the fusion.
TEST(FusionSketch, PointerFetchedBeforeTheLoopStaysValid) {
  ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  koloFusionConfig_t cfg = KOLO_FUSION_CONFIG_INITIALIZER;
  cfg.bucketBytes = 4096;
  cfg.firstBucketBytes = 1024;
  std::vector<SketchOut> outs;
  std::vector<std::string> errs = run_sketch(w, cfg, outs);
  for (int r = 0; r < w.nranks(); r++) {
    EXPECT_EQ(errs[r], "") << "rank " << r;
    EXPECT_EQ(outs[r].stats.steps, (uint64_t)kSteps);
    EXPECT_EQ(outs[r].stats.rebuilds, 0u) << "a default rebuild moves the tensors the sketch points at";
    EXPECT_EQ(outs[r].version_after, outs[r].version_before);
  }
}
