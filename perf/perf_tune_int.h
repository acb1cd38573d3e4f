/* perf_tune_int.h - what the parts of `kolo-perf tune` share: its
 * arguments and one measurement (forked ranks timing collectives). */
#ifndef KOLO_PERF_TUNE_INT_H
#define KOLO_PERF_TUNE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"
#include "ring/tuning.h"

#define TUNE_MAX_SIZES 24

typedef struct {
  int nranks, iters;
  size_t big;
  const char *out;
  int quick; /* --quick: few sizes and iterations, for tests */
  int cuda;  /* --mem cuda: CUDA communicators, buffers on the ranks' devices */
  int no_net; /* --no-net: the crossovers within one host only */
  int ndev;  /* the visible devices (cuda); rank r uses r % ndev */
} tune_args;

/* What the ranks of one measurement do: KOLO_ALGO=algo on link, with
 * KOLO_TUNING_FILE=tuning (NULL: none) and KOLO_NET_CHUNK_BYTES=chunk (0:
 * as the caller's environment says), calls of collective coll (KOLO_COLL_*)
 * of sizes[i] bytes (an all-gather's per rank) iters[i] times each. */
typedef struct {
  int link;
  const char *algo;
  int nsizes;
  size_t sizes[TUNE_MAX_SIZES];
  int iters[TUNE_MAX_SIZES];
  const char *tuning;
  int coll;
  size_t chunk;
} tune_job;

/* Forks a->nranks ranks that run job j; t[i]: seconds per call of
 * sizes[i] (rank 0's).  0, or -1 when a rank failed. */
int perf_tune_measure(const tune_args *a, const tune_job *j, double *t);

/* Appends to f the lines the search finds (perf_tune_algos.c): within a
 * host, then (host memory, unless no_net) across hosts.  0, or -1 said. */
int perf_tune_crossovers(const tune_args *a, kolo_tuning *f);

/* Appends to f the chunk line of the network's transport (perf_tune_chunk.c):
 * host memory, unless no_net.  0, or -1 said. */
int perf_tune_chunk(const tune_args *a, kolo_tuning *f);

#endif
