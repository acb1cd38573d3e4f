/* net_devmem.c - pinned, device-mapped staging memory for the net pipes of
 * CUDA communicators (see net_devmem.h). */
#include "transport/net_devmem.h"

#include "core/log.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

koloResult_t kolo_net_devmem_alloc(size_t bytes, int dev, void **host, void **dev_ptr, kolo_errbuf *eb) {
  *host = *dev_ptr = NULL;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  cudaError_t e = cudaSetDevice(dev);
  const char *what = "cudaSetDevice";
  if (e == cudaSuccess) {
    /* Portable: any context of the process may use it; mapped: kernels
     * address it directly (no copy engine, no extra stream work). */
    what = "cudaHostAlloc (pinned, mapped)";
    e = cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  }
  if (e == cudaSuccess) {
    what = "cudaHostGetDevicePointer";
    e = cudaHostGetDevicePointer(dev_ptr, *host, 0);
    if (e != cudaSuccess) {
      cudaFreeHost(*host);
      *host = NULL;
    }
  }
  if (prev >= 0) cudaSetDevice(prev);
  if (e == cudaSuccess) return koloSuccess;
  return kolo_error(eb, koloUnhandledCudaError,
                    "%s of %zu bytes of staging memory for a network pipe on CUDA device %d failed: %s "
                    "(pinned memory counts against the memlock limit, ulimit -l)",
                    what, bytes, dev, cudaGetErrorString(e));
}

void kolo_net_devmem_free(void *host) {
  if (host == NULL) return;
  cudaError_t e = cudaFreeHost(host);
  if (e != cudaSuccess) KOLO_WARN("cudaFreeHost of a network pipe's staging memory failed: %s", cudaGetErrorString(e));
}

#else

koloResult_t kolo_net_devmem_alloc(size_t bytes, int dev, void **host, void **dev_ptr, kolo_errbuf *eb) {
  *host = *dev_ptr = NULL;
  return kolo_error(eb, koloInvalidUsage,
                    "a network pipe in CUDA memory (%zu bytes, device %d) needs kolo built with CUDA", bytes, dev);
}

void kolo_net_devmem_free(void *host) { (void)host; }

#endif
