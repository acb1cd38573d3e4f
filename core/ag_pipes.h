/* ag_pipes.h - the pipes of Bruck's all-gather, made at init. */
#ifndef KOLO_CORE_AG_PIPES_H
#define KOLO_CORE_AG_PIPES_H

#include "core/comm_state.h"

/* The same for Bruck's all-gather (ag_pipes.c). */
koloResult_t kolo_comm_connect_bruck(struct koloComm *c);

#endif
