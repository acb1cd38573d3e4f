/* plan.h - the planner: a call's algorithm and channels, and the cached
 * programs of a communicator. */
#ifndef KOLO_CORE_PLAN_H
#define KOLO_CORE_PLAN_H

#include "core/comm_state.h"

/* op as it is recorded: an all-reduce, an all-gather, a broadcast or a
 * reduce runs the algorithm chosen now, when the call is made; every later
 * stage (pipes, programs, tasks, launches) reads it from its arg. */
kolo_op kolo_plan_op(const kolo_op *op);

/* The channels op runs on (a tuning file's or the comm's). */
int kolo_comm_op_channels(const struct koloComm *c, const kolo_op *op);

/* The program of `coll` with root/peer `arg` on channel `ch`, cached. */
koloResult_t kolo_comm_program(struct koloComm *comm, int coll, int arg, int ch, const kolo_program **out);

/* The algorithm a call of each collective runs: core/op.h's
 * kolo_comm_*_algo (C++ tests read them), defined in plan.c. */

#endif
