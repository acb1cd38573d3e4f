/* op.h - one recorded call, and the per-call choices both executors share.
 *
 * Kept apart from comm_state.h (and free of C11 atomics) so that the CUDA planner
 * and its C++ test can use it: the host executor (enqueue.c) and the CUDA
 * planner (cuda_plan.c) take channels, program slot and geometry from here,
 * so a collective has the same geometry whichever executor runs it. */
#ifndef KOLO_CORE_OP_H
#define KOLO_CORE_OP_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"
#include "ring/algo.h"
#include "ring/program.h"
#include "ring/schedule.h"
#include "ring/tuning.h"

struct koloComm;

/* kolo_op.premul: how a premul-sum's scalar reaches the executors. */
enum {
  KOLO_PREMUL_NONE = 0,
  KOLO_PREMUL_VALUE = 1,  /* scalar: the bits of one element (little endian) */
  KOLO_PREMUL_POINTER = 2 /* scalar: the address of one element, read when the call runs */
};

/* One collective or point-to-point call, as recorded by the API. */
typedef struct kolo_op {
  int coll;              /* kolo_coll */
  const void *sendbuff;
  void *recvbuff;
  size_t count;          /* elements per block (see ring/program.h) */
  koloDataType_t type;
  koloRedOp_t op;
  int arg;               /* root, peer, or (all-reduce, all-gather) algorithm: ring/algo.h's
                          * KOLO_ALGO_*; a broadcast's carries its algorithm too (kolo_bcast_arg) */
  struct koloComm *comm;
  koloStream_t stream;   /* CUDA communicators: where the call is enqueued */
  /* A premul-sum (core/redop.h): op is koloSum and each rank's input is
   * multiplied by the scalar before it is added (KOLO_PREMUL_*). */
  int premul;
  uint64_t scalar;
  /* CUDA communicators: the call's place in the communicator's order of
   * collectives (kolo_call_sig.seq), given when it is enqueued; 0: send /
   * recv. */
  uint32_t seq;
} kolo_op;

static inline int kolo_coll_is_p2p(int coll) {
  return coll == KOLO_COLL_SEND || coll == KOLO_COLL_RECV;
}

/* A broadcast's kolo_op.arg: its root, plus nranks when it runs the
 * binomial tree, plus 2 nranks when it runs the double binary tree (chosen
 * when the call is recorded, as an all-reduce's algorithm is), so that the
 * chain's and each tree's programs have slots of their own and every later
 * stage reads the choice from the op. */
static inline int kolo_bcast_arg(int root, int algo, int nranks) {
  return algo == KOLO_ALGO_TREE ? root + nranks : algo == KOLO_ALGO_DBTREE ? root + 2 * nranks : root;
}

/* A reduce's kolo_op.arg likewise: its root, plus nranks for the binomial
 * tree, 2 nranks for the double binary tree (ring/reduce_tree.c). */
static inline int kolo_reduce_arg(int root, int algo, int nranks) { return kolo_bcast_arg(root, algo, nranks); }

/* 1 for the collectives whose arg carries the root and the algorithm. */
static inline int kolo_coll_rooted_algo(int coll) { return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE; }

/* The root or peer of a call's arg (kolo_schedule_build's arg). */
static inline int kolo_arg_root(int coll, int arg, int nranks) {
  return kolo_coll_rooted_algo(coll) && arg >= nranks ? arg % nranks : arg;
}

/* The algorithm of a call's arg (kolo_schedule_build's algo): the
 * all-reduce's and the all-gather's (their arg is it), the broadcast's ring
 * (chain), tree or dbtree, the reduce's ring (chain) or tree, else the
 * ring. */
static inline int kolo_arg_algo(int coll, int arg, int nranks) {
  if (coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_ALL_GATHER) return arg;
  if (!kolo_coll_rooted_algo(coll) || arg < nranks) return KOLO_ALGO_RING;
  return arg < 2 * nranks ? KOLO_ALGO_TREE : KOLO_ALGO_DBTREE;
}

/* Programs depend on the root (broadcast, reduce, gather, scatter), peer
 * (send, recv) or algorithm (all-reduce, all-gather: kolo_op.arg is the one
 * the call runs, chosen when it is recorded, ring/algo.h; broadcast: both,
 * kolo_bcast_arg) only: the index of a call's program among its
 * collective's programs. */
static inline int kolo_program_slot(int coll, int arg) {
  return (coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
          coll == KOLO_COLL_SCATTER || coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_ALL_GATHER ||
          kolo_coll_is_p2p(coll))
             ? arg
             : 0;
}

/* How many slots a collective's programs have on a comm of nranks. */
static inline int kolo_program_slots(int coll, int nranks) {
  /* per algorithm; the slots of the other collectives' algorithms hold the ring's */
  if (coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_ALL_GATHER) return KOLO_ALGO_NUM;
  if (coll == KOLO_COLL_BROADCAST) return 3 * nranks; /* the chain's, the tree's, the double tree's */
  if (coll == KOLO_COLL_REDUCE) return 3 * nranks;    /* the chain's and the two trees' */
  return kolo_program_slot(coll, 1) == 1 ? nranks : 1;
}

/* 1 when op's programs are multi-peer (they run over point-to-point pipes)
 * on a comm of nranks. */
static inline int kolo_op_is_multi_peer(const kolo_op *op, int nranks) {
  if (kolo_coll_is_multi_peer(op->coll)) return 1;
  const int by_algo = op->coll == KOLO_COLL_ALL_REDUCE || op->coll == KOLO_COLL_ALL_GATHER || kolo_coll_rooted_algo(op->coll);
  return by_algo && kolo_algo_is_multi_peer(kolo_arg_algo(op->coll, op->arg, nranks));
}

/* 1 when ops[i] is the first of ops[0, i] on its communicator (work done
 * once per communicator of a group). */
static inline int kolo_op_first_of_comm(const kolo_op *ops, int i) {
  for (int j = 0; j < i; j++)
    if (ops[j].comm == ops[i].comm) return 0;
  return 1;
}

/* Where the program of (coll, arg) for channel ch lies in a table of
 * programs per slot and ring: channels share a ring (and its programs) with
 * the channel nrings before them (core/comm_state.h). */
static inline int kolo_program_index(int coll, int arg, int ch, int nrings) {
  if (nrings < 1) nrings = 1;
  return kolo_program_slot(coll, arg) * nrings + ch % nrings;
}

/* The algorithm (ring/algo.h KOLO_ALGO_*) an all-reduce of count elements
 * of type runs on comm (core/plan.c): what kolo_plan_op puts in its
 * kolo_op.arg, and for logs and tests. */
int kolo_comm_all_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type);
/* The same for a broadcast: KOLO_ALGO_RING (the chain), KOLO_ALGO_TREE or
 * KOLO_ALGO_DBTREE. */
int kolo_comm_bcast_algo(struct koloComm *comm, size_t count, koloDataType_t type);
/* The same for an all-gather of count elements per rank: KOLO_ALGO_RING or
 * KOLO_ALGO_BRUCK. */
int kolo_comm_ag_algo(struct koloComm *comm, size_t count, koloDataType_t type);
/* The same for a reduce: KOLO_ALGO_RING (the chain) or KOLO_ALGO_TREE. */
int kolo_comm_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type);

/* Channels a call uses: what a tuning file's `channels` line for its
 * collective, bytes and rank count says (tuned: NULL for none), else one
 * per min_channel_bytes of a rank's share (of a block, for the collectives
 * that move one block per peer); at most nchannels, at least 1.  A pure
 * function of the call's count and type and of the file (the same on every
 * rank: its hash is compared at init), so both ends of every pipe agree. */
static inline int kolo_op_channels(const kolo_op *op, int nranks, int nchannels, size_t min_channel_bytes,
                                   const kolo_tuned *tuned) {
  size_t bytes = op->count * koloTypeSize(op->type);
  int want_tuned = kolo_tuned_channels(tuned, op->coll, bytes, nranks);
  if (want_tuned > 0) return want_tuned < nchannels ? want_tuned : nchannels;
  if (op->coll == KOLO_COLL_ALL_REDUCE) bytes /= (size_t)nranks;
  size_t want = min_channel_bytes ? bytes / min_channel_bytes : (size_t)nchannels;
  if (want < 1) want = 1;
  return want < (size_t)nchannels ? (int)want : nchannels;
}

/* 1 when a task of coll running prog moves its data over point-to-point
 * pipes (a send/recv, or a multi-peer program), whose slots are the
 * communicator's p2p_slot_bytes, not its ring pipes' slot_bytes. */
static inline int kolo_on_p2p_pipes(int coll, const kolo_program *prog) {
  return kolo_coll_is_p2p(coll) || prog->npeers > 0;
}

/* The round geometry of a call on nch channels: the largest chunk is half
 * a connector's slots (a pipe holds two chunks in flight), or chunk_cap
 * bytes where that is less (0: no cap; comm_state.h). */
static inline kolo_geometry kolo_op_geometry(const kolo_op *op, const kolo_program *prog,
                                             int nranks, int nch, size_t slot_bytes,
                                             uint32_t nslots, size_t chunk_cap) {
  kolo_geometry g;
  size_t esz = koloTypeSize(op->type);
  g.count = op->count;
  g.elem_size = esz;
  g.nranks = nranks;
  g.nchannels = nch;
  size_t chunk = slot_bytes * (nslots / 2);
  if (chunk_cap != 0 && chunk_cap < chunk) chunk = chunk_cap;
  g.chunk_elems = chunk / esz;
  g.layout = prog->layout;
  return g;
}

#endif
