/* perf_tune_mem.c - where a kolo-perf tune rank's collectives live: host
 * memory, or (--mem cuda) a buffer on the rank's device and a stream of
 * its own, drained after each timed batch of calls.  Without CUDA no rank
 * gets --mem cuda: kolo-perf tune refuses it first. */
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
#endif

/* On a device: device rank % devices, bytes zeroed on it, a non-blocking
 * stream. */
int tune_mem_open(tune_mem *m, int cuda, int rank, int ndev, size_t bytes) {
  *m = (tune_mem){cuda, rank, NULL, NULL};
  if (!cuda) return (m->buf = calloc(1, bytes)) != NULL ? 0 : -1;
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s = NULL;
  if (cuda_ok(cudaSetDevice(ndev > 0 ? rank % ndev : 0), rank, "cudaSetDevice") != 0 ||
      cuda_ok(cudaMalloc(&m->buf, bytes), rank, "cudaMalloc") != 0 ||
      cuda_ok(cudaMemset(m->buf, 0, bytes), rank, "cudaMemset") != 0 ||
      cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rank, "cudaStreamCreate") != 0)
    return -1;
  m->stream = s;
  return 0;
#else
  (void)ndev;
  fprintf(stderr, "kolo-perf tune: rank %d: --mem cuda, but this build has no CUDA\n", rank);
  return -1;
#endif
}

int tune_mem_sync(tune_mem *m, koloComm_t comm) {
  if (!m->cuda) return 0;
#ifdef KOLO_HAVE_CUDA
  if (cuda_ok(cudaStreamSynchronize((cudaStream_t)m->stream), m->rank, "cudaStreamSynchronize") != 0) return -1;
#endif
  koloResult_t async = koloSuccess;
  if (koloCommGetAsyncError(comm, &async) != koloSuccess) return -1;
  return async == koloSuccess || async == koloInProgress ? 0 : -1;
}

/* On a device the one-byte flag is copied in, reduced and copied out. */
int tune_mem_flag(tune_mem *m, uint8_t *flag, koloComm_t comm) {
  if (!m->cuda) return koloAllReduce(flag, flag, 1, koloUint8, koloMax, comm, NULL) == koloSuccess ? 0 : -1;
#ifdef KOLO_HAVE_CUDA
  cudaStream_t s = (cudaStream_t)m->stream;
  if (cuda_ok(cudaMemcpyAsync(m->buf, flag, 1, cudaMemcpyHostToDevice, s), m->rank, "cudaMemcpyAsync") != 0 ||
      koloAllReduce(m->buf, m->buf, 1, koloUint8, koloMax, comm, m->stream) != koloSuccess ||
      cuda_ok(cudaMemcpyAsync(flag, m->buf, 1, cudaMemcpyDeviceToHost, s), m->rank, "cudaMemcpyAsync") != 0)
    return -1;
  return tune_mem_sync(m, comm);
#else
  return -1;
#endif
}

void tune_mem_close(tune_mem *m) {
  if (!m->cuda) free(m->buf);
#ifdef KOLO_HAVE_CUDA
  else {
    if (m->stream != NULL) cudaStreamDestroy((cudaStream_t)m->stream);
    if (m->buf != NULL) cudaFree(m->buf);
  }
#endif
}
