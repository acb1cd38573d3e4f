/* perf_overlap.c - kolo-perf overlap's rank (see perf_overlap.h): the compute calibrated, the
 * header lines (rank 0), the models or --small; the small calls every part uses (perf_overlap_int.h). */
#include <stdlib.h>
#include <unistd.h>

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

int ov_max_over_ranks(const ov_rank *ov, double *v, int n) {
  return ov->be->allreduce_double(ov->be->ctx, v, n, 1);
}

/* "4096 B" (unit " B"), "250 us", or "kolo's default" when not set. */
static void fmt_config(char *buf, size_t len, int set, unsigned long long v, const char *unit) {
  if (set) snprintf(buf, len, "%llu%s", v, unit);
  else snprintf(buf, len, "kolo's default");
}

/* The run and the fusion's config. */
static void print_header(const ov_rank *ov, const perf_config *cfg) {
  const perf_overlap_opts *o = ov->o;
  FILE *f = ov->out;
  char bucket[32], first[32], fusion[32], cycle[32], minb[32];
  fmt_config(bucket, sizeof bucket, o->bucket_bytes != KOLO_FUSION_UNDEF_SIZE, o->bucket_bytes, " B");
  fmt_config(first, sizeof first, o->first_bucket_bytes != KOLO_FUSION_UNDEF_SIZE, o->first_bucket_bytes, " B");
  fmt_config(fusion, sizeof fusion, o->fusion_bytes != KOLO_FUSION_UNDEF_SIZE, o->fusion_bytes, " B");
  fmt_config(cycle, sizeof cycle, o->cycle_us > 0, (unsigned long long)o->cycle_us, " us");
  fmt_config(minb, sizeof minb, o->min_buckets > 0, (unsigned long long)o->min_buckets, "");
  fprintf(f, "# %s overlap%s: %s, %d ranks (%d processes x %d threads, %s), %s memory\n", cfg->tool,
          o->small ? " --small" : "", cfg->library, cfg->nranks, cfg->procs, cfg->threads, cfg->launch, cfg->memory);
  fprintf(f, "# warmup rounds: %d rounds: %d validation: %d op: %s float32; %ld cores online\n", ov->a->warmup,
          ov->a->iters, ov->a->check, perf_op_name(ov->a->op), sysconf(_SC_NPROCESSORS_ONLN));
  fprintf(f, "# fusion config: bucket %s, first bucket %s, min buckets %s, fusion buffer %s, cycle %s "
             "(KOLO_FUSION_* apply)\n", bucket, first, minb, fusion, cycle);
}

/* The gradients, the backward pass and its compute kinds, the columns' meaning. */
static void print_compute_header(const ov_rank *ov, const double *rate_lo, const double *rate_hi) {
  FILE *f = ov->out;
  fprintf(f, "# gradients: %s\n",
          ov->o->external ? "the caller's buffers (KOLO_FUSION_EXTERNAL): packed into the fusion buffer"
                          : "allocator views into the fusion's buckets (KOLO_FUSION_ALLOCATE): reduced in place");
  fprintf(f, "# backward: the model's tensors in reverse order, each after its layer's compute; compute per layer "
             "proportional to its parameter count, the step's total = %s\n",
          ov->o->compute_ms > 0 ? "--compute-ms" : "the measured comm-only median (of its own -w/-n steps)");
  if (ov->o->compute_mask & 1u << PERF_COMPUTE_SPIN)
    fprintf(f, "#   compute spin: a dependent integer loop on the rank's thread, %.1f..%.1f iterations/us "
               "over ranks (calibrated idle, at start); it burns the core, competing with kolo's threads "
               "for this machine's cores\n", rate_lo[PERF_COMPUTE_SPIN], rate_hi[PERF_COMPUTE_SPIN]);
  if (ov->o->compute_mask & 1u << PERF_COMPUTE_SLEEP)
    fprintf(f, "#   compute sleep: an accelerator stand-in: the rank sleeps to each layer's absolute deadline "
               "(the CPU is idle, as when a GPU computes)\n");
  if (ov->o->compute_mask & 1u << PERF_COMPUTE_CUDA)
    fprintf(f, "#   compute cuda: one busy kernel per layer (1 thread spinning on clock64) on a compute stream, "
               "%.1f..%.1f cycles/us over ranks; MarkReady with an event after it\n", rate_lo[PERF_COMPUTE_CUDA],
            rate_hi[PERF_COMPUTE_CUDA]);
  fprintf(f, "# step time: from a common start (a one-element all-reduce) to the end of koloFusionWait, the "
             "slowest rank's; medians over the rounds (each round: comm-only, compute-only, no-overlap, "
             "overlap)\n");
  fprintf(f, "# bound = max(compute-only, comm-only) of the medians; ovl/bnd = overlap / bound; "
             "ovl/bnd rounds = the median over rounds of each round's own ratio\n");
}

/* Calibrates the compute kinds asked for; rate_lo / hi: the lowest and highest over ranks. */
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
  if (!ov->cuda) return 0;
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s;
  if (ov_cuda_fail(ov, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") != 0) return -1;
  ov->stream = s;
#endif
  return 0;
}

int perf_overlap_run(const perf_args *a, kolo_backend *kb, const perf_backend *be, const perf_config *cfg,
                     const char *where, FILE *out) {
  ov_rank ov = {.a = a, .o = a->overlap, .kb = kb, .be = be, .rank = be->rank, .nranks = be->nranks,
                .cuda = a->mem_cuda, .out = be->rank == 0 ? out : NULL};
  double lo[PERF_COMPUTE_KINDS], hi[PERF_COMPUTE_KINDS];
  if (ov.out) print_header(&ov, cfg);
  int rc = stream_init(&ov);
  if (rc == 0 && ov.out) fprintf(ov.out, "#\n# Using devices\n");
  if (rc == 0) rc = perf_print_ranks(be, ov.out, where);
  if (rc == 0 && !ov.o->small) rc = calibrate(&ov, lo, hi);
  if (rc == 0 && ov.out && !ov.o->small) print_compute_header(&ov, lo, hi);
  if (rc == 0 && ov.o->small) rc = ov_run_small(&ov);
  for (int i = 0; rc == 0 && !ov.o->small && i < ov.o->nmodels; i++)
    rc = ov_run_model(&ov, ov.o->models[i], 7 + (uint64_t)i);
#ifdef KOLO_HAVE_CUDA
  if (ov.stream) cudaStreamDestroy((cudaStream_t)ov.stream);
#endif
  if (ov.out && rc == 0)
    fprintf(ov.out, "# %s\n", ov.wrong   ? "FAILED: wrong elements or a broken copy rule (above)"
                              : a->check ? "every check passed"
                                         : "copy rules kept (-c 0: no element check)");
  if (ov.out) fflush(ov.out);
  return rc != 0 ? 2 : ov.wrong ? 1 : 0;
}
