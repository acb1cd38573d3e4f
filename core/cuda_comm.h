/* cuda_comm.h - the device side of a koloMemCuda communicator.
 *
 * Made once at init, so that enqueueing a call allocates nothing and never
 * synchronizes the device (calls are capturable in CUDA graphs, once their
 * pipes exist):
 *
 *  - the device (config.cudaDev, or the current one), selected on the
 *    calling thread at init and again by every later call of the comm;
 *  - an abort word and the status words in mapped pinned host memory:
 *    kernels poll the abort word (koloCommAbort sets it) and write why they
 *    stopped into the status words (read by koloCommGetAsyncError), with a
 *    mismatch report when calls did not match;
 *  - device copies of every step program the comm can run (each collective,
 *    each root of broadcast and reduce, each peer of send and recv, and the
 *    three phases of the hierarchical all-reduce where the hosts allow it)
 *    in one device allocation;
 *  - the device copies of the point-to-point ends (made as the pipes are)
 *    and, per multi-peer program and channel, the table of its ends that
 *    kernels index by a step's peer (cuda_peers.c);
 *  - one step counter in device memory per connector end (ring ends and
 *    every possible point-to-point end), zeroed: a kernel continues each
 *    end's count where the last kernel left it; beside each, the end's
 *    owner word, which tells a kernel that another one holds the end
 *    (kernels/cuda_exec.h, KOLO_DEV_CONCURRENT);
 *  - a non-blocking "setup" stream for the copies of pipe setup and stop
 *    words (never the legacy stream: it would wait for kernels spinning on
 *    peers), and an event that orders the comm's calls across streams.
 *
 * Pipes of CUDA communicators are device connectors (transport p2p) within
 * a host and net pipes staged in pinned host memory between hosts
 * (transport net; polled by the proxy, which the launcher tells how many
 * slices each kernel moves; SIMPLE protocol only, so a communicator that
 * spans hosts never uses LL, on any rank); the point-to-point ones are made
 * on first use, which allocates device memory:
 * the first send/recv with a peer must not be captured into a CUDA graph
 * (do it once before capturing, as a warm-up; a captured first use fails
 * with koloInvalidUsage).
 *
 * Builds without CUDA have none of this: koloMemCuda is refused at init. */
#ifndef KOLO_CORE_CUDA_COMM_H
#define KOLO_CORE_CUDA_COMM_H

#include "core/comm_state.h"
#include "core/cuda_plan.h"
#include "kernels/cuda_exec.h"
#include "transport/transport.h"

/* Mapped words (uint32 indices): each group on its own 64-byte line. */
#define KOLO_CW_ABORT 0
#define KOLO_CW_STATUS 16    /* KOLO_DEV_STATUS_WORDS: why, task, peer, word, report, stall (cuda_exec.h) */
#define KOLO_CW_STOP_SRC 48  /* source of stop-word copies */
#define KOLO_CW_REPORT_SRC 64 /* source of mismatch-report copies: state, pad, report */
#define KOLO_CW_BYTES 512
_Static_assert(KOLO_CW_STATUS + KOLO_DEV_STATUS_WORDS <= KOLO_CW_STOP_SRC,
               "the kernels' status words (kernels/cuda_exec.h) end before the stop-word source");
_Static_assert(KOLO_DEV_STATUS_REPORT + KOLO_DEV_REPORT_WORDS <= KOLO_DEV_STATUS_STALL &&
                   KOLO_DEV_STALL_SIG + 6 <= KOLO_DEV_STALL_READY && KOLO_DEV_STALL_READY < KOLO_DEV_STALL_WORDS,
               "the status words' report and stall slot do not overlap (6: a signature's words in a report)");
_Static_assert(KOLO_CW_REPORT_SRC + 2 + KOLO_DEV_REPORT_WORDS <= KOLO_CW_BYTES / 4, "the mapped words fit");

typedef struct kolo_cuda_comm {
  int dev;
  int ranks_on_dev;        /* ranks of this process on dev, this one included */
  int max_blocks;          /* blocks a launch of this rank may have (cuda_residency.c) */
  void *setup_stream;      /* cudaStream_t, non-blocking */
  void *order_event;       /* cudaEvent_t, recorded after each call's launches */
  void *last_stream;       /* stream of the last call (valid when have_last) */
  int have_last;
  uint32_t *words;         /* mapped pinned host memory, KOLO_CW_* */
  uint32_t *dev_words;     /* the same words as kernels address them */
  kolo_step *dev_steps_mem;                   /* every program's steps */
  /* Device scratch (KOLO_BUF_SCRATCH) for the blocks of one launch:
   * KOLO_DEV_MAX_TASKS parts of scratch_task_bytes, made at init when a
   * program that may run names scratch; NULL otherwise. */
  char *scratch;
  size_t scratch_task_bytes;
  const kolo_step **dev_steps[KOLO_COLL_NUM]; /* [kolo_program_slots * nvariants]: kolo_program_index */
  uint32_t *counters;      /* device memory: KOLO_DEV_END_WORDS per end (count, owner) */
  kolo_dev_conn ring_send[KOLO_MAX_CHANNELS], ring_recv[KOLO_MAX_CHANNELS];
  kolo_dev_conn *p2p_send, *p2p_recv;         /* [peer * nchannels + ch] */
  /* Multi-peer programs (cuda_peers.c): device memory holding copies of
   * p2p_send ([0, np)) and p2p_recv ([np, 2 np)), np = nranks * nchannels;
   * device memory holding every end table; per multi-peer collective, the
   * tables by [slot * nchannels + ch] (device pointers, NULL: no peers). */
  kolo_dev_conn *dev_p2p;
  void *dev_end_mem;
  kolo_dev_ends *end_tables[KOLO_COLL_NUM];
  /* Hierarchical all-reduce (c->hier_ready): the device copies of the
   * three phase programs' steps, and the ends of the intra (0) and inter (1)
   * pipes (core/comm.h's hier_send / hier_recv). */
  const kolo_step *hier_steps[KOLO_HIER_PHASES];
  kolo_dev_conn hier_send[2][KOLO_MAX_CHANNELS], hier_recv[2][KOLO_MAX_CHANNELS];
  /* Net pipe ends (transport/proxy.h), at the index of their step counter
   * (kolo_dev_conn.net - 1); NULL for other ends.  The launcher posts each
   * kernel's slices to them. */
  struct kolo_net_pipe **net_pipes;
  int may_use_net;         /* some pair of ranks talks over the network: no LL */
  kolo_conn_mem conn_mem;  /* what kolo_connect needs for device pipes */
  kolo_cuda_plan_comm plan;
  /* The stall warning (cuda_stall.c): the comm's launches so far (each
   * batch's number: never 0), the last one whose stall note was logged,
   * whether the watcher thread polls this comm (1; -1: it could not start),
   * and the next comm it polls. */
  uint32_t launches;
  _Atomic uint32_t stall_logged;
  int stall_watch;
  struct koloComm *stall_next;
} kolo_cuda_comm;

/* Init, after the shape check: selects and checks the device on every rank
 * (a rank without a usable device fails them all, named), makes the
 * streams, mapped words and counters. */
koloResult_t kolo_cuda_comm_init(struct koloComm *c);
/* Init, once the device is chosen (cuda_residency.c): the blocks each rank
 * may have resident, the same on every rank; caps c->nchannels to them, or
 * refuses (koloInvalidUsage) ranks that cannot be resident even with one
 * channel. */
koloResult_t kolo_cuda_comm_residency(struct koloComm *c);
/* Init, after the ring is built: every program, uploaded once. */
koloResult_t kolo_cuda_comm_programs(struct koloComm *c);
/* Init, after the ring pipes are made: their device ends, and the planner's
 * table. */
void kolo_cuda_comm_ring_ready(struct koloComm *c);
/* After point-to-point pipes were made: the device ends of the channels of
 * (peer, direction) that exist, and their device copies (cuda_peers.c),
 * complete when this returns.  A kolo_pipe_fn (core/p2p_pipes.h; arg unused),
 * so kolo_op_pipes can call it for every pipe an op needs. */
koloResult_t kolo_cuda_comm_p2p_ready(struct koloComm *c, int peer, int is_send, void *arg);

/* Multi-peer programs on the device (cuda_peers.c).  Init, once every
 * program is built: the device copies of the point-to-point ends (zeroed:
 * none exists yet) and every multi-peer program's end table, uploaded. */
koloResult_t kolo_cuda_peers_init(struct koloComm *c);
/* Copies point-to-point end i (send ends first, then receive ends) to its
 * device copy on the setup stream; kolo_cuda_peers_sync waits for it. */
koloResult_t kolo_cuda_peers_publish(struct koloComm *c, size_t i);
koloResult_t kolo_cuda_peers_sync(struct koloComm *c);
void kolo_cuda_peers_free(struct koloComm *c);
/* The memory description for kolo_connect: NULL for host communicators. */
const kolo_conn_mem *kolo_comm_conn_mem(const struct koloComm *c);

/* koloSuccess, or the comm's (sticky) failure: the first call that sees the
 * kernels' status word set turns it into an error sentence naming the rank
 * and the peer, and stops every pipe of the comm so that peers stop too. */
koloResult_t kolo_cuda_comm_status(struct koloComm *c);
/* Marks every existing pipe end of the comm as stopped by this rank. */
void kolo_cuda_comm_stop_all(struct koloComm *c, int reason);
/* Calls that do not match (cuda_mismatch.c): when the kernels' status
 * (why) is a mismatch found here or a peer's stop word for one, fails the
 * comm (koloInvalidUsage; *res: the comm's failure) with the sentence
 * naming both calls (the status words' report), passes the report and the
 * stop word on to every pipe, and returns 1; else 0. */
int kolo_cuda_status_mismatch(struct koloComm *c, uint32_t why, koloResult_t *res);
/* Stop_all's report: copies the status words' report to the copies'
 * source (1), or finds none (0); then kolo_cuda_mismatch_copy leaves it in
 * end d (on `stream`, a cudaStream_t), before its stop word. */
int kolo_cuda_mismatch_stage(kolo_cuda_comm *cc);
void kolo_cuda_mismatch_copy(kolo_cuda_comm *cc, const kolo_dev_conn *d, void *stream);
/* Sets the abort word: the comm's kernels stop at their next poll. */
void kolo_cuda_comm_abort(struct koloComm *c);
/* Teardown (cuda_teardown.c).  quiesce: waits for the comm's own work (not
 * the device's), failing the comm (koloTimeout) and aborting its kernels
 * when it is not done within the timeout of the call `fn` (koloCommDestroy,
 * koloCommFinalize); before anything the kernels use is freed.  close_ipc:
 * closes the pipe ends that cross processes in CUDA IPC's order (importers
 * close and say so, then exporters free); the others are closed by the
 * caller. */
void kolo_cuda_comm_quiesce(struct koloComm *c, const char *fn);
/* 1 while work the comm enqueued has not finished (no wait). */
int kolo_cuda_comm_busy(struct koloComm *c);
void kolo_cuda_comm_close_ipc(struct koloComm *c);
/* Frees the device state (after the pipes were closed). */
void kolo_cuda_comm_free(struct koloComm *c);

/* The stall warning (KOLO_STALL_WARN_S, cuda_stall.c).  watch: after a
 * launch of a comm with warnings on, makes sure the process's watcher
 * thread polls it (started with the first such comm).  check: logs the
 * note the comm's kernels left in the stall slot (cuda_exec.h), once per
 * launch, whoever looks first (the watcher, or kolo_cuda_comm_status
 * before a timeout's error, so that the warning comes first).  unwatch:
 * before the mapped words are freed; the last comm's joins the thread. */
void kolo_cuda_stall_watch(struct koloComm *c);
void kolo_cuda_stall_check(struct koloComm *c);
void kolo_cuda_stall_unwatch(struct koloComm *c);

/* Waits for the work queued so far on `stream` (a cudaStream_t of kolo's),
 * polling, for at most timeout_ms (0: no bound; cuda_wait.c).  Returns a
 * cudaError_t: cudaSuccess, the stream's error, or cudaErrorNotReady when
 * the time ran out first. */
int kolo_cuda_stream_wait(void *stream, int timeout_ms);

/* The calling thread's current device, or -1. */
int kolo_cuda_current_device(void);

/* Enqueues ops of CUDA communicators on their streams (cuda_enqueue.c). */
koloResult_t kolo_cuda_run_ops(kolo_op *ops, int nops);

#endif
