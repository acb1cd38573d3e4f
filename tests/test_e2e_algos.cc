// test_e2e_algos.cc - every flat all-reduce algorithm (ring, recursive
// doubling, Rabenseifner, direct), forced by KOLO_ALGO, end to end on host
// communicators.
//
// Each world first checks that its communicator runs the forced algorithm
// (kolo_comm_all_reduce_algo: no silent fallback can pass), then runs a
// grid whose every call util/coll_run.h checks element by element against
// a reference computed independently of kolo (random inputs, outputs
// poisoned first, guards, untouched inputs), and checks that every rank's
// result holds the same bytes (recursive doubling reduces on every rank:
// the same operands in the same order everywhere, ring/doubling.h).
//   AlgoThreads  ranks as threads, n in {1, 2, 3, 4, 5, 8} (a power of two,
//                ranks to fold, one rank): float32 sum and avg, int32 sum
//                and avg, float64 max, bfloat16 sum and a float32
//                premul-sum at counts {0, 1, 7, 4095}, in and out of place,
//                and 1 MiB + 3 elements (float32 sum, int32 avg in place);
//                the outputs are compared byte for byte across ranks;
//                and where the order of operands shows in the bits (a max of
//                -0 and +0), every rank gets the same bits.
//   AlgoProcs    ranks as processes (shared memory pipes), n in {3, 4}: a
//                smaller grid; each rank all-gathers a hash of its result
//                and checks that every rank's is its own.
//   TreeBcast    the broadcast tree (KOLO_ALGO=broadcast:tree), ranks as
//                threads, n in {1, 2, 3, 5, 6, 8}: every root, dtypes of 1
//                to 8 bytes at counts {0, 1, 7, 4095}, in and out of place,
//                unaligned buffers, and 1 MiB + 3 elements; and the model's
//                own choice (tree when small, chain when large).
//   TunedChannels a tuning file's `channels` lines set how many channels an
//                all-reduce uses (seen in the ring pipes' step counts of
//                every channel), raise the communicator's channels unless
//                KOLO_NCHANNELS is set, and never exceed them; every
//                element checked.
//   BruckAllGather  Bruck's all-gather (KOLO_ALGO=allgather:bruck), ranks as
//                threads, n in {1, 2, 3, 5, 6, 7, 8}: dtypes of 1 to 8 bytes
//                at counts {0, 1, 7, 4095}, in and out of place, unaligned
//                buffers, and 1 MiB + 3 elements per rank on up to 5 ranks;
//                on 7 and 8 ranks with pipes of two slots (levels of 3 and 4
//                blocks, many rounds); the model's own choice (Bruck's when
//                small, the ring when large); 5 ranks as processes on one
//                host and on two (net pipes between them); and ranks that
//                disagree on it failing init.
//   ScratchGroup one-shot all-reduces and tree reduces grouped on one
//                communicator (3 and 5 ranks): each call's scratch its own.
//   AlgoConfig   a KOLO_ALGO that names no algorithm fails init, naming the
//                algorithms there are; a bare "tree" or "bruck" (not
//                all-reduce algorithms) and an entry leaving a collective
//                nothing fail.
// Large counts are skipped in sanitizer builds (KOLO_TEST_FULL=1 runs them).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/comm_peek.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

extern "C" {
#include "core/op.h"
#include "ring/algo.h"
}

using namespace kt;

namespace {

// A hang becomes an error after 60 s (children inherit the variable).
const bool kTimeoutSet = (default_test_timeout(60000), true);

struct TypeOp {
  koloDataType_t t;
  koloRedOp_t op;
};

std::vector<CollCase> algo_grid(int n, std::initializer_list<TypeOp> types, bool large) {
  std::vector<CollCase> cases;
  int v = 0;
  for (const TypeOp &to : types)
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::AllReduce, to.t, to.op, n, count, ip, v++));
  if (large && !sanitized_build()) {
    cases.push_back(make_case(Coll::AllReduce, koloFloat32, koloSum, n, kLargeCount, false, v++));
    cases.push_back(make_case(Coll::AllReduce, koloInt32, koloAvg, n, kLargeCount, true, v++));
  }
  return cases;
}

// The output of a prepared and issued case on one rank.
const GuardedBuf &output_of(const CollCase &c, const RankBufs &b) { return c.in_place ? b.a : b.b; }

// "" when comm runs `algo` for calls of `coll` ("an all-reduce", ...) of
// every size; choose is kolo_comm_all_reduce_algo, _bcast_algo or _ag_algo.
using AlgoOf = int (*)(koloComm_t, size_t, koloDataType_t);
std::string runs_at_every_size(koloComm_t comm, AlgoOf choose, const char *coll, int algo) {
  for (size_t count : {(size_t)1, (size_t)4095, kLargeCount}) {
    int got = choose(comm, count, koloFloat32);
    if (got != algo)
      return std::string(coll) + " of " + std::to_string(count) + " float32 runs " + kolo_algo_name(got) + ", not " +
             kolo_algo_name(algo);
  }
  return "";
}

std::string runs_algo(koloComm_t comm, int algo) {
  return runs_at_every_size(comm, kolo_comm_all_reduce_algo, "an all-reduce", algo);
}

// Every case on every rank of w: checked, then (same_bits) compared across
// ranks (not for a reduce: only its root has a result).
std::string run_identical(ThreadWorld &w, const std::vector<CollCase> &cases, bool same_bits = true) {
  const int n = w.nranks();
  for (const CollCase &c : cases) {
    Expected e;
    expected_for(c, &e);
    std::vector<RankBufs> bufs((size_t)n);
    std::vector<std::string> errs((size_t)n);
    w.pool.run([&](int r) {
      prepare(c, r, &bufs[(size_t)r]);
      koloResult_t res = issue(c, r, &bufs[(size_t)r], w.comms[(size_t)r]);
      errs[(size_t)r] = res != koloSuccess ? result_text(c.str().c_str(), res, w.comms[(size_t)r])
                                           : check(c, r, bufs[(size_t)r], e);
    });
    for (int r = 0; r < n; r++)
      if (!errs[(size_t)r].empty()) return c.str() + ": rank " + std::to_string(r) + ": " + errs[(size_t)r];
    const GuardedBuf &first = output_of(c, bufs[0]);
    for (int r = 1; r < n && first.data() != nullptr && same_bits; r++)
      if (memcmp(output_of(c, bufs[(size_t)r]).data(), first.data(), first.bytes()) != 0)
        return c.str() + ": rank " + std::to_string(r) + "'s result differs from rank 0's in its bits";
  }
  return "";
}

const char *const kAlgos[] = {"ring", "rd", "rabenseifner", "direct", "oneshot"};

class AlgoThreads : public ::testing::TestWithParam<std::tuple<const char *, int>> {};

TEST_P(AlgoThreads, EveryElementSameOnEveryRank) {
  auto [algo, n] = GetParam();
  ScopedEnv force("KOLO_ALGO", algo);
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  for (int r = 0; r < n; r++) ASSERT_EQ(runs_algo(w.comms[(size_t)r], kolo_algo_parse(algo)), "") << "rank " << r;
  const std::vector<CollCase> cases =
      algo_grid(n,
                {{koloFloat32, koloSum}, {koloFloat32, koloAvg}, {koloInt32, koloSum}, {koloInt32, koloAvg},
                 {koloFloat64, koloMax}, {koloBfloat16, koloSum}, {koloFloat32, kPreMulSum}},
                n <= 5);
  EXPECT_EQ(run_identical(w, cases), "");
}

INSTANTIATE_TEST_SUITE_P(Threads, AlgoThreads,
                         ::testing::Combine(::testing::ValuesIn(kAlgos), ::testing::Values(1, 2, 3, 4, 5, 8)),
                         [](const ::testing::TestParamInfo<std::tuple<const char *, int>> &p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) +
                                  "ranks";
                         });

// Where the order of operands shows in the bits: a float max of -0 and +0
// (kolo's max returns the second operand when neither is greater).  Every
// rank's inputs are zeros of signs taken from the bits of (element, rank);
// every rank must get the same bits.  (Not a sum of NaNs: which payload an
// add keeps is the compiler's and the hardware's, whatever the order.)
TEST_P(AlgoThreads, MaxOfSignedZerosGivesTheSameBitsOnEveryRank) {
  auto [algo, n] = GetParam();
  ScopedEnv force("KOLO_ALGO", algo);
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  const size_t count = 4097;
  std::vector<std::vector<uint32_t>> buf((size_t)n, std::vector<uint32_t>(count));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i++) buf[(size_t)r][i] = ((uint32_t)((i * 2654435761u) >> (r % 24)) & 1u) << 31;
  std::vector<koloResult_t> res((size_t)n);
  w.pool.run([&](int r) {
    res[(size_t)r] = koloAllReduce(buf[(size_t)r].data(), buf[(size_t)r].data(), count, koloFloat32, koloMax,
                                   w.comms[(size_t)r], nullptr);
  });
  for (int r = 0; r < n; r++) ASSERT_EQ(res[(size_t)r], koloSuccess) << koloGetLastError(w.comms[(size_t)r]);
  for (size_t i = 0; i < count; i++) {
    const uint32_t x = buf[0][i];
    ASSERT_EQ(x & 0x7fffffffu, 0u) << std::hex << x << " at " << std::dec << i;
    for (int r = 1; r < n; r++) ASSERT_EQ(buf[(size_t)r][i], x) << "element " << i << ": rank " << r << " differs";
  }
}

// FNV-1a of n bytes.
uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

// "" when comm runs what the test forced, else what it runs instead.
using RunsCheck = std::function<std::string(koloComm_t)>;

// One process's rank: the cases, each checked, then every rank's hash of
// its result all-gathered and compared with its own.  Like run_cases, it
// ends by saying how many cases passed, for the parent to count.
int child(int rank, int n, const koloUniqueId &id, const RunsCheck &runs, const std::vector<CollCase> &cases) {
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRank(&comm, n, id, rank);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommInitRank: %s\n", rank, koloGetLastError(nullptr));
    return 2;
  }
  int failures = 0;
  std::string why = runs(comm);
  if (!why.empty()) std::fprintf(stderr, "rank %d: %s\n", rank, why.c_str()), failures++;
  Expected e;
  std::vector<uint64_t> hashes((size_t)n);
  size_t passed = 0;
  for (size_t i = 0; i < cases.size() && failures == 0; i++) {
    const CollCase &c = cases[i];
    RankBufs b;
    prepare(c, rank, &b);
    expected_for_rank(c, rank, &e);
    res = issue(c, rank, &b, comm);
    std::string err = res != koloSuccess ? result_text(c.str().c_str(), res, comm) : check(c, rank, b, e);
    const GuardedBuf &out = output_of(c, b);
    uint64_t mine = out.data() ? hash_bytes(out.data(), out.bytes()) : 0;
    if (err.empty() && koloAllGather(&mine, hashes.data(), 1, koloUint64, comm, nullptr) != koloSuccess)
      err = result_text("koloAllGather", koloInternalError, comm);
    for (int q = 0; q < n && err.empty(); q++)
      if (hashes[(size_t)q] != mine) err = "rank " + std::to_string(q) + "'s result differs in its bits";
    if (!err.empty()) std::fprintf(stderr, "rank %d: %s: %s\n", rank, c.str().c_str(), err.c_str()), failures++;
    else passed++;
  }
  std::fprintf(stderr, "%s%zu\n", kCasesCheckedTag, passed);
  if (koloCommDestroy(comm) != koloSuccess) failures++;
  return failures ? 1 : 0;
}

class AlgoProcs : public ::testing::TestWithParam<std::tuple<const char *, int>> {};

TEST_P(AlgoProcs, EveryElementSameOnEveryRank) {
  if (tsan_build()) GTEST_SKIP() << "ThreadSanitizer cannot follow fork() from a process with threads";
  auto [algo, n] = GetParam();
  ScopedEnv force("KOLO_ALGO", algo);
  const std::vector<CollCase> cases = algo_grid(
      n, {{koloFloat32, koloSum}, {koloFloat16, koloAvg}, {koloInt32, koloSum}, {koloFloat8e5m2, kPreMulSum}}, true);
  std::string id_error;
  std::vector<ChildResult> res = run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        return child(rank, n, id, [&](koloComm_t c) { return runs_algo(c, kolo_algo_parse(algo)); }, cases);
      },
      240000, nullptr, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_checked(res, cases.size()), "");
}

INSTANTIATE_TEST_SUITE_P(Procs, AlgoProcs,
                         ::testing::Combine(::testing::Values("rd", "rabenseifner", "direct", "oneshot"), ::testing::Values(3, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<const char *, int>> &p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) +
                                  "ranks";
                         });

// ---- the broadcast tree ----------------------------------------------------------

std::string runs_bcast(koloComm_t comm, int algo) {
  return runs_at_every_size(comm, kolo_comm_bcast_algo, "a broadcast", algo);
}

// Every root (make_case takes variant % n), dtypes of 1, 2, 4 and 8 bytes,
// the small counts in and out of place (a third of them unaligned), and
// one large count on few ranks.
std::vector<CollCase> tree_grid(int n, Coll coll = Coll::Broadcast) {
  std::vector<CollCase> cases;
  int v = 0;
  const koloRedOp_t ops[] = {koloSum, koloAvg, koloMax, kPreMulSum};  // a reduce's; a broadcast ignores them
  for (koloDataType_t t : {koloFloat32, koloInt8, koloBfloat16, koloFloat64})
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true})
        for (int k = 0; k < (n > 1 ? 2 : 1); k++) {
          const koloRedOp_t op = coll == Coll::Reduce ? ops[v % 4] : koloSum;
          cases.push_back(make_case(coll, t, op == kPreMulSum && t == koloInt8 ? koloSum : op, n, count, ip, v++));
        }
  if (n <= 5 && !sanitized_build()) {
    cases.push_back(make_case(coll, koloFloat32, koloSum, n, kLargeCount, false, v++));
    cases.push_back(make_case(coll, koloInt32, koloSum, n, kLargeCount, true, v++));
  }
  return cases;
}

class TreeBcast : public ::testing::TestWithParam<int> {};

TEST_P(TreeBcast, EveryElementEveryRoot) {
  const int n = GetParam();
  ScopedEnv force("KOLO_ALGO", "broadcast:tree");
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  for (int r = 0; r < n; r++) ASSERT_EQ(runs_bcast(w.comms[(size_t)r], KOLO_ALGO_TREE), "") << "rank " << r;
  EXPECT_EQ(run_identical(w, tree_grid(n)), "");
}

INSTANTIATE_TEST_SUITE_P(Threads, TreeBcast, ::testing::Values(1, 2, 3, 5, 6, 8),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// The reduce's trees (ring/reduce_tree.c) forced, the binomial one and the
// double binary one: every root, sum, avg, max and premul-sum, in and out
// of place, unaligned, on 1, 2 and 3 channels (every call spread over
// them: the double tree's two trees on alternate channels).
class TreeReduce : public ::testing::TestWithParam<std::tuple<const char *, int, int>> {};

TEST_P(TreeReduce, EveryElementEveryRoot) {
  const char *algo = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam()), nch = std::get<2>(GetParam());
  ScopedEnv force("KOLO_ALGO", std::string("reduce:") + algo);
  ScopedEnv channels("KOLO_NCHANNELS", std::to_string(nch));
  ScopedEnv spread("KOLO_MIN_CHANNEL_BYTES", "64");
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  for (int r = 0; r < n; r++)
    ASSERT_EQ(runs_at_every_size(w.comms[(size_t)r], kolo_comm_reduce_algo, "a reduce", kolo_algo_parse(algo)), "");
  EXPECT_EQ(run_identical(w, tree_grid(n, Coll::Reduce), false), "");
}

INSTANTIATE_TEST_SUITE_P(Threads, TreeReduce,
                         ::testing::Combine(::testing::Values("tree", "dbtree"), ::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(1, 2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<const char *, int, int>> &p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) +
                                  "ranks_" + std::to_string(std::get<2>(p.param)) + "ch";
                         });

// The double binary tree (ring/bcast_dbtree.c) forced, on 1 channel (its
// first tree alone), 2 (both) and 3 (the first twice), with every call
// spread over the channels (KOLO_MIN_CHANNEL_BYTES=64): every element of
// every root's broadcast, in and out of place, unaligned, every rank's
// bits alike.
class DoubleTreeBcast : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(DoubleTreeBcast, EveryElementEveryRoot) {
  const int n = std::get<0>(GetParam()), nch = std::get<1>(GetParam());
  ScopedEnv force("KOLO_ALGO", "broadcast:dbtree");
  ScopedEnv channels("KOLO_NCHANNELS", std::to_string(nch));
  ScopedEnv spread("KOLO_MIN_CHANNEL_BYTES", "64");
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  for (int r = 0; r < n; r++) ASSERT_EQ(runs_bcast(w.comms[(size_t)r], KOLO_ALGO_DBTREE), "") << "rank " << r;
  EXPECT_EQ(run_identical(w, tree_grid(n)), "");
}

INSTANTIATE_TEST_SUITE_P(Threads, DoubleTreeBcast,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Values(1, 2, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>> &p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "ch";
                         });

// Calls that run programs naming scratch, grouped on one communicator:
// one-shot all-reduces and tree reduces (whose inner ranks reduce into
// scratch) of several sizes, each needing its own part of the
// communicator's arena (core/enqueue.c attach_scratch); a part shared by
// two calls would mix their partial sums.  One call runs alone first,
// then a group of ten, so the arena grows between them (a task's part
// holds two chunks of its pipe's slot size, whatever the call's count).
class ScratchGroup : public ::testing::TestWithParam<int> {};

TEST_P(ScratchGroup, EveryCallGetsItsOwnScratch) {
  const int n = GetParam();
  ScopedEnv force("KOLO_ALGO", "allreduce:oneshot;reduce:tree");
  ScopedEnv channels("KOLO_NCHANNELS", "3");
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  const std::vector<std::vector<size_t>> passes = {{13}, {7, 1, 13, 1000, 65539}};
  for (const std::vector<size_t> &counts : passes) {
    std::vector<CollCase> cases;
    int v = 0;
    for (size_t count : counts)
      for (Coll coll : {Coll::AllReduce, Coll::Reduce})
        cases.push_back(make_case(coll, koloFloat32, koloSum, n, count, v % 2 == 1, v)), v++;
    if (counts.size() == 1) cases.resize(1);  // the first pass: one call alone
    std::vector<RankBufs> bufs(cases.size() * (size_t)n);  // [k * n + r]
    std::vector<std::string> errs((size_t)n);
    w.pool.run([&](int r) {
      koloResult_t res = koloGroupStart();
      for (size_t k = 0; k < cases.size() && res == koloSuccess; k++) {
        prepare(cases[k], r, &bufs[k * n + r]);
        res = issue(cases[k], r, &bufs[k * n + r], w.comms[(size_t)r]);
      }
      koloResult_t end = koloGroupEnd();
      if (res == koloSuccess) res = end;
      if (res != koloSuccess) errs[(size_t)r] = result_text("the group", res, w.comms[(size_t)r]);
    });
    for (int r = 0; r < n; r++) ASSERT_EQ(errs[(size_t)r], "") << "rank " << r;
    for (size_t k = 0; k < cases.size(); k++) {
      Expected e;
      expected_for(cases[k], &e);
      for (int r = 0; r < n; r++)
        EXPECT_EQ(check(cases[k], r, bufs[k * n + r], e), "") << cases[k].str() << ", rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ScratchGroup, ::testing::Values(3, 5),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// "broadcast:ring,tree,dbtree": the model's cheapest of the three, run.
TEST(TreeBcastChoice, ModelWeighsTheDoubleTree) {
  ScopedEnv allow("KOLO_ALGO", "broadcast:ring,tree,dbtree");
  ThreadWorld w(8);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (size_t count : {(size_t)16, (size_t)4095, kLargeCount}) {
    int got = kolo_comm_bcast_algo(w.comms[0], count, koloFloat32);
    EXPECT_TRUE(got == KOLO_ALGO_RING || got == KOLO_ALGO_TREE || got == KOLO_ALGO_DBTREE) << got;
  }
  EXPECT_EQ(kolo_comm_bcast_algo(w.comms[0], kLargeCount, koloFloat32), KOLO_ALGO_DBTREE);  // algo.h's model
  std::vector<CollCase> cases = {make_case(Coll::Broadcast, koloFloat32, koloSum, 8, 7, false, 3),
                                 make_case(Coll::Broadcast, koloInt32, koloSum, 8, 300000, true, 5)};
  EXPECT_EQ(run_identical(w, cases), "");
}

// Where KOLO_ALGO lets it choose ("broadcast:ring,tree"), the model takes
// the tree for a small broadcast on 8 ranks and the chain for a large one,
// and both run; unset, it keeps the chain (the tree lost where measured:
// ring/algo.h), as "broadcast:ring" does.
TEST(TreeBcastChoice, ModelPicksTreeWhenSmallChainWhenLarge) {
  {
    ScopedEnv allow("KOLO_ALGO", "broadcast:ring,tree");
    ThreadWorld w(8);
    ASSERT_TRUE(w.ok()) << w.init_error;
    EXPECT_EQ(kolo_comm_bcast_algo(w.comms[0], 16, koloFloat32), KOLO_ALGO_TREE);
    EXPECT_EQ(kolo_comm_bcast_algo(w.comms[0], kLargeCount, koloFloat32), KOLO_ALGO_RING);
    std::vector<CollCase> cases = {make_case(Coll::Broadcast, koloFloat32, koloSum, 8, 7, false, 3),
                                   make_case(Coll::Broadcast, koloInt32, koloSum, 8, 300000, true, 5)};
    EXPECT_EQ(run_identical(w, cases), "");
  }
  ThreadWorld unset(8);
  ASSERT_TRUE(unset.ok()) << unset.init_error;
  EXPECT_EQ(kolo_comm_bcast_algo(unset.comms[0], 16, koloFloat32), KOLO_ALGO_RING);
  ScopedEnv force("KOLO_ALGO", "broadcast:ring");
  ThreadWorld chain(4);
  ASSERT_TRUE(chain.ok()) << chain.init_error;
  EXPECT_EQ(runs_bcast(chain.comms[0], KOLO_ALGO_RING), "");
}

// ---- channels from a tuning file ------------------------------------------------

// A tuning file with text, removed when it goes.
class TempTuning {
 public:
  explicit TempTuning(const std::string &text) {
    int fd = mkstemp(path_);
    ok_ = fd >= 0 && write(fd, text.data(), text.size()) == (ssize_t)text.size();
    if (fd >= 0) close(fd);
  }
  ~TempTuning() { unlink(path_); }
  bool ok() const { return ok_; }
  const char *path() const { return path_; }

 private:
  char path_[40] = "/tmp/kolo-test-tune.XXXXXX";
  bool ok_ = false;
};

// Which channels of comm's ring moved slices while a checked all-reduce of
// count float32s ran on every rank of w: bit ch set for channel ch.
unsigned channels_used(ThreadWorld &w, size_t count, std::string *err) {
  int nch;
  uint32_t nslots;
  size_t slot_bytes, min_bytes;
  kt_comm_shape(w.comms[0], &nch, &nslots, &slot_bytes, &min_bytes);
  std::vector<uint32_t> before((size_t)nch);
  for (int ch = 0; ch < nch; ch++) {
    uint32_t recv;
    kt_ring_steps(w.comms[0], ch, &before[(size_t)ch], &recv);
  }
  *err = run_identical(w, {make_case(Coll::AllReduce, koloFloat32, koloSum, w.nranks(), count, false, 11)});
  unsigned used = 0;
  for (int ch = 0; ch < nch; ch++) {
    uint32_t send, recv;
    kt_ring_steps(w.comms[0], ch, &send, &recv);
    if (send != before[(size_t)ch]) used |= 1u << ch;
  }
  return used;
}

int comm_channels(koloComm_t comm) {
  int nch;
  uint32_t nslots;
  size_t slot_bytes, min_bytes;
  kt_comm_shape(comm, &nch, &nslots, &slot_bytes, &min_bytes);
  return nch;
}

// 16 KiB on 3 channels, 4 MiB on 1 (where the default rule, one channel
// per 256 KiB of a rank's share, would take 4).
TEST(TunedChannels, TheFileSetsEachCallsChannels) {
  TempTuning f("kolo-tuning 1\nchannels allreduce 3 0 65536 ranks 3\nchannels allreduce 1 65537 4611686018427387903\n"
               "channels allreduce 4 0 4611686018427387903 ranks 5\n");
  ASSERT_TRUE(f.ok());
  ScopedEnv tune("KOLO_TUNING_FILE", f.path()), ring("KOLO_ALGO", "ring");
  std::string err;
  {
    ScopedEnv nch("KOLO_NCHANNELS", "4");
    ThreadWorld w(3);
    ASSERT_TRUE(w.ok()) << w.init_error;
    ASSERT_EQ(comm_channels(w.comms[0]), 4);
    EXPECT_EQ(channels_used(w, 4096, &err), 0x7u);
    EXPECT_EQ(err, "");
    EXPECT_EQ(channels_used(w, (size_t)1 << 20, &err), 0x1u);
    EXPECT_EQ(err, "");
  }
  {
    ThreadWorld w(3);  // no KOLO_NCHANNELS: the file's 3 for 3 ranks, not the 4 for 5
    ASSERT_TRUE(w.ok()) << w.init_error;
    EXPECT_EQ(comm_channels(w.comms[0]), 3);
    EXPECT_EQ(channels_used(w, 4096, &err), 0x7u);
    EXPECT_EQ(err, "");
  }
  ScopedEnv two("KOLO_NCHANNELS", "2");  // set: kept, and a call gets at most 2
  ThreadWorld w(3);
  ASSERT_TRUE(w.ok()) << w.init_error;
  EXPECT_EQ(comm_channels(w.comms[0]), 2);
  EXPECT_EQ(channels_used(w, 4096, &err), 0x3u);
  EXPECT_EQ(err, "");
}

// ---- Bruck's all-gather ----------------------------------------------------------

std::string runs_ag(koloComm_t comm, int algo) {
  return runs_at_every_size(comm, kolo_comm_ag_algo, "an all-gather", algo);
}

// Dtypes of 1, 2, 4 and 8 bytes at the small counts, in and out of place
// (a third of them unaligned: make_case), and 1 MiB + 3 elements per rank
// on few ranks (rounds repeat: chunks fill half a pipe).
std::vector<CollCase> bruck_grid(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  for (koloDataType_t t : {koloFloat32, koloInt8, koloBfloat16, koloFloat64})
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::AllGather, t, koloSum, n, count, ip, v++));
  if (n <= 5 && !sanitized_build()) {
    cases.push_back(make_case(Coll::AllGather, koloFloat32, koloSum, n, kLargeCount, false, v++));
    cases.push_back(make_case(Coll::AllGather, koloInt32, koloSum, n, kLargeCount, true, v++));
  }
  return cases;
}

class BruckAllGather : public ::testing::TestWithParam<int> {};

TEST_P(BruckAllGather, EveryElementOnEveryRank) {
  const int n = GetParam();
  ScopedEnv force("KOLO_ALGO", "allgather:bruck");
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  for (int r = 0; r < n; r++) ASSERT_EQ(runs_ag(w.comms[(size_t)r], KOLO_ALGO_BRUCK), "") << "rank " << r;
  EXPECT_EQ(run_identical(w, bruck_grid(n)), "");
}

INSTANTIATE_TEST_SUITE_P(Threads, BruckAllGather, ::testing::Values(1, 2, 3, 5, 6, 7, 8),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// Pipes at their fewest slots (KOLO_NSLOTS=2: a pipe holds two chunks of
// one 4 KiB slot each) and many rounds, on 7 and 8 ranks, whose last level
// moves 3 and 4 blocks each way: the order of a level's steps (two sends
// ahead of the receives) is what keeps it from deadlocking.
TEST(BruckAllGatherSlots, FewestSlotsManyRounds) {
  ScopedEnv force("KOLO_ALGO", "allgather:bruck"), slots("KOLO_NSLOTS", "2"), bytes("KOLO_BUFFSIZE", "8192");
  for (int n : {7, 8}) {
    ThreadWorld w(n);
    ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
    ASSERT_EQ(runs_ag(w.comms[0], KOLO_ALGO_BRUCK), "");
    const std::vector<CollCase> cases = {make_case(Coll::AllGather, koloFloat32, koloSum, n, 4095, false, 1),
                                         make_case(Coll::AllGather, koloInt8, koloSum, n, 65539, true, 3),
                                         make_case(Coll::AllGather, koloFloat64, koloSum, n, 20001, false, 6)};
    EXPECT_EQ(run_identical(w, cases), "") << n << " ranks";
  }
}

// Where KOLO_ALGO lets it choose ("allgather:ring,bruck") or is unset (a
// host communicator: ring/algo.h), the model takes Bruck's for a small
// all-gather on 8 ranks and the ring for a large one, and both run;
// "allgather:ring" keeps the ring.
TEST(BruckAllGatherChoice, ModelPicksBruckWhenSmallRingWhenLarge) {
  {
    ScopedEnv allow("KOLO_ALGO", "allgather:ring,bruck");
    ThreadWorld w(8);
    ASSERT_TRUE(w.ok()) << w.init_error;
    EXPECT_EQ(kolo_comm_ag_algo(w.comms[0], 16, koloFloat32), KOLO_ALGO_BRUCK);
    EXPECT_EQ(kolo_comm_ag_algo(w.comms[0], kLargeCount, koloFloat32), KOLO_ALGO_RING);
    std::vector<CollCase> cases = {make_case(Coll::AllGather, koloFloat32, koloSum, 8, 7, false, 3),
                                   make_case(Coll::AllGather, koloInt32, koloSum, 8, 300000, true, 5)};
    EXPECT_EQ(run_identical(w, cases), "");
  }
  ThreadWorld unset(8);
  ASSERT_TRUE(unset.ok()) << unset.init_error;
  EXPECT_EQ(kolo_comm_ag_algo(unset.comms[0], 16, koloFloat32), KOLO_ALGO_BRUCK);
  EXPECT_EQ(kolo_comm_ag_algo(unset.comms[0], kLargeCount, koloFloat32), KOLO_ALGO_RING);
  EXPECT_EQ(run_identical(unset, {make_case(Coll::AllGather, koloBfloat16, koloSum, 8, 33, true, 7)}), "");
  ScopedEnv force("KOLO_ALGO", "allgather:ring");
  ThreadWorld ring(4);
  ASSERT_TRUE(ring.ok()) << ring.init_error;
  EXPECT_EQ(runs_ag(ring.comms[0], KOLO_ALGO_RING), "");
}

// Ranks as processes, 5 of them, on one host (shared memory pipes) and on
// two (KOLO_HOSTID: net pipes, TCP through the proxy, between ranks of
// different hosts), with 64 KiB of slots per pipe (chunks of 32 KiB): the
// small grid and one count of many rounds, each rank's output checked, and
// its hash compared with every rank's through an all-gather that runs
// Bruck's too.
class BruckAllGatherProcs : public ::testing::TestWithParam<int> {};

TEST_P(BruckAllGatherProcs, EveryElement) {
  if (tsan_build()) GTEST_SKIP() << "ThreadSanitizer cannot follow fork() from a process with threads";
  const int n = 5, hosts = GetParam();
  ScopedEnv force("KOLO_ALGO", "allgather:bruck"), bytes("KOLO_BUFFSIZE", "65536");
  std::vector<CollCase> cases;
  int v = 0;
  for (koloDataType_t t : {koloFloat32, koloInt8, koloFloat64})
    for (size_t count : kSmallCounts)
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::AllGather, t, koloSum, n, count, ip, v++));
  cases.push_back(make_case(Coll::AllGather, koloFloat32, koloSum, n, 300001, true, v++));
  std::string id_error;
  std::vector<ChildResult> res = run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        if (hosts > 1) setenv("KOLO_HOSTID", ("bruck-host-" + std::to_string(rank % hosts)).c_str(), 1);
        return child(rank, n, id, [](koloComm_t c) { return runs_ag(c, KOLO_ALGO_BRUCK); }, cases);
      },
      120000, nullptr, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_checked(res, cases.size()), "");
}

INSTANTIATE_TEST_SUITE_P(Procs, BruckAllGatherProcs, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "hosts"; });

// Ranks that set KOLO_ALGO's allgather entry differently could run
// different programs over each other's pipes: init fails on both, naming
// the all-gather's sets.
// Two processes, rank `who` with KOLO_ALGO=value and the other without:
// both fail init with a sentence that names `field` and `algo`.
void expect_disagreement_fails_init(int who, const char *value, const char *field, const char *algo) {
  if (tsan_build()) GTEST_SKIP() << "ThreadSanitizer cannot follow fork() from a process with threads";
  std::string id_error;
  std::vector<ChildResult> res = run_children_with_id(
      2,
      [&](int rank, const koloUniqueId &id) {
        if (rank == who) setenv("KOLO_ALGO", value, 1);
        else unsetenv("KOLO_ALGO");
        koloComm_t comm = nullptr;
        koloResult_t r = koloCommInitRank(&comm, 2, id, rank);
        const std::string why = koloGetLastError(nullptr);
        if (r == koloSuccess) koloCommDestroy(comm);
        if (r == koloInvalidUsage && why.find(field) != std::string::npos && why.find(algo) != std::string::npos)
          return 0;
        std::fprintf(stderr, "rank %d: koloCommInitRank = %d: %s\n", rank, (int)r, why.c_str());
        return 1;
      },
      60000, nullptr, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_failures(res), "");
}

TEST(BruckAllGatherConfig, RanksThatDisagreeFailInit) {
  expect_disagreement_fails_init(0, "allgather:bruck", "allgather=", "bruck");
}

// KOLO_ALGO's reduce entry travels in the init shape too.
TEST(TreeReduceConfig, RanksThatDisagreeFailInit) { expect_disagreement_fails_init(1, "reduce:tree", "reduce=", "tree"); }

TEST(AlgoConfig, UnknownNameFailsInitNamingTheAlgorithms) {
  ScopedEnv force("KOLO_ALGO", "recursive");
  koloComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(koloCommInitAll(comms, 2, nullptr), koloInvalidArgument);
  EXPECT_STREQ(koloGetLastError(nullptr),
               "KOLO_ALGO \"recursive\": no algorithm (kolo has ring, hier, rd, rabenseifner, tree, direct, bruck, dbtree, "
               "oneshot) named \"recursive\"");
}

// NCCL's syntax (ring/algo_select.h): a list and per-collective entries
// init; an entry leaving a collective nothing to run fails init saying so.
TEST(AlgoConfig, NcclSyntaxListsInitAndEmptySetsFail) {
  for (const char *ok : {"Ring,RD", "^hier", "allreduce:rabenseifner,ring;broadcast:ring", "broadcast:tree;reduce:ring",
                         "ring,tree", "broadcast:^ring", "broadcast:dbtree", "broadcast:ring,dbtree", "allgather:bruck",
                         "allgather:ring,bruck;broadcast:tree", "reduce:tree", "reduce:ring,tree", "reduce:dbtree",
                         "oneshot"}) {
    ScopedEnv force("KOLO_ALGO", ok);
    koloComm_t comms[2] = {nullptr, nullptr};
    ASSERT_EQ(koloCommInitAll(comms, 2, nullptr), koloSuccess) << ok << ": " << koloGetLastError(nullptr);
    for (koloComm_t c : comms) koloCommDestroy(c);
  }
  const std::pair<const char *, const char *> bad[] = {
      {"reduce:rd", "leaves neither the ring (chain) nor a tree for \"reduce\""},
      {"reducescatter:tree", "the only algorithm kolo has for \"reducescatter\""},
      {"broadcast:rd", "leaves neither the ring (chain) nor a tree for \"broadcast\""},
      {"tree", "kolo's tree is a broadcast algorithm"},
      {"dbtree", "kolo's dbtree is a broadcast algorithm"},
      {"bruck", "kolo's bruck is an all-gather algorithm"},
      {"allgather:^ring,bruck", "leaves neither the ring nor bruck for \"allgather\""}};
  for (const auto &[v, why] : bad) {
    ScopedEnv force("KOLO_ALGO", v);
    koloComm_t comms[2] = {nullptr, nullptr};
    EXPECT_EQ(koloCommInitAll(comms, 2, nullptr), koloInvalidArgument) << v;
    EXPECT_NE(std::string(koloGetLastError(nullptr)).find(why), std::string::npos) << koloGetLastError(nullptr);
  }
}

}  // namespace
