/* schedule.h - compiling collectives into step programs (one algorithm per
 * file: all_reduce.c, all_reduce_hier.c, reduce_scatter.c, all_gather.c,
 * chain.c, p2p.c, and the multi-peer ones all_to_all.c, gather_scatter.c,
 * all_reduce_rd.c, all_reduce_rab.c, all_reduce_direct.c, bcast_tree.c,
 * all_gather_bruck.c; algo.h chooses among the all-reduces, between the
 * broadcast's chain and tree and between the all-gather's ring and
 * Bruck's).
 *
 * A schedule knows ranks and ring order, nothing about memory kinds or
 * transports.  The program for (rank, channel) depends only on the ring of
 * that channel, the collective and its root or peer.
 */
#ifndef KOLO_RING_SCHEDULE_H
#define KOLO_RING_SCHEDULE_H

#include "kolo.h"
#include "ring/program.h"

typedef enum {
  KOLO_COLL_ALL_REDUCE = 0,
  KOLO_COLL_REDUCE_SCATTER,
  KOLO_COLL_ALL_GATHER,
  KOLO_COLL_BROADCAST,
  KOLO_COLL_REDUCE,
  KOLO_COLL_SEND,
  KOLO_COLL_RECV,
  KOLO_COLL_ALL_TO_ALL, /* multi-peer programs (program.h) from here on */
  KOLO_COLL_GATHER,
  KOLO_COLL_SCATTER,
  KOLO_COLL_NUM
} kolo_coll;

const char *kolo_coll_name(int coll);

/* 1 for the collectives whose programs are multi-peer (they run over the
 * point-to-point pipes of their peers, ring/program.h). */
static inline int kolo_coll_is_multi_peer(int coll) {
  return coll == KOLO_COLL_ALL_TO_ALL || coll == KOLO_COLL_GATHER || coll == KOLO_COLL_SCATTER;
}

/* 1 for the collectives some of whose programs are multi-peer: those above,
 * the all-reduce, whose recursive doubling, Rabenseifner, direct and
 * one-shot programs are, the broadcast and the reduce, whose trees are,
 * and the all-gather, whose Bruck program is (ring/algo.h's
 * kolo_algo_is_multi_peer). */
static inline int kolo_coll_may_be_multi_peer(int coll) {
  return kolo_coll_is_multi_peer(coll) || coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_BROADCAST ||
         coll == KOLO_COLL_ALL_GATHER || coll == KOLO_COLL_REDUCE;
}

/* A ring: order[i] is the rank at position i (nranks of them); pos[r] the
 * position of rank r of the communicator, -1 when r is not on this ring (the
 * intra- and inter-host rings of ring/topology.h cover some ranks only). */
typedef struct {
  int nranks;
  int *order;
  int *pos;
} kolo_ring;

static inline int kolo_ring_next(const kolo_ring *ring, int rank) {
  return ring->order[(ring->pos[rank] + 1) % ring->nranks];
}
static inline int kolo_ring_prev(const kolo_ring *ring, int rank) {
  return ring->order[(ring->pos[rank] + ring->nranks - 1) % ring->nranks];
}

/* Fills *out with rank's program.  `arg` is the root (broadcast, reduce,
 * gather, scatter) or the peer (send, recv), ignored otherwise; `algo` is
 * the algorithm (ring/algo.h's KOLO_ALGO_*) of the all-reduce (ring, rd,
 * rabenseifner, direct, oneshot; hier's three programs come from
 * kolo_sched_all_reduce_hier, and hier here is the ring it falls back to),
 * of the broadcast (ring: the chain, tree, dbtree), of the reduce (ring:
 * the chain, tree) and of the all-gather (ring, bruck), ignored otherwise.  The multi-peer programs use the
 * ring's rank count only.  koloSystemError when out of memory; *out is
 * untouched on failure.  The program of channel 0: the same on every
 * channel except the double binary tree's (kolo_schedule_build_on). */
koloResult_t kolo_schedule_build(int coll, const kolo_ring *ring, int rank, int arg, int algo,
                                 kolo_program *out);
/* The same for channel `channel`: the double binary tree's broadcast runs
 * its first tree on even channels and its second on odd ones. */
koloResult_t kolo_schedule_build_on(int coll, const kolo_ring *ring, int rank, int arg, int algo, int channel,
                                    kolo_program *out);

/* Per-algorithm builders (called by kolo_schedule_build). */
koloResult_t kolo_sched_all_reduce(const kolo_ring *ring, int rank, kolo_program *p);
koloResult_t kolo_sched_reduce_scatter(const kolo_ring *ring, int rank, kolo_program *p);
koloResult_t kolo_sched_all_gather(const kolo_ring *ring, int rank, kolo_program *p);
koloResult_t kolo_sched_broadcast(const kolo_ring *ring, int rank, int root, kolo_program *p);
koloResult_t kolo_sched_reduce(const kolo_ring *ring, int rank, int root, kolo_program *p);
koloResult_t kolo_sched_p2p(int coll, int rank, int peer, kolo_program *p);
koloResult_t kolo_sched_all_to_all(int nranks, int rank, kolo_program *p);
koloResult_t kolo_sched_gather(int nranks, int rank, int root, kolo_program *p);
koloResult_t kolo_sched_scatter(int nranks, int rank, int root, kolo_program *p);
koloResult_t kolo_sched_all_reduce_rd(int nranks, int rank, kolo_program *p);
koloResult_t kolo_sched_all_reduce_rab(int nranks, int rank, kolo_program *p);
koloResult_t kolo_sched_all_reduce_direct(int nranks, int rank, kolo_program *p);
koloResult_t kolo_sched_all_reduce_oneshot(int nranks, int rank, kolo_program *p);
koloResult_t kolo_sched_broadcast_tree(int nranks, int rank, int root, kolo_program *p);
/* rank's parent (-1: the root) and children (largest subtree first; returns
 * how many) in the binomial tree rooted at root (bcast_tree.c). */
int kolo_sched_binomial_peers(int nranks, int rank, int root, int *parent, int kids[32]);
koloResult_t kolo_sched_reduce_tree(int nranks, int rank, int root, kolo_program *p);
/* rank's parent (-1: the root) and children (0..2; returns how many) in the
 * double binary tree of channel `channel` rooted at root (bcast_dbtree.c). */
int kolo_sched_dbtree_peers(int nranks, int rank, int root, int channel, int *parent, int kids[2]);
koloResult_t kolo_sched_reduce_dbtree(int nranks, int rank, int root, int channel, kolo_program *p);
koloResult_t kolo_sched_broadcast_dbtree(int nranks, int rank, int root, int channel, kolo_program *p);
/* A broadcast tree's program for one rank (bcast_tree.c, bcast_dbtree.c):
 * parent -1 at the root; kids[0..nkids) its children, in the order it
 * serves them: the chunk from the parent (or in, at the root) to out and
 * the first child, then to each other child; a root without children
 * copies in to out. */
koloResult_t kolo_sched_tree_program(int parent, const int *kids, int nkids, kolo_program *out);
koloResult_t kolo_sched_all_gather_bruck(int nranks, int rank, kolo_program *p);

/* Hierarchical all-reduce (all_reduce_hier.c): three programs per rank, run
 * in this order on every channel, the intra ones over the ranks of rank's
 * host (intra ring, by local index), the inter one over the ranks of its
 * local index (inter ring, hosts in order; every host has as many ranks).
 * koloInvalidArgument when either ring has fewer than 2 ranks or lacks
 * rank, koloSystemError when out of memory; *out is untouched on failure. */
enum { KOLO_HIER_INTRA_RS = 0, KOLO_HIER_INTER_AR, KOLO_HIER_INTRA_AG, KOLO_HIER_PHASES };
koloResult_t kolo_sched_all_reduce_hier(const kolo_ring *intra, const kolo_ring *inter, int rank,
                                        int phase, kolo_program *out);

/* The frame of the multi-peer all-reduces: on 1 rank one FINAL copy (in
 * `layout`), else build(n, rank, p); then the peers indexed.  *out is
 * untouched on failure. */
typedef koloResult_t (*kolo_peer_builder)(int n, int rank, kolo_program *p);
koloResult_t kolo_sched_peer_all_reduce(int n, int rank, int layout, kolo_peer_builder build, kolo_program *out);

/* Allocates p->steps for n steps and sets the header (peers -1). */
koloResult_t kolo_program_alloc(kolo_program *p, int nsteps, int layout);
/* Appends nothing: sets step i. */
void kolo_program_set(kolo_program *p, int i, int op, int flags, int src_buf,
                      int src_chunk, int dst_buf, int dst_chunk);
/* Multi-peer programs: allocates p->peers for n peers (ranks -1, no
 * directions); koloSystemError when out of memory (the steps stay). */
koloResult_t kolo_program_alloc_peers(kolo_program *p, int n);
/* Sets the peer indices of step i (what it sends to, receives from). */
void kolo_program_set_peers(kolo_program *p, int i, int to, int from);
/* Derives each peer's sends / recvs from the steps (call once the steps are
 * set). */
void kolo_program_index_peers(kolo_program *p);
/* *out = a deep copy of p (steps and peers of its own); koloSystemError
 * when out of memory (*out untouched). */
koloResult_t kolo_program_clone(const kolo_program *p, kolo_program *out);

#endif
