/* rep_movsb.c - how fast REP MOVSB and glibc's memcpy copy, by the distance
 * of the destination past the source modulo 4 KiB; and a loop of SSE2 moves
 * beside them.  gcc -O2 -fno-builtin rep_movsb.c -o rep_movsb && ./rep_movsb
 * Best of many runs per cell; buffers touched first. */
#include <emmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void rep_movsb(void *d, const void *s, size_t n) {
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void sse_copy(void *d0, const void *s0, size_t n) {
  char *d = d0;
  const char *s = s0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) { /* as common/copy.c: four loads, then four stores */
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i)), b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32)), e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_storeu_si128((__m128i *)(d + i), a);
    _mm_storeu_si128((__m128i *)(d + i + 16), b);
    _mm_storeu_si128((__m128i *)(d + i + 32), c);
    _mm_storeu_si128((__m128i *)(d + i + 48), e);
  }
  memcpy(d + i, s + i, n - i);
}

typedef void (*copy_fn)(void *, const void *, size_t);
static void glibc(void *d, const void *s, size_t n) { memcpy(d, s, n); }

static double gbps(copy_fn f, char *d, const char *s, size_t n) {
  double best = 1e9;
  for (int r = 0; r < 300; r++) {
    double t = now();
    f(d, s, n);
    t = now() - t;
    if (t < best) best = t;
  }
  return (double)n / best / 1e9;
}

int main(void) {
  char *s = aligned_alloc(1 << 21, 1 << 23), *d = aligned_alloc(1 << 21, 1 << 23);
  memset(s, 1, 1 << 23);
  memset(d, 2, 1 << 23);
  printf("# REP MOVSB, 64 KiB, GB/s by dst - src (source 512 bytes past a page)\n");
  for (int delta = -4; delta <= 68; delta++) printf("%d %.1f\n", delta, gbps(rep_movsb, d + 512 + delta, s + 512, 65536));
  printf("# size: memcpy / SSE2 loop GB/s at dst - src = 0, 16, 64\n");
  const size_t sizes[] = {1024, 2048, 3072, 4096, 65536, 262144, 524288, 1 << 20, 4 << 20};
  for (int k = 0; k < 9; k++) {
    printf("%zu", sizes[k]);
    const int ds[] = {0, 16, 64};
    for (int j = 0; j < 3; j++)
      printf("  %.1f / %.1f", gbps(glibc, d + 512 + ds[j], s + 512, sizes[k]), gbps(sse_copy, d + 512 + ds[j], s + 512, sizes[k]));
    printf("\n");
  }
  return 0;
}
