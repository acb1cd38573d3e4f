/* perf_watchdog.h - kolo-perf -T: a row (one size, one placement) that runs
 * longer than the timeout revokes its rank's communicator, so that the
 * call in flight fails, the rank says so and the job ends (exit 2), as
 * nccl-tests' -T aborts its communicators.  One watchdog thread per
 * process, started by the first rank that asks; every rank has a slot. */
#ifndef KOLO_PERF_WATCHDOG_H
#define KOLO_PERF_WATCHDOG_H

#include <stddef.h>

#include "kolo.h"

typedef struct perf_watch perf_watch;

/* A slot for the rank of comm, watched with `timeout_s` (the first call's
 * value holds for the process).  NULL when timeout_s is 0, or when the
 * slot or the thread cannot be had (said on stderr: the run goes on
 * unwatched rather than failing). */
perf_watch *perf_watch_add(koloComm_t comm, int rank, int timeout_s);
/* Before the communicator goes: the watchdog no longer touches it. */
void perf_watch_remove(perf_watch *w);
/* The rank starts a row of `bytes` (> 0), or has ended it (0). */
void perf_watch_row(perf_watch *w, size_t bytes);

#endif
