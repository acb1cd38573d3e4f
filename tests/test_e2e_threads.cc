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

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/comm_peek.h"
#include "util/proc_util.h"
#include "util/thread_world.h"
#include "util/time_scale.h"

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
    std::vector<std::string> errs = run_cases_in_one_group(w, cases);
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
// The same once it stops changing (equal for 100 ms, at most 3 s): the
// bootstrap root that koloGetUniqueId starts is a detached thread, as
// NCCL's is, which closes its socket and ends on its own after init, so a
// count taken as init returns may still include it.
int settled_proc_entries(const char *what) {
  int n = count_proc_entries(what), same = 0;
  for (int i = 0; i < 300 && same < 10; i++) {
    usleep(10 * 1000);
    int m = count_proc_entries(what);
    same = m == n ? same + 1 : 0;
    n = m;
  }
  return n;
}

// A split whose new communicator never forms (rank 2 passes a config the
// init refuses at once; ranks 0 and 1 wait for it until their 1.5 s
// timeout) fails on every rank and leaves no thread or descriptor behind:
// the root the leader started for the new communicator is the new
// communicator's, stopped when its init fails (it was a detached thread that
// lingered until its own timeout).
TEST(ThreadsSplit, FailedSplitLeavesNoRootBehind) {
  const int n = 3;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  const int threads0 = settled_proc_entries("task"), fds0 = settled_proc_entries("fd");
  std::vector<koloComm_t> sub((size_t)n, nullptr);
  std::vector<koloResult_t> res((size_t)n);
  std::vector<std::string> text((size_t)n);
  w.pool.run([&](int r) {
    koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
    cfg.timeoutMs = 1500;
    if (r == 2) cfg.memory = 7;  // refused before it connects to anything
    res[r] = koloCommSplit(w.comms[r], 0, r, &sub[r], &cfg);
    text[r] = koloGetLastError(w.comms[r]);
  });
  for (int r = 0; r < n; r++) {
    EXPECT_NE(res[r], koloSuccess) << "rank " << r;
    EXPECT_EQ(sub[r], nullptr) << "rank " << r;
  }
  EXPECT_NE(text[2].find("config.memory = 7"), std::string::npos) << text[2];
  EXPECT_EQ(count_proc_entries("task"), threads0);
  EXPECT_EQ(count_proc_entries("fd"), fds0);
}

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
  koloResult_t late = koloInternalError;
  double called_at = 0;
  std::thread rank1([&] {
    // Paces only: rank 1 usually calls while rank 0 already waits in
    // koloCommFinalize; the order is checked below, not assumed.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    called_at = now_ms();
    late = issue(c, 1, &bufs[1], w.comms[1]);
  });
  koloResult_t fin = koloCommFinalize(w.comms[0]);
  const double finalized_at = now_ms();
  rank1.join();
  EXPECT_EQ(fin, koloSuccess) << koloGetLastError(w.comms[0]);
  EXPECT_GE(finalized_at, called_at) << "koloCommFinalize returned before rank 1 called";
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

// ==== NCCL 2.28 calls: group and non-blocking init, simulated
// groups, revoke, shrink, registration ===================================

namespace {

// Polls koloCommGetAsyncError until it leaves koloInProgress (60 s bound).
koloResult_t wait_async(koloComm_t comm) {
  koloResult_t async = koloInProgress;
  double t0 = now_ms();
  while (async == koloInProgress && now_ms() - t0 < 60000) {
    if (koloCommGetAsyncError(comm, &async) != koloSuccess) return koloInternalError;
    if (async == koloInProgress) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  return async;
}

}  // namespace

// One thread makes every rank: koloGroupStart, koloCommInitRank x n,
// koloGroupEnd (each init alone would wait for the others); then every
// collective, each rank on its own thread, checked element by element.
class ThreadsGroupInit : public ::testing::TestWithParam<int> {};

TEST_P(ThreadsGroupInit, OneThreadMakesEveryRank) {
  const int n = GetParam();
  double t0 = now_ms();
  ThreadWorld w(n, ThreadWorld::Init::kGroupOneThread);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  EXPECT_LT(now_ms() - t0, kt_ms(30000));
  for (int r = 0; r < n; r++) {
    int rank = -1, count = -1;
    EXPECT_EQ(koloCommUserRank(w.comms[r], &rank), koloSuccess);
    EXPECT_EQ(koloCommCount(w.comms[r], &count), koloSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, n);
  }
  GridReport rep = run_grid(w, sample_cases(n, {0, 7, 4095, 70001}));
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(Threads, ThreadsGroupInit, ::testing::Values(1, 3, 4),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// config.blocking = 0: koloCommInitRankConfig returns koloInProgress at once
// (one thread makes 3 ranks in a row, without a group: a blocking init
// would wait for the others forever), the async error says koloInProgress
// until the init is done; then a non-blocking all-reduce of every rank,
// checked.  The same through a group: koloGroupEnd returns koloInProgress.
TEST(ThreadsNonBlockingInit, InProgressThenUsable) {
  const int n = 3;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  for (bool grouped : {false, true}) {
    SCOPED_TRACE(grouped ? "in a group" : "no group");
    std::vector<koloComm_t> comms((size_t)n, nullptr);
    koloUniqueId id;
    ASSERT_EQ(koloGetUniqueId(&id), koloSuccess);
    if (grouped) koloGroupStart();
    for (int r = 0; r < n; r++) {
      koloResult_t res = koloCommInitRankConfig(&comms[r], n, id, r, &cfg);
      EXPECT_EQ(res, grouped ? koloSuccess : koloInProgress) << koloGetLastError(nullptr);
      ASSERT_NE(comms[r], nullptr);
    }
    if (grouped) {
      EXPECT_EQ(koloGroupEnd(), koloInProgress) << koloGetLastError(nullptr);
    }
    for (int r = 0; r < n; r++) ASSERT_EQ(wait_async(comms[r]), koloSuccess) << koloGetLastError(comms[r]);
    CollCase c = make_case(Coll::AllReduce, koloFloat32, koloSum, n, 70001, false, 7);
    std::vector<RankBufs> bufs((size_t)n);
    for (int r = 0; r < n; r++) prepare(c, r, &bufs[r]);
    for (int r = 0; r < n; r++) EXPECT_EQ(issue(c, r, &bufs[r], comms[r]), koloInProgress);
    for (int r = 0; r < n; r++) EXPECT_EQ(wait_async(comms[r]), koloSuccess) << koloGetLastError(comms[r]);
    Expected e;
    expected_for(c, &e);
    for (int r = 0; r < n; r++) EXPECT_EQ(check(c, r, bufs[r], e), "") << "rank " << r;
    for (koloComm_t comm : comms) EXPECT_EQ(koloCommDestroy(comm), koloSuccess);
  }
}

// A call on a communicator whose non-blocking init is still waiting for a
// peer is refused (koloInvalidUsage, naming the init); once the peer comes
// the communicator works.
TEST(ThreadsNonBlockingInit, CallsBeforeTheInitEndsAreRefused) {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  koloUniqueId id;
  ASSERT_EQ(koloGetUniqueId(&id), koloSuccess);
  koloComm_t c0 = nullptr, c1 = nullptr;
  ASSERT_EQ(koloCommInitRankConfig(&c0, 2, id, 0, &cfg), koloInProgress);
  float x = 1;
  EXPECT_EQ(koloAllReduce(&x, &x, 1, koloFloat32, koloSum, c0, nullptr), koloInvalidUsage);
  EXPECT_NE(std::string(koloGetLastError(c0)).find("init is still in progress"), std::string::npos)
      << koloGetLastError(c0);
  koloResult_t async = koloSuccess;
  EXPECT_EQ(koloCommGetAsyncError(c0, &async), koloSuccess);
  EXPECT_EQ(async, koloInProgress);  // rank 1 has not come yet
  ASSERT_EQ(koloCommInitRankConfig(&c1, 2, id, 1, &cfg), koloInProgress);
  EXPECT_EQ(wait_async(c0), koloSuccess) << koloGetLastError(c0);
  EXPECT_EQ(wait_async(c1), koloSuccess) << koloGetLastError(c1);
  float a = 2, b = 5;
  EXPECT_EQ(koloAllReduce(&a, &a, 1, koloFloat32, koloSum, c0, nullptr), koloInProgress);
  EXPECT_EQ(koloAllReduce(&b, &b, 1, koloFloat32, koloSum, c1, nullptr), koloInProgress);
  EXPECT_EQ(wait_async(c0), koloSuccess);
  EXPECT_EQ(wait_async(c1), koloSuccess);
  EXPECT_EQ(a, 7.0f);
  EXPECT_EQ(b, 7.0f);
  koloCommDestroy(c0);
  koloCommDestroy(c1);
}

// ---- koloGroupSimulateEnd ------------------------------------------------------

namespace {

// The all-reduce's cheapest algorithm (ring/algo.h) on one host: the ring,
// recursive doubling or Rabenseifner's (p = 2^k ranks and a fold of the
// rest), each its steps of latency a and its passes over memory at rate b.
double all_reduce_s(int n, double a, double b, double bytes) {
  int p = 1, k = 0;
  for (; 2 * p <= n; p *= 2) k++;
  const int f = p < n;
  const double ring = 2 * (n - 1) * a + (6.0 * n - 4) / n * bytes / b;
  const double rd = (k + 2 * f) * a + 5.0 * (k + f) * bytes / b;
  const double rab = (2 * k + 2 * f) * a + (9.0 * (p - 1) / p + 5 * f) * bytes / b;
  return std::min(ring, std::min(rd, rab));
}

// ring/algo.h's model of one host (shared memory links): latency 1 us and
// 20 GB/s per hop, written out here independently of ring/algo.c.
double model_us(Coll coll, int n, double bytes) {
  if (n <= 1) return 0;
  const double a = 1e-6, b = 20e9;
  double s = 0;
  switch (coll) {
    case Coll::AllReduce: s = all_reduce_s(n, a, b, bytes); break;
    case Coll::AllGather: {  // the ring, or Bruck's where cheaper (host memory: ring/algo.h)
      const int k = (int)std::ceil(std::log2((double)n));
      const double ring = (n - 1) * a + (n - 1) * bytes / b, bruck = k * a + (2 * n - 3) * bytes / b;
      s = std::min(ring, bruck);
      break;
    }
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter: s = (n - 1) * a + (n - 1) * bytes / b; break;
    case Coll::Broadcast:
    case Coll::Bcast:
    case Coll::Reduce: s = (n - 1) * a + bytes / b; break;
    case Coll::SendRecv: s = a + bytes / b; break;
  }
  return s * 1e6;
}

// One call of rank 0 (the others do not take part: nothing is issued).
koloResult_t record(Coll coll, koloComm_t comm, int n, float *x, size_t count) {
  switch (coll) {
    case Coll::AllReduce: return koloAllReduce(x, x, count, koloFloat32, koloSum, comm, nullptr);
    case Coll::ReduceScatter: return koloReduceScatter(x, x, count, koloFloat32, koloSum, comm, nullptr);
    case Coll::AllGather: return koloAllGather(x, x, count, koloFloat32, comm, nullptr);
    case Coll::Broadcast: return koloBroadcast(x, x, count, koloFloat32, 0, comm, nullptr);
    case Coll::Reduce: return koloReduce(x, x, count, koloFloat32, koloSum, 0, comm, nullptr);
    case Coll::SendRecv: return koloSend(x, count, koloFloat32, 0, comm, nullptr);
    case Coll::AlltoAll: return koloAlltoAll(x, x + n * count, count, koloFloat32, comm, nullptr);
    case Coll::Gather: return koloGather(x, x + count, count, koloFloat32, 1 % n, comm, nullptr);
    case Coll::Scatter: return koloScatter(x + count, x, count, koloFloat32, 1 % n, comm, nullptr);
    case Coll::Bcast: return koloBcast(x, count, koloFloat32, 0, comm, nullptr);
  }
  return koloInternalError;
}

float simulate(const std::function<void()> &calls) {
  koloSimInfo_t info = KOLO_SIM_INFO_INITIALIZER;
  EXPECT_EQ(koloGroupStart(), koloSuccess);
  calls();
  EXPECT_EQ(koloGroupSimulateEnd(&info), koloSuccess) << koloGetLastError(nullptr);
  return info.estimatedTime;
}

}  // namespace

// Every collective at 1..4 ranks and sizes 0 .. 4 MiB: the estimate is the
// cost model's time (checked against the formula above, so it grows with
// the size and the rank count as the model says), and nothing was issued:
// the buffer keeps its poison, and the ranks' next real call is right.
TEST(ThreadsSimulate, EstimateIsTheCostModelsTime) {
  for (int n : {1, 2, 3, 4}) {
    ThreadWorld w(n);
    ASSERT_TRUE(w.ok()) << w.init_error;
    std::vector<float> x((size_t)2 * n << 20, -7.5f);  // all-to-all: two buffers of n blocks
    for (Coll coll : kAllColls)
      for (size_t count : {(size_t)0, (size_t)1, (size_t)1000, (size_t)1 << 20}) {
        float est = simulate([&] { EXPECT_EQ(record(coll, w.comms[0], n, x.data(), count), koloSuccess); });
        double want = model_us(coll, n, 4.0 * (double)count);
        EXPECT_NEAR(est, want, 1e-5 * want + 1e-6) << coll_name(coll) << " of " << count << " floats, " << n << " ranks";
      }
    for (float v : x) ASSERT_EQ(v, -7.5f) << "a simulated call wrote its buffer";
    GridReport rep = run_grid(w, {make_case(Coll::AllReduce, koloFloat32, koloSum, n, 4095, false, 1)});
    EXPECT_GRID_OK(rep);
  }
}

// Calls of one communicator add up (its sends and receives overlap);
// communicators progress side by side, so a group of two takes the longer.
TEST(ThreadsSimulate, GroupsAddPerCommunicatorAndOverlapAcross) {
  ThreadWorld two(2), four(4);
  ASSERT_TRUE(two.ok() && four.ok()) << two.init_error << four.init_error;
  std::vector<float> x(1 << 20, 1.0f);
  const double big = 4.0 * (1 << 20), small = 4.0 * 1000;
  float est = simulate([&] {
    koloAllReduce(x.data(), x.data(), 1 << 20, koloFloat32, koloSum, two.comms[0], nullptr);
    koloAllReduce(x.data(), x.data(), 1000, koloFloat32, koloSum, two.comms[0], nullptr);
  });
  EXPECT_NEAR(est, model_us(Coll::AllReduce, 2, big) + model_us(Coll::AllReduce, 2, small), 1e-3);
  est = simulate([&] {
    koloAllReduce(x.data(), x.data(), 1000, koloFloat32, koloSum, two.comms[0], nullptr);
    koloAllReduce(x.data(), x.data(), 1 << 20, koloFloat32, koloSum, four.comms[0], nullptr);
  });
  EXPECT_NEAR(est, model_us(Coll::AllReduce, 4, big), 1e-3);
  est = simulate([&] {
    koloSend(x.data(), 1000, koloFloat32, 1, two.comms[0], nullptr);
    koloRecv(x.data(), 1 << 18, koloFloat32, 1, two.comms[0], nullptr);
  });
  EXPECT_NEAR(est, model_us(Coll::SendRecv, 2, 4.0 * (1 << 18)), 1e-3);
  // a nested level only closes itself; the outer end issues the calls
  float y[2] = {1, 2}, z[2] = {3, 4};
  koloSimInfo_t info = KOLO_SIM_INFO_INITIALIZER;
  koloGroupStart();
  koloGroupStart();
  koloAllReduce(y, y, 2, koloFloat32, koloSum, two.comms[0], nullptr);
  koloAllReduce(z, z, 2, koloFloat32, koloSum, two.comms[1], nullptr);
  EXPECT_EQ(koloGroupSimulateEnd(&info), koloSuccess);
  EXPECT_EQ(info.estimatedTime, -1.0f);
  EXPECT_EQ(koloGroupEnd(), koloSuccess) << koloGetLastError(nullptr);
  EXPECT_EQ(y[0], 4.0f);
  EXPECT_EQ(z[1], 6.0f);
}

// ---- koloCommRevoke and koloCommShrink -----------------------------------------

// Rank 1 waits in an all-reduce that rank 0 never joins; another thread
// revokes rank 1's communicator: the call returns an error at once (not
// after the 20 s timeout), later calls and koloCommFinalize are refused
// naming the revoke, the async state is koloSuccess.  Both ranks then
// shrink the revoked communicator (nobody excluded) and the new one works.
TEST(ThreadsRevoke, StopsTheCallThenShrinkStillWorks) {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = 20000;
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<float> x(1 << 20, 1.0f);
  koloResult_t in_flight = koloSuccess;
  double done_at = 0;
  const uint64_t arrived = kt_slices_in(w.comms[0]);
  std::thread rank1([&] {
    in_flight = koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, w.comms[1], nullptr);
    done_at = now_ms();
  });
  // Rank 1 is inside the call once its first slices reach rank 0's pipes.
  EXPECT_TRUE(kt_wait_slices_in(w.comms[0], arrived, kt_ms(5000))) << "rank 1 never entered the all-reduce";
  double revoked_at = now_ms();
  EXPECT_EQ(koloCommRevoke(w.comms[1], KOLO_REVOKE_DEFAULT), koloSuccess) << koloGetLastError(w.comms[1]);
  rank1.join();
  EXPECT_NE(in_flight, koloSuccess);
  EXPECT_LT(done_at - revoked_at, kt_ms(3000)) << koloGetLastError(w.comms[1]);
  EXPECT_EQ(wait_async(w.comms[1]), koloSuccess);
  float y = 1;
  EXPECT_EQ(koloAllReduce(&y, &y, 1, koloFloat32, koloSum, w.comms[1], nullptr), koloInvalidUsage);
  EXPECT_NE(std::string(koloGetLastError(w.comms[1])).find("koloCommRevoke"), std::string::npos);
  EXPECT_EQ(koloCommFinalize(w.comms[1]), koloInvalidUsage);
  EXPECT_EQ(koloCommRevoke(w.comms[0], KOLO_REVOKE_DEFAULT), koloSuccess);
  std::vector<koloComm_t> sub(2, nullptr);
  std::vector<koloResult_t> res(2);
  w.pool.run([&](int r) { res[r] = koloCommShrink(w.comms[r], nullptr, 0, &sub[r], nullptr, KOLO_SHRINK_DEFAULT); });
  for (int r = 0; r < 2; r++) ASSERT_EQ(res[r], koloSuccess) << koloGetLastError(w.comms[r]);
  CollCase c = make_case(Coll::AllReduce, koloInt32, koloSum, 2, 4095, true, 2);
  Expected e;
  expected_for(c, &e);
  std::vector<std::string> errs(2);
  w.pool.run([&](int r) { errs[r] = run_rank(c, r, sub[r], e); });
  for (int r = 0; r < 2; r++) EXPECT_EQ(errs[r], "") << "rank " << r;
  for (koloComm_t s : sub) koloCommDestroy(s);
}

// A non-blocking communicator: revoking stops its queued call; the async
// state goes from koloInProgress to koloSuccess within a bounded time.
TEST(ThreadsRevoke, NonBlockingDrainsThenSucceeds) {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.timeoutMs = 20000;
  ThreadWorld w(2, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<float> x(1 << 20, 1.0f);
  const uint64_t arrived = kt_slices_in(w.comms[0]);
  ASSERT_EQ(koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, w.comms[1], nullptr), koloInProgress);
  // The queued call runs once its first slices reach rank 0's pipes.
  EXPECT_TRUE(kt_wait_slices_in(w.comms[0], arrived, kt_ms(5000))) << "rank 1's call never started";
  double t0 = now_ms();
  EXPECT_EQ(koloCommRevoke(w.comms[1], KOLO_REVOKE_DEFAULT), koloSuccess);
  EXPECT_EQ(wait_async(w.comms[1]), koloSuccess);
  EXPECT_LT(now_ms() - t0, kt_ms(3000));
}

// 5 ranks; ranks 1 and 3 are excluded (alive, they just do not take part);
// ranks 0, 2, 4 shrink into ranks 0, 1, 2 of a new communicator, in the
// parent's order, and run every collective on it, checked.
TEST(ThreadsShrink, ExcludedRanksStayOut) {
  const int n = 5;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  int excluded[] = {3, 1};
  std::vector<koloComm_t> sub((size_t)n, nullptr);
  std::vector<koloResult_t> res((size_t)n, koloSuccess);
  w.pool.run([&](int r) {
    if (r % 2 == 0) res[r] = koloCommShrink(w.comms[r], excluded, 2, &sub[r], nullptr, KOLO_SHRINK_DEFAULT);
  });
  for (int r = 0; r < n; r += 2) {
    ASSERT_EQ(res[r], koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[r]);
    int rank = -1, count = -1;
    EXPECT_EQ(koloCommUserRank(sub[r], &rank), koloSuccess);
    EXPECT_EQ(koloCommCount(sub[r], &count), koloSuccess);
    EXPECT_EQ(rank, r / 2);
    EXPECT_EQ(count, 3);
  }
  std::vector<std::string> errs((size_t)n);
  Expected e;
  for (const CollCase &c : sample_cases(3, {1, 4095, 100001})) {
    expected_for(c, &e);
    w.pool.run([&](int r) { errs[r] = r % 2 ? "" : run_rank(c, r / 2, sub[r], e); });
    for (int r = 0; r < n; r += 2) EXPECT_EQ(errs[r], "") << c.str() << ", parent rank " << r;
  }
  for (koloComm_t s : sub)
    if (s) koloCommDestroy(s);
}
