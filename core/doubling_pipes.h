/* doubling_pipes.h - the pipes of the doubling all-reduces, made at init. */
#ifndef KOLO_CORE_DOUBLING_PIPES_H
#define KOLO_CORE_DOUBLING_PIPES_H

#include "core/comm_state.h"

/* Makes the point-to-point pipes of the doubling all-reduces at init,
 * where the comm may run them (doubling_pipes.c). */
koloResult_t kolo_comm_connect_doubling(struct koloComm *c);
/* The pipes of ops (one comm's, multi-peer) made at init, with their
 * device ends on a CUDA comm (doubling_pipes.c; tree_pipes.c and
 * ag_pipes.c use it). */
koloResult_t kolo_comm_connect_at_init(struct koloComm *c, const kolo_op *ops, int n);

#endif
