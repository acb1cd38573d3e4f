/* perf_ceiling.h - one core's memcpy rate: kolo-memcpy-bw's figure, and the
 * busbw ceiling kolo-perf --ceiling memcpy records (docs/perf-json.md). */
#ifndef KOLO_PERF_CEILING_H
#define KOLO_PERF_CEILING_H

#include <stddef.h>

/* Time per memcpy(dst, src, size), in microseconds: warmup untimed copies,
 * then iters timed ones, or as many more as take 1 ms where iters copies
 * are too quick for the clock. */
double perf_memcpy_time_us(char *dst, const char *src, size_t size, int iters, int warmup);

/* The same for another copy with memcpy's signature. */
typedef void *(*perf_copy_fn)(void *, const void *, size_t);
double perf_copy_time_us(perf_copy_fn fn, char *dst, const char *src, size_t size, int iters, int warmup);

/* Two 4 KiB-aligned buffers of `bytes` (4 KiB at least, rounded up), touched;
 * 0, or -1 with "WHO: out of memory ..." said.  The caller frees both. */
int perf_memcpy_buffers(size_t bytes, char **src, char **dst, const char *who);

/* One core's memcpy rate at `bytes` (bytes copied per second, GB = 1e9) on
 * buffers of its own; -1 when they cannot be allocated (message printed). */
double perf_memcpy_gbps(size_t bytes, int iters, int warmup);

#endif
