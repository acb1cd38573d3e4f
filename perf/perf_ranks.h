/* perf_ranks.h - kolo-perf's ranks: where they come from and each rank's
 * life from its communicator's init to its teardown (perf_ranks.c), and
 * the forked processes of -P (perf_fork.c).  The exit codes are
 * kolo-perf's: 0 passed, 1 wrong results, 2 a call failed. */
#ifndef KOLO_PERF_RANKS_H
#define KOLO_PERF_RANKS_H

#include <sys/types.h>

#include "perf/perf_args.h"
#include "perf/perf_report.h"

/* Runs a's ranks (the sweep, overlap or p2p on each): a launcher's job when
 * one is there and -P is not given, else -P forked processes, else threads
 * here.  kolo-perf's exit code. */
int perf_run_ranks(perf_args *a);
/* Is there a CUDA device (and each --devices one)?  0, or -1 having said
 * why (no device, or no CUDA in this build).  fork_first: ask from a child
 * process, so that this one makes no CUDA call before it forks ranks. */
int perf_cuda_ready(const perf_args *a, int fork_first);

/* The worse of two exit codes: 2 (a call failed) > 1 (wrong results) > 0. */
static inline int perf_worse_code(int x, int y) { return x > y ? x : y; }

/* A forked process's exit status when the parent sent no id (and said why). */
#define PERF_CHILD_NO_ID 3

/* Forks -P processes of t x g ranks each, starts the rendezvous, hands them
 * its id, serves the exit gate and reaps them: the worst exit code. */
int perf_run_forked(const perf_args *a, perf_config *cfg);
/* A forked process's rank group: waits for the id on fd, runs its ranks,
 * and at the exit gate writes "done" to done_fd and waits for "go" on fd. */
int perf_run_child(const perf_args *a, const perf_config *cfg, int proc, int fd, int done_fd, pid_t parent);

#endif
