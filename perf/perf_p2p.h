/* perf_p2p.h - `kolo-perf p2p`: copy bandwidth and latency between every
 * pair of GPUs and of host ranks, as nvbandwidth's matrices
 * (docs/benchmarking.md). */
#ifndef KOLO_PERF_P2P_H
#define KOLO_PERF_P2P_H

#include <stdio.h>

#include "perf/kolo_backend.h"
#include "perf/perf_args.h"
#include "perf/perf_report.h"

struct perf_p2p_opts {
  size_t bytes;     /* -b: bytes per bandwidth copy or send */
  size_t lat_bytes; /* --lat-bytes: bytes per latency copy or ping */
  int iters;        /* -n: timed copies / sends per pair */
  int lat_iters;    /* --lat-iters: timed latency copies / round trips per pair */
  int warmup;       /* -w */
  int gpu, host;    /* --only: which parts run */
};
typedef struct perf_p2p_opts perf_p2p_opts;

int perf_p2p_main(int argc, char **argv);

/* The GPU part, in this process; 0, or 2 when a CUDA call failed (said). */
int perf_p2p_gpu_run(const perf_p2p_opts *o, FILE *out);
/* One rank's part of the host matrix (rank 0 prints). */
int perf_p2p_host_run(const perf_args *a, kolo_backend *kb, const perf_backend *be, const perf_config *cfg,
                      FILE *out);

/* An n x n matrix, v[row * n + col], NaN printed "n/a" and the diagonal
 * `diag` when it is not NULL; names: "GPU" or "rank". */
void perf_p2p_matrix(FILE *out, const char *title, const char *name, const double *v, int n, const char *diag);

#endif
