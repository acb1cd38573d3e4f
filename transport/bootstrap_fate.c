/* bootstrap_fate.c - what a rank knows of its peers' fates (bootstrap.h,
 * bootstrap_int.h): which peer is down and how it went, and whom to blame
 * for a failure: the first peer lost without a word, else the rank that
 * the first peer to leave blamed.  Never blocks: it reads what has
 * arrived on the links by now.
 */
#include <unistd.h>

#include "transport/bootstrap_int.h"

/* The first peer lost without a word (a dead process: the first to fail). */
static int first_lost(const kolo_bootstrap *bs) {
  const mesh_link *best = NULL;
  for (int u = 0; u < bs->nused; u++) {
    const mesh_link *l = bs->links[bs->used[u]];
    if (l->down && l->fate == KOLO_PEER_LOST && (best == NULL || l->down_seq < best->down_seq)) best = l;
  }
  return best ? best->peer : -1;
}

/* The first peer that left blaming another rank (not this one). */
static int first_blamer(const kolo_bootstrap *bs) {
  const mesh_link *best = NULL;
  for (int u = 0; u < bs->nused; u++) {
    const mesh_link *l = bs->links[bs->used[u]];
    if (l->down && l->victim >= 0 && l->victim != bs->rank && (best == NULL || l->down_seq < best->down_seq))
      best = l;
  }
  return best ? best->peer : -1;
}

int kolo_bs_first_failed(const kolo_bootstrap *bs) {
  int failed = first_lost(bs);
  return failed >= 0 ? failed : first_blamer(bs);
}

int kolo_bootstrap_dead_peer(kolo_bootstrap *bs) {
  kolo_bs_poll_now(bs);
  int dead = -1;
  for (int u = 0; u < bs->nused; u++)
    if (bs->links[bs->used[u]]->down && (dead < 0 || bs->used[u] < dead)) dead = bs->used[u];
  return dead;
}

int kolo_bootstrap_peer_dead(kolo_bootstrap *bs, int rank) {
  if (rank < 0 || rank >= bs->nranks || rank == bs->rank) return 0;
  kolo_bs_poll_now(bs);
  const mesh_link *l = bs->links[rank];
  if (l == NULL || !l->down) return KOLO_PEER_ALIVE;
  return l->fate != KOLO_PEER_ALIVE ? l->fate : KOLO_PEER_LOST;
}

int kolo_bootstrap_peer_blamed(kolo_bootstrap *bs, int rank) {
  if (kolo_bootstrap_peer_dead(bs, rank) == KOLO_PEER_ALIVE) return -1;
  int victim = bs->links[rank]->victim;
  return victim != bs->rank && victim != rank ? victim : -1;
}

int kolo_bootstrap_culprit(kolo_bootstrap *bs, int *via) {
  if (via) *via = -1;
  if (bs->pid == getpid()) kolo_bs_poll_now(bs); /* what arrived so far */
  int lost = first_lost(bs);
  if (lost >= 0) return lost;
  int blamer = first_blamer(bs);
  if (blamer < 0) return -1;
  if (via) *via = blamer;
  return bs->links[blamer]->victim;
}
