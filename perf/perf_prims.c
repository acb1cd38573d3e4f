/* perf_prims.c - kolo-perf prims: the CUDA data primitives beside
 * cudaMemcpyAsync device to device (see perf_prims.h). */
#include "perf/perf_prims.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda_prims_bench.h"
#include "kernels/cuda_reduce.h"
#include "kolo.h"
#include "perf/perf_check.h"
#include "perf/perf_cuda.h"
#include "perf/perf_report.h"

/* The summary covers sizes from here up. */
#define SUMMARY_MIN_BYTES ((size_t)64 << 20)
/* kolo_cuda_reduce's launch (kernels/cuda/reduce_kernels.cu): blocks of 512
 * threads, four 16-byte vectors per thread, at most 1024 blocks.  Used only
 * to print its block count. */
#define ENTRY_THREADS 512
#define ENTRY_VECTORS 4
#define ENTRY_MAX_BLOCKS 1024

typedef enum { LAUNCH_MEMCPY, LAUNCH_ENTRY, LAUNCH_GRID } launch_kind;
static const char *const launch_names[] = {"-", "entry", "grid"};

typedef struct {
  const char *name;
  int reduce; /* reads b: out = a + b */
  int two;    /* writes out1 as well */
} prim_kind;

#define NKINDS 4
static const prim_kind kinds[NKINDS] = {{"copy", 0, 0}, {"copy2", 0, 1}, {"sum", 1, 0}, {"sum2", 1, 1}};

#define MAX_TYPES 2

typedef struct {
  int seen;
  double ratio; /* the lowest */
  size_t at;    /* the size where it was */
} low_mark;

typedef struct {
  const perf_args *a;
  int dev;
  cudaStream_t stream;
  cudaEvent_t start, stop;
  void *in_a, *in_b, *out0, *out1; /* device, cap bytes each */
  unsigned long long *dcount;      /* device: bytes found wrong */
  size_t cap;
  perf_type types[MAX_TYPES];
  int ntypes;
  uint64_t wrong;
  low_mark low[MAX_TYPES][NKINDS][2]; /* [type][kind][entry, grid] */
} bench;

/* One row: what runs, on how many elements, launched how. */
typedef struct {
  launch_kind launch;
  const prim_kind *k; /* NULL for memcpy */
  int ti;             /* index into bench.types */
  perf_type type;
  size_t n, bytes; /* elements; bytes of each buffer */
  int blocks, threads;
} prim_case;

/* Non-zero (and a message) when err is an error. */
static int fail(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  fprintf(stderr, "kolo-perf prims: %s failed: %s\n", what, cudaGetErrorString(err));
  return 1;
}

/* Bytes read + written by one call. */
static double moved(const prim_case *c) {
  int per = c->k == NULL ? 2 : 1 + c->k->reduce + 1 + c->k->two;
  return (double)per * (double)c->bytes;
}

/* The 8 bytes of a buffer whose every element is v, little-endian. */
static uint64_t pattern_of(perf_type t, double v) {
  unsigned char b[8];
  size_t es = perf_type_size(t);
  for (size_t i = 0; i < 8 / es; i++) perf_store(t, b, i, v);
  uint64_t p = 0;
  for (int i = 7; i >= 0; i--) p = p << 8 | b[i];
  return p;
}

/* ---- setup -------------------------------------------------------------- */

static int setup(bench *b) {
  const perf_args *a = b->a;
  size_t cap = a->max_bytes < 4096 ? 4096 : (a->max_bytes + 4095) & ~(size_t)4095;
  b->cap = cap;
  if (fail(cudaSetDevice(b->dev), "cudaSetDevice") ||
      fail(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      fail(cudaEventCreate(&b->start), "cudaEventCreate") || fail(cudaEventCreate(&b->stop), "cudaEventCreate"))
    return -1;
  void **bufs[4] = {&b->in_a, &b->in_b, &b->out0, &b->out1};
  for (int i = 0; i < 4; i++) {
    if (cudaMalloc(bufs[i], cap) != cudaSuccess) {
      cudaGetLastError(); /* not sticky: clear it */
      fprintf(stderr, "kolo-perf prims: cudaMalloc of 4 buffers of %zu bytes (-e) failed\n", cap);
      return -1;
    }
  }
  return fail(cudaMalloc((void **)&b->dcount, sizeof *b->dcount), "cudaMalloc") ? -1 : 0;
}

static void teardown(bench *b) {
  void *bufs[5] = {b->in_a, b->in_b, b->out0, b->out1, b->dcount};
  for (int i = 0; i < 5; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  if (b->stop) cudaEventDestroy(b->stop);
  if (b->start) cudaEventDestroy(b->start);
  if (b->stream) cudaStreamDestroy(b->stream);
}

/* ---- one row ------------------------------------------------------------ */

static cudaError_t enqueue(bench *b, const prim_case *c) {
  void *o1 = c->k && c->k->two ? b->out1 : NULL;
  const void *in_b = c->k && c->k->reduce ? b->in_b : NULL;
  switch (c->launch) {
    case LAUNCH_MEMCPY: return cudaMemcpyAsync(b->out0, b->in_a, c->bytes, cudaMemcpyDeviceToDevice, b->stream);
    case LAUNCH_ENTRY:
      return (cudaError_t)kolo_cuda_reduce(b->out0, o1, b->in_a, in_b, c->n, (int)c->type, koloSum, 1, b->stream);
    default:
      return (cudaError_t)kolo_prims_bench_reduce(b->out0, o1, b->in_a, in_b, c->n, (int)c->type, c->blocks,
                                                  c->threads, b->stream);
  }
}

/* Time per call of -n calls after -w warm-ups. */
static int time_case(bench *b, const prim_case *c, double *us) {
  const perf_args *a = b->a;
  float ms = 0;
  for (int i = 0; i < a->warmup; i++)
    if (fail(enqueue(b, c), "a warm-up launch")) return -1;
  if (fail(cudaStreamSynchronize(b->stream), "the warm-up (cudaStreamSynchronize)") ||
      fail(cudaEventRecord(b->start, b->stream), "cudaEventRecord"))
    return -1;
  for (int i = 0; i < a->iters; i++)
    if (fail(enqueue(b, c), "a timed launch")) return -1;
  if (fail(cudaEventRecord(b->stop, b->stream), "cudaEventRecord") ||
      fail(cudaEventSynchronize(b->stop), "the timed calls (cudaEventSynchronize)") ||
      fail(cudaEventElapsedTime(&ms, b->start, b->stop), "cudaEventElapsedTime"))
    return -1;
  *us = (double)ms * 1e3 / a->iters;
  return 0;
}

/* buf[0..bytes) filled with the 8-byte `pattern` repeated. */
static int fill(bench *b, void *buf, size_t bytes, uint64_t pattern) {
  return fail((cudaError_t)kolo_prims_bench_fill(buf, bytes, pattern, b->stream), "kolo_prims_bench_fill") ? -1 : 0;
}

/* Outputs filled with bytes no primitive writes here. */
static int poison(bench *b, const prim_case *c) {
  return fill(b, b->out0, c->bytes, ~(uint64_t)0) || (c->k && c->k->two && fill(b, b->out1, c->bytes, ~(uint64_t)0))
             ? -1
             : 0;
}

/* Output bytes that differ from `want` repeated. */
static int count_wrong(bench *b, const prim_case *c, uint64_t want, uint64_t *wrong) {
  unsigned long long h = 0;
  int two = c->k && c->k->two;
  if (fail(cudaMemsetAsync(b->dcount, 0, sizeof *b->dcount, b->stream), "cudaMemsetAsync") ||
      fail((cudaError_t)kolo_prims_bench_count(b->out0, c->bytes, want, b->dcount, b->stream),
           "kolo_prims_bench_count") ||
      (two && fail((cudaError_t)kolo_prims_bench_count(b->out1, c->bytes, want, b->dcount, b->stream),
                   "kolo_prims_bench_count")) ||
      fail(cudaMemcpyAsync(&h, b->dcount, sizeof h, cudaMemcpyDeviceToHost, b->stream), "cudaMemcpyAsync") ||
      fail(cudaStreamSynchronize(b->stream), "the check (cudaStreamSynchronize)"))
    return -1;
  *wrong = h;
  return 0;
}

static void print_row(const prim_case *c, double us, double gbs, double ratio, uint64_t wrong, int checked) {
  char blocks[16] = "-", threads[16] = "-", r[16] = "-", w[24] = "-";
  if (c->launch != LAUNCH_MEMCPY) {
    snprintf(blocks, sizeof blocks, "%d", c->blocks);
    snprintf(threads, sizeof threads, "%d", c->threads);
  }
  if (ratio > 0) snprintf(r, sizeof r, "%.3f", ratio);
  if (checked) snprintf(w, sizeof w, "%llu", (unsigned long long)wrong);
  printf("%13zu  %9s  %8s  %6s  %7s  %7s  %10.2f  %9.1f  %9s  %6s\n", c->bytes, c->k ? c->k->name : "memcpy",
         c->k ? perf_type_name(c->type) : "-", launch_names[c->launch], blocks, threads, us, gbs, r, w);
  fflush(stdout);
}

/* Runs a row: poison, time, check, print.  *gbs: its rate. */
static int run_case(bench *b, const prim_case *c, double memcpy_gbs, double *gbs) {
  int check = b->a->check;
  uint64_t want = pattern_of(c->type, c->k && c->k->reduce ? 3 : 1), wrong = 0;
  double us = 0;
  if (check && poison(b, c) != 0) return -1;
  if (time_case(b, c, &us) != 0) return -1;
  if (check && count_wrong(b, c, want, &wrong) != 0) return -1;
  *gbs = us > 0 ? moved(c) / 1e3 / us : 0; /* bytes / 1e9 / (us * 1e-6) */
  double ratio = memcpy_gbs > 0 ? *gbs / memcpy_gbs : 0;
  print_row(c, us, *gbs, ratio, wrong, check);
  b->wrong += wrong;
  if (c->k && c->bytes >= SUMMARY_MIN_BYTES && ratio > 0) {
    low_mark *m = &b->low[c->ti][c->k - kinds][c->launch == LAUNCH_GRID];
    if (!m->seen || ratio < m->ratio) *m = (low_mark){1, ratio, c->bytes};
  }
  return 0;
}

/* ---- one size ----------------------------------------------------------- */

static int fill_inputs(bench *b, perf_type t, size_t bytes) {
  return fill(b, b->in_a, bytes, pattern_of(t, 1)) || fill(b, b->in_b, bytes, pattern_of(t, 2)) ? -1 : 0;
}

static int entry_blocks(size_t n, size_t es) {
  size_t per_block = (size_t)ENTRY_THREADS * ENTRY_VECTORS * (16 / es);
  size_t blocks = (n + per_block - 1) / per_block;
  return (int)(blocks > ENTRY_MAX_BLOCKS ? ENTRY_MAX_BLOCKS : blocks);
}

/* The rows of one type and primitive at one size. */
static int run_kind(bench *b, int ti, const prim_kind *k, size_t size, double memcpy_gbs) {
  const perf_args *a = b->a;
  perf_type t = b->types[ti];
  size_t es = perf_type_size(t);
  prim_case c = {LAUNCH_ENTRY, k, ti, t, size / es, size / es * es, 0, ENTRY_THREADS};
  double gbs;
  if (c.n == 0) return 0;
  if (a->launch & PERF_LAUNCH_ENTRY) {
    c.blocks = entry_blocks(c.n, es);
    if (run_case(b, &c, memcpy_gbs, &gbs) != 0) return -1;
  }
  if (a->launch & PERF_LAUNCH_GRID) {
    c.launch = LAUNCH_GRID;
    c.threads = a->block_threads;
    c.blocks = a->blocks;
    if (c.blocks == 0 && fail((cudaError_t)kolo_prims_bench_grid((int)t, k->reduce, c.threads, &c.blocks),
                              "kolo_prims_bench_grid (occupancy)"))
      return -1;
    if (run_case(b, &c, memcpy_gbs, &gbs) != 0) return -1;
  }
  return 0;
}

static int run_size(bench *b, size_t size) {
  prim_case m = {LAUNCH_MEMCPY, NULL, 0, b->types[0], size, size, 0, 0};
  double memcpy_gbs = 0;
  if (fill_inputs(b, b->types[0], size) != 0 || run_case(b, &m, 0, &memcpy_gbs) != 0) return -1;
  for (int ti = 0; ti < b->ntypes; ti++) {
    if (ti > 0 && fill_inputs(b, b->types[ti], size) != 0) return -1;
    for (int k = 0; k < NKINDS; k++)
      if (run_kind(b, ti, &kinds[k], size, memcpy_gbs) != 0) return -1;
  }
  return 0;
}

/* ---- report ------------------------------------------------------------- */

static void print_header(const bench *b) {
  const perf_args *a = b->a;
  char dev[128];
  int sms = 0, rt = 0, drv = 0;
  perf_cuda_describe(b->dev, dev, sizeof dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, b->dev);
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  printf("# kolo-perf prims: %s, %d SMs, CUDA runtime %d, driver %d\n", dev, sms, rt, drv);
  perf_report_sweep_line(stdout, a);
  printf("# time: per call, cudaEvents around the -n calls on one non-blocking stream, after -w warm-ups\n"
         "# GB/s: (bytes read + bytes written) / time, GB = 1e9; per call, S = size: memcpy 2S, copy 2S,\n"
         "#   copy2 3S, sum 3S, sum2 4S.  memcpy = cudaMemcpyAsync device to device; copy: out = a;\n"
         "#   copy2: out0 = out1 = a (recvCopySend); sum: out = a + b; sum2: out0 = out1 = a + b\n"
         "#   (recvReduceCopySend)\n"
         "# launch: entry = kolo_cuda_reduce, the test entry (<= %d blocks of %d threads);\n"
         "#   grid = kolo_prims_bench_reduce, one contiguous part per block (%s)\n"
         "# vs_memcpy: GB/s over memcpy's GB/s at the same size; #wrong: output bytes not as expected\n"
         "#\n",
         ENTRY_MAX_BLOCKS, ENTRY_THREADS, a->blocks ? "--blocks" : "blocks: one full wave, by occupancy");
  printf("# %11s  %9s  %8s  %6s  %7s  %7s  %10s  %9s  %9s  %6s\n", "size", "primitive", "type", "launch", "blocks",
         "threads", "time", "GB/s", "vs_memcpy", "#wrong");
  printf("# %11s  %9s  %8s  %6s  %7s  %7s  %10s  %9s  %9s  %6s\n", "(B)", "", "", "", "", "", "(us)", "(r+w)", "",
         "");
  fflush(stdout);
}

static void print_summary(const bench *b) {
  int any = 0;
  for (int ti = 0; ti < b->ntypes; ti++)
    for (int k = 0; k < NKINDS; k++)
      for (int l = 0; l < 2; l++) any |= b->low[ti][k][l].seen;
  printf("#\n");
  if (!any) {
    printf("# no size >= %zu B in this sweep: no summary\n", SUMMARY_MIN_BYTES);
  } else {
    printf("# summary: lowest vs_memcpy at sizes >= %zu B\n", SUMMARY_MIN_BYTES);
    printf("# %9s  %8s  %6s  %9s  %13s\n", "primitive", "type", "launch", "vs_memcpy", "at size (B)");
    for (int ti = 0; ti < b->ntypes; ti++)
      for (int k = 0; k < NKINDS; k++)
        for (int l = 0; l < 2; l++) {
          const low_mark *m = &b->low[ti][k][l];
          if (!m->seen) continue;
          printf("# %9s  %8s  %6s  %9.3f  %13zu\n", kinds[k].name, perf_type_name(b->types[ti]),
                 l ? "grid" : "entry", m->ratio, m->at);
        }
  }
  if (b->a->check)
    printf("# wrong output bytes: %llu %s\n", (unsigned long long)b->wrong, b->wrong ? "FAILED" : "OK");
  printf("#\n");
  fflush(stdout);
}

int perf_prims_run(const perf_args *a) {
  bench b;
  memset(&b, 0, sizeof b);
  b.a = a;
  if (a->ndevs > 1) {
    fprintf(stderr, "kolo-perf prims: runs on one device: give --devices one\n");
    return 2;
  }
  b.dev = a->ndevs == 1 ? a->devs[0] : 0;
  b.types[0] = a->type_given ? a->type : PERF_FLOAT32;
  b.types[1] = PERF_BFLOAT16;
  b.ntypes = a->type_given ? 1 : 2;
  int code = 0;
  if (setup(&b) != 0) {
    code = 2;
  } else {
    print_header(&b);
    size_t size = a->min_bytes;
    do {
      if (run_size(&b, size) != 0) code = 2;
    } while (code == 0 && (size = perf_next_size(a, size)) != 0);
    if (code == 0) print_summary(&b);
  }
  teardown(&b);
  return code != 0 ? code : b.wrong ? 1 : 0;
}

#else /* no CUDA */

int perf_prims_run(const perf_args *a) {
  (void)a;
  fprintf(stderr, "kolo-perf: prims: this build has no CUDA\n");
  return 2;
}

#endif
