/* perf_overlap_grads.c - kolo-perf overlap's gradients (perf_overlap_int.h): declared to one
 * fusion as allocator views or the caller's buffers, zeroed; for the check, filled and checked. */
#include <stdlib.h>
#include <string.h>

#include "perf/perf_check.h"
#include "perf/perf_overlap_int.h"

int ov_grads_alloc(ov_grads *g, int n, int external) {
  memset(g, 0, sizeof *g);
  g->n = n;
  g->external = external;
  g->t = calloc((size_t)n, sizeof *g->t);
  if (g->t) return 0;
  fprintf(stderr, "kolo-perf overlap: out of memory for %d tensors\n", n);
  return -1;
}

static koloFusionConfig_t fusion_config(const perf_overlap_opts *o, perf_op op) {
  koloFusionConfig_t c = KOLO_FUSION_CONFIG_INITIALIZER;
  c.op = (koloRedOp_t)op;
  if (o->bucket_bytes != KOLO_FUSION_UNDEF_SIZE) c.bucketBytes = o->bucket_bytes;
  if (o->first_bucket_bytes != KOLO_FUSION_UNDEF_SIZE) c.firstBucketBytes = o->first_bucket_bytes;
  if (o->fusion_bytes != KOLO_FUSION_UNDEF_SIZE) c.fusionBytes = o->fusion_bytes;
  if (o->cycle_us > 0) c.cycleTimeUs = o->cycle_us;
  if (o->min_buckets > 0) c.minBuckets = o->min_buckets;
  c.rebuildBuckets = 1; /* the buckets in backward's order; ov_grads_refresh fetches the moved views */
  return c;
}

int ov_grads_refresh(const ov_rank *ov, ov_grads *g) {
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

int ov_grads_init(const ov_rank *ov, ov_grads *g) {
  for (int b = 0; b < g->n; b++) {
    g->total += g->t[b].count;
    if (g->t[b].count > g->max_count) g->max_count = g->t[b].count;
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
  if (g->external ? grads_external(ov, g) : ov_grads_refresh(ov, g)) return -1;
  return grads_zero(ov, g);
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
  if (rc == 0) rc = ov_grads_refresh(ov, g);
  if (rc == 0) rc = grads_fill(ov, g, &gen, host);
  if (rc == 0) rc = ov_run_step(ov, g, c, kind, &us);
  if (rc == 0) rc = ov_grads_refresh(ov, g);
  if (rc == 0) rc = grads_check(ov, g, &gen, host, wrong);
  free(host);
  double w = (double)*wrong;
  if (rc == 0) rc = ov->be->allreduce_double(ov->be->ctx, &w, 1, 0);
  *wrong = (uint64_t)w;
  if (*wrong) ov->wrong = 1;
  return rc;
}
