/* net_devmem.h - where the slots of a net pipe of a CUDA communicator live.
 *
 * Staging (every provider): the control block and the slots in pinned host
 * memory mapped into the device's address space (cudaHostAlloc, mapped and
 * portable).  The kernel writes a sender's slots and reads a receiver's
 * slots over PCIe / C2C, and moves the counters there with system-scope
 * release / acquire; the proxy moves the same bytes over the network from
 * and into that memory, as it does for host communicators.
 *
 * GPUDirect RDMA (KOLO_NET_GDR=1, a provider with reg_dmabuf, i.e. ib): the
 * slots in device memory exported as a dma-buf and registered with the NIC
 * (ibv_reg_dmabuf_mr), so the NIC reads a sender's slots and writes a
 * receiver's straight from and into GPU memory; only the control block
 * stays in mapped host memory.  Needs cudaDevAttrGPUDirectRDMASupported,
 * the driver's cuMemGetHandleForAddressRange (CUDA 11.7+, open kernel
 * modules) and a NIC driver that takes dma-bufs; where any of them is
 * missing the pipe falls back to staging, saying why at INFO.  Where the
 * device does not order the NIC's writes before the proxy's tail update
 * (cudaDevAttrGPUDirectRDMAWritesOrdering below owner), the receiving proxy
 * flushes them (cudaDeviceFlushGPUDirectRDMAWrites) before publishing.
 * Opt-in because it has not run on hardware yet (see README, Status).
 *
 * Built without CUDA: every call fails with a sentence (koloMemCuda never
 * gets this far there). */
#ifndef KOLO_TRANSPORT_NET_DEVMEM_H
#define KOLO_TRANSPORT_NET_DEVMEM_H

#include <stddef.h>

#include "common/error.h"

/* `bytes` of pinned host memory mapped for device `dev`: *host for the
 * proxy, *dev_ptr for kernels.  The calling thread's current device is
 * left as it was. */
koloResult_t kolo_net_devmem_alloc(size_t bytes, int dev, void **host, void **dev_ptr, kolo_errbuf *eb);
void kolo_net_devmem_free(void *host);

/* Device memory for GPUDirect RDMA: at least `bytes` on `dev`, 4 KiB
 * aligned, exported as a dma-buf.  *slots is where the slots start, *fd the
 * dma-buf (the caller closes it once registered), *flush whether received
 * data needs kolo_net_devmem_flush before kernels may read it; *raw is what
 * kolo_net_devmem_gdr_free takes.  Fails with the reason in eb (no support,
 * no driver entry point, out of memory). */
koloResult_t kolo_net_devmem_gdr_alloc(size_t bytes, int dev, void **raw, void **slots, int *fd, int *flush,
                                       kolo_errbuf *eb);
void kolo_net_devmem_gdr_free(void *raw, int dev);
/* Makes what the NIC wrote into dev's memory visible to dev's kernels
 * (called by the proxy thread before it publishes a receiver's tail). */
void kolo_net_devmem_flush(int dev);

#endif
