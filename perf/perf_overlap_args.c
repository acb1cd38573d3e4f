/* perf_overlap_args.c - the command line of kolo-perf overlap (see
 * perf_overlap.h). */
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kolo.h"
#include "kolo_fusion.h"
#include "perf/perf_compute.h"
#include "perf/perf_overlap.h"

static perf_overlap_opts opts;   /* what a->overlap points at */
static char model_list[1024];    /* --model's copy, split in place */

enum {
  O_MODEL = 1000, O_MODELS, O_COMPUTE, O_COMPUTE_MS, O_EXTERNAL, O_OP, O_SMALL, O_SMALL_COUNT,
  O_SMALL_BYTES, O_BUCKET, O_FIRST_BUCKET, O_FUSION_BYTES, O_CYCLE_US, O_MIN_BUCKETS, O_MEM, O_DEVICES
};

static const struct option long_opts[] = {
    {"model", required_argument, NULL, O_MODEL},
    {"models", required_argument, NULL, O_MODELS},
    {"compute", required_argument, NULL, O_COMPUTE},
    {"compute-ms", required_argument, NULL, O_COMPUTE_MS},
    {"external", no_argument, NULL, O_EXTERNAL},
    {"op", required_argument, NULL, O_OP},
    {"small", no_argument, NULL, O_SMALL},
    {"small-count", required_argument, NULL, O_SMALL_COUNT},
    {"small-bytes", required_argument, NULL, O_SMALL_BYTES},
    {"bucket", required_argument, NULL, O_BUCKET},
    {"first-bucket", required_argument, NULL, O_FIRST_BUCKET},
    {"fusion-bytes", required_argument, NULL, O_FUSION_BYTES},
    {"cycle-us", required_argument, NULL, O_CYCLE_US},
    {"min-buckets", required_argument, NULL, O_MIN_BUCKETS},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"check", required_argument, NULL, 'c'},
    {"procs", required_argument, NULL, 'P'},
    {"threads", required_argument, NULL, 't'},
    {"nthreads", required_argument, NULL, 't'},
    {"mem", required_argument, NULL, O_MEM},
    {"devices", required_argument, NULL, O_DEVICES},
    {"gpu", required_argument, NULL, O_DEVICES},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

void perf_overlap_usage(FILE *out, const char *prog) {
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
          "      --op sum|avg      the reduction (default avg)\n"
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
  if (strlen(v) >= sizeof model_list) return -1;
  strcpy(model_list, v);
  opts.nmodels = 0;
  char *save = NULL;
  for (char *t = strtok_r(model_list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (opts.nmodels == PERF_OVERLAP_MAX_MODELS) return -1;
    opts.models[opts.nmodels++] = t;
  }
  return opts.nmodels > 0 ? 0 : -1;
}

static int parse_compute(const char *v) {
  if (strcmp(v, "spin") == 0) opts.compute_mask = 1u << PERF_COMPUTE_SPIN;
  else if (strcmp(v, "sleep") == 0) opts.compute_mask = 1u << PERF_COMPUTE_SLEEP;
  else if (strcmp(v, "both") == 0) opts.compute_mask = 1u << PERF_COMPUTE_SPIN | 1u << PERF_COMPUTE_SLEEP;
  else if (strcmp(v, "cuda") == 0) opts.compute_mask = 1u << PERF_COMPUTE_CUDA;
  else return -1;
  return 0;
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

/* One option; 0 or -1 for a bad value. */
static int apply(perf_args *a, int c, const char *v) {
  switch (c) {
    case O_MODEL: return parse_models(v);
    case O_MODELS: opts.models_dir = v; return 0;
    case O_COMPUTE: return parse_compute(v);
    case O_COMPUTE_MS: return parse_ms(v, &opts.compute_ms);
    case O_EXTERNAL: opts.external = 1; return 0;
    case O_OP:
      if (strcmp(v, "sum") == 0) opts.op = koloSum;
      else if (strcmp(v, "avg") == 0) opts.op = koloAvg;
      else return -1;
      return 0;
    case O_SMALL: opts.small = 1; return 0;
    case O_SMALL_COUNT: return perf_parse_int(v, 1, 1 << 20, &opts.small_count);
    case O_SMALL_BYTES: return parse_bytes(v, &opts.small_bytes) == 0 && opts.small_bytes % 4 == 0 ? 0 : -1;
    case O_BUCKET: return parse_bytes(v, &opts.bucket_bytes);
    case O_FIRST_BUCKET: return parse_bytes(v, &opts.first_bucket_bytes);
    case O_FUSION_BYTES: return parse_bytes(v, &opts.fusion_bytes);
    case O_CYCLE_US: return perf_parse_int(v, 1, 10000000, &opts.cycle_us);
    case O_MIN_BUCKETS: return perf_parse_int(v, 1, 1 << 20, &opts.min_buckets);
    case 'n': return perf_parse_int(v, 1, 1 << 20, &a->iters);
    case 'w': return perf_parse_int(v, 0, 1 << 20, &a->warmup);
    case 'c': return perf_parse_int(v, 0, 1, &a->check);
    case 'P': a->procs_given = 1; return perf_parse_int(v, 1, 4096, &a->procs);
    case 't': return perf_parse_int(v, 1, 4096, &a->threads);
    case O_DEVICES: return perf_parse_devices(a, v);
    case O_MEM:
      if (strcmp(v, "host") != 0 && strcmp(v, "cuda") != 0) return -1;
      a->mem_cuda = strcmp(v, "cuda") == 0;
      return 0;
    default: return -1;
  }
}

static void set_defaults(perf_args *a) {
  memset(a, 0, sizeof *a);
  a->coll = PERF_NUM_COLLS;
  a->iters = 20;
  a->warmup = 3;
  a->check = 1;
  a->type = PERF_FLOAT32;
  a->op = PERF_AVG;
  a->procs = a->threads = a->gpus_per_thread = 1;
  a->agg_iters = a->run_cycles = 1;
  memset(&opts, 0, sizeof opts);
  opts.models[0] = "resnet50";
  opts.models[1] = "bert-base";
  opts.nmodels = 2;
  opts.op = koloAvg;
  opts.small_count = 1000;
  opts.small_bytes = 4096;
  opts.bucket_bytes = opts.first_bucket_bytes = opts.fusion_bytes = KOLO_FUSION_UNDEF_SIZE;
  opts.cycle_us = -1;
  opts.min_buckets = -1;
}

/* The compute kinds that go with the memory kind. */
static int check_compute(perf_args *a, const char *prog, int given) {
  unsigned cuda = 1u << PERF_COMPUTE_CUDA;
  if (!given) {
    opts.compute_mask = a->mem_cuda ? cuda : (1u << PERF_COMPUTE_SPIN | 1u << PERF_COMPUTE_SLEEP);
    return 0;
  }
  if (a->mem_cuda && opts.compute_mask != cuda) {
    fprintf(stderr, "%s overlap: with --mem cuda the compute is the busy kernel (--compute cuda)\n", prog);
    return -1;
  }
  if (!a->mem_cuda && opts.compute_mask == cuda) {
    fprintf(stderr, "%s overlap: --compute cuda needs --mem cuda\n", prog);
    return -1;
  }
  return 0;
}

int perf_overlap_parse(perf_args *a, int argc, char **argv) {
  const char *prog = argc > 0 ? argv[0] : "kolo-perf";
  int c, compute_given = 0;
  set_defaults(a);
  opterr = 0;
  optind = 2; /* past "overlap" */
  while ((c = getopt_long(argc, argv, ":n:w:c:P:t:h", long_opts, NULL)) != -1) {
    if (c == 'h') {
      perf_overlap_usage(stdout, prog);
      return 1;
    }
    if (c == ':' || c == '?') {
      fprintf(stderr, "%s overlap: %s option %s\n", prog, c == ':' ? "missing value for" : "unknown",
              argv[optind - 1]);
      perf_overlap_usage(stderr, prog);
      return -1;
    }
    compute_given |= c == O_COMPUTE;
    if (apply(a, c, optarg) != 0) {
      const char *name = "?";
      for (const struct option *o = long_opts; o->name; o++)
        if (o->val == c) name = o->name;
      fprintf(stderr, "%s overlap: bad value '%s' for --%s\n", prog, optarg ? optarg : "", name);
      return -1;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "%s overlap: unexpected argument '%s'\n", prog, argv[optind]);
    return -1;
  }
  if (check_compute(a, prog, compute_given) != 0) return -1;
  if (a->ndevs > 0 && !a->mem_cuda) {
    fprintf(stderr, "%s overlap: --devices needs --mem cuda\n", prog);
    return -1;
  }
  a->overlap = &opts;
  return 0;
}
