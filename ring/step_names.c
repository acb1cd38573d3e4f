/* step_names.c - names of step ops (see step_names.h). */
#include "ring/step_names.h"

#include <string.h>

/* Indexed by op; an op added to program.h without a name here reads as
 * NULL (tests/test_schedule_check.cc fails on it). */
static const char *const names[KOLO_STEP_NUM_OPS] = {
    [KOLO_STEP_SEND] = "send",
    [KOLO_STEP_RECV] = "recv",
    [KOLO_STEP_COPY] = "copy",
    [KOLO_STEP_COPY_SEND] = "copySend",
    [KOLO_STEP_RECV_COPY_SEND] = "recvCopySend",
    [KOLO_STEP_RECV_REDUCE_SEND] = "recvReduceSend",
    [KOLO_STEP_RECV_REDUCE_COPY] = "recvReduceCopy",
    [KOLO_STEP_RECV_REDUCE_COPY_SEND] = "recvReduceCopySend",
    [KOLO_STEP_REDUCE] = "reduce",
};

const char *kolo_step_op_name(int op) {
  return op >= 0 && op < KOLO_STEP_NUM_OPS ? names[op] : NULL;
}

int kolo_step_op_parse(const char *name, size_t len) {
  for (int op = 0; op < KOLO_STEP_NUM_OPS; op++)
    if (names[op] && strlen(names[op]) == len && memcmp(names[op], name, len) == 0) return op;
  return -1;
}
