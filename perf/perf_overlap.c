/* perf_overlap.c - kolo-perf overlap: a simulated training step over the
 * fusion API, and the small-tensor test (see perf_overlap.h). */
#define _GNU_SOURCE /* gethostname */
#include "perf/perf_overlap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kolo_fusion.h"
#include "perf/perf_check.h"
#include "perf/perf_compute.h"
#include "perf/perf_models.h"

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

/* ---- errors and small calls --------------------------------------------- */

static int fusion_fail(const ov_rank *ov, koloFusion_t f, koloResult_t res, const char *what) {
  if (res == koloSuccess) return 0;
  const char *detail = f ? koloFusionGetLastError(f) : koloGetLastError(ov->kb->comm);
  fprintf(stderr, "rank %d: %s failed: %s%s%s\n", ov->rank, what, koloGetErrorString(res),
          detail && *detail ? ": " : "", detail ? detail : "");
  return -1;
}

#ifdef KOLO_HAVE_CUDA
static int cuda_fail(const ov_rank *ov, cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  fprintf(stderr, "rank %d: %s failed: %s\n", ov->rank, what, cudaGetErrorString(err));
  return -1;
}
#endif

/* Every rank here, then all go on (a one-element all-reduce). */
static int start_together(const ov_rank *ov) {
  double x = 0;
  return ov->be->allreduce_double(ov->be->ctx, &x, 1, 1);
}

static int max_over_ranks(const ov_rank *ov, double *v, int n) {
  return ov->be->allreduce_double(ov->be->ctx, v, n, 1);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Median of column k of t[n][ncols]. */
static double median_col(const double *t, int n, int ncols, int k) {
  double *v = malloc((size_t)n * sizeof *v);
  if (v == NULL) return -1;
  for (int i = 0; i < n; i++) v[i] = t[i * ncols + k];
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  free(v);
  return m;
}

/* ---- gradients ---------------------------------------------------------- */

static void grads_free_arrays(ov_grads *g) {
  free(g->id);
  free(g->count);
  free(g->first);
  free(g->ptr);
  free(g->layer_us);
  free(g->ev);
}

static int grads_arrays(ov_grads *g, int n) {
  g->n = n;
  g->id = calloc((size_t)n, sizeof *g->id);
  g->count = calloc((size_t)n, sizeof *g->count);
  g->first = calloc((size_t)n, sizeof *g->first);
  g->ptr = calloc((size_t)n, sizeof *g->ptr);
  g->layer_us = calloc((size_t)n, sizeof *g->layer_us);
  g->ev = calloc((size_t)n, sizeof *g->ev);
  if (g->id && g->count && g->first && g->ptr && g->layer_us && g->ev) return 0;
  fprintf(stderr, "kolo-perf overlap: out of memory for %d tensors\n", n);
  return -1;
}

static koloFusionConfig_t fusion_config(const perf_overlap_opts *o) {
  koloFusionConfig_t c = KOLO_FUSION_CONFIG_INITIALIZER;
  c.op = o->op;
  if (o->bucket_bytes != KOLO_FUSION_UNDEF_SIZE) c.bucketBytes = o->bucket_bytes;
  if (o->first_bucket_bytes != KOLO_FUSION_UNDEF_SIZE) c.firstBucketBytes = o->first_bucket_bytes;
  if (o->fusion_bytes != KOLO_FUSION_UNDEF_SIZE) c.fusionBytes = o->fusion_bytes;
  if (o->cycle_us > 0) c.cycleTimeUs = o->cycle_us;
  if (o->min_buckets > 0) c.minBuckets = o->min_buckets;
  c.rebuildBuckets = 1; /* the buckets in backward's order; grads_refresh fetches the moved views */
  return c;
}

/* Allocator views: fetched again whenever the layout changed. */
static int grads_refresh(const ov_rank *ov, ov_grads *g) {
  int v = 0;
  if (g->external) return 0;
  if (fusion_fail(ov, g->f, koloFusionLayoutVersion(g->f, &v), "koloFusionLayoutVersion") != 0) return -1;
  if (v == g->version && g->ptr[0] != NULL) return 0;
  for (int b = 0; b < g->n; b++)
    if (fusion_fail(ov, g->f, koloFusionTensorPtr(g->f, g->id[b], &g->ptr[b]), "koloFusionTensorPtr") != 0)
      return -1;
  g->version = v;
  return 0;
}

/* External: every gradient carved out of one buffer, 256-byte aligned. */
static int grads_external(const ov_rank *ov, ov_grads *g) {
  size_t bytes = 0;
  for (int b = 0; b < g->n; b++) bytes += (g->count[b] * 4 + 255) & ~(size_t)255;
  g->ext = ov->be->alloc(ov->be->ctx, bytes);
  if (g->ext == NULL) return -1;
  size_t off = 0;
  for (int b = 0; b < g->n; b++) {
    g->ptr[b] = (char *)g->ext + off;
    off += (g->count[b] * 4 + 255) & ~(size_t)255;
  }
  return 0;
}

static int grads_zero(const ov_rank *ov, ov_grads *g) {
  for (int b = 0; b < g->n; b++) {
#ifdef KOLO_HAVE_CUDA
    if (ov->cuda) {
      if (cuda_fail(ov, cudaMemset(g->ptr[b], 0, g->count[b] * 4), "cudaMemset") != 0) return -1;
      continue;
    }
#else
    (void)ov;
#endif
    memset(g->ptr[b], 0, g->count[b] * 4);
  }
#ifdef KOLO_HAVE_CUDA
  /* cudaMemset may return before it is done, and kolo's streams do not wait
   * for the legacy default stream */
  if (ov->cuda && cuda_fail(ov, cudaDeviceSynchronize(), "cudaDeviceSynchronize") != 0) return -1;
#endif
  return 0;
}

static int grads_events(const ov_rank *ov, ov_grads *g) {
#ifdef KOLO_HAVE_CUDA
  for (int b = 0; ov->cuda && b < g->n; b++) {
    cudaEvent_t e;
    if (cuda_fail(ov, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate") != 0) return -1;
    g->ev[b] = (koloEvent_t)e;
  }
#else
  (void)ov;
  (void)g;
#endif
  return 0;
}

static void grads_fini(const ov_rank *ov, ov_grads *g) {
  if (g->f) {
    koloResult_t res = koloFusionDestroy(g->f);
    if (res != koloSuccess) fusion_fail(ov, NULL, res, "koloFusionDestroy");
  }
#ifdef KOLO_HAVE_CUDA
  for (int b = 0; g->ev && b < g->n; b++)
    if (g->ev[b]) cudaEventDestroy((cudaEvent_t)g->ev[b]);
#endif
  if (g->ext) ov->be->release(ov->be->ctx, g->ext);
  grads_free_arrays(g);
  memset(g, 0, sizeof *g);
}

/* Declares n float32 gradients (counts in backward order) to a new fusion,
 * commits it and makes their memory ready (zeroed). */
static int grads_init(const ov_rank *ov, ov_grads *g, const size_t *count, const size_t *first, int n,
                      int external) {
  memset(g, 0, sizeof *g);
  g->external = external;
  if (grads_arrays(g, n) != 0) return -1;
  for (int b = 0; b < n; b++) {
    g->count[b] = count[b];
    g->first[b] = first[b];
    g->total += count[b];
    if (count[b] > g->max_count) g->max_count = count[b];
  }
  koloFusionConfig_t c = fusion_config(ov->o);
  if (fusion_fail(ov, NULL, koloFusionCreate(&g->f, ov->kb->comm, &c), "koloFusionCreate") != 0) {
    g->f = NULL;
    return -1;
  }
  koloFusionStorage_t st = external ? KOLO_FUSION_EXTERNAL : KOLO_FUSION_ALLOCATE;
  for (int b = 0; b < n; b++)
    if (fusion_fail(ov, g->f, koloFusionAddTensor(g->f, count[b], koloFloat32, st, &g->id[b]),
                    "koloFusionAddTensor") != 0)
      return -1;
  if (fusion_fail(ov, g->f, koloFusionCommit(g->f), "koloFusionCommit") != 0) return -1;
  if (external ? grads_external(ov, g) : grads_refresh(ov, g)) return -1;
  return grads_events(ov, g) == 0 ? grads_zero(ov, g) : -1;
}

/* ---- check -------------------------------------------------------------- */

/* Each gradient filled with rank-dependent small integers (perf_check.h). */
static int grads_fill(const ov_rank *ov, ov_grads *g, const perf_gen *gen, void *host) {
  for (int b = 0; b < g->n; b++) {
    void *dst = ov->cuda ? host : g->ptr[b];
    perf_fill(gen, ov->rank, dst, g->first[b], g->count[b]);
    if (ov->cuda && ov->be->copy(ov->be->ctx, g->ptr[b], host, g->count[b] * 4, 1) != 0) return -1;
  }
  return 0;
}

/* Elements of this rank's gradients that differ from the expected
 * reduction over ranks (computed from the generator, not from kolo). */
static int grads_check(const ov_rank *ov, ov_grads *g, const perf_gen *gen, void *host, uint64_t *wrong) {
  *wrong = 0;
  for (int b = 0; b < g->n; b++) {
    const void *src = g->ptr[b];
    if (ov->cuda) {
      if (ov->be->copy(ov->be->ctx, host, g->ptr[b], g->count[b] * 4, 0) != 0) return -1;
      src = host;
    }
    *wrong += perf_check_reduced(gen, src, g->first[b], g->count[b]);
  }
  return 0;
}

static void *host_staging(const ov_rank *ov, const ov_grads *g) {
  if (!ov->cuda) return NULL;
  void *h = malloc(g->max_count * 4);
  if (h == NULL) fprintf(stderr, "rank %d: out of memory for a %zu-byte staging buffer\n", ov->rank, g->max_count * 4);
  return h;
}

/* Fills, runs `step` once, checks; the total of wrong elements over ranks
 * in *wrong. */
static int check_step(ov_rank *ov, ov_grads *g, uint64_t seed, int (*step)(ov_rank *, ov_grads *, void *),
                      void *arg, uint64_t *wrong) {
  perf_gen gen;
  perf_gen_init(&gen, PERF_FLOAT32, ov->o->op == koloAvg ? PERF_AVG : PERF_SUM, ov->nranks, seed);
  void *host = host_staging(ov, g);
  int rc = ov->cuda && host == NULL ? -1 : 0;
  if (rc == 0) rc = grads_refresh(ov, g);
  if (rc == 0) rc = grads_fill(ov, g, &gen, host);
  if (rc == 0) rc = step(ov, g, arg);
  if (rc == 0) rc = grads_refresh(ov, g);
  if (rc == 0) rc = grads_check(ov, g, &gen, host, wrong);
  free(host);
  double w = (double)*wrong;
  if (rc == 0) rc = ov->be->allreduce_double(ov->be->ctx, &w, 1, 0);
  *wrong = (uint64_t)w;
  if (*wrong) ov->wrong = 1;
  return rc;
}

/* ---- steps -------------------------------------------------------------- */

/* cuda: an event after the compute so far, for MarkReady; host: NULL. */
static int record(const ov_rank *ov, ov_grads *g, int b, koloEvent_t *ev) {
  *ev = NULL;
#ifdef KOLO_HAVE_CUDA
  if (!ov->cuda) return 0;
  if (cuda_fail(ov, cudaEventRecord((cudaEvent_t)g->ev[b], (cudaStream_t)ov->stream), "cudaEventRecord") != 0)
    return -1;
  *ev = g->ev[b];
#else
  (void)ov;
  (void)g;
  (void)b;
#endif
  return 0;
}

static int mark(const ov_rank *ov, ov_grads *g, int b, koloEvent_t ev) {
  koloResult_t res = koloFusionMarkReady(g->f, g->id[b], g->external ? g->ptr[b] : NULL, ev);
  return fusion_fail(ov, g->f, res, "koloFusionMarkReady");
}

/* The backward pass: each layer's compute, then (overlap) its gradient's
 * ready mark. */
static int backward(const ov_rank *ov, ov_grads *g, perf_compute *c, int overlap) {
  perf_compute_begin(c);
  for (int b = 0; b < g->n; b++) {
    koloEvent_t ev;
    if (perf_compute_layer(c, g->layer_us[b]) != 0) return -1;
    if (overlap && (record(ov, g, b, &ev) != 0 || mark(ov, g, b, ev) != 0)) return -1;
  }
  return 0;
}

/* Every gradient marked at once (after the compute's last event, cuda). */
static int mark_all(const ov_rank *ov, ov_grads *g, int after_compute) {
  koloEvent_t ev = NULL;
  if (after_compute && record(ov, g, g->n - 1, &ev) != 0) return -1;
  for (int b = 0; b < g->n; b++)
    if (mark(ov, g, b, ev) != 0) return -1;
  return 0;
}

static int step_end(const ov_rank *ov, ov_grads *g) {
  koloEvent_t done = NULL;
  if (fusion_fail(ov, g->f, koloFusionStepEnd(g->f, &done), "koloFusionStepEnd") != 0) return -1;
  return fusion_fail(ov, g->f, koloFusionWait(g->f), "koloFusionWait");
}

/* One step of `kind`; *us: this rank's time from the common start to the
 * end of the step (koloFusionWait, or the compute's end). */
static int run_step(const ov_rank *ov, ov_grads *g, perf_compute *c, int kind, double *us) {
  if (grads_refresh(ov, g) != 0 || start_together(ov) != 0) return -1;
  double t0 = perf_now_us();
  int rc = 0;
  if (kind != K_COMPUTE) rc = fusion_fail(ov, g->f, koloFusionStepBegin(g->f), "koloFusionStepBegin");
  if (rc == 0 && kind != K_COMM) rc = backward(ov, g, c, kind == K_OVERLAP);
  if (rc == 0 && (kind == K_COMM || kind == K_SERIAL)) rc = mark_all(ov, g, kind == K_SERIAL);
  if (rc == 0) rc = kind == K_COMPUTE ? perf_compute_sync(c) : step_end(ov, g);
  *us = perf_now_us() - t0;
  return rc;
}

/* n rounds of the kinds listed; t[i * nk + k]: the slowest rank's time of
 * round i's k-th step. */
static int rounds(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *kinds, int nk, int n, double *t) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nk; k++)
      if (run_step(ov, g, c, kinds[k], &t[i * nk + k]) != 0) return -1;
  return max_over_ranks(ov, t, n * nk);
}

/* ---- copy counters ------------------------------------------------------ */

static int stats(const ov_rank *ov, ov_grads *g, koloFusionStats_t *s) {
  return fusion_fail(ov, g->f, koloFusionGetStats(g->f, s), "koloFusionGetStats");
}

/* Prints the counters of `steps` fusion steps (between s0 and s1) per step,
 * and whether they keep the copy rule; sets ov->wrong when not (on every
 * rank: the verdicts are combined). */
static int copy_rule(ov_rank *ov, const ov_grads *g, const koloFusionStats_t *s0, const koloFusionStats_t *s1,
                     int steps, const char *label) {
  double d[7] = {(double)(s1->allReduces - s0->allReduces),   (double)(s1->packedBytes - s0->packedBytes),
                 (double)(s1->unpackedBytes - s0->unpackedBytes), (double)(s1->packCalls - s0->packCalls),
                 (double)(s1->unpackCalls - s0->unpackCalls), (double)(s1->steps - s0->steps),
                 (double)(s1->rounds - s0->rounds)};
  double bytes = (double)g->total * 4 * steps;
  int ok;
  if (!g->external) ok = d[1] == 0 && d[2] == 0 && d[3] == 0 && d[4] == 0;
  else ok = d[3] == d[4] && d[3] <= d[0] && d[1] == d[2] && d[1] <= bytes && d[3] > 0;
  double bad = !ok;
  if (max_over_ranks(ov, &bad, 1) != 0) return -1;
  if (bad) ov->wrong = 1;
  if (ov->out == NULL) return 0;
  fprintf(ov->out,
          "# copies %s, per fusion step (%d steps; fusion counted %.0f; %.1f negotiation rounds): all-reduces "
          "%.2f, packed %.0f B in %.2f calls, unpacked %.0f B in %.2f calls; packed / gradient bytes %.3f: %s%s\n",
          label, steps, d[5], d[6] / steps, d[0] / steps, d[1] / steps, d[3] / steps, d[2] / steps, d[4] / steps,
          bytes > 0 ? d[1] / bytes : 0.0,
          !g->external ? "allocator rule (0 bytes packed or unpacked) " : "fusion-buffer rule (one pack and one "
                                                                        "unpack per fused all-reduce) ",
          ok && !bad ? "kept" : ok ? "kept here, BROKEN on another rank" : "BROKEN");
  return 0;
}

/* ---- report lines ------------------------------------------------------- */

typedef struct {
  long pid;
  char host[64];
  char where[64];
} rank_info;

static int print_ranks(const ov_rank *ov, const char *where) {
  rank_info mine, *all = calloc((size_t)ov->nranks, sizeof *all);
  if (all == NULL) return -1;
  memset(&mine, 0, sizeof mine);
  mine.pid = (long)getpid();
  if (gethostname(mine.host, sizeof mine.host - 1) != 0) snprintf(mine.host, sizeof mine.host, "?");
  snprintf(mine.where, sizeof mine.where, "%s", where);
  int rc = ov->be->allgather_bytes(ov->be->ctx, &mine, all, sizeof mine);
  for (int r = 0; rc == 0 && ov->out && r < ov->nranks; r++) {
    int q = 0;
    while (q < r && !(all[q].pid == all[r].pid && strcmp(all[q].host, all[r].host) == 0)) q++;
    fprintf(ov->out, "#  Rank %2d Group %2d Pid %6ld on %10s %s\n", r, q, all[r].pid, all[r].host, all[r].where);
  }
  free(all);
  return rc;
}

static void fmt_size(char *buf, size_t len, size_t v, const char *undef) {
  if (v == KOLO_FUSION_UNDEF_SIZE) snprintf(buf, len, "%s", undef);
  else snprintf(buf, len, "%zu B", v);
}

static void print_header(const ov_rank *ov, const perf_config *cfg) {
  const perf_overlap_opts *o = ov->o;
  FILE *f = ov->out;
  char bucket[32], first[32], fusion[32], cycle[32], minb[32];
  fmt_size(bucket, sizeof bucket, o->bucket_bytes, "kolo's default");
  fmt_size(first, sizeof first, o->first_bucket_bytes, "kolo's default");
  fmt_size(fusion, sizeof fusion, o->fusion_bytes, "kolo's default");
  if (o->cycle_us > 0) snprintf(cycle, sizeof cycle, "%d us", o->cycle_us);
  else snprintf(cycle, sizeof cycle, "kolo's default");
  if (o->min_buckets > 0) snprintf(minb, sizeof minb, "%d", o->min_buckets);
  else snprintf(minb, sizeof minb, "kolo's default");
  fprintf(f, "# %s overlap%s: %s, %d ranks (%d processes x %d threads, %s), %s memory\n", cfg->tool,
          o->small ? " --small" : "", cfg->library, cfg->nranks, cfg->procs, cfg->threads, cfg->launch, cfg->memory);
  fprintf(f, "# warmup rounds: %d rounds: %d validation: %d op: %s float32; %ld cores online\n", ov->a->warmup,
          ov->a->iters, ov->a->check, o->op == koloAvg ? "avg" : "sum", sysconf(_SC_NPROCESSORS_ONLN));
  fprintf(f, "# fusion config: bucket %s, first bucket %s, min buckets %s, fusion buffer %s, cycle %s "
             "(KOLO_FUSION_* apply)\n", bucket, first, minb, fusion, cycle);
}

static void print_compute_header(const ov_rank *ov, const double *rate_lo, const double *rate_hi) {
  FILE *f = ov->out;
  fprintf(f, "# gradients: %s\n",
          ov->o->external ? "the caller's buffers (KOLO_FUSION_EXTERNAL): packed into the fusion buffer"
                          : "allocator views into the fusion's buckets (KOLO_FUSION_ALLOCATE): reduced in place");
  fprintf(f, "# backward: the model's tensors in reverse order, each after its layer's compute; compute per layer "
             "proportional to its parameter count, the step's total = %s\n",
          ov->o->compute_ms > 0 ? "--compute-ms" : "the measured comm-only median (of its own -w/-n steps)");
  for (int k = 0; k < PERF_COMPUTE_KINDS; k++) {
    if (!(ov->o->compute_mask & 1u << k)) continue;
    if (k == PERF_COMPUTE_SPIN)
      fprintf(f, "#   compute spin: a dependent integer loop on the rank's thread, %.1f..%.1f iterations/us "
                 "over ranks (calibrated idle, at start); it burns the core, competing with kolo's threads "
                 "for this machine's cores\n", rate_lo[k], rate_hi[k]);
    if (k == PERF_COMPUTE_SLEEP)
      fprintf(f, "#   compute sleep: an accelerator stand-in: the rank sleeps to each layer's absolute deadline "
                 "(the CPU is idle, as when a GPU computes)\n");
    if (k == PERF_COMPUTE_CUDA)
      fprintf(f, "#   compute cuda: one busy kernel per layer (1 thread spinning on clock64) on a compute stream, "
                 "%.1f..%.1f cycles/us over ranks; MarkReady with an event after it\n", rate_lo[k], rate_hi[k]);
  }
  fprintf(f, "# step time: from a common start (a one-element all-reduce) to the end of koloFusionWait, the "
             "slowest rank's; medians over the rounds (each round: comm-only, compute-only, no-overlap, "
             "overlap)\n");
  fprintf(f, "# bound = max(compute-only, comm-only) of the medians; ovl/bnd = overlap / bound; "
             "ovl/bnd rounds = the median over rounds of each round's own ratio\n");
}

static void print_table_header(FILE *f) {
  fprintf(f, "#\n# %-10s %-5s %-7s %9s %9s %9s %9s %9s %9s %7s %7s %8s\n", "model", "grads", "compute", "set",
          "comm", "compute", "no-ovl", "overlap", "bound", "ovl/bnd", "ovl/bnd", "no-ovl/");
  fprintf(f, "# %-10s %-5s %-7s %9s %9s %9s %9s %9s %9s %7s %7s %8s\n", "", "", "", "(ms)", "(ms)", "(ms)",
          "(ms)", "(ms)", "(ms)", "", "rounds", "overlap");
}

/* ---- one model ---------------------------------------------------------- */

/* counts / first in backward order: the model's tensors reversed. */
static int backward_order(const perf_model *m, size_t **count, size_t **first) {
  *count = malloc((size_t)m->ntensors * sizeof **count);
  *first = malloc((size_t)m->ntensors * sizeof **first);
  if (*count == NULL || *first == NULL) {
    fprintf(stderr, "kolo-perf overlap: out of memory\n");
    return -1;
  }
  size_t off = 0;
  for (int i = 0; i < m->ntensors; i++) {
    int b = m->ntensors - 1 - i;
    (*count)[b] = m->tensors[i].count;
    (*first)[b] = off;
    off += m->tensors[i].count;
  }
  return 0;
}

static void set_compute(ov_grads *g, double total_us) {
  for (int b = 0; b < g->n; b++) g->layer_us[b] = total_us * (double)g->count[b] / (double)g->total;
}

/* The comm-only median, after -w warm-ups: what the compute is scaled to. */
static int comm_baseline(const ov_rank *ov, ov_grads *g, double *us) {
  int n = ov->a->iters, kind = K_COMM;
  double *t = malloc((size_t)(n > ov->a->warmup ? n : ov->a->warmup + 1) * sizeof *t);
  if (t == NULL) return -1;
  int rc = ov->a->warmup > 0 ? rounds(ov, g, NULL, &kind, 1, ov->a->warmup, t) : 0;
  if (rc == 0) rc = rounds(ov, g, NULL, &kind, 1, n, t);
  if (rc == 0) *us = median_col(t, n, 1, 0);
  free(t);
  return rc;
}

/* The best step time any scheduler could reach with this layout, from the
 * measured medians: each bucket (external tensors: each tensor) starts its
 * all-reduce when its last gradient is ready (compute spread by parameter
 * count) and the previous one is done, taking its share of the comm-only
 * time by bytes.  *ideal_ms, or -1 with a message. */
static int ideal_step(const ov_rank *ov, ov_grads *g, double compute_ms, double comm_ms, double *ideal_ms) {
  double done = 0, cum = 0, run = 0;
  int prev = -1;
  for (int b = 0; b < g->n; b++) {
    int bucket = b; /* external: every tensor on its own */
    if (!g->external &&
        fusion_fail(ov, g->f, koloFusionTensorBucket(g->f, g->id[b], &bucket), "koloFusionTensorBucket") != 0)
      return -1;
    if (b > 0 && bucket != prev) { /* the previous bucket is complete at cum */
      double start = compute_ms * cum / (double)g->total;
      done = (start > done ? start : done) + comm_ms * run / (double)g->total;
      run = 0;
    }
    prev = bucket;
    cum += (double)g->count[b];
    run += (double)g->count[b];
  }
  done = (compute_ms > done ? compute_ms : done) + comm_ms * run / (double)g->total;
  *ideal_ms = done;
  return 0;
}

/* The largest bucket's share of the gradients (external: the largest
 * tensor's): with compute and comm taking as long, the ideal step is about
 * (1 + this share) x the bound, whatever the scheduler (kolo_fusion.h,
 * "Bucket size").  -1 with a message when a call failed. */
static double largest_share(const ov_rank *ov, ov_grads *g) {
  double best = 0, run = 0;
  int prev = -2;
  for (int b = 0; b < g->n; b++) {
    int bucket = -1;
    if (!g->external &&
        fusion_fail(ov, g->f, koloFusionTensorBucket(g->f, g->id[b], &bucket), "koloFusionTensorBucket") != 0)
      return -1;
    if (g->external || bucket != prev) run = 0; /* buckets hold runs of the backward order */
    run += (double)g->count[b];
    if (run > best) best = run;
    prev = bucket;
  }
  return best / (double)g->total;
}

/* One compute kind: -w untimed rounds of (no-overlap, overlap), then -n
 * rounds of all four kinds; prints the row and the copy counters. */
static int model_kind(ov_rank *ov, ov_grads *g, const perf_model *m, int k, double set_us) {
  static const int all[NKINDS] = {K_COMM, K_COMPUTE, K_SERIAL, K_OVERLAP};
  static const int warm[2] = {K_SERIAL, K_OVERLAP};
  perf_compute *c = &ov->comp[k];
  int n = ov->a->iters, w = ov->a->warmup;
  double *t = malloc((size_t)(n > w ? n : w) * NKINDS * sizeof *t);
  koloFusionStats_t s0, s1;
  if (t == NULL) return -1;
  set_compute(g, set_us);
  int rc = w > 0 ? rounds(ov, g, c, warm, 2, w, t) : 0;
  if (rc == 0) rc = stats(ov, g, &s0);
  if (rc == 0) rc = rounds(ov, g, c, all, NKINDS, n, t);
  if (rc == 0) rc = stats(ov, g, &s1);
  if (rc != 0) {
    free(t);
    return -1;
  }
  double med[NKINDS];
  for (int i = 0; i < NKINDS; i++) med[i] = median_col(t, n, NKINDS, i) / 1e3;
  for (int i = 0; i < n; i++) { /* column 0 becomes the round's overlap / bound */
    double *r = &t[i * NKINDS], b = r[K_COMM] > r[K_COMPUTE] ? r[K_COMM] : r[K_COMPUTE];
    r[0] = r[K_OVERLAP] / b;
  }
  double round_ratio = median_col(t, n, NKINDS, 0);
  free(t);
  double bound = med[K_COMM] > med[K_COMPUTE] ? med[K_COMM] : med[K_COMPUTE];
  double ratio = med[K_OVERLAP] / bound, ideal = 0;
  if (ideal_step(ov, g, med[K_COMPUTE], med[K_COMM], &ideal) != 0) return -1;
  if (ov->out)
    fprintf(ov->out, "  %-10s %-5s %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.3f %7.3f %8.2f\n", m->name,
            g->external ? "ext" : "alloc", perf_compute_name((perf_compute_kind)k), set_us / 1e3, med[K_COMM],
            med[K_COMPUTE], med[K_SERIAL], med[K_OVERLAP], bound, ratio, round_ratio,
            med[K_SERIAL] / med[K_OVERLAP]);
  char label[128];
  snprintf(label, sizeof label, "(%s, %s, %s)", m->name, g->external ? "ext" : "alloc",
           perf_compute_name((perf_compute_kind)k));
  if (ov->out)
    fprintf(ov->out, "# ideal %s: %.2f ms = %.3f x bound (all-reduces start when their %s is complete, one at a "
                     "time, at the comm-only rate); overlap / ideal %.3f\n",
            label, ideal, ideal / bound, g->external ? "tensor" : "bucket", med[K_OVERLAP] / ideal);
  return copy_rule(ov, g, &s0, &s1, 3 * n, label);
}

/* The check step of a model: one overlap step with the last compute kind. */
typedef struct {
  perf_compute *c;
} overlap_arg;

static int overlap_once(ov_rank *ov, ov_grads *g, void *arg) {
  double us;
  return run_step(ov, g, ((overlap_arg *)arg)->c, K_OVERLAP, &us);
}

static int model_check(ov_rank *ov, ov_grads *g, const perf_model *m, int last_kind, uint64_t seed) {
  overlap_arg arg = {&ov->comp[last_kind]};
  uint64_t wrong = 0;
  if (check_step(ov, g, seed, overlap_once, &arg, &wrong) != 0) return -1;
  if (ov->out)
    fprintf(ov->out, "# check %s: one overlap step (%s) on rank-dependent small integers, every element of %zu "
                     "x %d ranks against the %s computed here: %llu wrong\n",
            m->name, perf_compute_name((perf_compute_kind)last_kind), g->total, ov->nranks,
            ov->o->op == koloAvg ? "average" : "sum", (unsigned long long)wrong);
  return 0;
}

static int run_model(ov_rank *ov, const char *spec, uint64_t seed) {
  perf_model m;
  size_t *count = NULL, *first = NULL;
  ov_grads g;
  memset(&g, 0, sizeof g);
  const char *dir = ov->o->models_dir ? ov->o->models_dir : perf_models_dir();
  if (perf_model_load(&m, spec, dir) != 0) return -1;
  int rc = backward_order(&m, &count, &first);
  if (rc == 0) rc = grads_init(ov, &g, count, first, m.ntensors, ov->o->external);
  int nbuckets = 0;
  if (rc == 0) rc = fusion_fail(ov, g.f, koloFusionBucketCount(g.f, &nbuckets), "koloFusionBucketCount");
  double share = rc == 0 ? largest_share(ov, &g) : -1;
  if (share < 0) rc = -1;
  double comm_us = 0;
  if (rc == 0) rc = comm_baseline(ov, &g, &comm_us);
  double set_us = ov->o->compute_ms > 0 ? ov->o->compute_ms * 1e3 : comm_us;
  if (rc == 0 && ov->out) {
    fprintf(ov->out, "#\n# model %s (%s): %d tensors, %zu parameters, %zu bytes of float32 gradients, %d buckets%s, "
                     "largest %s %.1f%% of the gradients; comm-only baseline %.2f ms -> compute %.2f ms per step\n",
            m.name, m.path, m.ntensors, m.total, m.total * 4, nbuckets,
            g.external ? " (external tensors: the fusion buffer)" : "", g.external ? "tensor" : "bucket",
            share * 100, comm_us / 1e3, set_us / 1e3);
    print_table_header(ov->out);
    fflush(ov->out);
  }
  int last = -1;
  for (int k = 0; rc == 0 && k < PERF_COMPUTE_KINDS; k++) {
    if (!(ov->o->compute_mask & 1u << k)) continue;
    rc = model_kind(ov, &g, &m, k, set_us);
    last = k;
    if (ov->out) fflush(ov->out);
  }
  if (rc == 0 && ov->a->check && last >= 0) rc = model_check(ov, &g, &m, last, seed);
  grads_fini(ov, &g);
  free(count);
  free(first);
  perf_model_free(&m);
  return rc;
}

/* ---- small tensors ------------------------------------------------------ */

/* One koloAllReduce per gradient, in place, complete on return. */
static int separate(const ov_rank *ov, ov_grads *g) {
  kolo_backend *kb = ov->kb;
  for (int b = 0; b < g->n; b++) {
    koloResult_t res = koloAllReduce(g->ptr[b], g->ptr[b], g->count[b], koloFloat32, (koloRedOp_t)ov->o->op,
                                     kb->comm, kb->stream);
    if (res != koloSuccess) {
      kolo_backend_report(ov->rank, kb->comm, res, "koloAllReduce (one tensor)");
      return -1;
    }
  }
  return ov->be->wait ? ov->be->wait(ov->be->ctx) : 0;
}

static int separate_step(ov_rank *ov, ov_grads *g, double *us) {
  if (grads_refresh(ov, g) != 0 || start_together(ov) != 0) return -1;
  double t0 = perf_now_us();
  int rc = separate(ov, g);
  *us = perf_now_us() - t0;
  return rc;
}

static int separate_once(ov_rank *ov, ov_grads *g, void *arg) {
  double us;
  (void)arg;
  return separate_step(ov, g, &us);
}

static int fused_once(ov_rank *ov, ov_grads *g, void *arg) {
  double us;
  (void)arg;
  return run_step(ov, g, NULL, K_COMM, &us);
}

/* Rounds of (fused, separate); t[i * 2 + 0 / 1]. */
static int small_rounds(ov_rank *ov, ov_grads *g, int n, double *t) {
  for (int i = 0; i < n; i++)
    if (run_step(ov, g, NULL, K_COMM, &t[2 * i]) != 0 || separate_step(ov, g, &t[2 * i + 1]) != 0) return -1;
  return max_over_ranks(ov, t, 2 * n);
}

static int small_path(ov_rank *ov, int external, const size_t *count, const size_t *first, uint64_t seed) {
  int n = ov->a->iters, w = ov->a->warmup, ntensors = ov->o->small_count;
  ov_grads g;
  koloFusionStats_t s0, s1;
  double *t = malloc((size_t)(n > w ? n : w) * 2 * sizeof *t);
  if (t == NULL) return -1;
  int rc = grads_init(ov, &g, count, first, ntensors, external);
  if (rc == 0 && w > 0) rc = small_rounds(ov, &g, w, t);
  if (rc == 0) rc = stats(ov, &g, &s0);
  if (rc == 0) rc = small_rounds(ov, &g, n, t);
  if (rc == 0) rc = stats(ov, &g, &s1);
  double fused = rc == 0 ? median_col(t, n, 2, 0) : 0, sep = rc == 0 ? median_col(t, n, 2, 1) : 0;
  free(t);
  uint64_t wf = 0, ws = 0;
  if (rc == 0 && ov->a->check) rc = check_step(ov, &g, seed, fused_once, NULL, &wf);
  if (rc == 0 && ov->a->check) rc = check_step(ov, &g, seed + 1, separate_once, NULL, &ws);
  if (rc == 0 && ov->out)
    fprintf(ov->out, "  %-9s %7d %7zu %11.1f %12.1f %9.2f %7llu %8llu\n", external ? "external" : "allocate",
            ntensors, ov->o->small_bytes, fused, sep, sep / fused,
            (unsigned long long)wf, (unsigned long long)ws);
  if (rc == 0) rc = copy_rule(ov, &g, &s0, &s1, n, external ? "(small, ext)" : "(small, alloc)");
  grads_fini(ov, &g);
  return rc;
}

static int run_small(ov_rank *ov) {
  int n = ov->o->small_count;
  size_t elems = ov->o->small_bytes / 4;
  size_t *count = malloc((size_t)n * sizeof *count), *first = malloc((size_t)n * sizeof *first);
  int rc = count && first ? 0 : -1;
  for (int b = 0; rc == 0 && b < n; b++) {
    count[b] = elems;
    first[b] = (size_t)b * elems;
  }
  if (rc == 0 && ov->out) {
    fprintf(ov->out, "# %d float32 tensors of %zu bytes: fused = the fusion API (every tensor marked ready, "
                     "StepEnd, Wait); separate = one koloAllReduce per tensor, in place, blocking%s\n",
            n, ov->o->small_bytes, ov->cuda ? " (then a stream sync)" : "");
    fprintf(ov->out, "# rounds of (fused, separate), each step from a common start, the slowest rank's; medians\n#\n");
    fprintf(ov->out, "# %-9s %7s %7s %11s %12s %9s %7s %8s\n", "fusion", "tensors", "bytes", "fused(us)",
            "separate(us)", "sep/fused", "#wrong", "#wrong");
    fprintf(ov->out, "# %-9s %7s %7s %11s %12s %9s %7s %8s\n", "", "", "", "", "", "", "fused", "separate");
  }
  for (int e = 0; rc == 0 && e < 2; e++) rc = small_path(ov, e, count, first, 1000 + (uint64_t)e * 2);
  free(count);
  free(first);
  return rc;
}

/* ---- the rank ----------------------------------------------------------- */

/* Calibrates the compute kinds asked for; prints nothing.  rate_lo / hi:
 * the lowest and highest rate over ranks. */
static int calibrate(ov_rank *ov, double *rate_lo, double *rate_hi) {
  for (int k = 0; k < PERF_COMPUTE_KINDS; k++) {
    rate_lo[k] = rate_hi[k] = 0;
    if (!(ov->o->compute_mask & 1u << k)) continue;
    if (perf_compute_init(&ov->comp[k], (perf_compute_kind)k, ov->stream) != 0) return -1;
    double r[2] = {ov->comp[k].per_us, -ov->comp[k].per_us};
    if (max_over_ranks(ov, r, 2) != 0) return -1;
    rate_hi[k] = r[0];
    rate_lo[k] = -r[1];
  }
  return 0;
}

static int stream_init(ov_rank *ov) {
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s;
  if (!ov->cuda) return 0;
  if (cuda_fail(ov, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") != 0) return -1;
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
  if (ov.out) print_header(&ov, cfg);
  int rc = stream_init(&ov);
  if (rc == 0 && ov.out) fprintf(ov.out, "#\n# Using devices\n");
  if (rc == 0) rc = print_ranks(&ov, where);
  if (rc == 0 && !ov.o->small) rc = calibrate(&ov, lo, hi);
  if (rc == 0 && ov.out && !ov.o->small) print_compute_header(&ov, lo, hi);
  if (rc == 0 && ov.o->small) rc = run_small(&ov);
  for (int i = 0; rc == 0 && !ov.o->small && i < ov.o->nmodels; i++) rc = run_model(&ov, ov.o->models[i], 7 + (uint64_t)i);
  stream_fini(&ov);
  if (ov.out) {
    if (rc == 0 && ov.wrong) fprintf(ov.out, "# FAILED: wrong elements or a broken copy rule (above)\n");
    else if (rc == 0) fprintf(ov.out, "# %s\n", a->check ? "every check passed" : "copy rules kept (-c 0: no element check)");
    fflush(ov.out);
  }
  return rc != 0 ? 2 : ov.wrong ? 1 : 0;
}
