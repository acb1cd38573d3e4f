/* tune_env.h - KOLO_TUNING_FILE: the tuned constants of a communicator. */
#ifndef KOLO_CORE_TUNE_ENV_H
#define KOLO_CORE_TUNE_ENV_H

#include "core/comm_state.h"

/* KOLO_TUNING_FILE (tune_env.c): reads and parses it into c->tuned, points
 * c->algo.tuned there and sets c->tuning_hash (nothing when unset); a
 * failure's sentence ("FILE:LINE: what") goes to the thread's buffer. */
koloResult_t kolo_comm_load_tuning(struct koloComm *c, const char *fn);

#endif
