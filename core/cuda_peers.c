/* cuda_peers.c - multi-peer programs (ring/program.h) on the device.
 *
 * A multi-peer task reaches its peers' point-to-point ends through a table
 * in device memory (kernels/cuda_exec.h, kolo_dev_ends): one per program
 * and channel, built and uploaded once at init, since it only holds the
 * addresses of the device copies of the communicator's point-to-point ends
 * (one kolo_dev_conn per peer, channel and direction, zeroed at init).  Those
 * copies are written when the pipes are made (first use, like send/recv's),
 * before any kernel that needs them is launched, so that tables never change
 * and kernel parameters stay one pointer per task. */
#include <stdlib.h>
#include <string.h>

#include "core/cuda_peers.h"
#include "common/log.h"

#include <cuda_runtime.h>

static size_t np_of(const struct koloComm *c) { return (size_t)c->nranks * (size_t)c->nchannels; }

static int slots_of(int coll, int nranks) { return kolo_program_slots(coll, nranks); }

static const kolo_program *program_of(const struct koloComm *c, int k, int slot, int ch) {
  return &c->programs[k][kolo_program_index(k, slot, ch, c->nvariants)];
}

/* Pointers the tables of collective k hold (2 per peer, channel and slot). */
static size_t table_entries(const struct koloComm *c, int k) {
  size_t n = 0;
  for (int s = 0; s < slots_of(k, c->nranks); s++)
    for (int ch = 0; ch < c->nchannels; ch++) n += 2 * (size_t)program_of(c, k, s, ch)->npeers;
  return n;
}

/* Fills the host staging copy of program p's table on channel ch (device
 * addresses of the ends it uses, NULL for the others). */
static void stage_table(const struct koloComm *c, const kolo_program *p, int ch, const kolo_dev_conn **out) {
  const kolo_dev_conn *base = c->cuda->dev_p2p;
  for (int i = 0; i < p->npeers; i++) {
    size_t k = (size_t)p->peers[i].rank * (size_t)c->nchannels + (size_t)ch;
    out[2 * i] = p->peers[i].sends ? base + k : NULL;
    out[2 * i + 1] = p->peers[i].recvs ? base + np_of(c) + k : NULL;
  }
}

/* Lays out every table in host (staging) and device memory at once:
 * host == NULL only sets the end_tables pointers into dev. */
static void place_tables(struct koloComm *c, const kolo_dev_conn **host, const kolo_dev_conn **dev) {
  size_t at = 0;
  for (int k = 0; k < KOLO_COLL_NUM; k++) {
    if (!kolo_comm_multi_peer(c, k)) continue;
    for (int s = 0; s < slots_of(k, c->nranks); s++)
      for (int ch = 0; ch < c->nchannels; ch++) {
        const kolo_program *p = program_of(c, k, s, ch);
        if (host) stage_table(c, p, ch, host + at);
        else c->cuda->end_tables[k][(size_t)s * (size_t)c->nchannels + (size_t)ch] = p->npeers ? dev + at : NULL;
        at += 2 * (size_t)p->npeers;
      }
  }
}

static koloResult_t cuda_fail(struct koloComm *c, cudaError_t e, const char *what) {
  return kolo_error(&c->err, koloUnhandledCudaError, "rank %d (CUDA device %d): %s failed: %s", c->rank,
                    c->cuda->dev, what, cudaGetErrorString(e));
}

/* cudaMalloc of n bytes, cleared on the setup stream (never cudaMemset: the
 * legacy stream waits for kernels spinning on peers). */
static cudaError_t alloc_zeroed(struct koloComm *c, void **p, size_t n) {
  cudaError_t e = cudaMalloc(p, n);
  if (e == cudaSuccess) e = cudaMemsetAsync(*p, 0, n, (cudaStream_t)c->cuda->setup_stream);
  return e;
}

koloResult_t kolo_cuda_peers_init(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  cudaError_t e = alloc_zeroed(c, (void **)&cc->dev_p2p, 2 * np_of(c) * sizeof *cc->dev_p2p);
  if (e != cudaSuccess) return cuda_fail(c, e, "allocating the device copies of the point-to-point ends");
  size_t total = 0;
  for (int k = 0; k < KOLO_COLL_NUM; k++) {
    if (!kolo_comm_multi_peer(c, k)) continue;
    cc->end_tables[k] = calloc((size_t)slots_of(k, c->nranks) * (size_t)c->nchannels, sizeof *cc->end_tables[k]);
    if (cc->end_tables[k] == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
    total += table_entries(c, k);
  }
  const kolo_dev_conn **host = malloc((total ? total : 1) * sizeof *host);
  if (host == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  place_tables(c, host, NULL);
  e = cudaMalloc(&cc->dev_end_mem, (total ? total : 1) * sizeof *host);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(cc->dev_end_mem, host, total * sizeof *host, cudaMemcpyHostToDevice,
                        (cudaStream_t)cc->setup_stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)cc->setup_stream);
  free(host);
  if (e != cudaSuccess) return cuda_fail(c, e, "uploading the end tables of the multi-peer programs");
  place_tables(c, NULL, cc->dev_end_mem);
  KOLO_INFO("rank %d: %zu end table entries of multi-peer programs on CUDA device %d", c->rank, total, cc->dev);
  return koloSuccess;
}

koloResult_t kolo_cuda_peers_publish(struct koloComm *c, size_t i) {
  kolo_cuda_comm *cc = c->cuda;
  const kolo_dev_conn *src = i < np_of(c) ? &cc->p2p_send[i] : &cc->p2p_recv[i - np_of(c)];
  cudaError_t e = cudaMemcpyAsync(cc->dev_p2p + i, src, sizeof *src, cudaMemcpyHostToDevice,
                                  (cudaStream_t)cc->setup_stream);
  return e == cudaSuccess ? koloSuccess : cuda_fail(c, e, "copying a point-to-point end to the device");
}

koloResult_t kolo_cuda_peers_sync(struct koloComm *c) {
  cudaError_t e = cudaStreamSynchronize((cudaStream_t)c->cuda->setup_stream);
  return e == cudaSuccess ? koloSuccess : cuda_fail(c, e, "copying point-to-point ends to the device");
}

void kolo_cuda_peers_free(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc->dev_p2p) cudaFree(cc->dev_p2p);
  if (cc->dev_end_mem) cudaFree(cc->dev_end_mem);
  for (int k = 0; k < KOLO_COLL_NUM; k++) free(cc->end_tables[k]);
}
