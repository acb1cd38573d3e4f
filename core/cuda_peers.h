/* cuda_peers.h - the device copies of point-to-point ends and the end
 * tables of multi-peer programs (cuda_peers.c). */
#ifndef KOLO_CORE_CUDA_PEERS_H
#define KOLO_CORE_CUDA_PEERS_H

#include "core/cuda_state.h"

/* Multi-peer programs on the device (cuda_peers.c).  Init, once every
 * program is built: the device copies of the point-to-point ends (zeroed:
 * none exists yet) and every multi-peer program's end table, uploaded. */
koloResult_t kolo_cuda_peers_init(struct koloComm *c);
/* Copies point-to-point end i (send ends first, then receive ends) to its
 * device copy on the setup stream; kolo_cuda_peers_sync waits for it. */
koloResult_t kolo_cuda_peers_publish(struct koloComm *c, size_t i);
koloResult_t kolo_cuda_peers_sync(struct koloComm *c);
void kolo_cuda_peers_free(struct koloComm *c);

#endif
