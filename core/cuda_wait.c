/* cuda_wait.c - bounded waits on kolo's own streams.
 *
 * cudaStreamSynchronize waits for as long as the stream takes, and a stream
 * of kolo's that shares a hardware queue (CUDA_DEVICE_MAX_CONNECTIONS) with
 * a kernel waiting for a peer takes until that peer calls: polling with a
 * deadline turns such a wait into an error the caller can report. */
#include "common/clock.h"
#include "core/cuda_comm.h"

#include <cuda_runtime.h>

int kolo_cuda_stream_wait(void *stream, int timeout_ms) {
  int64_t deadline = timeout_ms > 0 ? kolo_now_ms() + timeout_ms : -1;
  cudaError_t e;
  while ((e = cudaStreamQuery((cudaStream_t)stream)) == cudaErrorNotReady) {
    if (deadline >= 0 && kolo_now_ms() > deadline) return (int)cudaErrorNotReady;
    kolo_nap_us(100);
  }
  return (int)e;
}
