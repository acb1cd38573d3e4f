/* cuda_reduce.h - host entry to the CUDA reduce primitives (tests, tools).
 *
 * kolo_cuda_reduce launches kolo_cuda_reduce_kernel<T, OP>, which runs the
 * block primitive of kernels/cuda/reduce_prims.cuh over device buffers:
 * out0[i] (and out1[i] when out1 != NULL) = post(a[i] OP b[i]) for i < n,
 * with host_reduce.h's semantics (b == NULL: copy; koloAvg: sum, then
 * divided by div when div > 1).  Pointers are device pointers, any
 * alignment; outputs may equal an input.  `type` is a koloDataType_t, `op`
 * a koloRedOp_t, `stream` a cudaStream_t (NULL: the legacy default stream).
 * Returns a cudaError_t as an int: cudaSuccess (0), cudaErrorInvalidValue
 * for a bad type or op, or the launch error.  The kernel runs
 * asynchronously; errors it meets show at the next synchronization.
 *
 * Plain C, no CUDA header needed; declared only in builds with the CUDA
 * kernels (KOLO_HAVE_CUDA).
 */
#ifndef KOLO_KERNELS_CUDA_REDUCE_H
#define KOLO_KERNELS_CUDA_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef KOLO_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif

int kolo_cuda_reduce(void *out0, void *out1, const void *a, const void *b, size_t n, int type,
                     int op, int div, void *stream);
/* The premul-sum (host_reduce.h's kolo_host_reduce_premul): out = a +
 * pre(b), or pre(a) when b is NULL; scalar: the bits of one element of
 * `type` (little endian).  Same arguments and errors otherwise. */
int kolo_cuda_reduce_premul(void *out0, void *out1, const void *a, const void *b, size_t n, int type,
                            uint64_t scalar, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* KOLO_HAVE_CUDA */
#endif
