/* copy.c - kolo_copy: memcpy, steering clear of REP MOVSB's slow case.
 *
 * glibc copies blocks of 2 KiB up to about the L2 size with REP MOVSB where
 * the CPU says it is fast (ERMS, FSRM), and on some CPUs it is not when the
 * destination sits a few bytes past the source within a 4 KiB page: on the
 * project's AMD EPYC (family 25) VM with glibc 2.36, a 64 KiB memcpy whose
 * dst - src is 1..31 modulo 4096 ran at 2.3 GB/s, against 44-49 GB/s at 0,
 * 32 or 64 (exactly that window; kolo keeps clear of 1..63, a margin for
 * CPUs not measured).  That is the common case, not a corner: a slot on a page
 * boundary copied into a buffer from malloc (16 bytes past one), as an
 * all-gather does.  There a loop of 16-byte loads and stores (SSE2, which
 * every x86-64 has) ran at 41-51 GB/s from 4 to 256 KiB (kolo-memcpy-bw
 * --offset 16).  Elsewhere memcpy is the faster. */
#include "common/copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Below this glibc does not use REP MOVSB; memcpy is never slow there. */
#define COPY_LOOP_MIN_BYTES 2048

int kolo_copy_aliases(const void *dst, const void *src) {
  uintptr_t d = ((uintptr_t)dst - (uintptr_t)src) & 4095u;
  return d >= 1 && d <= KOLO_COPY_ALIAS_MAX;
}

#if defined(__x86_64__)
static void copy_by_vectors(char *restrict d, const char *restrict s, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_storeu_si128((__m128i *)(d + i), a);
    _mm_storeu_si128((__m128i *)(d + i + 16), b);
    _mm_storeu_si128((__m128i *)(d + i + 32), c);
    _mm_storeu_si128((__m128i *)(d + i + 48), e);
  }
  if (i < n) memcpy(d + i, s + i, n - i); /* under 64 bytes: no REP MOVSB */
}
#endif

void kolo_copy(void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
  if (n >= COPY_LOOP_MIN_BYTES && kolo_copy_aliases(dst, src)) {
    copy_by_vectors(dst, src, n);
    return;
  }
#endif
  memcpy(dst, src, n);
}
