/* perf_overlap_model.c - kolo-perf overlap on one model (perf_overlap_int.h):
 * its gradients in backward order, the comm-only baseline the compute is scaled
 * to, one row per compute kind with the layout's ideal step, the check step;
 * and --small: N tensors of B bytes fused beside one koloAllReduce per tensor. */
#include <stdlib.h>

#include "perf/perf_models.h"
#include "perf/perf_overlap_int.h"
#include "perf/perf_sweep.h"

/* The median of column k of t[n][ncols]. */
static double median_col(const double *t, int n, int ncols, int k) {
  double *v = malloc((size_t)n * sizeof *v);
  if (v == NULL) return -1;
  for (int i = 0; i < n; i++) v[i] = t[i * ncols + k];
  perf_sort_doubles(v, (size_t)n);
  double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  free(v);
  return m;
}

/* The comm-only median, after -w warm-ups: what the compute is scaled to. */
static int comm_baseline(const ov_rank *ov, ov_grads *g, double *us) {
  static const int comm[1] = {K_COMM};
  double *t;
  koloFusionStats_t s[2];
  if (ov_measure(ov, g, NULL, comm, 1, comm, 1, &t, s) != 0) return -1;
  *us = median_col(t, ov->a->iters, 1, 0);
  free(t);
  return 0;
}

/* *ideal_ms: the layout's ideal step (docs/benchmarking.md), each bucket's
 * (external: tensor's) all-reduce taking its share of comm_ms by bytes;
 * *share: the largest one's share of the gradients.  0, or -1 said. */
static int layout(const ov_rank *ov, ov_grads *g, double compute_ms, double comm_ms, double *ideal_ms,
                  double *share) {
  double done = 0, cum = 0, run = 0, best = 0;
  int prev = -1;
  for (int b = 0; b < g->n; b++) {
    int bucket = b; /* external: every tensor on its own */
    if (!g->external &&
        ov_fusion_fail(ov, g->f, koloFusionTensorBucket(g->f, g->t[b].id, &bucket), "koloFusionTensorBucket") != 0)
      return -1;
    if (b > 0 && bucket != prev) { /* the previous bucket is complete at cum */
      double start = compute_ms * cum / (double)g->total;
      done = (start > done ? start : done) + comm_ms * run / (double)g->total;
      run = 0;
    }
    prev = bucket;
    cum += (double)g->t[b].count;
    run += (double)g->t[b].count;
    if (run > best) best = run;
  }
  *ideal_ms = (compute_ms > done ? compute_ms : done) + comm_ms * run / (double)g->total;
  *share = best / (double)g->total;
  return 0;
}

/* One compute kind: -w untimed rounds of (no-overlap, overlap), then -n
 * rounds of all four kinds; prints the row and the copy counters. */
static int model_kind(ov_rank *ov, ov_grads *g, const perf_model *m, int k, double set_us) {
  static const int all[NKINDS] = {K_COMM, K_COMPUTE, K_SERIAL, K_OVERLAP};
  static const int warm[2] = {K_SERIAL, K_OVERLAP};
  int n = ov->a->iters;
  double *t, med[NKINDS], ideal, share;
  koloFusionStats_t s[2];
  for (int b = 0; b < g->n; b++) g->t[b].layer_us = set_us * (double)g->t[b].count / (double)g->total;
  if (ov_measure(ov, g, &ov->comp[k], warm, 2, all, NKINDS, &t, s) != 0) return -1;
  for (int i = 0; i < NKINDS; i++) med[i] = median_col(t, n, NKINDS, i) / 1e3;
  for (double *r = t; r < t + n * NKINDS; r += NKINDS) /* column 0 becomes the round's overlap / bound */
    r[0] = r[K_OVERLAP] / (r[K_COMM] > r[K_COMPUTE] ? r[K_COMM] : r[K_COMPUTE]);
  double round_ratio = median_col(t, n, NKINDS, 0);
  free(t);
  double bound = med[K_COMM] > med[K_COMPUTE] ? med[K_COMM] : med[K_COMPUTE];
  if (layout(ov, g, med[K_COMPUTE], med[K_COMM], &ideal, &share) != 0) return -1;
  const char *grads = g->external ? "ext" : "alloc", *kind = perf_compute_name((perf_compute_kind)k);
  char label[128];
  snprintf(label, sizeof label, "(%s, %s, %s)", m->name, grads, kind);
  if (ov->out) {
    fprintf(ov->out, "  %-10s %-5s %-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7.3f %7.3f %8.2f\n", m->name, grads,
            kind, set_us / 1e3, med[K_COMM], med[K_COMPUTE], med[K_SERIAL], med[K_OVERLAP], bound,
            med[K_OVERLAP] / bound, round_ratio, med[K_SERIAL] / med[K_OVERLAP]);
    fprintf(ov->out, "# ideal %s: %.2f ms = %.3f x bound (all-reduces start when their %s is complete, one at a "
                     "time, at the comm-only rate); overlap / ideal %.3f\n",
            label, ideal, ideal / bound, g->external ? "tensor" : "bucket", med[K_OVERLAP] / ideal);
  }
  return ov_copy_rule(ov, g, s, 3 * n, label);
}

/* The check step of a model: one overlap step with the last compute kind. */
static int model_check(ov_rank *ov, ov_grads *g, const perf_model *m, int last_kind, uint64_t seed) {
  uint64_t wrong = 0;
  if (ov_check_step(ov, g, seed, &ov->comp[last_kind], K_OVERLAP, &wrong) != 0) return -1;
  if (ov->out)
    fprintf(ov->out, "# check %s: one overlap step (%s) on rank-dependent small integers, every element of %zu "
                     "x %d ranks against the %s computed here: %llu wrong\n",
            m->name, perf_compute_name((perf_compute_kind)last_kind), g->total, ov->nranks,
            ov->a->op == PERF_AVG ? "average" : "sum", (unsigned long long)wrong);
  return 0;
}

static void print_model(const ov_rank *ov, const perf_model *m, const ov_grads *g, int nbuckets, double share,
                        double comm_us, double set_us) {
  FILE *f = ov->out;
  fprintf(f, "#\n# model %s (%s): %d tensors, %zu parameters, %zu bytes of float32 gradients, %d buckets%s, "
             "largest %s %.1f%% of the gradients; comm-only baseline %.2f ms -> compute %.2f ms per step\n",
          m->name, m->path, m->ntensors, m->total, m->total * 4, nbuckets,
          g->external ? " (external tensors: the fusion buffer)" : "", g->external ? "tensor" : "bucket",
          share * 100, comm_us / 1e3, set_us / 1e3);
  fprintf(f, "#\n# %-10s %-5s %-7s %9s %9s %9s %9s %9s %9s %7s %7s %8s\n", "model", "grads", "compute", "set",
          "comm", "compute", "no-ovl", "overlap", "bound", "ovl/bnd", "ovl/bnd", "no-ovl/");
  fprintf(f, "# %-10s %-5s %-7s %9s %9s %9s %9s %9s %9s %7s %7s %8s\n", "", "", "", "(ms)", "(ms)", "(ms)",
          "(ms)", "(ms)", "(ms)", "", "rounds", "overlap");
  fflush(f);
}

int ov_run_model(ov_rank *ov, const char *spec, uint64_t seed) {
  perf_model m;
  ov_grads g;
  if (perf_model_load(&m, spec, ov->o->models_dir ? ov->o->models_dir : perf_models_dir()) != 0) return -1;
  int nbuckets = 0, last = -1, rc = ov_grads_init(ov, &g, m.ntensors, ov->o->external, m.count, 0);
  double ideal, share = 0, comm_us = 0;
  if (rc == 0) rc = ov_fusion_fail(ov, g.f, koloFusionBucketCount(g.f, &nbuckets), "koloFusionBucketCount");
  if (rc == 0) rc = layout(ov, &g, 0, 0, &ideal, &share);
  if (rc == 0) rc = comm_baseline(ov, &g, &comm_us);
  double set_us = ov->o->compute_ms > 0 ? ov->o->compute_ms * 1e3 : comm_us;
  if (rc == 0 && ov->out) print_model(ov, &m, &g, nbuckets, share, comm_us, set_us);
  for (int k = 0; rc == 0 && k < PERF_COMPUTE_KINDS; k++) {
    if (!(ov->o->compute_mask & 1u << k)) continue;
    rc = model_kind(ov, &g, &m, k, set_us);
    last = k;
    if (ov->out) fflush(ov->out);
  }
  if (rc == 0 && ov->a->check && last >= 0) rc = model_check(ov, &g, &m, last, seed);
  ov_grads_fini(ov, &g);
  perf_model_free(&m);
  return rc;
}

static int small_path(ov_rank *ov, int external, uint64_t seed) {
  static const int kinds[2] = {K_COMM, K_SEPARATE}; /* rounds of (fused, separate) */
  int n = ov->a->iters, ntensors = ov->o->small_count;
  ov_grads g;
  koloFusionStats_t s[2];
  double *t = NULL;
  uint64_t wf = 0, ws = 0;
  int rc = ov_grads_init(ov, &g, ntensors, external, NULL, ov->o->small_bytes / 4);
  if (rc == 0) rc = ov_measure(ov, &g, NULL, kinds, 2, kinds, 2, &t, s);
  double fused = rc == 0 ? median_col(t, n, 2, 0) : 0, sep = rc == 0 ? median_col(t, n, 2, 1) : 0;
  free(t);
  if (rc == 0 && ov->a->check) rc = ov_check_step(ov, &g, seed, NULL, K_COMM, &wf);
  if (rc == 0 && ov->a->check) rc = ov_check_step(ov, &g, seed + 1, NULL, K_SEPARATE, &ws);
  if (rc == 0 && ov->out)
    fprintf(ov->out, "  %-9s %7d %7zu %11.1f %12.1f %9.2f %7llu %8llu\n", external ? "external" : "allocate",
            ntensors, ov->o->small_bytes, fused, sep, sep / fused, (unsigned long long)wf, (unsigned long long)ws);
  if (rc == 0) rc = ov_copy_rule(ov, &g, s, n, external ? "(small, ext)" : "(small, alloc)");
  ov_grads_fini(ov, &g);
  return rc;
}

int ov_run_small(ov_rank *ov) {
  int rc = 0;
  if (ov->out) {
    fprintf(ov->out, "# %d float32 tensors of %zu bytes: fused = the fusion API (every tensor marked ready, "
                     "StepEnd, Wait); separate = one koloAllReduce per tensor, in place, blocking%s\n",
            ov->o->small_count, ov->o->small_bytes, ov->cuda ? " (then a stream sync)" : "");
    fprintf(ov->out, "# rounds of (fused, separate), each step from a common start, the slowest rank's; medians\n#\n");
    fprintf(ov->out, "# %-9s %7s %7s %11s %12s %9s %7s %8s\n", "fusion", "tensors", "bytes", "fused(us)",
            "separate(us)", "sep/fused", "#wrong", "#wrong");
    fprintf(ov->out, "# %-9s %7s %7s %11s %12s %9s %7s %8s\n", "", "", "", "", "", "", "fused", "separate");
  }
  for (int e = 0; rc == 0 && e < 2; e++) rc = small_path(ov, e, 1000 + (uint64_t)e * 2);
  return rc;
}
