/* perf_ranks.h - kolo-perf's ranks (perf_ranks.c): where they run, and each
 * rank's life from its communicator's init to its teardown.  The exit
 * codes are kolo-perf's: 0 passed, 1 wrong results, 2 a call failed. */
#ifndef KOLO_PERF_RANKS_H
#define KOLO_PERF_RANKS_H

#include <sys/types.h>

#include "perf/perf_args.h"
#include "perf/perf_report.h"

/* The worse of two exit codes: 2 (a call failed) > 1 (wrong results) > 0. */
static inline int perf_worse_code(int x, int y) { return x > y ? x : y; }

/* A forked process's exit status when the parent sent no id (and said why). */
#define PERF_CHILD_NO_ID 3

/* The t x g ranks of this process as threads: one koloCommInitAll, or with
 * -p 1 a koloCommInitRank on each rank's own thread. */
int perf_run_local(const perf_args *a, perf_config *cfg);
/* This process as one rank of a launcher's job (koloCommInitFromEnv). */
int perf_run_launched(const perf_args *a, perf_config *cfg);
/* The launcher whose world size is above 1 (*size set), or NULL. */
const char *perf_launcher_size_var(int *size);
/* A forked process's rank group: waits for the id on fd, runs its ranks,
 * and at the exit gate writes "done" to done_fd and waits for "go" on fd. */
int perf_run_child(const perf_args *a, const perf_config *cfg, int proc, int fd, int done_fd, pid_t parent);

#endif
