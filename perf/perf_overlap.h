/* perf_overlap.h - `kolo-perf overlap`: a simulated data-parallel training
 * step over kolo's fusion API (include/kolo_fusion.h); what it runs and
 * reports: docs/benchmarking.md. */
#ifndef KOLO_PERF_OVERLAP_H
#define KOLO_PERF_OVERLAP_H

#include <stdio.h>

#include "perf/kolo_backend.h"
#include "perf/perf_args.h"
#include "perf/perf_report.h"

#define PERF_OVERLAP_MAX_MODELS 8

typedef struct perf_overlap_opts {
  const char *models[PERF_OVERLAP_MAX_MODELS]; /* --model: names or paths */
  int nmodels;
  const char *models_dir;   /* --models DIR */
  unsigned compute_mask;    /* bits of perf_compute_kind (--compute) */
  double compute_ms;        /* --compute-ms; 0: the measured comm-only time */
  int external, small;      /* --external: the fusion-buffer path; --small: the small-tensor test */
  int small_count;          /* --small-count (1000) */
  size_t small_bytes;       /* --small-bytes (4K) */
  /* the fusion's config: --bucket, --first-bucket, --fusion-bytes (KOLO_FUSION_UNDEF_SIZE:
   * kolo's), --cycle-us, --min-buckets (-1: kolo's) */
  size_t bucket_bytes, first_bucket_bytes, fusion_bytes;
  int cycle_us, min_buckets;
} perf_overlap_opts;

/* `kolo-perf overlap [flags]` for perf_args_parse_sub (perf_overlap_args.c): a then
 * carries the options (a->overlap); a->op is PERF_SUM or PERF_AVG (koloSum, koloAvg). */
extern const perf_sub_flags perf_overlap_flags;

/* One rank's part (every rank calls it with its kolo backend; rank 0
 * prints to out).  Returns 0, 1 when some gradient was wrong or a copy
 * counter broke its rule, 2 when a call failed (printed). */
int perf_overlap_run(const perf_args *a, kolo_backend *kb, const perf_backend *be, const perf_config *cfg,
                     const char *where, FILE *out);

#endif
