/* cuda_shared_gpu.h - ranks of different processes on one GPU
 * (cuda_shared_gpu.c). */
#ifndef KOLO_CORE_CUDA_SHARED_GPU_H
#define KOLO_CORE_CUDA_SHARED_GPU_H

#include <stdint.h>

#include "core/comm_wire.h"
#include "core/cuda_state.h"

/* Which physical GPU CUDA device dev is (a hash of its UUID, never 0) and
 * whether its contexts share its SMs through MPS; a cudaError_t. */
int kolo_cuda_gpu_identity(int dev, uint64_t *gpu, int32_t *mps);

/* Ranks of different processes on one GPU (every rank's report, all):
 * without MPS refused (koloInvalidUsage, the same sentence on every rank);
 * under MPS each such rank's `sharing` becomes every rank on its GPU, of
 * all processes, so that the residency budget counts them all. */
koloResult_t kolo_cuda_shared_gpus(struct koloComm *c, kolo_device_room *all);

#endif
