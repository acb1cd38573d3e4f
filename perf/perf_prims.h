/* perf_prims.h - `kolo-perf prims`: the copy and reduce primitives of the
 * CUDA kernels beside cudaMemcpyAsync device to device, on one device
 * (docs/benchmarking.md). */
#ifndef KOLO_PERF_PRIMS_H
#define KOLO_PERF_PRIMS_H

#include "perf/perf_args.h"

/* The exit status: 0, 1 when some output was wrong, 2 on an error
 * (printed).  main has checked that there is a device. */
int perf_prims_run(const perf_args *a);

#endif
