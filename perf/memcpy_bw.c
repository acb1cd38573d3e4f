/* memcpy_bw.c - kolo-memcpy-bw: the ceiling of a host collective, one core's
 * memcpy rate over the sizes of a kolo-perf sweep (docs/benchmarking.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_args_opts.h"
#include "perf/perf_ceiling.h"

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP] [--json FILE]\n"
          "  sizes as kolo-perf (defaults -b 32M -e 32M -f 2, -n 20 -w 5); one core's memcpy rate:\n"
          "  'memcpy' = bytes copied / time, 'read+write' = 2 x that; GB = 1e9\n",
          prog);
}

/* kolo-perf's parser, taking its sweep flags alone. */
static const int sweep_flags[] = {'b', 'e', 'i', 'f', 'n', 'w', 'J', OPT_JSON, 0};
static const perf_sub_flags memcpy_flags = {NULL, sweep_flags, NULL, NULL, NULL, NULL, usage};

int main(int argc, char **argv) {
  perf_args o;
  int r = perf_args_parse_sub(&o, argc, argv, &memcpy_flags);
  if (r != 0) return r > 0 ? 0 : 2;
  char *src, *dst;
  if (perf_memcpy_buffers(o.max_bytes, &src, &dst, "kolo-memcpy-bw") != 0) return 2;
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
  size_t size = o.min_bytes;
  do {
    double us = perf_memcpy_time_us(dst, src, size, o.iters, o.warmup);
    double gbs = us > 0 ? (double)size / 1e3 / us : 0;
    printf("%12zu  %9.3f  %8.2f  %10.2f\n", size, us, gbs, 2 * gbs);
    if (json)
      fprintf(json, "%s\n    {\"size\": %zu, \"time_us\": %.4f, \"memcpy_gbs\": %.4f, \"rw_gbs\": %.4f}",
              size == o.min_bytes ? "" : ",", size, us, gbs, 2 * gbs);
  } while ((size = perf_next_size(&o, size)) != 0);
  fflush(stdout);
  if (json) {
    fprintf(json, "\n  ]\n}\n");
    if (fclose(json) != 0) perror(o.json);
  }
  free(src);
  free(dst);
  return 0;
}
