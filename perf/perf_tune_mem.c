/* perf_tune_mem.c - where a kolo-perf tune rank's all-reduces live: host
 * memory, or (--mem cuda) a buffer on the rank's device and a stream of
 * its own, drained after each timed batch of calls. */
#include <stdio.h>
#include <stdlib.h>

#include "perf/perf_tune_int.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

static int cuda_ok(cudaError_t e, int rank, const char *what) {
  if (e == cudaSuccess) return 0;
  fprintf(stderr, "kolo-perf tune: rank %d: %s: %s\n", rank, what, cudaGetErrorString(e));
  return -1;
}

/* Device rank % devices, bytes zeroed on it, a non-blocking stream. */
static int open_cuda(tune_mem *m, int rank, int ndev, size_t bytes) {
  cudaStream_t s = NULL;
  if (cuda_ok(cudaSetDevice(ndev > 0 ? rank % ndev : 0), rank, "cudaSetDevice") != 0 ||
      cuda_ok(cudaMalloc(&m->buf, bytes), rank, "cudaMalloc") != 0)
    return -1;
  if (cuda_ok(cudaMemset(m->buf, 0, bytes), rank, "cudaMemset") != 0 ||
      cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank, "cudaStreamCreate") != 0)
    return -1;
  m->stream = s;
  return 0;
}

int tune_mem_sync(tune_mem *m, koloComm_t comm) {
  if (!m->cuda) return 0;
  if (cuda_ok(cudaStreamSynchronize((cudaStream_t)m->stream), m->rank, "cudaStreamSynchronize") != 0) return -1;
  koloResult_t async = koloSuccess;
  if (koloCommGetAsyncError(comm, &async) != koloSuccess) return -1;
  return async == koloSuccess || async == koloInProgress ? 0 : -1;
}

/* The one-byte flag through the device: copied in, reduced, copied out. */
static int flag_cuda(tune_mem *m, uint8_t *flag, koloComm_t comm) {
  cudaStream_t s = (cudaStream_t)m->stream;
  if (cuda_ok(cudaMemcpyAsync(m->buf, flag, 1, cudaMemcpyHostToDevice, s), m->rank, "cudaMemcpyAsync") != 0 ||
      koloAllReduce(m->buf, m->buf, 1, koloUint8, koloMax, comm, m->stream) != koloSuccess ||
      cuda_ok(cudaMemcpyAsync(flag, m->buf, 1, cudaMemcpyDeviceToHost, s), m->rank, "cudaMemcpyAsync") != 0)
    return -1;
  return tune_mem_sync(m, comm);
}

static void close_cuda(tune_mem *m) {
  if (m->stream != NULL) cudaStreamDestroy((cudaStream_t)m->stream);
  if (m->buf != NULL) cudaFree(m->buf);
}
#else
static int open_cuda(tune_mem *m, int rank, int ndev, size_t bytes) {
  (void)m, (void)ndev, (void)bytes;
  fprintf(stderr, "kolo-perf tune: rank %d: --mem cuda, but this build has no CUDA\n", rank);
  return -1;
}
int tune_mem_sync(tune_mem *m, koloComm_t comm) {
  (void)m, (void)comm;
  return 0;
}
static int flag_cuda(tune_mem *m, uint8_t *flag, koloComm_t comm) {
  (void)m, (void)flag, (void)comm;
  return -1;
}
static void close_cuda(tune_mem *m) { (void)m; }
#endif

int tune_mem_open(tune_mem *m, int cuda, int rank, int ndev, size_t bytes) {
  *m = (tune_mem){cuda, rank, NULL, NULL};
  if (cuda) return open_cuda(m, rank, ndev, bytes);
  m->buf = calloc(1, bytes);
  return m->buf != NULL ? 0 : -1;
}

int tune_mem_flag(tune_mem *m, uint8_t *flag, koloComm_t comm) {
  if (m->cuda) return flag_cuda(m, flag, comm);
  return koloAllReduce(flag, flag, 1, koloUint8, koloMax, comm, NULL) == koloSuccess ? 0 : -1;
}

void tune_mem_close(tune_mem *m) {
  if (m->cuda) close_cuda(m);
  else free(m->buf);
  m->buf = m->stream = NULL;
}
