// test_algo_memo.cc - the algorithms a communicator remembers by size
// (core/algo_memo.h) are the ones its cost model picks afresh.
//   Memo           its entries: empty at first, one collective's apart from
//                  another's, a size that shares an entry evicts the one
//                  before, sizes from KOLO_MEMO_MAX_BYTES up and algorithms
//                  out of range are never kept.
//   MemoOnComms    host communicators of 1, 3, 4 and 6 ranks (threads):
//                  all-reduce, broadcast, all-gather and reduce of random
//                  sizes from 0 to 256 MiB and of every power of two, asked
//                  three times in different orders (the memo is full and
//                  evicts), answer what the model picks afresh for that size
//                  (tests/util/comm_peek.c), on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "util/comm_peek.h"
#include "util/thread_world.h"

extern "C" {
#include "core/op.h"
#include "ring/algo.h"
#include "ring/schedule.h"
}

namespace {

struct Memo {
  kt_memo *m = kt_memo_new();
  ~Memo() { kt_memo_free(m); }
};

// A size other than `bytes` that kt_memo_way puts in the same entry.
size_t same_way_as(size_t bytes) {
  for (size_t b = bytes + 1;; b++)
    if (kt_memo_way(b) == kt_memo_way(bytes)) return b;
}

TEST(Memo, EmptyAtFirstAndEachCollectiveApart) {
  Memo memo;
  ASSERT_NE(memo.m, nullptr);
  for (int k = 0; k < kt_memo_kinds(); k++)
    for (size_t b : {(size_t)0, (size_t)1, (size_t)8, (size_t)4096, (size_t)1 << 40}) EXPECT_EQ(kt_memo_get(memo.m, k, b), -1);
  kt_memo_put(memo.m, 0, 8, KOLO_ALGO_RD);
  kt_memo_put(memo.m, 1, 0, KOLO_ALGO_RING);  // algorithm 0 and size 0 are entries too
  EXPECT_EQ(kt_memo_get(memo.m, 0, 8), KOLO_ALGO_RD);
  EXPECT_EQ(kt_memo_get(memo.m, 1, 0), KOLO_ALGO_RING);
  for (int k = 2; k < kt_memo_kinds(); k++) EXPECT_EQ(kt_memo_get(memo.m, k, 8), -1) << k;
  EXPECT_EQ(kt_memo_get(memo.m, 1, 8), -1);
  EXPECT_EQ(kt_memo_get(memo.m, 0, 0), -1);
  EXPECT_EQ(kt_memo_get(memo.m, 0, 16), -1);
}

TEST(Memo, ASizeSharingAnEntryEvictsTheOneBefore) {
  Memo memo;
  const size_t a = 4096, b = same_way_as(a);
  kt_memo_put(memo.m, 0, a, KOLO_ALGO_RABENSEIFNER);
  kt_memo_put(memo.m, 0, b, KOLO_ALGO_TREE);
  EXPECT_EQ(kt_memo_get(memo.m, 0, a), -1);
  EXPECT_EQ(kt_memo_get(memo.m, 0, b), KOLO_ALGO_TREE);
  // the powers of two, the sizes programs call most, spread over the entries
  std::set<unsigned> ways;
  for (int s = 0; s < 40; s++) ways.insert(kt_memo_way((size_t)1 << s));
  EXPECT_EQ((int)ways.size(), kt_memo_ways());
}

TEST(Memo, KeepsNoSizeTooLargeAndNoAlgorithmOutOfRange) {
  Memo memo;
  const size_t max = kt_memo_max_bytes();
  kt_memo_put(memo.m, 0, max, KOLO_ALGO_RING);
  kt_memo_put(memo.m, 0, SIZE_MAX, KOLO_ALGO_RING);
  EXPECT_EQ(kt_memo_get(memo.m, 0, max), -1);
  EXPECT_EQ(kt_memo_get(memo.m, 0, SIZE_MAX), -1);
  kt_memo_put(memo.m, 0, max - 1, KOLO_ALGO_DIRECT);
  EXPECT_EQ(kt_memo_get(memo.m, 0, max - 1), KOLO_ALGO_DIRECT);
  for (int bad : {-1, 255, 1000}) {
    kt_memo_put(memo.m, 1, 64, bad);
    EXPECT_EQ(kt_memo_get(memo.m, 1, 64), -1) << bad;
  }
  kt_memo_put(memo.m, 1, 64, 254);
  EXPECT_EQ(kt_memo_get(memo.m, 1, 64), 254);
}

// Counts of random sizes (log-uniform up to 256 MiB of float32, and
// 1 + 2^k elements), with every power of two.
std::vector<size_t> counts_to_ask(unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> counts = {0, 1, 2, 3};
  for (int k = 0; k <= 26; k++) counts.insert(counts.end(), {(size_t)1 << k, ((size_t)1 << k) + 1});
  for (int i = 0; i < 150; i++) counts.push_back((size_t)std::exp2(std::uniform_real_distribution<double>(0, 26)(rng)));
  return counts;
}

const int kColls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_BROADCAST, KOLO_COLL_ALL_GATHER, KOLO_COLL_REDUCE};

int asked(koloComm_t comm, int coll, size_t count, koloDataType_t type) {
  switch (coll) {
  case KOLO_COLL_BROADCAST: return kolo_comm_bcast_algo(comm, count, type);
  case KOLO_COLL_ALL_GATHER: return kolo_comm_ag_algo(comm, count, type);
  case KOLO_COLL_REDUCE: return kolo_comm_reduce_algo(comm, count, type);
  default: return kolo_comm_all_reduce_algo(comm, count, type);
  }
}

class MemoOnComms : public ::testing::TestWithParam<int> {};

TEST_P(MemoOnComms, RememberedIsWhatTheModelPicksAfresh) {
  const int n = GetParam();
  kt::ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<size_t> counts = counts_to_ask(0x5eed + (unsigned)n);
  std::set<int> seen_all_reduce;
  for (int pass = 0; pass < 3; pass++) {
    if (pass == 1) std::reverse(counts.begin(), counts.end());
    if (pass == 2) std::shuffle(counts.begin(), counts.end(), std::mt19937(7));
    for (int r = 0; r < n; r++)
      for (int coll : kColls)
        for (koloDataType_t type : {koloFloat32, koloInt8, koloFloat64})
          for (size_t count : counts) {
            const int want = kt_fresh_algo(w.comms[(size_t)r], coll, count, type);
            ASSERT_EQ(asked(w.comms[(size_t)r], coll, count, type), want)
                << kolo_coll_name(coll) << " of " << count << " elements of type " << type << ", rank " << r << "/"
                << n << ", pass " << pass;
            if (coll == KOLO_COLL_ALL_REDUCE) seen_all_reduce.insert(want);
          }
  }
  // where the model picks by size, a memo that answered one size's
  // choice for another would have been seen
  if (n > 1) {
    EXPECT_GE(seen_all_reduce.size(), 2u);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MemoOnComms, ::testing::Values(1, 3, 4, 6),
                         [](const ::testing::TestParamInfo<int> &i) { return std::to_string(i.param) + "ranks"; });

}  // namespace
