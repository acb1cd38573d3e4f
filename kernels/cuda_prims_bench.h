/* cuda_prims_bench.h - host entries of the primitive benchmark (`kolo-perf
 * prims`): the data primitives of kernels/cuda/reduce_prims.cuh launched as
 * a production kernel would launch them, plus the fill and compare kernels
 * the benchmark checks results with.
 *
 * kolo_prims_bench_reduce: out0[i] (and out1[i] when out1 != NULL) =
 *   a[i] + b[i] for i < n, or a copy of a[i] when b == NULL -- the semantics
 *   of kolo_cuda_reduce (kernels/cuda_reduce.h) with op koloSum and no
 *   divisor.  Unlike that test entry it launches exactly `blocks` blocks of
 *   `threads` threads (32..512, a multiple of 32); block k runs
 *   kolo_cuda::reduce_block on the k-th of `blocks` equal contiguous parts
 *   (a multiple of 64 elements each, so every part keeps the buffer's
 *   alignment).  `type` is a koloDataType_t.
 * kolo_prims_bench_grid: the blocks of one full wave for that launch: the
 *   current device's SM count times the blocks of `threads` threads that fit
 *   on one SM at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor).
 *   `reduce` != 0 for the kernel that reads b.  Call it outside timed loops.
 * kolo_prims_bench_fill: bytes [0, bytes) of buf = the 8-byte little-endian
 *   `pattern` repeated (byte i = byte i % 8 of pattern).
 * kolo_prims_bench_count: adds to *count (device memory) the number of
 *   bytes of buf[0, bytes) that differ from that repetition.
 *
 * buf, a, b, out0 and out1 are device pointers; buf 8-byte aligned.  Each
 * returns a cudaError_t as an int (cudaErrorInvalidValue for a bad type or
 * launch shape; else the launch error); the kernels run asynchronously on
 * `stream` (a cudaStream_t).  Plain C; declared only with KOLO_HAVE_CUDA.
 */
#ifndef KOLO_KERNELS_CUDA_PRIMS_BENCH_H
#define KOLO_KERNELS_CUDA_PRIMS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef KOLO_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif

int kolo_prims_bench_reduce(void *out0, void *out1, const void *a, const void *b, size_t n, int type,
                            int blocks, int threads, void *stream);
int kolo_prims_bench_grid(int type, int reduce, int threads, int *blocks);
int kolo_prims_bench_fill(void *buf, size_t bytes, uint64_t pattern, void *stream);
int kolo_prims_bench_count(const void *buf, size_t bytes, uint64_t pattern, unsigned long long *count,
                           void *stream);

#ifdef __cplusplus
}
#endif
#endif /* KOLO_HAVE_CUDA */
#endif
