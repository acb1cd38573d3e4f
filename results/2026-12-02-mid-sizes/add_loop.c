/* add_loop.c - d = a + b over float buffers of BYTES, OFFSET bytes into
 * their pages (d at +OFFSET, b at +2*OFFSET), cycling over RING such
 * buffers: the bandwidth of a reduction from cache on this machine.
 *   cc -O3 -march=native -o /tmp/add_loop add_loop.c && /tmp/add_loop 262144 0 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : 262144;
  size_t off = argc > 2 ? strtoul(argv[2], NULL, 0) : 0, ring = argc > 3 ? strtoul(argv[3], NULL, 0) : 1;
  size_t total = bytes * ring + 8192;
  char *a = aligned_alloc(4096, total), *b = aligned_alloc(4096, total), *d = aligned_alloc(4096, total);
  if (a == NULL || b == NULL || d == NULL || ring == 0 || off > 2048) return 1;
  memset(a, 1, total), memset(b, 1, total), memset(d, 1, total);
  const int iters = 2000;
  double t0 = now();
  for (int k = 0; k < iters; k++) {
    size_t r = (size_t)k % ring * bytes;
    add((float *)(d + r + off), (float *)(a + r), (float *)(b + r + 2 * off), bytes / 4);
  }
  double t = now() - t0;
  printf("%zu bytes, offset %zu, ring %zu: %.2f GB/s of output\n", bytes, off, ring, (double)bytes * iters / t / 1e9);
  free(a), free(b), free(d);
  return 0;
}
