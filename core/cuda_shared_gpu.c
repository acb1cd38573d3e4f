/* cuda_shared_gpu.c - ranks of different processes on one GPU.
 *
 * Without MPS a GPU runs the kernels of one process's context at a time
 * and switches contexts every time slice (about 1-2 ms).  kolo's kernels
 * of ranks on one GPU wait for each other, so two ranks of different
 * processes there would advance about one step per slice, and a
 * collective of many steps would crawl into KOLO_TIMEOUT_MS.  NCCL
 * refuses the layout ("Duplicate GPU detected"); so does kolo, at init,
 * on every rank alike, naming the ranks and what to do.
 *
 * Under MPS the processes' kernels share the SMs at once: the layout
 * works as ranks of one process on the GPU do, provided the blocks of all
 * of them are resident together, so the residency budget
 * (cuda_residency.c) divides the GPU among every rank on it, whatever its
 * process.
 *
 * A GPU is told by its UUID (alike in every process, whichever ordinal
 * CUDA_VISIBLE_DEVICES gives it there) on one host (host_hash). */
#include <stdlib.h>

#include "core/comm_state.h"
#include "core/cuda_shared_gpu.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"

#include <cuda_runtime.h>

static uint64_t hash_uuid(const char bytes[16]) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (int i = 0; i < 16; i++) h = (h ^ (unsigned char)bytes[i]) * 0x100000001b3ull;
  return h != 0 ? h : 1; /* 0 means unknown */
}

int kolo_cuda_gpu_identity(int dev, uint64_t *gpu, int32_t *mps) {
  struct cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, dev);
  if (e != cudaSuccess) return (int)e;
  *gpu = hash_uuid(p.uuid.bytes);
  int on = 0;
  e = cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, dev);
  *mps = on != 0;
  return (int)e;
}

static int same_gpu(const struct koloComm *c, const kolo_device_room *all, int a, int b) {
  return all[a].gpu != 0 && all[a].gpu == all[b].gpu &&
         kolo_bootstrap_peer(c->bs, a)->host_hash == kolo_bootstrap_peer(c->bs, b)->host_hash;
}

static int same_process(const struct koloComm *c, int a, int b) {
  return kolo_same_process(kolo_bootstrap_peer(c->bs, a), kolo_bootstrap_peer(c->bs, b));
}

static koloResult_t refuse(struct koloComm *c, const kolo_device_room *all, int a, int b) {
  return kolo_error(&c->err, koloInvalidUsage,
                    "ranks %d and %d, of processes %d and %d of one host, share a GPU (rank %d's CUDA device %d is "
                    "rank %d's CUDA device %d) without MPS: a GPU runs one process's kernels at a time, switching "
                    "every time slice, and kolo's kernels of the two ranks wait for each other, so every step would "
                    "wait for a slice; give each process its own GPU (koloConfig's cudaDev, CUDA_VISIBLE_DEVICES) "
                    "or run the processes under MPS (nvidia-cuda-mps-control -d)",
                    a, b, (int)kolo_bootstrap_peer(c->bs, a)->pid, (int)kolo_bootstrap_peer(c->bs, b)->pid, a,
                    all[a].dev, b, all[b].dev);
}

koloResult_t kolo_cuda_shared_gpus(struct koloComm *c, kolo_device_room *all) {
  int n = c->nranks;
  int32_t *others = calloc((size_t)n, sizeof *others); /* ranks of other processes on each rank's GPU */
  if (others == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      if (!same_gpu(c, all, a, b) || same_process(c, a, b)) continue;
      if (!all[a].mps || !all[b].mps) {
        free(others);
        return refuse(c, all, a, b);
      }
      others[a]++, others[b]++;
    }
  for (int r = 0; r < n; r++) all[r].sharing += others[r];
  free(others);
  return koloSuccess;
}
