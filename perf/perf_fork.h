/* perf_fork.h - kolo-perf -P: rank groups in forked processes (perf_fork.c). */
#ifndef KOLO_PERF_FORK_H
#define KOLO_PERF_FORK_H

#include "perf/perf_args.h"
#include "perf/perf_report.h"

/* Forks -P processes of t x g ranks each, starts the rendezvous, hands them
 * its id, serves the exit gate and reaps them: the worst exit code. */
int perf_run_forked(const perf_args *a, perf_config *cfg);

#endif
