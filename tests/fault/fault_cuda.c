/* fault_cuda.c - kolo-fault's ranks with CUDA communicators (--mem cuda):
 * every call's buffers are device memory (cudaMalloc; on the CPU model of
 * the GPU, shared-memory objects that the peers open through CUDA IPC), the
 * call is enqueued on the rank's stream, and the rank waits for the stream
 * and asks koloCommGetAsyncError, as a CUDA program does: a peer that died
 * or stopped shows as the kernel giving up (timeout, or a peer's stop word).
 * The parent's side: the model's segments (/dev/shm/cudasim-<pid>-<n>) a
 * trial's ranks left.  Threads the CUDA runtime keeps (the model's queues
 * and block runners, named "ksim-*") are not counted as the rank's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fault_rank.h"
#include "fault_util.h"

/* ---- the parent's side: the model's segments ------------------------------------ */

/* The creator pid of "cudasim-<pid>-<n>", or -1. */
static long sim_creator(const char *name) {
  if (strncmp(name, "cudasim-", 8) != 0) return -1;
  char *end = NULL;
  long pid = strtol(name + 8, &end, 10);
  return end != NULL && *end == '-' ? pid : -1;
}

int fault_cuda_segments_of(const pid_t *pids, int n, pid_t not_counted) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return -1;
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid = sim_creator(e->d_name);
    int ours = 0;
    for (int i = 0; pid > 0 && i < n; i++) ours |= pids[i] == pid;
    if (!ours) continue;
    count += pid != not_counted;
    /* the ranks have ended: what a GPU driver frees at exit (the model's
     * next process would sweep it) */
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) != 0) perror("kolo-fault: shm_unlink");
  }
  closedir(d);
  return count;
}

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime_api.h>

/* A stream that has not finished this long after its call ended the rank's
 * wait: the parent's deadline reports the hang long before. */
#define STREAM_LIMIT_MS 60000
#define SIM_THREAD_PREFIX "ksim-"

typedef struct {
  cudaStream_t stream;
  int dev;
} cuda_ctx;

/* ---- setup ------------------------------------------------------------------------ */

static int cuda_setup(void *arg, koloConfig_t *cfg, char *why, size_t len) {
  cuda_ctx *cx = arg;
  cudaError_t e = cudaSetDevice(cx->dev);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    snprintf(why, len, "CUDA device %d: %s", cx->dev, cudaGetErrorString(e));
    return -1;
  }
  cfg->memory = koloMemCuda;
  cfg->cudaDev = cx->dev;
  return 0;
}

static void cuda_teardown(void *arg) {
  cuda_ctx *cx = arg;
  if (cx->stream != NULL && cudaStreamDestroy(cx->stream) != cudaSuccess)
    fprintf(stderr, "fault_cuda: cudaStreamDestroy failed\n");
  cx->stream = NULL;
}

/* Threads but the model's own ("ksim-*"); -1 if unreadable. */
static int cuda_count_threads(void *arg) {
  (void)arg;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f != NULL && fgets(name, sizeof name, f) == NULL) name[0] = 0;
    if (f != NULL) fclose(f);
    n += strncmp(name, SIM_THREAD_PREFIX, strlen(SIM_THREAD_PREFIX)) != 0;
  }
  closedir(d);
  return n;
}

/* ---- one case's device buffers ---------------------------------------------------- */

typedef struct {
  cc_bufs h;       /* the host images: inputs made, outputs checked there */
  char *dout, *din; /* device copies */
} dev_bufs;

/* Frees the device copies (cudaFree waits for the device's work: only
 * called once the stream is done). */
static void dev_free(dev_bufs *b) {
  if (b->dout != NULL && cudaFree(b->dout) != cudaSuccess) fprintf(stderr, "fault_cuda: cudaFree failed\n");
  if (b->din != NULL && cudaFree(b->din) != cudaSuccess) fprintf(stderr, "fault_cuda: cudaFree failed\n");
  b->dout = b->din = NULL;
  cc_bufs_free(&b->h);
}

/* Device memory of `bytes` (at least 1) holding host's bytes. */
static cudaError_t upload(char **dev, const char *host, size_t bytes) {
  cudaError_t e = cudaMalloc((void **)dev, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *dev = NULL;
    return e;
  }
  return bytes ? cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice) : cudaSuccess;
}

static int dev_make(const cc_case *c, int rank, int nranks, dev_bufs *b) {
  memset(b, 0, sizeof *b);
  if (cc_bufs_make(c, rank, nranks, &b->h) != 0) return -1;
  cudaError_t e = upload(&b->dout, b->h.out, b->h.out_bytes);
  if (e == cudaSuccess && b->h.in != NULL) e = upload(&b->din, b->h.in, b->h.in_bytes);
  if (e == cudaSuccess) return 0;
  dev_free(b);
  return -1;
}

/* The device pointer of a host image's pointer p. */
static char *dev_of(const dev_bufs *b, const char *p) {
  return p >= b->h.out && p <= b->h.out + b->h.out_bytes ? b->dout + (p - b->h.out) : b->din + (p - b->h.in);
}

/* ---- the calls ---------------------------------------------------------------------- */

/* Waits for the stream (a kernel that waits for a dead or stopped peer ends
 * at kolo's timeout or at a peer's stop word); 0, or -1 when it did not
 * finish within STREAM_LIMIT_MS or failed. */
static int stream_done(cudaStream_t s) {
  int64_t limit = fu_now_ns() + STREAM_LIMIT_MS * 1000000LL;
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && fu_now_ns() < limit) fu_sleep_ms(0.2);
  if (e == cudaErrorNotReady) (void)cudaGetLastError();
  return e == cudaSuccess ? 0 : -1;
}

/* Issues the cases, one group when k > 1 (a group started is ended). */
static koloResult_t issue_all(koloComm_t comm, int rank, int nranks, const cc_case *cases, dev_bufs *b, int k,
                              cudaStream_t s, void (*after_first)(void *), void *arg) {
  koloResult_t res = k > 1 ? koloGroupStart() : koloSuccess;
  int grouped = k > 1 && res == koloSuccess;
  for (int i = 0; i < k && res == koloSuccess; i++) {
    res = cc_issue(comm, rank, nranks, &cases[i], dev_of(&b[i], b[i].h.src), dev_of(&b[i], b[i].h.dst), s);
    if (i == 0 && after_first != NULL) after_first(arg);
  }
  koloResult_t e = grouped ? koloGroupEnd() : koloSuccess;
  return res != koloSuccess ? res : e;
}

/* The stream's outcome: koloSuccess, the communicator's async error, or
 * an unhandled CUDA error / a stream that never finished. */
static koloResult_t wait_result(koloComm_t comm, cudaStream_t s, int *stream_ok) {
  *stream_ok = stream_done(s) == 0;
  koloResult_t async = koloSuccess;
  koloResult_t q = koloCommGetAsyncError(comm, &async);
  if (q != koloSuccess) return q;
  if (async != koloSuccess && async != koloInProgress) return async;
  return *stream_ok ? koloSuccess : koloUnhandledCudaError;
}

/* Copies each output back and checks it. */
static void check_all(const cc_case *cases, dev_bufs *b, int k, int rank, int nranks, cc_result *res) {
  for (int i = 0; i < k && res->res == koloSuccess; i++) {
    cudaError_t e = cudaMemcpy(b[i].h.out, b[i].dout, b[i].h.out_bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) res->res = koloUnhandledCudaError;
    else cc_check(&cases[i], rank, nranks, b[i].h.dst, b[i].h.g.out_elems, res);
  }
}

static cc_result cuda_run(void *arg, koloComm_t comm, int rank, int nranks, const cc_case *cases, int k,
                          void (*after_first)(void *), void *after_arg) {
  cuda_ctx *cx = arg;
  cc_result res = {koloSuccess, 0, 0, 0, 0, 0};
  dev_bufs b[CC_MAX_GROUP];
  int made = 0;
  for (; made < k && made < CC_MAX_GROUP && res.res == koloSuccess; made++)
    if (dev_make(&cases[made], rank, nranks, &b[made]) != 0) res.res = koloSystemError;
  if (res.res != koloSuccess) made--; /* the one that failed freed itself */
  int64_t t0 = fu_now_ns();
  int stream_ok = 1;
  if (res.res == koloSuccess) res.res = issue_all(comm, rank, nranks, cases, b, made, cx->stream, after_first, after_arg);
  koloResult_t waited = wait_result(comm, cx->stream, &stream_ok);
  if (res.res == koloSuccess) res.res = waited;
  res.call_ns = fu_now_ns() - t0;
  check_all(cases, b, made, rank, nranks, &res);
  /* a stream still busy keeps its buffers: cudaFree would wait for it */
  for (int i = 0; i < made && stream_ok; i++) dev_free(&b[i]);
  return res;
}

static const rank_mem cuda_mem = {cuda_setup, cuda_run, cuda_count_threads, cuda_teardown};

const rank_mem *fault_cuda_mem(void **ctx) {
  static cuda_ctx cx; /* one per rank process */
  const char *dev = getenv("KOLO_FAULT_CUDA_DEV");
  cx.dev = dev != NULL ? atoi(dev) : 0;
  *ctx = &cx;
  return &cuda_mem;
}

#else

const rank_mem *fault_cuda_mem(void **ctx) {
  *ctx = NULL;
  return NULL;
}

#endif
