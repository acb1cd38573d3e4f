// test_e2e_peers.cc - end-to-end tests of the collectives whose programs
// talk to several peers (all-to-all, gather, scatter: ring/program.h's
// multi-peer programs over point-to-point pipes) and of koloBcast, with ranks
// as threads of this process on host communicators.  util/coll_run.h says
// what is checked per call: every element against a reference computed
// independently, outputs poisoned first, guard bytes, inputs unchanged, a
// non-root's unused buffer (NULL in half the cases) untouched, the root's
// other blocks of an in-place scatter unchanged.
//
//   PeerGrid         every new collective x ranks {1,2,3,4,8}: counts {0, 1,
//                    7, 4095}, every dtype at 7 and a third of them at the
//                    others, in and out of place where NCCL has them, roots
//                    over the grid, a third of the buffers misaligned
//   PeerLargeGrid    1 MiB + 3 elements (all-to-all: per rank in all), ranks
//                    {2, 3, 8}; skipped under sanitizers
//   PeerGroups       one thread issuing every rank's call in one group; and
//                    each rank's thread issuing, in one group, the new
//                    collectives between send/recv pairs and ring collectives
//                    that share their pipes (the order on a pipe is the issue
//                    order on both ends)
//   PeerNonBlocking  config.blocking = 0: calls return koloInProgress and
//                    complete on the progress threads
//   PeerTimeout      a rank that never calls: the root's gather fails within
//                    the timeout, naming it
//   PeerPipes        point-to-point pipes have KOLO_P2P_BUFFSIZE's slots, the
//                    ring's KOLO_BUFFSIZE's; calls many times their ring
//                    still come out right
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/comm_peek.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);

using Param = std::tuple<Coll, int>;
std::string param_name(const ::testing::TestParamInfo<Param> &p) {
  return std::string(coll_name(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
}

class PeerGrid : public ::testing::TestWithParam<Param> {};

TEST_P(PeerGrid, SmallCounts) {
  auto [coll, n] = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  GridReport rep = run_grid(w, peer_grid(coll, n));
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(Threads, PeerGrid,
                         ::testing::Combine(::testing::ValuesIn(kPeerColls), ::testing::Values(1, 2, 3, 4, 8)),
                         param_name);

class PeerLargeGrid : public ::testing::TestWithParam<Param> {};

TEST_P(PeerLargeGrid, OneMiBPlus3) {
  if (sanitized_build()) GTEST_SKIP() << "large counts skipped in sanitizer builds (KOLO_TEST_FULL=1 runs them)";
  auto [coll, n] = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  std::vector<CollCase> all = peer_grid(coll, n, true), big(all.end() - 2, all.end());
  GridReport rep = run_grid(w, big);
  EXPECT_GRID_OK(rep);
}

INSTANTIATE_TEST_SUITE_P(Threads, PeerLargeGrid,
                         ::testing::Combine(::testing::ValuesIn(kPeerColls), ::testing::Values(2, 3, 8)),
                         param_name);

// ---- the point-to-point pipes' own slots ---------------------------------------------

// 3 ranks, 2 channels, point-to-point rings of 8 x 8 KiB beside the ring's
// 8 x 64 KiB: all-to-all, gather, scatter and send/recv of counts that wrap
// the small ring many times (and of 1 element), checked, and then every
// pipe made has the slots of its kind.
TEST(PeerPipes, PointToPointPipesHaveTheirOwnSlots) {
  ScopedEnv ring("KOLO_BUFFSIZE", "524288"), p2p("KOLO_P2P_BUFFSIZE", "65536"), chans("KOLO_NCHANNELS", "2"),
      minch("KOLO_MIN_CHANNEL_BYTES", "4096");
  const int n = 3;
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  ASSERT_EQ(kt_comm_p2p_slot_bytes(w.comms[0]), 8192u);
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : {Coll::AlltoAll, Coll::Gather, Coll::Scatter, Coll::SendRecv, Coll::AllReduce})
    for (size_t count : {(size_t)1, (size_t)100003}) cases.push_back(make_case(coll, koloFloat32, koloSum, n, count, false, v++));
  GridReport rep = run_grid(w, cases);
  EXPECT_GRID_OK(rep);
  int p2p_pipes = 0;
  for (int r = 0; r < n; r++)
    for (int ch = 0; ch < 2; ch++) {
      EXPECT_EQ(kt_pipe_slot_bytes(w.comms[(size_t)r], 0, 0, ch, 1), 65536u) << "rank " << r << " ring channel " << ch;
      for (int peer = 0; peer < n; peer++)
        for (int send : {0, 1}) {
          size_t b = kt_pipe_slot_bytes(w.comms[(size_t)r], 1, peer, ch, send);
          if (b == 0) continue;
          p2p_pipes++;
          EXPECT_EQ(b, 8192u) << "rank " << r << (send ? " to " : " from ") << peer << " channel " << ch;
        }
    }
  EXPECT_GE(p2p_pipes, 2 * n * (n - 1)) << "the all-to-all made a pipe each way between every two ranks";
}

// KOLO_P2P_BUFFSIZE above KOLO_BUFFSIZE: the ring's slots, not more; below
// 8 slots of 4 KiB: refused, naming the variable.
TEST(PeerPipes, P2pBuffsizeIsBounded) {
  {
    ScopedEnv ring("KOLO_BUFFSIZE", "65536"), p2p("KOLO_P2P_BUFFSIZE", "16777216");
    ThreadWorld w(2);
    ASSERT_TRUE(w.ok()) << w.init_error;
    EXPECT_EQ(kt_comm_p2p_slot_bytes(w.comms[0]), 8192u);
  }
  ScopedEnv p2p("KOLO_P2P_BUFFSIZE", "16384");
  ThreadWorld w(2);
  EXPECT_EQ(w.init_result, koloInvalidArgument);
  EXPECT_NE(w.init_error.find("KOLO_P2P_BUFFSIZE = 16384"), std::string::npos) << w.init_error;
}

// ---- groups -----------------------------------------------------------------------

class PeerGroups : public ::testing::TestWithParam<int> {};

TEST_P(PeerGroups, OneThreadIssuesEveryRank) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases;
  int v = 1;
  for (Coll coll : kPeerColls)
    for (size_t count : {(size_t)5, (size_t)70001})
      for (bool ip : {false, true})
        if (ip ? has_in_place(coll) : has_out_of_place(coll)) {
          cases.push_back(make_case(coll, v % 2 ? koloFloat32 : koloInt8, koloSum, n, count, ip, v));
          v++;
        }
  EXPECT_EQ(run_one_thread_group(w, cases), "");
}

// Each rank's thread: one group of a send/recv shift, two all-to-alls,
// gather, another send/recv shift, scatter, an all-reduce, bcast and an
// all-to-all again; the send/recv pairs and the multi-peer collectives share
// the point-to-point pipes of each pair of ranks, in issue order.
TEST_P(PeerGroups, MixedWithSendRecvAndRings) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (int round = 0; round < 2; round++) {
    const size_t counts[] = {3, 4095, 100003};
    int v = 20 * round + 1;
    std::vector<CollCase> cases = {
        make_case(Coll::SendRecv, koloUint32, koloSum, n, counts[round], false, v++),
        make_case(Coll::AlltoAll, koloFloat32, koloSum, n, counts[round + 1], false, v++),
        make_case(Coll::AlltoAll, koloFloat32, koloSum, n, counts[round + 1], false, v++),
        make_case(Coll::Gather, koloBfloat16, koloSum, n, counts[round], round == 1, v++),
        make_case(Coll::SendRecv, koloInt8, koloSum, n, counts[2 - round], false, v++),
        make_case(Coll::Scatter, koloInt64, koloSum, n, counts[round + 1], round == 0, v++),
        make_case(Coll::AllReduce, koloInt32, koloMax, n, counts[round], true, v++),
        make_case(Coll::Bcast, koloFloat16, koloSum, n, counts[2 - round], true, v++),
        make_case(Coll::AlltoAll, koloUint8, koloSum, n, counts[round], false, v++)};
    std::vector<std::string> errs = run_cases_in_one_group(w, cases);
    for (int r = 0; r < n; r++) EXPECT_EQ(errs[r], "") << "round " << round << ", rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, PeerGroups, ::testing::Values(1, 3, 4),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// ---- non-blocking communicators ---------------------------------------------------

class PeerNonBlocking : public ::testing::TestWithParam<int> {};

TEST_P(PeerNonBlocking, CallsReturnInProgressThenComplete) {
  const int n = GetParam();
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  std::vector<CollCase> cases;
  int v = 3;
  for (Coll coll : kPeerColls)
    for (size_t count : {(size_t)7, (size_t)250001})
      cases.push_back(make_case(coll, koloFloat64, koloSum, n, count, coll == Coll::Bcast, v++));
  std::vector<std::vector<RankBufs>> bufs(cases.size());
  for (size_t i = 0; i < cases.size(); i++) {
    bufs[i] = std::vector<RankBufs>((size_t)n);
    for (int r = 0; r < n; r++) {
      prepare(cases[i], r, &bufs[i][r]);
      koloResult_t res = issue(cases[i], r, &bufs[i][r], w.comms[r]);
      ASSERT_EQ(res, koloInProgress) << cases[i].str() << " rank " << r << ": " << koloGetLastError(w.comms[r]);
    }
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
  for (size_t i = 0; i < cases.size(); i++) {
    expected_for(cases[i], &e);
    for (int r = 0; r < n; r++) EXPECT_EQ(check(cases[i], r, bufs[i][r], e), "") << cases[i].str() << " rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, PeerNonBlocking, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// ---- a peer that never calls ------------------------------------------------------

// 3 ranks, 2 s timeout: after a gather to rank 0 on every rank (the pipes
// exist), ranks 0 and 1 call it again and rank 2 does not.  The root's call
// fails within the timeout and a bound, naming rank 2; rank 1's send fits
// in its pipe and completes.
TEST(ThreadsPeerTimeout, RootNamesTheRankThatNeverCalls) {
  const int n = 3, timeout_ms = 2000;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = timeout_ms;
  ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
  ASSERT_TRUE(w.ok()) << w.init_error;
  CollCase c = make_case(Coll::Gather, koloInt32, koloSum, n, 1000, false, 3);
  c.root = 0;
  seed_case(&c);
  GridReport warm = run_grid(w, {c});
  ASSERT_GRID_OK(warm) << " (warm-up with every rank)";
  std::vector<koloResult_t> res((size_t)n, koloSuccess);
  std::vector<double> ms((size_t)n, 0);
  w.pool.run([&](int r) {
    if (r == 2) return;
    RankBufs b;
    prepare(c, r, &b);
    double t0 = now_ms();
    res[(size_t)r] = issue(c, r, &b, w.comms[(size_t)r]);
    ms[(size_t)r] = now_ms() - t0;
  });
  EXPECT_EQ(res[1], koloSuccess) << koloGetLastError(w.comms[1]);
  EXPECT_EQ(res[0], koloTimeout) << koloGetLastError(w.comms[0]);
  EXPECT_NE(std::string(koloGetLastError(w.comms[0])).find("rank 2"), std::string::npos) << koloGetLastError(w.comms[0]);
  EXPECT_GE(ms[0], timeout_ms * 0.9);
  EXPECT_LT(ms[0], timeout_ms + 5000);
}

}  // namespace
