/* perf_overlap_steps.c - kolo-perf overlap's steps (perf_overlap_int.h): the
 * backward pass with or without MarkReady after each layer, or one koloAllReduce
 * per gradient (--small), timed in rounds; the copy counters against their rule. */
#include <stdlib.h>

#include "perf/perf_overlap_int.h"

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

int ov_run_step(const ov_rank *ov, ov_grads *g, perf_compute *c, int kind, double *us) {
  double x = 0; /* every rank here, then all go on (a one-element all-reduce) */
  if (ov_grads_refresh(ov, g) != 0 || ov->be->allreduce_double(ov->be->ctx, &x, 1, 1) != 0) return -1;
  double t0 = perf_now_us();
  int rc = step(ov, g, c, kind);
  *us = perf_now_us() - t0;
  return rc;
}

/* n rounds of kinds[nk]; t[i * nk + k]: the slowest rank's time of round i's k-th step. */
static int rounds(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *kinds, int nk, int n, double *t) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nk; k++)
      if (ov_run_step(ov, g, c, kinds[k], &t[i * nk + k]) != 0) return -1;
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
