/* cuda_state.h - the device state of a koloMemCuda communicator (struct
 * koloComm's cuda) and its mapped words; cuda_comm.h says what each part
 * is for and declares what works on it. */
#ifndef KOLO_CORE_CUDA_STATE_H
#define KOLO_CORE_CUDA_STATE_H

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

#endif
