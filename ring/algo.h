/* algo.h - choosing the all-reduce algorithm: the flat ring
 * (all_reduce.c), the hierarchical ring (all_reduce_hier.c), recursive
 * doubling (all_reduce_rd.c), Rabenseifner's (all_reduce_rab.c), the
 * direct two-shot one (all_reduce_direct.c) or the one-shot one
 * (all_reduce_oneshot.c, "oneshot"); the broadcast's: the
 * pipelined chain (chain.c, "ring"), the binomial tree (bcast_tree.c,
 * "tree") or the double binary tree (bcast_dbtree.c, "dbtree"); and the
 * all-gather's: the ring (all_gather.c) or Bruck's
 * (all_gather_bruck.c, "bruck").
 *
 * The choice must be the same on every rank, so it is a pure function of
 * what every rank agrees on: the call's bytes and channels, the number of
 * ranks and hosts, the ranks per host, the memory kind and KOLO_ALGO
 * (checked alike on all ranks at init).
 *
 * Cost model (alpha-beta, per call, extended by the passes each algorithm
 * makes over memory): a a step's latency (the network's once there are
 * several hosts), m the rate of one pass over memory within a host, b a
 * rank's network bandwidth; S the bytes, n ranks, p the largest power of
 * two <= n, k = log2 p, f = 1 when p < n (the fold of the other n - p
 * ranks: two more steps of the whole message).
 *
 *   flat algorithms (ring, rd, rabenseifner, direct, oneshot):
 *     T = steps a + passes S / m                      one host
 *     T = steps a + passes S / m + sent S / (b s)     several hosts
 *   passes: bytes read and written per rank (slots and buffers), counted
 *   from their programs' steps (send 2, recvReduceSend 3, recvReduceCopy
 *   3, recvReduceCopySend 4, recvCopySend 3, recv 2, per byte); sent: the
 *   bytes a rank sends; s the ranks of a host sharing the ring's off-host
 *   traffic (min(channels, L): the rotated channel rings), 1 for the others.
 *
 *   ring:         steps 2(n-1), passes (6n-4)/n, sent 2(n-1)/n
 *   rd:           steps k + 2f, passes 5(k+f), sent k + f
 *                 (every level: send the whole message, receive-reduce it)
 *   rabenseifner: steps 2k + 2f, passes 9(p-1)/p + 5f, sent 2(p-1)/p + f
 *                 (the ring's bytes, in halving and doubling; reducing
 *                 into out and sending from it later costs the passes the
 *                 ring's fused recvReduceSend saves)
 *   direct:       steps 2 + (n-2)/2, passes 9(n-1)/n, sent 2(n-1)/n
 *                 (two dependent exchanges; each of the other n-2 peers
 *                 a phase talks to costs the work of a slot handed over,
 *                 counted as half a step)
 *   oneshot:      steps 1 + (n-2)/2, passes 5n-3, sent n-1
 *                 (one exchange of the whole message with every peer;
 *                 the input read n times, n-1 chunks folded into scratch)
 *   hier: the intra phases are H ring passes of L-1 steps each way, the
 *     inter phase 2(H-1) steps over S/L bytes, on all L ranks' links at once:
 *       T = 2H(L-1) a_host + 2(H-1) a_net
 *           + 2(L-1)/L S / m + 2(H-1)/H (S/L) / b
 *
 * On one host (a = 1 us, m = 20 GB/s) this gives, with 4 ranks, rd up to
 * 12 KiB, rabenseifner to 23 KiB and the ring above; with 8 ranks 8 KiB
 * and 68 KiB; with 16, 7 KiB and 164 KiB; with 3 or 5 rd to 4 or 8 KiB
 * (the fold makes rabenseifner dear).  The passes are what the ring wins
 * large messages by (measured at 16 MiB on 4 ranks: rabenseifner 1.3x the
 * ring's time, rd 2.2x; their passes' ratios are 1.35 and 2).
 *
 * Hierarchical needs H >= 2 hosts, each with the same L >= 2 ranks, and
 * direct and oneshot one host (a pipe between every two ranks: over a
 * network, n-1 connections per rank and channel); the model picks the
 * cheapest algorithm that can run.  KOLO_ALGO=ring|hier|rd|rabenseifner|
 * direct|oneshot forces one; a forced hier, direct or oneshot where the
 * hosts do not allow it
 * runs the ring (the communicator says so once, at INFO, at init).
 *
 * The model never picks direct or oneshot by itself: they run where
 * KOLO_ALGO's set holds them or a tuning file's override names them.
 * The one-shot shows why: on the 2-core VM it took 0.71-0.78x recursive
 * doubling's time at 8 B - 1 KiB with 8 processes, but 1.07-1.15x with 4
 * (ranks outnumbering cores make rd's log2 n dependent waits dear, which
 * steps counted at one alpha each cannot say).  What decides between it
 * and the ring is what a wait costs, and that the model cannot say: with
 * a core per rank the ring's fused steps and fewer passes should win;
 * where ranks outnumber cores every wait of the ring's 2(n-1) costs a
 * time slice, and on this project's 2-core VM the direct one was the
 * fastest from 128 KiB to 1 MiB at 4 and 8 ranks with waits polling 64
 * times (1.7x the ring at 1 MiB, 4 ranks), and from 32 to 128 KiB at 8
 * ranks with 8 polls, where this model would put its crossover with the
 * ring near 40 KiB.  kolo-perf tune measures such crossovers and writes
 * them as overrides (docs/tuning.md); README, "All-reduce algorithms",
 * has the figures.
 *
 * Broadcast (kolo_bcast_choose): with k = ceil(log2 n),
 *   chain: T = (n-1) a + S / b            (ring_links' a and b)
 *   tree:  T = k a + k S / b              (the root sends every byte k
 *                                          times; network links across hosts)
 *   dbtree: T = (k+1) a + c S / b         (c = 1 on 2 channels or more: a
 *                                          rank sends half the bytes twice
 *                                          in one tree, none in the other;
 *                                          c = 2 on one channel, one tree)
 * so the model would give the tree small messages: on one host up to
 * 20 KB at 4 ranks, 40 KB at 8, 73 KB at 16; never at 3 (both are 2 hops)
 * or 2.  It weighs the tree only where KOLO_ALGO's broadcast entry allows
 * it (broadcast:tree forces it, broadcast:ring,tree lets the model
 * choose; algo_select.h): on this project's 2-core VM the chain was as
 * fast or faster from 8 B to 128 KiB, with 4 ranks (tree 1.0-1.4x its
 * time, but 0.96x at 128 KiB) and with 8 (1.0-1.4x), medians of 5
 * alternating runs.  The double binary tree likewise runs only where the
 * entry allows it (broadcast:dbtree; README, "Broadcast algorithms", has
 * its figures).
 *
 * All-gather (kolo_ag_choose): with k = ceil(log2 n) and S_rank the bytes
 * of one rank's block,
 *   ring:  T = (n-1) a + (n-1) S_rank / b           (ring_links' a and b)
 *   bruck: T = k a + (n-1) S_rank / b + (n-2) S_rank / m
 *                                   (a and b of the network across hosts,
 *                                    as the tree's: its peers lie 2^j
 *                                    away; m the host's memory rate, b_host)
 * Both move the same bytes; Bruck's n-2 forwarded blocks are received
 * into out and read back from it when sent (recv, then send: 4 passes),
 * where the ring forwards them in one recvCopySend (3): one more pass over
 * each.  On one host (m = b) the model would give Bruck up to
 * (n-1-k)/(n-2) a m per rank: 10 KB at 4 ranks, 13 KB at 8, 16 KB at 16;
 * never at 3 (both take 2 hops) or 2.  Unlike the tree, the model weighs
 * Bruck's where KOLO_ALGO has no allgather entry (allgather:bruck forces
 * it, allgather:ring keeps the ring), except on CUDA communicators
 * (no_auto_peers).  Measured on this project's 2-core VM (release build,
 * kolo-perf all_gather, ring and Bruck alternating, medians of 5-7, the
 * sizes are the whole output): 8 ranks 0.76-0.86x the ring's time from
 * 64 B to 64 KiB, 1.03x at 256 KiB, 1.25-1.44x at 1 MiB; 6 ranks
 * 0.85-0.93x to 3 KiB, 0.98-1.04x at 12-48 KiB; 4 ranks one run 0.80-0.91x
 * and another 0.98-1.19x to 128 KiB (4 ranks on 2 cores run fast or slow
 * as the scheduler places them); 3 ranks 1.5x (the model keeps the ring
 * there).  The model's crossovers sit a little high at 6 ranks (2 KiB per
 * rank measured, 12 KB modelled) and close at 8 (8-32 KiB, 13 KB).
 *
 * The multi-peer algorithms (rd, rabenseifner, direct, tree, dbtree, bruck) run over point-to-point
 * pipes.  On a CUDA communicator the model leaves them out (no_auto_peers)
 * unless KOLO_ALGO asks for them: their kernels are checked element by
 * element on kolo's CPU model of the GPU (and check that calls match, as
 * every CUDA task does), but their speed on a GPU has never been measured,
 * and the constants above are host ones.
 */
#ifndef KOLO_RING_ALGO_H
#define KOLO_RING_ALGO_H

#include <stddef.h>

enum {
  KOLO_ALGO_AUTO = -1,
  KOLO_ALGO_RING = 0,
  KOLO_ALGO_HIER = 1,
  KOLO_ALGO_RD = 2,
  KOLO_ALGO_RABENSEIFNER = 3,
  KOLO_ALGO_TREE = 4, /* broadcast only (ring/bcast_tree.c) */
  KOLO_ALGO_DIRECT = 5,
  KOLO_ALGO_BRUCK = 6, /* all-gather only (ring/all_gather_bruck.c) */
  KOLO_ALGO_DBTREE = 7, /* broadcast only: the double binary tree (ring/bcast_dbtree.c) */
  KOLO_ALGO_ONESHOT = 8, /* all-reduce: the one-shot direct all-reduce (ring/all_reduce_oneshot.c) */
  KOLO_ALGO_NUM
};

/* The algorithms of each collective, as sets (bit 1 << KOLO_ALGO_*): the
 * all-reduce's five, the broadcast's chain ("ring") and two trees, the
 * all-gather's ring and Bruck's; the other collectives have the ring (their
 * one program) only. */
#define KOLO_ALGO_ALL_REDUCE_SET                                                                       \
  ((1u << KOLO_ALGO_RING) | (1u << KOLO_ALGO_HIER) | (1u << KOLO_ALGO_RD) | (1u << KOLO_ALGO_RABENSEIFNER) | \
   (1u << KOLO_ALGO_DIRECT) | (1u << KOLO_ALGO_ONESHOT))
#define KOLO_ALGO_BCAST_SET ((1u << KOLO_ALGO_RING) | (1u << KOLO_ALGO_TREE) | (1u << KOLO_ALGO_DBTREE))
#define KOLO_ALGO_AG_SET ((1u << KOLO_ALGO_RING) | (1u << KOLO_ALGO_BRUCK))
#define KOLO_ALGO_REDUCE_SET ((1u << KOLO_ALGO_RING) | (1u << KOLO_ALGO_TREE) | (1u << KOLO_ALGO_DBTREE))

/* What the choice depends on, equal on every rank. */
typedef struct {
  int nranks;
  int nhosts;
  int local;  /* ranks on every host, or 0 when hosts differ */
  int forced; /* KOLO_ALGO_AUTO or an algorithm */
  int no_auto_peers; /* 1: the model leaves rd, rabenseifner and direct out (CUDA) */
  /* tuning hook (ring/algo_select.h, ring/tuning.h) */
  unsigned allowed;               /* KOLO_ALGO's set, bit 1 << KOLO_ALGO_*; 0: unset */
  const struct kolo_tuned *tuned; /* KOLO_TUNING_FILE's constants; NULL: compiled */
  unsigned bcast_allowed;         /* KOLO_ALGO's broadcast set (ring, tree, dbtree); 0: no entry */
  unsigned ag_allowed;            /* KOLO_ALGO's all-gather set (ring, bruck); 0: no entry */
  unsigned reduce_allowed;        /* KOLO_ALGO's reduce set (ring: the chain, tree, dbtree); 0: no entry */
} kolo_algo_topo;

/* KOLO_ALGO's value: NULL or "" -> AUTO, "ring", "hier", "rd",
 * "rabenseifner", "tree", "direct", "bruck", "dbtree", "oneshot"; -2 for
 * anything else. */
int kolo_algo_parse(const char *s);
/* "ring", "hier", "rd", "rabenseifner", "tree", "direct", "bruck",
 * "dbtree", "oneshot", or "auto". */
const char *kolo_algo_name(int algo);
/* The names kolo_algo_parse takes, for error sentences: "ring, hier, ...". */
const char *kolo_algo_names(void);
/* 1 for the algorithms whose programs are multi-peer (ring/program.h). */
int kolo_algo_is_multi_peer(int algo);
/* 1 when the hierarchical all-reduce can run on this topology. */
int kolo_algo_hier_possible(const kolo_algo_topo *t);
/* 1 when all-reduce algorithm `algo` can run on this topology (hier on
 * hosts alike, direct within one host). */
int kolo_algo_possible(const kolo_algo_topo *t, int algo);
/* Modelled seconds of an all-reduce of `bytes` on `channels` channels. */
double kolo_algo_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
/* The algorithm of an all-reduce of `bytes` on `channels` channels. */
int kolo_algo_choose(const kolo_algo_topo *t, size_t bytes, int channels);

/* Modelled seconds of a broadcast of `bytes` by algorithm `algo`
 * (KOLO_ALGO_RING: the chain, KOLO_ALGO_TREE, KOLO_ALGO_DBTREE) on
 * `channels` channels. */
double kolo_bcast_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
/* 1 when the model may choose `algo` for a broadcast on t (KOLO_ALGO's
 * broadcast entry; without one, not the tree on a CUDA communicator). */
int kolo_bcast_may_run(const kolo_algo_topo *t, int algo);
/* The algorithm of a broadcast of `bytes` on `channels` channels:
 * KOLO_ALGO_RING (the chain), KOLO_ALGO_TREE or KOLO_ALGO_DBTREE. */
int kolo_bcast_choose(const kolo_algo_topo *t, size_t bytes, int channels);

/* Modelled seconds of a reduce of `bytes` by algorithm `algo`
 * (KOLO_ALGO_RING: the chain, KOLO_ALGO_TREE: the binomial tree,
 * KOLO_ALGO_DBTREE: the double binary tree, ring/reduce_tree.c) on
 * `channels` channels: the broadcast's of the same shape. */
double kolo_reduce_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
/* 1 when the model may choose `algo` for a reduce on t: the trees only
 * where KOLO_ALGO's reduce entry or a tuning file's override names them. */
int kolo_reduce_may_run(const kolo_algo_topo *t, int algo);
/* The algorithm of a reduce of `bytes` on `channels` channels. */
int kolo_reduce_choose(const kolo_algo_topo *t, size_t bytes, int channels);

/* Modelled seconds of an all-gather of `bytes` per rank by algorithm
 * `algo` (KOLO_ALGO_RING, KOLO_ALGO_BRUCK) on `channels` channels. */
double kolo_ag_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
/* 1 when the model may choose `algo` for an all-gather on t (KOLO_ALGO's
 * allgather entry; without one, the ring, and Bruck's except on CUDA
 * communicators). */
int kolo_ag_may_run(const kolo_algo_topo *t, int algo);
/* The algorithm of an all-gather of `bytes` per rank on `channels`
 * channels: KOLO_ALGO_RING or KOLO_ALGO_BRUCK. */
int kolo_ag_choose(const kolo_algo_topo *t, size_t bytes, int channels);

/* Modelled seconds of one call of collective `coll` (ring/schedule.h's
 * KOLO_COLL_*; koloGroupSimulateEnd), `bytes` being the count times the
 * type size as the API takes it (per rank for reduce-scatter and
 * all-gather), with the links of the ring above:
 *   all-reduce: kolo_algo_cost of kolo_algo_choose's algorithm;
 *   all-gather: kolo_ag_cost of kolo_ag_choose's algorithm;
 *   reduce-scatter, all-to-all, gather, scatter: (n-1) steps of
 *     a rank's (a block's) bytes each, one after another:
 *     T = (n-1) a + (n-1) S_rank / (b min(ch, L))  (half an all-reduce of n S_rank);
 *   broadcast: kolo_bcast_cost of kolo_bcast_choose's algorithm;
 *   reduce: kolo_reduce_cost of kolo_reduce_choose's algorithm (the
 *     broadcast's cost of the same shape: chain, tree, dbtree);
 *   send, recv: one hop: T = a + S / b;
 * 0 on one rank (nothing moves between ranks). */
double kolo_coll_cost(int coll, const kolo_algo_topo *t, size_t bytes, int channels);

#endif
