/* topology.h - who shares a host, and the rings that follow from it.
 *
 * Ranks are grouped by host; hosts are numbered in the order of their lowest
 * rank, and a rank's local index is its place among its host's ranks in
 * ascending rank order.
 *
 * Flat rings (one per channel) visit each host's ranks contiguously, hosts
 * in order, so a ring crosses the network once per host.  Channel c starts
 * each host's run at local index c mod (ranks of that host): the rank that
 * sends off-host, and the one that receives from the previous host, change
 * from channel to channel, so channels spread their network traffic over
 * the ranks (NICs, proxies, streams) of a host instead of all leaving
 * through one, as NCCL rotates its rings.  Channel 0 is ascending order.
 *
 * Hierarchical all-reduce uses two smaller rings per rank: the ranks of its
 * host (intra) and the ranks with its local index on every host (inter).
 * Such a sub-ring is a kolo_ring whose nranks and order cover its members
 * only while pos still has an entry per rank of the communicator (-1 for
 * non-members), so kolo_ring_next / kolo_ring_prev work unchanged.
 */
#ifndef KOLO_RING_TOPOLOGY_H
#define KOLO_RING_TOPOLOGY_H

#include <stdint.h>

#include "kolo.h"
#include "ring/schedule.h"

typedef struct {
  int nranks, nhosts;
  int *host;       /* [nranks] host index of each rank */
  int *local;      /* [nranks] local index of each rank */
  int *host_size;  /* [nhosts] ranks on each host */
  int *host_first; /* [nhosts] where each host's ranks start in members */
  int *members;    /* [nranks] ranks grouped by host, ascending within one */
} kolo_hosts;

/* host_of[r]: an id equal for ranks on one host.  koloSystemError when out
 * of memory (*h then needs no kolo_hosts_free). */
koloResult_t kolo_hosts_build(int nranks, const uint64_t *host_of, kolo_hosts *h);
void kolo_hosts_free(kolo_hosts *h);
/* 1 when every host has the same number of ranks. */
int kolo_hosts_uniform(const kolo_hosts *h);
/* Largest number of ranks on one host. */
int kolo_hosts_max_size(const kolo_hosts *h);
/* The rank with local index j on host hi. */
static inline int kolo_hosts_rank(const kolo_hosts *h, int hi, int j) {
  return h->members[h->host_first[hi] + j];
}

/* The flat ring of `channel` (see above).  Free with kolo_ring_free. */
koloResult_t kolo_ring_build_channel(const kolo_hosts *h, int channel, kolo_ring *ring);
/* The ring of channel 0 straight from host ids. */
koloResult_t kolo_ring_build(int nranks, const uint64_t *host_of, kolo_ring *ring);
/* Rank's intra-host ring (its host's ranks by local index) and inter-host
 * ring (the ranks of its local index, hosts in order; a host without that
 * index is skipped). */
koloResult_t kolo_ring_build_intra(const kolo_hosts *h, int rank, kolo_ring *ring);
koloResult_t kolo_ring_build_inter(const kolo_hosts *h, int rank, kolo_ring *ring);
void kolo_ring_free(kolo_ring *ring);
/* Number of distinct hosts. */
int kolo_count_hosts(int nranks, const uint64_t *host_of);

#endif
