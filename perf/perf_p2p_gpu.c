/* perf_p2p_gpu.c - kolo-perf p2p's GPU matrices (see perf_p2p.h): copies
 * from src's buffer to dst's on a stream of src, between two events. */
#include <math.h>
#include <stdlib.h>

#include "perf/perf_p2p.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#ifdef KOLO_CUDA_SIM
#define GPU_NOTE "MODEL FIGURES: kolo's CPU model of the GPU, CPU time, not a GPU's"
#else
#define GPU_NOTE "peer access enabled"
#endif

/* One device's source and destination buffers, stream and events. */
typedef struct {
  void *src, *dst;
  cudaStream_t stream;
  cudaEvent_t start, stop;
} gpu_dev;

typedef struct {
  int n;
  gpu_dev *dev;
} gpu_bench;

static int ok(cudaError_t e, const char *what, int dev) {
  if (e == cudaSuccess) return 0;
  fprintf(stderr, "kolo-perf p2p: GPU %d: %s failed: %s\n", dev, what, cudaGetErrorString(e));
  return -1;
}

/* Device d's buffers, stream and events, and its peer access to the others. */
static int setup_device(gpu_bench *b, int d, size_t bytes) {
  gpu_dev *g = &b->dev[d];
  if (ok(cudaSetDevice(d), "cudaSetDevice", d) || ok(cudaMalloc(&g->src, bytes), "cudaMalloc", d) ||
      ok(cudaMalloc(&g->dst, bytes), "cudaMalloc", d) || ok(cudaMemset(g->src, 1, bytes), "cudaMemset", d) ||
      ok(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking), "cudaStreamCreate", d) ||
      ok(cudaEventCreate(&g->start), "cudaEventCreate", d) || ok(cudaEventCreate(&g->stop), "cudaEventCreate", d))
    return -1;
  for (int p = 0; p < b->n; p++) {
    int can = 0;
    if (p == d || cudaDeviceCanAccessPeer(&can, d, p) != cudaSuccess || !can) continue;
    cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else if (ok(e, "cudaDeviceEnablePeerAccess", d)) return -1;
  }
  return ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize", d);
}

/* us for n copies of `bytes` from src to dst (after w untimed ones), or -1. */
static double time_copies(gpu_bench *b, int src, int dst, size_t bytes, int n, int w) {
  gpu_dev *g = &b->dev[src];
  float ms = 0;
  if (ok(cudaSetDevice(src), "cudaSetDevice", src)) return -1;
  for (int i = 0; i < w + n; i++) {
    if (i == w && ok(cudaEventRecord(g->start, g->stream), "cudaEventRecord", src)) return -1;
    if (ok(cudaMemcpyAsync(b->dev[dst].dst, g->src, bytes, cudaMemcpyDeviceToDevice, g->stream), "cudaMemcpyAsync",
           src))
      return -1;
  }
  if (ok(cudaEventRecord(g->stop, g->stream), "cudaEventRecord", src) ||
      ok(cudaEventSynchronize(g->stop), "cudaEventSynchronize", src) ||
      ok(cudaEventElapsedTime(&ms, g->start, g->stop), "cudaEventElapsedTime", src))
    return -1;
  return (double)ms * 1e3;
}

static void teardown(gpu_bench *b) {
  for (int d = 0; d < b->n; d++) {
    gpu_dev *g = &b->dev[d];
    if (cudaSetDevice(d) != cudaSuccess) continue;
    if (g->src) cudaFree(g->src);
    if (g->dst) cudaFree(g->dst);
    if (g->stream) cudaStreamDestroy(g->stream);
    if (g->start) cudaEventDestroy(g->start);
    if (g->stop) cudaEventDestroy(g->stop);
  }
  free(b->dev);
}

/* One pair's figures into bw[i] and lat[i]; NaN without peer access. */
static int measure_pair(gpu_bench *b, const perf_p2p_opts *o, int src, int dst, double *bw, double *lat) {
  int can = src == dst;
  if (src != dst && cudaDeviceCanAccessPeer(&can, src, dst) != cudaSuccess) can = 0;
  *bw = *lat = NAN;
  if (!can) return 0;
  double us = time_copies(b, src, dst, o->bytes, o->iters, o->warmup);
  double lus = us < 0 ? -1 : time_copies(b, src, dst, o->lat_bytes, o->lat_iters, o->warmup);
  if (us < 0 || lus < 0) return -1;
  *bw = us > 0 ? (double)o->bytes * o->iters / 1e3 / us : NAN;
  *lat = lus / o->lat_iters;
  return 0;
}

static void print_gpu(const perf_p2p_opts *o, const double *bw, const double *lat, int n, FILE *out) {
  char title[256];
  snprintf(title, sizeof title, "GPUs: cudaMemcpyAsync device to device, GB/s (1e9 B/s), %d x %zu B, row: source, "
           "diagonal: within the device; n/a: no peer access (%s)", o->iters, o->bytes, GPU_NOTE);
  perf_p2p_matrix(out, title, "GPU", bw, n, NULL);
  snprintf(title, sizeof title, "GPUs: latency, us per %zu-byte copy in a row of %d (%s)", o->lat_bytes,
           o->lat_iters, GPU_NOTE);
  perf_p2p_matrix(out, title, "GPU", lat, n, NULL);
}

int perf_p2p_gpu_run(const perf_p2p_opts *o, FILE *out) {
  int n = 0, bad = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    fprintf(out, "# GPUs: none found (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
    return 0;
  }
  gpu_bench b = {0};
  size_t cap = o->bytes > o->lat_bytes ? o->bytes : o->lat_bytes;
  double *bw = calloc((size_t)n * n, sizeof *bw), *lat = calloc((size_t)n * n, sizeof *lat);
  b.dev = calloc((size_t)n, sizeof *b.dev);
  b.n = b.dev ? n : 0;
  bad = bw && lat && b.dev ? 0 : -1;
  if (bad) fprintf(stderr, "kolo-perf p2p: out of memory\n");
  for (int d = 0; d < n && bad == 0; d++) bad = setup_device(&b, d, cap);
  for (int i = 0; i < n * n && bad == 0; i++) bad = measure_pair(&b, o, i / n, i % n, &bw[i], &lat[i]);
  if (bad == 0) print_gpu(o, bw, lat, n, out);
  if (b.n) teardown(&b);
  free(bw);
  free(lat);
  return bad == 0 ? 0 : 2;
}

#else /* no CUDA */

int perf_p2p_gpu_run(const perf_p2p_opts *o, FILE *out) {
  (void)o;
  fprintf(out, "# GPUs: none found (this build has no CUDA)\n");
  return 0;
}

#endif
