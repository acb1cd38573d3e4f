/* perf_overlap_args.c - the flags of kolo-perf overlap (see perf_overlap.h):
 * its own, and which of the shared parser's it takes (perf_args.c). */
#define _GNU_SOURCE /* getopt_long's struct option */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kolo_fusion.h"
#include "perf/perf_args_opts.h"
#include "perf/perf_compute.h"
#include "perf/perf_overlap.h"

static perf_overlap_opts opts;   /* what a->overlap points at */
static char model_list[1024];    /* --model's copy, split in place */

enum {
  O_MODEL = PERF_SUB_OPT, O_MODELS, O_COMPUTE, O_COMPUTE_MS, O_EXTERNAL, O_SMALL, O_SMALL_COUNT, O_SMALL_BYTES,
  O_BUCKET, O_FIRST_BUCKET, O_FUSION_BYTES, O_CYCLE_US, O_MIN_BUCKETS
};

static const struct option long_opts[] = {
    {"model", required_argument, NULL, O_MODEL},             {"models", required_argument, NULL, O_MODELS},
    {"compute", required_argument, NULL, O_COMPUTE},         {"compute-ms", required_argument, NULL, O_COMPUTE_MS},
    {"external", no_argument, NULL, O_EXTERNAL},             {"small", no_argument, NULL, O_SMALL},
    {"small-count", required_argument, NULL, O_SMALL_COUNT}, {"small-bytes", required_argument, NULL, O_SMALL_BYTES},
    {"bucket", required_argument, NULL, O_BUCKET},           {"first-bucket", required_argument, NULL, O_FIRST_BUCKET},
    {"fusion-bytes", required_argument, NULL, O_FUSION_BYTES}, {"cycle-us", required_argument, NULL, O_CYCLE_US},
    {"min-buckets", required_argument, NULL, O_MIN_BUCKETS},   {NULL, 0, NULL, 0}};

static const int shared[] = {'n', 'w', 'c', 'P', 't', 'o', OPT_MEM, OPT_DEVICES, 0};

static void usage(FILE *out, const char *prog) {
  fprintf(out,
          "usage: %s overlap [flags]\n"
          "  a simulated training step: the gradients of real models all-reduced through kolo's\n"
          "  fusion API while a calibrated backward pass produces them\n"
          "      --model LIST      model names (files in the models directory) or paths, comma-\n"
          "                        separated (default resnet50,bert-base)\n"
          "      --models DIR      the models directory (default: $KOLO_PERF_MODELS, else the\n"
          "                        installed share/kolo/models, else the source tree's\n"
          "                        perf/models)\n"
          "      --compute K       spin (a calibrated loop that burns the core), sleep (an\n"
          "                        accelerator stand-in: the CPU idles) or both (default both);\n"
          "                        with --mem cuda: cuda (a calibrated busy kernel), the only one\n"
          "      --compute-ms MS   compute per step, spread over the layers by parameter count\n"
          "                        (default: the measured comm-only step time)\n"
          "      --external        gradients in the caller's buffers (KOLO_FUSION_EXTERNAL: the\n"
          "                        fusion buffer's pack / unpack) instead of allocator views\n"
          "  -o, --op sum|avg      the reduction (default avg)\n"
          "      --small           instead of the models: N tensors of B bytes fused vs one\n"
          "                        koloAllReduce per tensor\n"
          "      --small-count N   tensors of --small (default 1000)\n"
          "      --small-bytes B   bytes per tensor of --small (default 4K; a multiple of 4)\n"
          "      --bucket B, --first-bucket B, --fusion-bytes B, --cycle-us US, --min-buckets N\n"
          "                        the fusion's config (default: kolo's, or KOLO_FUSION_*)\n"
          "  -n, --iters N         timed rounds (default 20)\n"
          "  -w, --warmup_iters N  untimed rounds first (default 3)\n"
          "  -c, --check 0|1       check every gradient element after the timed rounds (default 1)\n"
          "  -P N, -t N, --mem K, --devices LIST\n"
          "                        ranks and memory, as for the collectives (`kolo-perf --help`)\n"
          "  -h, --help            this text\n",
          prog);
}

static int parse_models(const char *v) {
  if (snprintf(model_list, sizeof model_list, "%s", v) >= (int)sizeof model_list) return -1; /* too long */
  opts.nmodels = 0;
  char *save = NULL;
  for (char *t = strtok_r(model_list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (opts.nmodels == PERF_OVERLAP_MAX_MODELS) return -1;
    opts.models[opts.nmodels++] = t;
  }
  return opts.nmodels > 0 ? 0 : -1;
}

/* The bits of opts.compute_mask; a mask of 0 means --compute was not given. */
enum { C_SPIN = 1 << PERF_COMPUTE_SPIN, C_SLEEP = 1 << PERF_COMPUTE_SLEEP, C_CUDA = 1 << PERF_COMPUTE_CUDA };

static int parse_compute(const char *v) {
  static const unsigned masks[] = {C_SPIN, C_SLEEP, C_SPIN | C_SLEEP, C_CUDA};
  int i = perf_parse_name(v, (const char *const[]){"spin", "sleep", "both", "cuda"}, 4);
  if (i >= 0) opts.compute_mask = masks[i];
  return i >= 0 ? 0 : -1;
}

static int parse_ms(const char *v, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !(d > 0) || d > 1e7) return -1;
  *out = d;
  return 0;
}

static int parse_bytes(const char *v, size_t *out) {
  return perf_parse_size(v, out) == 0 && *out > 0 ? 0 : -1;
}

/* One of overlap's own flags; 0 or -1 for a bad value. */
static int apply(perf_args *a, int c, const char *v) {
  (void)a;
  switch (c) {
    case O_MODEL: return parse_models(v);
    case O_MODELS: opts.models_dir = v; return 0;
    case O_COMPUTE: return parse_compute(v);
    case O_COMPUTE_MS: return parse_ms(v, &opts.compute_ms);
    case O_EXTERNAL: opts.external = 1; return 0;
    case O_SMALL: opts.small = 1; return 0;
    case O_SMALL_COUNT: return perf_parse_int(v, 1, 1 << 20, &opts.small_count);
    case O_SMALL_BYTES: return parse_bytes(v, &opts.small_bytes) == 0 && opts.small_bytes % 4 == 0 ? 0 : -1;
    case O_BUCKET: return parse_bytes(v, &opts.bucket_bytes);
    case O_FIRST_BUCKET: return parse_bytes(v, &opts.first_bucket_bytes);
    case O_FUSION_BYTES: return parse_bytes(v, &opts.fusion_bytes);
    case O_CYCLE_US: return perf_parse_int(v, 1, 10000000, &opts.cycle_us);
    default: return perf_parse_int(v, 1, 1 << 20, &opts.min_buckets); /* O_MIN_BUCKETS */
  }
}

static void defaults(perf_args *a) {
  a->warmup = 3;
  a->op = PERF_AVG;
  opts = (perf_overlap_opts){.models = {"resnet50", "bert-base"}, .nmodels = 2, .small_count = 1000,
                             .small_bytes = 4096, .bucket_bytes = KOLO_FUSION_UNDEF_SIZE,
                             .first_bucket_bytes = KOLO_FUSION_UNDEF_SIZE, .fusion_bytes = KOLO_FUSION_UNDEF_SIZE,
                             .cycle_us = -1, .min_buckets = -1};
  a->overlap = &opts;
}

/* -c and --op as overlap has them; the compute kinds that go with the memory kind. */
static int check(perf_args *a, const char *prog) {
  const char *why = NULL;
  if (a->check > 1) why = "-c takes 0 or 1";
  else if (a->op != PERF_SUM && a->op != PERF_AVG) why = "--op takes sum or avg";
  else if (opts.compute_mask == 0) opts.compute_mask = a->mem_cuda ? C_CUDA : C_SPIN | C_SLEEP;
  else if (a->mem_cuda && opts.compute_mask != C_CUDA)
    why = "with --mem cuda the compute is the busy kernel (--compute cuda)";
  else if (!a->mem_cuda && opts.compute_mask == C_CUDA) why = "--compute cuda needs --mem cuda";
  if (why) fprintf(stderr, "%s overlap: %s\n", prog, why);
  return why ? -1 : 0;
}

const perf_sub_flags perf_overlap_flags = {"overlap", shared, long_opts, defaults, apply, check, usage};
