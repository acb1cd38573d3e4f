/* perf_overlap_int.h - what the perf_overlap*.c files of `kolo-perf
 * overlap` (perf_overlap.h) share. */
#ifndef KOLO_PERF_OVERLAP_INT_H
#define KOLO_PERF_OVERLAP_INT_H

#include <stdint.h>

#include "kolo_fusion.h"
#include "perf/perf_compute.h"
#include "perf/perf_overlap.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* A round's steps, in running order; K_SEPARATE (--small): one koloAllReduce per gradient. */
enum { K_COMM, K_COMPUTE, K_SERIAL, K_OVERLAP, NKINDS, K_SEPARATE = NKINDS };

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

typedef struct { /* one gradient */
  int id;          /* the fusion's tensor id */
  size_t count;    /* elements */
  size_t first;    /* the model's element index of element 0 (check values) */
  void *ptr;       /* where it lies (allocator: as of the layout `version`) */
  double layer_us; /* compute before it is ready */
  koloEvent_t ev;  /* cuda: its event */
} ov_grad;

typedef struct { /* the gradients declared to one fusion, by backward index */
  koloFusion_t f;
  int n, external;
  ov_grad *t;
  void *ext;        /* external: one buffer holding every gradient */
  int version;      /* the layout version of the views (allocator) */
  size_t total, max_count; /* elements: of all, of the largest */
} ov_grads;

/* perf_overlap.c: a failed call said (0 when it succeeded, else -1). */
int ov_fusion_fail(const ov_rank *ov, koloFusion_t f, koloResult_t res, const char *what);
#ifdef KOLO_HAVE_CUDA
int ov_cuda_fail(const ov_rank *ov, cudaError_t err, const char *what);
#endif
int ov_max_over_ranks(const ov_rank *ov, double *v, int n);

/* perf_overlap_grads.c: init makes n gradients in backward order, the forward
 * tensors' counts count[] reversed (NULL: each of `each` elements), declares them
 * (float32) to a new fusion, commits it and zeroes them; fini undoes what of it
 * was done.  check_step fills, runs a step of `kind`, checks (*wrong: over ranks).
 * measure: -w untimed rounds of warm[nw], then -n rounds of kinds[nk] into *t
 * (t[i * nk + k], the slowest rank's; the caller frees *t), the copy counters
 * before and after those in s[0], s[1]; copy_rule: the counters' rule. */
int ov_grads_init(const ov_rank *ov, ov_grads *g, int n, int external, const size_t *count, size_t each);
void ov_grads_fini(const ov_rank *ov, ov_grads *g);
int ov_check_step(ov_rank *ov, ov_grads *g, uint64_t seed, perf_compute *c, int kind, uint64_t *wrong);
int ov_measure(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *warm, int nw, const int *kinds, int nk,
               double **t, koloFusionStats_t *s);
int ov_copy_rule(ov_rank *ov, const ov_grads *g, const koloFusionStats_t *s, int steps, const char *label);

/* perf_overlap_model.c */
int ov_run_model(ov_rank *ov, const char *spec, uint64_t seed);
int ov_run_small(ov_rank *ov);

#endif
