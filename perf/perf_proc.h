/* perf_proc.h - what a process holds, from /proc/self (Linux): its open
 * descriptors and resident memory, for the bootstrap's scale figures
 * (kolo-boot-scale and its MPI twin), and the summary both print. */
#ifndef KOLO_PERF_PROC_H
#define KOLO_PERF_PROC_H

#include <stddef.h>
#include <stdint.h>

/* Descriptors open now (entries of /proc/self/fd, less the one reading it);
 * -1 when /proc cannot tell. */
int perf_proc_fds(void);
/* Resident set size in KiB (VmRSS), -1 when unknown. */
int64_t perf_proc_rss_kib(void);

/* What one rank measured after init and a checked all-reduce. */
typedef struct {
  int32_t rank, ok;     /* ok: init and the all-reduce succeeded, the sum was right */
  int32_t fds, links;   /* links: bootstrap connections to other ranks (-1: not known) */
  int64_t rss_kib, init_us;
  int64_t pipe_kib;     /* slots and control blocks of the rank's pipes (-1: not known) */
} perf_rank_stat;

/* "fds 12/14 rss_mib 9.1/9.4 links 15/15 init_ms 480/1100 pipes_mib 2.0/2.0"
 * (median/max; pipes_mib only where known) of n records into buf; the
 * number that failed into *failed. */
void perf_proc_summary(const perf_rank_stat *s, int n, char *buf, int len, int *failed);

/* Monotonic clock in microseconds. */
int64_t perf_proc_now_us(void);

/* The checked all-to-all of the scale runs: rank `from`'s block for rank
 * `to` holds count int32 values that name both and the index (exact).
 * xchg runs the all-to-all of count values per peer (0 on success, or
 * non-zero having said why).  1 when every block came back right. */
typedef int (*perf_a2a_fn)(const int32_t *in, int32_t *out, size_t count, int rank, void *ctx);
int perf_a2a_checked(int rank, int n, size_t bytes_per_peer, perf_a2a_fn xchg, void *ctx);

#endif
