/* cuda_wait.c - polls and bounded waits on kolo's own events and streams.
 *
 * cudaStreamSynchronize waits for as long as the stream takes, and a stream
 * of kolo's that shares a hardware queue (CUDA_DEVICE_MAX_CONNECTIONS) with
 * a kernel waiting for a peer takes until that peer calls: polling with a
 * deadline turns such a wait into an error the caller can report. */
#include "common/clock.h"
#include "core/cuda_wait.h"

#include <cuda_runtime.h>

/* A query is a "potentially unsafe" call while the calling thread captures
 * a stream (or another thread captures in the global mode): CUDA would fail
 * it and invalidate the user's capture.  The thread's relaxed mode allows
 * it, as for an allocation during capture; the mode is put back after. */
static cudaError_t relaxed(cudaError_t (*query)(void *), void *what) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaError_t set = cudaThreadExchangeStreamCaptureMode(&mode);
  cudaError_t e = query(what);
  if (set == cudaSuccess) (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return e;
}

static cudaError_t event_query(void *event) { return cudaEventQuery((cudaEvent_t)event); }
static cudaError_t stream_query(void *stream) { return cudaStreamQuery((cudaStream_t)stream); }

int kolo_cuda_event_query(void *event) { return (int)relaxed(event_query, event); }
int kolo_cuda_stream_query(void *stream) { return (int)relaxed(stream_query, stream); }

int kolo_cuda_stream_wait(void *stream, int timeout_ms) {
  int64_t deadline = timeout_ms > 0 ? kolo_now_ms() + timeout_ms : -1;
  cudaError_t e;
  while ((e = (cudaError_t)kolo_cuda_stream_query(stream)) == cudaErrorNotReady) {
    if (deadline >= 0 && kolo_now_ms() > deadline) return (int)cudaErrorNotReady;
    kolo_nap_us(100);
  }
  return (int)e;
}
