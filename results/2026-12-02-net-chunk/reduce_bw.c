/* reduce_bw.c - kolo's host reduction (kolo_host_reduce, float32 sum) beside
 * a plain d = a + b loop over BYTES, OFFSET bytes into the page, cycling over
 * RING buffers; 3 times each, GB/s of output.  From the repository root:
 *   cc -O3 -march=native -I. -Iinclude -Ibuild-net/include results/2026-12-02-net-chunk/reduce_bw.c \
 *     -o /tmp/reduce_bw build-net/lib/libkolo_static.a -lpthread -lm -ldl
 *   /tmp/reduce_bw 262144 0 1; /tmp/reduce_bw 262144 0 8 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/host_reduce.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void add(float *restrict d, const float *restrict a, const float *restrict b,
                                          size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  size_t bytes = strtoul(argv[1], NULL, 0), off = strtoul(argv[2], NULL, 0), ring = strtoul(argv[3], NULL, 0);
  size_t total = bytes * ring + 8192;
  char *a = aligned_alloc(4096, total), *b = aligned_alloc(4096, total), *d = aligned_alloc(4096, total);
  if (a == NULL || b == NULL || d == NULL || ring == 0 || off > 2048) return 1;
  memset(a, 1, total), memset(b, 1, total), memset(d, 1, total);
  const int iters = 2000;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now();
    for (int k = 0; k < iters; k++) {
      size_t r = (size_t)k % ring * bytes;
      kolo_host_reduce(d + r + off, NULL, a + r, b + r + 2 * off, bytes / 4, koloFloat32, koloSum, 1);
    }
    double t1 = now();
    for (int k = 0; k < iters; k++) {
      size_t r = (size_t)k % ring * bytes;
      add((float *)(d + r + off), (float *)(a + r), (float *)(b + r + 2 * off), bytes / 4);
    }
    double t2 = now();
    printf("%zu B, offset %zu, ring %zu: kolo %.2f GB/s, plain loop %.2f GB/s\n", bytes, off, ring,
           (double)bytes * iters / (t1 - t0) / 1e9, (double)bytes * iters / (t2 - t1) / 1e9);
  }
  free(a), free(b), free(d);
  return 0;
}
