/* topology.c - hosts and rings from host ids (see topology.h). */
#include "ring/topology.h"

#include <stdlib.h>

typedef struct {
  uint64_t id;
  int rank;
} host_key;

/* By host id, then rank: each host's ranks become one ascending run. */
static int cmp_key(const void *a, const void *b) {
  const host_key *x = a, *y = b;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Runs of sorted keys, ordered by their first (= lowest) rank. */
static int cmp_run_first(const void *a, const void *b) {
  const host_key *x = a, *y = b; /* id: run start in the sorted keys; rank: its lowest rank */
  return (x->rank > y->rank) - (x->rank < y->rank);
}

void kolo_hosts_free(kolo_hosts *h) {
  free(h->host);
  free(h->local);
  free(h->host_size);
  free(h->host_first);
  free(h->members);
  h->host = h->local = h->host_size = h->host_first = h->members = NULL;
}

/* Fills h from keys sorted by (id, rank); runs[] has room for nranks. */
static void fill_hosts(kolo_hosts *h, const host_key *keys, host_key *runs) {
  int n = h->nranks, nruns = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || keys[i].id != keys[i - 1].id) runs[nruns++] = (host_key){(uint64_t)i, keys[i].rank};
  qsort(runs, (size_t)nruns, sizeof *runs, cmp_run_first);
  int at = 0;
  for (int hi = 0; hi < nruns; hi++) {
    int start = (int)runs[hi].id, size = 0;
    while (start + size < n && keys[start + size].id == keys[start].id) {
      int r = keys[start + size].rank;
      h->host[r] = hi;
      h->local[r] = size++;
      h->members[at + h->local[r]] = r;
    }
    h->host_first[hi] = at;
    h->host_size[hi] = size;
    at += size;
  }
  h->nhosts = nruns;
}

koloResult_t kolo_hosts_build(int nranks, const uint64_t *host_of, kolo_hosts *h) {
  size_t n = (size_t)nranks;
  *h = (kolo_hosts){nranks, 0, malloc(n * sizeof(int)), malloc(n * sizeof(int)),
                    malloc(n * sizeof(int)), malloc(n * sizeof(int)), malloc(n * sizeof(int))};
  host_key *keys = malloc(n * sizeof *keys), *runs = malloc(n * sizeof *runs);
  if (!h->host || !h->local || !h->host_size || !h->host_first || !h->members || !keys || !runs) {
    free(keys);
    free(runs);
    kolo_hosts_free(h);
    return koloSystemError;
  }
  for (int r = 0; r < nranks; r++) keys[r] = (host_key){host_of[r], r};
  qsort(keys, n, sizeof *keys, cmp_key);
  fill_hosts(h, keys, runs);
  free(keys);
  free(runs);
  return koloSuccess;
}

int kolo_hosts_uniform(const kolo_hosts *h) {
  for (int hi = 1; hi < h->nhosts; hi++)
    if (h->host_size[hi] != h->host_size[0]) return 0;
  return 1;
}

int kolo_hosts_max_size(const kolo_hosts *h) {
  int m = 0;
  for (int hi = 0; hi < h->nhosts; hi++) m = h->host_size[hi] > m ? h->host_size[hi] : m;
  return m;
}

/* A ring of `size` members out of a communicator of nranks; pos[] is -1
 * for the others until the caller places the members. */
static koloResult_t ring_alloc(int nranks, int size, kolo_ring *ring) {
  ring->order = malloc((size_t)size * sizeof *ring->order);
  ring->pos = malloc((size_t)nranks * sizeof *ring->pos);
  if (ring->order == NULL || ring->pos == NULL) {
    kolo_ring_free(ring);
    return koloSystemError;
  }
  for (int r = 0; r < nranks; r++) ring->pos[r] = -1;
  ring->nranks = 0;
  return koloSuccess;
}

static void ring_push(kolo_ring *ring, int rank) {
  ring->pos[rank] = ring->nranks;
  ring->order[ring->nranks++] = rank;
}

koloResult_t kolo_ring_build_channel(const kolo_hosts *h, int channel, kolo_ring *ring) {
  if (ring_alloc(h->nranks, h->nranks, ring) != koloSuccess) return koloSystemError;
  for (int hi = 0; hi < h->nhosts; hi++) {
    int size = h->host_size[hi], start = channel % size;
    for (int k = 0; k < size; k++) ring_push(ring, kolo_hosts_rank(h, hi, (start + k) % size));
  }
  return koloSuccess;
}

koloResult_t kolo_ring_build(int nranks, const uint64_t *host_of, kolo_ring *ring) {
  kolo_hosts h;
  if (kolo_hosts_build(nranks, host_of, &h) != koloSuccess) return koloSystemError;
  koloResult_t res = kolo_ring_build_channel(&h, 0, ring);
  kolo_hosts_free(&h);
  return res;
}

koloResult_t kolo_ring_build_intra(const kolo_hosts *h, int rank, kolo_ring *ring) {
  int hi = h->host[rank];
  if (ring_alloc(h->nranks, h->host_size[hi], ring) != koloSuccess) return koloSystemError;
  for (int j = 0; j < h->host_size[hi]; j++) ring_push(ring, kolo_hosts_rank(h, hi, j));
  return koloSuccess;
}

koloResult_t kolo_ring_build_inter(const kolo_hosts *h, int rank, kolo_ring *ring) {
  if (ring_alloc(h->nranks, h->nhosts, ring) != koloSuccess) return koloSystemError;
  int j = h->local[rank];
  for (int hi = 0; hi < h->nhosts; hi++)
    if (j < h->host_size[hi]) ring_push(ring, kolo_hosts_rank(h, hi, j));
  return koloSuccess;
}

void kolo_ring_free(kolo_ring *ring) {
  free(ring->order);
  free(ring->pos);
  ring->order = ring->pos = NULL;
}

int kolo_count_hosts(int nranks, const uint64_t *host_of) {
  kolo_hosts h;
  if (kolo_hosts_build(nranks, host_of, &h) != koloSuccess) return -1;
  int n = h.nhosts;
  kolo_hosts_free(&h);
  return n;
}
