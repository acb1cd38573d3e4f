/* perf_overlap_report.c - kolo-perf overlap's header lines (rank 0,
 * perf_overlap_int.h): the run, the fusion's config, the compute kinds and
 * the table's columns. */
#include <unistd.h>

#include "perf/perf_overlap_int.h"

/* "4096 B" (unit " B"), "250 us", or "kolo's default" when not set. */
static void fmt_config(char *buf, size_t len, int set, unsigned long long v, const char *unit) {
  if (set) snprintf(buf, len, "%llu%s", v, unit);
  else snprintf(buf, len, "kolo's default");
}

void ov_print_header(const ov_rank *ov, const perf_config *cfg) {
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

void ov_print_compute_header(const ov_rank *ov, const double *rate_lo, const double *rate_hi) {
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

void ov_print_table_header(FILE *f) {
  fprintf(f, "#\n# %-10s %-5s %-7s %9s %9s %9s %9s %9s %9s %7s %7s %8s\n", "model", "grads", "compute", "set",
          "comm", "compute", "no-ovl", "overlap", "bound", "ovl/bnd", "ovl/bnd", "no-ovl/");
  fprintf(f, "# %-10s %-5s %-7s %9s %9s %9s %9s %9s %9s %7s %7s %8s\n", "", "", "", "(ms)", "(ms)", "(ms)",
          "(ms)", "(ms)", "(ms)", "", "rounds", "overlap");
}

