// test_schedule_check.cc - the schedule checker (ring/check.h): every
// built-in schedule passes it at every rank count 1..16 (every root, rings
// in and out of order, one ring per channel); broken programs are refused
// with the sentence that names what is wrong (a dropped step, a swapped
// chunk, a wrong peer, a double reduction, a missing post-op, a deadlock, a
// buffer the collective does not give, an in-place hazard); out-of-bound
// sizes are refused.  The hierarchical all-reduce's three phases, in
// sequence, are proved too.  The cross-check against tests/test_schedule.cc's model
// is there (ScheduleChecker.*), beside the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "ring/algo.h"
#include "ring/check.h"
#include "ring/schedule.h"
#include "ring/step_names.h"
#include "ring/topology.h"
}

namespace {

// A kolo_ring that owns its arrays.
struct Ring {
  std::vector<int> order, pos;
  kolo_ring r{};
  explicit Ring(std::vector<int> o) : order(std::move(o)), pos(order.size()) {
    for (size_t i = 0; i < order.size(); i++) pos[(size_t)order[i]] = (int)i;
    r = kolo_ring{(int)order.size(), order.data(), pos.data()};
  }
  Ring(const Ring &) = delete;
};

std::vector<int> ring_order(int n, uint64_t seed) {
  std::vector<int> o((size_t)n);
  std::iota(o.begin(), o.end(), 0);
  if (seed) std::shuffle(o.begin(), o.end(), std::mt19937_64(seed));
  return o;
}

// The programs of one collective: [channel * n + rank].
struct Progs {
  int coll, n, root, peer, nch;
  std::vector<kolo_program> p;
  Progs(int coll_, int n_, int root_, int peer_, int nch_)
      : coll(coll_), n(n_), root(root_), peer(peer_), nch(nch_), p((size_t)(n_ * nch_), kolo_program{}) {}
  Progs(const Progs &) = delete;
  ~Progs() {
    for (kolo_program &q : p) kolo_program_free(&q);
  }
  kolo_program &at(int ch, int r) { return p[(size_t)(ch * n + r)]; }
  std::string check() const {
    std::vector<const kolo_program *> ptrs;
    for (const kolo_program &q : p) ptrs.push_back(&q);
    kolo_check_spec s{coll, n, root, peer, nch, ptrs.data()};
    char why[1024];
    koloResult_t res = kolo_schedule_check(&s, why, sizeof why);
    if (res == koloSuccess) EXPECT_STREQ(why, "");
    else EXPECT_NE(why[0], '\0');
    return res == koloSuccess ? "" : why;
  }
};

bool is_p2p(int coll) { return coll == KOLO_COLL_SEND || coll == KOLO_COLL_RECV; }

// Built-in programs; channel ch on a ring shuffled by seed + ch (seed 0:
// rank order).  Send/recv: root sends to peer, the others have no steps.
std::unique_ptr<Progs> builtin(int coll, int n, int root, int nch = 1, uint64_t seed = 0, int peer = -1,
                               int algo = KOLO_ALGO_RING) {
  auto ps = std::make_unique<Progs>(coll, n, root, peer, nch);
  for (int ch = 0; ch < nch; ch++) {
    Ring ring(ring_order(n, seed ? seed + (uint64_t)ch : 0));
    for (int r = 0; r < n; r++) {
      kolo_program &q = ps->at(ch, r);
      koloResult_t res = koloSuccess;
      if (!is_p2p(coll)) res = kolo_schedule_build(coll, &ring.r, r, root, algo, &q);
      else if (r == root) res = kolo_schedule_build(KOLO_COLL_SEND, &ring.r, r, peer, KOLO_ALGO_RING, &q);
      else if (r == peer) res = kolo_schedule_build(KOLO_COLL_RECV, &ring.r, r, root, KOLO_ALGO_RING, &q);
      else res = kolo_program_alloc(&q, 0, KOLO_LAYOUT_FLAT);
      EXPECT_EQ(res, koloSuccess);
    }
  }
  return ps;
}

const int kColls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER,
                      KOLO_COLL_BROADCAST,  KOLO_COLL_REDUCE,         KOLO_COLL_ALL_TO_ALL,
                      KOLO_COLL_GATHER,     KOLO_COLL_SCATTER};

bool rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER;
}

TEST(ScheduleCheck, EveryOpHasAName) {
  for (int op = 0; op < KOLO_STEP_NUM_OPS; op++) {
    const char *name = kolo_step_op_name(op);
    ASSERT_NE(name, nullptr) << "op " << op << " has no name in ring/step_names.c";
    EXPECT_EQ(kolo_step_op_parse(name, strlen(name)), op);
  }
  EXPECT_EQ(kolo_step_op_name(KOLO_STEP_NUM_OPS), nullptr);
  EXPECT_EQ(kolo_step_op_parse("sendx", 5), -1);
  EXPECT_EQ(kolo_step_op_parse("send", 3), -1);
  EXPECT_TRUE(kolo_step_post_applies(KOLO_STEP_COPY));
  EXPECT_TRUE(kolo_step_post_applies(KOLO_STEP_RECV_REDUCE_COPY_SEND));
  EXPECT_FALSE(kolo_step_post_applies(KOLO_STEP_RECV_REDUCE_SEND));
  EXPECT_FALSE(kolo_step_post_applies(KOLO_STEP_COPY_SEND));
  EXPECT_FALSE(kolo_step_post_applies(KOLO_STEP_RECV));
}

// The algorithms of coll whose programs kolo_schedule_build makes (hier's
// three: HierarchicalAllReduceInSequence).
std::vector<int> algos_of(int coll) {
  if (coll == KOLO_COLL_ALL_REDUCE)
    return {KOLO_ALGO_RING, KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT, KOLO_ALGO_ONESHOT};
  if (coll == KOLO_COLL_BROADCAST) return {KOLO_ALGO_RING, KOLO_ALGO_TREE};
  if (coll == KOLO_COLL_REDUCE) return {KOLO_ALGO_RING, KOLO_ALGO_TREE, KOLO_ALGO_DBTREE};
  if (coll == KOLO_COLL_ALL_GATHER) return {KOLO_ALGO_RING, KOLO_ALGO_BRUCK};
  return {KOLO_ALGO_RING};
}

// Every built-in schedule, every algorithm, every rank count 1..16, every
// root, rings in rank order and shuffled, one and three channels (one ring
// each).
TEST(ScheduleCheck, EveryBuiltinScheduleIsProved) {
  auto t0 = std::chrono::steady_clock::now();
  int cases = 0;
  for (int n = 1; n <= 16; n++)
    for (int coll : kColls)
      for (int algo : algos_of(coll))
        for (int root = 0; root < (rooted(coll) ? n : 1); root++)
          for (uint64_t seed : {0, 7}) {
            auto ps = builtin(coll, n, root, seed ? 3 : 1, seed, -1, algo);
            ASSERT_EQ(ps->check(), "") << kolo_coll_name(coll) << " " << kolo_algo_name(algo) << " n=" << n
                                       << " root=" << root;
            cases++;
          }
  for (int n = 2; n <= 16; n++)
    for (int from = 0; from < n; from++)
      for (int to = 0; to < n; to++)
        if (from != to) {
          auto ps = builtin(KOLO_COLL_SEND, n, from, 2, 0, to);
          ASSERT_EQ(ps->check(), "") << "send/recv n=" << n << " " << from << "->" << to;
          cases++;
        }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %d schedules proved in %lld ms\n", cases, (long long)ms);
}

// The hierarchical all-reduce runs three programs per rank one after the
// other (all_reduce_hier.c); its intra-host and inter-host pipes never join
// the same two ranks, so the three in sequence are one multi-peer program
// with the peers of all three: proved as such, H x L = 2..4 x 2..4, hosts in
// blocks and interleaved.
void append_as_multi_peer(const kolo_program &ph, std::vector<kolo_step> *steps, std::vector<int> *peers) {
  for (int i = 0; i < ph.nsteps; i++) {
    kolo_step s = ph.steps[i];
    for (int send = 0; send < 2; send++) {
      int rank = send ? kolo_step_send_rank(&ph, &s) : kolo_step_recv_rank(&ph, &s);
      if (rank < 0) continue;
      auto it = std::find(peers->begin(), peers->end(), rank);
      if (it == peers->end()) it = peers->insert(peers->end(), rank);
      (send ? s.to : s.from) = (uint16_t)(it - peers->begin());
    }
    steps->push_back(s);
  }
}

// The broadcast tree (ring/bcast_tree.c), every rank count 1..16, every
// root, on 1 and 3 channels; and one whose inner rank forwards nothing.
TEST(ScheduleCheck, TreeBroadcastIsProved) {
  for (int n = 1; n <= 16; n++)
    for (int root = 0; root < n; root++)
      for (int nch : {1, 3}) {
        auto ps = builtin(KOLO_COLL_BROADCAST, n, root, nch, 0, -1, KOLO_ALGO_TREE);
        ASSERT_EQ(ps->check(), "") << "n=" << n << " root=" << root << " nch=" << nch;
      }
  auto ps = builtin(KOLO_COLL_BROADCAST, 6, 2, 1, 0, -1, KOLO_ALGO_TREE);
  kolo_program &inner = ps->at(0, 3); /* v = 1: receives from the root, sends to v = 3 and 5 */
  ASSERT_EQ(inner.nsteps, 2);
  inner.nsteps = 1;
  EXPECT_NE(ps->check(), "");
}

// Bruck's all-gather (ring/all_gather_bruck.c) is proved with the rest
// (EveryBuiltinScheduleIsProved); here, what its order is for: with every
// level's sends before its receives, a level of more than two blocks
// (8 ranks, level 2: four) fills the pipe of two chunks on every rank and
// none receives.  And a rank that drops a receive leaves its block unset.
TEST(ScheduleCheck, BruckAllGatherOrderMatters) {
  auto ps = builtin(KOLO_COLL_ALL_GATHER, 8, 0, 1, 0, -1, KOLO_ALGO_BRUCK);
  ASSERT_EQ(ps->check(), "");
  for (int r = 0; r < 8; r++) {
    kolo_program &p = ps->at(0, r);
    ASSERT_EQ(p.nsteps, 14);
    std::stable_partition(p.steps + 6, p.steps + 14, [](const kolo_step &s) { return kolo_step_sends(s.op) != 0; });
  }
  EXPECT_NE(ps->check().find("deadlock"), std::string::npos) << ps->check();
  auto dropped = builtin(KOLO_COLL_ALL_GATHER, 5, 0, 1, 0, -1, KOLO_ALGO_BRUCK);
  kolo_program &p = dropped->at(0, 2);
  ASSERT_EQ(p.steps[p.nsteps - 1].op, KOLO_STEP_RECV);
  p.nsteps--;
  kolo_program_index_peers(&p);
  EXPECT_NE(dropped->check(), "");
}

TEST(ScheduleCheck, HierarchicalAllReduceInSequence) {
  for (int H = 2; H <= 4; H++)
    for (int L = 2; L <= 4; L++)
      for (bool interleaved : {false, true}) {
        const int n = H * L;
        std::vector<uint64_t> ids((size_t)n);
        for (int r = 0; r < n; r++) ids[(size_t)r] = 77 + (uint64_t)(interleaved ? r % H : r / L);
        kolo_hosts h;
        ASSERT_EQ(kolo_hosts_build(n, ids.data(), &h), koloSuccess);
        Progs ps(KOLO_COLL_ALL_REDUCE, n, 0, -1, 1);
        for (int r = 0; r < n; r++) {
          kolo_ring intra, inter;
          ASSERT_EQ(kolo_ring_build_intra(&h, r, &intra), koloSuccess);
          ASSERT_EQ(kolo_ring_build_inter(&h, r, &inter), koloSuccess);
          std::vector<kolo_step> steps;
          std::vector<int> peers;
          for (int k = 0; k < KOLO_HIER_PHASES; k++) {
            kolo_program ph{};
            ASSERT_EQ(kolo_sched_all_reduce_hier(&intra, &inter, r, k, &ph), koloSuccess);
            append_as_multi_peer(ph, &steps, &peers);
            kolo_program_free(&ph);
          }
          kolo_program &p = ps.at(0, r);
          ASSERT_EQ(kolo_program_alloc(&p, (int)steps.size(), KOLO_LAYOUT_RING), koloSuccess);
          std::copy(steps.begin(), steps.end(), p.steps);
          ASSERT_EQ(kolo_program_alloc_peers(&p, (int)peers.size()), koloSuccess);
          for (size_t i = 0; i < peers.size(); i++) p.peers[i].rank = peers[i];
          kolo_program_index_peers(&p);
          kolo_ring_free(&intra);
          kolo_ring_free(&inter);
        }
        kolo_hosts_free(&h);
        EXPECT_EQ(ps.check(), "") << "H=" << H << " L=" << L << (interleaved ? " interleaved" : " blocks");
      }
}

// ---- broken programs and their sentences -----------------------------------

void drop_step(kolo_program &p, int i) {
  for (int k = i; k + 1 < p.nsteps; k++) p.steps[k] = p.steps[k + 1];
  p.nsteps--;
}

TEST(ScheduleCheck, DroppedStep) {
  // Rank 2 of a 4-rank ring all-reduce forgets its last receive: rank 1's
  // last chunk stays in the pipe.
  auto ps = builtin(KOLO_COLL_ALL_REDUCE, 4, 0);
  drop_step(ps->at(0, 2), ps->at(0, 2).nsteps - 1);
  EXPECT_EQ(ps->check(),
            "AllReduce on 4 ranks: rank 1 step 5 (recvCopySend from rank 0 to rank 2) sends a chunk rank 2 never "
            "receives: rank 1 sends rank 2 more chunks per round than rank 2 receives from it");
}

TEST(ScheduleCheck, DroppedFirstStepDeadlocks) {
  // Rank 0 never sends its block: rank 1 waits for one more chunk from it.
  auto ps = builtin(KOLO_COLL_ALL_GATHER, 3, 0);
  drop_step(ps->at(0, 0), 0);
  EXPECT_EQ(ps->check(), "AllGather on 3 ranks: deadlock: rank 1 step 2 (recv from rank 0) waits for a send from "
                         "rank 0, which has finished; every other rank has finished");
}

TEST(ScheduleCheck, SwappedChunk) {
  // Flat layout (all-gather): rank 1 keeps rank 0's block where rank 3's
  // belongs.
  auto ps = builtin(KOLO_COLL_ALL_GATHER, 4, 0);
  kolo_program &p = ps->at(0, 1);
  for (int i = 0; i < p.nsteps; i++)
    if (p.steps[i].dst_chunk == 3) p.steps[i].dst_chunk = 0;
  EXPECT_EQ(ps->check(),
            "AllGather on 4 ranks: rank 1 OUT block 0 element 0 got rank 3's IN element 0, should have rank 0's "
            "IN element 0");
}

TEST(ScheduleCheck, SwappedChunkInTheRingLayoutPutsThePipeOutOfStep) {
  auto ps = builtin(KOLO_COLL_ALL_REDUCE, 4, 0);
  kolo_program &p = ps->at(0, 0);
  std::swap(p.steps[1].src_chunk, p.steps[2].src_chunk);
  std::swap(p.steps[1].dst_chunk, p.steps[2].dst_chunk);
  EXPECT_EQ(ps->check(),
            "AllReduce on 4 ranks: rank 0 step 1 (recvReduceSend from rank 3 to rank 1) takes as chunk 1 what rank "
            "3 step 0 (send to rank 0) sent as chunk 2: in the ring layout they differ in size in a round's last "
            "chunks, and the pipe's two ends fall out of step");
}

TEST(ScheduleCheck, WrongPeer) {
  // All-to-all on 4 ranks: rank 0 sends its block for rank 2 to rank 3.
  auto ps = builtin(KOLO_COLL_ALL_TO_ALL, 4, 0);
  kolo_program &p = ps->at(0, 0);
  ASSERT_EQ(p.peers[1].rank, 2);
  for (int i = 0; i < p.nsteps; i++)
    if (p.steps[i].op == KOLO_STEP_SEND && p.steps[i].to == 1) p.steps[i].to = 2;
  kolo_program_index_peers(&p);
  EXPECT_EQ(ps->check(), "AlltoAll on 4 ranks: deadlock: rank 1 step 5 (recv from rank 2) waits for rank 2 (at its "
                         "step 3); rank 2 step 3 (recv from rank 0) waits for a send from rank 0, which has finished; "
                         "every other rank has finished");
}

TEST(ScheduleCheck, DoubleReduce) {
  // Rank 2 adds its input again where it should only forward the finished
  // chunk (recvCopySend -> recvReduceCopySend).
  auto ps = builtin(KOLO_COLL_ALL_REDUCE, 4, 0);
  kolo_program &p = ps->at(0, 2);
  ASSERT_EQ(p.steps[4].op, KOLO_STEP_RECV_COPY_SEND);
  p.steps[4].op = KOLO_STEP_RECV_REDUCE_COPY_SEND;
  p.steps[4].src_buf = KOLO_BUF_IN;
  EXPECT_EQ(ps->check(),
            "AllReduce on 4 ranks: rank 0 OUT chunk 1 element 0 got every rank's IN chunk 1 element 0, 5 terms "
            "(some counted more than once), post-op applied once, reduced after its post-op, should have every "
            "rank's IN chunk 1 element 0 once, post-op applied once");
}

TEST(ScheduleCheck, MissingAndDoublePostOp) {
  auto ps = builtin(KOLO_COLL_REDUCE_SCATTER, 3, 0);
  ps->at(0, 1).steps[2].flags = 0;
  EXPECT_EQ(ps->check(),
            "ReduceScatter on 3 ranks: rank 1 OUT element 0 got every rank's IN block 1 element 0 once, post-op "
            "applied 0 times, should have every rank's IN block 1 element 0 once, post-op applied once");
  // A copy of a collective that only copies divides.
  auto ag = builtin(KOLO_COLL_ALL_GATHER, 1, 0);
  ag->at(0, 0).steps[0].flags = KOLO_STEP_FINAL;
  EXPECT_EQ(ag->check(), "AllGather on 1 ranks: rank 0 OUT element 0 got rank 0's IN element 0, post-op applied "
                         "once, should have rank 0's IN element 0");
}

TEST(ScheduleCheck, RingReceivesFirstDeadlocks) {
  auto ps = builtin(KOLO_COLL_ALL_REDUCE, 3, 0, 2, 5);
  for (int r = 0; r < 3; r++) {
    kolo_program &p = ps->at(1, r);
    std::rotate(p.steps, p.steps + 1, p.steps + p.nsteps);
  }
  std::string why = ps->check();
  EXPECT_EQ(why.rfind("AllReduce on 3 ranks, channel 1: deadlock: rank 0 step 0 (recvReduceSend from rank ", 0), 0u)
      << why;
  EXPECT_EQ(why.find("every other rank"), std::string::npos) << why;
}

TEST(ScheduleCheck, BuffersTheCollectiveDoesNotGive) {
  auto ps = builtin(KOLO_COLL_BROADCAST, 3, 0);
  ps->at(0, 2).steps[0].op = KOLO_STEP_RECV_REDUCE_COPY;  // reads the input a non-root does not have
  EXPECT_EQ(ps->check(),
            "Broadcast (root 0) on 3 ranks: rank 2 step 0 (recvReduceCopy from rank 1) reads IN, which this "
            "collective does not give rank 2");
  auto rd = builtin(KOLO_COLL_REDUCE, 3, 0);
  rd->at(0, 1).steps[0].op = KOLO_STEP_COPY_SEND;  // writes the output a non-root does not have
  EXPECT_EQ(rd->check(),
            "Reduce (root 0) on 3 ranks: rank 1 step 0 (copySend to rank 2) writes OUT, which this collective does "
            "not give rank 1");
  auto ag = builtin(KOLO_COLL_ALL_GATHER, 2, 0);
  ag->at(0, 0).steps[1].dst_buf = KOLO_BUF_IN;
  EXPECT_EQ(ag->check(),
            "AllGather on 2 ranks: rank 0 step 1 (recv from rank 1) writes IN, which no step may (inputs are "
            "read-only)");
  auto ar = builtin(KOLO_COLL_ALL_REDUCE, 2, 0);
  ar->at(0, 0).in_blocked = 0;
  ar->at(0, 0).layout = KOLO_LAYOUT_FLAT;  // a layout of its own
  EXPECT_EQ(ar->check(),
            "AllReduce on 2 ranks: rank 1 channel 0: its layout is ring, rank 0's (channel 0) flat: a round's "
            "chunks would not line up");
}

// Two ranks, flat all-reduce: each adds the other's input into its output,
// rank 1 then sends its input on.  Right out of place; in place rank 1's
// input is its sum by then.
TEST(ScheduleCheck, InPlaceHazard) {
  Progs ps(KOLO_COLL_ALL_REDUCE, 2, 0, -1, 1);
  for (int r = 0; r < 2; r++) {
    kolo_program &p = ps.at(0, r);
    ASSERT_EQ(kolo_program_alloc(&p, 2, KOLO_LAYOUT_FLAT), koloSuccess);
    ASSERT_EQ(kolo_program_alloc_peers(&p, 1), koloSuccess);
    p.peers[0].rank = 1 - r;
    int send = r == 0 ? 0 : 1, recv = 1 - send;
    kolo_program_set(&p, send, KOLO_STEP_SEND, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
    kolo_program_set(&p, recv, KOLO_STEP_RECV_REDUCE_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
    kolo_program_index_peers(&p);
  }
  EXPECT_EQ(ps.check(),
            "AllReduce on 2 ranks, in place: rank 0 OUT element 0 got every rank's IN element 0, 3 terms (some "
            "counted more than once), post-op applied 2 times, reduced after its post-op, should have every "
            "rank's IN element 0 once, post-op applied once");
}

TEST(ScheduleCheck, MalformedPrograms) {
  auto ps = builtin(KOLO_COLL_ALL_REDUCE, 3, 0);
  ps->at(0, 1).steps[2].op = 99;
  EXPECT_EQ(ps->check(), "AllReduce on 3 ranks: rank 1 channel 0 step 2 (no op): op 99 is no step op");
  ps = builtin(KOLO_COLL_ALL_REDUCE, 3, 0);
  ps->at(0, 1).steps[2].src_chunk = ps->at(0, 1).steps[2].dst_chunk = 3;
  EXPECT_EQ(ps->check(), "AllReduce on 3 ranks: rank 1 channel 0 step 2 (recvReduceCopySend): its src chunk IN[3] is "
                         "outside 0..2");
  ps = builtin(KOLO_COLL_ALL_REDUCE, 3, 0);
  ps->at(0, 1).steps[2].dst_chunk = 0;
  EXPECT_EQ(ps->check(), "AllReduce on 3 ranks: rank 1 channel 0 step 2 (recvReduceCopySend): in the ring layout its "
                         "src chunk 1 and dst chunk 0 differ in size in a round's last chunks: give both one index");
  ps = builtin(KOLO_COLL_ALL_REDUCE, 3, 0);
  ps->at(0, 2).send_peer = 5;
  EXPECT_EQ(ps->check(), "AllReduce on 3 ranks: rank 2 channel 0 step 0 (send): it sends to rank 5, which is no rank "
                         "of 3");
  ps = builtin(KOLO_COLL_SCATTER, 3, 1);
  ps->at(0, 1).steps[0].to = 7;
  EXPECT_EQ(ps->check(), "Scatter (root 1) on 3 ranks: rank 1 channel 0 step 0 (send): it sends to peer 7 of a "
                         "program with 2 peers");
}

TEST(ScheduleCheck, OutOfBounds) {
  std::vector<const kolo_program *> none(300, nullptr);
  kolo_check_spec s{KOLO_COLL_ALL_REDUCE, 300, 0, 0, 1, none.data()};
  char why[256];
  EXPECT_EQ(kolo_schedule_check(&s, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "AllReduce on 300 ranks: 300 ranks is outside the checker's 1..256");
  s = kolo_check_spec{KOLO_COLL_BROADCAST, 4, 4, 0, 1, none.data()};
  EXPECT_EQ(kolo_schedule_check(&s, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "Broadcast (root 4) on 4 ranks: the root (or sender) 4 is no rank of 4");
  s = kolo_check_spec{KOLO_COLL_SEND, 4, 1, 1, 1, none.data()};
  EXPECT_EQ(kolo_schedule_check(&s, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "Send/Recv from rank 1 to rank 1 on 4 ranks: the receiver 1 is no rank of 4 other than the sender");
  s = kolo_check_spec{KOLO_COLL_ALL_REDUCE, 4, 0, 0, 0, none.data()};
  EXPECT_EQ(kolo_schedule_check(&s, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "AllReduce on 4 ranks: 0 channels is outside the checker's 1..64");
  // ranks x steps: 256 ranks of 2^20 steps each (the steps are never read)
  std::vector<kolo_program> big(256, kolo_program{});
  std::vector<const kolo_program *> bp;
  for (kolo_program &p : big) p.nsteps = 1 << 20, bp.push_back(&p);
  s = kolo_check_spec{KOLO_COLL_ALL_REDUCE, 256, 0, 0, 1, bp.data()};
  EXPECT_EQ(kolo_schedule_check(&s, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "AllReduce on 256 ranks: 268435456 steps in all on 256 ranks is more than the checker's bound of "
                    "2^27 ranks x steps");
  EXPECT_EQ(kolo_schedule_check(nullptr, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "no schedule to check (spec is NULL)");
  s = kolo_check_spec{KOLO_COLL_ALL_REDUCE, 4, 0, 0, 1, none.data()};
  EXPECT_EQ(kolo_schedule_check(&s, why, sizeof why), koloInvalidArgument);
  EXPECT_STREQ(why, "AllReduce on 4 ranks: rank 0 channel 0: no program");
}

// The bound the header states: a 256-rank ring all-reduce (about 2^25
// ranks x steps) is checked within it.
TEST(ScheduleCheck, LargestRingInItsBound) {
  auto t0 = std::chrono::steady_clock::now();
  auto ps = builtin(KOLO_COLL_ALL_REDUCE, 256, 0);
  EXPECT_EQ(ps->check(), "");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] 256-rank ring all-reduce (%d steps per rank) checked in %lld ms\n", ps->at(0, 0).nsteps,
         (long long)ms);
  EXPECT_LT(ms, 5000);
}

}  // namespace
