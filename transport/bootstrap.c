/* bootstrap.c - a rank's bootstrap handle (bootstrap.h, bootstrap_int.h):
 * its life (made, listening, destroyed) and what it tells of itself.
 * Its goodbyes are in bootstrap_goodbye.c, its tagged messages in
 * bootstrap_msg.c, what it knows of its peers' fates in bootstrap_fate.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "transport/bootstrap_int.h"

/* Connections that may wait at a rank's listener for their hello. */
#define MESH_MAX_PENDING 32

void kolo_bootstrap_destroy(kolo_bootstrap *bs) {
  if (bs == NULL) return;
  kolo_bootstrap_goodbye(bs, KOLO_BYE_LEFT);
  kolo_bs_unlist(bs);
  kolo_bs_mesh_free(bs);
  free(bs->links);
  free(bs->peers);
  free(bs);
}

koloResult_t kolo_bs_alloc(const kolo_uid *uid, int rank, int nranks, int timeout_ms, kolo_errbuf *eb,
                           kolo_bootstrap **out) {
  kolo_bootstrap *bs = calloc(1, sizeof *bs);
  if (bs == NULL) return kolo_error(eb, koloSystemError, "rank %d: out of memory in bootstrap", rank);
  bs->peers = calloc((size_t)nranks, sizeof *bs->peers);
  bs->links = calloc((size_t)nranks, sizeof *bs->links);
  if (!bs->peers || !bs->links) {
    free(bs->links);
    free(bs->peers);
    free(bs);
    return kolo_error(eb, koloSystemError, "rank %d: out of memory in bootstrap for %d ranks", rank, nranks);
  }
  bs->rank = rank;
  bs->nranks = nranks;
  bs->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  bs->uid = *uid;
  bs->meet = *uid;
  bs->nids = 1;
  bs->eb = eb;
  bs->pid = getpid();
  bs->lfd = -1;
  snprintf(bs->name, sizeof bs->name, "rank %d", rank);
  kolo_pending_set_init(&bs->pend, MESH_MAX_PENDING);
  *out = bs;
  return koloSuccess;
}

koloResult_t kolo_bs_listen(kolo_bootstrap *bs, struct sockaddr_storage *listen_on) {
  koloResult_t res = kolo_sock_listen(listen_on, bs->eb, &bs->lfd);
  if (res != koloSuccess) bs->lfd = -1;
  return res;
}

int kolo_bootstrap_rank(const kolo_bootstrap *bs) { return bs->rank; }
int kolo_bootstrap_nranks(const kolo_bootstrap *bs) { return bs->nranks; }
const kolo_peer_info *kolo_bootstrap_peer(const kolo_bootstrap *bs, int rank) {
  return rank >= 0 && rank < bs->nranks ? &bs->peers[rank] : NULL;
}
int kolo_bootstrap_host_ranks(const kolo_bootstrap *bs) {
  int local = 0;
  uint64_t me = bs->peers[bs->rank].host_hash;
  for (int r = 0; r < bs->nranks; r++) local += bs->peers[r].host_hash == me;
  return local;
}
kolo_errbuf *kolo_bootstrap_errbuf(kolo_bootstrap *bs) { return bs->eb; }
void kolo_bootstrap_set_errbuf(kolo_bootstrap *bs, kolo_errbuf *eb) { bs->eb = eb; }

int kolo_bootstrap_links(const kolo_bootstrap *bs) {
  int n = 0;
  for (int u = 0; u < bs->nused; u++) n += bs->links[bs->used[u]]->fd >= 0;
  return n;
}
