// test_fusion.cc - the fusion layer (kolo_fusion.h) end to end on host
// communicators: ranks as threads (koloCommInitAll; suite FusionThreads,
// which CI also runs under TSan) and as processes (FusionProcs: 1, 2 and 3
// ranks).  Every result is compared with an independent reference of an
// unfused all-reduce of each tensor (util/coll_ref.h: exact for integers,
// double with a tolerance for floats).
//
// A scenario: tensors of every dtype with random sizes from 1 element to
// more than a bucket (4 KiB buckets, 1 KiB first bucket, 8 KiB fusion
// buffer), ALLOCATE and EXTERNAL mixed, EXTERNAL ones 0..7 bytes off
// alignment between guard bytes; several steps; in each step every output
// is poisoned, then each rank writes and marks its tensors in its own
// random order (different on every rank), with small pauses so that rounds
// see partial readiness.  Also: sum and avg, preScale, a non-blocking
// communicator, copy counting (koloFusionGetStats), the rebuild after the
// first step, the cycle flush of a partial bucket, the Chrome timeline
// (parsed), mismatches that fail every rank with both views, bad arguments;
// and, where a GPU exists, one CUDA scenario (skipped visibly otherwise).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kolo_fusion.h"
#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/proc_util.h"
#include "util/thread_world.h"
#include "util/time_scale.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace kt;

namespace {

// A hang becomes an error after 60 s instead of ctest's timeout.
const bool kTimeoutSet = (default_test_timeout(60000), true);

constexpr size_t kBucket = 4096, kFirstBucket = 1024, kFusionBuf = 8192;

struct Spec {
  size_t count;
  koloDataType_t type;
  koloFusionStorage_t storage;
  int misalign;  // EXTERNAL: bytes past a 64-byte boundary
};

struct Scenario {
  std::vector<Spec> specs;
  koloFusionConfig_t cfg = KOLO_FUSION_CONFIG_INITIALIZER;
  int steps = 3;
  uint64_t seed = 1;
  int pause_every = 3;       // a short pause after every k marks (0: none)
  std::vector<int> order;    // non-empty: every rank marks in this order
};

struct RankOut {
  std::string err;
  koloFusionStats_t stats{};
  int version = 0;
  bool ptr_moved = false;
  std::vector<int> bucket_of;  // koloFusionTensorBucket of every tensor after the last step
};

koloFusionConfig_t small_config(koloRedOp_t op) {
  koloFusionConfig_t c = KOLO_FUSION_CONFIG_INITIALIZER;
  c.bucketBytes = kBucket;
  c.firstBucketBytes = kFirstBucket;
  c.fusionBytes = kFusionBuf;
  c.cycleTimeUs = 300;
  c.op = op;
  c.rebuildBuckets = 1;  // the scenarios fetch TensorPtr every step
  return c;
}

// n tensors cycling through `types`: sizes from 1 element to 1.5 buckets.
std::vector<Spec> random_specs(uint64_t seed, int n, const std::vector<koloDataType_t> &types, int ext_percent) {
  std::mt19937_64 rng(seed);
  std::vector<Spec> s;
  for (int i = 0; i < n; i++) {
    koloDataType_t t = types[(size_t)i % types.size()];
    size_t max = kBucket * 3 / 2 / type_size(t);
    size_t count = i % 5 == 0 ? 1 : 1 + rng() % max;
    auto st = (int)(rng() % 100) < ext_percent ? KOLO_FUSION_EXTERNAL : KOLO_FUSION_ALLOCATE;
    s.push_back({count, t, st, (int)(rng() % 8)});
  }
  return s;
}

std::vector<koloDataType_t> all_types() { return std::vector<koloDataType_t>(std::begin(kAllTypes), std::end(kAllTypes)); }

uint64_t tensor_seed(const Scenario &sc, int step, int t) {
  return mix64(sc.seed * 0x9e3779b97f4a7c15ull + (uint64_t)step * 1000003u + (uint64_t)t);
}

#define FCHECK(call)                                                                              \
  do {                                                                                            \
    koloResult_t r_ = (call);                                                                     \
    if (r_ != koloSuccess) {                                                                      \
      out.err = std::string(#call) + ": " + koloGetErrorString(r_) + ": " + koloFusionGetLastError(f); \
      return out;                                                                                 \
    }                                                                                             \
  } while (0)

// Checks tensor t of `step` at p against the reference.
std::string check_tensor(const Scenario &sc, int nranks, int step, int t, const void *p) {
  const Spec &s = sc.specs[(size_t)t];
  koloRedOp_t op = (koloRedOp_t)sc.cfg.op;
  Expected e;
  expect_init(&e, s.type, reduction_is_exact(s.type, op), s.count);
  fill_reduction(&e, tensor_seed(sc, step, t), nranks, 0, s.count, op);
  double scale = sc.cfg.preScale != 0.0 ? sc.cfg.preScale : 1.0;
  if (scale != 1.0) {  // a power of two: exact in every rounding, tolerances scale too
    for (size_t i = 0; i < s.count; i++) {
      e.ref[i] *= scale;
      e.tol[i] = (float)(e.tol[i] * scale);
    }
  }
  std::string d = compare(p, e, 0, s.count);
  if (d.empty()) return d;
  return "step " + std::to_string(step) + ", tensor " + std::to_string(t) + " (" + type_name(s.type) + " x " +
         std::to_string(s.count) + (s.storage == KOLO_FUSION_EXTERNAL ? ", external" : ", allocate") + "): " + d;
}

RankOut run_rank(koloComm_t comm, int rank, int nranks, const Scenario &sc) {
  RankOut out;
  koloFusion_t f = nullptr;
  FCHECK(koloFusionCreate(&f, comm, &sc.cfg));
  struct Guard {
    koloFusion_t &f;
    ~Guard() {
      if (f) koloFusionDestroy(f);
    }
  } guard{f};
  const int n = (int)sc.specs.size();
  for (int t = 0; t < n; t++) {
    int id = -1;
    FCHECK(koloFusionAddTensor(f, sc.specs[(size_t)t].count, sc.specs[(size_t)t].type, sc.specs[(size_t)t].storage, &id));
    if (id != t) {
      out.err = "tensor ids are not 0, 1, ...";
      return out;
    }
  }
  FCHECK(koloFusionCommit(f));
  std::vector<GuardedBuf> ext((size_t)n);
  for (int t = 0; t < n; t++) {
    const Spec &s = sc.specs[(size_t)t];
    if (s.storage == KOLO_FUSION_EXTERNAL) ext[(size_t)t].alloc(s.count * type_size(s.type), s.misalign, 0x5b);
  }
  std::vector<void *> first_ptrs((size_t)n);
  std::mt19937_64 rng(mix64(sc.seed ^ (uint64_t)(rank + 1) * 0x51ed27ull));
  for (int step = 1; step <= sc.steps; step++) {
    FCHECK(koloFusionStepBegin(f));
    std::vector<void *> ptr((size_t)n);
    for (int t = 0; t < n; t++) {
      const Spec &s = sc.specs[(size_t)t];
      if (s.storage == KOLO_FUSION_EXTERNAL) ptr[(size_t)t] = ext[(size_t)t].data();
      else FCHECK(koloFusionTensorPtr(f, t, &ptr[(size_t)t]));
      if (step == 1) first_ptrs[(size_t)t] = ptr[(size_t)t];
      std::memset(ptr[(size_t)t], 0xa7, s.count * type_size(s.type));  // poison
    }
    std::vector<int> order = sc.order;
    if (order.empty()) {
      order.resize((size_t)n);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
    }
    for (int k = 0; k < n; k++) {
      int t = order[(size_t)k];
      const Spec &s = sc.specs[(size_t)t];
      fill_input(ptr[(size_t)t], s.count, tensor_seed(sc, step, t), rank, 0, s.type, koloSum);  // "backward"
      FCHECK(koloFusionMarkReady(f, t, s.storage == KOLO_FUSION_EXTERNAL ? ptr[(size_t)t] : nullptr, nullptr));
      if (sc.pause_every > 0 && k % sc.pause_every == sc.pause_every - 1)
        std::this_thread::sleep_for(std::chrono::microseconds(100 + rng() % 400));
    }
    koloEvent_t done = reinterpret_cast<koloEvent_t>(1);
    FCHECK(koloFusionStepEnd(f, &done));
    if (done != nullptr) {
      out.err = "StepEnd on a host communicator did not set *done to NULL";
      return out;
    }
    FCHECK(koloFusionWait(f));
    for (int t = 0; t < n && out.err.empty(); t++) {
      const Spec &s = sc.specs[(size_t)t];
      void *p = ptr[(size_t)t];
      if (s.storage == KOLO_FUSION_ALLOCATE) FCHECK(koloFusionTensorPtr(f, t, &p));  // after a rebuild: moved
      out.ptr_moved |= p != first_ptrs[(size_t)t];
      out.err = check_tensor(sc, nranks, step, t, p);
      if (out.err.empty() && s.storage == KOLO_FUSION_EXTERNAL)
        out.err = ext[(size_t)t].check_guards(("tensor " + std::to_string(t)).c_str());
    }
    if (!out.err.empty()) {
      out.err = "rank " + std::to_string(rank) + ": " + out.err;
      return out;
    }
  }
  FCHECK(koloFusionGetStats(f, &out.stats));
  FCHECK(koloFusionLayoutVersion(f, &out.version));
  out.bucket_of.resize((size_t)n);
  for (int t = 0; t < n; t++) FCHECK(koloFusionTensorBucket(f, t, &out.bucket_of[(size_t)t]));
  koloResult_t r = koloFusionDestroy(f);
  f = nullptr;
  if (r != koloSuccess) out.err = std::string("koloFusionDestroy: ") + koloGetErrorString(r);
  return out;
}

std::vector<RankOut> run_threads(int n, const Scenario &sc, koloConfig_t *config = nullptr) {
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, config);
  std::vector<RankOut> outs((size_t)n);
  if (!w.ok()) {
    outs[0].err = "init: " + w.init_error;
    return outs;
  }
  w.pool.run([&](int r) { outs[(size_t)r] = run_rank(w.comms[(size_t)r], r, n, sc); });
  if (std::getenv("KOLO_TEST_VERBOSE"))
    for (int r = 0; r < n; r++) {
      const koloFusionStats_t &s = outs[(size_t)r].stats;
      std::fprintf(stderr, "rank %d: steps %llu rounds %llu all-reduces %llu packs %llu (%llu B) unpacks %llu (%llu B) rebuilds %llu\n",
                   r, (unsigned long long)s.steps, (unsigned long long)s.rounds, (unsigned long long)s.allReduces,
                   (unsigned long long)s.packCalls, (unsigned long long)s.packedBytes, (unsigned long long)s.unpackCalls,
                   (unsigned long long)s.unpackedBytes, (unsigned long long)s.rebuilds);
    }
  return outs;
}

std::string failures(const std::vector<RankOut> &outs) {
  std::string s;
  for (const RankOut &o : outs)
    if (!o.err.empty()) s += "\n  " + o.err;
  return s;
}

Scenario mixed_scenario(uint64_t seed, koloRedOp_t op, int ntensors = 30) {
  Scenario sc;
  sc.seed = seed;
  sc.cfg = small_config(op);
  sc.specs = random_specs(seed, ntensors, all_types(), 40);
  return sc;
}

// ---- ranks as threads ----------------------------------------------------------

TEST(FusionThreads, MixedEveryDtypeSum) {
  for (int n : {1, 2, 3}) {
    Scenario sc = mixed_scenario(base_seed() + 11 + (uint64_t)n, koloSum);
    auto outs = run_threads(n, sc);
    EXPECT_EQ(failures(outs), "") << n << " ranks";
  }
}

TEST(FusionThreads, MixedEveryDtypeAvg) {
  Scenario sc = mixed_scenario(base_seed() + 21, koloAvg);
  auto outs = run_threads(3, sc);
  EXPECT_EQ(failures(outs), "");
}

TEST(FusionThreads, PreScaleOnFloats) {
  Scenario sc;
  sc.seed = base_seed() + 31;
  sc.cfg = small_config(koloAvg);
  sc.cfg.preScale = 0.5;
  sc.specs = random_specs(sc.seed, 24, {koloFloat16, koloBfloat16, koloFloat32, koloFloat64}, 50);
  auto outs = run_threads(2, sc);
  EXPECT_EQ(failures(outs), "");
}

TEST(FusionThreads, NonBlockingCommunicator) {
  koloConfig_t cc = KOLO_CONFIG_INITIALIZER;
  cc.blocking = 0;
  Scenario sc = mixed_scenario(base_seed() + 41, koloSum, 20);
  auto outs = run_threads(2, sc, &cc);
  EXPECT_EQ(failures(outs), "");
}

TEST(FusionThreads, AllocatorPathCopiesNothing) {
  Scenario sc;
  sc.seed = base_seed() + 51;
  sc.cfg = small_config(koloSum);
  sc.specs = random_specs(sc.seed, 24, all_types(), 0);
  auto outs = run_threads(2, sc);
  ASSERT_EQ(failures(outs), "");
  for (const RankOut &o : outs) {
    EXPECT_EQ(o.stats.packedBytes, 0u);
    EXPECT_EQ(o.stats.unpackedBytes, 0u);
    EXPECT_EQ(o.stats.packCalls, 0u);
    EXPECT_EQ(o.stats.unpackCalls, 0u);
    EXPECT_EQ(o.stats.steps, (uint64_t)sc.steps);
    EXPECT_GE(o.stats.allReduces, (uint64_t)sc.steps);
    EXPECT_EQ(o.stats.allReduces, outs[0].stats.allReduces) << "every rank launches the same all-reduces";
  }
}

TEST(FusionThreads, FusionBufferPacksOncePerLaunch) {
  Scenario sc;
  sc.seed = base_seed() + 61;
  sc.cfg = small_config(koloSum);
  sc.specs = random_specs(sc.seed, 24, all_types(), 100);
  for (Spec &s : sc.specs) s.count = std::min(s.count, kFusionBuf / type_size(s.type));  // all fit
  uint64_t bytes = 0;
  for (const Spec &s : sc.specs) bytes += s.count * type_size(s.type);
  auto outs = run_threads(2, sc);
  ASSERT_EQ(failures(outs), "");
  for (const RankOut &o : outs) {
    EXPECT_EQ(o.stats.packCalls, o.stats.allReduces) << "one pack per fused all-reduce";
    EXPECT_EQ(o.stats.unpackCalls, o.stats.allReduces) << "one unpack per fused all-reduce";
    EXPECT_EQ(o.stats.packedBytes, bytes * (uint64_t)sc.steps);
    EXPECT_EQ(o.stats.unpackedBytes, bytes * (uint64_t)sc.steps);
    EXPECT_LT(o.stats.allReduces, (uint64_t)(sc.specs.size() * (size_t)sc.steps)) << "nothing was fused";
  }
}

TEST(FusionThreads, RebuildFromRankZerosOrder) {
  Scenario sc;
  sc.seed = base_seed() + 71;
  sc.cfg = small_config(koloSum);
  sc.specs = random_specs(sc.seed, 16, {koloFloat32, koloInt32}, 0);
  sc.order.resize(sc.specs.size());
  std::iota(sc.order.rbegin(), sc.order.rend(), 0);  // backward order: the reverse of the declared one
  sc.steps = 4;
  auto outs = run_threads(2, sc);
  ASSERT_EQ(failures(outs), "");
  for (const RankOut &o : outs) {
    EXPECT_EQ(o.stats.rebuilds, 1u);
    EXPECT_EQ(o.version, 1);
    EXPECT_TRUE(o.ptr_moved) << "TensorPtr must give the new views";
  }
  sc.cfg.rebuildBuckets = 0;
  outs = run_threads(2, sc);
  ASSERT_EQ(failures(outs), "");
  for (const RankOut &o : outs) EXPECT_EQ(o.stats.rebuilds, 0u);
}

TEST(FusionThreads, NoRebuildWhenReadyInDeclaredOrder) {
  Scenario sc;
  sc.seed = base_seed() + 81;
  sc.cfg = small_config(koloSum);
  sc.specs = random_specs(sc.seed, 12, {koloFloat32}, 0);
  sc.order.resize(sc.specs.size());
  std::iota(sc.order.begin(), sc.order.end(), 0);
  auto outs = run_threads(2, sc);
  ASSERT_EQ(failures(outs), "");
  for (const RankOut &o : outs) EXPECT_EQ(o.version, 0);
}

// minBuckets (kolo_fusion.h, "Bucket size"): the buckets after the first
// are capped at a minBuckets-th of the ALLOCATE bytes (each tensor rounded
// up to 16 bytes), never below firstBucketBytes nor above bucketBytes.
// Checked here from the specs and koloFusionTensorBucket alone, after the
// rebuild too (the tensors become ready in reverse, so buckets are rebuilt).
struct Spread {
  int nbuckets = 0;
  size_t largest = 0;  // bytes of the largest bucket of several tensors after the first
};

Spread spread(const Scenario &sc, const RankOut &o) {
  Spread s;
  std::vector<size_t> bytes;
  std::vector<int> members;
  for (size_t t = 0; t < sc.specs.size(); t++) {
    int b = o.bucket_of[t];
    if (b < 0) continue;
    if ((size_t)b >= bytes.size()) bytes.resize((size_t)b + 1), members.resize((size_t)b + 1);
    bytes[(size_t)b] += sc.specs[t].count * type_size(sc.specs[t].type);
    members[(size_t)b]++;
  }
  s.nbuckets = (int)bytes.size();
  for (size_t b = 1; b < bytes.size(); b++)
    if (members[b] > 1) s.largest = std::max(s.largest, bytes[b]);
  return s;
}

TEST(FusionThreads, MinBucketsCapsEveryBucketAtAShareOfTheGradients) {
  Scenario sc;
  sc.seed = base_seed() + 91;
  sc.cfg = small_config(koloSum);
  sc.cfg.bucketBytes = 1 << 20;  // the share decides, not bucketBytes
  // every dtype, and many float32 tensors: their bucket is split by the share
  sc.specs = random_specs(sc.seed, 30, all_types(), 0);
  for (const Spec &s : random_specs(sc.seed + 1, 60, {koloFloat32}, 0)) sc.specs.push_back(s);
  for (Spec &s : sc.specs) s.count = std::min(s.count, (size_t)512 / type_size(s.type));  // <= 512 B each
  sc.order.resize(sc.specs.size());
  std::iota(sc.order.rbegin(), sc.order.rend(), 0);
  size_t total = 0;
  for (const Spec &s : sc.specs) total += (s.count * type_size(s.type) + 15) / 16 * 16;
  for (int m : {KOLO_CONFIG_UNDEF /* 10 */, 7, 1}) {
    sc.cfg.minBuckets = m;
    auto outs = run_threads(2, sc);
    ASSERT_EQ(failures(outs), "") << "minBuckets " << m;
    int mb = m == KOLO_CONFIG_UNDEF ? 10 : m;
    size_t share = std::max((size_t)kFirstBucket, (total + (size_t)mb - 1) / (size_t)mb);
    for (const RankOut &o : outs) {
      EXPECT_EQ(o.stats.rebuilds, 1u);
      EXPECT_EQ(o.bucket_of, outs[0].bucket_of) << "every rank has the same layout";
      Spread s = spread(sc, o);
      if (mb > 1) {
        EXPECT_LE(s.largest, share) << "minBuckets " << mb << ", " << total << " bytes";
        EXPECT_GT(s.nbuckets, 1 + koloNumTypes) << "the float32 tensors were not split";
      } else {  // DDP's layout: the first bucket, then one per dtype (1 MiB holds each)
        EXPECT_LE(s.nbuckets, 1 + koloNumTypes);
        EXPECT_GT(s.largest, (total + 9) / 10) << "the test's float32 bucket is too small to show the share";
      }
    }
  }
}

// Every rank of w makes a fusion (small_config, then `config`), declares its
// tensors (`declare`) and commits: that must fail with koloInvalidUsage on
// every rank, and each rank's last error must contain every one of `parts`.
void expect_commit_fails_everywhere(ThreadWorld &w, const std::function<void(int, koloFusionConfig_t *)> &config,
                                    const std::function<void(int, koloFusion_t)> &declare,
                                    const std::vector<std::string> &parts) {
  const size_t n = w.comms.size();
  std::vector<koloResult_t> res(n);
  std::vector<std::string> msg(n);
  w.pool.run([&](int r) {
    koloFusion_t f;
    koloFusionConfig_t cfg = small_config(koloSum);
    config(r, &cfg);
    if (koloFusionCreate(&f, w.comms[(size_t)r], &cfg) != koloSuccess) {
      msg[(size_t)r] = "create";
      return;
    }
    declare(r, f);
    res[(size_t)r] = koloFusionCommit(f);
    msg[(size_t)r] = koloFusionGetLastError(f);
    koloFusionDestroy(f);
  });
  for (size_t r = 0; r < n; r++) {
    EXPECT_EQ(res[r], koloInvalidUsage) << "rank " << r;
    for (const std::string &part : parts) EXPECT_NE(msg[r].find(part), std::string::npos) << msg[r];
  }
}

void same_config(int, koloFusionConfig_t *) {}

TEST(FusionThreads, DifferentMinBucketsFailCommitEverywhere) {
  ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  expect_commit_fails_everywhere(
      w, [](int r, koloFusionConfig_t *cfg) { cfg->minBuckets = r == 0 ? 4 : 5; },
      [](int, koloFusion_t f) {
        int id;
        koloFusionAddTensor(f, 10, koloFloat32, KOLO_FUSION_ALLOCATE, &id);
      },
      {"minBuckets 5", "minBuckets 4"});
}

// One tensor of a bucket comes much later: the others are flushed by the
// cycle before it is even marked, and the step still completes.
TEST(FusionThreads, CycleFlushesAPartialBucket) {
  const int n = 2, nt = 4;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs(n);
  w.pool.run([&](int r) {
    koloFusionConfig_t cfg = small_config(koloSum);
    cfg.bucketBytes = cfg.firstBucketBytes = 1 << 20;  // one bucket
    cfg.cycleTimeUs = 1000;
    cfg.rebuildBuckets = 0;
    koloFusion_t f;
    std::string &err = errs[(size_t)r];
    if (koloFusionCreate(&f, w.comms[(size_t)r], &cfg) != koloSuccess) {
      err = "create";
      return;
    }
    int id;
    for (int t = 0; t < nt; t++) koloFusionAddTensor(f, 100, koloInt32, KOLO_FUSION_ALLOCATE, &id);
    int nb = 0;
    if (koloFusionCommit(f) != koloSuccess || koloFusionBucketCount(f, &nb) != koloSuccess || nb != 1) {
      err = std::string("commit: ") + koloFusionGetLastError(f);
      koloFusionDestroy(f);
      return;
    }
    koloFusionStepBegin(f);
    // let the fusion's thread go to sleep first: the first mark must wake it
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<int32_t *> p(nt);
    for (int t = 0; t < nt; t++) {
      koloFusionTensorPtr(f, t, reinterpret_cast<void **>(&p[(size_t)t]));
      for (int i = 0; i < 100; i++) p[(size_t)t][i] = (r + 1) * (t * 1000 + i);
    }
    for (int t = 0; t < nt - 1; t++) koloFusionMarkReady(f, t, nullptr, nullptr);
    koloFusionStats_t st{};
    double t0 = now_ms();
    while (st.allReduces == 0 && now_ms() - t0 < kt_ms(20000)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      koloFusionGetStats(f, &st);
    }
    if (st.allReduces == 0) err = "the partial bucket was not flushed within 20 s";
    koloFusionMarkReady(f, nt - 1, nullptr, nullptr);
    if (koloFusionStepEnd(f, nullptr) != koloSuccess || koloFusionWait(f) != koloSuccess)
      err += std::string(" step: ") + koloFusionGetLastError(f);
    for (int t = 0; t < nt && err.empty(); t++)
      for (int i = 0; i < 100; i++)
        if (p[(size_t)t][i] != 3 * (t * 1000 + i)) {
          err = "tensor " + std::to_string(t) + " element " + std::to_string(i) + " = " + std::to_string(p[(size_t)t][i]);
          break;
        }
    koloFusionGetStats(f, &st);
    if (err.empty() && st.allReduces < 2) err = "expected the flush and a later launch";
    koloFusionDestroy(f);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[(size_t)r], "") << "rank " << r;
}

// A bucket launches at once when its last tensor is marked on every rank,
// not at the next cycle (5 s here): whole, before any cycle could have
// passed.  Both ways a rank can get there: marking it after a round in
// which every rank had part of it (then both ranks' marks trigger rounds),
// and (first_late) rank 0 completing it before that round while rank 1 has
// not (rank 0's next round comes after an eighth of a cycle, rank 1's at
// once when it completes it).  Tensors 0 and 1 are bucket 0, 2 and 3
// bucket 1; the sums are checked exactly.
void prompt_launch(bool first_late) {
  const int n = 2, nt = 4, count = 64;
  const double cycle_s = 5.0;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<std::string> errs(n);
  std::atomic<int> first_round{0};
  w.pool.run([&](int r) {
    koloFusionConfig_t cfg = small_config(koloSum);
    cfg.firstBucketBytes = cfg.bucketBytes = 2 * count * sizeof(int32_t);  // two tensors per bucket
    cfg.cycleTimeUs = (int)(cycle_s * 1e6);
    cfg.rebuildBuckets = 0;
    std::string &err = errs[(size_t)r];
    koloFusion_t f;
    if (koloFusionCreate(&f, w.comms[(size_t)r], &cfg) != koloSuccess) {
      err = std::string("create: ") + koloFusionGetLastError(nullptr);
      return;
    }
    int id, nb = 0;
    for (int t = 0; t < nt; t++) koloFusionAddTensor(f, count, koloInt32, KOLO_FUSION_ALLOCATE, &id);
    if (koloFusionCommit(f) != koloSuccess || koloFusionBucketCount(f, &nb) != koloSuccess || nb != 2) {
      err = std::string("commit (2 buckets): ") + koloFusionGetLastError(f);
      koloFusionDestroy(f);
      return;
    }
    std::vector<int32_t *> p(nt);
    for (int t = 0; t < nt; t++) {
      koloFusionTensorPtr(f, t, reinterpret_cast<void **>(&p[(size_t)t]));
      for (int i = 0; i < count; i++) p[(size_t)t][i] = (r + 1) * (t * 1000 + i);
    }
    koloFusionStepBegin(f);
    koloFusionMarkReady(f, 0, nullptr, nullptr);
    if (first_late && r == 0) koloFusionMarkReady(f, 1, nullptr, nullptr);
    koloFusionStats_t st{};
    double t0 = now_ms();
    while (st.rounds == 0 && now_ms() - t0 < kt_ms(2000)) {  // the first round ran (at the first mark)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      koloFusionGetStats(f, &st);
    }
    first_round++;
    while (first_round.load() < n) std::this_thread::yield();
    t0 = now_ms();
    if (!(first_late && r == 0)) koloFusionMarkReady(f, 1, nullptr, nullptr);
    while (st.allReduces == 0 && now_ms() - t0 < 1000 * cycle_s / 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      koloFusionGetStats(f, &st);
    }
    double waited = now_ms() - t0;
    if (st.allReduces != 1)
      err = "bucket 0 was not launched (whole) within " + std::to_string(waited) + " ms: " +
            std::to_string(st.allReduces) + " all-reduces, " + std::to_string(st.rounds) + " rounds";
    koloFusionMarkReady(f, 2, nullptr, nullptr);
    koloFusionMarkReady(f, 3, nullptr, nullptr);
    if (koloFusionStepEnd(f, nullptr) != koloSuccess || koloFusionWait(f) != koloSuccess)
      err += std::string(" step: ") + koloFusionGetLastError(f);
    for (int t = 0; t < nt && err.empty(); t++)
      for (int i = 0; i < count; i++)
        if (p[(size_t)t][i] != 3 * (t * 1000 + i)) {
          err = "tensor " + std::to_string(t) + " element " + std::to_string(i) + " = " + std::to_string(p[(size_t)t][i]);
          break;
        }
    koloFusionGetStats(f, &st);
    if (err.empty() && st.allReduces != 2) err = "expected two whole buckets, got " + std::to_string(st.allReduces) + " all-reduces";
    koloFusionDestroy(f);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[(size_t)r], "") << "rank " << r;
}

TEST(FusionThreads, CompleteBucketLaunchesBeforeTheCycle) { prompt_launch(false); }
TEST(FusionThreads, CompleteBucketLaunchesBeforeTheCycleWhenOneRankIsLate) { prompt_launch(true); }

// ---- a tiny JSON parser for the timeline -----------------------------------------

struct Json {
  explicit Json(const std::string &text) : s(text) {}
  const std::string &s;
  size_t i = 0;
  std::vector<std::string> names;  // values of "name" keys
  void ws() {
    while (i < s.size() && std::isspace((unsigned char)s[i])) i++;
  }
  bool str(std::string *out) {
    if (i >= s.size() || s[i] != '"') return false;
    for (i++; i < s.size() && s[i] != '"'; i++) {
      if (s[i] == '\\') i++;
      if (out && i < s.size()) out->push_back(s[i]);
    }
    return i++ < s.size();
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    char c = s[i];
    if (c == '{') {
      i++;
      ws();
      if (i < s.size() && s[i] == '}') return ++i, true;
      for (;;) {
        ws();
        std::string key;
        if (!str(&key)) return false;
        ws();
        if (i >= s.size() || s[i++] != ':') return false;
        ws();
        if (key == "name" && i < s.size() && s[i] == '"') {
          std::string v;
          if (!str(&v)) return false;
          names.push_back(v);
        } else if (!value()) {
          return false;
        }
        ws();
        if (i < s.size() && s[i] == ',') {
          i++;
          continue;
        }
        return i < s.size() && s[i++] == '}';
      }
    }
    if (c == '[') {
      i++;
      ws();
      if (i < s.size() && s[i] == ']') return ++i, true;
      for (;;) {
        if (!value()) return false;
        ws();
        if (i < s.size() && s[i] == ',') {
          i++;
          continue;
        }
        return i < s.size() && s[i++] == ']';
      }
    }
    if (c == '"') return str(nullptr);
    size_t j = i;
    while (i < s.size() && (std::isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '+' || s[i] == '.')) i++;
    return i > j;
  }
  bool parse() {
    bool ok = value();
    ws();
    return ok && i == s.size();
  }
};

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(FusionThreads, TimelineIsValidChromeTrace) {
  char dir[] = "/tmp/kolo-fusion-tl-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string pattern = std::string(dir) + "/trace-%r.json";
  Scenario sc = mixed_scenario(base_seed() + 91, koloSum, 12);
  sc.cfg.timeline = pattern.c_str();
  sc.steps = 2;
  auto outs = run_threads(2, sc);
  ASSERT_EQ(failures(outs), "");
  for (int r = 0; r < 2; r++) {
    std::string path = std::string(dir) + "/trace-" + std::to_string(r) + ".json";
    std::string text = read_file(path);
    Json j(text);
    EXPECT_TRUE(j.parse()) << path << " is not valid JSON near byte " << j.i;
    EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
    int ready = 0, launch = 0, done = 0, rounds = 0;
    for (const std::string &n : j.names) {
      ready += n == "ready";
      launch += n == "launch";
      done += n == "done";
      rounds += n == "round";
    }
    EXPECT_EQ(ready, 12 * 2) << path;
    EXPECT_EQ((uint64_t)rounds, outs[(size_t)r].stats.rounds) << path << ": one \"round\" per negotiation round";
    EXPECT_GT(launch, 0) << path;
    EXPECT_EQ(launch, done) << path;
    unlink(path.c_str());
  }
  rmdir(dir);
}

// ---- mismatches ------------------------------------------------------------------

TEST(FusionThreads, DifferentDeclarationsFailCommitEverywhere) {
  ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  expect_commit_fails_everywhere(
      w, same_config,
      [](int r, koloFusion_t f) {
        int id;
        koloFusionAddTensor(f, 10, koloFloat32, KOLO_FUSION_ALLOCATE, &id);
        koloFusionAddTensor(f, 20, r == 1 ? koloFloat16 : koloFloat32, KOLO_FUSION_ALLOCATE, &id);
      },
      {"rank 1 declared tensor 1 as float16", "rank 0 declared it as float32"});
  // a different number of tensors
  expect_commit_fails_everywhere(
      w, same_config,
      [](int r, koloFusion_t f) {
        int id;
        for (int t = 0; t < 3 + r; t++) koloFusionAddTensor(f, 10, koloFloat32, KOLO_FUSION_ALLOCATE, &id);
      },
      {"rank 1 declared 4 tensors but rank 0 declared 3"});
}

// Rank 0 ends its step without marking tensor 2, which rank 1 marks: every
// rank fails with koloInvalidUsage, naming both ranks, at once.  Rank 1 may
// still be marking when the round that sees it runs (then its StepEnd
// fails already): the sentence must name tensor 2 and rank 0's early end,
// never a tensor rank 1 simply had not reached yet (tensor 1, marked on
// rank 0 only at that moment, was once named, wrongly).  Both timings run:
// rank 1 marking at once, and rank 1 pausing 30 ms after its first mark
// (rounds of the 300 us cycle see it half way).
TEST(FusionThreads, TensorMarkedOnOneRankOnlyFailsEveryRank) {
  for (int pause_ms : {0, 30, 0, 30}) {
  SCOPED_TRACE("rank 1 pauses " + std::to_string(pause_ms) + " ms after its first mark");
  const int n = 2;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<koloResult_t> end_res(n), wait_res(n), next_res(n);
  std::vector<std::string> msg(n);
  double t0 = now_ms();
  w.pool.run([&](int r) {
    koloFusion_t f;
    koloFusionConfig_t cfg = small_config(koloSum);
    koloFusionCreate(&f, w.comms[(size_t)r], &cfg);
    int id;
    for (int t = 0; t < 4; t++) koloFusionAddTensor(f, 10, koloFloat32, KOLO_FUSION_ALLOCATE, &id);
    koloFusionCommit(f);
    koloFusionStepBegin(f);
    for (int t = 0; t < 4; t++) {
      if (r == 1 || t != 2) koloFusionMarkReady(f, t, nullptr, nullptr);
      if (r == 1 && t == 0 && pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    }
    end_res[(size_t)r] = koloFusionStepEnd(f, nullptr);
    wait_res[(size_t)r] = koloFusionWait(f);
    msg[(size_t)r] = koloFusionGetLastError(f);
    next_res[(size_t)r] = koloFusionStepBegin(f);  // the failure is sticky
    koloFusionDestroy(f);
  });
  EXPECT_LT(now_ms() - t0, kt_ms(10000)) << "the mismatch must be seen in a round, not after a timeout";
  EXPECT_EQ(end_res[0], koloInvalidUsage);
  EXPECT_TRUE(end_res[1] == koloSuccess || end_res[1] == koloInvalidUsage) << end_res[1];
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(wait_res[(size_t)r], koloInvalidUsage) << "rank " << r;
    EXPECT_EQ(next_res[(size_t)r], koloInvalidUsage) << "rank " << r;
    EXPECT_NE(msg[(size_t)r].find("calls do not match"), std::string::npos) << msg[(size_t)r];  // kolo's one phrase
    EXPECT_NE(msg[(size_t)r].find("tensor 2"), std::string::npos) << msg[(size_t)r];
    EXPECT_NE(msg[(size_t)r].find("rank 0 ended its step with tensors unmarked"), std::string::npos) << msg[(size_t)r];
    EXPECT_EQ(msg[(size_t)r].find("tensor 1 ("), std::string::npos) << msg[(size_t)r];
    EXPECT_EQ(msg[(size_t)r].find("not on rank 1"), std::string::npos) << msg[(size_t)r];
    EXPECT_NE(msg[(size_t)r].find("rank 0 is in step 1"), std::string::npos) << msg[(size_t)r];
    EXPECT_NE(msg[(size_t)r].find("rank 1 is in step 1"), std::string::npos) << msg[(size_t)r];
  }
  }
}

// Rank 0 never marks tensor 1 and never ends the step: the stall turns into
// koloInvalidUsage on both ranks after the communicator's timeout.
TEST(FusionThreads, StallIsBoundedByTheTimeout) {
  const int n = 2;
  koloConfig_t cc = KOLO_CONFIG_INITIALIZER;
  cc.timeoutMs = 1500;
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cc);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<koloResult_t> res(n);
  std::vector<std::string> msg(n);
  double t0 = now_ms();
  w.pool.run([&](int r) {
    koloFusion_t f;
    koloFusionConfig_t cfg = small_config(koloSum);
    koloFusionCreate(&f, w.comms[(size_t)r], &cfg);
    int id;
    for (int t = 0; t < 2; t++) koloFusionAddTensor(f, 10, koloFloat32, KOLO_FUSION_EXTERNAL, &id);
    koloFusionCommit(f);
    float buf[2][10] = {};
    koloFusionStepBegin(f);
    koloFusionMarkReady(f, 0, buf[0], nullptr);
    if (r == 1) {
      koloFusionMarkReady(f, 1, buf[1], nullptr);
      koloFusionStepEnd(f, nullptr);
      res[(size_t)r] = koloFusionWait(f);
    } else {
      double s = now_ms();  // rank 0 "hangs" in its backward pass
      while (koloFusionGetLastError(f)[0] == '\0' && now_ms() - s < kt_ms(20000))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      res[(size_t)r] = koloFusionStepEnd(f, nullptr);
    }
    msg[(size_t)r] = koloFusionGetLastError(f);
    koloFusionDestroy(f);
  });
  EXPECT_LT(now_ms() - t0, kt_ms(15000));
  for (int r = 0; r < n; r++) {
    EXPECT_EQ(res[(size_t)r], koloInvalidUsage) << "rank " << r << ": " << msg[(size_t)r];
    EXPECT_NE(msg[(size_t)r].find("tensor 1"), std::string::npos) << msg[(size_t)r];
    EXPECT_NE(msg[(size_t)r].find("1500 ms"), std::string::npos) << msg[(size_t)r];
  }
}

// ---- bad arguments -------------------------------------------------------------------

TEST(FusionThreads, BadArgumentsSayWhatIsWrong) {
  ThreadWorld w(1);
  ASSERT_TRUE(w.ok()) << w.init_error;
  koloComm_t c = w.comms[0];
  koloFusion_t f = nullptr;
  int id = -1;
  auto last = [&](const char *want) {
    std::string m = koloFusionGetLastError(f);
    EXPECT_NE(m.find(want), std::string::npos) << "\"" << m << "\" lacks \"" << want << "\"";
  };
  EXPECT_EQ(koloFusionCreate(nullptr, c, nullptr), koloInvalidArgument);
  EXPECT_EQ(koloFusionCreate(&f, nullptr, nullptr), koloInvalidArgument);
  EXPECT_NE(std::string(koloFusionGetLastError(nullptr)).find("comm is NULL"), std::string::npos);
  koloFusionConfig_t bad = KOLO_FUSION_CONFIG_INITIALIZER;
  bad.op = koloMax;
  EXPECT_EQ(koloFusionCreate(&f, c, &bad), koloInvalidArgument);
  bad = KOLO_FUSION_CONFIG_INITIALIZER;
  bad.minBuckets = 0;
  EXPECT_EQ(koloFusionCreate(&f, c, &bad), koloInvalidArgument);
  EXPECT_NE(std::string(koloFusionGetLastError(nullptr)).find("minBuckets"), std::string::npos);
  {  // the same bound on the environment's value (the config leaves it unset)
    ScopedEnv env("KOLO_FUSION_MIN_BUCKETS", "0");
    EXPECT_EQ(koloFusionCreate(&f, c, nullptr), koloInvalidArgument);
    EXPECT_NE(std::string(koloFusionGetLastError(nullptr)).find("KOLO_FUSION_MIN_BUCKETS"), std::string::npos);
  }
  bad = KOLO_FUSION_CONFIG_INITIALIZER;
  bad.size = 8;
  EXPECT_EQ(koloFusionCreate(&f, c, &bad), koloInvalidArgument);
  EXPECT_EQ(koloFusionAddTensor(nullptr, 1, koloFloat32, KOLO_FUSION_ALLOCATE, &id), koloInvalidArgument);
  koloFusionConfig_t cfg = small_config(koloSum);
  cfg.preScale = 0.25;
  ASSERT_EQ(koloFusionCreate(&f, c, &cfg), koloSuccess);
  EXPECT_EQ(koloFusionAddTensor(f, 4, koloInt32, KOLO_FUSION_ALLOCATE, &id), koloInvalidArgument);
  last("preScale");
  EXPECT_EQ(koloFusionAddTensor(f, 0, koloFloat32, KOLO_FUSION_ALLOCATE, &id), koloInvalidArgument);
  last("count 0");
  EXPECT_EQ(koloFusionAddTensor(f, 4, (koloDataType_t)77, KOLO_FUSION_ALLOCATE, &id), koloInvalidArgument);
  last("datatype 77");
  EXPECT_EQ(koloFusionAddTensor(f, 4, koloFloat32, (koloFusionStorage_t)5, &id), koloInvalidArgument);
  last("storage 5");
  EXPECT_EQ(koloFusionAddTensor(f, 4, koloFloat32, KOLO_FUSION_ALLOCATE, nullptr), koloInvalidArgument);
  last("tensorId is NULL");
  EXPECT_EQ(koloFusionStepBegin(f), koloInvalidUsage);
  last("Commit");
  EXPECT_EQ(koloFusionCommit(f), koloInvalidUsage);
  last("no tensor");
  ASSERT_EQ(koloFusionAddTensor(f, 4, koloFloat32, KOLO_FUSION_ALLOCATE, &id), koloSuccess);
  ASSERT_EQ(koloFusionAddTensor(f, 4, koloFloat32, KOLO_FUSION_EXTERNAL, &id), koloSuccess);
  ASSERT_EQ(koloFusionCommit(f), koloSuccess);
  EXPECT_EQ(koloFusionAddTensor(f, 4, koloFloat32, KOLO_FUSION_ALLOCATE, &id), koloInvalidUsage);
  last("committed already");
  EXPECT_EQ(koloFusionCommit(f), koloInvalidUsage);
  void *p = nullptr;
  EXPECT_EQ(koloFusionTensorPtr(f, 7, &p), koloInvalidArgument);
  last("tensorId 7");
  EXPECT_EQ(koloFusionTensorPtr(f, 1, &p), koloInvalidArgument);
  last("EXTERNAL");
  EXPECT_EQ(koloFusionTensorPtr(f, 0, nullptr), koloInvalidArgument);
  int b = 5;
  ASSERT_EQ(koloFusionTensorBucket(f, 1, &b), koloSuccess);
  EXPECT_EQ(b, -1);
  float buf[4] = {1, 2, 3, 4};
  EXPECT_EQ(koloFusionMarkReady(f, 0, nullptr, nullptr), koloInvalidUsage);
  last("outside a step");
  EXPECT_EQ(koloFusionStepEnd(f, nullptr), koloInvalidUsage);
  EXPECT_EQ(koloFusionWait(f), koloInvalidUsage);
  last("no step");
  ASSERT_EQ(koloFusionStepBegin(f), koloSuccess);
  EXPECT_EQ(koloFusionStepBegin(f), koloInvalidUsage);
  last("still open");
  EXPECT_EQ(koloFusionWait(f), koloInvalidUsage);
  last("StepEnd first");
  EXPECT_EQ(koloFusionMarkReady(f, 0, buf, nullptr), koloInvalidArgument);
  last("ALLOCATE");
  EXPECT_EQ(koloFusionMarkReady(f, 1, nullptr, nullptr), koloInvalidArgument);
  last("buf is NULL");
  EXPECT_EQ(koloFusionMarkReady(f, -1, nullptr, nullptr), koloInvalidArgument);
  last("tensorId -1");
  EXPECT_EQ(koloFusionMarkReady(f, 0, nullptr, nullptr), koloSuccess);
  EXPECT_EQ(koloFusionMarkReady(f, 0, nullptr, nullptr), koloInvalidUsage);
  last("twice");
  EXPECT_EQ(koloFusionMarkReady(f, 1, buf, nullptr), koloSuccess);
  EXPECT_EQ(koloFusionStepEnd(f, nullptr), koloSuccess);
  EXPECT_EQ(koloFusionStepEnd(f, nullptr), koloInvalidUsage);
  EXPECT_EQ(koloFusionWait(f), koloSuccess);
  EXPECT_EQ(buf[0], 0.25f);  // one rank: the sum of one pre-scaled input
  EXPECT_EQ(koloFusionGetStats(f, nullptr), koloInvalidArgument);
  EXPECT_EQ(koloFusionDestroy(f), koloSuccess);
  EXPECT_EQ(koloFusionDestroy(nullptr), koloInvalidArgument);
}

// ---- ranks as processes ----------------------------------------------------------------

void run_procs(int n, const Scenario &sc) {
  if (tsan_build()) GTEST_SKIP() << "TSan does not support fork() from a multi-threaded process";
  std::string id_error;
  auto res = run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        koloComm_t comm;
        if (koloCommInitRank(&comm, n, id, rank) != koloSuccess) {
          std::fprintf(stderr, "rank %d: init: %s\n", rank, koloGetLastError(nullptr));
          return 2;
        }
        RankOut o = run_rank(comm, rank, n, sc);
        if (!o.err.empty()) std::fprintf(stderr, "%s\n", o.err.c_str());
        koloCommDestroy(comm);
        return o.err.empty() ? 0 : 1;
      },
      120000, nullptr, &id_error);
  EXPECT_EQ(children_failures(res), "") << id_error;
}

TEST(FusionProcs, OneRank) { run_procs(1, mixed_scenario(base_seed() + 101, koloAvg, 16)); }
TEST(FusionProcs, TwoRanks) { run_procs(2, mixed_scenario(base_seed() + 102, koloSum)); }
TEST(FusionProcs, ThreeRanksAvg) { run_procs(3, mixed_scenario(base_seed() + 103, koloAvg)); }

// ---- CUDA --------------------------------------------------------------------------------

TEST(FusionCuda, AllocateAndExternalOnOneDevice) {
#ifndef KOLO_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) GTEST_SKIP() << "no CUDA device";
  const int n = 2, nt = 12;
  koloConfig_t cc = KOLO_CONFIG_INITIALIZER;
  cc.memory = koloMemCuda;
  std::vector<int> devs(n, 0);
  std::vector<koloComm_t> comms(n);
  ASSERT_EQ(koloCommInitAllConfig(comms.data(), n, devs.data(), &cc), koloSuccess) << koloGetLastError(nullptr);
  Scenario sc;
  sc.seed = base_seed() + 201;
  sc.cfg = small_config(koloSum);
  sc.specs = random_specs(sc.seed, nt, {koloFloat32, koloInt32, koloFloat16}, 50);
  std::vector<std::string> errs(n);
  RankPool pool(n);
  pool.run([&](int r) {
    std::string &err = errs[(size_t)r];
    cudaSetDevice(0);
    cudaStream_t compute;
    cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
    cudaEvent_t ready;
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    koloFusion_t f;
    if (koloFusionCreate(&f, comms[(size_t)r], &sc.cfg) != koloSuccess) {
      err = koloGetLastError(nullptr);
      return;
    }
    int id;
    for (const Spec &s : sc.specs) koloFusionAddTensor(f, s.count, s.type, s.storage, &id);
    if (koloFusionCommit(f) != koloSuccess) err = koloFusionGetLastError(f);
    std::vector<void *> ext((size_t)nt, nullptr);
    for (int t = 0; t < nt && err.empty(); t++)
      if (sc.specs[(size_t)t].storage == KOLO_FUSION_EXTERNAL)
        cudaMalloc(&ext[(size_t)t], sc.specs[(size_t)t].count * type_size(sc.specs[(size_t)t].type));
    for (int step = 1; step <= 2 && err.empty(); step++) {
      koloFusionStepBegin(f);
      std::vector<void *> ptr((size_t)nt);
      for (int t = nt - 1; t >= 0; t--) {
        const Spec &s = sc.specs[(size_t)t];
        ptr[(size_t)t] = ext[(size_t)t];
        if (!ptr[(size_t)t]) koloFusionTensorPtr(f, t, &ptr[(size_t)t]);
        std::vector<unsigned char> host(s.count * type_size(s.type));
        fill_input(host.data(), s.count, tensor_seed(sc, step, t), r, 0, s.type, koloSum);
        cudaMemcpyAsync(ptr[(size_t)t], host.data(), host.size(), cudaMemcpyHostToDevice, compute);
        cudaStreamSynchronize(compute);
        cudaEventRecord(ready, compute);
        if (koloFusionMarkReady(f, t, ext[(size_t)t], (koloEvent_t)ready) != koloSuccess) err = koloFusionGetLastError(f);
      }
      koloEvent_t done = nullptr;
      if (koloFusionStepEnd(f, &done) != koloSuccess || done == nullptr) err = koloFusionGetLastError(f);
      cudaStreamWaitEvent(compute, (cudaEvent_t)done, 0);
      if (koloFusionWait(f) != koloSuccess) err = koloFusionGetLastError(f);
      for (int t = 0; t < nt && err.empty(); t++) {
        const Spec &s = sc.specs[(size_t)t];
        void *p = ext[(size_t)t];
        if (!p) koloFusionTensorPtr(f, t, &p);
        std::vector<unsigned char> host(s.count * type_size(s.type));
        cudaMemcpy(host.data(), p, host.size(), cudaMemcpyDeviceToHost);
        err = check_tensor(sc, n, step, t, host.data());
      }
    }
    koloFusionDestroy(f);
    for (void *p : ext) cudaFree(p);
    cudaEventDestroy(ready);
    cudaStreamDestroy(compute);
  });
  for (koloComm_t c : comms) koloCommDestroy(c);
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[(size_t)r], "") << "rank " << r;
#endif
}

// koloFusionCommit zeroes the buckets it allocates on kolo's own stream and
// waits for that.  Here rank 0 first makes a call of another communicator on
// a blocking stream (cudaStreamCreate), whose kernel waits for rank 1's
// call, which rank 1 makes only after the fusion's first step; meanwhile the
// legacy stream (cudaMemset's) waits for that kernel.  The step's results,
// read back after that call (cudaMemcpy: the legacy stream), must still be
// the sums.  (A zeroing queued on the legacy stream waits for rank 0's
// kernel, and rank 1's call on its blocking stream waits for the zeroing:
// a deadlock until the kernel timeout, after which the zeroing wipes the
// step's results.)
TEST(FusionCuda, BucketZeroingIsNotQueuedBehindOtherCommunicators) {
#ifndef KOLO_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) GTEST_SKIP() << "no CUDA device";
  const int n = 2;
  koloConfig_t cc = KOLO_CONFIG_INITIALIZER;
  cc.memory = koloMemCuda;
  cc.timeoutMs = 20000;
  std::vector<int> devs(n, 0);
  std::vector<koloComm_t> fcomms(n), other(n);
  ASSERT_EQ(koloCommInitAllConfig(fcomms.data(), n, devs.data(), &cc), koloSuccess) << koloGetLastError(nullptr);
  ASSERT_EQ(koloCommInitAllConfig(other.data(), n, devs.data(), &cc), koloSuccess) << koloGetLastError(nullptr);
  Scenario sc;
  sc.seed = base_seed() + 202;
  sc.cfg = small_config(koloSum);
  sc.cfg.rebuildBuckets = 0;
  for (size_t count : {300, 1000, 1, 2000, 777, 64}) sc.specs.push_back({count, koloFloat32, KOLO_FUSION_ALLOCATE, 0});
  const int nt = (int)sc.specs.size();
  const size_t xcount = 1024;
  std::vector<std::string> errs(n);
  RankPool pool(n);
  pool.run([&](int r) {
    std::string &err = errs[(size_t)r];
    cudaSetDevice(0);
    cudaStream_t compute = nullptr, blocking = nullptr;
    cudaEvent_t ready = nullptr;
    float *x = nullptr;
    cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
    cudaStreamCreate(&blocking);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (cudaMalloc(&x, xcount * sizeof(float)) != cudaSuccess) err = "cudaMalloc";
    if (err.empty() && cudaMemsetAsync(x, 0, xcount * sizeof(float), blocking) != cudaSuccess) err = "cudaMemsetAsync";
    if (err.empty() && r == 0 && koloAllReduce(x, x, xcount, koloFloat32, koloSum, other[0], blocking) != koloSuccess)
      err = koloGetLastError(other[0]);
    koloFusion_t f = nullptr;
    if (err.empty() && koloFusionCreate(&f, fcomms[(size_t)r], &sc.cfg) != koloSuccess) err = koloGetLastError(nullptr);
    int id;
    for (const Spec &s : sc.specs)
      if (err.empty()) koloFusionAddTensor(f, s.count, s.type, s.storage, &id);
    if (err.empty() && koloFusionCommit(f) != koloSuccess) err = koloFusionGetLastError(f);
    std::vector<void *> ptr((size_t)nt, nullptr);
    if (err.empty()) koloFusionStepBegin(f);
    for (int t = 0; t < nt && err.empty(); t++) {
      const Spec &s = sc.specs[(size_t)t];
      koloFusionTensorPtr(f, t, &ptr[(size_t)t]);
      std::vector<unsigned char> host(s.count * type_size(s.type));
      fill_input(host.data(), s.count, tensor_seed(sc, 1, t), r, 0, s.type, koloSum);
      cudaMemcpyAsync(ptr[(size_t)t], host.data(), host.size(), cudaMemcpyHostToDevice, compute);
      cudaStreamSynchronize(compute);
      cudaEventRecord(ready, compute);
      if (koloFusionMarkReady(f, t, nullptr, (koloEvent_t)ready) != koloSuccess) err = koloFusionGetLastError(f);
    }
    if (err.empty() && koloFusionStepEnd(f, nullptr) != koloSuccess) err = koloFusionGetLastError(f);
    if (err.empty() && koloFusionWait(f) != koloSuccess) err = koloFusionGetLastError(f);
    if (r == 1 && koloAllReduce(x, x, xcount, koloFloat32, koloSum, other[1], blocking) != koloSuccess)
      err += std::string(" ") + koloGetLastError(other[1]);
    if (cudaStreamSynchronize(blocking) != cudaSuccess) err += " the other communicator's stream failed";
    for (int t = 0; t < nt && err.empty(); t++) {
      const Spec &s = sc.specs[(size_t)t];
      std::vector<unsigned char> host(s.count * type_size(s.type));
      cudaMemcpy(host.data(), ptr[(size_t)t], host.size(), cudaMemcpyDeviceToHost);
      err = check_tensor(sc, n, 1, t, host.data());
      if (!err.empty()) err = "tensor " + std::to_string(t) + " after the other communicator's call: " + err;
    }
    if (f) koloFusionDestroy(f);
    cudaFree(x);
    cudaEventDestroy(ready);
    cudaStreamDestroy(blocking);
    cudaStreamDestroy(compute);
  });
  for (koloComm_t c : fcomms) koloCommDestroy(c);
  for (koloComm_t c : other) koloCommDestroy(c);
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[(size_t)r], "") << "rank " << r;
#endif
}

}  // namespace
