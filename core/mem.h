/* mem.h - what registration asks about memory (mem.c). */
#ifndef KOLO_CORE_MEM_H
#define KOLO_CORE_MEM_H

#include <stddef.h>

#include "kolo.h"

struct koloComm;

/* 1 when [p, p + size) lies inside one koloMemAlloc block; *device (may be
 * NULL) is then its CUDA device, or -1 for host memory. */
int kolo_mem_block_of(const void *p, size_t size, int *device);
/* koloSuccess when c may register buff: host memory for a host
 * communicator (device memory of koloMemAlloc is refused; other memory is
 * not probed, which would start CUDA in a host-only process), memory of
 * its device for a CUDA one.  Else koloInvalidArgument naming fn. */
koloResult_t kolo_mem_check_kind(struct koloComm *c, const void *buff, const char *fn);

#endif
