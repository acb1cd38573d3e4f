/* perf_overlap_small.c - kolo-perf overlap --small (perf_overlap_int.h): N
 * tensors of B bytes through the fusion (allocator views, then the fusion
 * buffer) beside one koloAllReduce per tensor, in alternating rounds. */
#include <stdlib.h>

#include "perf/perf_overlap_int.h"

/* One koloAllReduce per gradient, in place, complete on return. */
static int separate(const ov_rank *ov, ov_grads *g) {
  kolo_backend *kb = ov->kb;
  for (int b = 0; b < g->n; b++) {
    koloResult_t res = koloAllReduce(g->ptr[b], g->ptr[b], g->count[b], koloFloat32, (koloRedOp_t)ov->a->op,
                                     kb->comm, kb->stream);
    if (res != koloSuccess) {
      kolo_backend_report(ov->rank, kb->comm, res, "koloAllReduce (one tensor)");
      return -1;
    }
  }
  return ov->be->wait ? ov->be->wait(ov->be->ctx) : 0;
}

static int separate_step(ov_rank *ov, ov_grads *g, double *us) {
  if (ov_grads_refresh(ov, g) != 0 || ov_start_together(ov) != 0) return -1;
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
  return ov_run_step(ov, g, NULL, K_COMM, &us);
}

/* Rounds of (fused, separate); t[i * 2 + 0 / 1]. */
static int small_rounds(ov_rank *ov, ov_grads *g, int n, double *t) {
  for (int i = 0; i < n; i++)
    if (ov_run_step(ov, g, NULL, K_COMM, &t[2 * i]) != 0 || separate_step(ov, g, &t[2 * i + 1]) != 0) return -1;
  return ov_max_over_ranks(ov, t, 2 * n);
}

static int small_path(ov_rank *ov, int external, const size_t *count, const size_t *first, uint64_t seed) {
  int n = ov->a->iters, w = ov->a->warmup, ntensors = ov->o->small_count;
  ov_grads g;
  koloFusionStats_t s0, s1;
  double *t = malloc((size_t)(n > w ? n : w) * 2 * sizeof *t);
  if (t == NULL) return -1;
  int rc = ov_grads_init(ov, &g, count, first, ntensors, external);
  if (rc == 0 && w > 0) rc = small_rounds(ov, &g, w, t);
  if (rc == 0) rc = ov_stats(ov, &g, &s0);
  if (rc == 0) rc = small_rounds(ov, &g, n, t);
  if (rc == 0) rc = ov_stats(ov, &g, &s1);
  double fused = rc == 0 ? ov_median_col(t, n, 2, 0) : 0, sep = rc == 0 ? ov_median_col(t, n, 2, 1) : 0;
  free(t);
  uint64_t wf = 0, ws = 0;
  if (rc == 0 && ov->a->check) rc = ov_check_step(ov, &g, seed, fused_once, NULL, &wf);
  if (rc == 0 && ov->a->check) rc = ov_check_step(ov, &g, seed + 1, separate_once, NULL, &ws);
  if (rc == 0 && ov->out)
    fprintf(ov->out, "  %-9s %7d %7zu %11.1f %12.1f %9.2f %7llu %8llu\n", external ? "external" : "allocate",
            ntensors, ov->o->small_bytes, fused, sep, sep / fused,
            (unsigned long long)wf, (unsigned long long)ws);
  if (rc == 0) rc = ov_copy_rule(ov, &g, &s0, &s1, n, external ? "(small, ext)" : "(small, alloc)");
  ov_grads_fini(ov, &g);
  return rc;
}

int ov_run_small(ov_rank *ov) {
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

