/* op_sig.h - a call's signature (kernels/call_sig.h) from its op: what the
 * host enqueue (core/enqueue.c) and the CUDA planner (core/cuda_plan.c)
 * give their tasks, so that both executors compare the same words. */
#ifndef KOLO_CORE_OP_SIG_H
#define KOLO_CORE_OP_SIG_H

#include "core/op.h"
#include "kernels/call_sig.h"

/* What op's ranks must agree on (kernels/call_sig.h): a send and its recv
 * on count and type; a collective on its kind, count, type, reduction, root
 * and place in the communicator's order of collectives (seq). */
static inline kolo_call_sig kolo_op_sig(const kolo_op *op, uint32_t seq) {
  int c = op->coll;
  int reduces = c == KOLO_COLL_ALL_REDUCE || c == KOLO_COLL_REDUCE || c == KOLO_COLL_REDUCE_SCATTER;
  int rooted = c == KOLO_COLL_BROADCAST || c == KOLO_COLL_REDUCE || c == KOLO_COLL_GATHER || c == KOLO_COLL_SCATTER;
  int op_word = !reduces ? KOLO_SIG_OP_NONE : op->premul != KOLO_PREMUL_NONE ? KOLO_SIG_OP_PREMUL : (int)op->op;
  return (kolo_call_sig){op->count, kolo_coll_is_p2p(c) ? 0 : seq, rooted ? op->arg : 0, (uint8_t)c,
                         (uint8_t)op->type, (uint8_t)op_word, 1};
}

#endif
