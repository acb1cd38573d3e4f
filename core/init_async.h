/* init_async.h - inits that go on after the API call returned. */
#ifndef KOLO_CORE_INIT_ASYNC_H
#define KOLO_CORE_INIT_ASYNC_H

#include "core/comm_state.h"

/* Starts c's connect on a thread of its own; init_busy is 1 until it ends. */
koloResult_t kolo_init_start(struct koloComm *c);
/* Joins that thread (no-op without one). */
void kolo_init_join(struct koloComm *c);
/* Connects n communicators at once, each on its thread, and waits: the
 * first failure (its sentence in the thread's buffer). */
koloResult_t kolo_init_run_all(struct koloComm **comms, int n);

/* Records c's init as a job of the current group (group.h); *comm = c. */
koloResult_t kolo_group_add_init(struct koloComm *c, koloComm_t *comm);


#endif
