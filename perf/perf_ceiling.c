/* perf_ceiling.c - one core's memcpy rate (see perf_ceiling.h). */
#include "perf/perf_ceiling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_sweep.h"

double perf_memcpy_time_us(char *dst, const char *src, size_t size, int iters, int warmup) {
  return perf_copy_time_us(memcpy, dst, src, size, iters, warmup);
}

double perf_copy_time_us(perf_copy_fn fn, char *dst, const char *src, size_t size, int iters, int warmup) {
  void *(*volatile copy)(void *, const void *, size_t) = fn; /* so that no copy is optimized away */
  for (int i = 0; i < warmup; i++) copy(dst, src, size);
  long n = iters;
  for (;;) {
    double t0 = perf_now_us();
    for (long i = 0; i < n; i++) copy(dst, src, size);
    double t = perf_now_us() - t0;
    if (t >= 1000.0 || n >= (1L << 30)) return t / (double)n;
    n = t > 1.0 ? (long)((double)n * 1100.0 / t) + 1 : n * 1000;
  }
}

int perf_memcpy_buffers(size_t bytes, char **src, char **dst, const char *who) {
  size_t b = bytes < 4096 ? 4096 : (bytes + 4095) & ~(size_t)4095;
  *src = aligned_alloc(4096, b);
  *dst = aligned_alloc(4096, b);
  if (*src == NULL || *dst == NULL) {
    fprintf(stderr, "%s: out of memory for two %zu-byte buffers\n", who, b);
    return -1;
  }
  memset(*src, 1, b); /* page faults outside the timed copies */
  memset(*dst, 0, b);
  return 0;
}

double perf_memcpy_gbps(size_t bytes, int iters, int warmup) {
  char *src, *dst;
  double us = -1; /* -1: no buffers */
  if (perf_memcpy_buffers(bytes, &src, &dst, "kolo-perf: --ceiling memcpy") == 0)
    us = perf_memcpy_time_us(dst, src, bytes, iters, warmup);
  free(src);
  free(dst);
  return us < 0 ? -1 : us > 0 ? (double)bytes / 1e3 / us : 0;
}
