/* cuda_wait.h - polls and bounded waits on kolo's own CUDA events and
 * streams (cuda_wait.c). */
#ifndef KOLO_CORE_CUDA_WAIT_H
#define KOLO_CORE_CUDA_WAIT_H

/* cudaEventQuery / cudaStreamQuery of kolo's own event or stream (a
 * cudaError_t), safe while a stream is being captured. */
int kolo_cuda_event_query(void *event);
int kolo_cuda_stream_query(void *stream);

/* Waits for the work queued so far on `stream` (a cudaStream_t of kolo's),
 * polling, for at most timeout_ms (0: no bound).  Returns a cudaError_t:
 * cudaSuccess, the stream's error, or cudaErrorNotReady when the time ran
 * out first. */
int kolo_cuda_stream_wait(void *stream, int timeout_ms);

#endif
