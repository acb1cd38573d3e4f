/* perf_sweep.c - sizes, buffers, check data, timing: one rank's sweep. */
#define _GNU_SOURCE /* gethostname, clock_gettime */
#include "perf/perf_sweep.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf/perf_check.h"

typedef struct {
  const perf_args *a;
  const perf_backend *be;
  int rank, nranks;
  size_t buf_bytes;
  uint64_t wrong; /* #wrong so far, over all ranks (so the same on each) */
  void *send, *recv;   /* buffers the calls see (device memory with -m cuda) */
  void *hsend, *hrecv; /* their host views: the same pointers for host memory */
} sweep;

/* Where the call's buffers lie and which part holds the result, in elements
 * from the start of `send` / `recv` (in place: both are from `recv`). */
typedef struct {
  size_t send_off, recv_off; /* call's sendbuff, recvbuff */
  int send_in_recv;          /* sendbuff lies in the receive buffer (in place) */
} layout;

static layout layout_for(const sweep *s, int in_place, size_t count) {
  perf_coll c = s->a->coll;
  size_t rank = (size_t)s->rank;
  layout l = {0, 0, in_place};
  if (!in_place) return l;
  if (c == PERF_REDUCE_SCATTER && !s->be->rs_result_at_start)
    l.recv_off = rank * count; /* recvbuff = sendbuff + rank*recvcount */
  /* scatter: recvbuff = sendbuff + root*count on the root, the rule that
   * matters; the others' sendbuff is not read */
  if (c == PERF_SCATTER) l.recv_off = rank * count;
  /* sendbuff = recvbuff + rank*sendcount (gather: + root*count on the root) */
  if (c == PERF_ALL_GATHER || c == PERF_GATHER) l.send_off = rank * count;
  return l;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* ---- inputs and checks -------------------------------------------------- */

/* Host views of the call's input (the send side) and of the whole receive side. */
static void prepare(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l) {
  perf_type t = s->a->type;
  size_t es = perf_type_size(t);
  perf_coll c = s->a->coll;
  char *in = (char *)(l->send_in_recv ? s->hrecv : s->hsend) + l->send_off * es;
  if (!l->send_in_recv) perf_poison(t, s->hrecv, z->recv_elems);
  if (l->send_in_recv && (c == PERF_ALL_GATHER || c == PERF_GATHER)) perf_poison(t, s->hrecv, z->recv_elems);
  if (c == PERF_BROADCAST && s->rank != s->a->root) {
    /* only the root's data is sent; in place, the others' buffers are outputs */
    if (l->send_in_recv) perf_poison(t, in, z->send_elems);
    else perf_fill(g, s->rank, in, 0, z->send_elems);
    return;
  }
  perf_fill(g, s->rank, in, 0, z->send_elems);
}

static uint64_t check(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l) {
  size_t es = perf_type_size(s->a->type);
  const char *out = (const char *)s->hrecv + l->recv_off * es;
  int n = s->nranks, rank = s->rank;
  switch (s->a->coll) {
    case PERF_ALL_REDUCE: return perf_check_reduced(g, out, 0, z->count);
    case PERF_REDUCE_SCATTER: return perf_check_reduced(g, out, (size_t)rank * z->count, z->count);
    case PERF_ALL_GATHER: return perf_check_gathered(g, out, z->count);
    case PERF_BROADCAST: return perf_check_copied(g, s->a->root, out, 0, z->count);
    case PERF_REDUCE: return rank == s->a->root ? perf_check_reduced(g, out, 0, z->count) : 0;
    case PERF_SENDRECV: return perf_check_copied(g, (rank - 1 + n) % n, out, 0, z->count);
    case PERF_ALL_TO_ALL: return perf_check_transposed(g, out, rank, z->count);
    case PERF_GATHER: return rank == s->a->root ? perf_check_gathered(g, out, z->count) : 0;
    case PERF_SCATTER: return perf_check_copied(g, s->a->root, out, (size_t)rank * z->count, z->count);
    default: return 0;
  }
}

static int to_device(sweep *s, const perf_sizes *z) {
  if (s->be->copy == NULL) return 0;
  size_t es = perf_type_size(s->a->type);
  if (s->be->copy(s->be->ctx, s->send, s->hsend, z->send_elems * es, 1) != 0) return -1;
  size_t rbytes = (z->recv_elems > z->send_elems ? z->recv_elems : z->send_elems) * es;
  return s->be->copy(s->be->ctx, s->recv, s->hrecv, rbytes, 1);
}

static int from_device(sweep *s, const perf_sizes *z) {
  if (s->be->copy == NULL) return 0;
  size_t es = perf_type_size(s->a->type);
  size_t rbytes = (z->recv_elems > z->send_elems ? z->recv_elems : z->send_elems) * es;
  return s->be->copy(s->be->ctx, s->hrecv, s->recv, rbytes, 0);
}

/* ---- one placement of one size ------------------------------------------ */

static perf_call make_call(const sweep *s, const perf_sizes *z, const layout *l) {
  size_t es = perf_type_size(s->a->type);
  perf_call c;
  c.coll = s->a->coll;
  c.send = (char *)(l->send_in_recv ? s->recv : s->send) + l->send_off * es;
  c.recv = (char *)s->recv + l->recv_off * es;
  c.count = z->count;
  c.type = s->a->type;
  c.op = s->a->op;
  c.root = s->a->root;
  c.send_peer = (s->rank + 1) % s->nranks;
  c.recv_peer = (s->rank - 1 + s->nranks) % s->nranks;
  c.in_place = l->send_in_recv;
  return c;
}

/* Issues n calls (on a stream they may still be running). */
static int issue(sweep *s, const perf_call *c, int n) {
  for (int i = 0; i < n; i++)
    if (s->be->run(s->be->ctx, c) != 0) return -1;
  return 0;
}

/* n calls, completed when this returns. */
static int run_n(sweep *s, const perf_call *c, int n) {
  if (issue(s, c, n) != 0) return -1;
  return s->be->wait ? s->be->wait(s->be->ctx) : 0;
}

/* --graph: n calls captured into the backend's graph, ready to launch. */
static int capture(sweep *s, const perf_call *c, int n) {
  const perf_backend *be = s->be;
  if (be->capture_begin(be->ctx) != 0) return -1;
  int bad = issue(s, c, n);
  if (be->capture_end(be->ctx, bad != 0) != 0) bad = -1;
  return bad;
}

/* The call whose results are checked: with --graph, a graph of that one call. */
static int run_once(sweep *s, const perf_call *c) {
  const perf_backend *be = s->be;
  if (!s->a->graph) return run_n(s, c, 1);
  int bad = capture(s, c, 1);
  if (bad == 0) bad = be->graph_launch(be->ctx);
  if (bad == 0) bad = be->wait(be->ctx);
  be->graph_free(be->ctx);
  return bad;
}

/* This rank's time per call of -n calls, the ranks starting together: the
 * wall clock around the calls when they block (t[0]); else the device time
 * between marks on the stream before and after them (t[0]) and the wall
 * clock from before the first mark to the end of the calls (t[1]).  With
 * --graph the -n calls are captured first and launched as one graph. */
static int time_calls(sweep *s, const perf_call *c, double t[2]) {
  const perf_args *a = s->a;
  const perf_backend *be = s->be;
  double sync[1] = {0};
  if (be->time_start == NULL) {
    if (be->allreduce_double(be->ctx, sync, 1, 1) != 0) return -1; /* start together */
    double t0 = now_us();
    if (run_n(s, c, a->iters) != 0) return -1;
    t[0] = (now_us() - t0) / a->iters;
    return 0;
  }
  if (a->graph && capture(s, c, a->iters) != 0) return -1;
  double dev_us = 0, t0 = 0;
  int bad = be->allreduce_double(be->ctx, sync, 1, 1); /* start together */
  if (bad == 0) {
    t0 = now_us();
    bad = be->time_start(be->ctx);
  }
  if (bad == 0) bad = a->graph ? be->graph_launch(be->ctx) : issue(s, c, a->iters);
  if (bad == 0) bad = be->time_stop(be->ctx, &dev_us);
  t[0] = dev_us / a->iters;
  t[1] = (now_us() - t0) / a->iters;
  if (a->graph) be->graph_free(be->ctx);
  return bad;
}

static int measure(sweep *s, size_t size, int in_place, uint64_t seed, perf_result *res) {
  const perf_args *a = s->a;
  const perf_backend *be = s->be;
  perf_sizes z = perf_sizes_for(a->coll, a->type, size, s->nranks);
  layout l = layout_for(s, in_place, z.count);
  perf_call c = make_call(s, &z, &l);
  perf_gen g;
  perf_gen_init(&g, a->type, a->op, s->nranks, seed);

  prepare(s, &g, &z, &l);
  if (to_device(s, &z) != 0 || run_n(s, &c, a->warmup) != 0) return -1;
  double t[2] = {0, 0};
  int nt = be->time_start ? 2 : 1; /* device and wall clock, or the wall clock */
  if (time_calls(s, &c, t) != 0) return -1;
  if (be->allreduce_double(be->ctx, t, nt, 1) != 0) return -1; /* the slowest rank's */
  res->time_us = t[0];
  res->has_wall = nt == 2;
  res->wall_us = t[1];
  res->wrong = 0;
  if (a->check) {
    prepare(s, &g, &z, &l);
    if (to_device(s, &z) != 0 || run_once(s, &c) != 0 || from_device(s, &z) != 0) return -1;
    double w[1] = {(double)check(s, &g, &z, &l)};
    if (be->allreduce_double(be->ctx, w, 1, 0) != 0) return -1;
    res->wrong = (uint64_t)w[0];
  }
  res->done = 1;
  perf_result_bw(res, a, z.bytes, s->nranks);
  return 0;
}

/* ---- buffers and header ------------------------------------------------- */

static void free_buffers(sweep *s) {
  if (s->be->copy) {
    free(s->hsend);
    free(s->hrecv);
  }
  if (s->send) s->be->release(s->be->ctx, s->send);
  if (s->recv) s->be->release(s->be->ctx, s->recv);
}

static int alloc_buffers(sweep *s) {
  s->buf_bytes = perf_buffer_bytes(s->a, s->nranks);
  s->send = s->be->alloc(s->be->ctx, s->buf_bytes);
  s->recv = s->send ? s->be->alloc(s->be->ctx, s->buf_bytes) : NULL;
  if (s->recv == NULL) return -1;
  if (s->be->copy == NULL) {
    s->hsend = s->send;
    s->hrecv = s->recv;
    memset(s->hsend, 0, s->buf_bytes); /* page faults outside the timed loops */
    memset(s->hrecv, 0, s->buf_bytes);
    return 0;
  }
  s->hsend = aligned_alloc(4096, s->buf_bytes);
  s->hrecv = aligned_alloc(4096, s->buf_bytes);
  if (s->hsend == NULL || s->hrecv == NULL) {
    fprintf(stderr, "rank %d: out of memory for %zu-byte host buffers\n", s->rank, s->buf_bytes);
    return -1;
  }
  return 0;
}

typedef struct {
  int64_t pid;
  char host[64];
  char where[64];
} rank_info;

static int same_process(const rank_info *x, const rank_info *y) {
  return x->pid == y->pid && strcmp(x->host, y->host) == 0;
}

/* Every rank's pid, host and memory, printed by rank 0 under "# Using
 * devices"; Group numbers the processes in rank order. */
static int print_ranks(sweep *s, perf_report *rep, const char *where) {
  rank_info mine, *all = calloc((size_t)s->nranks, sizeof *all);
  int *group = calloc((size_t)s->nranks, sizeof *group);
  if (all == NULL || group == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", s->rank);
    free(all);
    free(group);
    return -1;
  }
  memset(&mine, 0, sizeof mine);
  mine.pid = (int64_t)getpid();
  if (gethostname(mine.host, sizeof mine.host - 1) != 0) snprintf(mine.host, sizeof mine.host, "?");
  snprintf(mine.where, sizeof mine.where, "%s", where);
  int res = s->be->allgather_bytes(s->be->ctx, &mine, all, sizeof mine);
  for (int r = 0, groups = 0; res == 0 && rep && r < s->nranks; r++) {
    int q = 0;
    while (q < r && !same_process(&all[q], &all[r])) q++;
    group[r] = q < r ? group[q] : groups++;
    perf_report_rank(rep, r, group[r], (long)all[r].pid, all[r].host, all[r].where);
  }
  free(all);
  free(group);
  return res;
}

/* ---- the sweep ---------------------------------------------------------- */

static int sweep_sizes(sweep *s, perf_report *rep) {
  const perf_args *a = s->a;
  uint64_t seed = 1;
  size_t size = a->min_bytes;
  do {
    perf_row row;
    memset(&row, 0, sizeof row);
    row.sizes = perf_sizes_for(a->coll, a->type, size, s->nranks);
    row.root = perf_coll_has_root(a->coll) ? a->root : -1;
    for (int p = 0; p < 2; p++) {
      if (a->placement != PERF_PLACE_BOTH && a->placement != p) continue;
      /* a buffer both sent and received into; all-to-all has no in-place form */
      if (p == 1 && (a->coll == PERF_SENDRECV || a->coll == PERF_ALL_TO_ALL)) continue;
      if (measure(s, size, p, seed++, &row.res[p]) != 0) return -1;
      s->wrong += row.res[p].wrong;
    }
    if (rep) perf_report_row(rep, &row);
  } while ((size = perf_next_size(a, size)) != 0);
  return 0;
}

int perf_sweep_run(const perf_args *a, const perf_backend *be, const perf_config *cfg, const char *where,
                   FILE *out) {
  sweep s;
  memset(&s, 0, sizeof s);
  s.a = a;
  s.be = be;
  s.rank = be->rank;
  s.nranks = be->nranks;
  if (perf_coll_has_root(a->coll) && a->root >= s.nranks) {
    if (s.rank == 0) fprintf(stderr, "-r %d: the root must be below the %d ranks\n", a->root, s.nranks);
    return 2;
  }
  perf_report report, *rep = s.rank == 0 ? &report : NULL;
  int res = 0;
  if (rep && perf_report_open(rep, out, a, cfg) != 0) res = 2;
  if (alloc_buffers(&s) != 0) res = 2;
  /* a rank that cannot go on (JSON file, memory) must not leave the others waiting */
  double failed[1] = {res};
  if (be->allreduce_double(be->ctx, failed, 1, 1) != 0 || failed[0] != 0 || print_ranks(&s, rep, where) != 0) {
    free_buffers(&s);
    if (rep) perf_report_abandon(rep);
    return 2;
  }
  if (rep) perf_report_table_header(rep);
  if (sweep_sizes(&s, rep) != 0) res = 2;
  free_buffers(&s);
  if (rep && res == 0) perf_report_close(rep);
  if (rep && res != 0) perf_report_abandon(rep);
  return res != 0 ? res : s.wrong != 0 ? 1 : 0;
}
