/* topology.h - who shares a host, and the rings that follow from it.
 *
 * Ranks are grouped by host; a ring visits each host's ranks contiguously
 * (one network hop per host per ring), hosts in the order of their lowest
 * rank, ranks of a host in ascending order. */
#ifndef KOLO_RING_TOPOLOGY_H
#define KOLO_RING_TOPOLOGY_H

#include <stdint.h>

#include "kolo.h"
#include "ring/schedule.h"

/* host_of[r]: an id equal for ranks on one host.  Fills ring (free with
 * kolo_ring_free).  koloSystemError when out of memory. */
koloResult_t kolo_ring_build(int nranks, const uint64_t *host_of, kolo_ring *ring);
void kolo_ring_free(kolo_ring *ring);
/* Number of distinct hosts. */
int kolo_count_hosts(int nranks, const uint64_t *host_of);

#endif
