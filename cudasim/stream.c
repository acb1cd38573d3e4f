/* stream.c - operations, streams and hardware queues of the model (see
 * sim.h for the flow).
 *
 * Rules modelled, from CUDA's documentation:
 *  - a stream runs its work in issue order; streams run concurrently;
 *  - streams share CUDA_DEVICE_MAX_CONNECTIONS hardware queues (stream k of
 *    a device, in creation order, on queue k mod that number, the legacy
 *    stream first); a queue starts its work in order, so work whose
 *    dependencies are not met holds up the queue's later work of other
 *    streams, as on a GPU;
 *  - the legacy default stream (NULL, cudaStreamLegacy) waits for all work
 *    issued before on the device's blocking streams, and their later work
 *    waits for it; cudaStreamNonBlocking streams are exempt;
 *  - cudaStreamPerThread is a blocking stream of its own per host thread;
 *  - cudaStreamQuery's cudaErrorNotReady is recorded as the thread's last
 *    error like any other error (cudaGetLastError then returns it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudasim/sim.h"

#define STREAM_MAGIC 0x4b53544du

/* ---- operations ---------------------------------------------------------- */

sim_op *sim_op_new(int kind, sim_stream *s) {
  sim_op *op = calloc(1, sizeof *op);
  if (op == NULL) return NULL;
  op->kind = kind;
  op->state = SIM_QUEUED;
  op->refs = 1;
  op->stream = s;
  op->dev = s->dev;
  return op;
}

void sim_op_ref(sim_op *op) { op->refs++; }

static void drop_deps(sim_op *op) {
  for (int i = 0; i < op->ndeps; i++) sim_op_unref(op->deps[i]);
  free(op->deps);
  op->deps = NULL;
  op->ndeps = op->cap_deps = 0;
}

void sim_args_unref(sim_args *a); /* kernel.c */

void sim_op_unref(sim_op *op) {
  if (--op->refs > 0) return;
  drop_deps(op);
  if (op->kind == SIM_OP_KERNEL && op->u.kern.args) sim_args_unref(op->u.kern.args);
  free(op);
}

int sim_op_add_dep(sim_op *op, sim_op *dep) {
  if (dep == NULL || dep->state == SIM_DONE) return 0;
  if (op->ndeps == op->cap_deps) {
    int cap = op->cap_deps ? 2 * op->cap_deps : 4;
    sim_op **d = realloc(op->deps, (size_t)cap * sizeof *d);
    if (d == NULL) return -1;
    op->deps = d;
    op->cap_deps = cap;
  }
  sim_op_ref(dep);
  op->deps[op->ndeps++] = dep;
  return 0;
}

int sim_deps_done(const sim_op *op) {
  for (int i = 0; i < op->ndeps; i++)
    if (op->deps[i]->state != SIM_DONE) return 0;
  return 1;
}

static int is_blocking(const sim_stream *s) { return !s->legacy && !(s->flags & cudaStreamNonBlocking); }

/* The legacy stream's rule, both ways. */
static void legacy_deps(sim_op *op) {
  sim_stream *s = op->stream;
  sim_device *d = s->dev;
  if (s->legacy) {
    for (sim_stream *t = d->streams; t; t = t->dev_next)
      if (is_blocking(t)) sim_op_add_dep(op, t->tail);
  } else if (is_blocking(s)) {
    sim_op_add_dep(op, d->legacy->tail);
  }
}

static void run_op(sim_op *op);
int sim_kernel_fits_now(const sim_op *op); /* kernel.c */

/* Whether op can be started by its submitter: its queue idle, its deps
 * done, and, for a kernel, room for all of its blocks now (a kernel that
 * must wait for room is left to its queue's thread). */
static int starts_now(const sim_op *op) {
  const sim_device *d = op->dev;
  int q = op->stream->queue;
  if (d->queue_busy[q] || d->queue_head[q] != NULL || !sim_deps_done(op)) return 0;
  return op->kind != SIM_OP_KERNEL || sim_kernel_fits_now(op);
}

void sim_op_submit(sim_op *op) {
  sim_stream *s = op->stream;
  sim_device *d = op->dev;
  sim_op_add_dep(op, s->tail);
  legacy_deps(op);
  op->seq = d->next_seq++;
  if (op->kind == SIM_OP_KERNEL) {
    d->kernels_pending++;
    op->u.kern.launch_no = ++d->launches;
    op->u.kern.fault = sim_fault_picks(op->u.kern.kernel, d);
  }
  op->live_prev = d->live_tail;
  if (d->live_tail) d->live_tail->live_next = op;
  else d->live_head = op;
  d->live_tail = op;
  sim_op_ref(op);
  if (s->tail) sim_op_unref(s->tail);
  s->tail = op;
  int q = s->queue;
  if (starts_now(op)) {
    /* The queue is idle and the op may start: the calling thread starts it,
     * as the queue's thread would (saves two thread wake-ups per op). */
    d->queue_busy[q] = 1;
    run_op(op);
    d->queue_busy[q] = 0;
    sim_op_unref(op);
    pthread_cond_signal(&d->queue_cv[q]);
    return;
  }
  if (d->queue_tail[q]) d->queue_tail[q]->queue_next = op;
  else d->queue_head[q] = op;
  d->queue_tail[q] = op;
  pthread_cond_signal(&d->queue_cv[q]);
}

static void free_stream_if_idle(sim_stream *s);

/* Wakes the queues whose head may have been waiting for what just changed
 * (a queue thread sleeps on its own condition; waking all of them for
 * every finished op cost more than the model's work). */
static uint64_t ops_done; /* lock held */

void sim_wake_queues(void) {
  for (int i = 0; i < sim_cfg.ndevices; i++) {
    sim_device *d = sim_device_get(i);
    for (int q = 0; d->ready && q < sim_cfg.queues; q++)
      if (d->queue_head[q] != NULL) pthread_cond_signal(&d->queue_cv[q]);
  }
}

void sim_op_done(sim_op *op) {
  sim_device *d = op->dev;
  op->state = SIM_DONE;
  op->done_ns = sim_now_ns();
  if (op->live_prev) op->live_prev->live_next = op->live_next;
  else d->live_head = op->live_next;
  if (op->live_next) op->live_next->live_prev = op->live_prev;
  else d->live_tail = op->live_prev;
  op->live_prev = op->live_next = NULL;
  if (op->kind == SIM_OP_KERNEL) d->kernels_pending--;
  ops_done++;
  if (op->stream->destroyed) free_stream_if_idle(op->stream);
  sim_wake_queues();
  pthread_cond_broadcast(&sim_changed); /* host threads waiting for work */
}

/* ---- hardware queues ------------------------------------------------------- */

typedef struct {
  sim_device *dev;
  int queue;
} queue_arg;

void sim_kernel_start(sim_op *op); /* kernel.c: joins the dispatch list */

/* A copy engine's aligned 4-byte writes are single-copy atomic: kernels
 * poll words (stop words) that a copy writes.  Small aligned copies and sets
 * move words with relaxed atomics, so that a kernel polling one reads it
 * whole (and ThreadSanitizer sees no race); the rest move as bytes. */
#define SIM_WORD_COPY_MAX 256

static int word_aligned(const void *a, const void *b, size_t n) {
  return n <= SIM_WORD_COPY_MAX && ((uintptr_t)a | (uintptr_t)b | n) % 4 == 0;
}

static void copy_bytes(void *dst, const void *src, size_t n) {
  if (!word_aligned(dst, src, n)) {
    memmove(dst, src, n);
    return;
  }
  for (size_t i = 0; i < n / 4; i++)
    __atomic_store_n((uint32_t *)dst + i, __atomic_load_n((const uint32_t *)src + i, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
}

static void set_bytes(void *dst, int value, size_t n) {
  if (!word_aligned(dst, dst, n)) {
    memset(dst, value, n);
    return;
  }
  uint32_t w = (uint8_t)value * 0x01010101u;
  for (size_t i = 0; i < n / 4; i++) __atomic_store_n((uint32_t *)dst + i, w, __ATOMIC_RELAXED);
}

/* A copy engine may touch device memory (apart.c), whichever thread runs
 * the copy: the queue's, or the caller's when it starts the op itself. */
static void engine_copy(void *dst, const void *src, size_t n) {
  unsigned was = sim_apart_open();
  copy_bytes(dst, src, n);
  sim_apart_restore(was);
}

static void engine_set(void *dst, int value, size_t n) {
  unsigned was = sim_apart_open();
  set_bytes(dst, value, n);
  sim_apart_restore(was);
}

/* Runs op (popped from its queue, deps done); returns with the lock held.
 * A lost context runs nothing more: its queued work completes unrun. */
static void run_op(sim_op *op) {
  drop_deps(op);
  op->state = SIM_STARTED;
  if (op->kind == SIM_OP_KERNEL && op->u.kern.fault) sim_fault_device(op->dev, op);
  if (sim_sticky(op->dev) != cudaSuccess) {
    sim_op_done(op);
    return;
  }
  switch (op->kind) {
  case SIM_OP_KERNEL:
    sim_op_ref(op); /* the dispatch list's */
    sim_kernel_start(op);
    /* The queue moves on once every block is placed, not finished. */
    while (op->u.kern.dispatched < op->u.kern.nblocks) pthread_cond_wait(&op->dev->queue_cv[op->stream->queue], &sim_lock);
    break;
  case SIM_OP_COPY:
    pthread_mutex_unlock(&sim_lock);
    engine_copy(op->u.copy.dst, op->u.copy.src, op->u.copy.bytes);
    pthread_mutex_lock(&sim_lock);
    sim_op_done(op);
    break;
  case SIM_OP_SET:
    pthread_mutex_unlock(&sim_lock);
    engine_set(op->u.set.dst, op->u.set.value, op->u.set.bytes);
    pthread_mutex_lock(&sim_lock);
    sim_op_done(op);
    break;
  default:
    sim_op_done(op);
    break;
  }
}

static void *queue_main(void *arg) {
  queue_arg a = *(queue_arg *)arg;
  free(arg);
  sim_device *d = a.dev;
  int q = a.queue;
  pthread_mutex_lock(&sim_lock);
  for (;;) {
    sim_op *op = d->queue_head[q];
    if (op == NULL || d->queue_busy[q] || !sim_deps_done(op)) {
      pthread_cond_wait(&d->queue_cv[q], &sim_lock);
      continue;
    }
    d->queue_head[q] = op->queue_next;
    if (d->queue_head[q] == NULL) d->queue_tail[q] = NULL;
    op->queue_next = NULL;
    d->queue_busy[q] = 1;
    run_op(op);
    d->queue_busy[q] = 0;
    sim_op_unref(op); /* the queue's reference */
  }
  return NULL;
}

static sim_stream *stream_new(sim_device *d, int flags, int legacy);

cudaError_t sim_device_start(sim_device *d) {
  if (d->ready) return cudaSuccess;
  d->ordinal = (int)(d - sim_device_get(0));
  d->sm = calloc((size_t)sim_cfg.sms, sizeof *d->sm);
  d->legacy = d->sm ? stream_new(d, 0, 1) : NULL;
  if (d->sm == NULL || d->legacy == NULL) return cudaErrorMemoryAllocation;
  for (int q = 0; q < sim_cfg.queues; q++) pthread_cond_init(&d->queue_cv[q], NULL);
  for (int q = 0; q < sim_cfg.queues; q++) {
    queue_arg *a = malloc(sizeof *a);
    if (a == NULL) return cudaErrorMemoryAllocation;
    *a = (queue_arg){d, q};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&d->queue_thread[q], &attr, queue_main, a);
    pthread_attr_destroy(&attr);
    if (rc == 0) sim_name_thread(d->queue_thread[q], "queue");
    if (rc != 0) {
      free(a);
      return cudaErrorInitializationError;
    }
  }
  d->ready = 1;
  return cudaSuccess;
}

void sim_device_wait(sim_device *d) {
  pthread_mutex_lock(&sim_lock);
  uint64_t upto = d->next_seq;
  while (d->live_head != NULL && d->live_head->seq < upto) pthread_cond_wait(&sim_changed, &sim_lock);
  pthread_mutex_unlock(&sim_lock);
}

/* ---- streams ----------------------------------------------------------------- */

static sim_stream *stream_new(sim_device *d, int flags, int legacy) {
  sim_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->magic = STREAM_MAGIC;
  s->dev = d;
  s->flags = flags;
  s->legacy = legacy;
  s->queue = d->streams_made++ % sim_cfg.queues;
  s->dev_next = d->streams;
  d->streams = s;
  return s;
}

static void free_stream_if_idle(sim_stream *s) {
  if (s->tail != NULL && s->tail->state != SIM_DONE) return;
  if (s->tail) sim_op_unref(s->tail);
  s->magic = 0;
  free(s);
}

/* Whether h is a live stream of some device (lock held). */
static int stream_live(const sim_stream *h) {
  for (int i = 0; i < sim_cfg.ndevices; i++)
    for (sim_stream *t = sim_device_get(i)->streams; t; t = t->dev_next)
      if (t == h) return 1;
  return 0;
}

sim_stream *sim_stream_get(cudaStream_t h) {
  sim_device *d;
  if (sim_current(&d) != cudaSuccess) return NULL;
  pthread_mutex_lock(&sim_lock);
  sim_stream *s = NULL;
  if (h == NULL || h == cudaStreamLegacy) {
    s = d->legacy;
  } else if (h == cudaStreamPerThread) {
    sim_thread_state *t = sim_thread();
    if (t->per_thread[d->ordinal] == NULL) t->per_thread[d->ordinal] = stream_new(d, 0, 0);
    s = t->per_thread[d->ordinal];
  } else if (stream_live((sim_stream *)h)) {
    s = (sim_stream *)h;
  }
  pthread_mutex_unlock(&sim_lock);
  return s;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags) {
  if (out == NULL || (flags & ~(unsigned)cudaStreamNonBlocking)) return sim_ret(cudaErrorInvalidValue);
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e == cudaSuccess) e = sim_sticky(d);
  if (e != cudaSuccess) return sim_ret(e);
  pthread_mutex_lock(&sim_lock);
  sim_stream *s = stream_new(d, (int)flags, 0);
  pthread_mutex_unlock(&sim_lock);
  if (s == NULL) return sim_ret(cudaErrorMemoryAllocation);
  *out = (cudaStream_t)s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned flags, int priority) {
  cudaError_t e = cudaStreamCreateWithFlags(out, flags);
  if (e == cudaSuccess) ((sim_stream *)*out)->priority = priority; /* accepted, not modelled */
  return e;
}

/* CUDA returns at once and frees the stream when its work is done. */
cudaError_t cudaStreamDestroy(cudaStream_t h) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread) return sim_ret(cudaErrorInvalidResourceHandle);
  pthread_mutex_lock(&sim_lock);
  sim_stream *s = (sim_stream *)h;
  if (!stream_live(s)) {
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(cudaErrorInvalidResourceHandle);
  }
  for (sim_stream **pp = &s->dev->streams; *pp; pp = &(*pp)->dev_next)
    if (*pp == s) {
      *pp = s->dev_next;
      break;
    }
  s->destroyed = 1;
  cudaError_t sticky = sim_sticky(s->dev);
  free_stream_if_idle(s);
  pthread_mutex_unlock(&sim_lock);
  return sim_ret(sticky); /* freed all the same: a lost context's work is done */
}

void sim_stream_wait(sim_stream *s) {
  pthread_mutex_lock(&sim_lock);
  sim_op *tail = s->tail;
  if (tail) {
    sim_op_ref(tail);
    while (tail->state != SIM_DONE) pthread_cond_wait(&sim_changed, &sim_lock);
    sim_op_unref(tail);
  }
  pthread_mutex_unlock(&sim_lock);
}

cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  if (sim_capture_forbids(s)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  sim_stream_wait(s);
  return sim_ret(sim_sticky(s->dev));
}

cudaError_t cudaStreamQuery(cudaStream_t h) {
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return sim_ret(sim_init() != cudaSuccess ? sim_init() : cudaErrorInvalidResourceHandle);
  if (sim_capture_forbids(s)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  pthread_mutex_lock(&sim_lock);
  int busy = s->tail != NULL && s->tail->state != SIM_DONE;
  pthread_mutex_unlock(&sim_lock);
  if (sim_sticky(s->dev) != cudaSuccess) return sim_ret(sim_sticky(s->dev));
  return busy ? sim_ret(cudaErrorNotReady) : cudaSuccess;
}

/* ---- copies and sets ---------------------------------------------------------- */

/* A GPU's launch queue is finite: the host blocks in the launch while
 * KOLO_SIM_MAX_PENDING kernels of the device are not done (lock held). */
static void wait_launch_room(sim_device *d) {
  while (d->kernels_pending >= __atomic_load_n(&sim_cfg.max_pending, __ATOMIC_RELAXED) &&
         sim_sticky(d) == cudaSuccess)
    pthread_cond_wait(&sim_changed, &sim_lock);
}

void kolo_sim_set_max_pending(int n) {
  sim_init();
  if (n >= 1) __atomic_store_n(&sim_cfg.max_pending, n, __ATOMIC_RELAXED);
  pthread_mutex_lock(&sim_lock);
  pthread_cond_broadcast(&sim_changed); /* launches waiting for a smaller bound */
  pthread_mutex_unlock(&sim_lock);
}

/* Enqueues op on s, or adds it to s's capture; frees op on failure.  A
 * lost context takes no work. */
cudaError_t sim_enqueue(sim_stream *s, sim_op *op) {
  pthread_mutex_lock(&sim_lock);
  if (!s->capture && op->kind == SIM_OP_KERNEL) wait_launch_room(s->dev);
  cudaError_t e = sim_sticky(s->dev);
  if (e != cudaSuccess) {
    sim_op_unref(op);
  } else if (s->capture) {
    e = sim_capture_add(s, op);
    sim_op_unref(op);
  } else {
    sim_op_submit(op);
  }
  pthread_mutex_unlock(&sim_lock);
  return e;
}

/* Whether [p, p + n) may be the device side of a copy: memory the model made
 * (device, imported or pinned), with n bytes of room. */
static int device_side_ok(const void *p, size_t n) {
  size_t room = 0;
  return sim_mem_kind(p, NULL, &room) != 0 && room >= n;
}

/* Ordinary host memory, or memory of the model with room for n bytes. */
static int host_side_ok(const void *p, size_t n) {
  size_t room = 0;
  return sim_mem_kind(p, NULL, &room) == 0 || room >= n;
}

static cudaError_t check_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  if (dst == NULL || src == NULL) return cudaErrorInvalidValue;
  int dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  int dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault && kind != cudaMemcpyHostToHost && !dev_src && !dev_dst)
    return cudaErrorInvalidMemcpyDirection;
  if (dev_src ? !device_side_ok(src, n) : !host_side_ok(src, n)) return cudaErrorInvalidValue;
  if (dev_dst ? !device_side_ok(dst, n) : !host_side_ok(dst, n)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

static cudaError_t copy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t h,
                              sim_stream **used) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  if ((e = check_copy(dst, src, n, kind)) != cudaSuccess) return e;
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return cudaErrorInvalidResourceHandle;
  sim_op *op = sim_op_new(SIM_OP_COPY, s);
  if (op == NULL) return cudaErrorMemoryAllocation;
  op->u.copy.dst = dst;
  op->u.copy.src = src;
  op->u.copy.bytes = n;
  if (used) *used = s;
  return sim_enqueue(s, op);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t h) {
  return sim_ret(copy_async(dst, src, n, kind, h, NULL));
}

/* On the legacy stream, and the host waits for it. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  sim_stream *s = NULL;
  e = copy_async(dst, src, n, kind, NULL, &s);
  if (e == cudaSuccess && s) sim_stream_wait(s);
  if (e == cudaSuccess && s) e = sim_sticky(s->dev);
  return sim_ret(e);
}

static cudaError_t set_async(void *dst, int value, size_t n, cudaStream_t h) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  if (!device_side_ok(dst, n)) return cudaErrorInvalidValue;
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return cudaErrorInvalidResourceHandle;
  sim_op *op = sim_op_new(SIM_OP_SET, s);
  if (op == NULL) return cudaErrorMemoryAllocation;
  op->u.set.dst = dst;
  op->u.set.value = value;
  op->u.set.bytes = n;
  return sim_enqueue(s, op);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t h) {
  return sim_ret(set_async(dst, value, n, h));
}

/* On the legacy stream; asynchronous to the host for device memory, as in
 * CUDA, but ordered with every blocking stream of the device. */
cudaError_t cudaMemset(void *dst, int value, size_t n) {
  if (sim_init() == cudaSuccess && sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  return sim_ret(set_async(dst, value, n, NULL));
}

/* ---- debugging --------------------------------------------------------------- */

static const char *kind_name(int k) {
  return k == SIM_OP_KERNEL ? "kernel" : k == SIM_OP_COPY ? "copy" : k == SIM_OP_SET ? "set" : "mark";
}

/* Prints the device's queues, their heads and what they wait for (for a
 * debugger: `call kolo_sim_dump()`; also on a hang, see KOLO_SIM_WATCHDOG). */
static void dump_locked(void) {
  for (int i = 0; i < sim_cfg.ndevices; i++) {
    sim_device *d = sim_device_get(i);
    if (!d->ready) continue;
    fprintf(stderr, "kolo cuda model: device %d, ops not done:", i);
    int n = 0;
    for (sim_op *op = d->live_head; op; op = op->live_next) n++;
    fprintf(stderr, " %d\n", n);
    for (int q = 0; q < sim_cfg.queues; q++) {
      sim_op *op = d->queue_head[q];
      if (op == NULL && !d->queue_busy[q]) continue;
      fprintf(stderr, "  queue %d%s: head %s (stream %p, seq %llu)", q, d->queue_busy[q] ? " busy" : "",
              op ? kind_name(op->kind) : "-", op ? (void *)op->stream : NULL, op ? (unsigned long long)op->seq : 0ull);
      for (int k = 0; op && k < op->ndeps; k++)
        if (op->deps[k]->state != SIM_DONE)
          fprintf(stderr, " waits for %s seq %llu (stream %p, %s)", kind_name(op->deps[k]->kind),
                  (unsigned long long)op->deps[k]->seq, (void *)op->deps[k]->stream,
                  op->deps[k]->state == SIM_STARTED ? "started" : "queued");
      fprintf(stderr, "\n");
    }
    for (sim_op *op = d->live_head; op; op = op->live_next)
      if (op->state == SIM_STARTED)
        fprintf(stderr, "  running: %s seq %llu stream %p queue %d\n", kind_name(op->kind),
                (unsigned long long)op->seq, (void *)op->stream, op->stream->queue);
  }
}

void kolo_sim_dump(void) {
  pthread_mutex_lock(&sim_lock);
  dump_locked();
  pthread_mutex_unlock(&sim_lock);
}

static int any_pending(void) {
  for (int i = 0; i < sim_cfg.ndevices; i++)
    if (sim_device_get(i)->live_head != NULL) return 1;
  return 0;
}

static void *watchdog_main(void *arg) {
  int secs = (int)(intptr_t)arg;
  uint64_t seen = 0;
  int quiet = 0, dumped = 0;
  for (;;) {
    sleep(1);
    pthread_mutex_lock(&sim_lock);
    int pending = any_pending();
    if (ops_done != seen || !pending) quiet = dumped = 0;
    else if (++quiet >= secs && !dumped) {
      fprintf(stderr, "kolo cuda model: watchdog: no op finished for %d s\n", quiet);
      dump_locked();
      dumped = 1;
    }
    seen = ops_done;
    pthread_mutex_unlock(&sim_lock);
  }
  return NULL;
}

void sim_watchdog_start(int secs) {
  pthread_t th;
  if (secs > 0 && pthread_create(&th, NULL, watchdog_main, (void *)(intptr_t)secs) == 0) {
    sim_name_thread(th, "watchdog");
    pthread_detach(th);
  }
}
