/* kolo_backend.h - kolo as a perf_backend: the collectives under test, and
 * the small calls the sweep needs (timing max, #wrong sum, rank info) made
 * on the same communicator. */
#ifndef KOLO_PERF_KOLO_BACKEND_H
#define KOLO_PERF_KOLO_BACKEND_H

#include "kolo.h"
#include "perf/perf_sweep.h"

typedef struct {
  koloComm_t comm;
  int rank, nranks;
  int cuda;            /* buffers are CUDA device memory */
  koloStream_t stream; /* NULL for host memory */
  void *scratch;       /* device staging for the small calls (cuda) */
  size_t scratch_bytes;
  void *ev_start, *ev_stop; /* cudaEvent_t: the marks around timed calls (cuda) */
  void *graph;              /* cudaGraphExec_t of -G, or NULL */
  struct perf_watch *watch; /* -T's slot, or NULL */
} kolo_backend;

/* Fills `be` for an initialized communicator.  With cuda, the calling thread
 * must have its device current: the rank gets its own non-blocking stream
 * there (ranks sharing a device never share a stream), every call and copy
 * goes on it, times are taken with cudaEvents on it, and --graph captures on
 * it (thread-local capture mode: each rank is captured by its own thread).
 * timeout_s > 0: the rows are watched (-T, kolo_backend.c).
 * Returns 0, or -1 with a message printed. */
int kolo_backend_init(kolo_backend *kb, perf_backend *be, koloComm_t comm, int cuda, int timeout_s);
/* Frees what init made; the communicator stays. */
void kolo_backend_fini(kolo_backend *kb);

/* Prints "rank R: WHAT failed: <result>: <last error of comm>" to stderr
 * ("kolo-perf:" for rank < 0, before there is a rank).  Returns -1, so that
 * a failing step can end with `return kolo_backend_report(...)`. */
int kolo_backend_report(int rank, koloComm_t comm, koloResult_t res, const char *what);

#endif
