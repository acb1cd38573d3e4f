/* cuda_plan.h - turning the ops of one CUDA communicator into kernel
 * launches (kolo_dev_batch, kernels/cuda_exec.h).
 *
 * A pure function of the ops and plain tables (no CUDA call, no CUDA
 * header), so that tests check it on machines without a GPU with fake
 * device pointers.  One task per (op, channel), with the op's program
 * (device copy of its steps), the geometry the host executor would use
 * (core/op.h), the buffers and the connector ends: a single-peer program's
 * two, or the table of a multi-peer program's ends (ring/program.h; the
 * point-to-point pipes of its peers on that channel).
 *
 * Order and launches.  Tasks are sorted by a key every rank computes alike
 * for the two (or n) halves of each transfer:
 *
 *   collectives:  (0, index of the collective among the comm's ops, channel)
 *                 (multi-peer ones too: every rank calls them in one order)
 *   hierarchical all-reduce: (0, index, phase, channel)
 *   send / recv:  (1, dtype, protocol, sender, receiver, j, channel, dir)
 *                 j: the j-th send from sender to receiver in the call
 *                 (the j-th recv on the other side matches it)
 *
 * then cut, in that order, into consecutive launches on the one stream: a
 * new launch starts when a task would share a connector end with a task of
 * the current launch (the kernel reads an end's step counter when it
 * starts, so one end belongs to one block; a multi-peer task is kept apart
 * from any task of its channel that might use one of its point-to-point
 * ends: every other multi-peer task, and a single-peer task whose end goes
 * to one of its peers in that direction), when its dtype differs (the
 * kernel is instantiated per dtype, from tasks[0].type), when its protocol
 * differs, when it is a later phase of the hierarchical all-reduce whose
 * earlier phase is in (the phases run one after the other), or when
 * max_tasks (at most KOLO_DEV_MAX_TASKS) are in (the blocks the ranks
 * sharing a device may each have resident at once), or when its call's
 * collective number (kolo_op.seq) lies 0xffff or more past the launch's
 * first (a task carries it as a 16-bit offset).  Why sorting matters: launch
 * k + 1 starts when launch k has finished, so if rank A put a send in an
 * earlier launch than rank B put its matching recv while B's earlier launch
 * waits for A's later one, both would hang.  With every rank cutting one
 * globally agreed order, the smallest unfinished key always has all of its
 * halves in launches whose predecessors (smaller keys only) are done, so it
 * can finish; by induction everything finishes, whatever the cuts (as long
 * as the blocks of concurrent launches are resident together).  A send to
 * oneself and its recv share a key: they are kept in one launch.
 *
 * Protocol: LL when count * elem_size <= ll_threshold[coll] (0: never), else
 * SIMPLE: a pure function of the collective, count and dtype, so the same
 * on every rank (which compare KOLO_LL_THRESHOLD and KOLO_PROTO at init).
 * Ops with count 0 make no task.
 */
#ifndef KOLO_CORE_CUDA_PLAN_H
#define KOLO_CORE_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/op.h"
#include "kernels/cuda_exec.h"
#include "ring/algo.h"
#include "ring/program.h"
#include "ring/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the planner needs of a communicator: plain values and tables. */
typedef struct kolo_cuda_plan_comm {
  int rank, nranks, nchannels;
  uint32_t nslots;
  size_t slot_bytes;     /* ring pipes' slots */
  size_t p2p_slot_bytes; /* point-to-point pipes' slots (kolo_on_p2p_pipes) */
  size_t min_channel_bytes;
  const struct kolo_tuned *tuned; /* KOLO_TUNING_FILE's channels lines (the comm's); NULL: none */
  /* Tasks (blocks) a launch may have: the rank's share of its device
   * (core/cuda_residency.c); 0 or above KOLO_DEV_MAX_TASKS: that. */
  int max_tasks;
  /* Per kolo_coll: bytes up to which a call uses LL; 0: LL never
   * (KOLO_LL_THRESHOLD narrowed by KOLO_PROTO: core/proto_select.h). */
  size_t ll_threshold[KOLO_COLL_NUM];
  uint64_t timeout_ns;           /* 0: none */
  uint32_t stall_ms;             /* KOLO_STALL_WARN_S in ms; 0: no warning */
  uint32_t *abort;               /* device view of the mapped abort word */
  uint32_t *status;              /* device view of the mapped status words */
  /* [k][kolo_program_index(k, arg, channel, nrings)] for k <
   * KOLO_COLL_NUM, kolo_program_slots(k, nranks) * nrings entries each: the
   * host program (peers,
   * layout, step count) and the device copy of its steps.  Channel ch runs
   * program ch % nrings (0 counts as 1): its ring's, or with a schedule
   * file its channel's (core/comm_state.h: nvariants). */
  int nrings;
  const kolo_program *programs[KOLO_COLL_NUM];
  const kolo_step *const *dev_steps[KOLO_COLL_NUM];
  /* Connector ends as kernels see them; an end whose `step` is NULL does
   * not exist (not connected). */
  const kolo_dev_conn *ring_send, *ring_recv; /* [nchannels] */
  const kolo_dev_conn *p2p_send, *p2p_recv;   /* [peer * nchannels + channel] */
  /* Collectives with multi-peer programs (kolo_coll_may_be_multi_peer):
   * [k][slot * nchannels + channel], slot = kolo_program_slot(k, arg): the
   * device table of the ends of that program on that channel
   * (kernels/cuda_exec.h; NULL for a single-peer program), whose entries
   * point at the device copies of p2p_send / p2p_recv.  The planner checks
   * the ends on the host copies above. */
  const kolo_dev_ends *end_tables[KOLO_COLL_NUM];
  /* Hierarchical all-reduce (ring/all_reduce_hier.c), where the comm has
   * it (hier_programs not NULL; an all-reduce runs it when its kolo_op.arg
   * says so, ring/algo.h): this rank's three phase programs (KOLO_HIER_*),
   * the device copies of their steps, and the ends of the intra-host
   * (index 0) and inter-host (1) pipes, [nchannels] each. */
  const kolo_program *hier_programs;
  const kolo_step *hier_steps[KOLO_HIER_PHASES];
  const kolo_dev_conn *hier_send[2], *hier_recv[2];
  /* Device scratch: KOLO_DEV_MAX_TASKS parts of scratch_task_bytes; the
   * task in block i of a launch gets part i (launches of one comm run one
   * after the other).  NULL: a task whose program names scratch cannot be
   * planned. */
  char *scratch;
  size_t scratch_task_bytes;
} kolo_cuda_plan_comm;

/* One task before it is placed: which op, which channel, and its key. */
typedef struct kolo_cuda_plan_item {
  int op;      /* index into ops */
  int channel;
  int nch;     /* channels of that op */
  int phase;   /* hierarchical all-reduce: KOLO_HIER_*; -1: the op's flat program */
  int32_t key[8];
} kolo_cuda_plan_item;

/* 1 when the all-reduce op runs hierarchically on this comm (its arg is
 * KOLO_ALGO_HIER and the comm has the programs): three phases per channel,
 * each phase in launches after the previous phase's (it reads what that one
 * wrote), intra phases on the intra pipes, the inter phase on the inter
 * pipes. */
int kolo_cuda_plan_is_hier(const kolo_op *op, const kolo_cuda_plan_comm *pc);

/* KOLO_PROTO_LL or KOLO_PROTO_SIMPLE for op (its collective, count and
 * type) on pc. */
int kolo_cuda_plan_protocol(const kolo_op *op, const kolo_cuda_plan_comm *pc);

/* Number of tasks the ops make (the size of the items array). */
int kolo_cuda_plan_count(const kolo_op *ops, int nops, const kolo_cuda_plan_comm *pc);

/* Fills items[0 .. kolo_cuda_plan_count()) in launch order.  All ops
 * belong to the communicator pc describes. */
void kolo_cuda_plan_items(const kolo_op *ops, int nops, const kolo_cuda_plan_comm *pc,
                          kolo_cuda_plan_item *items);

/* Fills *batch with the next launch, starting at items[*next], and
 * advances *next.  Returns 1 when a batch was made, 0 when none is left, -1
 * when a task's connector end or program is missing (a bug of the caller;
 * *next is left where the bad task is). */
int kolo_cuda_plan_next(const kolo_op *ops, const kolo_cuda_plan_comm *pc,
                        const kolo_cuda_plan_item *items, int nitems, int *next,
                        kolo_dev_batch *batch);

/* How many slices the kernel running task `t` (made by kolo_cuda_plan_next
 * from op `op` and item `it`, in a launch of `protocol`) moves through its
 * send end (*sends) and its receive end (*recvs): what the launcher posts
 * to the proxy of a net pipe (transport/proxy.h).  The kernel's own loop
 * over rounds and steps, counted on the host from the host copy of the
 * program. */
void kolo_cuda_plan_slices(const kolo_op *op, const kolo_cuda_plan_comm *pc, const kolo_cuda_plan_item *it,
                           const kolo_dev_task *t, int protocol, uint64_t *sends, uint64_t *recvs);
/* The same for a multi-peer task (t->npeers > 0): counts[2 * i] slices
 * through its send end to peer i, counts[2 * i + 1] through its receive end
 * from it (2 * t->npeers entries, zeroed first). */
void kolo_cuda_plan_peer_slices(const kolo_op *op, const kolo_cuda_plan_comm *pc, const kolo_cuda_plan_item *it,
                                const kolo_dev_task *t, int protocol, uint64_t *counts);
/* The host copy of a multi-peer task's end e (2 * peer index + 1 for the
 * receive end), of the program of op on channel ch; NULL when unused. */
const kolo_dev_conn *kolo_cuda_plan_peer_end(const kolo_op *op, const kolo_cuda_plan_comm *pc, int ch, int e);

#ifdef __cplusplus
}
#endif

#endif
