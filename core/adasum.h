/* adasum.h - koloAdasum behind its argument checks (coll.c): Horovod's
 * adaptive summation on host communicators (adasum.c). */
#ifndef KOLO_CORE_ADASUM_H
#define KOLO_CORE_ADASUM_H

#include <stddef.h>

#include "kolo.h"

struct koloComm;

/* The checks of what only Adasum refuses (the datatype, a CUDA
 * communicator, a call inside a group), then the call: run on this thread
 * (blocking communicators) or queued on the progress thread
 * (koloInProgress).  coll.c has checked comm, count and the pointers. */
koloResult_t kolo_adasum(const char *fn, struct koloComm *comm, const void *sendbuff, void *recvbuff,
                         size_t count, koloDataType_t type);

#endif
