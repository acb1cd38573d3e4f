/* perf_sweep.c - one rank's sweep: its buffers, the inputs and checks of
 * each call, its rows (each size, out of place and in place, -N times over)
 * and what rank 0 reports (the timed calls: perf_timing.c). */
#define _GNU_SOURCE /* gethostname */
#include "perf/perf_sweep.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/perf_ceiling.h"
#include "perf/perf_sweep_int.h"

/* ---- one call's buffers: their layout, inputs and check ------------------ */

/* Where the call's buffers lie and which part holds the result, in elements
 * from the start of `send` / `recv` (in place: both are from `recv`). */
typedef struct {
  size_t send_off, recv_off; /* call's sendbuff, recvbuff */
  int send_in_recv;          /* sendbuff lies in the receive buffer (in place) */
} layout;

static layout perf_layout_for(const sweep *s, int in_place, size_t count) {
  perf_coll c = s->a->coll;
  size_t rank = (size_t)s->rank;
  layout l = {0, 0, in_place};
  if (!in_place) return l;
  /* recvbuff = sendbuff + rank*recvcount (scatter: + root*count on the root,
   * the rule that matters; the others' sendbuff is not read) */
  if ((c == PERF_REDUCE_SCATTER && !s->be->rs_result_at_start) || c == PERF_SCATTER) l.recv_off = rank * count;
  /* sendbuff = recvbuff + rank*sendcount (gather: + root*count on the root) */
  if (c == PERF_ALL_GATHER || c == PERF_GATHER) l.send_off = rank * count;
  return l;
}

static perf_call perf_make_call(const sweep *s, const perf_sizes *z, const layout *l) {
  const perf_args *a = s->a;
  size_t es = perf_type_size(a->type);
  return (perf_call){.coll = a->coll, .count = z->count, .type = a->type, .op = a->op, .root = a->root,
                     .send = (char *)(l->send_in_recv ? s->recv : s->send) + l->send_off * es,
                     .recv = (char *)s->recv + l->recv_off * es,
                     .send_peer = (s->rank + 1) % s->nranks,
                     .recv_peer = (s->rank - 1 + s->nranks) % s->nranks,
                     .in_place = l->send_in_recv};
}

/* Host views of the call's input (the send side) and of the whole receive side. */
static void fill_inputs(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l) {
  perf_type t = s->a->type;
  size_t es = perf_type_size(t);
  perf_coll c = s->a->coll;
  char *in = (char *)(l->send_in_recv ? s->hrecv : s->hsend) + l->send_off * es;
  if (!l->send_in_recv || c == PERF_ALL_GATHER || c == PERF_GATHER) perf_poison(t, s->hrecv, z->recv_elems);
  /* broadcast sends only the root's data: in place, the others' buffers are outputs */
  if (c == PERF_BROADCAST && s->rank != s->a->root && l->send_in_recv) perf_poison(t, in, z->send_elems);
  else perf_fill(g, s->rank, in, 0, z->send_elems);
}

static size_t recv_bytes(const sweep *s, const perf_sizes *z) {
  size_t elems = z->recv_elems > z->send_elems ? z->recv_elems : z->send_elems;
  return elems * perf_type_size(s->a->type);
}

/* Inputs written (host views), copied to the device where there is one. */
static int perf_prepare(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l) {
  fill_inputs(s, g, z, l);
  if (s->be->copy == NULL) return 0;
  size_t es = perf_type_size(s->a->type);
  if (s->be->copy(s->be->ctx, s->send, s->hsend, z->send_elems * es, 1) != 0) return -1;
  return s->be->copy(s->be->ctx, s->recv, s->hrecv, recv_bytes(s, z), 1);
}

static uint64_t count_wrong(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l) {
  size_t es = perf_type_size(s->a->type);
  const char *out = (const char *)s->hrecv + l->recv_off * es;
  int n = s->nranks, rank = s->rank;
  switch (s->a->coll) {
    case PERF_ALL_REDUCE: return perf_check_reduced(g, out, 0, z->count);
    case PERF_REDUCE_SCATTER: return perf_check_reduced(g, out, (size_t)rank * z->count, z->count);
    case PERF_ALL_GATHER: return perf_check_transposed(g, out, 0, z->count);
    case PERF_BROADCAST: return perf_check_copied(g, s->a->root, out, 0, z->count);
    case PERF_REDUCE: return rank == s->a->root ? perf_check_reduced(g, out, 0, z->count) : 0;
    case PERF_SENDRECV: return perf_check_copied(g, (rank - 1 + n) % n, out, 0, z->count);
    case PERF_ALL_TO_ALL: return perf_check_transposed(g, out, rank, z->count);
    case PERF_GATHER: return rank == s->a->root ? perf_check_transposed(g, out, 0, z->count) : 0;
    case PERF_SCATTER: return perf_check_copied(g, s->a->root, out, (size_t)rank * z->count, z->count);
    default: return 0;
  }
}

/* Copies the results back where needed and counts this rank's wrong elements; -1 on failure. */
static int perf_check_result(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l, uint64_t *wrong) {
  if (s->be->copy != NULL && s->be->copy(s->be->ctx, s->hrecv, s->recv, recv_bytes(s, z), 0) != 0) return -1;
  *wrong = count_wrong(s, g, z, l);
  return 0;
}

/* Checks -c calls of a row, each with inputs of its own, stopping at the
 * first that is wrong on any rank (nccl-tests' -c N).  *wrong: over all ranks. */
static int check_calls(sweep *s, const perf_call *c, const perf_sizes *z, const layout *l, uint64_t seed,
                       uint64_t *wrong) {
  const perf_args *a = s->a;
  *wrong = 0;
  for (int k = 0; k < a->check && *wrong == 0; k++) {
    perf_gen g;
    perf_gen_init(&g, a->type, a->op, s->nranks, seed + (uint64_t)k * 0x9e3779b9u);
    uint64_t mine = 0;
    if (perf_prepare(s, &g, z, l) != 0 || perf_run_once(s, c) != 0 || perf_check_result(s, &g, z, l, &mine) != 0)
      return -1;
    double w[1] = {(double)mine};
    if (s->be->allreduce_double(s->be->ctx, w, 1, 0) != 0) return -1;
    *wrong = (uint64_t)w[0];
  }
  return 0;
}

static int measure(sweep *s, size_t size, int in_place, uint64_t seed, perf_result *res) {
  const perf_args *a = s->a;
  perf_sizes z = perf_sizes_for(a->coll, a->type, size, s->nranks);
  layout l = perf_layout_for(s, in_place, z.count);
  perf_call c = perf_make_call(s, &z, &l);
  perf_gen g;
  perf_gen_init(&g, a->type, a->op, s->nranks, seed);
  if (perf_prepare(s, &g, &z, &l) != 0 || perf_run_n(s, &c, a->warmup) != 0 || perf_time_calls(s, &c, res) != 0 ||
      check_calls(s, &c, &z, &l, seed, &res->wrong) != 0)
    return -1;
  res->done = 1;
  perf_result_bw(res, a, z.bytes, s->nranks);
  return 0;
}

static void free_buffers(sweep *s) {
  if (s->be->copy) free(s->hsend); /* else the host views are the buffers */
  if (s->be->copy) free(s->hrecv);
  if (s->send_raw) s->be->release(s->be->ctx, s->send_raw);
  if (s->recv_raw) s->be->release(s->be->ctx, s->recv_raw);
}

static int alloc_buffers(sweep *s) {
  s->buf_bytes = perf_buffer_bytes(s->a, s->nranks);
  const size_t off = (size_t)s->a->offset; /* the backends' blocks start on a page */
  s->send_raw = s->be->alloc(s->be->ctx, s->buf_bytes + off);
  s->recv_raw = s->send_raw ? s->be->alloc(s->be->ctx, s->buf_bytes + off) : NULL;
  if (s->recv_raw == NULL) return -1;
  if (!s->a->mem_cuda && ((uintptr_t)s->send_raw | (uintptr_t)s->recv_raw) % 4096 != 0) /* --offset's promise */
    return fprintf(stderr, "rank %d: the backend's buffers do not start on a 4 KiB boundary\n", s->rank), -1;
  s->send = (char *)s->send_raw + off;
  s->recv = (char *)s->recv_raw + off;
  int host = s->be->copy == NULL; /* the calls' buffers are their own host views */
  s->hsend = host ? s->send : aligned_alloc(4096, s->buf_bytes);
  s->hrecv = host ? s->recv : aligned_alloc(4096, s->buf_bytes);
  if (s->hsend == NULL || s->hrecv == NULL) {
    fprintf(stderr, "rank %d: out of memory for %zu-byte host buffers\n", s->rank, s->buf_bytes);
    return -1;
  }
  if (host) memset(s->hsend, 0, s->buf_bytes); /* page faults outside the timed loops */
  if (host) memset(s->hrecv, 0, s->buf_bytes);
  return 0;
}

typedef struct {
  int64_t pid;
  int64_t group; /* set after the gather: the processes numbered in rank order */
  char host[64];
  char where[64];
} rank_info;

int perf_print_ranks(const perf_backend *be, FILE *out, const char *where) {
  rank_info mine = {.pid = (int64_t)getpid()}, *all = calloc((size_t)be->nranks, sizeof *all);
  if (all == NULL) return fprintf(stderr, "rank %d: out of memory\n", be->rank), -1;
  if (gethostname(mine.host, sizeof mine.host - 1) != 0) snprintf(mine.host, sizeof mine.host, "?");
  snprintf(mine.where, sizeof mine.where, "%s", where);
  int res = be->allgather_bytes(be->ctx, &mine, all, sizeof mine);
  for (int r = 0, groups = 0; res == 0 && out && r < be->nranks; r++) {
    int q = 0; /* the first rank of r's process, whose group r joins */
    while (q < r && !(all[q].pid == all[r].pid && strcmp(all[q].host, all[r].host) == 0)) q++;
    all[r].group = q < r ? all[q].group : groups++;
    fprintf(out, "#  Rank %2d Group %2d Pid %6ld on %10s %s\n", r, (int)all[r].group, (long)all[r].pid, all[r].host,
            all[r].where);
  }
  free(all);
  return res;
}

/* One size: out of place, then in place. */
static int sweep_row(sweep *s, perf_row *row, size_t size, uint64_t *seed) {
  const perf_args *a = s->a;
  *row = (perf_row){.sizes = perf_sizes_for(a->coll, a->type, size, s->nranks),
                    .root = perf_coll_has_root(a->coll) ? a->root : -1};
  for (int p = 0; p < 2; p++) {
    if (a->placement != PERF_PLACE_BOTH && a->placement != p) continue;
    /* a buffer both sent and received into; all-to-all has no in-place form */
    if (p == 1 && (a->coll == PERF_SENDRECV || a->coll == PERF_ALL_TO_ALL)) continue;
    const perf_backend *be = s->be; /* -T's watchdog: which row runs (0: none) */
    if (be->row_mark) be->row_mark(be->ctx, row->sizes.bytes);
    int bad = measure(s, size, p, (*seed)++, &row->res[p]);
    if (be->row_mark) be->row_mark(be->ctx, 0);
    if (bad != 0) return -1;
    s->wrong += row->res[p].wrong;
  }
  return 0;
}

/* --ceiling: given, or half of one core's memcpy rate measured here. */
static void report_ceiling(const perf_args *a, perf_report *rep) {
  if (a->ceiling_gbps > 0) perf_report_ceiling(rep, a->ceiling_gbps, "given on the command line (--ceiling)");
  if (!a->ceiling_memcpy) return;
  double gbps = perf_memcpy_gbps(a->max_bytes, a->iters, a->warmup);
  if (gbps <= 0) return; /* said why */
  char source[160];
  snprintf(source, sizeof source,
           "half of one core's memcpy rate, %.2f GB/s at %zu bytes on rank 0: a ring rank moves each byte "
           "through memory about twice", gbps, a->max_bytes);
  perf_report_ceiling(rep, gbps / 2, source);
}

/* -N sweeps of -b..-e (0: until stopped). */
static int sweep_sizes(sweep *s, perf_report *rep) {
  const perf_args *a = s->a;
  uint64_t seed = 1;
  for (int cycle = 0; a->run_cycles == 0 || cycle < a->run_cycles; cycle++) {
    size_t size = a->min_bytes;
    do {
      perf_row row;
      if (sweep_row(s, &row, size, &seed) != 0) return -1;
      row.cycle = cycle;
      if (rep) perf_report_row(rep, &row);
    } while ((size = perf_next_size(a, size)) != 0);
  }
  return 0;
}

int perf_sweep_run(const perf_args *a, const perf_backend *be, const perf_config *cfg, const char *where,
                   FILE *out) {
  sweep s = {.a = a, .be = be, .rank = be->rank, .nranks = be->nranks};
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
  if (be->allreduce_double(be->ctx, failed, 1, 1) != 0 || failed[0] != 0 ||
      perf_print_ranks(be, rep ? rep->out : NULL, where) != 0)
    res = 2;
  if (rep && res == 0) report_ceiling(a, rep);
  if (rep && res == 0) perf_report_table_header(rep);
  if (res == 0 && sweep_sizes(&s, rep) != 0) res = 2;
  free_buffers(&s);
  if (rep) perf_report_close(rep, res != 0);
  return res != 0 ? res : s.wrong != 0 ? 1 : 0;
}
