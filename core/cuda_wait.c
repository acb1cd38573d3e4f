/* cuda_wait.c - bounded waits on kolo's own streams.
 *
 * cudaStreamSynchronize waits for as long as the stream takes, and a stream
 * of kolo's that shares a hardware queue (CUDA_DEVICE_MAX_CONNECTIONS) with
 * a kernel waiting for a peer takes until that peer calls: polling with a
 * deadline turns such a wait into an error the caller can report. */
#include <time.h>

#include "core/cuda_comm.h"

#include <cuda_runtime.h>

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int kolo_cuda_stream_wait(void *stream, int timeout_ms) {
  int64_t deadline = timeout_ms > 0 ? mono_ms() + timeout_ms : -1;
  cudaError_t e;
  while ((e = cudaStreamQuery((cudaStream_t)stream)) == cudaErrorNotReady) {
    if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError(); /* our poll's, not the user's */
    if (deadline >= 0 && mono_ms() > deadline) return (int)cudaErrorNotReady;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return (int)e;
}
