/* memcpy_bw.c - kolo-memcpy-bw: the ceiling of a host collective, one core's
 * memcpy rate over the sizes of a kolo-perf sweep (docs/benchmarking.md),
 * beside kolo's own copy (common/copy.h), which steers clear of memcpy's
 * slow case where the destination sits a few bytes past the source within
 * a page: --offset places it there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"
#include "perf/perf_args_opts.h"
#include "perf/perf_ceiling.h"

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP] [--offset BYTES]\n"
          "          [--json FILE]\n"
          "  sizes as kolo-perf (defaults -b 32M -e 32M -f 2, -n 20 -w 5); one core's memcpy rate:\n"
          "  'memcpy' = bytes copied / time, 'read+write' = 2 x that; GB = 1e9; 'kolo copy': the\n"
          "  copy kolo's host data path uses; --offset: the destination starts BYTES (0..4095)\n"
          "  past the source's place in a 4 KiB page (default 0)\n",
          prog);
}

/* kolo-perf's parser, taking its sweep flags alone. */
static const int sweep_flags[] = {'b', 'e', 'i', 'f', 'n', 'w', 'J', OPT_JSON, OPT_OFFSET, 0};
static const perf_sub_flags memcpy_flags = {NULL, sweep_flags, NULL, NULL, NULL, NULL, usage};

static void *kolo_copy_fn(void *dst, const void *src, size_t n) {
  kolo_copy(dst, src, n);
  return dst;
}

static void print_header(const perf_args *o) {
  printf("# kolo-memcpy-bw: one core, memcpy(dst, src, size); warmup iters: %d iters: %d\n", o->warmup, o->iters);
  printf("# memcpy = bytes copied / time; read+write = 2 x bytes copied / time (GB = 1e9)\n");
  printf("# dst - src = %d modulo 4096\n", o->offset);
  printf("# %10s  %9s  %8s  %10s  %9s\n", "size", "time", "memcpy", "read+write", "kolo copy");
  printf("# %10s  %9s  %8s  %10s  %9s\n", "(B)", "(us)", "(GB/s)", "(GB/s)", "(GB/s)");
}

static double gbps(size_t size, double us) { return us > 0 ? (double)size / 1e3 / us : 0; }

static void sweep(const perf_args *o, char *dst, const char *src, FILE *json) {
  size_t size = o->min_bytes;
  do {
    double us = perf_memcpy_time_us(dst, src, size, o->iters, o->warmup);
    double kolo_us = perf_copy_time_us(kolo_copy_fn, dst, src, size, o->iters, o->warmup);
    double g = gbps(size, us), k = gbps(size, kolo_us);
    printf("%12zu  %9.3f  %8.2f  %10.2f  %9.2f\n", size, us, g, 2 * g, k);
    if (json)
      fprintf(json,
              "%s\n    {\"size\": %zu, \"time_us\": %.4f, \"memcpy_gbs\": %.4f, \"rw_gbs\": %.4f, "
              "\"kolo_copy_gbs\": %.4f}",
              size == o->min_bytes ? "" : ",", size, us, g, 2 * g, k);
  } while ((size = perf_next_size(o, size)) != 0);
}

int main(int argc, char **argv) {
  perf_args o;
  int r = perf_args_parse_sub(&o, argc, argv, &memcpy_flags);
  if (r != 0) return r > 0 ? 0 : 2;
  char *src, *dst;
  if (perf_memcpy_buffers(o.max_bytes + 4096, &src, &dst, "kolo-memcpy-bw") != 0) return 2;
  FILE *json = NULL;
  if (o.json && (json = fopen(o.json, "w")) == NULL) {
    perror(o.json);
    return 2;
  }
  if (json)
    fprintf(json,
            "{\n  \"config\": {\"tool\": \"kolo-memcpy-bw\", \"iters\": %d, \"warmup_iters\": %d, \"offset\": %d},\n"
            "  \"results\": [",
            o.iters, o.warmup, o.offset);
  print_header(&o);
  sweep(&o, dst + o.offset, src, json);
  fflush(stdout);
  if (json) {
    fprintf(json, "\n  ]\n}\n");
    if (fclose(json) != 0) perror(o.json);
  }
  free(src);
  free(dst);
  return 0;
}
