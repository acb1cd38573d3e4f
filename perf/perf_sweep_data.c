/* perf_sweep_data.c - the buffers of one call: where each collective's
 * send and receive parts lie (in place or not), the inputs written
 * before it and the check of its results. */
#include "perf/perf_sweep_int.h"

layout perf_layout_for(const sweep *s, int in_place, size_t count) {
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

perf_call perf_make_call(const sweep *s, const perf_sizes *z, const layout *l) {
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

int perf_prepare(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l) {
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

int perf_check_result(sweep *s, const perf_gen *g, const perf_sizes *z, const layout *l, uint64_t *wrong) {
  if (s->be->copy != NULL && s->be->copy(s->be->ctx, s->hrecv, s->recv, recv_bytes(s, z), 0) != 0) return -1;
  *wrong = count_wrong(s, g, z, l);
  return 0;
}
