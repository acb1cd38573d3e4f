/* comm_usage.h - what a communicator holds, for tools that measure the
 * library's footprint (kolo-boot-scale) without reading its struct. */
#ifndef KOLO_CORE_COMM_USAGE_H
#define KOLO_CORE_COMM_USAGE_H

#include <stdint.h>

#include "kolo.h"

typedef struct {
  int64_t pipe_bytes;  /* slots and control blocks of the pipes made so far: rings' and point-to-point */
  int bootstrap_links; /* bootstrap connections to other ranks held now */
} kolo_comm_usage;

/* koloInvalidArgument when comm or out is NULL. */
koloResult_t kolo_comm_usage_of(const koloComm_t comm, kolo_comm_usage *out);

#endif
