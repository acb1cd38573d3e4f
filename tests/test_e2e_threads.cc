// test_e2e_threads.cc - end-to-end tests with ranks as threads of this
// process (koloCommInitAll, or koloCommInitRank from threads), each rank's
// calls made from its own thread, all ranks at once; blocking host
// communicators (a call returns when its result is in place), plus groups
// driven by one thread, non-blocking communicators and koloCommSplit.
//
// The grid (util/coll_run.h says what is checked per call):
//   Small:  every collective x dtype x op at ranks {1,2,3,4,8}, counts
//           {0, 1, 7, 4095}, in and out of place; roots and send/recv shifts
//           vary over the grid; a third of the calls use buffers 1..7 bytes
//           off alignment (different per rank and per buffer).
//   Large:  count 1 MiB + 3 elements, every collective, float32 with every op
//           in and out of place, plus one call per other dtype (sum, or max
//           for the odd ones), at ranks {2,3,4,8}.
//   Huge:   64 MiB messages (the larger buffer), float32 sum and bfloat16
//           sum, every collective, 4 ranks.
// Large and Huge are skipped in sanitizer builds (KOLO_TEST_FULL=1 runs
// them).  KOLO_TEST_SEED changes the inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

// A hang becomes an error after 60 s instead of ctest's timeout.
const bool kTimeoutSet = (default_test_timeout(60000), true);

std::string param_name(Coll coll, int n) {
  return std::string(coll_name(coll)) + "_" + std::to_string(n) + "ranks";
}

// ---- the grid ---------------------------------------------------------------

class Grid : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

TEST_P(Grid, SmallCounts) {
  auto [coll, n] = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  GridReport rep = run_grid(w, small_grid(coll, n));
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(
    Threads, Grid,
    ::testing::Combine(::testing::ValuesIn(kAllColls), ::testing::Values(1, 2, 3, 4, 8)),
    [](const ::testing::TestParamInfo<Grid::ParamType> &p) {
      return param_name(std::get<0>(p.param), std::get<1>(p.param));
    });

class LargeGrid : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

TEST_P(LargeGrid, OneMiBPlus3) {
  if (sanitized_build()) GTEST_SKIP() << "large counts skipped in sanitizer builds (KOLO_TEST_FULL=1 runs them)";
  auto [coll, n] = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  GridReport rep = run_grid(w, large_grid(coll, n));
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(
    Threads, LargeGrid,
    ::testing::Combine(::testing::ValuesIn(kAllColls), ::testing::Values(2, 3, 4, 8)),
    [](const ::testing::TestParamInfo<LargeGrid::ParamType> &p) {
      return param_name(std::get<0>(p.param), std::get<1>(p.param));
    });

class HugeGrid : public ::testing::TestWithParam<Coll> {};

TEST_P(HugeGrid, SixtyFourMiB) {
  if (sanitized_build()) GTEST_SKIP() << "64 MiB skipped in sanitizer builds (KOLO_TEST_FULL=1 runs it)";
  const Coll coll = GetParam();
  const int n = 4;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  std::vector<CollCase> cases;
  int variant = 5;
  for (koloDataType_t t : {koloFloat32, koloBfloat16}) {
    size_t bytes = 64u << 20;
    size_t count = bytes / type_size(t);
    if (coll == Coll::ReduceScatter || coll == Coll::AllGather) count /= n;
    cases.push_back(make_case(coll, t, koloSum, n, count, false, variant++));
  }
  GridReport rep = run_grid(w, cases);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(Threads, HugeGrid, ::testing::ValuesIn(kAllColls),
                         [](const ::testing::TestParamInfo<Coll> &p) {
                           return std::string(coll_name(p.param)) + "_4ranks";
                         });

}  // namespace

// ---- more ways to make and drive communicators ------------------------------

class InitRankThreads : public ::testing::TestWithParam<int> {};

// koloGetUniqueId here, koloCommInitRank on n threads at once.
TEST_P(InitRankThreads, CollectivesWork) {
  const int n = GetParam();
  ThreadWorld w(n, ThreadWorld::Init::kInitRankThreads);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  GridReport rep = run_grid(w, sample_cases(n, {1, 7, 4095, 70001}));
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(Threads, InitRankThreads, ::testing::Values(2, 3, 5),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

TEST(ThreadsQueries, VersionCountUserRank) {
  int version = -1;
  ASSERT_EQ(koloGetVersion(&version), koloSuccess);
  EXPECT_EQ(version, KOLO_VERSION_CODE);
  EXPECT_EQ(version, KOLO_MAJOR * 10000 + KOLO_MINOR * 100 + KOLO_PATCH);
  for (int n : {1, 3}) {
    ThreadWorld w(n);
    ASSERT_TRUE(w.ok()) << w.init_error;
    for (int r = 0; r < n; r++) {
      int count = -1, rank = -1;
      ASSERT_EQ(koloCommCount(w.comms[r], &count), koloSuccess);
      ASSERT_EQ(koloCommUserRank(w.comms[r], &rank), koloSuccess);
      EXPECT_EQ(count, n);
      EXPECT_EQ(rank, r);
    }
  }
  EXPECT_EQ(koloTypeSize(koloBfloat16), 2u);
  EXPECT_EQ(koloTypeSize(koloFloat64), 8u);
  EXPECT_EQ(koloTypeSize((koloDataType_t)99), 0u);
}

// ---- one thread drives every rank (NCCL's single-thread group pattern) ------

class OneThreadGroup : public ::testing::TestWithParam<int> {};

TEST_P(OneThreadGroup, Collectives) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases;
  for (const CollCase &c : sample_cases(n, {0, 5, 4095, 300001}))
    if (c.coll != Coll::SendRecv) cases.push_back(c);
  EXPECT_EQ(run_one_thread_group(w, cases), "");
}

// Send/recv between ranks driven by one thread: the point-to-point pipes are
// made inside koloGroupEnd for every communicator of the group.
TEST_P(OneThreadGroup, SendRecv) {
  const int n = GetParam();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = 10000;  // a hang shows as an error within 10 s
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases;
  int variant = 0;
  for (size_t count : {1, 4095, 300001})
    for (int shift = 0; shift < n; shift++) {
      CollCase c = make_case(Coll::SendRecv, koloFloat32, koloSum, n, count, false, variant++);
      c.root = shift;
      seed_case(&c);
      cases.push_back(c);
    }
  EXPECT_EQ(run_one_thread_group(w, cases), "");
}

INSTANTIATE_TEST_SUITE_P(Threads, OneThreadGroup, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

// ---- point-to-point patterns in groups ----------------------------------------

namespace {

// One group per rank thread of sends and receives: send i goes to peer
// to[i] with `count` elements of (seed, tag[i]) data, receive i comes from
// from[i] into block i of the receive buffer and must equal what that peer
// sent with the same tag.  Used for rings with several shifts, all-to-all
// and self sends.
struct P2PPlan {
  std::vector<int> to, from;  // per rank: filled by the pattern
  std::vector<int> send_tag, recv_tag;
};

// Data of a message: rank `src` sends message `tag` (distinct per message).
uint64_t msg_seed(uint64_t seed, int src, int tag) { return mix64(seed ^ ((uint64_t)src << 32) ^ (uint64_t)tag); }

// Runs `plan(r)` on every rank's thread; returns the failures.
std::string run_p2p(ThreadWorld &w, size_t count, koloDataType_t t, uint64_t seed,
                    const std::function<P2PPlan(int)> &plan) {
  const int n = w.nranks();
  const size_t esz = type_size(t);
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    P2PPlan p = plan(r);
    size_t ns = p.to.size(), nr = p.from.size();
    GuardedBuf in, out;
    in.alloc(ns * count * esz, r % 8, 0x5a);
    out.alloc(nr * count * esz, (r + 5) % 8, 0x5a);
    for (size_t i = 0; i < ns; i++)
      fill_input(in.data() + i * count * esz, count, msg_seed(seed, r, p.send_tag[i]), 0, 0, t, koloSum);
    koloResult_t res = koloGroupStart();
    for (size_t i = 0; i < ns && res == koloSuccess; i++)
      res = koloSend(in.data() + i * count * esz, count, t, p.to[i], w.comms[r], nullptr);
    for (size_t i = 0; i < nr && res == koloSuccess; i++)
      res = koloRecv(out.data() + i * count * esz, count, t, p.from[i], w.comms[r], nullptr);
    koloResult_t end = koloGroupEnd();
    if (res == koloSuccess) res = end;
    if (res != koloSuccess) {
      errs[r] = result_text("send/recv group", res, w.comms[r]);
      return;
    }
    std::string e = in.check_guards("send buffer") + out.check_guards("recv buffer");
    Expected want;
    for (size_t i = 0; i < nr && e.empty(); i++) {
      expect_init(&want, t, true, count);
      fill_copy(&want, msg_seed(seed, p.from[i], p.recv_tag[i]), 0, 0, count, koloSum);
      std::string d = compare(out.data() + i * count * esz, want, 0, count);
      if (!d.empty()) e = "message " + std::to_string(i) + " from rank " + std::to_string(p.from[i]) + ": " + d;
    }
    errs[r] = e;
  });
  std::string all;
  for (int r = 0; r < n; r++)
    if (!errs[r].empty()) all += "\n  rank " + std::to_string(r) + ": " + errs[r];
  return all;
}

}  // namespace

class P2PGroups : public ::testing::TestWithParam<int> {};

// Every rank sends to rank + k and receives from rank - k for every k in
// 1..n-1 (and k = 0: itself) in one group; message tags are the shift k.
TEST_P(P2PGroups, RingsOfEveryShift) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (size_t count : {1, 4097, 200003}) {
    std::string errs = run_p2p(w, count, koloFloat32, base_seed() ^ count, [n](int r) {
      P2PPlan p;
      for (int k = 0; k < n; k++) {
        p.to.push_back((r + k) % n);
        p.send_tag.push_back(k);
        p.from.push_back((r - k + n) % n);
        p.recv_tag.push_back(k);
      }
      return p;
    });
    EXPECT_EQ(errs, "") << "count " << count;
  }
}

// All-to-all: rank r sends a distinct block to every rank j (itself
// included; tag = the destination) and receives block r from every rank.
// Sends are issued in rotated order and receives in plain order, so that
// ranks do not list their peers alike.
TEST_P(P2PGroups, AllToAll) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (koloDataType_t t : {koloInt8, koloBfloat16, koloFloat64})
    for (size_t count : {0, 3, 33333}) {
      std::string errs = run_p2p(w, count, t, base_seed() ^ (count * 31 + t), [n](int r) {
        P2PPlan p;
        for (int k = 0; k < n; k++) {
          int j = (r + k) % n;
          p.to.push_back(j);
          p.send_tag.push_back(j);
          p.from.push_back(k);
          p.recv_tag.push_back(r);
        }
        return p;
      });
      EXPECT_EQ(errs, "") << type_name(t) << " count " << count;
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, P2PGroups, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

// A rank sends to itself (in a group): small, and larger than a pipe's slots
// (the default KOLO_BUFFSIZE is 4 MiB), with and without other traffic.
TEST(P2PSelf, SelfSendRecv) {
  for (int n : {1, 3}) {
    ThreadWorld w(n);
    ASSERT_TRUE(w.ok()) << w.init_error;
    for (size_t count : {(size_t)1, (size_t)1000, (size_t)(5u << 20) / 4 + 1}) {
      std::string errs = run_p2p(w, count, koloFloat32, base_seed() + count, [](int r) {
        P2PPlan p;
        p.to = {r};
        p.from = {r};
        p.send_tag = {7};
        p.recv_tag = {7};
        return p;
      });
      EXPECT_EQ(errs, "") << n << " ranks, count " << count;
      // self plus a neighbour exchange in the same group
      errs = run_p2p(w, count, koloUint8, base_seed() - count, [n](int r) {
        P2PPlan p;
        p.to = {r, (r + 1) % n};
        p.send_tag = {1, 2};
        p.from = {(r + n - 1) % n, r};
        p.recv_tag = {2, 1};
        if (n == 1) p.recv_tag = {1, 2};  // both to itself: matched in issue order
        return p;
      });
      EXPECT_EQ(errs, "") << n << " ranks with neighbours, count " << count;
    }
  }
}

// ---- several collectives in one group ------------------------------------------

class SeveralInOneGroup : public ::testing::TestWithParam<int> {};

// Each rank's thread issues one call of every collective (different dtypes,
// ops, roots, counts, in and out of place) between one koloGroupStart /
// koloGroupEnd; every result is checked after the group ends.
TEST_P(SeveralInOneGroup, EveryCollective) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (int round = 0; round < 3; round++) {
    std::vector<CollCase> cases;
    int v = 11 * round;
    size_t counts[] = {1, 4095, 100003};
    cases.push_back(make_case(Coll::AllReduce, koloFloat32, koloSum, n, counts[round], false, v++));
    cases.push_back(make_case(Coll::AllGather, koloInt8, koloSum, n, counts[(round + 1) % 3], true, v++));
    cases.push_back(make_case(Coll::Broadcast, koloBfloat16, koloSum, n, counts[(round + 2) % 3], false, v++));
    cases.push_back(make_case(Coll::ReduceScatter, koloInt64, koloMin, n, counts[round], true, v++));
    cases.push_back(make_case(Coll::Reduce, koloFloat16, koloAvg, n, counts[(round + 1) % 3], false, v++));
    cases.push_back(make_case(Coll::SendRecv, koloUint32, koloSum, n, counts[(round + 2) % 3], false, v++));
    cases.push_back(make_case(Coll::AllReduce, koloInt32, koloProd, n, counts[(round + 2) % 3], true, v++));
    std::vector<Expected> exp(cases.size());
    for (size_t i = 0; i < cases.size(); i++) expected_for(cases[i], &exp[i]);
    std::vector<std::string> errs((size_t)n);
    w.pool.run([&](int r) {
      std::vector<RankBufs> bufs(cases.size());
      for (size_t i = 0; i < cases.size(); i++) prepare(cases[i], r, &bufs[i]);
      koloResult_t res = koloGroupStart();
      for (size_t i = 0; i < cases.size() && res == koloSuccess; i++) res = issue(cases[i], r, &bufs[i], w.comms[r]);
      koloResult_t end = koloGroupEnd();
      if (res == koloSuccess) res = end;
      if (res != koloSuccess) {
        errs[r] = result_text("group", res, w.comms[r]);
        return;
      }
      for (size_t i = 0; i < cases.size(); i++) {
        std::string e = check(cases[i], r, bufs[i], exp[i]);
        if (!e.empty()) errs[r] += "\n    " + cases[i].str() + ": " + e;
      }
    });
    for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "round " << round << ", rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, SeveralInOneGroup, ::testing::Values(1, 3, 4),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

// ---- koloCommSplit ----------------------------------------------------------------

// 7 ranks: even ranks one color, odd ranks another, rank 6 KOLO_SPLIT_NOCOLOR
// (gets NULL); key = -rank reverses the order within each color.  Then a
// second split with one color and equal keys keeps the parent's order.
TEST(ThreadsSplit, EvenOddReversedAndNoColor) {
  const int n = 7;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<koloComm_t> sub((size_t)n, nullptr), all((size_t)n, nullptr);
  std::vector<koloResult_t> res((size_t)n), res2((size_t)n);
  w.pool.run([&](int r) {
    int color = r == 6 ? KOLO_SPLIT_NOCOLOR : r % 2;
    sub[r] = reinterpret_cast<koloComm_t>(&res[r]);  // must be overwritten (NULL for rank 6)
    res[r] = koloCommSplit(w.comms[r], color, -r, &sub[r], nullptr);
  });
  for (int r = 0; r < n; r++) ASSERT_EQ(res[r], koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[r]);
  EXPECT_EQ(sub[6], nullptr);
  // new rank = position in descending parent-rank order within the color
  auto members = [](int color) { return color == 0 ? std::vector<int>{4, 2, 0} : std::vector<int>{5, 3, 1}; };
  std::vector<int> newrank((size_t)n, -1);
  for (int color : {0, 1})
    for (int i = 0; i < 3; i++) newrank[members(color)[i]] = i;
  for (int r = 0; r < 6; r++) {
    ASSERT_NE(sub[r], nullptr) << "rank " << r;
    int count = -1, rank = -1;
    EXPECT_EQ(koloCommCount(sub[r], &count), koloSuccess);
    EXPECT_EQ(koloCommUserRank(sub[r], &rank), koloSuccess);
    EXPECT_EQ(count, 3) << "rank " << r;
    EXPECT_EQ(rank, newrank[r]) << "rank " << r;
  }
  // All-gather of the parent ranks shows the order; then a grid on both
  // sub-communicators at once (ranks use their new rank).
  std::vector<std::vector<int32_t>> gathered((size_t)n, std::vector<int32_t>(3, -1));
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    if (r == 6) return;
    int32_t me = r;
    koloResult_t rr = koloAllGather(&me, gathered[r].data(), 1, koloInt32, sub[r], nullptr);
    if (rr != koloSuccess) errs[r] = result_text("koloAllGather", rr, sub[r]);
  });
  for (int r = 0; r < 6; r++) {
    EXPECT_EQ(errs[r], "");
    std::vector<int> m = members(r % 2);
    EXPECT_EQ(gathered[r], std::vector<int32_t>(m.begin(), m.end())) << "rank " << r;
  }
  Expected e;
  for (const CollCase &c : sample_cases(3, {1, 4095, 100000})) {
    expected_for(c, &e);
    w.pool.run([&](int r) { errs[r] = r == 6 ? "" : run_rank(c, newrank[r], sub[r], e); });
    for (int r = 0; r < 6; r++) EXPECT_EQ(errs[r], "") << c.str() << ", parent rank " << r;
  }
  // one color, equal keys: the parent's order
  w.pool.run([&](int r) { res2[r] = koloCommSplit(w.comms[r], 0, 0, &all[r], nullptr); });
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(res2[r], koloSuccess) << koloGetLastError(w.comms[r]);
    int rank = -1;
    EXPECT_EQ(koloCommUserRank(all[r], &rank), koloSuccess);
    EXPECT_EQ(rank, r);
  }
  CollCase c = make_case(Coll::AllReduce, koloFloat64, koloSum, n, 12345, false, 3);
  expected_for(c, &e);
  w.pool.run([&](int r) { errs[r] = run_rank(c, r, all[r], e); });
  for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << c.str() << " rank " << r;
  for (int r = 0; r < n; r++) {
    if (sub[r]) {
      EXPECT_EQ(koloCommDestroy(sub[r]), koloSuccess);
    }
    if (all[r]) {
      EXPECT_EQ(koloCommDestroy(all[r]), koloSuccess);
    }
  }
}

// ---- non-blocking communicators -------------------------------------------------

class NonBlocking : public ::testing::TestWithParam<int> {};

// config.blocking = 0: one thread issues every rank's calls (several in a
// row per communicator, without waiting), each returns koloInProgress, then
// koloCommGetAsyncError reaches koloSuccess and every result is checked.
TEST_P(NonBlocking, CallsReturnInProgressThenComplete) {
  const int n = GetParam();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases = sample_cases(n, {0, 7, 4095, 250001});
  const size_t batch = 6;  // calls in flight per communicator before waiting
  for (size_t first = 0; first < cases.size(); first += batch) {
    size_t last = std::min(cases.size(), first + batch);
    std::vector<std::vector<RankBufs>> bufs(last - first);
    for (size_t i = first; i < last; i++) {
      bufs[i - first] = std::vector<RankBufs>((size_t)n);
      for (int r = 0; r < n; r++) prepare(cases[i], r, &bufs[i - first][r]);
    }
    for (size_t i = first; i < last; i++)
      for (int r = 0; r < n; r++) {
        koloResult_t res = issue(cases[i], r, &bufs[i - first][r], w.comms[r]);
        if (cases[i].count == 0 && res == koloSuccess) continue;  // nothing to do
        ASSERT_EQ(res, koloInProgress) << cases[i].str() << " rank " << r << ": " << koloGetLastError(w.comms[r]);
      }
    double t0 = now_ms();
    for (int r = 0; r < n; r++) {
      koloResult_t async = koloInProgress;
      while (async == koloInProgress && now_ms() - t0 < 60000) {
        ASSERT_EQ(koloCommGetAsyncError(w.comms[r], &async), koloSuccess);
        if (async == koloInProgress) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      ASSERT_EQ(async, koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[r]);
    }
    Expected e;
    for (size_t i = first; i < last; i++) {
      expected_for(cases[i], &e);
      for (int r = 0; r < n; r++) EXPECT_EQ(check(cases[i], r, bufs[i - first][r], e), "") << cases[i].str() << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, NonBlocking, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "ranks";
                         });

// ---- koloCommFinalize ------------------------------------------------------------

// A blocking communicator of one rank: after koloCommFinalize (koloSuccess)
// its calls, a second Finalize and koloCommSplit are refused with
// koloInvalidUsage naming koloCommFinalize.  Then 2 non-blocking ranks:
// rank 0 calls an all-reduce (koloInProgress), rank 1 only 300 ms later
// from another thread; koloCommFinalize on rank 0 returns once the call is
// complete, with koloSuccess (its result in place), and refuses rank 0's
// later calls; rank 1's Finalize succeeds too.
TEST(Finalize, CompletesIssuedCallsThenRefusesCalls) {
  {
    ThreadWorld w(1);
    ASSERT_TRUE(w.ok()) << w.init_error;
    EXPECT_EQ(koloCommFinalize(w.comms[0]), koloSuccess);
    float x = 1;
    EXPECT_EQ(koloAllReduce(&x, &x, 1, koloFloat32, koloSum, w.comms[0], nullptr), koloInvalidUsage);
    EXPECT_NE(std::string(koloGetLastError(w.comms[0])).find("koloCommFinalize"), std::string::npos)
        << koloGetLastError(w.comms[0]);
    EXPECT_EQ(koloCommFinalize(w.comms[0]), koloInvalidUsage);
    koloComm_t sub = nullptr;
    EXPECT_EQ(koloCommSplit(w.comms[0], 0, 0, &sub, nullptr), koloInvalidUsage);
    EXPECT_NE(std::string(koloGetLastError(w.comms[0])).find("koloCommFinalize"), std::string::npos)
        << koloGetLastError(w.comms[0]);
  }
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, 2, 4095, false, 1);
  std::vector<RankBufs> bufs(2);
  for (int r = 0; r < 2; r++) prepare(c, r, &bufs[r]);
  ASSERT_EQ(issue(c, 0, &bufs[0], w.comms[0]), koloInProgress) << koloGetLastError(w.comms[0]);
  const double t0 = now_ms();
  koloResult_t late = koloInternalError;
  std::thread rank1([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    late = issue(c, 1, &bufs[1], w.comms[1]);
  });
  koloResult_t fin = koloCommFinalize(w.comms[0]);
  const double ms = now_ms() - t0;
  rank1.join();
  EXPECT_EQ(fin, koloSuccess) << koloGetLastError(w.comms[0]);
  EXPECT_GE(ms, 250) << "koloCommFinalize returned before rank 1 called";
  EXPECT_EQ(late, koloInProgress) << koloGetLastError(w.comms[1]);
  Expected e;
  expected_for(c, &e);
  EXPECT_EQ(check(c, 0, bufs[0], e), "") << "rank 0 after koloCommFinalize";
  EXPECT_EQ(issue(c, 0, &bufs[0], w.comms[0]), koloInvalidUsage);
  EXPECT_NE(std::string(koloGetLastError(w.comms[0])).find("koloCommFinalize"), std::string::npos)
      << koloGetLastError(w.comms[0]);
  EXPECT_EQ(koloCommFinalize(w.comms[1]), koloSuccess) << koloGetLastError(w.comms[1]);
  EXPECT_EQ(check(c, 1, bufs[1], e), "") << "rank 1 after koloCommFinalize";
}
