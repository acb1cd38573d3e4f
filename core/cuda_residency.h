/* cuda_residency.h - how many thread blocks each rank of a CUDA
 * communicator may have resident (cuda_residency.c). */
#ifndef KOLO_CORE_CUDA_RESIDENCY_H
#define KOLO_CORE_CUDA_RESIDENCY_H

#include "core/cuda_state.h"

/* Init, once the device is chosen (cuda_residency.c): the blocks each rank
 * may have resident, the same on every rank; caps c->nchannels to them, or
 * refuses (koloInvalidUsage) ranks that cannot be resident even with one
 * channel. */
koloResult_t kolo_cuda_comm_residency(struct koloComm *c);

#endif
