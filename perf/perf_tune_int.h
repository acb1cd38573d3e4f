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

/* What the ranks of one measurement do: KOLO_ALGO=algo on link (shm,
 * cuda-p2p: one host; socket, ib: a host each), with KOLO_TUNING_FILE=tuning
 * (NULL: none), calls of collective coll (KOLO_COLL_*; a broadcast's and a
 * reduce's root is rank 0) of sizes[i] bytes (an all-gather's per rank)
 * iters[i] times each. */
typedef struct {
  int link;
  const char *algo;
  int nsizes;
  size_t sizes[TUNE_MAX_SIZES];
  int iters[TUNE_MAX_SIZES];
  const char *tuning;
  int coll;
} tune_job;

/* A rank's buffer: host memory, or (cuda) device memory and a stream of
 * its own (perf_tune_mem.c). */
typedef struct {
  int cuda, rank;
  void *buf;
  void *stream; /* cudaStream_t; NULL on the host */
} tune_mem;
/* bytes of zeroes where m says; 0 or -1 (said on stderr). */
int tune_mem_open(tune_mem *m, int cuda, int rank, int ndev, size_t bytes);
/* Waits for the calls issued on m's stream; -1 when one failed. */
int tune_mem_sync(tune_mem *m, koloComm_t comm);
/* The max over the ranks of *flag, through m's memory; 0 or -1. */
int tune_mem_flag(tune_mem *m, uint8_t *flag, koloComm_t comm);
void tune_mem_close(tune_mem *m);

/* Forks a->nranks ranks that run job j; t[i]: seconds per call of
 * sizes[i] (rank 0's).  0, or -1 when a rank failed. */
int perf_tune_measure(const tune_args *a, const tune_job *j, double *t);

/* Appends to f the overrides and channels lines the search finds within
 * a host, then (host memory, unless no_net) the overrides across hosts
 * over the network link f measured, each line scoped to its link
 * (perf_tune_algos.c).  0, or -1 (said on stderr). */
int perf_tune_crossovers(const tune_args *a, kolo_tuning *f);

#endif
