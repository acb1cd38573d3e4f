/* perf_sweep_int.h - one rank's sweep (perf_sweep.h), shared by perf_sweep.c
 * (sizes, buffers, checks, rows) and perf_timing.c (timed calls and how the
 * ranks' times combine). */
#ifndef KOLO_PERF_SWEEP_INT_H
#define KOLO_PERF_SWEEP_INT_H

#include <stdint.h>

#include "perf/perf_check.h"
#include "perf/perf_sweep.h"

typedef struct {
  const perf_args *a;
  const perf_backend *be;
  int rank, nranks;
  size_t buf_bytes;
  uint64_t wrong;      /* #wrong so far, over all ranks (so the same on each) */
  void *send, *recv;   /* buffers the calls see (device memory with --mem cuda), --offset past raw's */
  void *send_raw, *recv_raw; /* as the backend allocated them */
  void *hsend, *hrecv; /* their host views: the same pointers for host memory */
} sweep;

/* perf_timing.c */
/* n single calls, complete on return (the warm-up). */
int perf_run_n(sweep *s, const perf_call *c, int n);
/* One call whose results are checked (with -G, as a graph of that call). */
int perf_run_once(sweep *s, const perf_call *c);
/* Times the -n iterations of -m calls: res->time_us, cpu_us, wall_us, per
 * call, each combined over the ranks as -a says. */
int perf_time_calls(sweep *s, const perf_call *c, perf_result *res);

#endif
