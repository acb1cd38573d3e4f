/* revoke.h - koloCommRevoke: stopping a communicator's work without destroying it. */
#ifndef KOLO_CORE_REVOKE_H
#define KOLO_CORE_REVOKE_H

#include "core/comm_state.h"

/* A revoked comm's asynchronous state: koloInProgress until the work that
 * was stopped has drained, then koloSuccess. */
koloResult_t kolo_revoke_status(struct koloComm *c);

#endif
