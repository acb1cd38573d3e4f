/* perf_overlap_int.h - the parts of `kolo-perf overlap` (perf_overlap.h),
 * private to them: perf_overlap.c (the rank, errors, medians),
 * perf_overlap_grads.c (gradients declared to a fusion, filled, checked),
 * perf_overlap_steps.c (one timed step of each kind, the copy counters),
 * perf_overlap_model.c (one model's rows), perf_overlap_small.c (--small)
 * and perf_overlap_report.c (the header lines). */
#ifndef KOLO_PERF_OVERLAP_INT_H
#define KOLO_PERF_OVERLAP_INT_H

#include <stdint.h>

#include "kolo_fusion.h"
#include "perf/perf_compute.h"
#include "perf/perf_overlap.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* The steps of a round, in the order they run. */
enum { K_COMM, K_COMPUTE, K_SERIAL, K_OVERLAP, NKINDS };

typedef struct {
  const perf_args *a;
  const perf_overlap_opts *o;
  kolo_backend *kb;
  const perf_backend *be;
  int rank, nranks, cuda;
  FILE *out;    /* rank 0's report; NULL on the others */
  void *stream; /* cuda: the compute stream (cudaStream_t) */
  perf_compute comp[PERF_COMPUTE_KINDS];
  int wrong;    /* some element was wrong or a copy rule broken (all ranks agree) */
} ov_rank;

/* One set of gradients declared to one fusion, by backward index. */
typedef struct {
  koloFusion_t f;
  int n;
  int external;
  int *id;          /* the fusion's tensor id */
  size_t *count;    /* elements */
  size_t *first;    /* the model's element index of element 0 (check values) */
  void **ptr;       /* where the gradient lies (allocator: as of `version`) */
  void *ext;        /* external: one buffer holding every gradient */
  double *layer_us; /* compute before the gradient is ready */
  koloEvent_t *ev;  /* cuda: one event per gradient */
  int version;      /* the layout version of ptr (allocator) */
  size_t total;     /* elements */
  size_t max_count;
} ov_grads;

/* perf_overlap.c: a failed call said (0 when res is success, else -1). */
int ov_fusion_fail(const ov_rank *ov, koloFusion_t f, koloResult_t res, const char *what);
#ifdef KOLO_HAVE_CUDA
int ov_cuda_fail(const ov_rank *ov, cudaError_t err, const char *what);
#endif
/* Every rank here, then all go on (a one-element all-reduce). */
int ov_start_together(const ov_rank *ov);
int ov_max_over_ranks(const ov_rank *ov, double *v, int n);
/* Median of column k of t[n][ncols]. */
double ov_median_col(const double *t, int n, int ncols, int k);

/* perf_overlap_grads.c: n float32 gradients (counts in backward order)
 * declared to a new fusion, committed, zeroed; allocator views fetched
 * again after a layout change (refresh). */
int ov_grads_init(const ov_rank *ov, ov_grads *g, const size_t *count, const size_t *first, int n, int external);
void ov_grads_fini(const ov_rank *ov, ov_grads *g);
int ov_grads_refresh(const ov_rank *ov, ov_grads *g);
/* Fills, runs `step` once, checks; the total of wrong elements over ranks in *wrong. */
int ov_check_step(ov_rank *ov, ov_grads *g, uint64_t seed, int (*step)(ov_rank *, ov_grads *, void *), void *arg,
                  uint64_t *wrong);

/* perf_overlap_steps.c: one step of `kind` (*us: this rank's time from the
 * common start); n rounds of nk kinds into t[i * nk + k], the slowest
 * rank's; the fusion's copy counters and their rule. */
int ov_run_step(const ov_rank *ov, ov_grads *g, perf_compute *c, int kind, double *us);
int ov_rounds(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *kinds, int nk, int n, double *t);
int ov_stats(const ov_rank *ov, ov_grads *g, koloFusionStats_t *s);
int ov_copy_rule(ov_rank *ov, const ov_grads *g, const koloFusionStats_t *s0, const koloFusionStats_t *s1, int steps,
                 const char *label);

/* perf_overlap_report.c (rank 0) */
void ov_print_header(const ov_rank *ov, const perf_config *cfg);
void ov_print_compute_header(const ov_rank *ov, const double *rate_lo, const double *rate_hi);
void ov_print_table_header(FILE *f);

/* perf_overlap_model.c, perf_overlap_small.c */
int ov_run_model(ov_rank *ov, const char *spec, uint64_t seed);
int ov_run_small(ov_rank *ov);

#endif
