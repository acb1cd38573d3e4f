/* fault_rank.h - one rank of a fault trial, as a forked process: joins the
 * job (koloCommInitFromEnv), runs a fixed list of checked collectives and
 * tears down; the victim injects its fault at the chosen moment.  Each rank
 * writes lines to the parent on report_fd:
 *   F <t_ns>                  the victim, just before its fault
 *   S <stage>                 where the rank is (for a hang's report)
 *   R <rank> <rc> <t_ns> <bad> <calls> <fd0> <fd1> <thr0> <thr1> <where>|<text>
 * rc: the first failing call's result (0: every call succeeded); t_ns: when
 * it returned (CLOCK_MONOTONIC); bad: wrong elements of calls that
 * succeeded; fd0/thr0 before init, fd1/thr1 after destroy or abort. */
#ifndef KOLO_FAULT_RANK_H
#define KOLO_FAULT_RANK_H

#include <sys/types.h>

#include "checked_coll.h"

typedef enum { AT_INIT, AT_FIRST_CALL, AT_MID, AT_GROUP, AT_DESTROY, AT_NUM } fault_at;
/* What the victim does at its moment (the parent does the rest: SIGCONT, link down). */
typedef enum { ACT_KILL, ACT_STOP, ACT_CUT, ACT_TELL, ACT_NUM } fault_act;

typedef struct {
  int rank, nranks;
  int victim;      /* this rank is the victim */
  fault_at at;
  fault_act act;
  double delay_ms; /* init, mid, destroy: after the moment's start, on a thread */
  int report_fd;
  unsigned long long seed;
  int cuda;        /* CUDA communicators (device buffers, a stream): fault_cuda.c */
  int go_fd;       /* ACT_TELL: read once the parent has done its part (-1: none) */
} rank_plan;

/* Where a rank's buffers live: host memory (fault_rank.c) or CUDA device
 * memory (fault_cuda.c).  ctx is the memory's own state. */
typedef struct {
  /* Before the counts of fds and threads and init: what the memory needs
   * for good (a CUDA device, a stream) and the config's memory kind;
   * 0, or -1 with the reason in why. */
  int (*setup)(void *ctx, koloConfig_t *cfg, char *why, size_t len);
  /* Runs k cases (k > 1: one group; after_first as in cc_run_group), waits
   * until they are done or failed, and checks every element. */
  cc_result (*run)(void *ctx, koloComm_t comm, int rank, int nranks, const cc_case *cases, int k,
                   void (*after_first)(void *), void *arg);
  /* Threads of this process that are kolo's or the program's (not a
   * CUDA runtime's own). */
  int (*count_threads)(void *ctx);
  void (*teardown)(void *ctx);
} rank_mem;

/* The CUDA memory of fault_cuda.c; NULL in builds without CUDA. */
const rank_mem *fault_cuda_mem(void **ctx);
/* The parent's side, once the ranks pids[0..n) have ended: how many CUDA
 * model segments (/dev/shm/cudasim-<pid>-*: device memory) they left, but
 * those of not_counted (a killed rank: its driver frees them; 0: none);
 * unlinks them all. */
int fault_cuda_segments_of(const pid_t *pids, int n, pid_t not_counted);

const char *fault_at_name(fault_at at);
/* The rank's body; returns the process's exit status. */
int fault_rank_main(const rank_plan *p);

#endif
