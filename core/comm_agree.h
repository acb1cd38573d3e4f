/* comm_agree.h - what every rank of a communicator must agree on, checked at init. */
#ifndef KOLO_CORE_COMM_AGREE_H
#define KOLO_CORE_COMM_AGREE_H

#include "core/comm_state.h"

/* Gathers every rank's settings (comm_wire.h's kolo_comm_shape) and
 * fails, naming the first rank that differs and how, unless all agree. */
koloResult_t kolo_comm_check_shapes(struct koloComm *c);

#endif
