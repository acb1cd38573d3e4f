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

/* A rank's place: its GPU on its host, then its process. */
typedef struct {
  uint64_t host, gpu, proc_token;
  int32_t pid, rank;
} gpu_user;

static int cmp_key(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

static int by_gpu_then_process(const void *x, const void *y) {
  const gpu_user *a = x, *b = y;
  int k = cmp_key(a->host, b->host);
  if (k == 0) k = cmp_key(a->gpu, b->gpu);
  if (k == 0) k = cmp_key(a->proc_token, b->proc_token);
  if (k == 0) k = (a->pid > b->pid) - (a->pid < b->pid);
  return k != 0 ? k : (a->rank > b->rank) - (a->rank < b->rank);
}

static int same_gpu(const gpu_user *a, const gpu_user *b) { return a->gpu != 0 && a->gpu == b->gpu && a->host == b->host; }
static int same_process(const gpu_user *a, const gpu_user *b) {
  return a->proc_token == b->proc_token && a->pid == b->pid;
}

static koloResult_t refuse(struct koloComm *c, const kolo_device_room *all, const gpu_user *x, const gpu_user *y) {
  int a = x->rank < y->rank ? x->rank : y->rank, b = x->rank < y->rank ? y->rank : x->rank;
  return kolo_error(&c->err, koloInvalidUsage,
                    "ranks %d and %d, of processes %d and %d of one host, share a GPU (rank %d's CUDA device %d is "
                    "rank %d's CUDA device %d) without MPS: a GPU runs one process's kernels at a time, switching "
                    "every time slice, and kolo's kernels of the two ranks wait for each other, so every step would "
                    "wait for a slice; give each process its own GPU (koloConfig's cudaDev, CUDA_VISIBLE_DEVICES) "
                    "or run the processes under MPS (nvidia-cuda-mps-control -d)",
                    a, b, (int)kolo_bootstrap_peer(c->bs, a)->pid, (int)kolo_bootstrap_peer(c->bs, b)->pid, a,
                    all[a].dev, b, all[b].dev);
}

/* Every rank's place, sorted so that the ranks of one GPU, and within it
 * those of one process, stand together: O(n log n), at every rank alike. */
static gpu_user *sorted_users(const struct koloComm *c, const kolo_device_room *all) {
  gpu_user *u = calloc((size_t)c->nranks, sizeof *u);
  if (u == NULL) return NULL;
  for (int r = 0; r < c->nranks; r++) {
    const kolo_peer_info *p = kolo_bootstrap_peer(c->bs, r);
    u[r] = (gpu_user){p->host_hash, all[r].gpu, p->proc_token, p->pid, r};
  }
  qsort(u, (size_t)c->nranks, sizeof *u, by_gpu_then_process);
  return u;
}

/* The ranks u[lo, hi) of one GPU: refused unless all of one process or
 * all under MPS; otherwise each counts those of the other processes. */
static koloResult_t settle_gpu(struct koloComm *c, kolo_device_room *all, const gpu_user *u, int lo, int hi) {
  if (same_process(&u[lo], &u[hi - 1])) return koloSuccess;
  for (int i = lo; i < hi; i++)
    if (!all[u[i].rank].mps) {
      const gpu_user *other = same_process(&u[i], &u[lo]) ? &u[hi - 1] : &u[lo];
      return refuse(c, all, &u[i], other);
    }
  for (int i = lo, j; i < hi; i = j) {
    for (j = i; j < hi && same_process(&u[i], &u[j]); j++) {}
    for (int k = i; k < j; k++) all[u[k].rank].sharing += (hi - lo) - (j - i);
  }
  return koloSuccess;
}

koloResult_t kolo_cuda_shared_gpus(struct koloComm *c, kolo_device_room *all) {
  gpu_user *u = sorted_users(c, all);
  if (u == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  koloResult_t res = koloSuccess;
  for (int lo = 0, hi; lo < c->nranks && res == koloSuccess; lo = hi) {
    for (hi = lo + 1; hi < c->nranks && same_gpu(&u[lo], &u[hi]); hi++) {}
    res = settle_gpu(c, all, u, lo, hi);
  }
  free(u);
  return res;
}
