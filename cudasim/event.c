/* event.c - CUDA events in the model: a record is an operation of its
 * stream, done when everything before it in the stream is done; waiting on
 * an event makes an operation that depends on the record seen at the time
 * of the call (a later record does not change what was waited for). */
#include <stdlib.h>

#include "cudasim/sim.h"

typedef struct sim_event {
  unsigned flags;
  int device;
  sim_op *rec;       /* last record (a reference), NULL: never recorded */
  int in_capture;    /* last recorded in a capturing stream */
  struct sim_event *next;
} sim_event;

static sim_event *events; /* live events, for handle checks */

static sim_event *event_live(cudaEvent_t h) {
  for (sim_event *e = events; e; e = e->next)
    if ((cudaEvent_t)e == h) return e;
  return NULL;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags) {
  if (out == NULL) return sim_ret(cudaErrorInvalidValue);
  unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if ((flags & ~known) || ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
    return sim_ret(cudaErrorInvalidValue);
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e == cudaSuccess) e = sim_sticky(d);
  if (e != cudaSuccess) return sim_ret(e);
  sim_event *ev = calloc(1, sizeof *ev);
  if (ev == NULL) return sim_ret(cudaErrorMemoryAllocation);
  ev->flags = flags;
  ev->device = d->ordinal;
  pthread_mutex_lock(&sim_lock);
  ev->next = events;
  events = ev;
  pthread_mutex_unlock(&sim_lock);
  *out = (cudaEvent_t)ev;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t h) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  sim_event *ev = event_live(h);
  if (ev) {
    for (sim_event **pp = &events; *pp; pp = &(*pp)->next)
      if (*pp == ev) {
        *pp = ev->next;
        break;
      }
    if (ev->rec) sim_op_unref(ev->rec);
  }
  pthread_mutex_unlock(&sim_lock);
  if (ev == NULL) return sim_ret(cudaErrorInvalidResourceHandle);
  free(ev);
  return cudaSuccess;
}

cudaError_t sim_enqueue(sim_stream *s, sim_op *op); /* stream.c */

cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t sh) {
  sim_stream *s = sim_stream_get(sh);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  sim_event *ev = event_live(h);
  cudaError_t e = cudaSuccess;
  if (ev == NULL || ev->device != s->dev->ordinal) {
    e = cudaErrorInvalidResourceHandle; /* CUDA: event and stream of one device */
  } else if (sim_sticky(s->dev) != cudaSuccess) {
    e = sim_sticky(s->dev);
  } else if (s->capture) {
    /* A record inside a capture marks a point of the graph, not work. */
    ev->in_capture = 1;
  } else {
    sim_op *op = sim_op_new(SIM_OP_MARK, s);
    if (op == NULL) {
      e = cudaErrorMemoryAllocation;
    } else {
      sim_op_ref(op);
      sim_op_submit(op);
      if (ev->rec) sim_op_unref(ev->rec);
      ev->rec = op;
      ev->in_capture = 0;
    }
  }
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t h, cudaStream_t s, unsigned flags) {
  if (flags != 0) return sim_ret(cudaErrorNotSupported); /* external records: not modelled */
  return cudaEventRecord(h, s);
}

/* The event's record (a reference) or NULL; *err for a bad or captured one. */
static sim_op *record_of(cudaEvent_t h, cudaError_t *err) {
  *err = sim_init();
  if (*err != cudaSuccess) return NULL;
  pthread_mutex_lock(&sim_lock);
  sim_event *ev = event_live(h);
  sim_op *op = NULL;
  if (ev == NULL) *err = cudaErrorInvalidResourceHandle;
  else if (ev->in_capture) *err = cudaErrorCapturedEvent;
  else if ((op = ev->rec) != NULL) sim_op_ref(op);
  pthread_mutex_unlock(&sim_lock);
  return op;
}

/* A query or synchronization of an event is a "potentially unsafe" call in
 * a capture (a GPU refused cudaEventQuery in a thread-local capture: H200,
 * CUDA 13.0). */
cudaError_t cudaEventQuery(cudaEvent_t h) {
  cudaError_t e;
  if (sim_init() == cudaSuccess && sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  sim_op *op = record_of(h, &e);
  if (op == NULL) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  int done = op->state == SIM_DONE;
  cudaError_t sticky = sim_sticky(op->dev);
  sim_op_unref(op);
  pthread_mutex_unlock(&sim_lock);
  if (sticky != cudaSuccess) return sim_ret(sticky);
  return done ? cudaSuccess : sim_ret(cudaErrorNotReady);
}

cudaError_t cudaEventSynchronize(cudaEvent_t h) {
  cudaError_t e;
  if (sim_init() == cudaSuccess && sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  sim_op *op = record_of(h, &e);
  if (op == NULL) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  while (op->state != SIM_DONE) pthread_cond_wait(&sim_changed, &sim_lock);
  cudaError_t sticky = sim_sticky(op->dev);
  sim_op_unref(op);
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(sticky);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  if (ms == NULL) return sim_ret(cudaErrorInvalidValue);
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  sim_event *x = event_live(a), *y = event_live(b);
  if (x == NULL || y == NULL || ((x->flags | y->flags) & cudaEventDisableTiming) || !x->rec || !y->rec)
    e = cudaErrorInvalidResourceHandle;
  else if (x->rec->state != SIM_DONE || y->rec->state != SIM_DONE)
    e = cudaErrorNotReady;
  else
    *ms = (float)((double)((int64_t)(y->rec->done_ns - x->rec->done_ns)) / 1e6);
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t sh, cudaEvent_t h, unsigned flags) {
  if (flags != 0) return sim_ret(cudaErrorInvalidValue);
  sim_stream *s = sim_stream_get(sh);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  sim_event *ev = event_live(h);
  cudaError_t e = cudaSuccess;
  if (ev == NULL) {
    e = cudaErrorInvalidResourceHandle;
  } else if (sim_sticky(s->dev) != cudaSuccess) {
    e = sim_sticky(s->dev);
  } else if (ev->in_capture || s->capture) {
    /* Joining captures across streams is not modelled: the model captures
     * one stream at a time (docs/dev/cuda-model.md). */
    e = cudaErrorStreamCaptureUnsupported;
  } else if (ev->rec != NULL) {
    sim_op *op = sim_op_new(SIM_OP_MARK, s);
    if (op == NULL) e = cudaErrorMemoryAllocation;
    else if (sim_op_add_dep(op, ev->rec) != 0) {
      sim_op_unref(op);
      e = cudaErrorMemoryAllocation;
    } else {
      sim_op_submit(op);
    }
  }
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}
