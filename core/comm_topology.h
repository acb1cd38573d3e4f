/* comm_topology.h - a communicator's rings, hierarchy and ring pipes. */
#ifndef KOLO_CORE_COMM_TOPOLOGY_H
#define KOLO_CORE_COMM_TOPOLOGY_H

#include "core/comm_state.h"

/* Rings per channel (rotated), the hierarchical all-reduce where the
 * topology allows it, the program variants: from the bootstrap's table. */
koloResult_t kolo_comm_build_topology(struct koloComm *c);
/* Connects the ring pipes (and the hierarchy's) of every channel. */
koloResult_t kolo_comm_connect_ring(struct koloComm *c);
/* Closes every pipe of c, flushing within a deadline (short after an
 * abort or a failure). */
void kolo_comm_close_pipes(struct koloComm *c);

#endif
