/* perf_sweep.h - one rank's part of a benchmark sweep, over any library.
 *
 * A library is a small ops table (kolo, MPI); the sweep owns everything else:
 * the sizes, the buffers' layout for each collective and placement, the check
 * data, the timing and the report.  Every rank of the job calls
 * perf_sweep_run with its own backend; rank 0 prints.
 *
 * Each op returns 0 on success; on failure it has printed what went wrong
 * (naming the rank and the call) and returns non-zero, and the sweep stops.
 */
#ifndef KOLO_PERF_SWEEP_H
#define KOLO_PERF_SWEEP_H

#include <stddef.h>

#include "perf/perf_args.h"
#include "perf/perf_report.h"

/* One call of the collective under test, with its arguments as the API takes them. */
typedef struct {
  perf_coll coll;
  const void *send;
  void *recv;
  size_t count; /* AR, bcast, reduce, sendrecv: elements; RS: recvcount; AG: sendcount */
  perf_type type;
  perf_op op;
  int root;
  int send_peer, recv_peer; /* sendrecv */
  int in_place;             /* send and recv overlap as the API's in-place rule says */
} perf_call;

typedef struct {
  void *ctx;
  int rank, nranks;
  /* In place, reduce-scatter leaves the result at the buffer's start (MPI's
   * rule) rather than at rank * recvcount (NCCL's and kolo's). */
  int rs_result_at_start;
  int (*run)(void *ctx, const perf_call *call);
  /* -m: the calls of one iteration between these (NULL: no groups, the
   * calls go back to back). */
  int (*group_start)(void *ctx);
  int (*group_end)(void *ctx);
  /* -T: the row of `bytes` starts (bytes > 0) or has ended (0); NULL: no watch. */
  void (*row_mark)(void *ctx, size_t bytes);
  /* The calls issued so far have completed (a stream sync); NULL when calls block. */
  int (*wait)(void *ctx);
  /* v[0..n) becomes the sum (max == 0) or the maximum over ranks, on every rank. */
  int (*allreduce_double)(void *ctx, double *v, int n, int max);
  /* all[r * bytes ..] = rank r's `mine`, on every rank. */
  int (*allgather_bytes)(void *ctx, const void *mine, void *all, size_t bytes);
  /* Buffers of the memory kind under test; NULL on failure (message printed). */
  void *(*alloc)(void *ctx, size_t bytes);
  void (*release)(void *ctx, void *p);
  /* Copies to (to_dev) or from a buffer of alloc; NULL when buffers are host memory. */
  int (*copy)(void *ctx, void *dst, const void *src, size_t bytes, int to_dev);

  /* Device timing; NULL where calls block (host memory): the sweep then
   * times with the wall clock alone.  time_start marks the start of the
   * timed calls on the calls' stream; time_stop marks their end, waits for
   * it and sets *us to the device time between the two marks. */
  int (*time_start)(void *ctx);
  int (*time_stop)(void *ctx, double *us);
  /* CUDA graphs (--graph; NULL: none).  capture_begin starts capturing the
   * calls that run() issues; capture_end(ctx, discard) ends the capture and,
   * unless discard, makes the graph ready to launch; graph_launch enqueues
   * it (without waiting); graph_free drops it (no-op without one). */
  int (*capture_begin)(void *ctx);
  int (*capture_end)(void *ctx, int discard);
  int (*graph_launch)(void *ctx);
  void (*graph_free)(void *ctx);
} perf_backend;

/* Monotonic clock in microseconds (perf_timing.c). */
double perf_now_us(void);
/* Sorts v[0..n) ascending, for medians and percentiles (perf_timing.c). */
void perf_sort_doubles(double *v, size_t n);
/* The median of v[0..n) as the tune takes it, v[n / 2] once sorted (v is
 * sorted in place); n > 0. */
double perf_median_in_place(double *v, size_t n);

/* Every rank's pid, host and `where`, gathered and printed by the rank
 * whose out is not NULL under "# Using devices"; Group numbers the
 * processes in rank order.  0, or non-zero on failure (every rank). */
int perf_print_ranks(const perf_backend *be, FILE *out, const char *where);

/* Runs the sweep `a` on this rank.  Rank 0 prints to `out` with `cfg` and the
 * rank lines, each rank describing itself with `where` (e.g. "memory host").
 * Returns 0 when every call succeeded and every element was right, 1 when
 * some element was wrong (on every rank, as #wrong is summed), 2 when a call
 * failed. */
int perf_sweep_run(const perf_args *a, const perf_backend *be, const perf_config *cfg, const char *where,
                   FILE *out);

#endif
