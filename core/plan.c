/* plan.c - the planner: which algorithm a call runs (chosen when it is
 * made, the same on every rank), on how many channels, and the programs of
 * each collective, root and channel, built on first use and cached. */
#include "core/plan.h"

#include "common/dtype.h"
#include "core/algo_memo.h"
#include "ring/algo_log.h"
#include "ring/algo_select.h"

int kolo_comm_op_channels(const struct koloComm *c, const kolo_op *op) {
  return kolo_op_channels(op, c->nranks, c->nchannels, c->min_channel_bytes, c->algo.tuned);
}

/* An all-reduce's choice a, or the ring where a is hier and this comm did
 * not build it (a topology that does not allow it, or forced off). */
static int hier_or_ring(const struct koloComm *c, int a) {
  return a == KOLO_ALGO_HIER && !c->hier_ready ? KOLO_ALGO_RING : a;
}

/* kind's algorithm (core/algo_memo.h) for `bytes` on `channels`, chosen by
 * the cost model and said once per shape (KOLO_DEBUG=INFO) on rank 0:
 * every rank chooses alike.  An all-reduce's may be hier, whether or not
 * this comm built it (hier_or_ring). */
static int choose(struct koloComm *c, int kind, size_t bytes, int nch) {
  const kolo_algo_topo *t = &c->algo;
  kolo_algo_logged *l = c->rank == 0 ? &c->algo_logged : NULL;
  int a;
  switch (kind) {
  case KOLO_MEMO_ALL_REDUCE:
    a = kolo_algo_choose(t, bytes, nch);
    if (l) kolo_algo_log_choice(l, t, c->hier_ready, bytes, nch, hier_or_ring(c, a));
    return a;
  case KOLO_MEMO_BCAST:
    a = kolo_bcast_choose(t, bytes, nch);
    if (l) kolo_algo_log_bcast_choice(l, t, bytes, nch, a);
    return a;
  case KOLO_MEMO_AG:
    a = kolo_ag_choose(t, bytes, nch);
    if (l) kolo_algo_log_ag_choice(l, t, bytes, nch, a);
    return a;
  default:
    a = kolo_reduce_choose(t, bytes, nch);
    if (l) kolo_algo_log_reduce_choice(l, t, bytes, nch, a);
    return a;
  }
}

/* The algorithm of collective coll (of memo kind `kind`) of count
 * elements of type on comm c: remembered, or chosen on the channels such
 * a call runs on. */
static int chosen(struct koloComm *c, int kind, int coll, size_t count, koloDataType_t type) {
  size_t bytes = count * koloTypeSize(type);
  int a = kolo_memo_get(&c->algo_memo, kind, bytes);
  if (a >= 0) return a;
  kolo_op op = {coll, NULL, NULL, count, type, koloSum, 0, c, NULL, KOLO_PREMUL_NONE, 0, 0};
  a = choose(c, kind, bytes, kolo_comm_op_channels(c, &op));
  kolo_memo_put(&c->algo_memo, kind, bytes, a);
  return a;
}

/* The algorithm of an all-reduce (ring/algo.h). */
int kolo_comm_all_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  return hier_or_ring(comm, chosen(comm, KOLO_MEMO_ALL_REDUCE, KOLO_COLL_ALL_REDUCE, count, type));
}

int kolo_comm_bcast_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  return chosen(comm, KOLO_MEMO_BCAST, KOLO_COLL_BROADCAST, count, type);
}

int kolo_comm_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  return chosen(comm, KOLO_MEMO_REDUCE, KOLO_COLL_REDUCE, count, type);
}

int kolo_comm_ag_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  return chosen(comm, KOLO_MEMO_AG, KOLO_COLL_ALL_GATHER, count, type);
}

/* An all-reduce, an all-gather or a broadcast runs the algorithm chosen
 * now, when it is recorded: every later stage (pipes, programs, tasks,
 * launches) reads it from op->arg (a broadcast's with its root:
 * kolo_bcast_arg). */
kolo_op kolo_plan_op(const kolo_op *op) {
  kolo_op o = *op;
  if (o.coll == KOLO_COLL_ALL_REDUCE) o.arg = kolo_comm_all_reduce_algo(o.comm, o.count, o.type);
  if (o.coll == KOLO_COLL_ALL_GATHER) o.arg = kolo_comm_ag_algo(o.comm, o.count, o.type);
  if (o.coll == KOLO_COLL_BROADCAST)
    o.arg = kolo_bcast_arg(o.arg, kolo_comm_bcast_algo(o.comm, o.count, o.type), o.comm->nranks);
  if (o.coll == KOLO_COLL_REDUCE)
    o.arg = kolo_reduce_arg(o.arg, kolo_comm_reduce_algo(o.comm, o.count, o.type), o.comm->nranks);
  return o;
}

/* The file's program where KOLO_SCHEDULE_FILE gives one (a copy), else the
 * built-in one of variant v (comm_state.h: v = ch % nvariants) on its ring. */
static koloResult_t make_program(struct koloComm *c, int coll, int arg, int v, kolo_program *out) {
  const int root = kolo_arg_root(coll, arg, c->nranks);
  const kolo_program *loaded = kolo_sched_find(c->sched, coll, root, v, c->rank);
  if (loaded != NULL) return kolo_program_clone(loaded, out);
  return kolo_schedule_build_on(coll, &c->rings[v % c->nrings], c->rank, root, kolo_arg_algo(coll, arg, c->nranks),
                                v, out);
}

koloResult_t kolo_comm_program(struct koloComm *c, int coll, int arg, int ch, const kolo_program **out) {
  int slot = kolo_program_index(coll, arg, ch, c->nvariants);
  if (!c->program_ready[coll][slot]) {
    if (make_program(c, coll, arg, ch % c->nvariants, &c->programs[coll][slot]) != koloSuccess)
      return kolo_error(&c->err, koloSystemError, "out of memory building a %s program",
                        kolo_coll_name(coll));
    c->program_ready[coll][slot] = 1;
  }
  *out = &c->programs[coll][slot];
  return koloSuccess;
}
