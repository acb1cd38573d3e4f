/* tree_pipes.h - the pipes of the broadcast and reduce trees, made at init. */
#ifndef KOLO_CORE_TREE_PIPES_H
#define KOLO_CORE_TREE_PIPES_H

#include "core/comm_state.h"

/* The same for the broadcast trees (tree_pipes.c). */
koloResult_t kolo_comm_connect_tree(struct koloComm *c);

#endif
