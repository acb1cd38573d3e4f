/* perf_overlap_model.c - kolo-perf overlap on one model (perf_overlap_int.h):
 * its gradients in backward order, the comm-only baseline the compute is
 * scaled to, one row per compute kind with the ideal step of the layout,
 * and the check step. */
#include <stdlib.h>
#include <string.h>

#include "perf/perf_models.h"
#include "perf/perf_overlap_int.h"

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
  int rc = ov->a->warmup > 0 ? ov_rounds(ov, g, NULL, &kind, 1, ov->a->warmup, t) : 0;
  if (rc == 0) rc = ov_rounds(ov, g, NULL, &kind, 1, n, t);
  if (rc == 0) *us = ov_median_col(t, n, 1, 0);
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
        ov_fusion_fail(ov, g->f, koloFusionTensorBucket(g->f, g->id[b], &bucket), "koloFusionTensorBucket") != 0)
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
        ov_fusion_fail(ov, g->f, koloFusionTensorBucket(g->f, g->id[b], &bucket), "koloFusionTensorBucket") != 0)
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
  int rc = w > 0 ? ov_rounds(ov, g, c, warm, 2, w, t) : 0;
  if (rc == 0) rc = ov_stats(ov, g, &s0);
  if (rc == 0) rc = ov_rounds(ov, g, c, all, NKINDS, n, t);
  if (rc == 0) rc = ov_stats(ov, g, &s1);
  if (rc != 0) {
    free(t);
    return -1;
  }
  double med[NKINDS];
  for (int i = 0; i < NKINDS; i++) med[i] = ov_median_col(t, n, NKINDS, i) / 1e3;
  for (int i = 0; i < n; i++) { /* column 0 becomes the round's overlap / bound */
    double *r = &t[i * NKINDS], b = r[K_COMM] > r[K_COMPUTE] ? r[K_COMM] : r[K_COMPUTE];
    r[0] = r[K_OVERLAP] / b;
  }
  double round_ratio = ov_median_col(t, n, NKINDS, 0);
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
  return ov_copy_rule(ov, g, &s0, &s1, 3 * n, label);
}

/* The check step of a model: one overlap step with the last compute kind. */
typedef struct {
  perf_compute *c;
} overlap_arg;

static int overlap_once(ov_rank *ov, ov_grads *g, void *arg) {
  double us;
  return ov_run_step(ov, g, ((overlap_arg *)arg)->c, K_OVERLAP, &us);
}

static int model_check(ov_rank *ov, ov_grads *g, const perf_model *m, int last_kind, uint64_t seed) {
  overlap_arg arg = {&ov->comp[last_kind]};
  uint64_t wrong = 0;
  if (ov_check_step(ov, g, seed, overlap_once, &arg, &wrong) != 0) return -1;
  if (ov->out)
    fprintf(ov->out, "# check %s: one overlap step (%s) on rank-dependent small integers, every element of %zu "
                     "x %d ranks against the %s computed here: %llu wrong\n",
            m->name, perf_compute_name((perf_compute_kind)last_kind), g->total, ov->nranks,
            ov->a->op == PERF_AVG ? "average" : "sum", (unsigned long long)wrong);
  return 0;
}

int ov_run_model(ov_rank *ov, const char *spec, uint64_t seed) {
  perf_model m;
  size_t *count = NULL, *first = NULL;
  ov_grads g;
  memset(&g, 0, sizeof g);
  const char *dir = ov->o->models_dir ? ov->o->models_dir : perf_models_dir();
  if (perf_model_load(&m, spec, dir) != 0) return -1;
  int rc = backward_order(&m, &count, &first);
  if (rc == 0) rc = ov_grads_init(ov, &g, count, first, m.ntensors, ov->o->external);
  int nbuckets = 0;
  if (rc == 0) rc = ov_fusion_fail(ov, g.f, koloFusionBucketCount(g.f, &nbuckets), "koloFusionBucketCount");
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
    ov_print_table_header(ov->out);
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
  ov_grads_fini(ov, &g);
  free(count);
  free(first);
  perf_model_free(&m);
  return rc;
}

