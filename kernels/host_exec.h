/* host_exec.h - the host executor: runs step programs on host buffers.
 *
 * A batch holds every (operation, channel) program of one group call, from
 * one or several communicators; one thread progresses them all, a slice at
 * a time, round-robin, so that programs that wait on each other (a send and
 * the matching receive in the same thread, ranks of one process driven by
 * one thread) all move.  Programs that share a connector run one after the
 * other in issue order, which keeps both ends of every pipe in step.
 *
 * A blocked pass spins, then yields (a count of times, or for a time where
 * the host has more ranks than CPUs), then sleeps on a connector's futex;
 * while sleeping it checks, every few milliseconds, that no peer died, no
 * stop word was set, the owner did not abort, and the wait did not exceed
 * the owner's timeout.  Any failure stops every connector of that owner so
 * peers fail fast, and the error sentence names the peer.
 *
 * No allocation, system call or lock on the hot path (futex sleeps only
 * after spinning).  Checking that the ranks' calls match costs a compare
 * of one word per slice and, once per call and pipe, a 24-byte store
 * (sender) or compare (receiver): no extra synchronisation.
 */
#ifndef KOLO_KERNELS_HOST_EXEC_H
#define KOLO_KERNELS_HOST_EXEC_H

#include <stdatomic.h>
#include <stddef.h>

#include "kernels/call_sig.h"
#include "kolo.h"
#include "ring/program.h"
#include "transport/connector.h"

/* What the executor needs from the communicator that owns a task. */
typedef struct kolo_exec_owner {
  int rank;
  int timeout_ms;          /* 0: no bound */
  int spin, yields;        /* polls, then sched_yield()s, before sleeping */
  int64_t yield_ns;        /* > 0: yield for this long instead, whatever `yields` says */
  /* With yield_ns: a wait on a transport that sleeps in a wait of its own
   * (transport.h: one that returns when data arrives) yields this many
   * times instead before it sleeps */
  int wake_yields;
  _Atomic int *abort_flag; /* set by koloCommAbort */
  kolo_errbuf *eb;
  /* 1 when `peer` is known to be dead (called every few ms).  Only the
   * peer a wait depends on is asked: a rank that finished its part and
   * left is no error for ranks still finishing theirs. */
  /* 0 while the peer is up, else its fate (KOLO_PEER_*, common/peer_fate.h) */
  int (*peer_dead)(struct kolo_exec_owner *owner, int peer);
  /* The rank a gone peer blamed for its leaving (its goodbye), or -1;
   * may be NULL. */
  int (*peer_blamed)(struct kolo_exec_owner *owner, int peer);
  /* Stops every connector of the owner (called once, on failure). */
  void (*stop_all)(struct kolo_exec_owner *owner, int reason, int rank);
  koloResult_t failed; /* first failure of this owner in the batch */
  int stall_warned;    /* the stall warning was logged in this batch */
  /* The two calls of a mismatch this owner failed on (has_mismatch): what
   * stop_all leaves in every pipe for the peers, before the stop word. */
  int has_mismatch;
  kolo_call_mismatch mismatch;
} kolo_exec_owner;

typedef struct kolo_exec_task {
  /* set by the caller */
  const kolo_program *prog;
  kolo_geometry geo;
  char *in, *out;
  /* KOLO_BUF_SCRATCH: kolo_geo_scratch_bytes(&geo) of the task's own, NULL
   * when its program names none (kolo_program_uses_scratch) */
  char *scratch;
  koloDataType_t type;
  koloRedOp_t op;
  int div;                  /* post-op divisor of final steps (avg), 1: none */
  /* Premul-sum (op is koloSum): every step that reads this rank's input
   * (src in IN) multiplies it by `scalar` (the bits of one element, little
   * endian) first.  IN is read once per element by every reducing schedule
   * (ring/), so each input element is scaled exactly once. */
  int premul;
  uint64_t scalar;
  int channel;
  int coll;                 /* for messages only */
  /* The call (set by the caller): its signature, which the executor writes
   * with the first slice it sends on each pipe and compares with the
   * other end's on the first slice it receives (kernels/call_sig.h), and a
   * number of the call (+ 1) unique among this rank's recent calls. */
  kolo_call_sig sig;
  uint32_t call;
  kolo_connector *send, *recv; /* single-peer programs: where steps send / receive */
  /* Multi-peer programs (prog->npeers > 0): ends[2 * i] is the send end to
   * prog->peers[i] on this task's channel, ends[2 * i + 1] the receive end
   * from it, NULL where the program does not use it; a step uses the ends
   * of its peers (step.to, step.from).  NULL for single-peer programs. */
  kolo_connector *const *ends;
  kolo_exec_owner *owner;
  /* Tasks (indices) that must finish first, -1: none.  [0], [1]: the last
   * earlier users of send and recv; [2]: one whose output this task reads
   * (the phases of a hierarchical all-reduce); more_deps[0 .. nmore_deps):
   * the last earlier users of a multi-peer task's ends. */
  int dep[3];
  const int *more_deps;
  int nmore_deps;
  /* executor state */
  size_t base, rce;         /* current round */
  int step;
  int chunk_ready;
  size_t slice, nslices;
  size_t src_off, dst_off, n; /* elements of the current step's chunk */
  kolo_connector *blocker;  /* what it waited on at its last turn */
  int64_t peer_stop_ns;     /* a proxy's "peer gone" the mesh had not seen yet: since when (0: none) */
  int done;
} kolo_exec_task;

/* Sets the executor state of a task to its start (call after filling it). */
void kolo_exec_task_init(kolo_exec_task *t);

/* Runs every task to completion or failure.  Returns the first failure;
 * each failed owner has `failed` set and its error in its eb. */
koloResult_t kolo_host_exec_run(kolo_exec_task *tasks, int ntasks);

#endif
