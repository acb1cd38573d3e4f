// test_topology.cc - ranks grouped by host and the rings built from them
// (ring/topology.h), and the all-reduce and all-gather algorithm choices
// (ring/algo.h).
//
// Host assignments: blocks, interleaved (host of r = r % H), uneven, one
// rank per host, and random ones, with arbitrary 64-bit ids.  Checked for
// every channel 0..5: each ring is a permutation, each host's ranks are
// contiguous and hosts come in the order of their lowest rank, the ring
// crosses hosts exactly once per host, channel 0 keeps ranks ascending, and
// channel c starts each host at local index c mod its size, so the rank
// that sends off-host differs from channel to channel where the host has
// ranks enough.  The intra and inter rings of the hierarchical all-reduce
// list the right members in the right order and leave the others at -1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "ring/algo.h"
#include "ring/schedule.h"
#include "ring/topology.h"
}

namespace {

struct Hosts {
  kolo_hosts h{};
  explicit Hosts(const std::vector<uint64_t> &ids) {
    EXPECT_EQ(kolo_hosts_build((int)ids.size(), ids.data(), &h), koloSuccess);
  }
  ~Hosts() { kolo_hosts_free(&h); }
  Hosts(const Hosts &) = delete;
  Hosts &operator=(const Hosts &) = delete;
};

struct RingHolder {
  kolo_ring r{};
  ~RingHolder() { kolo_ring_free(&r); }
};

// The reference grouping: hosts in order of their lowest rank, ranks ascending.
std::vector<std::vector<int>> groups_of(const std::vector<uint64_t> &ids) {
  std::vector<std::vector<int>> g;
  std::vector<uint64_t> seen;
  for (size_t r = 0; r < ids.size(); r++) {
    auto it = std::find(seen.begin(), seen.end(), ids[r]);
    if (it == seen.end()) {
      seen.push_back(ids[r]);
      g.push_back({});
      it = seen.end() - 1;
    }
    g[(size_t)(it - seen.begin())].push_back((int)r);
  }
  return g;
}

std::vector<std::pair<std::string, std::vector<uint64_t>>> assignments() {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> a;
  for (int n = 1; n <= 12; n++)
    for (int hosts = 1; hosts <= std::min(n, 4); hosts++) {
      std::vector<uint64_t> inter((size_t)n), block((size_t)n);
      for (int r = 0; r < n; r++) {
        inter[(size_t)r] = 0x9e3779b97f4a7c15ull * (uint64_t)(hosts - r % hosts);
        block[(size_t)r] = 1000003ull * (uint64_t)(r * hosts / n + 5);
      }
      a.push_back({"interleaved n=" + std::to_string(n) + " H=" + std::to_string(hosts), inter});
      a.push_back({"blocks n=" + std::to_string(n) + " H=" + std::to_string(hosts), block});
    }
  a.push_back({"uneven 3+1+2", {9, 9, 4, 9, 7, 7}});
  a.push_back({"listed out of order", {7, 7, 3, 3, 7, 9, 3}});
  a.push_back({"ids 0 and ~0", {0, ~0ull, 0, ~0ull, ~0ull}});
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 40; i++) {
    int n = 1 + (int)(rng() % 24), hosts = 1 + (int)(rng() % 5);
    std::vector<uint64_t> ids((size_t)n);
    for (auto &x : ids) x = rng() % (uint64_t)hosts * 0x100000001b3ull;
    a.push_back({"random " + std::to_string(i), ids});
  }
  return a;
}

TEST(Topology, HostsGroupRanks) {
  for (const auto &[name, ids] : assignments()) {
    SCOPED_TRACE(name);
    const int n = (int)ids.size();
    Hosts H(ids);
    auto want = groups_of(ids);
    ASSERT_EQ(H.h.nranks, n);
    ASSERT_EQ(H.h.nhosts, (int)want.size());
    EXPECT_EQ(kolo_count_hosts(n, ids.data()), (int)want.size());
    bool uniform = true;
    int maxs = 0;
    for (size_t hi = 0; hi < want.size(); hi++) {
      ASSERT_EQ(H.h.host_size[hi], (int)want[hi].size());
      uniform = uniform && want[hi].size() == want[0].size();
      maxs = std::max(maxs, (int)want[hi].size());
      for (size_t j = 0; j < want[hi].size(); j++) {
        int r = want[hi][j];
        EXPECT_EQ(kolo_hosts_rank(&H.h, (int)hi, (int)j), r);
        EXPECT_EQ(H.h.host[r], (int)hi);
        EXPECT_EQ(H.h.local[r], (int)j);
      }
    }
    EXPECT_EQ(kolo_hosts_uniform(&H.h), uniform ? 1 : 0);
    EXPECT_EQ(kolo_hosts_max_size(&H.h), maxs);
  }
}

TEST(Topology, ChannelRingsAreHostContiguousAndRotate) {
  for (const auto &[name, ids] : assignments()) {
    const int n = (int)ids.size();
    Hosts H(ids);
    auto groups = groups_of(ids);
    std::set<int> senders_seen[8];  // per host: off-host senders over channels
    for (int ch = 0; ch < 6; ch++) {
      SCOPED_TRACE(name + " channel " + std::to_string(ch));
      RingHolder R;
      ASSERT_EQ(kolo_ring_build_channel(&H.h, ch, &R.r), koloSuccess);
      ASSERT_EQ(R.r.nranks, n);
      // The expected order: hosts in order, each rotated to start at ch mod size.
      std::vector<int> want;
      for (const auto &g : groups)
        for (size_t k = 0; k < g.size(); k++) want.push_back(g[(ch + k) % g.size()]);
      std::vector<int> got(R.r.order, R.r.order + n);
      EXPECT_EQ(got, want);
      for (int i = 0; i < n; i++) EXPECT_EQ(R.r.pos[R.r.order[i]], i);
      // one host change per host along the (cyclic) ring
      int changes = 0;
      for (int i = 0; i < n; i++) {
        int a = R.r.order[i], b = R.r.order[(i + 1) % n];
        EXPECT_EQ(kolo_ring_next(&R.r, a), b);
        EXPECT_EQ(kolo_ring_prev(&R.r, b), a);
        if (ids[(size_t)a] != ids[(size_t)b]) {
          changes++;
          if (H.h.host[a] < 8) senders_seen[H.h.host[a]].insert(a);
        }
      }
      EXPECT_EQ(changes, groups.size() == 1 ? 0 : (int)groups.size());
      if (ch == 0) {
        RingHolder R0;
        ASSERT_EQ(kolo_ring_build(n, ids.data(), &R0.r), koloSuccess);
        EXPECT_EQ(std::vector<int>(R0.r.order, R0.r.order + n), got);
      }
    }
    // Over 6 channels a host of s ranks sends off-host from min(s, 6) ranks.
    for (size_t hi = 0; groups.size() > 1 && hi < groups.size() && hi < 8; hi++) {
      EXPECT_EQ(senders_seen[hi].size(), std::min<size_t>(groups[hi].size(), 6)) << name << " host " << hi;
    }
  }
}

TEST(Topology, IntraAndInterRings) {
  for (const auto &[name, ids] : assignments()) {
    const int n = (int)ids.size();
    Hosts H(ids);
    auto groups = groups_of(ids);
    for (int r = 0; r < n; r++) {
      SCOPED_TRACE(name + " rank " + std::to_string(r));
      RingHolder intra, inter;
      ASSERT_EQ(kolo_ring_build_intra(&H.h, r, &intra.r), koloSuccess);
      ASSERT_EQ(kolo_ring_build_inter(&H.h, r, &inter.r), koloSuccess);
      const auto &mine = groups[(size_t)H.h.host[r]];
      EXPECT_EQ(std::vector<int>(intra.r.order, intra.r.order + intra.r.nranks), mine);
      std::vector<int> want_inter;
      for (const auto &g : groups)
        if ((size_t)H.h.local[r] < g.size()) want_inter.push_back(g[(size_t)H.h.local[r]]);
      EXPECT_EQ(std::vector<int>(inter.r.order, inter.r.order + inter.r.nranks), want_inter);
      for (int q = 0; q < n; q++) {
        bool in_intra = std::find(mine.begin(), mine.end(), q) != mine.end();
        bool in_inter = std::find(want_inter.begin(), want_inter.end(), q) != want_inter.end();
        if (!in_intra) {
          EXPECT_EQ(intra.r.pos[q], -1) << q;
        }
        if (!in_inter) {
          EXPECT_EQ(inter.r.pos[q], -1) << q;
        }
      }
      EXPECT_EQ(intra.r.pos[r], H.h.local[r]);
    }
  }
}

// The choice's model written out independently of ring/algo.c, for one
// host: a step costs 1 us, a pass over the message's bytes S / 20 GB/s;
// p = 2^k ranks and a fold of the rest (f) for recursive doubling and
// Rabenseifner.  Passes per rank, counted from the programs' steps.
double one_host_cost(int algo, int n, double S) {
  const double a = 1e-6, m = 20e9;
  int p = 1, k = 0;
  for (; 2 * p <= n; p *= 2) k++;
  const int f = p < n;
  switch (algo) {
  case KOLO_ALGO_RD: return (k + 2 * f) * a + 5.0 * (k + f) * S / m;
  case KOLO_ALGO_RABENSEIFNER: return (2 * k + 2 * f) * a + (9.0 * (p - 1) / p + 5 * f) * S / m;
  case KOLO_ALGO_DIRECT: return (2 + 0.5 * (n - 2)) * a + 9.0 * (n - 1) / n * S / m;
  case KOLO_ALGO_ONESHOT: return (1 + 0.5 * (n - 2)) * a + (5.0 * n - 3) * S / m;
  default: return 2 * (n - 1) * a + (6.0 * n - 4) / n * S / m;
  }
}

TEST(Topology, AlgorithmNames) {
  EXPECT_EQ(kolo_algo_parse(nullptr), KOLO_ALGO_AUTO);
  EXPECT_EQ(kolo_algo_parse(""), KOLO_ALGO_AUTO);
  const char *names[] = {"ring", "hier", "rd", "rabenseifner", "tree", "direct", "bruck", "dbtree", "oneshot"};
  static_assert(sizeof names / sizeof *names == KOLO_ALGO_NUM, "a name per algorithm");
  for (int a = 0; a < KOLO_ALGO_NUM; a++) {
    EXPECT_EQ(kolo_algo_parse(names[a]), a);
    EXPECT_STREQ(kolo_algo_name(a), names[a]);
    EXPECT_NE(std::string(kolo_algo_names()).find(names[a]), std::string::npos);
    EXPECT_EQ(kolo_algo_is_multi_peer(a), a == KOLO_ALGO_RD || a == KOLO_ALGO_RABENSEIFNER || a == KOLO_ALGO_TREE ||
                                              a == KOLO_ALGO_DIRECT || a == KOLO_ALGO_BRUCK || a == KOLO_ALGO_DBTREE ||
                                              a == KOLO_ALGO_ONESHOT);
  }
  for (const char *bad : {"nvls", "Ring", "rd ", "rab", "auto"}) EXPECT_LT(kolo_algo_parse(bad), KOLO_ALGO_AUTO) << bad;
  EXPECT_STREQ(kolo_algo_name(KOLO_ALGO_AUTO), "auto");
}

// The broadcast's model (algo.h): the chain, the binomial tree and the
// double binary tree's formulas on one host; the trees only where
// KOLO_ALGO's broadcast entry names them, the cheapest of those it names.
TEST(Topology, BroadcastChoice) {
  const double a = 1e-6, b = 20e9;
  for (int n : {2, 3, 5, 8, 16}) {
    kolo_algo_topo t{n, 1, n, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
    const double k = std::ceil(std::log2((double)n));
    for (size_t bytes : {(size_t)8, (size_t)1 << 16, (size_t)1 << 24})
      for (int ch : {1, 2, 4}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " bytes=" << bytes << " ch=" << ch);
        const double S = (double)bytes, tree = k * a + k * S / b, dbtree = (k + 1) * a + (ch >= 2 ? 1 : 2) * S / b;
        EXPECT_NEAR(kolo_bcast_cost(KOLO_ALGO_TREE, &t, bytes, ch), tree, 1e-12);
        EXPECT_NEAR(kolo_bcast_cost(KOLO_ALGO_DBTREE, &t, bytes, ch), dbtree, 1e-12);
        const double chain = kolo_bcast_cost(KOLO_ALGO_RING, &t, bytes, ch);
        t.bcast_allowed = 0;  // no entry: the chain
        EXPECT_EQ(kolo_bcast_choose(&t, bytes, ch), KOLO_ALGO_RING);
        EXPECT_FALSE(kolo_bcast_may_run(&t, KOLO_ALGO_DBTREE));
        t.bcast_allowed = 1u << KOLO_ALGO_DBTREE;  // broadcast:dbtree forces it
        EXPECT_EQ(kolo_bcast_choose(&t, bytes, ch), KOLO_ALGO_DBTREE);
        t.bcast_allowed = KOLO_ALGO_BCAST_SET;  // all three: the cheapest (the chain on 2 ranks)
        int want = tree < chain ? KOLO_ALGO_TREE : KOLO_ALGO_RING;
        if (dbtree < std::min(tree, chain)) want = KOLO_ALGO_DBTREE;
        if (n == 2) want = KOLO_ALGO_RING;
        EXPECT_EQ(kolo_bcast_choose(&t, bytes, ch), want);
        t.bcast_allowed = (1u << KOLO_ALGO_RING) | (1u << KOLO_ALGO_DBTREE);
        EXPECT_EQ(kolo_bcast_choose(&t, bytes, ch), n > 2 && dbtree < chain ? KOLO_ALGO_DBTREE : KOLO_ALGO_RING);
        EXPECT_FALSE(kolo_bcast_may_run(&t, KOLO_ALGO_TREE));
        EXPECT_FALSE(kolo_bcast_may_run(&t, KOLO_ALGO_BRUCK));
        t.bcast_allowed = 0;
      }
  }
}

TEST(Topology, AlgorithmChoice) {
  // Not possible: one host, one rank per host, uneven hosts: a forced hier
  // runs the ring.
  for (kolo_algo_topo t : {kolo_algo_topo{8, 1, 8, KOLO_ALGO_HIER, 0, 0, nullptr, 0, 0, 0}, kolo_algo_topo{4, 4, 1, KOLO_ALGO_HIER, 0, 0, nullptr, 0, 0, 0},
                           kolo_algo_topo{5, 2, 0, KOLO_ALGO_HIER, 0, 0, nullptr, 0, 0, 0}}) {
    EXPECT_FALSE(kolo_algo_hier_possible(&t));
    for (size_t bytes : {(size_t)0, (size_t)1 << 10, (size_t)1 << 30})
      EXPECT_EQ(kolo_algo_choose(&t, bytes, 2), KOLO_ALGO_RING);
  }
  // Forced: each where it can run; auto: the cheapest, ties to the lower
  // number; without the multi-peer ones when no_auto_peers.
  for (int H : {1, 2, 3, 8})
    for (int L : {1, 2, 3, 4, 8}) {
      kolo_algo_topo t{H * L, H, L, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
      for (size_t bytes : {(size_t)4, (size_t)1 << 16, (size_t)1 << 26})
        for (int ch : {1, 2, 4})
          for (int no_peers : {0, 1}) {
            t.no_auto_peers = no_peers;
            for (int a = 0; a < KOLO_ALGO_NUM; a++) {
              t.forced = a;
              bool cannot = (a == KOLO_ALGO_HIER && !kolo_algo_hier_possible(&t)) ||
                            ((a == KOLO_ALGO_DIRECT || a == KOLO_ALGO_ONESHOT) && H > 1) ||
                            a == KOLO_ALGO_TREE || a == KOLO_ALGO_BRUCK ||
                            a == KOLO_ALGO_DBTREE;  // broadcast, all-gather algorithms
              int want = cannot ? KOLO_ALGO_RING : a;
              EXPECT_EQ(kolo_algo_choose(&t, bytes, ch), want);
            }
            t.forced = KOLO_ALGO_AUTO;
            int best = KOLO_ALGO_RING;
            for (int a = 1; a < KOLO_ALGO_NUM; a++) {
              if (a == KOLO_ALGO_HIER && !kolo_algo_hier_possible(&t)) continue;
              if (no_peers && kolo_algo_is_multi_peer(a)) continue;
              // by name only; a broadcast, an all-gather algorithm
              if (a == KOLO_ALGO_DIRECT || a == KOLO_ALGO_ONESHOT || a == KOLO_ALGO_TREE || a == KOLO_ALGO_BRUCK ||
                  a == KOLO_ALGO_DBTREE)
                continue;
              if (t.nranks > 1) {
                EXPECT_GT(kolo_algo_cost(a, &t, bytes, ch), 0);
              }
              if (kolo_algo_cost(a, &t, bytes, ch) < kolo_algo_cost(best, &t, bytes, ch)) best = a;
            }
            EXPECT_EQ(kolo_algo_choose(&t, bytes, ch), best) << H << "x" << L << " " << bytes << " B";
          }
    }
  // One host: the costs are the model's; small messages take the fewest
  // steps (recursive doubling: 8 B to 512 B), large ones the
  // fewest passes over memory (the ring), Rabenseifner in between where
  // the ring's steps are many.
  for (int n = 2; n <= 16; n++) {
    kolo_algo_topo t{n, 1, n, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
    for (double S : {0.0, 8.0, 4096.0, 1e6, 1e9})
      for (int a : {KOLO_ALGO_RING, KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT, KOLO_ALGO_ONESHOT})
        EXPECT_NEAR(kolo_algo_cost(a, &t, (size_t)S, 1), one_host_cost(a, n, S), 1e-12) << a << " n=" << n;
    for (size_t bytes : {(size_t)8, (size_t)512}) EXPECT_EQ(kolo_algo_choose(&t, bytes, 1), KOLO_ALGO_RD) << n;
    EXPECT_EQ(kolo_algo_choose(&t, 64 << 20, 1), KOLO_ALGO_RING) << n;
  }
  kolo_algo_topo eight{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  EXPECT_EQ(kolo_algo_choose(&eight, 64 << 10, 1), KOLO_ALGO_RABENSEIFNER);
  // Many ranks across hosts: the ring's 2(n-1) network latencies lose to
  // hier's 2(H-1) at small sizes, unless the doubling beats both.
  for (int H : {2, 3, 8})
    for (int L : {2, 4, 8}) {
      kolo_algo_topo t{H * L, H, L, KOLO_ALGO_AUTO, 1, 0, nullptr, 0, 0, 0};
      EXPECT_EQ(kolo_algo_choose(&t, 1024, 1), KOLO_ALGO_HIER) << H << "x" << L;
    }
  // Costs grow with the size.
  kolo_algo_topo t{8, 2, 4, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  for (int a = 0; a < KOLO_ALGO_NUM; a++) EXPECT_LT(kolo_algo_cost(a, &t, 1 << 10, 2), kolo_algo_cost(a, &t, 1 << 20, 2));
}

// The all-gather's two costs (ring/algo.h), one host: ring (n-1) a + (n-1)
// S / b, Bruck ceil(log2 n) a + (n-1) S / b + (n-2) S / b (its forwarded
// blocks read back from out), a = 1 us, b = 20 GB/s; so Bruck wins below
// (n-1-k)/(n-2) a b per rank: unset, on host communicators, or where
// KOLO_ALGO lets the model weigh it; never unset on CUDA ones.
TEST(Topology, AllGatherChoice) {
  const double a = 1e-6, b = 20e9;
  for (int n = 1; n <= 16; n++) {
    const int k = n > 1 ? 32 - __builtin_clz((unsigned)(n - 1)) : 0;  // ceil(log2 n)
    kolo_algo_topo t{n, 1, n, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
    for (double S : {0.0, 8.0, 4096.0, 1e6}) {
      const double ring = n > 1 ? (n - 1) * a + (n - 1) * S / b : 0;
      const double bruck = n > 1 ? k * a + (n - 1) * S / b + (n - 2) * S / b : 0;
      EXPECT_NEAR(kolo_ag_cost(KOLO_ALGO_RING, &t, (size_t)S, 1), ring, 1e-12) << n;
      EXPECT_NEAR(kolo_ag_cost(KOLO_ALGO_BRUCK, &t, (size_t)S, 1), bruck, 1e-12) << n;
      t.no_auto_peers = 1;  // a CUDA communicator, KOLO_ALGO unset: the ring
      EXPECT_EQ(kolo_ag_choose(&t, (size_t)S, 1), KOLO_ALGO_RING) << "CUDA, unnamed, Bruck never runs: n=" << n;
      t.no_auto_peers = 0;
      EXPECT_EQ(kolo_ag_choose(&t, (size_t)S, 1), n > 3 && bruck < ring ? KOLO_ALGO_BRUCK : KOLO_ALGO_RING) << n;
    }
    EXPECT_TRUE(kolo_ag_may_run(&t, KOLO_ALGO_RING));
    EXPECT_TRUE(kolo_ag_may_run(&t, KOLO_ALGO_BRUCK));  // host memory, unset: the model weighs it
    EXPECT_FALSE(kolo_ag_may_run(&t, KOLO_ALGO_TREE));
    t.no_auto_peers = 1;
    EXPECT_FALSE(kolo_ag_may_run(&t, KOLO_ALGO_BRUCK));
    t.no_auto_peers = 0;
    t.ag_allowed = 1u << KOLO_ALGO_BRUCK;  // allgather:bruck forces it at every size
    for (size_t bytes : {(size_t)0, (size_t)1 << 30}) EXPECT_EQ(kolo_ag_choose(&t, bytes, 2), KOLO_ALGO_BRUCK);
    t.ag_allowed = (1u << KOLO_ALGO_RING) | (1u << KOLO_ALGO_BRUCK);  // allgather:ring,bruck: the model's
    const double cross = n > 2 ? (n - 1 - k) / (n - 2.0) * a * b : 0;
    EXPECT_EQ(kolo_ag_choose(&t, 64 << 20, 1), KOLO_ALGO_RING) << n;
    if (cross >= 64) {
      EXPECT_EQ(kolo_ag_choose(&t, (size_t)(cross * 0.9), 1), KOLO_ALGO_BRUCK) << n;
      EXPECT_EQ(kolo_ag_choose(&t, (size_t)(cross * 1.1), 1), KOLO_ALGO_RING) << n;
    } else {
      EXPECT_EQ(kolo_ag_choose(&t, 8, 1), KOLO_ALGO_RING) << n << ": as many hops, or one rank";
    }
  }
  // The figures algo.h gives: 10 KB at 4 ranks, 13 KB at 8, 16 KB at 16, never at 3.
  for (auto [n, kb] : {std::pair<int, double>{4, 10}, {8, 13.3}, {16, 15.7}}) {
    kolo_algo_topo t{n, 1, n, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
    t.ag_allowed = KOLO_ALGO_AG_SET;
    EXPECT_EQ(kolo_ag_choose(&t, (size_t)(kb * 1000 * 0.98), 1), KOLO_ALGO_BRUCK) << n;
    EXPECT_EQ(kolo_ag_choose(&t, (size_t)(kb * 1000 * 1.02), 1), KOLO_ALGO_RING) << n;
  }
  // koloGroupSimulateEnd's cost of an all-gather is the chosen one's.
  kolo_algo_topo t{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  t.ag_allowed = KOLO_ALGO_AG_SET;
  EXPECT_DOUBLE_EQ(kolo_coll_cost(KOLO_COLL_ALL_GATHER, &t, 64, 1), kolo_ag_cost(KOLO_ALGO_BRUCK, &t, 64, 1));
  EXPECT_DOUBLE_EQ(kolo_coll_cost(KOLO_COLL_ALL_GATHER, &t, 1 << 20, 1), kolo_ag_cost(KOLO_ALGO_RING, &t, 1 << 20, 1));
}

}  // namespace
