/* net_bench.h - a provider's small-message latency between two processes,
 * without kolo's engine (transport/net.h alone), for comparing a provider
 * with perftest on the same devices: each process has a send end to the
 * other and a receive end from it, rings of 8 slots, a credit every 6
 * slices (kolo_net_pipe_credit_due, as net pipes), and every slice carries a
 * call signature (as each call's first slice does).
 *   ping-pong: process 0 sends slice i, process 1 sends it back once it
 *              arrived (half the round trip: ib_write_lat's figure);
 *   exchange:  both send slice i at once and wait for the other's (the
 *              pattern of a 2-rank recursive-doubling all-reduce).
 * Process 0 runs in the caller, process 1 in a forked child; each end's
 * device comes from KOLO_TEST_IB_HCA_RANK0 / _RANK1 (KOLO_IB_HCA). */
#ifndef KOLO_TESTS_NET_BENCH_H
#define KOLO_TESTS_NET_BENCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  double p50_us, p99_us, mean_us; /* per iteration; ping-pong: halved */
  int iters;
} kt_bench_lat;

/* 0, or -1 with err filled. */
int kt_net_bench_lat(const char *provider, int exchange, int iters, size_t bytes, kt_bench_lat *out, char *err,
                     size_t errlen);

/* One way: process 0 sends iters slices of `bytes` (at most 1 MiB) with
 * `window` in flight (<= 64), process 1 credits every window / 2, both
 * polling without sleeping (ib_write_bw's way); *mbps: 1e6 bytes per
 * second over the timed slices. */
int kt_net_bench_bw(const char *provider, int iters, size_t bytes, int window, double *mbps, char *err,
                    size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
