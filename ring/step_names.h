/* step_names.h - the names of step ops (program.h) as the schedule file
 * format (docs/schedule-format.md) and the checker's sentences spell them,
 * and the one property of an op the executors encode by hand: where the
 * post-op applies. */
#ifndef KOLO_RING_STEP_NAMES_H
#define KOLO_RING_STEP_NAMES_H

#include "ring/program.h"

/* "send", "recvReduceCopySend", ...; "op<N>" style text is not returned:
 * NULL for a value that is no op (or an op added without a name). */
const char *kolo_step_op_name(int op);
/* The op named `name` (len bytes, not NUL-terminated), or -1. */
int kolo_step_op_parse(const char *name, size_t len);

/* 1 when a KOLO_STEP_FINAL step with this op applies the post-op (the
 * division of an average) to what it produces: ops that write dst and
 * either reduce or neither send nor receive (copy, recvReduceCopy,
 * recvReduceCopySend), as kernels/host_exec.c and the CUDA kernel do.  On
 * the others the flag does nothing. */
static inline int kolo_step_post_applies(int op) {
  return kolo_step_writes_dst(op) &&
         (kolo_step_reduces(op) || (!kolo_step_sends(op) && !kolo_step_recvs(op)));
}

#endif
