/* net_devmem.h - where the slots of a net pipe of a CUDA communicator live.
 *
 * Staging (every provider): the control block and the slots in pinned host
 * memory mapped into the device's address space (cudaHostAlloc, mapped and
 * portable).  The kernel writes a sender's slots and reads a receiver's
 * slots over PCIe / C2C, and moves the counters there with system-scope
 * release / acquire; the proxy moves the same bytes over the network from
 * and into that memory, as it does for host communicators.
 *
 * Built without CUDA: every call fails with a sentence (koloMemCuda never
 * gets this far there). */
#ifndef KOLO_TRANSPORT_NET_DEVMEM_H
#define KOLO_TRANSPORT_NET_DEVMEM_H

#include <stddef.h>

#include "core/error.h"

/* `bytes` of pinned host memory mapped for device `dev`: *host for the
 * proxy, *dev_ptr for kernels.  The calling thread's current device is
 * left as it was. */
koloResult_t kolo_net_devmem_alloc(size_t bytes, int dev, void **host, void **dev_ptr, kolo_errbuf *eb);
void kolo_net_devmem_free(void *host);

#endif
