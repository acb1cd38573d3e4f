/* perf_overlap_grads.c - kolo-perf overlap's gradients and steps (perf_overlap_int.h):
 * the gradients declared to one fusion as allocator views or the caller's buffers;
 * the backward pass with or without MarkReady after each layer, or one koloAllReduce
 * per gradient (--small), timed in rounds; the copy counters against their rule;
 * the check step's fill and check. */
#include <stdlib.h>
#include <string.h>

#include "perf/perf_check.h"
#include "perf/perf_overlap_int.h"

static koloFusionConfig_t fusion_config(const perf_overlap_opts *o, perf_op op) {
  koloFusionConfig_t c = KOLO_FUSION_CONFIG_INITIALIZER;
  c.op = (koloRedOp_t)op;
  if (o->bucket_bytes != KOLO_FUSION_UNDEF_SIZE) c.bucketBytes = o->bucket_bytes;
  if (o->first_bucket_bytes != KOLO_FUSION_UNDEF_SIZE) c.firstBucketBytes = o->first_bucket_bytes;
  if (o->fusion_bytes != KOLO_FUSION_UNDEF_SIZE) c.fusionBytes = o->fusion_bytes;
  if (o->cycle_us > 0) c.cycleTimeUs = o->cycle_us;
  if (o->min_buckets > 0) c.minBuckets = o->min_buckets;
  c.rebuildBuckets = 1; /* the buckets in backward's order; grads_refresh fetches the moved views */
  return c;
}

/* The allocator views, fetched again after a layout change. */
static int grads_refresh(const ov_rank *ov, ov_grads *g) {
  int v = 0;
  if (g->external) return 0;
  if (ov_fusion_fail(ov, g->f, koloFusionLayoutVersion(g->f, &v), "koloFusionLayoutVersion") != 0) return -1;
  if (v == g->version && g->t[0].ptr != NULL) return 0;
  for (int b = 0; b < g->n; b++)
    if (ov_fusion_fail(ov, g->f, koloFusionTensorPtr(g->f, g->t[b].id, &g->t[b].ptr), "koloFusionTensorPtr") != 0)
      return -1;
  g->version = v;
  return 0;
}

/* External: every gradient carved out of one buffer, 256-byte aligned. */
static int grads_external(const ov_rank *ov, ov_grads *g) {
  size_t bytes = 0;
  for (int b = 0; b < g->n; b++) bytes += (g->t[b].count * 4 + 255) & ~(size_t)255;
  g->ext = ov->be->alloc(ov->be->ctx, bytes);
  if (g->ext == NULL) return -1;
  size_t off = 0;
  for (int b = 0; b < g->n; b++) {
    g->t[b].ptr = (char *)g->ext + off;
    off += (g->t[b].count * 4 + 255) & ~(size_t)255;
  }
  return 0;
}

#ifdef KOLO_HAVE_CUDA
/* cuda: one event per gradient, then the gradients zeroed. */
static int grads_cuda(const ov_rank *ov, ov_grads *g) {
  for (int b = 0; b < g->n; b++) {
    cudaEvent_t e;
    if (ov_cuda_fail(ov, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate") != 0) return -1;
    g->t[b].ev = (koloEvent_t)e;
  }
  for (int b = 0; b < g->n; b++)
    if (ov_cuda_fail(ov, cudaMemset(g->t[b].ptr, 0, g->t[b].count * 4), "cudaMemset") != 0) return -1;
  /* cudaMemset may return before it is done, and kolo's streams do not wait
   * for the legacy default stream */
  return ov_cuda_fail(ov, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}
#endif

static int grads_zero(const ov_rank *ov, ov_grads *g) {
#ifdef KOLO_HAVE_CUDA
  if (ov->cuda) return grads_cuda(ov, g);
#endif
  for (int b = 0; !ov->cuda && b < g->n; b++) memset(g->t[b].ptr, 0, g->t[b].count * 4); /* host memory */
  return 0;
}

void ov_grads_fini(const ov_rank *ov, ov_grads *g) {
  if (g->f) ov_fusion_fail(ov, NULL, koloFusionDestroy(g->f), "koloFusionDestroy");
#ifdef KOLO_HAVE_CUDA
  for (int b = 0; g->t && b < g->n; b++)
    if (g->t[b].ev) cudaEventDestroy((cudaEvent_t)g->t[b].ev);
#endif
  if (g->ext) ov->be->release(ov->be->ctx, g->ext);
  free(g->t);
  memset(g, 0, sizeof *g);
}

int ov_grads_init(const ov_rank *ov, ov_grads *g, int n, int external, const size_t *count, size_t each) {
  *g = (ov_grads){.n = n, .external = external, .t = calloc((size_t)n, sizeof *g->t)};
  if (g->t == NULL) {
    fprintf(stderr, "kolo-perf overlap: out of memory for %d tensors\n", n);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    ov_grad *t = &g->t[n - 1 - i];
    t->count = count ? count[i] : each;
    t->first = g->total;
    g->total += t->count;
    if (t->count > g->max_count) g->max_count = t->count;
  }
  koloFusionConfig_t c = fusion_config(ov->o, ov->a->op);
  /* on failure g->f stays NULL (koloFusionCreate sets it on success only) */
  if (ov_fusion_fail(ov, NULL, koloFusionCreate(&g->f, ov->kb->comm, &c), "koloFusionCreate") != 0) return -1;
  koloFusionStorage_t st = g->external ? KOLO_FUSION_EXTERNAL : KOLO_FUSION_ALLOCATE;
  for (int b = 0; b < g->n; b++)
    if (ov_fusion_fail(ov, g->f, koloFusionAddTensor(g->f, g->t[b].count, koloFloat32, st, &g->t[b].id),
                       "koloFusionAddTensor") != 0)
      return -1;
  if (ov_fusion_fail(ov, g->f, koloFusionCommit(g->f), "koloFusionCommit") != 0) return -1;
  if (g->external ? grads_external(ov, g) : grads_refresh(ov, g)) return -1;
  return grads_zero(ov, g);
}

/* cuda: an event after the compute so far, for MarkReady; host: NULL. */
static int record(const ov_rank *ov, ov_grads *g, int b, koloEvent_t *ev) {
  *ev = ov->cuda ? g->t[b].ev : NULL;
#ifdef KOLO_HAVE_CUDA
  if (ov->cuda) return ov_cuda_fail(ov, cudaEventRecord((cudaEvent_t)*ev, (cudaStream_t)ov->stream), "cudaEventRecord");
#endif
  return 0;
}

static int mark(const ov_rank *ov, ov_grads *g, int b, koloEvent_t ev) {
  koloResult_t res = koloFusionMarkReady(g->f, g->t[b].id, g->external ? g->t[b].ptr : NULL, ev);
  return ov_fusion_fail(ov, g->f, res, "koloFusionMarkReady");
}

/* The backward pass: each layer's compute, then (overlap) its gradient's ready mark. */
static int backward(const ov_rank *ov, ov_grads *g, perf_compute *c, int overlap) {
  perf_compute_begin(c);
  for (int b = 0; b < g->n; b++) {
    koloEvent_t ev;
    if (perf_compute_layer(c, g->t[b].layer_us) != 0) return -1;
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

/* K_SEPARATE: one koloAllReduce per gradient, in place, complete on return. */
static int separate(const ov_rank *ov, ov_grads *g) {
  kolo_backend *kb = ov->kb;
  for (int b = 0; b < g->n; b++) {
    koloResult_t res = koloAllReduce(g->t[b].ptr, g->t[b].ptr, g->t[b].count, koloFloat32, (koloRedOp_t)ov->a->op,
                                     kb->comm, kb->stream);
    if (res != koloSuccess) return kolo_backend_report(ov->rank, kb->comm, res, "koloAllReduce (one tensor)");
  }
  return ov->be->wait ? ov->be->wait(ov->be->ctx) : 0;
}

/* One step of `kind`, up to koloFusionWait (compute-only: the compute's end). */
static int step(const ov_rank *ov, ov_grads *g, perf_compute *c, int kind) {
  koloEvent_t done = NULL;
  if (kind == K_SEPARATE) return separate(ov, g);
  if (kind == K_COMPUTE) return backward(ov, g, c, 0) != 0 ? -1 : perf_compute_sync(c);
  if (ov_fusion_fail(ov, g->f, koloFusionStepBegin(g->f), "koloFusionStepBegin") != 0) return -1;
  if (kind != K_COMM && backward(ov, g, c, kind == K_OVERLAP) != 0) return -1;
  if (kind != K_OVERLAP && mark_all(ov, g, kind == K_SERIAL) != 0) return -1;
  if (ov_fusion_fail(ov, g->f, koloFusionStepEnd(g->f, &done), "koloFusionStepEnd") != 0) return -1;
  return ov_fusion_fail(ov, g->f, koloFusionWait(g->f), "koloFusionWait");
}

static int run_step(const ov_rank *ov, ov_grads *g, perf_compute *c, int kind, double *us) {
  double x = 0; /* every rank here, then all go on (a one-element all-reduce) */
  if (grads_refresh(ov, g) != 0 || ov->be->allreduce_double(ov->be->ctx, &x, 1, 1) != 0) return -1;
  double t0 = perf_now_us();
  int rc = step(ov, g, c, kind);
  *us = perf_now_us() - t0;
  return rc;
}

/* n rounds of kinds[nk]; t[i * nk + k]: the slowest rank's time of round i's k-th step. */
static int rounds(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *kinds, int nk, int n, double *t) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nk; k++)
      if (run_step(ov, g, c, kinds[k], &t[i * nk + k]) != 0) return -1;
  return ov_max_over_ranks(ov, t, n * nk);
}

int ov_measure(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *warm, int nw, const int *kinds, int nk,
               double **t, koloFusionStats_t *s) {
  int n = ov->a->iters, w = ov->a->warmup;
  *t = malloc((size_t)(n > w ? n : w) * (size_t)(nk > nw ? nk : nw) * sizeof **t);
  int rc = *t ? 0 : -1;
  if (rc == 0 && w > 0) rc = rounds(ov, g, c, warm, nw, w, *t);
  if (rc == 0) rc = ov_fusion_fail(ov, g->f, koloFusionGetStats(g->f, &s[0]), "koloFusionGetStats");
  if (rc == 0) rc = rounds(ov, g, c, kinds, nk, n, *t);
  if (rc == 0) rc = ov_fusion_fail(ov, g->f, koloFusionGetStats(g->f, &s[1]), "koloFusionGetStats");
  if (rc != 0) {
    free(*t);
    *t = NULL;
  }
  return rc;
}

/* Prints the counters of `steps` fusion steps (s[0] to s[1]) per step and whether they
 * keep the copy rule; sets ov->wrong when not, on every rank (the verdicts combined). */
int ov_copy_rule(ov_rank *ov, const ov_grads *g, const koloFusionStats_t *s, int steps, const char *label) {
  double d[7] = {(double)(s[1].allReduces - s[0].allReduces),     (double)(s[1].packedBytes - s[0].packedBytes),
                 (double)(s[1].unpackedBytes - s[0].unpackedBytes), (double)(s[1].packCalls - s[0].packCalls),
                 (double)(s[1].unpackCalls - s[0].unpackCalls),   (double)(s[1].steps - s[0].steps),
                 (double)(s[1].rounds - s[0].rounds)};
  double bytes = (double)g->total * 4 * steps;
  int ok = !g->external ? d[1] == 0 && d[2] == 0 && d[3] == 0 && d[4] == 0
                        : d[3] == d[4] && d[3] <= d[0] && d[1] == d[2] && d[1] <= bytes && d[3] > 0;
  double bad = !ok;
  if (ov_max_over_ranks(ov, &bad, 1) != 0) return -1;
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

/* Each gradient filled with rank-dependent small integers (perf_check.h). */
static int grads_fill(const ov_rank *ov, ov_grads *g, const perf_gen *gen, void *host) {
  for (int b = 0; b < g->n; b++) {
    perf_fill(gen, ov->rank, ov->cuda ? host : g->t[b].ptr, g->t[b].first, g->t[b].count);
    if (ov->cuda && ov->be->copy(ov->be->ctx, g->t[b].ptr, host, g->t[b].count * 4, 1) != 0) return -1;
  }
  return 0;
}

/* Elements of this rank's gradients that differ from the expected
 * reduction over ranks (computed from the generator, not from kolo). */
static int grads_check(const ov_rank *ov, ov_grads *g, const perf_gen *gen, void *host, uint64_t *wrong) {
  *wrong = 0;
  for (int b = 0; b < g->n; b++) {
    if (ov->cuda && ov->be->copy(ov->be->ctx, host, g->t[b].ptr, g->t[b].count * 4, 0) != 0) return -1;
    *wrong += perf_check_reduced(gen, ov->cuda ? host : g->t[b].ptr, g->t[b].first, g->t[b].count);
  }
  return 0;
}

int ov_check_step(ov_rank *ov, ov_grads *g, uint64_t seed, perf_compute *c, int kind, uint64_t *wrong) {
  perf_gen gen;
  perf_gen_init(&gen, PERF_FLOAT32, ov->a->op, ov->nranks, seed);
  void *host = ov->cuda ? malloc(g->max_count * 4) : NULL; /* cuda: the gradients' staging on the host */
  double us;
  int rc = ov->cuda && host == NULL ? -1 : 0;
  if (rc != 0) fprintf(stderr, "rank %d: out of memory for a %zu-byte staging buffer\n", ov->rank, g->max_count * 4);
  if (rc == 0) rc = grads_refresh(ov, g);
  if (rc == 0) rc = grads_fill(ov, g, &gen, host);
  if (rc == 0) rc = run_step(ov, g, c, kind, &us);
  if (rc == 0) rc = grads_refresh(ov, g);
  if (rc == 0) rc = grads_check(ov, g, &gen, host, wrong);
  free(host);
  double w = (double)*wrong;
  if (rc == 0) rc = ov->be->allreduce_double(ov->be->ctx, &w, 1, 0);
  *wrong = (uint64_t)w;
  if (*wrong) ov->wrong = 1;
  return rc;
}
