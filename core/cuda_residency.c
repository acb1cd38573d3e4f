/* cuda_residency.c - how many thread blocks each rank of a CUDA
 * communicator may have on its device at once.
 *
 * Ranks of one process on one GPU spin on each other, so every block of
 * theirs that is running or waiting to run must be resident together:
 * a GPU places blocks in launch order as room frees up, and a block that
 * waits for a peer whose blocks cannot be placed never ends.  A rank's
 * launch holds at most `nchannels` blocks of a collective, and the planner
 * cuts launches at the same budget (cuda_plan.h), so the budget of a rank
 * is the blocks its device holds (the worst executor kernel's blocks per
 * SM, from the occupancy calculator, times the SMs) over the ranks on that
 * device: those of its process, and under MPS those of other processes on
 * the same GPU too, whose blocks share its SMs (cuda_shared_gpu.c; without
 * MPS such a layout is refused).  The communicator's channels are capped to the
 * smallest budget of any rank (every rank computes the same one: the
 * channel count must agree), and a budget below one block is refused.
 *
 * Not counted: other communicators' kernels on the same device (two
 * communicators of the same ranks need room for both), and a send to
 * oneself and its receive, which go in one launch of two blocks even when
 * the budget is one. */
#include <stdlib.h>

#include "common/log.h"
#include "core/comm_state.h"
#include "core/comm_gather.h"
#include "core/comm_wire.h"
#include "core/cuda_residency.h"
#include "core/cuda_shared_gpu.h"

#include <cuda_runtime.h>

/* What each rank tells the others about its device's room: comm_wire.h's
 * kolo_device_room, encoded. */
#define TAG_CUDA_FIT 0x31u

static int64_t budget_of(const kolo_device_room *f) {
  return (int64_t)f->per_sm * f->sms / (f->sharing > 0 ? f->sharing : 1);
}

/* This rank's entry: its device, asked on this (init's) thread. */
static kolo_device_room my_fit(const struct koloComm *c) {
  kolo_device_room f = {0, c->cuda->dev, 0, 0, c->cuda->ranks_on_dev, 0, 0};
  cudaError_t e = cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, c->cuda->dev);
  if (e == cudaSuccess) e = (cudaError_t)kolo_cuda_exec_blocks_per_sm(&f.per_sm);
  if (e == cudaSuccess) e = (cudaError_t)kolo_cuda_gpu_identity(c->cuda->dev, &f.gpu, &f.mps);
  f.err = (int32_t)e;
  return f;
}

/* The rank whose device fails or has the smallest budget (the lowest such
 * rank on ties: every rank picks the same one). */
static int worst_rank(const kolo_device_room *all, int n) {
  int worst = 0;
  for (int r = 1; r < n; r++) {
    if (all[worst].err != cudaSuccess) break;
    if (all[r].err != cudaSuccess || budget_of(&all[r]) < budget_of(&all[worst])) worst = r;
  }
  return worst;
}

static koloResult_t refuse(struct koloComm *c, const kolo_device_room *f, int r) {
  if (f->err != cudaSuccess)
    return kolo_error(&c->err, r == c->rank ? koloUnhandledCudaError : koloRemoteError,
                      "rank %d: asking CUDA device %d how many kernel blocks it holds failed: %s", r, f->dev,
                      cudaGetErrorString((cudaError_t)f->err));
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d: %d ranks of %s share CUDA device %d, whose %d SMs hold %d block(s) of "
                    "kolo's kernels at once (%d per SM), but their kernels wait for each other and need one "
                    "block per rank resident together even with one channel: put at most %d ranks of a "
                    "communicator on that device",
                    r, f->sharing, f->mps ? "its and other processes (MPS)" : "one process", f->dev, f->sms,
                    f->per_sm * f->sms, f->per_sm, f->per_sm * f->sms);
}

/* Every rank's report, decoded into all (nranks). */
static koloResult_t gather_fits(struct koloComm *c, kolo_device_room *all) {
  uint8_t enc[KOLO_DEVICE_ROOM_BYTES], *raw = NULL;
  kolo_device_room mine = my_fit(c);
  kolo_encode_device_room(&mine, enc);
  koloResult_t res = kolo_comm_gather(c, TAG_CUDA_FIT, enc, sizeof enc, &raw);
  char why[KOLO_ERR_LEN - 32];
  for (int r = 0; r < c->nranks && res == koloSuccess; r++)
    if (kolo_decode_device_room(raw + (size_t)r * sizeof enc, sizeof enc, r, c->nranks, &all[r], why, sizeof why) !=
        KOLO_COMM_WIRE_OK)
      res = kolo_error(&c->err, koloRemoteError, "rank %d: init: %s", c->rank, why);
  free(raw);
  return res;
}

koloResult_t kolo_cuda_comm_residency(struct koloComm *c) {
  kolo_device_room *all = calloc((size_t)c->nranks, sizeof *all);
  if (all == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  koloResult_t res = gather_fits(c, all);
  if (res == koloSuccess) res = kolo_cuda_shared_gpus(c, all);
  int w = res == koloSuccess ? worst_rank(all, c->nranks) : 0;
  kolo_device_room f = all[w];
  free(all);
  if (res != koloSuccess) return res;
  int64_t budget = budget_of(&f);
  if (f.err != cudaSuccess || budget < 1) return refuse(c, &f, w);
  c->cuda->max_blocks = budget < KOLO_DEV_MAX_TASKS ? (int)budget : KOLO_DEV_MAX_TASKS;
  if (c->nchannels > budget) {
    if (c->rank == 0)
      KOLO_WARN("%d channels lowered to %d: rank %d's device (CUDA device %d, %d SMs, %d block(s) of kolo's "
                "kernels per SM) is shared by %d ranks of %s, whose blocks must all be resident at once",
                c->nchannels, (int)budget, w, f.dev, f.sms, f.per_sm, f.sharing,
                f.mps ? "its and other processes (MPS)" : "its process");
    c->nchannels = (int)budget;
  }
  return koloSuccess;
}
