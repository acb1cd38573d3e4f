/* register.h - buffer registrations and windows of a communicator. */
#ifndef KOLO_CORE_REGISTER_H
#define KOLO_CORE_REGISTER_H

#include "core/comm_state.h"

/* Releases every registration and window of c (koloCommDestroy). */
void kolo_reg_release_comm(struct koloComm *c);
/* Registrations and windows of c not deregistered (tests). */
int kolo_reg_count(const struct koloComm *c);

#endif
