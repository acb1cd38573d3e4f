/* simulate.c - koloGroupSimulateEnd's estimate: the time kolo's cost model
 * (ring/algo.h) gives the calls of a group, which are not issued.
 *
 * A communicator runs its calls one after another, except that the sends
 * and the receives of a group progress together (each side as the sum of
 * its calls); different communicators progress side by side.  So the
 * group's time is, over its communicators, the largest of (collectives +
 * max(sends, receives)). */
#include <stdlib.h>

#include "core/comm_state.h"
#include "core/simulate.h"

koloResult_t kolo_sim_check_info(const koloSimInfo_t *info) {
  if (info == NULL) return kolo_error(NULL, koloInvalidArgument, "koloGroupSimulateEnd: simInfo is NULL");
  if (info->magic != KOLO_SIM_INFO_MAGIC || info->size < sizeof *info)
    return kolo_error(NULL, koloInvalidArgument,
                      "koloGroupSimulateEnd: simInfo was not set up with KOLO_SIM_INFO_INITIALIZER "
                      "(magic 0x%x, size %zu)", info->magic, info->size);
  return koloSuccess;
}

/* Modelled seconds of one call, on the channels it would use. */
static double op_seconds(const kolo_op *op) {
  struct koloComm *c = op->comm;
  size_t bytes = op->count * koloTypeSize(op->type);
  int nch = kolo_op_channels(op, c->nranks, c->nchannels, c->min_channel_bytes, c->algo.tuned);
  if (op->coll == KOLO_COLL_ALL_REDUCE)
    return kolo_algo_cost(kolo_comm_all_reduce_algo(c, op->count, op->type), &c->algo, bytes, nch);
  return kolo_coll_cost(op->coll, &c->algo, bytes, nch);
}

/* Seconds of the calls of ops[first]'s communicator. */
static double comm_seconds(const kolo_op *ops, int nops, int first) {
  double coll = 0, send = 0, recv = 0;
  for (int i = first; i < nops; i++) {
    if (ops[i].comm != ops[first].comm) continue;
    double t = op_seconds(&ops[i]);
    if (ops[i].coll == KOLO_COLL_SEND) send += t;
    else if (ops[i].coll == KOLO_COLL_RECV) recv += t;
    else coll += t;
  }
  return coll + (send > recv ? send : recv);
}

koloResult_t kolo_sim_estimate(const kolo_op *ops, int nops, koloSimInfo_t *info) {
  double worst = 0;
  for (int i = 0; i < nops; i++) {
    /* each communicator once, at its first call */
    double t = kolo_op_first_of_comm(ops, i) ? comm_seconds(ops, nops, i) : 0;
    if (t > worst) worst = t;
  }
  info->estimatedTime = (float)(worst * 1e6);
  return koloSuccess;
}
