/* sched_env.h - KOLO_SCHEDULE_FILE: a proved schedule per communicator. */
#ifndef KOLO_CORE_SCHED_ENV_H
#define KOLO_CORE_SCHED_ENV_H

#include "core/comm_state.h"

/* KOLO_SCHEDULE_FILE (sched_env.c): loads, parses and proves the file for
 * c's rank count into c->sched (nothing when unset); a failure's sentence
 * (naming fn, the file, its line and what is wrong) goes to the thread's
 * error buffer.  kolo_comm_free_schedule frees it. */
koloResult_t kolo_comm_load_schedule(struct koloComm *c, const char *fn);
void kolo_comm_free_schedule(struct koloComm *c);

#endif
