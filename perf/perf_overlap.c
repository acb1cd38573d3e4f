/* perf_overlap.c - kolo-perf overlap's rank (see perf_overlap.h): the
 * compute calibrated, the header, then the models or --small; and the
 * small calls every part uses (perf_overlap_int.h). */
#include <stdlib.h>
#include <string.h>

#include "perf/perf_overlap_int.h"

int ov_fusion_fail(const ov_rank *ov, koloFusion_t f, koloResult_t res, const char *what) {
  if (res == koloSuccess) return 0;
  const char *detail = f ? koloFusionGetLastError(f) : koloGetLastError(ov->kb->comm);
  fprintf(stderr, "rank %d: %s failed: %s%s%s\n", ov->rank, what, koloGetErrorString(res),
          detail && *detail ? ": " : "", detail ? detail : "");
  return -1;
}

#ifdef KOLO_HAVE_CUDA
int ov_cuda_fail(const ov_rank *ov, cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  fprintf(stderr, "rank %d: %s failed: %s\n", ov->rank, what, cudaGetErrorString(err));
  return -1;
}
#endif

/* Every rank here, then all go on (a one-element all-reduce). */
int ov_start_together(const ov_rank *ov) {
  double x = 0;
  return ov->be->allreduce_double(ov->be->ctx, &x, 1, 1);
}

int ov_max_over_ranks(const ov_rank *ov, double *v, int n) {
  return ov->be->allreduce_double(ov->be->ctx, v, n, 1);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Median of column k of t[n][ncols]. */
double ov_median_col(const double *t, int n, int ncols, int k) {
  double *v = malloc((size_t)n * sizeof *v);
  if (v == NULL) return -1;
  for (int i = 0; i < n; i++) v[i] = t[i * ncols + k];
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  free(v);
  return m;
}

/* Calibrates the compute kinds asked for; prints nothing.  rate_lo / hi:
 * the lowest and highest rate over ranks. */
static int calibrate(ov_rank *ov, double *rate_lo, double *rate_hi) {
  for (int k = 0; k < PERF_COMPUTE_KINDS; k++) {
    rate_lo[k] = rate_hi[k] = 0;
    if (!(ov->o->compute_mask & 1u << k)) continue;
    if (perf_compute_init(&ov->comp[k], (perf_compute_kind)k, ov->stream) != 0) return -1;
    double r[2] = {ov->comp[k].per_us, -ov->comp[k].per_us};
    if (ov_max_over_ranks(ov, r, 2) != 0) return -1;
    rate_hi[k] = r[0];
    rate_lo[k] = -r[1];
  }
  return 0;
}

static int stream_init(ov_rank *ov) {
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s;
  if (!ov->cuda) return 0;
  if (ov_cuda_fail(ov, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") != 0) return -1;
  ov->stream = s;
#else
  (void)ov;
#endif
  return 0;
}

static void stream_fini(ov_rank *ov) {
#ifdef KOLO_HAVE_CUDA
  if (ov->stream) cudaStreamDestroy((cudaStream_t)ov->stream);
#endif
  ov->stream = NULL;
}

int perf_overlap_run(const perf_args *a, kolo_backend *kb, const perf_backend *be, const perf_config *cfg,
                     const char *where, FILE *out) {
  ov_rank ov;
  memset(&ov, 0, sizeof ov);
  ov.a = a;
  ov.o = a->overlap;
  ov.kb = kb;
  ov.be = be;
  ov.rank = be->rank;
  ov.nranks = be->nranks;
  ov.cuda = a->mem_cuda;
  ov.out = be->rank == 0 ? out : NULL;
  double lo[PERF_COMPUTE_KINDS], hi[PERF_COMPUTE_KINDS];
  if (ov.out) ov_print_header(&ov, cfg);
  int rc = stream_init(&ov);
  if (rc == 0 && ov.out) fprintf(ov.out, "#\n# Using devices\n");
  if (rc == 0) rc = perf_print_ranks(be, ov.out, where);
  if (rc == 0 && !ov.o->small) rc = calibrate(&ov, lo, hi);
  if (rc == 0 && ov.out && !ov.o->small) ov_print_compute_header(&ov, lo, hi);
  if (rc == 0 && ov.o->small) rc = ov_run_small(&ov);
  for (int i = 0; rc == 0 && !ov.o->small && i < ov.o->nmodels; i++) rc = ov_run_model(&ov, ov.o->models[i], 7 + (uint64_t)i);
  stream_fini(&ov);
  if (ov.out) {
    if (rc == 0 && ov.wrong) fprintf(ov.out, "# FAILED: wrong elements or a broken copy rule (above)\n");
    else if (rc == 0) fprintf(ov.out, "# %s\n", a->check ? "every check passed" : "copy rules kept (-c 0: no element check)");
    fflush(ov.out);
  }
  return rc != 0 ? 2 : ov.wrong ? 1 : 0;
}

