/* memcpy_bw.c - kolo-memcpy-bw: the ceiling of a host collective, one core's
 * memcpy rate over the sizes of a kolo-perf sweep.
 *
 *   kolo-memcpy-bw [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP] [--json FILE]
 *
 * For each size, memcpy(dst, src, size) runs -w times untimed and -n times
 * timed (more where -n copies take under 1 ms, so that the clock's
 * resolution does not decide small sizes); two columns are printed:
 *   memcpy GB/s     = bytes copied / time  (what `memcpy` benchmarks report)
 *   read+write GB/s = 2 x bytes copied / time  (the memory traffic: every
 *                     byte is read once and written once)
 * GB = 1e9.  Buffers are 4 KiB aligned and touched before timing.
 */
#define _GNU_SOURCE /* getopt_long */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_args.h"
#include "perf/perf_ceiling.h"

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP] [--json FILE]\n"
          "  sizes as kolo-perf (defaults -b 32M -e 32M -f 2, -n 20 -w 5); one core's memcpy rate:\n"
          "  'memcpy' = bytes copied / time, 'read+write' = 2 x that; GB = 1e9\n",
          prog);
}

typedef struct {
  size_t min, max, step, factor;
  int iters, warmup;
  const char *json;
} options;

static int parse(options *o, int argc, char **argv) {
  static const struct option longs[] = {{"minbytes", required_argument, NULL, 'b'},
                                        {"maxbytes", required_argument, NULL, 'e'},
                                        {"stepbytes", required_argument, NULL, 'i'},
                                        {"stepfactor", required_argument, NULL, 'f'},
                                        {"iters", required_argument, NULL, 'n'},
                                        {"warmup_iters", required_argument, NULL, 'w'},
                                        {"json", required_argument, NULL, 'j'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  int c, factor_given = 0, step_given = 0;
  size_t v;
  *o = (options){32u << 20, 32u << 20, 1u << 20, 2, 20, 5, NULL};
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:h", longs, NULL)) != -1) {
    if (c == 'h') {
      usage(stdout, argv[0]);
      return 1;
    }
    if (c == 'j') {
      o->json = optarg;
      continue;
    }
    if (c == '?' || perf_parse_size(optarg, &v) != 0) {
      usage(stderr, argv[0]);
      return -1;
    }
    switch (c) {
      case 'b': o->min = v; break;
      case 'e': o->max = v; break;
      case 'i': o->step = v; step_given = 1; break;
      case 'f': o->factor = v; factor_given = 1; break;
      case 'n': o->iters = (int)v; break;
      default: o->warmup = (int)v; break;
    }
  }
  if (step_given && !factor_given) o->factor = 1;
  if (optind != argc || o->min > o->max || o->iters < 1 || o->factor < 1 || (o->factor == 1 && o->step == 0)) {
    usage(stderr, argv[0]);
    return -1;
  }
  return 0;
}

static size_t next_size(const options *o, size_t size) {
  size_t next = o->factor > 1 ? size * o->factor : size + o->step;
  return (size == 0 && o->factor > 1) || next <= size || next > o->max ? 0 : next;
}

int main(int argc, char **argv) {
  options o;
  int r = parse(&o, argc, argv);
  if (r != 0) return r > 0 ? 0 : 2;
  size_t bytes = o.max < 4096 ? 4096 : (o.max + 4095) & ~(size_t)4095;
  char *src = aligned_alloc(4096, bytes), *dst = aligned_alloc(4096, bytes);
  if (src == NULL || dst == NULL) {
    fprintf(stderr, "kolo-memcpy-bw: out of memory for two %zu-byte buffers\n", bytes);
    return 2;
  }
  memset(src, 1, bytes);
  memset(dst, 0, bytes);
  FILE *json = NULL;
  if (o.json && (json = fopen(o.json, "w")) == NULL) {
    perror(o.json);
    return 2;
  }
  if (json) fprintf(json, "{\n  \"config\": {\"tool\": \"kolo-memcpy-bw\", \"iters\": %d, \"warmup_iters\": %d},\n  \"results\": [", o.iters, o.warmup);
  printf("# kolo-memcpy-bw: one core, memcpy(dst, src, size); warmup iters: %d iters: %d\n", o.warmup, o.iters);
  printf("# memcpy = bytes copied / time; read+write = 2 x bytes copied / time (GB = 1e9)\n");
  printf("# %10s  %9s  %8s  %10s\n", "size", "time", "memcpy", "read+write");
  printf("# %10s  %9s  %8s  %10s\n", "(B)", "(us)", "(GB/s)", "(GB/s)");
  int rows = 0;
  size_t size = o.min;
  do {
    double us = perf_memcpy_time_us(dst, src, size, o.iters, o.warmup);
    double gbs = us > 0 ? (double)size / 1e3 / us : 0;
    printf("%12zu  %9.3f  %8.2f  %10.2f\n", size, us, gbs, 2 * gbs);
    if (json)
      fprintf(json, "%s\n    {\"size\": %zu, \"time_us\": %.4f, \"memcpy_gbs\": %.4f, \"rw_gbs\": %.4f}",
              rows ? "," : "", size, us, gbs, 2 * gbs);
    rows++;
  } while ((size = next_size(&o, size)) != 0);
  fflush(stdout);
  if (json) {
    fprintf(json, "\n  ]\n}\n");
    if (fclose(json) != 0) perror(o.json);
  }
  free(src);
  free(dst);
  return 0;
}
