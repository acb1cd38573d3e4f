/* perf_overlap.h - `kolo-perf overlap`: a simulated data-parallel training
 * step over kolo's fusion API (include/kolo_fusion.h).
 *
 * Models.  The gradients are a real model's parameters (the files in perf/models,
 * perf_models.h), float32, declared to one koloFusion_t in backward order
 * (the model's tensors reversed), as allocator views (KOLO_FUSION_ALLOCATE,
 * the default) or the caller's buffers packed into the fusion buffer
 * (--external).  Backward is those tensors, each after its layer's compute:
 * proportional to its parameter count, summing to --compute-ms per step
 * (default: the measured comm-only time, where overlap matters most).  The
 * compute is a calibrated stand-in (perf_compute.h): `spin` burns the core,
 * `sleep` models an accelerator (the CPU idles), `cuda` is a busy kernel.
 *
 * Each timed round runs four steps, each from a common start (a one-element
 * all-reduce) to the end of koloFusionWait, the slowest rank's:
 *   comm-only     every gradient marked ready at once, then StepEnd + Wait
 *   compute-only  the layers' compute alone
 *   no-overlap    all compute, then every gradient marked ready at once
 *   overlap       MarkReady after each layer's compute
 * Reported: medians over -n rounds (after -w untimed ones), the bound
 * max(compute-only, comm-only) and overlap / bound; the ideal step of the
 * fusion's layout (each all-reduce starting when its bucket -- external: its
 * tensor -- is complete and the one before it is done, at the comm-only
 * rate: what any scheduler could reach, so overlap / ideal is the
 * scheduler's own share of a miss); the copy counters per step
 * (koloFusionGetStats: the allocator path packs 0 bytes, the fusion-buffer
 * path one pack and one unpack per fused all-reduce); then one overlap step
 * on rank-dependent small integers, every element checked (perf_check.h).
 *
 * --small: N tensors of B bytes (1000 x 4 KiB) through the fusion (allocator
 * views, then the fusion buffer) beside one koloAllReduce per tensor, in
 * alternating rounds; medians and separate / fused.
 *
 * Ranks and memory as in the other subcommands (-p, -t, a launcher; -m cuda
 * with kolo_backend's stream for the small calls).  Rank 0 prints.
 */
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
