/* perf_tune_int.h - what the parts of `kolo-perf tune` share: its
 * arguments and one measurement (forked ranks timing all-reduces). */
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
  int ndev;  /* the visible devices (cuda); rank r uses r % ndev */
} tune_args;

/* What the ranks of one measurement do: KOLO_ALGO=algo (NULL: unset), on
 * link (shm, cuda-p2p: one host; socket, ib: a host each), with KOLO_TUNING_FILE=tuning
 * (NULL: none), calls of collective coll (an all-reduce, a broadcast from
 * rank 0, an all-gather) of sizes[i] bytes (an all-gather's per rank)
 * iters[i] times each. */
typedef struct {
  int link;
  const char *algo;
  int nsizes;
  size_t sizes[TUNE_MAX_SIZES];
  int iters[TUNE_MAX_SIZES];
  const char *tuning;
  int coll; /* KOLO_COLL_ALL_REDUCE, _BROADCAST or _ALL_GATHER (ring/schedule.h) */
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

/* On shm (cuda-p2p), times every flat algorithm of the all-reduce, the
 * broadcast and the all-gather on 1, 2 and 4 channels (1..16 on a GPU) at
 * sizes 8 B .. 32 MiB (by 2s), alternating, and appends to f the fastest
 * pair's size ranges for a->nranks ranks and the memory kind: overrides
 * and channels lines (perf_tune_algos.c).  0, or -1 (said on stderr). */
int perf_tune_crossovers(const tune_args *a, kolo_tuning *f);

/* Helpers of the search (perf_tune_ranges.c). */
/* Sizes 8 B, 8 factor B, ... up to top bytes, each called enough times to
 * move about `budget` bytes (at least lo, at most hi times). */
void tune_plan_sizes(tune_job *j, size_t top, size_t factor, size_t budget, int lo, int hi);
/* The median of v[0..n) (sorts v). */
double tune_median(double *v, int n);
/* The bytes size i of j stands for: from the geometric mean with the size
 * below (0 for the first) to that with the size above (2^62-1 for the
 * last). */
void tune_size_range(const tune_job *j, int i, uint64_t *lo, uint64_t *hi);

#endif
