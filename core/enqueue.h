/* enqueue.h - running a batch of calls: executor tasks on the host,
 * launches on CUDA streams. */
#ifndef KOLO_CORE_ENQUEUE_H
#define KOLO_CORE_ENQUEUE_H

#include "core/comm_state.h"

/* Runs a batch of ops (a group): host ops to completion on this thread (or
 * queued for non-blocking communicators), CUDA ops enqueued on their streams. */
koloResult_t kolo_run_ops(kolo_op *ops, int nops);

/* Runs ops on this thread, whatever their communicators' blocking mode. */
koloResult_t kolo_run_ops_here(kolo_op *ops, int nops);

#endif
