/* graph.c - stream capture and CUDA graphs in the model.
 *
 * What is modelled: capturing one stream at a time (a graph is the list of
 * the stream's kernels, copies and sets, in order; kernel parameters are
 * copied at capture, as CUDA does), instantiate, upload, launch and destroy.
 * A launch enqueues the graph's work on the stream, after the previous
 * launch of the same executable graph (CUDA: launches of one graph exec are
 * ordered).  Capture rules: in the thread-local and global modes, a
 * "potentially unsafe" call (allocation, free, synchronous copy or set,
 * device synchronization, an event's query or synchronization) from the
 * capturing thread (thread-local) or from any thread (global) fails with
 * cudaErrorStreamCaptureUnsupported and invalidates the capture, as does
 * synchronizing or querying the capturing stream, unless the calling thread
 * made its own mode relaxed (cudaThreadExchangeStreamCaptureMode);
 * cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated.  Not modelled: captures that fork into
 * other streams through events (refused), graphs built node by node. */
#include <stdlib.h>
#include <string.h>

#include "cudasim/sim.h"

struct sim_graph {
  sim_op **nodes; /* templates: kind and work; never submitted */
  int n, cap;
  sim_op *last_launch; /* exec: the last op of its latest launch */
  int is_exec;
  struct sim_graph *next;
};

static sim_graph *graphs; /* live graphs and execs, for handle checks */

static sim_graph *graph_live(const void *h, int is_exec) {
  for (sim_graph *g = graphs; g; g = g->next)
    if ((const void *)g == h && g->is_exec == is_exec) return g;
  return NULL;
}

static sim_graph *graph_new(int is_exec) {
  sim_graph *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  g->is_exec = is_exec;
  g->next = graphs;
  graphs = g;
  return g;
}

static void graph_free(sim_graph *g) {
  for (sim_graph **pp = &graphs; *pp; pp = &(*pp)->next)
    if (*pp == g) {
      *pp = g->next;
      break;
    }
  for (int i = 0; i < g->n; i++) sim_op_unref(g->nodes[i]);
  if (g->last_launch) sim_op_unref(g->last_launch);
  free(g->nodes);
  free(g);
}

static int graph_push(sim_graph *g, sim_op *node) {
  if (g->n == g->cap) {
    int cap = g->cap ? 2 * g->cap : 8;
    sim_op **v = realloc(g->nodes, (size_t)cap * sizeof *v);
    if (v == NULL) return -1;
    g->nodes = v;
    g->cap = cap;
  }
  sim_op_ref(node);
  g->nodes[g->n++] = node;
  return 0;
}

void sim_args_ref(sim_args *a); /* kernel.c */

/* A copy of op's work (no deps, no links) for stream s, or, s NULL, as a
 * graph's node (which keeps no stream: the captured one may go first). */
static sim_op *node_of(const sim_op *op, sim_stream *s) {
  sim_op *n = calloc(1, sizeof *n);
  if (n == NULL) return NULL;
  n->kind = op->kind;
  n->state = SIM_QUEUED;
  n->refs = 1;
  n->stream = s;
  n->dev = s ? s->dev : op->dev;
  n->u = op->u;
  if (n->kind == SIM_OP_KERNEL) {
    sim_args_ref(n->u.kern.args);
    n->u.kern.dispatched = n->u.kern.finished = 0;
    n->u.kern.dispatch_next = NULL;
  }
  return n;
}

cudaError_t sim_capture_add(sim_stream *s, sim_op *op) {
  if (s->capture_invalid) return cudaErrorStreamCaptureInvalidated;
  sim_op *n = node_of(op, NULL);
  int bad = n == NULL || graph_push(s->capture, n) != 0;
  if (n) sim_op_unref(n);
  return bad ? cudaErrorMemoryAllocation : cudaSuccess;
}

/* The calling thread's mode (cudaThreadExchangeStreamCaptureMode). */
static _Thread_local enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  if (mode == NULL || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                       *mode != cudaStreamCaptureModeRelaxed))
    return sim_ret(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode was = thread_mode;
  thread_mode = *mode;
  *mode = was;
  return cudaSuccess;
}

/* Does a potentially unsafe call of this thread hit capture s?  A thread
 * in the relaxed mode may make any call; otherwise its own capture forbids
 * them, and in the global mode so does another thread's global capture. */
static int forbids(const sim_stream *s) {
  if (s->capture == NULL || s->capture_mode == cudaStreamCaptureModeRelaxed) return 0;
  if (thread_mode == cudaStreamCaptureModeRelaxed) return 0;
  if (pthread_equal(s->capture_thread, pthread_self())) return 1;
  return thread_mode == cudaStreamCaptureModeGlobal && s->capture_mode == cudaStreamCaptureModeGlobal;
}

int sim_capture_forbids(sim_stream *target) {
  pthread_mutex_lock(&sim_lock);
  int hit = 0;
  if (target != NULL) {
    hit = target->capture != NULL;
    if (hit) target->capture_invalid = 1;
  } else {
    for (int i = 0; i < sim_cfg.ndevices; i++)
      for (sim_stream *s = sim_device_get(i)->streams; s; s = s->dev_next)
        if (forbids(s)) {
          s->capture_invalid = 1;
          hit = 1;
        }
  }
  pthread_mutex_unlock(&sim_lock);
  return hit;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t h, enum cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return sim_ret(cudaErrorInvalidValue);
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  if (s->legacy) return sim_ret(cudaErrorStreamCaptureUnsupported);
  pthread_mutex_lock(&sim_lock);
  cudaError_t e = cudaSuccess;
  if (s->capture) e = cudaErrorIllegalState;
  else if ((s->capture = graph_new(0)) == NULL) e = cudaErrorMemoryAllocation;
  else {
    s->capture_mode = mode;
    s->capture_invalid = 0;
    s->capture_thread = pthread_self();
  }
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *out) {
  if (out == NULL) return sim_ret(cudaErrorInvalidValue);
  *out = NULL;
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  cudaError_t e = cudaSuccess;
  if (s->capture == NULL) {
    e = cudaErrorIllegalState;
  } else if (s->capture_mode == cudaStreamCaptureModeThreadLocal &&
             !pthread_equal(s->capture_thread, pthread_self())) {
    e = cudaErrorStreamCaptureWrongThread;
  } else {
    sim_graph *g = s->capture;
    s->capture = NULL;
    if (s->capture_invalid) {
      graph_free(g);
      e = cudaErrorStreamCaptureInvalidated;
    } else {
      *out = (cudaGraph_t)g;
    }
    s->capture_invalid = 0;
  }
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *st) {
  if (st == NULL) return sim_ret(cudaErrorInvalidValue);
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  *st = s->capture == NULL      ? cudaStreamCaptureStatusNone
        : s->capture_invalid ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  pthread_mutex_unlock(&sim_lock);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *out, cudaGraph_t h, unsigned long long flags) {
  if (out == NULL || flags != 0) return sim_ret(cudaErrorInvalidValue);
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  sim_graph *g = graph_live(h, 0), *x = g ? graph_new(1) : NULL;
  if (g == NULL) e = cudaErrorInvalidResourceHandle;
  else if (x == NULL) e = cudaErrorMemoryAllocation;
  for (int i = 0; x && i < g->n && e == cudaSuccess; i++) {
    sim_op *n = node_of(g->nodes[i], NULL);
    if (n == NULL || graph_push(x, n) != 0) e = cudaErrorMemoryAllocation;
    if (n) sim_op_unref(n);
  }
  if (e != cudaSuccess && x) graph_free(x);
  else if (x) *out = (cudaGraphExec_t)x;
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t h, unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(out, h, flags);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t h, cudaStream_t sh) {
  sim_stream *s = sim_stream_get(sh);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  int ok = graph_live(h, 1) != NULL;
  pthread_mutex_unlock(&sim_lock);
  return ok ? cudaSuccess : sim_ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t h, cudaStream_t sh) {
  sim_stream *s = sim_stream_get(sh);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  sim_graph *x = graph_live(h, 1);
  cudaError_t e = x == NULL ? cudaErrorInvalidResourceHandle : s->capture ? cudaErrorStreamCaptureUnsupported : sim_sticky(s->dev);
  for (int i = 0; e == cudaSuccess && i < x->n; i++) {
    sim_op *op = node_of(x->nodes[i], s);
    if (op == NULL) {
      e = cudaErrorMemoryAllocation;
      break;
    }
    if (i == 0) sim_op_add_dep(op, x->last_launch); /* after the previous launch of x */
    if (i == x->n - 1) {
      if (x->last_launch) sim_op_unref(x->last_launch);
      sim_op_ref(op);
      x->last_launch = op;
    }
    sim_op_submit(op);
  }
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(e);
}

static cudaError_t destroy(const void *h, int is_exec) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  sim_graph *g = graph_live(h, is_exec);
  if (g) graph_free(g);
  pthread_mutex_unlock(&sim_lock);
  return g ? cudaSuccess : sim_ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t h) { return destroy(h, 1); }
cudaError_t cudaGraphDestroy(cudaGraph_t h) { return destroy(h, 0); }
