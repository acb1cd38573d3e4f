// KOLO_ALGO's NCCL syntax (ring/algo_select.c), the tuning file
// (ring/tuning.c) and the cost model's use of both (ring/algo.c).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

extern "C" {
#include "ring/algo.h"
#include "ring/algo_select.h"
#include "ring/schedule.h"
#include "ring/tuning.h"
}

namespace {

int allow(const char *v, std::string *why = nullptr) {
  char buf[512] = "";
  int r = kolo_algo_allow_parse(v, buf, sizeof buf);
  if (why) *why = buf;
  return r;
}

constexpr unsigned bit(int a) { return 1u << a; }

TEST(AlgoSelect, ListsExclusionsAndCase) {
  EXPECT_EQ(allow(nullptr), 0);
  EXPECT_EQ(allow(""), 0);
  EXPECT_EQ(allow("rd"), (int)bit(KOLO_ALGO_RD));  // the old single names
  EXPECT_EQ(allow("Ring,RD"), (int)(bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_RD)));
  EXPECT_EQ(allow("ring, rd"), (int)(bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_RD)));
  EXPECT_EQ(allow("^rd"), (int)(KOLO_ALGO_ALL_REDUCE_SET & ~bit(KOLO_ALGO_RD)));
  EXPECT_EQ(allow("ring,tree"), (int)bit(KOLO_ALGO_RING));  // the all-reduce keeps its own
  kolo_algo_sets sets;
  char why[256];
  ASSERT_EQ(kolo_algo_allow_parse_sets("broadcast:tree;reduce:ring", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_reduce, 0u);
  EXPECT_EQ(sets.broadcast, bit(KOLO_ALGO_TREE));
  ASSERT_EQ(kolo_algo_allow_parse_sets("rd;broadcast:^ring", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_reduce, bit(KOLO_ALGO_RD));
  EXPECT_EQ(sets.broadcast, bit(KOLO_ALGO_TREE) | bit(KOLO_ALGO_DBTREE));
  ASSERT_EQ(kolo_algo_allow_parse_sets("broadcast:ring,tree,rd", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.broadcast, bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_TREE));
  ASSERT_EQ(kolo_algo_allow_parse_sets("broadcast:DBTree", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.broadcast, bit(KOLO_ALGO_DBTREE));
  EXPECT_EQ(kolo_algo_allow_single(sets.broadcast), KOLO_ALGO_DBTREE);
  ASSERT_EQ(kolo_algo_allow_parse_sets("broadcast:ring,tree,dbtree", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.broadcast, KOLO_ALGO_BCAST_SET);
  EXPECT_EQ(allow("allreduce:ring,rabenseifner;broadcast:ring"),
            (int)(bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_RABENSEIFNER)));
  EXPECT_EQ(allow("broadcast:ring"), 0);  // says nothing of the all-reduce
  EXPECT_EQ(allow("rd;allreduce:hier"), (int)bit(KOLO_ALGO_HIER));  // later entries win
  EXPECT_EQ(allow("ring;broadcast:^rd"), (int)bit(KOLO_ALGO_RING));
  EXPECT_EQ(kolo_algo_allow_single(bit(KOLO_ALGO_RD)), KOLO_ALGO_RD);
  EXPECT_EQ(kolo_algo_allow_single(bit(KOLO_ALGO_RD) | bit(KOLO_ALGO_RING)), KOLO_ALGO_AUTO);
}

// The all-gather's entry (ring/algo_select.h): "allgather:bruck" forces
// Bruck's, "allgather:ring,bruck" lets the model choose, other entries and
// names leave it at 0 (the ring only: ring/algo.h).
// The reduce's entry: the chain ("ring") and the binomial tree; the tree
// weighed only where named (or a tuning override names it).
TEST(AlgoSelect, ReduceEntries) {
  kolo_algo_sets sets;
  char why[256];
  ASSERT_EQ(kolo_algo_allow_parse_sets("reduce:tree", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.reduce, bit(KOLO_ALGO_TREE));
  EXPECT_EQ(sets.all_reduce | sets.broadcast | sets.all_gather, 0u);
  ASSERT_EQ(kolo_algo_allow_parse_sets("Reduce:ring,tree,dbtree,rd", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.reduce, KOLO_ALGO_REDUCE_SET);
  kolo_algo_topo t{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  EXPECT_EQ(kolo_reduce_choose(&t, 8, 1), KOLO_ALGO_RING);  // no entry: the chain
  EXPECT_FALSE(kolo_reduce_may_run(&t, KOLO_ALGO_TREE));
  t.reduce_allowed = bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_TREE);
  EXPECT_EQ(kolo_reduce_choose(&t, 8, 1), KOLO_ALGO_TREE);         // 3 hops against 7
  EXPECT_EQ(kolo_reduce_choose(&t, 64 << 20, 1), KOLO_ALGO_RING);  // 3 S against S
  t.reduce_allowed = KOLO_ALGO_REDUCE_SET;  // the double tree: log2 n hops, S on 2 channels
  EXPECT_EQ(kolo_reduce_choose(&t, 4 << 20, 2), KOLO_ALGO_DBTREE);
  EXPECT_DOUBLE_EQ(kolo_reduce_cost(KOLO_ALGO_DBTREE, &t, 4096, 2), kolo_bcast_cost(KOLO_ALGO_DBTREE, &t, 4096, 2));
  t.reduce_allowed = bit(KOLO_ALGO_TREE);
  EXPECT_EQ(kolo_reduce_choose(&t, 64 << 20, 1), KOLO_ALGO_TREE);  // forced
  EXPECT_DOUBLE_EQ(kolo_coll_cost(KOLO_COLL_REDUCE, &t, 4096, 1), kolo_reduce_cost(KOLO_ALGO_TREE, &t, 4096, 1));
}

TEST(AlgoSelect, AllGatherEntries) {
  kolo_algo_sets sets;
  char why[256];
  ASSERT_EQ(kolo_algo_allow_parse_sets("allgather:bruck", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_gather, bit(KOLO_ALGO_BRUCK));
  EXPECT_EQ(sets.all_reduce, 0u);
  EXPECT_EQ(sets.broadcast, 0u);
  EXPECT_EQ(kolo_algo_allow_single(sets.all_gather), KOLO_ALGO_BRUCK);
  ASSERT_EQ(kolo_algo_allow_parse_sets("AllGather:Ring,Bruck;broadcast:tree", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_gather, KOLO_ALGO_AG_SET);
  EXPECT_EQ(sets.broadcast, bit(KOLO_ALGO_TREE));
  EXPECT_EQ(kolo_algo_allow_single(sets.all_gather), KOLO_ALGO_AUTO);
  ASSERT_EQ(kolo_algo_allow_parse_sets("allgather:^ring", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_gather, bit(KOLO_ALGO_BRUCK));
  ASSERT_EQ(kolo_algo_allow_parse_sets("allgather:ring,bruck,rd;rd", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_gather, KOLO_ALGO_AG_SET);  // keeps its own algorithms
  EXPECT_EQ(sets.all_reduce, bit(KOLO_ALGO_RD));
  ASSERT_EQ(kolo_algo_allow_parse_sets("ring,bruck;broadcast:ring", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_reduce, bit(KOLO_ALGO_RING));  // the all-reduce keeps its own
  EXPECT_EQ(sets.all_gather, 0u);
  ASSERT_EQ(kolo_algo_allow_parse_sets("allgather:bruck;allgather:ring", &sets, why, sizeof why), 0) << why;
  EXPECT_EQ(sets.all_gather, bit(KOLO_ALGO_RING));  // later entries win
  EXPECT_EQ(allow("allgather:bruck"), 0);  // says nothing of the all-reduce
}

TEST(AlgoSelect, RefusesWithASentence) {
  std::string why;
  EXPECT_EQ(allow("tree", &why), -1);
  EXPECT_NE(why.find("write broadcast:tree"), std::string::npos) << why;
  EXPECT_EQ(allow("dbtree", &why), -1);
  EXPECT_NE(why.find("kolo's dbtree is a broadcast algorithm"), std::string::npos) << why;
  EXPECT_NE(why.find("write broadcast:dbtree"), std::string::npos) << why;
  EXPECT_EQ(allow("broadcast:^ring,tree,dbtree", &why), -1);
  EXPECT_NE(why.find("leaves neither the ring (chain) nor a tree for \"broadcast\""), std::string::npos) << why;
  EXPECT_EQ(allow("^ring,hier,rd,rabenseifner,direct,oneshot", &why), -1);
  EXPECT_NE(why.find("no algorithm for"), std::string::npos) << why;
  EXPECT_EQ(allow("broadcast:rd", &why), -1);
  EXPECT_NE(why.find("broadcast"), std::string::npos) << why;
  EXPECT_EQ(allow("bruck", &why), -1);
  EXPECT_NE(why.find("kolo's bruck is an all-gather algorithm"), std::string::npos) << why;
  EXPECT_NE(why.find("write allgather:bruck"), std::string::npos) << why;
  EXPECT_EQ(allow(" Bruck ", &why), -1);
  EXPECT_NE(why.find("write allgather:bruck"), std::string::npos) << why;
  EXPECT_EQ(allow("allgather:^ring,bruck", &why), -1);
  EXPECT_NE(why.find("leaves neither the ring nor bruck for \"allgather\""), std::string::npos) << why;
  EXPECT_EQ(allow("allgather:rd", &why), -1);
  EXPECT_NE(why.find("leaves neither the ring nor bruck for \"allgather\""), std::string::npos) << why;
  EXPECT_EQ(allow("reduce:bruck", &why), -1);
  EXPECT_NE(why.find("leaves neither the ring (chain) nor a tree for \"reduce\""), std::string::npos) << why;
  EXPECT_EQ(allow("reducescatter:tree", &why), -1);
  EXPECT_NE(why.find("the only algorithm kolo has for \"reducescatter\""), std::string::npos) << why;
  EXPECT_EQ(allow("broadcast:bruck", &why), -1);
  EXPECT_NE(why.find("leaves neither the ring (chain) nor a tree for \"broadcast\""), std::string::npos) << why;
  EXPECT_EQ(allow("allgather:brook", &why), -1);
  EXPECT_NE(why.find("kolo has ring, hier, rd, rabenseifner, tree, direct, bruck, dbtree"), std::string::npos) << why;
  EXPECT_EQ(allow("alltoall:ring", &why), -1);
  EXPECT_EQ(allow("ring,", &why), -1);
  EXPECT_EQ(allow("allreduce:", &why), -1);
}

TEST(AlgoSelect, TheModelChoosesAmongTheAllowed) {
  kolo_algo_topo t{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  ASSERT_EQ(kolo_algo_choose(&t, 8, 1), KOLO_ALGO_RD);  // small: recursive doubling
  t.allowed = KOLO_ALGO_ALL & ~bit(KOLO_ALGO_RD) & ~bit(KOLO_ALGO_DIRECT) & ~bit(KOLO_ALGO_ONESHOT);
  int a = kolo_algo_choose(&t, 8, 1);
  EXPECT_NE(a, KOLO_ALGO_RD);
  t.allowed = bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_RABENSEIFNER);
  EXPECT_EQ(kolo_algo_choose(&t, 8, 1), a);
  // the direct all-reduce runs only where KOLO_ALGO names it (or a tuning
  // file: Tuning.OverridesNameTheDirectAllReduce), and only on one host
  kolo_algo_topo three{3, 1, 3, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  ASSERT_LT(kolo_algo_cost(KOLO_ALGO_DIRECT, &three, 8, 1), kolo_algo_cost(KOLO_ALGO_RD, &three, 8, 1));
  EXPECT_EQ(kolo_algo_choose(&three, 8, 1), KOLO_ALGO_RD);
  EXPECT_FALSE(kolo_algo_may_run(&three, KOLO_ALGO_DIRECT));
  three.allowed = bit(KOLO_ALGO_RD) | bit(KOLO_ALGO_DIRECT);
  EXPECT_EQ(kolo_algo_choose(&three, 8, 1), KOLO_ALGO_DIRECT);
  // the one-shot likewise: by name, one host
  three.allowed = 0;
  ASSERT_LT(kolo_algo_cost(KOLO_ALGO_ONESHOT, &three, 8, 1), kolo_algo_cost(KOLO_ALGO_RD, &three, 8, 1));
  EXPECT_FALSE(kolo_algo_may_run(&three, KOLO_ALGO_ONESHOT));
  three.allowed = bit(KOLO_ALGO_RD) | bit(KOLO_ALGO_ONESHOT);
  EXPECT_EQ(kolo_algo_choose(&three, 8, 1), KOLO_ALGO_ONESHOT);
  EXPECT_EQ(kolo_algo_choose(&three, 1 << 20, 1), KOLO_ALGO_RD);  // n - 1 times the bytes sent
  three.nhosts = 3;
  three.local = 1;
  EXPECT_EQ(kolo_algo_choose(&three, 8, 1), KOLO_ALGO_RD);
  // a CUDA communicator leaves rd out unless KOLO_ALGO names it
  kolo_algo_topo cuda{8, 1, 8, KOLO_ALGO_AUTO, 1, 0, nullptr, 0, 0, 0};
  EXPECT_NE(kolo_algo_choose(&cuda, 8, 1), KOLO_ALGO_RD);
  cuda.allowed = bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_RD);
  EXPECT_EQ(kolo_algo_choose(&cuda, 8, 1), KOLO_ALGO_RD);
}

int parse(const std::string &text, kolo_tuning *f, std::string *why = nullptr) {
  char buf[512] = "";
  int r = kolo_tuning_parse(text.data(), text.size(), "t.tune", f, buf, sizeof buf);
  if (why) *why = buf;
  return r;
}

TEST(Tuning, ParsesLinksAndOverrides) {
  kolo_tuning f;
  ASSERT_EQ(parse("kolo-tuning 1\n# measured\n\nlink shm 0.5 12.5  # a comment\nlink socket 20 1.2\n"
                  "override allreduce rd 0 4096\n",
                  &f),
            0);
  EXPECT_TRUE(f.link[KOLO_LINK_SHM].set);
  EXPECT_DOUBLE_EQ(f.link[KOLO_LINK_SHM].alpha_us, 0.5);
  EXPECT_DOUBLE_EQ(f.link[KOLO_LINK_SOCKET].beta_gbs, 1.2);
  EXPECT_FALSE(f.link[KOLO_LINK_IB].set);
  ASSERT_EQ(f.noverrides, 1);
  EXPECT_EQ(f.ov[0].algo, KOLO_ALGO_RD);
  EXPECT_NE(f.hash, 0u);
  kolo_tuned t;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_IB, &t);
  EXPECT_DOUBLE_EQ(t.a_host, 0.5e-6);
  EXPECT_EQ(t.a_net, 0.0);  // ib left out: the compiled constant stays
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 100, 4), KOLO_ALGO_RD);
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 5000, 4), -1);
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_BROADCAST, 100, 4), -1);  // the all-reduce's only
}

// "ranks N" narrows an override to communicators of N ranks: a file may
// hold what kolo-perf tune measured at several rank counts.
TEST(Tuning, OverridesForARankCount) {
  kolo_tuning f;
  std::string why;
  ASSERT_EQ(parse("kolo-tuning 1\noverride allreduce direct 1000 2000 ranks 8\n"
                  "override allreduce ring 1000 2000 ranks 4\noverride allreduce rd 0 1500\n",
                  &f, &why),
            0)
      << why;
  EXPECT_EQ(f.ov[0].nranks, 8);
  EXPECT_EQ(f.ov[2].nranks, 0);
  kolo_tuned t;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 1500, 8), KOLO_ALGO_DIRECT);
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 1500, 4), KOLO_ALGO_RING);
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 1500, 5), KOLO_ALGO_RD);  // no entry for 5: the one for any
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 1800, 5), -1);
  kolo_algo_topo four{4, 1, 4, KOLO_ALGO_AUTO, 0, 0, &t, 0, 0, 0}, eight{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, &t, 0, 0, 0};
  EXPECT_FALSE(kolo_algo_may_run(&four, KOLO_ALGO_DIRECT));  // named for 8 ranks only
  EXPECT_TRUE(kolo_algo_may_run(&eight, KOLO_ALGO_DIRECT));
  for (const char *bad : {"ranks 0", "ranks -1", "ranks 4x", "ranks", "rank 4", "ranks 2000000"}) {
    EXPECT_EQ(parse(std::string("kolo-tuning 1\noverride allreduce rd 0 1 ") + bad + "\n", &f, &why), -1) << bad;
    EXPECT_NE(why.find("t.tune:2:"), std::string::npos) << why;
  }
}

// "link TRANSPORT" narrows a line to communicators whose slowest link is
// that transport: resolve drops the lines of links the communicator has
// not, and narrow, once its hosts are known, those of the link it does
// not take; lines without the word hold everywhere.
TEST(Tuning, OverridesForALink) {
  kolo_tuning f;
  std::string why;
  ASSERT_EQ(parse("kolo-tuning 1\noverride allreduce rd 0 99 ranks 4 mem host link socket\n"
                  "override allreduce rabenseifner 0 99 ranks 4 link shm\n"
                  "override allreduce ring 0 99 link ib\noverride allreduce direct 0 200\n"
                  "channels allreduce 4 0 99 link shm\nchannels allreduce 2 0 99 link socket\n",
                  &f, &why),
            0)
      << why;
  EXPECT_EQ(f.ov[0].link, KOLO_LINK_SOCKET);
  EXPECT_EQ(f.ov[1].link, KOLO_LINK_SHM);
  EXPECT_EQ(f.ov[3].link, KOLO_TUNE_LINK_ANY);
  kolo_tuned t;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(t.noverrides, 3);  // the ib line is gone
  EXPECT_EQ(kolo_tuned_max_channels(&t, 4), 4);  // hosts unknown: both links' lines count
  kolo_tuned one_host = t, hosts = t;
  kolo_tuned_narrow(&one_host, 0);
  kolo_tuned_narrow(&hosts, 1);
  EXPECT_EQ(kolo_tuned_override(&one_host, KOLO_COLL_ALL_REDUCE, 50, 4), KOLO_ALGO_RABENSEIFNER);
  EXPECT_EQ(kolo_tuned_override(&hosts, KOLO_COLL_ALL_REDUCE, 50, 4), KOLO_ALGO_RD);
  EXPECT_EQ(kolo_tuned_override(&hosts, KOLO_COLL_ALL_REDUCE, 150, 4), KOLO_ALGO_DIRECT);  // any link
  EXPECT_EQ(kolo_tuned_override(&hosts, KOLO_COLL_ALL_REDUCE, 50, 2), KOLO_ALGO_DIRECT);
  EXPECT_EQ(kolo_tuned_channels(&one_host, KOLO_COLL_ALL_REDUCE, 50, 4), 4);
  EXPECT_EQ(kolo_tuned_channels(&hosts, KOLO_COLL_ALL_REDUCE, 50, 4), 2);
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_IB, &t);
  kolo_tuned_narrow(&t, 1);
  EXPECT_EQ(kolo_tuned_override(&t, KOLO_COLL_ALL_REDUCE, 50, 4), KOLO_ALGO_RING);
  for (const char *bad : {"link tcp", "link", "link shm mem host", "mem host link shm ranks 4", "link shm link ib"}) {
    EXPECT_EQ(parse(std::string("kolo-tuning 1\noverride allreduce rd 0 1 ") + bad + "\n", &f, &why), -1) << bad;
    EXPECT_NE(why.find("t.tune:2:"), std::string::npos) << why;
  }
}

// Overrides of the broadcast and the all-gather, and "mem host|cuda": a
// line holds on communicators of that memory kind only (resolve keeps it
// or drops it), and on a CUDA communicator only a line that says "mem
// cuda" lets the model run a multi-peer algorithm it leaves out there.
// An override of the reduce names its tree: the model runs it there and
// weighs it elsewhere; a CUDA communicator only for a "mem cuda" line.
TEST(Tuning, ReduceOverride) {
  kolo_tuning f;
  std::string why;
  ASSERT_EQ(parse("kolo-tuning 1\noverride reduce tree 0 4096 ranks 8 mem host\n", &f, &why), 0) << why;
  kolo_tuned host, cuda;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &host);
  kolo_tuning_resolve(&f, KOLO_LINK_CUDA_P2P, KOLO_LINK_SOCKET, &cuda);
  kolo_algo_topo h{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, &host, 0, 0, 0}, c{8, 1, 8, KOLO_ALGO_AUTO, 1, 0, &cuda, 0, 0, 0};
  EXPECT_EQ(kolo_tuned_override(&host, KOLO_COLL_REDUCE, 100, 8), KOLO_ALGO_TREE);
  EXPECT_EQ(kolo_reduce_choose(&h, 100, 1), KOLO_ALGO_TREE);
  EXPECT_TRUE(kolo_reduce_may_run(&h, KOLO_ALGO_TREE));
  EXPECT_EQ(kolo_reduce_choose(&h, 1 << 24, 1), KOLO_ALGO_RING);
  EXPECT_EQ(kolo_reduce_choose(&c, 100, 1), KOLO_ALGO_RING);
  EXPECT_FALSE(kolo_reduce_may_run(&c, KOLO_ALGO_TREE));
  h.reduce_allowed = bit(KOLO_ALGO_RING);  // KOLO_ALGO's entry wins over the file
  EXPECT_EQ(kolo_reduce_choose(&h, 100, 1), KOLO_ALGO_RING);
}

TEST(Tuning, OverridesPerCollectiveAndMemory) {
  kolo_tuning f;
  std::string why;
  ASSERT_EQ(parse("kolo-tuning 1\noverride broadcast dbtree 1000 2000 ranks 8 mem host\n"
                  "override broadcast tree 1000 2000 ranks 8\noverride allgather bruck 0 64 mem cuda\n"
                  "override allreduce rd 0 64 mem cuda\noverride allreduce rabenseifner 0 64\n"
                  "channels broadcast 2 0 100 mem host\nchannels broadcast 3 0 100\n",
                  &f, &why),
            0)
      << why;
  kolo_tuned host, cuda;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &host);
  kolo_tuning_resolve(&f, KOLO_LINK_CUDA_P2P, KOLO_LINK_SOCKET, &cuda);
  EXPECT_EQ(host.noverrides, 3);
  EXPECT_EQ(cuda.noverrides, 4);
  EXPECT_EQ(kolo_tuned_override(&host, KOLO_COLL_BROADCAST, 1500, 8), KOLO_ALGO_DBTREE);
  EXPECT_EQ(kolo_tuned_override(&cuda, KOLO_COLL_BROADCAST, 1500, 8), KOLO_ALGO_TREE);  // the host line dropped
  EXPECT_EQ(kolo_tuned_override(&host, KOLO_COLL_ALL_GATHER, 10, 8), -1);
  EXPECT_EQ(kolo_tuned_override(&cuda, KOLO_COLL_ALL_GATHER, 10, 8), KOLO_ALGO_BRUCK);
  EXPECT_EQ(kolo_tuned_override(&host, KOLO_COLL_ALL_REDUCE, 10, 8), KOLO_ALGO_RABENSEIFNER);
  EXPECT_EQ(kolo_tuned_override(&cuda, KOLO_COLL_ALL_REDUCE, 10, 8), KOLO_ALGO_RD);
  EXPECT_EQ(kolo_tuned_channels(&host, KOLO_COLL_BROADCAST, 10, 8), 2);
  EXPECT_EQ(kolo_tuned_channels(&cuda, KOLO_COLL_BROADCAST, 10, 8), 3);
  // The model: host, no KOLO_ALGO entry, the overrides' trees run; CUDA
  // (no_auto_peers) runs only what a "mem cuda" line names.
  kolo_algo_topo h{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, &host, 0, 0, 0}, c{8, 1, 8, KOLO_ALGO_AUTO, 1, 0, &cuda, 0, 0, 0};
  EXPECT_EQ(kolo_bcast_choose(&h, 1500, 1), KOLO_ALGO_DBTREE);
  // no override holds: the model, weighing the trees the file names (as
  // an override naming the direct all-reduce lets it weigh that)
  EXPECT_EQ(kolo_bcast_choose(&h, 5000, 1), KOLO_ALGO_TREE);
  EXPECT_EQ(kolo_bcast_choose(&h, 1 << 24, 1), KOLO_ALGO_RING);
  EXPECT_EQ(kolo_bcast_choose(&c, 1500, 1), KOLO_ALGO_RING);  // tree: a line without "mem"
  EXPECT_FALSE(kolo_bcast_may_run(&c, KOLO_ALGO_TREE));
  EXPECT_EQ(kolo_ag_choose(&c, 10, 1), KOLO_ALGO_BRUCK);
  EXPECT_TRUE(kolo_algo_may_run(&c, KOLO_ALGO_RD));
  EXPECT_FALSE(kolo_algo_may_run(&c, KOLO_ALGO_RABENSEIFNER));
  EXPECT_EQ(kolo_algo_choose(&c, 10, 1), KOLO_ALGO_RD);
  h.bcast_allowed = 1u << KOLO_ALGO_RING;  // KOLO_ALGO's entry wins over the file
  EXPECT_EQ(kolo_bcast_choose(&h, 1500, 1), KOLO_ALGO_RING);
}

// `channels COLL C MIN MAX [ranks N]`: how many channels calls of a
// collective and size use (core/op.h's kolo_op_channels reads it); the
// first line holding a call wins, a line for N ranks only on N ranks.
TEST(Tuning, ChannelsLines) {
  kolo_tuning f;
  std::string why;
  ASSERT_EQ(parse("kolo-tuning 1\nchannels allreduce 1 0 4096 ranks 4\nchannels allreduce 4 0 65536\n"
                  "channels allgather 16 100 200\nchannels alltoall 2 0 10 ranks 8\n",
                  &f, &why),
            0)
      << why;
  ASSERT_EQ(f.nchannel_lines, 4);
  EXPECT_EQ(f.ch[0].coll, KOLO_COLL_ALL_REDUCE);
  EXPECT_EQ(f.ch[2].coll, KOLO_COLL_ALL_GATHER);
  EXPECT_EQ(f.ch[2].channels, 16);
  kolo_tuned t;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(kolo_tuned_channels(&t, KOLO_COLL_ALL_REDUCE, 4096, 4), 1);
  EXPECT_EQ(kolo_tuned_channels(&t, KOLO_COLL_ALL_REDUCE, 4096, 5), 4);  // the line for 4 ranks does not hold
  EXPECT_EQ(kolo_tuned_channels(&t, KOLO_COLL_ALL_REDUCE, 4097, 4), 4);
  EXPECT_EQ(kolo_tuned_channels(&t, KOLO_COLL_ALL_REDUCE, 65537, 4), 0);  // no line: the default rule
  EXPECT_EQ(kolo_tuned_channels(&t, KOLO_COLL_ALL_GATHER, 150, 3), 16);
  EXPECT_EQ(kolo_tuned_channels(&t, KOLO_COLL_REDUCE_SCATTER, 150, 3), 0);
  EXPECT_EQ(kolo_tuned_channels(nullptr, KOLO_COLL_ALL_REDUCE, 8, 4), 0);
  EXPECT_EQ(kolo_tuned_max_channels(&t, 4), 16);
  EXPECT_EQ(kolo_tuned_max_channels(&t, 8), 16);
  ASSERT_EQ(parse("kolo-tuning 1\nchannels allreduce 1 0 4096 ranks 4\nchannels allreduce 2 0 9 ranks 8\n", &f), 0);
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(kolo_tuned_max_channels(&t, 4), 1);
  EXPECT_EQ(kolo_tuned_max_channels(&t, 3), 0);
  const std::pair<const char *, const char *> bad[] = {
      {"channels allreduce 0 0 5", "channels is a whole number in 1..16, not \"0\""},
      {"channels allreduce 17 0 5", "channels is a whole number in 1..16"},
      {"channels allreduce 2x 0 5", "channels is a whole number in 1..16"},
      {"channels allreduce -1 0 5", "channels is a whole number in 1..16"},
      {"channels send 2 0 5", "no collective (allreduce, reducescatter, allgather, broadcast, reduce, alltoall, gather, "
                              "scatter) named \"send\""},
      {"channels allreduce 2 9 5", "the size range is empty"},
      {"channels allreduce 2 0",
       "a channels line is: channels COLLECTIVE CHANNELS MIN_BYTES MAX_BYTES [ranks N] [mem host|cuda]"},
      {"channels allreduce 2 0 5 ranks 0", "ranks is a whole number"},
      {"channels allreduce 2 0 5 cores 4", "after MAX_BYTES a line takes \"ranks N\", then \"mem host|cuda\", then \"link TRANSPORT\", not \"cores\""},
      {"channels allreduce 2 0 5 mem gpu", "mem is host or cuda, not \"gpu\""},
      {"channels allreduce 2 0 5 mem cuda ranks 4", "after MAX_BYTES a line takes \"ranks N\", then \"mem host|cuda\", then \"link TRANSPORT\", not \"ranks\""},
      {"channels allreduce 2 0 5 ranks", "after MAX_BYTES a line takes \"ranks N\", then \"mem host|cuda\", then \"link TRANSPORT\", not \"ranks\""}};
  for (const auto &[line, want] : bad) {
    EXPECT_EQ(parse(std::string("kolo-tuning 1\n") + line + "\n", &f, &why), -1) << line;
    EXPECT_NE(why.find(std::string("t.tune:2: ") + want), std::string::npos) << line << ": " << why;
  }
  std::string many = "kolo-tuning 1\n";
  for (int i = 0; i < 129; i++) many += "channels allreduce 1 0 1\n";
  EXPECT_EQ(parse(many, &f, &why), -1);
  EXPECT_NE(why.find("t.tune:130: more than 128 channels lines"), std::string::npos) << why;
  std::string overrides = "kolo-tuning 1\n";
  for (int i = 0; i < 129; i++) overrides += "override broadcast tree 0 1\n";
  EXPECT_EQ(parse(overrides, &f, &why), -1);
  EXPECT_NE(why.find("t.tune:130: more than 128 overrides"), std::string::npos) << why;
}

// "chunk TRANSPORT BYTES [ranks N]": a round's chunk where host memory
// crosses the network, on the communicators whose network is TRANSPORT;
// the first line holding the rank count wins; CUDA communicators and other
// links get none.
TEST(Tuning, ChunkLines) {
  kolo_tuning f;
  std::string why;
  ASSERT_EQ(parse("kolo-tuning 1\nchunk socket 12288 ranks 3\nchunk ib 65536\nchunk socket 2097152\n"
                  "chunk socket 4096 ranks 3\n",
                  &f, &why),
            0)
      << why;
  ASSERT_EQ(f.nchunk_lines, 4);
  EXPECT_EQ(f.chunk[0].link, KOLO_LINK_SOCKET);
  EXPECT_EQ(f.chunk[0].bytes, 12288u);
  EXPECT_EQ(f.chunk[0].nranks, 3);
  EXPECT_EQ(f.chunk[1].link, KOLO_LINK_IB);
  EXPECT_EQ(f.chunk[1].nranks, 0);
  kolo_tuned t;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(kolo_tuned_chunk(&t, 3), 12288u);    // the first line for 3 ranks, not the later one
  EXPECT_EQ(kolo_tuned_chunk(&t, 4), 2097152u);  // the line for any count
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_IB, &t);
  EXPECT_EQ(kolo_tuned_chunk(&t, 3), 65536u);  // over ib, the ib line
  kolo_tuning_resolve(&f, KOLO_LINK_CUDA_P2P, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(kolo_tuned_chunk(&t, 3), 0u);  // CUDA memory keeps half its slots
  EXPECT_EQ(kolo_tuned_chunk(nullptr, 3), 0u);
  ASSERT_EQ(parse("kolo-tuning 1\nchunk ib 8192\n", &f), 0);
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &t);
  EXPECT_EQ(kolo_tuned_chunk(&t, 2), 0u);  // no line for TCP
  const std::pair<const char *, const char *> bad[] = {
      {"chunk shm 4096", "a chunk line names the network's transport (socket or ib), not \"shm\""},
      {"chunk cuda-p2p 4096", "a chunk line names the network's transport (socket or ib), not \"cuda-p2p\""},
      {"chunk nvlink 4096", "a chunk line names the network's transport (socket or ib), not \"nvlink\""},
      {"chunk socket 5000", "a chunk is a multiple of 4096 bytes in 4096..2^30, not \"5000\""},
      {"chunk socket 0", "a chunk is a multiple of 4096 bytes in 4096..2^30, not \"0\""},
      {"chunk socket 1073745920", "a chunk is a multiple of 4096 bytes in 4096..2^30"},
      {"chunk socket -4096", "a size in bytes is a decimal number, not \"-4096\""},
      {"chunk socket 1M", "a size in bytes is a decimal number below 2^62, not \"1M\""},
      {"chunk socket", "a chunk line is: chunk TRANSPORT BYTES [ranks N]"},
      {"chunk socket 4096 ranks", "a chunk line is: chunk TRANSPORT BYTES [ranks N]"},
      {"chunk socket 4096 cores 4", "after BYTES a chunk line takes \"ranks N\", not \"cores\""},
      {"chunk socket 4096 ranks 0", "ranks is a whole number in 1..2^20, not \"0\""},
      {"chunks socket 4096", "a line is \"link ...\", \"override ...\", \"channels ...\" or \"chunk ...\", not \"chunks\""}};
  for (const auto &[line, want] : bad) {
    EXPECT_EQ(parse(std::string("kolo-tuning 1\n") + line + "\n", &f, &why), -1) << line;
    EXPECT_NE(why.find(std::string("t.tune:2: ") + want), std::string::npos) << line << ": " << why;
  }
  std::string many = "kolo-tuning 1\n";
  for (int i = 0; i < 33; i++) many += "chunk socket 4096\n";
  EXPECT_EQ(parse(many, &f, &why), -1);
  EXPECT_NE(why.find("t.tune:34: more than 32 chunk lines"), std::string::npos) << why;
}

TEST(Tuning, RefusesWithFileAndLine) {
  kolo_tuning f;
  std::string why;
  EXPECT_EQ(parse("", &f, &why), -1);
  EXPECT_NE(why.find("t.tune:1:"), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 2\n", &f, &why), -1);
  EXPECT_NE(why.find("version"), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 1\nlink shm 1 2\nlink nvlink 1 2\n", &f, &why), -1);
  EXPECT_NE(why.find("t.tune:3: no transport"), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 1\nlink shm -1 2\n", &f, &why), -1);
  EXPECT_NE(why.find("t.tune:2: alpha"), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 1\nlink shm 1 nan\n", &f, &why), -1);
  EXPECT_EQ(parse("kolo-tuning 1\noverride allreduce rd 10 5\n", &f, &why), -1);
  EXPECT_NE(why.find("empty"), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 1\noverride reducescatter ring 0 5\n", &f, &why), -1);
  EXPECT_NE(why.find("only the all-reduce, the broadcast, the reduce and the all-gather have a choice of algorithm, "
                     "not \"reducescatter\""),
            std::string::npos)
      << why;
  EXPECT_EQ(parse("kolo-tuning 1\noverride reduce bruck 0 5\n", &f, &why), -1);
  EXPECT_NE(why.find("t.tune:2: no reduce algorithm (ring, tree, dbtree) named \"bruck\""), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 1\noverride broadcast rd 0 5\n", &f, &why), -1);
  EXPECT_NE(why.find("t.tune:2: no broadcast algorithm (ring, tree, dbtree) named \"rd\""), std::string::npos) << why;
  EXPECT_EQ(parse("kolo-tuning 1\noverride allgather tree 0 5\n", &f, &why), -1);
  EXPECT_NE(why.find("t.tune:2: no all-gather algorithm (ring, bruck) named \"tree\""), std::string::npos) << why;
  for (const char *other : {"tree", "bruck", "dbtree"}) {  // another collective's: an override would be ignored
    EXPECT_EQ(parse(std::string("kolo-tuning 1\noverride allreduce ") + other + " 0 5\n", &f, &why), -1) << other;
    EXPECT_NE(why.find("t.tune:2: no all-reduce algorithm (ring, hier, rd, rabenseifner, direct, oneshot) named"),
              std::string::npos)
        << why;
  }
  EXPECT_EQ(parse("kolo-tuning 1\nlink shm 1 2 3\n", &f, &why), -1);
  EXPECT_EQ(parse(std::string("kolo-tuning 1\nlink shm 1\0 2\n", 25), &f, &why), -1);
  EXPECT_NE(why.find("NUL"), std::string::npos) << why;
}

TEST(Tuning, WriteReadsBack) {
  kolo_tuning f{}, g;
  f.link[KOLO_LINK_SHM] = {1, 0.75, 9.5};
  f.link[KOLO_LINK_SOCKET] = {1, 25, 1.1};
  f.noverrides = 1;
  f.ov[0] = {KOLO_COLL_ALL_REDUCE, KOLO_ALGO_RABENSEIFNER, 1024, 65536, 0, KOLO_TUNE_MEM_ANY, KOLO_TUNE_LINK_ANY};
  f.ov[1] = {KOLO_COLL_ALL_REDUCE, KOLO_ALGO_DIRECT, 65537, 1 << 20, 8, KOLO_TUNE_MEM_HOST, KOLO_LINK_SOCKET};
  f.ov[2] = {KOLO_COLL_BROADCAST, KOLO_ALGO_DBTREE, 9, 10, 0, KOLO_TUNE_MEM_CUDA, KOLO_TUNE_LINK_ANY};
  f.noverrides = 3;
  f.ch[0] = {KOLO_COLL_ALL_REDUCE, 4, 0, 1 << 20, 4, KOLO_TUNE_MEM_ANY, KOLO_LINK_SHM};
  f.ch[1] = {KOLO_COLL_SCATTER, 16, 7, 7, 0, KOLO_TUNE_MEM_CUDA, KOLO_TUNE_LINK_ANY};
  f.nchannel_lines = 2;
  f.chunk[0] = {KOLO_LINK_SOCKET, 1 << 21, 2};
  f.chunk[1] = {KOLO_LINK_IB, 65536, 0};
  f.nchunk_lines = 2;
  char *text = nullptr;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  ASSERT_EQ(kolo_tuning_write(m, &f, "test"), 0);
  fclose(m);
  std::string why;
  ASSERT_EQ(parse(std::string(text, len), &g, &why), 0) << why;
  free(text);
  EXPECT_DOUBLE_EQ(g.link[KOLO_LINK_SHM].alpha_us, 0.75);
  EXPECT_DOUBLE_EQ(g.link[KOLO_LINK_SOCKET].beta_gbs, 1.1);
  EXPECT_EQ(g.ov[0].hi, 65536u);
  ASSERT_EQ(g.noverrides, 3);
  EXPECT_EQ(g.ov[0].nranks, 0);
  EXPECT_EQ(g.ov[1].algo, KOLO_ALGO_DIRECT);
  EXPECT_EQ(g.ov[1].mem, KOLO_TUNE_MEM_HOST);
  EXPECT_EQ(g.ov[2].coll, KOLO_COLL_BROADCAST);
  EXPECT_EQ(g.ov[2].algo, KOLO_ALGO_DBTREE);
  EXPECT_EQ(g.ov[2].mem, KOLO_TUNE_MEM_CUDA);
  EXPECT_EQ(g.ch[1].mem, KOLO_TUNE_MEM_CUDA);
  EXPECT_EQ(g.ch[0].mem, KOLO_TUNE_MEM_ANY);
  EXPECT_EQ(g.ov[1].nranks, 8);
  EXPECT_EQ(g.ov[0].link, KOLO_TUNE_LINK_ANY);
  EXPECT_EQ(g.ov[1].link, KOLO_LINK_SOCKET);
  EXPECT_EQ(g.ch[0].link, KOLO_LINK_SHM);
  EXPECT_EQ(g.ch[1].link, KOLO_TUNE_LINK_ANY);
  ASSERT_EQ(g.nchannel_lines, 2);
  EXPECT_EQ(g.ch[0].coll, KOLO_COLL_ALL_REDUCE);
  EXPECT_EQ(g.ch[0].channels, 4);
  EXPECT_EQ(g.ch[0].hi, 1u << 20);
  EXPECT_EQ(g.ch[0].nranks, 4);
  EXPECT_EQ(g.ch[1].coll, KOLO_COLL_SCATTER);
  EXPECT_EQ(g.ch[1].channels, 16);
  EXPECT_EQ(g.ch[1].lo, 7u);
  EXPECT_EQ(g.ch[1].nranks, 0);
  ASSERT_EQ(g.nchunk_lines, 2);
  EXPECT_EQ(g.chunk[0].link, KOLO_LINK_SOCKET);
  EXPECT_EQ(g.chunk[0].bytes, 1u << 21);
  EXPECT_EQ(g.chunk[0].nranks, 2);
  EXPECT_EQ(g.chunk[1].link, KOLO_LINK_IB);
  EXPECT_EQ(g.chunk[1].bytes, 65536u);
  EXPECT_EQ(g.chunk[1].nranks, 0);
}

// Two files that differ as the model says: a fast-latency host link makes
// the ring cheap enough at a mid size, a slow one favours Rabenseifner's
// fewer steps.  The choice must follow the file's constants.
TEST(Tuning, TheFileChangesTheChoiceAsTheModelSays) {
  kolo_tuning lat, bw;
  ASSERT_EQ(parse("kolo-tuning 1\nlink shm 1000 100\n", &lat), 0);  // latency-bound: 1 ms a hop
  ASSERT_EQ(parse("kolo-tuning 1\nlink shm 0.001 0.01\n", &bw), 0);  // bandwidth-bound: 10 MB/s
  kolo_tuned tl, tb;
  kolo_tuning_resolve(&lat, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &tl);
  kolo_tuning_resolve(&bw, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &tb);
  kolo_algo_topo t{8, 1, 8, KOLO_ALGO_AUTO, 0, bit(KOLO_ALGO_RING) | bit(KOLO_ALGO_RD), &tl, 0, 0, 0};
  size_t bytes = 1 << 20;
  // model (algo.h): ring 14 a + 5.5 S/b (memory passes), rd 3 a + 15 S/b
  EXPECT_LT(kolo_algo_cost(KOLO_ALGO_RD, &t, bytes, 1), kolo_algo_cost(KOLO_ALGO_RING, &t, bytes, 1));
  EXPECT_EQ(kolo_algo_choose(&t, bytes, 1), KOLO_ALGO_RD);
  t.tuned = &tb;
  EXPECT_GT(kolo_algo_cost(KOLO_ALGO_RD, &t, bytes, 1), kolo_algo_cost(KOLO_ALGO_RING, &t, bytes, 1));
  EXPECT_EQ(kolo_algo_choose(&t, bytes, 1), KOLO_ALGO_RING);
  // the costs are the file's: 3 steps of 1 ms and 15 passes over 1 MiB at 100 GB/s
  t.tuned = &tl;
  EXPECT_NEAR(kolo_algo_cost(KOLO_ALGO_RD, &t, bytes, 1), 3 * 1e-3 + 15 * bytes / 100e9, 1e-9);
}

TEST(Tuning, AnOverrideWinsWhereAllowed) {
  kolo_tuning f;
  ASSERT_EQ(parse("kolo-tuning 1\noverride allreduce ring 0 1000000\n", &f), 0);
  kolo_tuned tf;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &tf);
  kolo_algo_topo t{8, 1, 8, KOLO_ALGO_AUTO, 0, 0, &tf, 0, 0, 0};
  EXPECT_EQ(kolo_algo_choose(&t, 8, 1), KOLO_ALGO_RING);
  t.allowed = bit(KOLO_ALGO_RD) | bit(KOLO_ALGO_RABENSEIFNER);  // KOLO_ALGO excludes the ring
  EXPECT_NE(kolo_algo_choose(&t, 8, 1), KOLO_ALGO_RING);
}

// The model never picks the direct all-reduce by itself; a tuning file's
// override that names it makes it run (where it can: one host, not CUDA
// unless KOLO_ALGO names it), for its sizes only.
TEST(Tuning, OverridesNameTheDirectAllReduce) {
  kolo_tuning f;
  ASSERT_EQ(parse("kolo-tuning 1\noverride allreduce direct 0 4096\n", &f), 0);
  kolo_tuned tf;
  kolo_tuning_resolve(&f, KOLO_LINK_SHM, KOLO_LINK_SOCKET, &tf);
  kolo_algo_topo t{4, 1, 4, KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  EXPECT_FALSE(kolo_algo_may_run(&t, KOLO_ALGO_DIRECT));
  t.tuned = &tf;
  EXPECT_TRUE(kolo_algo_may_run(&t, KOLO_ALGO_DIRECT));
  EXPECT_EQ(kolo_algo_choose(&t, 4096, 1), KOLO_ALGO_DIRECT);
  EXPECT_NE(kolo_algo_choose(&t, 4097, 1), KOLO_ALGO_DIRECT);
  t.no_auto_peers = 1;
  EXPECT_NE(kolo_algo_choose(&t, 8, 1), KOLO_ALGO_DIRECT);
  t.no_auto_peers = 0;
  t.nhosts = 2;
  t.local = 2;
  EXPECT_NE(kolo_algo_choose(&t, 8, 1), KOLO_ALGO_DIRECT);
}

}  // namespace
