/* topology.c - rings from host grouping (see topology.h). */
#include "ring/topology.h"

#include <stdlib.h>

int kolo_count_hosts(int nranks, const uint64_t *host_of) {
  int hosts = 0;
  for (int r = 0; r < nranks; r++) {
    int seen = 0;
    for (int q = 0; q < r && !seen; q++) seen = host_of[q] == host_of[r];
    hosts += !seen;
  }
  return hosts;
}

koloResult_t kolo_ring_build(int nranks, const uint64_t *host_of, kolo_ring *ring) {
  int *order = malloc((size_t)nranks * sizeof *order);
  int *pos = malloc((size_t)nranks * sizeof *pos);
  char *placed = calloc((size_t)nranks, 1);
  if (order == NULL || pos == NULL || placed == NULL) {
    free(order);
    free(pos);
    free(placed);
    return koloSystemError;
  }
  int n = 0;
  /* O(n^2), done once per communicator. */
  for (int r = 0; r < nranks; r++) {
    if (placed[r]) continue;
    for (int q = r; q < nranks; q++) {
      if (placed[q] || host_of[q] != host_of[r]) continue;
      placed[q] = 1;
      pos[q] = n;
      order[n++] = q;
    }
  }
  free(placed);
  ring->nranks = nranks;
  ring->order = order;
  ring->pos = pos;
  return koloSuccess;
}

void kolo_ring_free(kolo_ring *ring) {
  free(ring->order);
  free(ring->pos);
  ring->order = ring->pos = NULL;
}
