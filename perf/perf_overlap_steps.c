/* perf_overlap_steps.c - kolo-perf overlap's steps (perf_overlap_int.h): the
 * backward pass with or without MarkReady after each layer, timed from a
 * common start, in rounds; and the fusion's copy counters against the copy
 * rule of its storage. */
#include "perf/perf_overlap_int.h"

/* cuda: an event after the compute so far, for MarkReady; host: NULL. */
static int record(const ov_rank *ov, ov_grads *g, int b, koloEvent_t *ev) {
  *ev = NULL;
#ifdef KOLO_HAVE_CUDA
  if (!ov->cuda) return 0;
  if (ov_cuda_fail(ov, cudaEventRecord((cudaEvent_t)g->ev[b], (cudaStream_t)ov->stream), "cudaEventRecord") != 0)
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
  return ov_fusion_fail(ov, g->f, res, "koloFusionMarkReady");
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
  if (ov_fusion_fail(ov, g->f, koloFusionStepEnd(g->f, &done), "koloFusionStepEnd") != 0) return -1;
  return ov_fusion_fail(ov, g->f, koloFusionWait(g->f), "koloFusionWait");
}

/* One step of `kind`; *us: this rank's time from the common start to the
 * end of the step (koloFusionWait, or the compute's end). */
int ov_run_step(const ov_rank *ov, ov_grads *g, perf_compute *c, int kind, double *us) {
  if (ov_grads_refresh(ov, g) != 0 || ov_start_together(ov) != 0) return -1;
  double t0 = perf_now_us();
  int rc = 0;
  if (kind != K_COMPUTE) rc = ov_fusion_fail(ov, g->f, koloFusionStepBegin(g->f), "koloFusionStepBegin");
  if (rc == 0 && kind != K_COMM) rc = backward(ov, g, c, kind == K_OVERLAP);
  if (rc == 0 && (kind == K_COMM || kind == K_SERIAL)) rc = mark_all(ov, g, kind == K_SERIAL);
  if (rc == 0) rc = kind == K_COMPUTE ? perf_compute_sync(c) : step_end(ov, g);
  *us = perf_now_us() - t0;
  return rc;
}

/* n rounds of the kinds listed; t[i * nk + k]: the slowest rank's time of
 * round i's k-th step. */
int ov_rounds(const ov_rank *ov, ov_grads *g, perf_compute *c, const int *kinds, int nk, int n, double *t) {
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nk; k++)
      if (ov_run_step(ov, g, c, kinds[k], &t[i * nk + k]) != 0) return -1;
  return ov_max_over_ranks(ov, t, n * nk);
}

int ov_stats(const ov_rank *ov, ov_grads *g, koloFusionStats_t *s) {
  return ov_fusion_fail(ov, g->f, koloFusionGetStats(g->f, s), "koloFusionGetStats");
}

/* Prints the counters of `steps` fusion steps (between s0 and s1) per step,
 * and whether they keep the copy rule; sets ov->wrong when not (on every
 * rank: the verdicts are combined). */
int ov_copy_rule(ov_rank *ov, const ov_grads *g, const koloFusionStats_t *s0, const koloFusionStats_t *s1,
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

