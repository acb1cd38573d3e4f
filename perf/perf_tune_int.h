/* perf_tune_int.h - what the parts of `kolo-perf tune` share: its
 * arguments and one measurement (forked ranks timing all-reduces). */
#ifndef KOLO_PERF_TUNE_INT_H
#define KOLO_PERF_TUNE_INT_H

#include <stddef.h>

#include "ring/tuning.h"

#define TUNE_MAX_SIZES 16

typedef struct {
  int nranks, iters;
  size_t big;
  const char *out;
  int quick; /* --quick: few sizes and iterations, for tests */
} tune_args;

/* What the ranks of one measurement do: KOLO_ALGO=algo, on link (shm: one
 * host; socket: a host each), all-reduces of sizes[i] bytes iters[i]
 * times each. */
typedef struct {
  int link;
  const char *algo;
  int nsizes;
  size_t sizes[TUNE_MAX_SIZES];
  int iters[TUNE_MAX_SIZES];
} tune_job;

/* Forks a->nranks ranks that run job j; t[i]: seconds per call of
 * sizes[i] (rank 0's).  0, or -1 when a rank failed. */
int perf_tune_measure(const tune_args *a, const tune_job *j, double *t);

/* On shm, times every flat all-reduce algorithm at sizes 8 B .. 8 MiB (by
 * 4s), alternating, and appends to f's overrides the fastest one's size
 * ranges for a->nranks ranks.  0, or -1 (said on stderr). */
int perf_tune_crossovers(const tune_args *a, kolo_tuning *f);

#endif
