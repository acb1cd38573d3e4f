// test_fusion_layout.cc - the fusion's bucket layout (fusion/layout.h) and
// the mismatch sentence (fusion/negotiate.h), as pure functions: no
// communicator, no thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "fusion/layout.h"
#include "fusion/negotiate.h"
}
#include "kolo_fusion.h"

namespace {

constexpr int kAlloc = KOLO_FUSION_ALLOCATE, kExt = KOLO_FUSION_EXTERNAL;

struct Layout {
  kf_layout l{};
  ~Layout() { kf_layout_free(&l); }
};

// Checks every rule of layout.h on a built layout.
void check_rules(const std::vector<kf_decl> &d, const int *order, size_t cap, size_t first_cap,
                 const kf_layout &l) {
  const int n = (int)d.size();
  ASSERT_EQ(l.ntensors, n);
  std::vector<int> pos(n);
  for (int i = 0; i < n; i++) pos[order ? order[i] : i] = i;
  int members = 0;
  for (int b = 0; b < l.nbuckets; b++) {
    const kf_bucket &bk = l.buckets[b];
    size_t bcap = b == 0 ? first_cap : cap;
    EXPECT_EQ(bk.offset % KF_BUCKET_ALIGN, 0u) << "bucket " << b;
    EXPECT_GT(bk.n, 0) << "bucket " << b;
    if (bk.n > 1) {
      EXPECT_LE(bk.bytes, bcap) << "bucket " << b << " holds " << bk.n << " tensors";
    }
    if (b > 0) {
      EXPECT_GE(bk.offset, l.buckets[b - 1].offset + l.buckets[b - 1].bytes);
    }
    EXPECT_LE(bk.offset + bk.bytes, l.arena_bytes);
    for (int j = 0; j < bk.n; j++) {
      int t = l.members[bk.first + j];
      EXPECT_EQ(l.bucket_of[t], b);
      EXPECT_EQ(d[t].dtype, bk.dtype) << "one dtype per bucket";
      EXPECT_EQ(l.offset[t] % KF_VIEW_ALIGN, 0u) << "tensor " << t;
      if (j == 0) {
        EXPECT_EQ(l.offset[t], bk.offset);
      }
      if (j > 0) {
        int p = l.members[bk.first + j - 1];
        EXPECT_LT(pos[p], pos[t]) << "members follow the order";
        EXPECT_GE(l.offset[t], l.offset[p] + kf_decl_bytes(&d[p])) << "views overlap";
        EXPECT_EQ((l.offset[t] - l.offset[p] - kf_decl_bytes(&d[p])) % koloTypeSize((koloDataType_t)bk.dtype), 0u);
      }
    }
    int last = l.members[bk.first + bk.n - 1];
    EXPECT_EQ(bk.offset + bk.bytes, l.offset[last] + kf_decl_bytes(&d[last]));
    members += bk.n;
  }
  int nalloc = 0;
  for (int t = 0; t < n; t++) {
    if (d[t].storage == kExt) {
      EXPECT_EQ(l.bucket_of[t], -1) << "tensor " << t;
    } else {
      nalloc++;
    }
  }
  EXPECT_EQ(members, nalloc);
}

TEST(FusionLayout, FirstBucketCapAlignmentAndOneDtypePerBucket) {
  // 100 float32 (400 B) each, caps 1000 B and first bucket 500 B.
  std::vector<kf_decl> d(6, kf_decl{100, koloFloat32, kAlloc});
  Layout L;
  ASSERT_EQ(kf_layout_build(d.data(), 6, nullptr, 1000, 500, &L.l), koloSuccess);
  check_rules(d, nullptr, 1000, 500, L.l);
  // [0] (a second one would pass 500), [1 2], [3 4], [5]
  ASSERT_EQ(L.l.nbuckets, 4);
  EXPECT_EQ(L.l.buckets[0].n, 1);
  EXPECT_EQ(L.l.buckets[1].n, 2);
  EXPECT_EQ(L.l.buckets[2].n, 2);
  EXPECT_EQ(L.l.buckets[3].n, 1);
}

TEST(FusionLayout, Basic) {
  std::vector<kf_decl> d = {{100, koloFloat32, kAlloc}, {3, koloFloat16, kAlloc}, {7, koloFloat32, kAlloc},
                            {5, koloInt8, kExt},        {1, koloFloat16, kAlloc}};
  Layout L;
  ASSERT_EQ(kf_layout_build(d.data(), 5, nullptr, 4096, 1024, &L.l), koloSuccess);
  check_rules(d, nullptr, 4096, 1024, L.l);
  EXPECT_EQ(L.l.nbuckets, 2);  // float32 [0 2], float16 [1 4]
  EXPECT_EQ(L.l.bucket_of[0], 0);
  EXPECT_EQ(L.l.bucket_of[2], 0);
  EXPECT_EQ(L.l.bucket_of[1], 1);
  EXPECT_EQ(L.l.bucket_of[4], 1);
  EXPECT_EQ(L.l.bucket_of[3], -1);
  EXPECT_EQ(L.l.offset[2], 400u);  // 400 is a multiple of 16
  EXPECT_EQ(L.l.offset[4] - L.l.offset[1], 16u);
}

TEST(FusionLayout, TensorLargerThanACapIsAlone) {
  std::vector<kf_decl> d = {{10, koloFloat64, kAlloc}, {1000, koloFloat64, kAlloc}, {10, koloFloat64, kAlloc}};
  Layout L;
  ASSERT_EQ(kf_layout_build(d.data(), 3, nullptr, 4096, 4096, &L.l), koloSuccess);
  check_rules(d, nullptr, 4096, 4096, L.l);
  EXPECT_EQ(L.l.nbuckets, 3);
  EXPECT_EQ(L.l.buckets[1].n, 1);
  EXPECT_EQ(L.l.buckets[1].bytes, 8000u);
}

TEST(FusionLayout, RandomDeclarationsAndOrdersKeepEveryRule) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 300; iter++) {
    int n = 1 + (int)(rng() % 60);
    std::vector<kf_decl> d((size_t)n);
    for (auto &x : d) {
      x.dtype = (int)(rng() % koloNumTypes);
      x.count = 1 + rng() % (rng() % 4 == 0 ? 3000 : 200);
      x.storage = rng() % 4 == 0 ? kExt : kAlloc;
    }
    std::vector<int> order((size_t)n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t cap = 64 + rng() % 8192, first = 16 + rng() % 4096;
    Layout A, B;
    ASSERT_EQ(kf_layout_build(d.data(), n, nullptr, cap, first, &A.l), koloSuccess);
    ASSERT_EQ(kf_layout_build(d.data(), n, order.data(), cap, first, &B.l), koloSuccess);
    check_rules(d, nullptr, cap, first, A.l);
    check_rules(d, order.data(), cap, first, B.l);
    if (HasFailure()) return;
    Layout C;  // deterministic: the same inputs give the same layout
    ASSERT_EQ(kf_layout_build(d.data(), n, order.data(), cap, first, &C.l), koloSuccess);
    EXPECT_TRUE(kf_layout_equal(&B.l, &C.l));
  }
}

TEST(FusionLayout, ReversedOrderIsADifferentLayout) {
  std::vector<kf_decl> d(8, kf_decl{300, koloFloat32, kAlloc});
  std::vector<int> rev = {7, 6, 5, 4, 3, 2, 1, 0}, same = {0, 1, 2, 3, 4, 5, 6, 7};
  Layout A, B, C;
  ASSERT_EQ(kf_layout_build(d.data(), 8, nullptr, 4096, 1024, &A.l), koloSuccess);
  ASSERT_EQ(kf_layout_build(d.data(), 8, rev.data(), 4096, 1024, &B.l), koloSuccess);
  ASSERT_EQ(kf_layout_build(d.data(), 8, same.data(), 4096, 1024, &C.l), koloSuccess);
  EXPECT_FALSE(kf_layout_equal(&A.l, &B.l));
  EXPECT_TRUE(kf_layout_equal(&A.l, &C.l));
  EXPECT_EQ(B.l.bucket_of[7], 0);  // the first one ready leads the first bucket
}

TEST(FusionLayout, CapIsAShareOfTheAllocatedBytesBetweenTheFirstCapAndTheCap) {
  // 100 float32 tensors of 4000 B (a multiple of 16) and 50 EXTERNAL ones,
  // which do not count: 400000 B to spread
  std::vector<kf_decl> d(100, kf_decl{1000, koloFloat32, kAlloc});
  d.insert(d.begin() + 10, 50, kf_decl{1 << 20, koloFloat32, kExt});
  EXPECT_EQ(kf_layout_cap(d.data(), 150, 1 << 20, 1024, 1), (size_t)1 << 20) << "1: the cap as given";
  EXPECT_EQ(kf_layout_cap(d.data(), 150, 1 << 20, 1024, 10), 40000u);
  EXPECT_EQ(kf_layout_cap(d.data(), 150, 1 << 20, 1024, 3), 133334u) << "rounded up";
  EXPECT_EQ(kf_layout_cap(d.data(), 150, 1 << 20, 64000, 10), 64000u) << "never below the first cap";
  EXPECT_EQ(kf_layout_cap(d.data(), 150, 20000, 1024, 10), 20000u) << "never above the cap";
  // each tensor counts rounded up to KF_VIEW_ALIGN: 3 x 17 B -> 3 x 32 B
  std::vector<kf_decl> odd(3, kf_decl{17, koloUint8, kAlloc});
  EXPECT_EQ(kf_layout_cap(odd.data(), 3, 4096, 1, 2), 48u);
  // the layout with it: the first tensor alone (1024 B first cap), then 10
  // tensors (40000 B) per bucket; with minBuckets 1 (DDP) one bucket after the first
  Layout A, B;
  size_t cap = kf_layout_cap(d.data(), 150, 1 << 20, 1024, 10);
  ASSERT_EQ(kf_layout_build(d.data(), 150, nullptr, cap, 1024, &A.l), koloSuccess);
  check_rules(d, nullptr, cap, 1024, A.l);
  ASSERT_EQ(A.l.nbuckets, 11);
  for (int b = 1; b < 10; b++) EXPECT_EQ(A.l.buckets[b].n, 10) << "bucket " << b;
  EXPECT_EQ(A.l.buckets[10].n, 9);
  ASSERT_EQ(kf_layout_build(d.data(), 150, nullptr, kf_layout_cap(d.data(), 150, 1 << 20, 1024, 1), 1024, &B.l),
            koloSuccess);
  EXPECT_EQ(B.l.nbuckets, 2);
}

TEST(FusionLayout, BadInput) {
  std::vector<kf_decl> d(3, kf_decl{1, koloFloat32, kAlloc});
  std::vector<int> dup = {0, 0, 1}, out = {0, 1, 3};
  Layout L;
  EXPECT_EQ(kf_layout_build(d.data(), 3, dup.data(), 64, 64, &L.l), koloInvalidArgument);
  EXPECT_EQ(kf_layout_build(d.data(), 3, out.data(), 64, 64, &L.l), koloInvalidArgument);
  EXPECT_EQ(kf_layout_build(d.data(), 3, nullptr, 0, 64, &L.l), koloInvalidArgument);
  EXPECT_FALSE(kf_order_valid(dup.data(), 3));
  EXPECT_NE(kf_decl_hash(d.data(), 3), kf_decl_hash(d.data(), 2));
}

TEST(FusionLayout, MismatchSentenceNamesBothRanks) {
  std::vector<kf_decl> d(4, kf_decl{10, koloFloat32, kAlloc});
  kf_view v[2] = {};
  for (int r = 0; r < 2; r++) {
    v[r].sig = kf_sig{3, 77, 0, 4};
    v[r].rank = r;
    v[r].ended = 1;
  }
  v[0].nmarked = 3;
  v[0].first_unmarked = 2;
  v[0].probe = 0;
  v[1].nmarked = 4;
  v[1].first_unmarked = -1;
  v[1].probe = 1;
  char s[512];
  kf_mismatch_sentence(v, 2, 2, d.data(), 1000, s, sizeof s);
  std::string msg = s;
  EXPECT_NE(msg.find("tensor 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
  v[1].sig.step = 4;  // out of step
  kf_mismatch_sentence(v, 2, -1, d.data(), 1000, s, sizeof s);
  msg = s;
  EXPECT_NE(msg.find("step 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("step 3"), std::string::npos) << msg;
}

// Three ranks without the probe tensor: rank 0 still in backward, rank 1
// ended its step without it.  The sentence blames rank 1, not rank 0 (which
// may only be late).
TEST(FusionLayout, MismatchSentenceBlamesTheRankThatEndedItsStep) {
  std::vector<kf_decl> d(4, kf_decl{10, koloFloat32, kAlloc});
  kf_view v[3] = {};
  for (int r = 0; r < 3; r++) {
    v[r].sig = kf_sig{3, 77, 0, 4};
    v[r].rank = r;
  }
  v[0].nmarked = 1, v[0].first_unmarked = 1, v[0].probe = 0;                 // in backward
  v[1].nmarked = 2, v[1].first_unmarked = 2, v[1].probe = 0, v[1].ended = 1;  // skipped tensor 2
  v[2].nmarked = 4, v[2].first_unmarked = -1, v[2].probe = 1, v[2].ended = 1;
  char s[1024];
  kf_mismatch_sentence(v, 3, 2, d.data(), 1000, s, sizeof s);
  std::string msg = s;
  EXPECT_NE(msg.find("marked ready on rank 2 but not on rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1 ended its step with tensors unmarked"), std::string::npos) << msg;
}

}  // namespace
