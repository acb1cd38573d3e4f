/* proto_env.h - KOLO_PROTO: the protocols each collective may use. */
#ifndef KOLO_CORE_PROTO_ENV_H
#define KOLO_CORE_PROTO_ENV_H

#include "core/comm_state.h"

/* KOLO_PROTO (proto_env.c): sets c->proto_off, the protocols each
 * collective of a CUDA comm may not use; koloInvalidArgument with a
 * sentence for a value kolo cannot read or that leaves a collective none. */
koloResult_t kolo_proto_apply(struct koloComm *c);

#endif
