/* redop.h - reduction ops made by koloRedOpCreatePreMulSum, per
 * communicator, and what a call's op means for the executors.
 *
 * A call is bound to its op when it is made: kolo_redop_resolve copies
 * what the executors need (the scalar, or its address) into the recorded
 * kolo_op, so that the op may be destroyed as soon as the call returned
 * (NCCL's rule), before a group, a progress thread or a kernel runs it.
 *
 * Op values: koloNumOps + (tag << 19 | generation << 12 | slot).  The tag
 * is the communicator's (one per communicator of the process, 11 bits), the
 * generation counts the slot's reuses (7 bits), so that an op of another
 * communicator, or one destroyed, is refused with a sentence instead of
 * reducing with another op's scalar. */
#ifndef KOLO_CORE_REDOP_H
#define KOLO_CORE_REDOP_H

#include "core/op.h"
#include "kolo.h"

struct koloComm;

/* Resolves op->op of a call of `fn` (an API name, for the sentence):
 * built-in ops stay (but a float8 avg becomes NCCL's premul-sum by 1/nranks
 * rounded to the type); an op made on op->comm for op->type becomes koloSum
 * with op->premul and op->scalar set.  koloInvalidArgument with a sentence
 * for anything else. */
koloResult_t kolo_redop_resolve(const char *fn, kolo_op *op);

/* Frees the communicator's ops (koloCommDestroy). */
void kolo_redop_free(struct koloComm *comm);

#endif
