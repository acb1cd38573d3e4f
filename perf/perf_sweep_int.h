/* perf_sweep_int.h - the parts of one rank's sweep (perf_sweep.h), private
 * to perf_sweep.c (sizes, buffers, rows), perf_sweep_data.c (the buffers'
 * layout, inputs and checks) and perf_timing.c (timed calls and how the
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
  void *send, *recv;   /* buffers the calls see (device memory with --mem cuda) */
  void *hsend, *hrecv; /* their host views: the same pointers for host memory */
} sweep;

/* Where the call's buffers lie and which part holds the result, in elements
 * from the start of `send` / `recv` (in place: both are from `recv`). */
typedef struct {
  size_t send_off, recv_off; /* call's sendbuff, recvbuff */
  int send_in_recv;          /* sendbuff lies in the receive buffer (in place) */
} layout;

/* perf_sweep_data.c */
layout perf_layout_for(const sweep *s, int in_place, size_t count);
perf_call perf_make_call(const sweep *s, const perf_sizes *z, const layout *l);
/* Inputs written (host views), copied to the device where there is one. */
int perf_prepare(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l);
/* Copies the results back where needed and counts this rank's wrong elements; -1 on failure. */
int perf_check_result(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l, uint64_t *wrong);

/* perf_timing.c */
/* n single calls, complete on return (the warm-up). */
int perf_run_n(sweep *s, const perf_call *c, int n);
/* One call whose results are checked (with -G, as a graph of that call). */
int perf_run_once(sweep *s, const perf_call *c);
/* Times the -n iterations of -m calls: res->time_us, cpu_us, wall_us, per
 * call, each combined over the ranks as -a says. */
int perf_time_calls(sweep *s, const perf_call *c, perf_result *res);

#endif
