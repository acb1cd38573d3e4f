/* net_devmem.c - pinned, device-mapped staging memory for the net pipes of
 * CUDA communicators (see net_devmem.h). */
#include "transport/net_devmem.h"

#include "common/log.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda.h> /* types and enum values only: the driver is reached through cudart */
#include <cuda_runtime.h>
#include <stdint.h>
#include <unistd.h>

#define GDR_ALIGN 4096 /* dma-buf ranges must be host-page aligned */

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

typedef CUresult (*get_handle_fn)(void *handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type,
                                  unsigned long long flags);

koloResult_t kolo_net_devmem_gdr_alloc(size_t bytes, int dev, void **raw, void **slots, int *fd, int *flush,
                                       kolo_errbuf *eb) {
  *raw = *slots = NULL;
  *fd = -1;
  *flush = 1;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  koloResult_t res = koloSuccess;
  int supported = 0, ordering = 0;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&supported, cudaDevAttrGPUDirectRDMASupported, dev);
  if (e == cudaSuccess && cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, dev) != cudaSuccess)
    ordering = cudaGPUDirectRDMAWritesOrderingNone;
  if (e != cudaSuccess || !supported) {
    res = kolo_error(eb, koloSystemError, "CUDA device %d does not support GPUDirect RDMA (%s)", dev,
                     e != cudaSuccess ? cudaGetErrorString(e) : "cudaDevAttrGPUDirectRDMASupported is 0");
    goto out;
  }
  get_handle_fn get_handle = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  e = cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", (void **)&get_handle, 11070, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || get_handle == NULL) {
    res = kolo_error(eb, koloSystemError, "the CUDA driver has no cuMemGetHandleForAddressRange (dma-buf export): %s",
                     e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
    goto out;
  }
  size_t span = (bytes + GDR_ALIGN - 1) / GDR_ALIGN * GDR_ALIGN;
  e = cudaMalloc(raw, span + GDR_ALIGN);
  if (e != cudaSuccess) {
    *raw = NULL;
    res = kolo_error(eb, koloUnhandledCudaError, "cudaMalloc of %zu bytes of GPUDirect slots on device %d failed: %s",
                     span + GDR_ALIGN, dev, cudaGetErrorString(e));
    goto out;
  }
  uintptr_t at = ((uintptr_t)*raw + GDR_ALIGN - 1) & ~(uintptr_t)(GDR_ALIGN - 1);
  int handle = -1;
  CUresult cr = get_handle(&handle, (CUdeviceptr)at, span, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (cr != CUDA_SUCCESS || handle < 0) {
    res = kolo_error(eb, koloSystemError,
                     "cuMemGetHandleForAddressRange (dma-buf) of device %d memory failed with CUresult %d "
                     "(needs the open GPU kernel modules)", dev, (int)cr);
    cudaFree(*raw);
    *raw = NULL;
    goto out;
  }
  *slots = (void *)at;
  *fd = handle;
  *flush = ordering < cudaGPUDirectRDMAWritesOrderingOwner;
out:
  if (prev >= 0) cudaSetDevice(prev);
  return res;
}

void kolo_net_devmem_gdr_free(void *raw, int dev) {
  if (raw == NULL) return;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  cudaSetDevice(dev);
  cudaError_t e = cudaFree(raw);
  if (e != cudaSuccess) KOLO_WARN("cudaFree of GPUDirect slots on device %d failed: %s", dev, cudaGetErrorString(e));
  if (prev >= 0) cudaSetDevice(prev);
}

void kolo_net_devmem_flush(int dev) {
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess)
    e = cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                           cudaFlushGPUDirectRDMAWritesToOwner);
  if (e != cudaSuccess) KOLO_WARN("flushing GPUDirect RDMA writes to device %d failed: %s", dev, cudaGetErrorString(e));
}

#else

koloResult_t kolo_net_devmem_alloc(size_t bytes, int dev, void **host, void **dev_ptr, kolo_errbuf *eb) {
  *host = *dev_ptr = NULL;
  return kolo_error(eb, koloInvalidUsage,
                    "a network pipe in CUDA memory (%zu bytes, device %d) needs kolo built with CUDA", bytes, dev);
}

void kolo_net_devmem_free(void *host) { (void)host; }

koloResult_t kolo_net_devmem_gdr_alloc(size_t bytes, int dev, void **raw, void **slots, int *fd, int *flush,
                                       kolo_errbuf *eb) {
  *raw = *slots = NULL;
  *fd = -1;
  *flush = 1;
  return kolo_net_devmem_alloc(bytes, dev, raw, slots, eb);
}

void kolo_net_devmem_gdr_free(void *raw, int dev) {
  (void)raw;
  (void)dev;
}

void kolo_net_devmem_flush(int dev) { (void)dev; }

#endif
