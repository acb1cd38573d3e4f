/* pack.h - batched copies of the fusion buffer: pack, unpack, and the
 * moves of a bucket rebuild, each ONE pass over a descriptor array (one
 * loop on the host, one kernel on a GPU).
 *
 * Each descriptor copies `bytes` bytes from src to dst (any alignment; src
 * and dst may be equal, never partially overlapping).  With scale != 1 the
 * elements are multiplied by scale on the way (floating dtypes only: the
 * caller checks), float16 / bfloat16 through float32, rounded to nearest
 * even.  Plain C, shared with pack_kernel.cu. */
#ifndef KOLO_FUSION_PACK_H
#define KOLO_FUSION_PACK_H

#include <stddef.h>

typedef struct {
  const void *src;
  void *dst;
  size_t bytes;
} kf_copy;

#ifdef __cplusplus
extern "C" {
#endif

/* Host: one pass over the descriptors. */
void kf_pack_host(const kf_copy *d, int n, int dtype, double scale);

/* CUDA (pack_kernel.cu): one kernel over n descriptors that the device
 * reads at `d` (device or mapped host memory) on `stream`; max_bytes: the
 * largest descriptor (sizes the grid).  Returns a cudaError_t as an int.
 * Builds with the CUDA kernels only. */
int kf_pack_cuda(const kf_copy *d, int n, size_t max_bytes, int dtype, double scale, void *stream);

#ifdef __cplusplus
}
#endif
#endif
