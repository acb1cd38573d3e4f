/* perf_launch.h - where kolo-perf's ranks come from (perf_launch.c). */
#ifndef KOLO_PERF_LAUNCH_H
#define KOLO_PERF_LAUNCH_H

#include "perf/perf_args.h"

/* Runs a's ranks (the sweep, overlap or p2p on each): a launcher's job when
 * one is there and -P is not given, else -P forked processes, else threads
 * here.  kolo-perf's exit code. */
int perf_run_ranks(perf_args *a);
/* Is there a CUDA device (and each --devices one)?  0, or -1 having said
 * why (no device, or no CUDA in this build).  fork_first: ask from a child
 * process, so that this one makes no CUDA call before it forks ranks. */
int perf_cuda_ready(const perf_args *a, int fork_first);

#endif
