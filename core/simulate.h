/* simulate.h - koloGroupSimulateEnd: the cost model's time of a group. */
#ifndef KOLO_CORE_SIMULATE_H
#define KOLO_CORE_SIMULATE_H

#include "core/comm_state.h"

/* koloGroupSimulateEnd (simulate.c): check_info refuses a simInfo not made
 * with KOLO_SIM_INFO_INITIALIZER; estimate fills its estimatedTime with the
 * cost model's time of ops, issuing nothing. */
koloResult_t kolo_sim_check_info(const koloSimInfo_t *info);
koloResult_t kolo_sim_estimate(const kolo_op *ops, int nops, koloSimInfo_t *info);

#endif
