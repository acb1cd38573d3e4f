/* kolo_backend.c - the sweep's ops over a kolo communicator, and -T's watchdog. */
#define _GNU_SOURCE /* nanosleep */
#include "perf/kolo_backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/perf_check.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

int kolo_backend_report(int rank, koloComm_t comm, koloResult_t res, const char *what) {
  const char *detail = koloGetLastError(comm);
  char who[32] = "kolo-perf";
  if (rank >= 0) snprintf(who, sizeof who, "rank %d", rank);
  fprintf(stderr, "%s: %s failed: %s%s%s\n", who, what, koloGetErrorString(res), detail && *detail ? ": " : "",
          detail ? detail : "");
  return -1;
}

static int check_res(kolo_backend *kb, koloResult_t res, const char *what) {
  return res == koloSuccess ? 0 : kolo_backend_report(kb->rank, kb->comm, res, what);
}

#ifdef KOLO_HAVE_CUDA
static int check_cuda(kolo_backend *kb, cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  fprintf(stderr, "rank %d: %s failed: %s\n", kb->rank, what, cudaGetErrorString(err));
  return -1;
}
#endif

/* ---- -T: the watchdog ------------------------------------------------------
 * A row (one size, one placement) that runs longer than the timeout revokes
 * its rank's communicator, so that the call in flight fails, the rank says
 * so and the job ends (exit 2), as nccl-tests' -T aborts its communicators.
 * One watchdog thread per process, started by the first rank that asks;
 * every rank has a slot.  A slot or thread that cannot be had is said on
 * stderr, and the run goes on unwatched rather than failing. */
#define WATCH_SLOTS 4096
#define WATCH_PERIOD_NS (50 * 1000 * 1000)

typedef struct perf_watch {
  koloComm_t comm; /* NULL: a free slot */
  int rank;
  _Atomic size_t bytes;     /* the row running, 0 for none */
  _Atomic int64_t since_ms; /* when it started */
  int fired;                /* revoked already */
} perf_watch;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static perf_watch slots[WATCH_SLOTS];
static int timeout_ms;  /* 0 until the thread runs */

/* Under the lock: revokes the communicator of a slot past its time. */
static void check_slot(perf_watch *w, int64_t now) {
  size_t bytes = atomic_load(&w->bytes);
  if (w->comm == NULL || w->fired || bytes == 0 || now - atomic_load(&w->since_ms) <= timeout_ms) return;
  w->fired = 1;
  fprintf(stderr,
          "rank %d: test timeout: the %zu-byte row has run for more than %d s (-T %d); revoking the "
          "communicator\n", w->rank, bytes, timeout_ms / 1000, timeout_ms / 1000);
  koloResult_t res = koloCommRevoke(w->comm, KOLO_REVOKE_DEFAULT);
  if (res != koloSuccess)
    fprintf(stderr, "rank %d: koloCommRevoke failed: %s: %s\n", w->rank, koloGetErrorString(res),
            koloGetLastError(w->comm));
}

static void *watch_thread(void *arg) {
  (void)arg;
  struct timespec period = {0, WATCH_PERIOD_NS};
  for (;;) {
    nanosleep(&period, NULL);
    pthread_mutex_lock(&lock);
    int64_t now = (int64_t)(perf_now_us() / 1000);
    for (int i = 0; i < WATCH_SLOTS; i++) check_slot(&slots[i], now);
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

/* Under the lock: the thread, once per process (a forked rank starts its own). */
static int start_thread(int timeout_s) {
  if (timeout_ms > 0) return 0;
  pthread_t th;
  int err = pthread_create(&th, NULL, watch_thread, NULL);
  if (err == 0) err = pthread_detach(th);
  if (err != 0) {
    fprintf(stderr, "kolo-perf: -T: cannot start the watchdog thread: %s (running without a timeout)\n",
            strerror(err));
    return -1;
  }
  timeout_ms = timeout_s * 1000;
  return 0;
}

static perf_watch *perf_watch_add(koloComm_t comm, int rank, int timeout_s) {
  if (timeout_s <= 0) return NULL;
  perf_watch *w = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < WATCH_SLOTS && w == NULL; i++)
    if (slots[i].comm == NULL) w = &slots[i];
  if (w == NULL)
    fprintf(stderr, "rank %d: -T: more than %d ranks in one process: this one is not watched\n", rank, WATCH_SLOTS);
  else if (start_thread(timeout_s) != 0)
    w = NULL;
  else
    *w = (perf_watch){.comm = comm, .rank = rank};
  pthread_mutex_unlock(&lock);
  return w;
}

static void perf_watch_remove(perf_watch *w) {
  if (w == NULL) return;
  pthread_mutex_lock(&lock);
  w->comm = NULL;
  atomic_store(&w->bytes, 0);
  pthread_mutex_unlock(&lock);
}

static void perf_watch_row(perf_watch *w, size_t bytes) {
  if (w == NULL) return;
  atomic_store(&w->since_ms, (int64_t)(perf_now_us() / 1000));
  atomic_store(&w->bytes, bytes);
}

/* ---- the collective under test ------------------------------------------ */

static koloResult_t run_sendrecv(kolo_backend *kb, const perf_call *c) {
  koloDataType_t t = (koloDataType_t)c->type;
  koloResult_t res = koloGroupStart();
  if (res != koloSuccess) return res;
  koloResult_t rs = koloSend(c->send, c->count, t, c->send_peer, kb->comm, kb->stream);
  koloResult_t rr = koloRecv(c->recv, c->count, t, c->recv_peer, kb->comm, kb->stream);
  res = koloGroupEnd(); /* always, to close the group */
  return rs != koloSuccess ? rs : rr != koloSuccess ? rr : res;
}

/* The op of a call: c->op, or for mulsum a premul-sum made for the call
 * with this rank's scalar (nccl-tests makes one per call too). */
static koloResult_t call_op(kolo_backend *kb, const perf_call *c, koloRedOp_t *op) {
  *op = (koloRedOp_t)c->op;
  if (c->op != PERF_MULSUM || !perf_coll_has_op(c->coll)) return koloSuccess;
  uint64_t scalar = 0;
  perf_store(c->type, &scalar, 0, perf_premul_scalar(kb->rank));
  return koloRedOpCreatePreMulSum(op, &scalar, (koloDataType_t)c->type, koloScalarHostImmediate, kb->comm);
}

static koloResult_t run_coll(kolo_backend *kb, const perf_call *c, koloRedOp_t op, const char **what);

static int kb_run(void *ctx, const perf_call *c) {
  kolo_backend *kb = ctx;
  koloRedOp_t op;
  const char *what = "koloRedOpCreatePreMulSum";
  koloResult_t res = call_op(kb, c, &op);
  if (res == koloSuccess) res = run_coll(kb, c, op, &what);
  if (op != (koloRedOp_t)c->op) {
    koloResult_t d = koloRedOpDestroy(op, kb->comm);
    if (res == koloSuccess && d != koloSuccess) return check_res(kb, d, "koloRedOpDestroy");
  }
  if (res == koloSuccess) return 0;
  char msg[128];
  snprintf(msg, sizeof msg, "%s(count %zu, %s)", what, c->count, perf_type_name(c->type));
  return check_res(kb, res, msg);
}

/* kolo's name of each perf_coll's call, for the sentence of a failed one. */
static const char *const call_names[PERF_NUM_COLLS] = {
    [PERF_ALL_REDUCE] = "koloAllReduce", [PERF_REDUCE_SCATTER] = "koloReduceScatter",
    [PERF_ALL_GATHER] = "koloAllGather", [PERF_BROADCAST] = "koloBroadcast", [PERF_REDUCE] = "koloReduce",
    [PERF_SENDRECV] = "koloSend/koloRecv group", [PERF_ALL_TO_ALL] = "koloAlltoAll", [PERF_GATHER] = "koloGather",
    [PERF_SCATTER] = "koloScatter"};

static koloResult_t run_coll(kolo_backend *kb, const perf_call *c, koloRedOp_t op, const char **what) {
  koloDataType_t t = (koloDataType_t)c->type;
  *what = call_names[c->coll];
  switch (c->coll) {
    case PERF_ALL_REDUCE: return koloAllReduce(c->send, c->recv, c->count, t, op, kb->comm, kb->stream);
    case PERF_REDUCE_SCATTER: return koloReduceScatter(c->send, c->recv, c->count, t, op, kb->comm, kb->stream);
    case PERF_ALL_GATHER: return koloAllGather(c->send, c->recv, c->count, t, kb->comm, kb->stream);
    case PERF_BROADCAST: return koloBroadcast(c->send, c->recv, c->count, t, c->root, kb->comm, kb->stream);
    case PERF_REDUCE: return koloReduce(c->send, c->recv, c->count, t, op, c->root, kb->comm, kb->stream);
    case PERF_ALL_TO_ALL: return koloAlltoAll(c->send, c->recv, c->count, t, kb->comm, kb->stream);
    case PERF_GATHER: return koloGather(c->send, c->recv, c->count, t, c->root, kb->comm, kb->stream);
    case PERF_SCATTER: return koloScatter(c->send, c->recv, c->count, t, c->root, kb->comm, kb->stream);
    default: return run_sendrecv(kb, c);
  }
}

/* -m's groups, and -T's rows. */
static int kb_group_start(void *ctx) { return check_res(ctx, koloGroupStart(), "koloGroupStart"); }
static int kb_group_end(void *ctx) { return check_res(ctx, koloGroupEnd(), "koloGroupEnd"); }
static void kb_row_mark(void *ctx, size_t bytes) { perf_watch_row(((kolo_backend *)ctx)->watch, bytes); }

/* ---- small calls: host memory passes the caller's arrays as they are ---- */

#ifdef KOLO_HAVE_CUDA
static cudaStream_t stream_of(const kolo_backend *kb) { return (cudaStream_t)kb->stream; }

/* After the stream drained: an error the kernels recorded (a peer that
 * stopped, a timeout) shows in the communicator's asynchronous error. */
static int async_error(kolo_backend *kb) {
  koloResult_t async = koloSuccess;
  koloResult_t res = koloCommGetAsyncError(kb->comm, &async);
  if (res != koloSuccess) return check_res(kb, res, "koloCommGetAsyncError");
  if (async == koloSuccess || async == koloInProgress) return 0;
  return check_res(kb, async, "a call on the stream (koloCommGetAsyncError)");
}

static int kb_wait(void *ctx) {
  kolo_backend *kb = ctx;
  return check_cuda(kb, cudaStreamSynchronize(stream_of(kb)), "cudaStreamSynchronize") != 0 ? -1 : async_error(kb);
}

/* Host <-> device on the rank's stream, complete on return: copies on the
 * legacy default stream would not be ordered with a non-blocking stream. */
static int copy_sync(kolo_backend *kb, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
  if (check_cuda(kb, cudaMemcpyAsync(dst, src, bytes, kind, stream_of(kb)), "cudaMemcpyAsync") != 0) return -1;
  return check_cuda(kb, cudaStreamSynchronize(stream_of(kb)), "cudaStreamSynchronize");
}

/* Device staging of the small calls (the timing exchange, the info
 * allgather), allocated once at init: growing it later would call cudaFree,
 * which waits for the whole device, where the kernels of this process's
 * other ranks may be spinning for this one's next call (seen on the CUDA
 * model: a 2 s stall that ended in koloTimeout). */
#define KB_SCRATCH_BYTES (64 * 1024)

static void *staging(kolo_backend *kb, size_t bytes) {
  if (bytes <= kb->scratch_bytes) return kb->scratch;
  fprintf(stderr, "rank %d: a %zu-byte exchange does not fit the %zu-byte device staging buffer (a kolo-perf bug)\n",
          kb->rank, bytes, kb->scratch_bytes);
  return NULL;
}
#endif

static int kb_allreduce_double(void *ctx, double *v, int n, int max) {
  kolo_backend *kb = ctx;
  koloRedOp_t op = max ? koloMax : koloSum;
  if (!kb->cuda) return check_res(kb, koloAllReduce(v, v, (size_t)n, koloFloat64, op, kb->comm, NULL), "koloAllReduce(double)");
#ifdef KOLO_HAVE_CUDA
  size_t bytes = (size_t)n * sizeof *v;
  void *d = staging(kb, bytes);
  if (d == NULL || copy_sync(kb, d, v, bytes, cudaMemcpyHostToDevice) != 0 ||
      check_res(kb, koloAllReduce(d, d, (size_t)n, koloFloat64, op, kb->comm, kb->stream), "koloAllReduce(double)") != 0 ||
      kb_wait(kb) != 0)
    return -1;
  return copy_sync(kb, v, d, bytes, cudaMemcpyDeviceToHost);
#endif
  return -1;
}

static int kb_allgather_bytes(void *ctx, const void *mine, void *all, size_t bytes) {
  kolo_backend *kb = ctx;
  if (!kb->cuda) return check_res(kb, koloAllGather(mine, all, bytes, koloUint8, kb->comm, NULL), "koloAllGather(info)");
#ifdef KOLO_HAVE_CUDA
  size_t total = bytes * (size_t)kb->nranks;
  char *d = staging(kb, total);
  char *dmine = d ? d + (size_t)kb->rank * bytes : NULL; /* in place */
  if (d == NULL || copy_sync(kb, dmine, mine, bytes, cudaMemcpyHostToDevice) != 0 ||
      check_res(kb, koloAllGather(dmine, d, bytes, koloUint8, kb->comm, kb->stream), "koloAllGather(info)") != 0 ||
      kb_wait(kb) != 0)
    return -1;
  return copy_sync(kb, all, d, total, cudaMemcpyDeviceToHost);
#endif
  return -1;
}

/* ---- buffers ------------------------------------------------------------ */

static void *kb_alloc(void *ctx, size_t bytes) {
  kolo_backend *kb = ctx;
  size_t b = bytes < 4096 ? 4096 : (bytes + 4095) & ~(size_t)4095;
  void *p = NULL;
#ifdef KOLO_HAVE_CUDA
  if (kb->cuda) return check_cuda(kb, cudaMalloc(&p, b), "cudaMalloc") == 0 ? p : NULL;
#endif
  p = aligned_alloc(4096, b);
  if (p == NULL) fprintf(stderr, "rank %d: out of memory for a %zu-byte buffer\n", kb->rank, b);
  return p;
}

static void kb_release(void *ctx, void *p) {
#ifdef KOLO_HAVE_CUDA
  if (((kolo_backend *)ctx)->cuda) {
    cudaFree(p);
    return;
  }
#endif
  (void)ctx;
  free(p);
}

#ifdef KOLO_HAVE_CUDA
static int kb_copy(void *ctx, void *dst, const void *src, size_t bytes, int to_dev) {
  return copy_sync(ctx, dst, src, bytes, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
}

/* ---- timing and graphs (cuda) ------------------------------------------- */

static int kb_time_start(void *ctx) {
  kolo_backend *kb = ctx;
  return check_cuda(kb, cudaEventRecord((cudaEvent_t)kb->ev_start, stream_of(kb)), "cudaEventRecord");
}

static int kb_time_stop(void *ctx, double *us) {
  kolo_backend *kb = ctx;
  cudaEvent_t start = (cudaEvent_t)kb->ev_start, stop = (cudaEvent_t)kb->ev_stop;
  float ms = 0;
  if (check_cuda(kb, cudaEventRecord(stop, stream_of(kb)), "cudaEventRecord") != 0 ||
      check_cuda(kb, cudaEventSynchronize(stop), "cudaEventSynchronize") != 0 ||
      check_cuda(kb, cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime") != 0 || async_error(kb) != 0)
    return -1;
  *us = (double)ms * 1e3;
  return 0;
}

static void kb_graph_free(void *ctx) {
  kolo_backend *kb = ctx;
  if (kb->graph) cudaGraphExecDestroy((cudaGraphExec_t)kb->graph);
  kb->graph = NULL;
}

static int kb_capture_begin(void *ctx) {
  kolo_backend *kb = ctx;
  kb_graph_free(kb);
  /* thread-local: other ranks' threads may allocate while this one captures */
  return check_cuda(kb, cudaStreamBeginCapture(stream_of(kb), cudaStreamCaptureModeThreadLocal),
                    "cudaStreamBeginCapture");
}

static int kb_capture_end(void *ctx, int discard) {
  kolo_backend *kb = ctx;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  cudaError_t err = cudaStreamEndCapture(stream_of(kb), &graph);
  if (discard || check_cuda(kb, err, "cudaStreamEndCapture (a call on the stream could not be captured)") != 0) {
    if (graph) cudaGraphDestroy(graph);
    return discard ? 0 : -1;
  }
#if CUDART_VERSION >= 12000
  err = cudaGraphInstantiate(&exec, graph, 0);
#else
  err = cudaGraphInstantiate(&exec, graph, NULL, NULL, 0);
#endif
  cudaGraphDestroy(graph);
  if (check_cuda(kb, err, "cudaGraphInstantiate") != 0) return -1;
  kb->graph = exec;
  /* the upload happens here, not in the timed launch */
  return check_cuda(kb, cudaGraphUpload(exec, stream_of(kb)), "cudaGraphUpload");
}

static int kb_graph_launch(void *ctx) {
  kolo_backend *kb = ctx;
  if (kb->graph == NULL) {
    fprintf(stderr, "rank %d: no graph to launch\n", kb->rank);
    return -1;
  }
  return check_cuda(kb, cudaGraphLaunch((cudaGraphExec_t)kb->graph, stream_of(kb)), "cudaGraphLaunch");
}

/* The rank's stream and events, and the ops that use them. */
static int cuda_init(kolo_backend *kb, perf_backend *be) {
  cudaStream_t s;
  cudaEvent_t start, stop;
  if (check_cuda(kb, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") != 0) return -1;
  kb->stream = (koloStream_t)s;
  if (check_cuda(kb, cudaEventCreate(&start), "cudaEventCreate") != 0) return -1;
  kb->ev_start = start;
  if (check_cuda(kb, cudaEventCreate(&stop), "cudaEventCreate") != 0) return -1;
  kb->ev_stop = stop;
  if (check_cuda(kb, cudaMalloc(&kb->scratch, KB_SCRATCH_BYTES), "cudaMalloc") != 0) return -1;
  kb->scratch_bytes = KB_SCRATCH_BYTES;
  be->wait = kb_wait;
  be->copy = kb_copy;
  be->time_start = kb_time_start;
  be->time_stop = kb_time_stop;
  be->capture_begin = kb_capture_begin;
  be->capture_end = kb_capture_end;
  be->graph_launch = kb_graph_launch;
  be->graph_free = kb_graph_free;
  return 0;
}
#endif

/* ---- setup -------------------------------------------------------------- */

int kolo_backend_init(kolo_backend *kb, perf_backend *be, koloComm_t comm, int cuda, int timeout_s) {
  *kb = (kolo_backend){.comm = comm, .cuda = cuda};
  koloResult_t res = koloCommUserRank(comm, &kb->rank);
  if (res == koloSuccess) res = koloCommCount(comm, &kb->nranks);
  if (res != koloSuccess) return kolo_backend_report(-1, comm, res, "koloCommUserRank/koloCommCount");
  *be = (perf_backend){.ctx = kb, .rank = kb->rank, .nranks = kb->nranks, .run = kb_run,
                       .allreduce_double = kb_allreduce_double, .allgather_bytes = kb_allgather_bytes,
                       .alloc = kb_alloc, .release = kb_release, .group_start = kb_group_start,
                       .group_end = kb_group_end, .row_mark = kb_row_mark};
  kb->watch = perf_watch_add(comm, kb->rank, timeout_s);
  if (!cuda) return 0;
#ifdef KOLO_HAVE_CUDA
  if (cuda_init(kb, be) == 0) return 0;
  kolo_backend_fini(kb);
  return -1;
#else
  fprintf(stderr, "rank %d: --mem cuda: this kolo-perf was built without CUDA\n", kb->rank);
  return -1;
#endif
}

void kolo_backend_fini(kolo_backend *kb) {
  perf_watch_remove(kb->watch);
  kb->watch = NULL;
#ifdef KOLO_HAVE_CUDA
  kb_graph_free(kb);
  if (kb->ev_stop) cudaEventDestroy((cudaEvent_t)kb->ev_stop);
  if (kb->ev_start) cudaEventDestroy((cudaEvent_t)kb->ev_start);
  if (kb->scratch) cudaFree(kb->scratch);
  if (kb->stream) cudaStreamDestroy((cudaStream_t)kb->stream);
#endif
  kb->ev_start = kb->ev_stop = kb->scratch = NULL;
  kb->stream = NULL;
}
