/* perf_overlap_small.c - kolo-perf overlap --small (perf_overlap_int.h): N tensors
 * of B bytes through the fusion beside one koloAllReduce per tensor. */
#include <stdlib.h>

#include "perf/perf_overlap_int.h"

static int small_path(ov_rank *ov, int external, uint64_t seed) {
  static const int kinds[2] = {K_COMM, K_SEPARATE}; /* rounds of (fused, separate) */
  int n = ov->a->iters, ntensors = ov->o->small_count;
  size_t elems = ov->o->small_bytes / 4;
  ov_grads g;
  koloFusionStats_t s[2];
  double *t = NULL;
  uint64_t wf = 0, ws = 0;
  int rc = ov_grads_alloc(&g, ntensors, external);
  for (int b = 0; rc == 0 && b < ntensors; b++) {
    g.t[b].count = elems;
    g.t[b].first = (size_t)b * elems;
  }
  if (rc == 0) rc = ov_grads_init(ov, &g);
  if (rc == 0) rc = ov_measure(ov, &g, NULL, kinds, 2, kinds, 2, &t, s);
  double fused = rc == 0 ? ov_median_col(t, n, 2, 0) : 0, sep = rc == 0 ? ov_median_col(t, n, 2, 1) : 0;
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
