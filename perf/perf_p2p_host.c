/* perf_p2p_host.c - kolo-perf p2p's host ranks (see perf_p2p.h): every
 * ordered pair in turn, the others waiting at the next pair's barrier;
 * both sides timed from the barrier, the slower counted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_p2p.h"
#include "perf/perf_sweep.h"

static int sendrecv(kolo_backend *kb, void *buf, size_t bytes, int peer, int send) {
  koloResult_t r = send ? koloSend(buf, bytes, koloUint8, peer, kb->comm, NULL)
                        : koloRecv(buf, bytes, koloUint8, peer, kb->comm, NULL);
  if (r == koloSuccess) return 0;
  kolo_backend_report(kb->rank, kb->comm, r, send ? "koloSend" : "koloRecv");
  return -1;
}

/* n messages of `bytes` from src to dst, or with `pong` n round trips;
 * this rank's time in *us (0 when it is neither). */
static int exchange(kolo_backend *kb, void *buf, size_t bytes, int n, int src, int dst, int pong, double *us) {
  double t0 = perf_now_us();
  int me = kb->rank, peer = me == src ? dst : src;
  if (me != src && me != dst) n = 0;
  for (int i = 0; i < n; i++)
    if (sendrecv(kb, buf, bytes, peer, me == src) != 0 || (pong && sendrecv(kb, buf, bytes, peer, me != src) != 0))
      return -1;
  *us = me == src || me == dst ? perf_now_us() - t0 : 0;
  return 0;
}

/* One ordered pair: t[0] the bandwidth time, t[1] the latency time, the
 * slower side's, on every rank. */
static int measure_pair(kolo_backend *kb, const perf_backend *be, const perf_p2p_opts *o, void *buf, int src,
                        int dst, double t[2]) {
  double warm;
  if (exchange(kb, buf, o->bytes, o->warmup, src, dst, 0, &warm) != 0) return -1; /* connects the pipe */
  double bar[1] = {0};
  if (be->allreduce_double(be->ctx, bar, 1, 1) != 0 || exchange(kb, buf, o->bytes, o->iters, src, dst, 0, &t[0]) != 0)
    return -1;
  if (be->allreduce_double(be->ctx, bar, 1, 1) != 0 ||
      exchange(kb, buf, o->lat_bytes, o->lat_iters, src, dst, 1, &t[1]) != 0)
    return -1;
  return be->allreduce_double(be->ctx, t, 2, 1);
}

static void print_host(const perf_p2p_opts *o, const perf_config *cfg, const double *bw, const double *lat, int n,
                       FILE *out) {
  char title[256];
  const char *pipes = cfg->procs == 1 ? "in-process pipes"
                      : cfg->threads > 1 ? "shared-memory pipes between processes, in-process ones between threads"
                                         : "shared-memory pipes";
  fprintf(out, "# kolo-perf p2p: host ranks, %s: %d ranks (%d processes x %d threads, %s), host memory, %s\n",
          cfg->library, n, cfg->procs, cfg->threads, cfg->launch, pipes);
  snprintf(title, sizeof title,
           "host ranks: koloSend -> koloRecv bandwidth, GB/s (1e9 B/s), %d x %zu B per pair, row: source", o->iters,
           o->bytes);
  perf_p2p_matrix(out, title, "rank", bw, n, "-");
  snprintf(title, sizeof title, "host ranks: latency, us: half a round trip of %zu B, %d round trips per pair",
           o->lat_bytes, o->lat_iters);
  perf_p2p_matrix(out, title, "rank", lat, n, "-");
}

int perf_p2p_host_run(const perf_args *a, kolo_backend *kb, const perf_backend *be, const perf_config *cfg,
                      FILE *out) {
  const perf_p2p_opts *o = a->p2p;
  int n = kb->nranks, bad = 0;
  size_t cap = o->bytes > o->lat_bytes ? o->bytes : o->lat_bytes;
  void *buf = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095);
  double *bw = calloc((size_t)n * n, sizeof *bw), *lat = calloc((size_t)n * n, sizeof *lat);
  if (buf == NULL || bw == NULL || lat == NULL) {
    fprintf(stderr, "rank %d: out of memory for p2p's buffers\n", kb->rank);
    bad = -1;
  }
  if (buf) memset(buf, kb->rank, cap); /* pages touched outside the timed sends */
  for (int i = 0; i < n * n && bad == 0; i++) {
    int src = i / n, dst = i % n;
    double t[2] = {0, 0};
    if (src == dst) continue;
    bad = measure_pair(kb, be, o, buf, src, dst, t);
    bw[i] = t[0] > 0 ? (double)o->bytes * o->iters / 1e3 / t[0] : NAN;
    lat[i] = t[1] > 0 ? t[1] / (2.0 * o->lat_iters) : NAN;
  }
  if (bad == 0 && kb->rank == 0) print_host(o, cfg, bw, lat, n, out);
  free(buf);
  free(bw);
  free(lat);
  return bad == 0 ? 0 : 2;
}
