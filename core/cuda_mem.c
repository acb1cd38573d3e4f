/* cuda_mem.c - device memory for koloMemAlloc / koloMemFree (core/mem.c
 * keeps the record of blocks), and the check that a buffer a CUDA
 * communicator registers is memory of its device.  Reached through the
 * CUDA memory kind's table (cuda_kind.c). */
#include <cuda_runtime.h>

#include "common/log.h"
#include "core/comm_state.h"
#include "core/cuda_comm.h"

int kolo_cuda_mem_device(void) {
  int count = 0, dev = -1;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError(); /* our probe is not the caller's error */
    return -1;
  }
  return dev;
}

koloResult_t kolo_cuda_mem_alloc(int device, size_t size, void **ptr) {
  cudaError_t e = cudaMalloc(ptr, size);
  if (e != cudaSuccess)
    return kolo_error(NULL, koloUnhandledCudaError, "koloMemAlloc: cudaMalloc of %zu bytes on CUDA device %d failed: %s",
                      size, device, cudaGetErrorString(e));
  return koloSuccess;
}

/* cudaFree in the block's device, then the caller's device again. */
koloResult_t kolo_cuda_mem_release(int device, void *ptr) {
  int cur = -1;
  cudaError_t e = cudaGetDevice(&cur);
  if (e == cudaSuccess) e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFree(ptr);
  if (cur >= 0 && cudaSetDevice(cur) != cudaSuccess)
    KOLO_WARN("koloMemFree: cannot make CUDA device %d current again", cur);
  if (e != cudaSuccess)
    return kolo_error(NULL, koloUnhandledCudaError, "koloMemFree: cudaFree of %p (CUDA device %d) failed: %s", ptr,
                      device, cudaGetErrorString(e));
  return koloSuccess;
}

koloResult_t kolo_cuda_mem_check(struct koloComm *c, const void *buff, const char *fn) {
  struct cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, buff);
  if (e != cudaSuccess) (void)cudaGetLastError();
  int is_dev = e == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
  if (!is_dev)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: rank %d: buff %p is not device memory, and this is a CUDA communicator (device %d)", fn,
                      c->rank, buff, c->cuda ? c->cuda->dev : c->cuda_dev);
  if (c->cuda && a.device != c->cuda->dev)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: rank %d: buff %p is memory of CUDA device %d, not of the communicator's device %d", fn,
                      c->rank, buff, a.device, c->cuda->dev);
  return koloSuccess;
}
