/* perf_prims.h - `kolo-perf prims`: the copy and reduce primitives of the
 * CUDA kernels beside cudaMemcpyAsync device to device, on one device.
 *
 * For each size S of -b..-e (each buffer holds S bytes, S / type size
 * elements), rows of: memcpy (cudaMemcpyAsync D2D), then for each type (-d,
 * default float then bfloat16) and each primitive
 *   copy   out = a                      (the executor's send / recv)
 *   copy2  out0 = out1 = a              (recvCopySend)
 *   sum    out = a + b                  (recvReduceSend)
 *   sum2   out0 = out1 = a + b          (recvReduceCopySend)
 * under each launch (--launch): `entry`, kolo_cuda_reduce as it launches
 * (kernels/cuda_reduce.h), and `grid`, kolo_prims_bench_reduce over one full
 * wave of the GPU (kernels/cuda_prims_bench.h).  Each row: the time per
 * call (cudaEvents around -n calls after -w warm-ups, one stream), GB/s
 * counted as bytes read + bytes written (memcpy and copy 2S, copy2 and sum
 * 3S, sum2 4S; GB = 1e9), the ratio to memcpy's GB/s at the same size, and
 * with -c 1 the output bytes that differ from the expected ones.  A summary
 * gives each primitive's lowest ratio at sizes >= 64 MiB.
 *
 * Returns the exit status: 0, 1 when some output was wrong, 2 on an error
 * (printed).  main has checked that there is a device.
 */
#ifndef KOLO_PERF_PRIMS_H
#define KOLO_PERF_PRIMS_H

#include "perf/perf_args.h"

int perf_prims_run(const perf_args *a);

#endif
