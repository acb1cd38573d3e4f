/* p2p_pipes.h - point-to-point pipes made on first use. */
#ifndef KOLO_CORE_P2P_PIPES_H
#define KOLO_CORE_P2P_PIPES_H

#include "core/comm_state.h"

/* Makes the point-to-point pipes the ops need, for every communicator in
 * the batch at once (host or device pipes, after each comm's memory kind). */
koloResult_t kolo_p2p_connect(const kolo_op *ops, int nops);

/* The point-to-point pipes op needs: calls f(c, peer, is_send,
 * arg) for the peer of a send or recv, and for each peer and direction the
 * programs of a multi-peer collective use (ring/program.h; a pair may come
 * more than once).  Returns f's first failure, or a failure to build a
 * program. */
typedef koloResult_t (*kolo_pipe_fn)(struct koloComm *c, int peer, int is_send, void *arg);
koloResult_t kolo_op_pipes(struct koloComm *c, const kolo_op *op, kolo_pipe_fn f, void *arg);

#endif
