/* plan.c - the planner: which algorithm a call runs (chosen when it is
 * made, the same on every rank), on how many channels, and the programs of
 * each collective, root and channel, built on first use and cached. */
#include "core/plan.h"

#include "common/dtype.h"
#include "ring/algo_log.h"
#include "ring/algo_select.h"

int kolo_comm_op_channels(const struct koloComm *c, const kolo_op *op) {
  return kolo_op_channels(op, c->nranks, c->nchannels, c->min_channel_bytes, c->algo.tuned);
}

/* The algorithm of an all-reduce (ring/algo.h): the same on every rank
 * (hier only where the comm built it: a topology that allows it, not
 * forced off). */
static int all_reduce_algo(const struct koloComm *c, const kolo_op *op) {
  int a = kolo_algo_choose(&c->algo, op->count * koloTypeSize(op->type), kolo_comm_op_channels(c, op));
  return a == KOLO_ALGO_HIER && !c->hier_ready ? KOLO_ALGO_RING : a;
}

int kolo_comm_all_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_ALL_REDUCE, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int a = all_reduce_algo(comm, &op);
  if (comm->rank == 0) /* tuning hook: KOLO_DEBUG=INFO; every rank chooses alike */
    kolo_algo_log_choice(&comm->algo_logged, &comm->algo, comm->hier_ready, count * koloTypeSize(type),
                         kolo_comm_op_channels(comm, &op), a);
  return a;
}

int kolo_comm_bcast_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_BROADCAST, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int nch = kolo_comm_op_channels(comm, &op), a = kolo_bcast_choose(&comm->algo, count * koloTypeSize(type), nch);
  if (comm->rank == 0) kolo_algo_log_bcast_choice(&comm->algo_logged, &comm->algo, count * koloTypeSize(type), nch, a);
  return a;
}

int kolo_comm_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_REDUCE, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int nch = kolo_comm_op_channels(comm, &op), a = kolo_reduce_choose(&comm->algo, count * koloTypeSize(type), nch);
  if (comm->rank == 0) kolo_algo_log_reduce_choice(&comm->algo_logged, &comm->algo, count * koloTypeSize(type), nch, a);
  return a;
}

int kolo_comm_ag_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_ALL_GATHER, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int nch = kolo_comm_op_channels(comm, &op), a = kolo_ag_choose(&comm->algo, count * koloTypeSize(type), nch);
  if (comm->rank == 0) kolo_algo_log_ag_choice(&comm->algo_logged, &comm->algo, count * koloTypeSize(type), nch, a);
  return a;
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
