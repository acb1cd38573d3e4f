/* perf_compute.h - calibrated stand-ins for a layer's backward compute, for
 * `kolo-perf overlap`: spin (burns this thread's core), sleep (an
 * accelerator's: the CPU idles until each layer's deadline) and cuda (a busy
 * kernel on the compute stream); docs/benchmarking.md says how each behaves.
 * Thread safety: one perf_compute per thread. */
#ifndef KOLO_PERF_COMPUTE_H
#define KOLO_PERF_COMPUTE_H

#include <stdint.h>

typedef enum { PERF_COMPUTE_SPIN, PERF_COMPUTE_SLEEP, PERF_COMPUTE_CUDA, PERF_COMPUTE_KINDS } perf_compute_kind;

typedef struct {
  perf_compute_kind kind;
  double per_us;   /* spin: iterations per us; cuda: clock cycles per us */
  void *stream;    /* cuda: the compute stream (cudaStream_t) */
  double start_us; /* sleep: the step's start */
  double due_us;   /* sleep: compute owed since then */
  uint64_t sink;   /* spin: the loop's result, so that it is not optimized away */
} perf_compute;

const char *perf_compute_name(perf_compute_kind k);

/* Sets the kind and calibrates it (spin: ~50 ms; cuda: a few kernels on
 * `stream`, which the caller owns).  Returns 0, or -1 with a message. */
int perf_compute_init(perf_compute *c, perf_compute_kind kind, void *stream);
/* Start of a backward pass (sleep: the deadlines count from here). */
void perf_compute_begin(perf_compute *c);
/* One layer's compute of `us` microseconds: done on return (spin, sleep),
 * or enqueued on the stream (cuda).  0 or -1 with a message. */
int perf_compute_layer(perf_compute *c, double us);
/* cuda: waits for the stream; others: nothing.  0 or -1. */
int perf_compute_sync(perf_compute *c);

#ifdef KOLO_HAVE_CUDA
/* perf_busy.cu: one block of one thread spinning `cycles` clock cycles on
 * `stream`.  0, or -1 when the launch failed (cudaGetLastError). */
int perf_busy_launch(void *stream, long long cycles);
#endif

#endif
