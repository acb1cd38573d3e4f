/* bootstrap_goodbye.c - a rank's goodbyes (bootstrap.h, bootstrap_int.h):
 * what a rank that leaves, or a process that exits, tells its peers on its
 * bootstrap links, so that they can say how it went ("left", "exited", and
 * the rank it blames) instead of "lost without a word".
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "transport/bootstrap_int.h"

/* Bootstraps not destroyed yet, for the exit hook: a process that exits
 * without destroying its communicators still tells its peers so. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static kolo_bootstrap *live_head;
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;

void kolo_bs_goodbye_new_links(kolo_bootstrap *bs) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_GOODBYE_BYTES];
  kolo_encode_header(m, KOLO_TAG_GOODBYE, KOLO_GOODBYE_BYTES);
  kolo_wire_out w = kolo_wire_writer(m + KOLO_WIRE_HDR_BYTES, KOLO_GOODBYE_BYTES);
  kolo_put_u32(&w, (uint32_t)bs->bye_reason);
  kolo_put_i32(&w, bs->bye_blamed);
  for (int u = 0; u < bs->nused; u++) {
    mesh_link *l = bs->links[bs->used[u]];
    if (l->fd < 0 || l->told) continue;
    l->told = 1;
    /* never waits: a peer that does not read learns it from the close */
    if (send(l->fd, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof m)
      KOLO_INFO("%s could not say goodbye to rank %d: %s", bs->name, l->peer, strerror(errno));
  }
}

void kolo_bootstrap_goodbye(kolo_bootstrap *bs, int reason) {
  if (bs->said_goodbye || bs->pid != getpid()) return; /* a forked child's copy is not its to close */
  bs->said_goodbye = 1;
  bs->bye_reason = reason;
  /* Whom this rank's leaving is due to, so that a peer that fails on it
   * names the rank that failed first, not this one. */
  bs->bye_blamed = reason == KOLO_BYE_LEFT ? kolo_bootstrap_culprit(bs, NULL) : -1;
  kolo_bs_goodbye_new_links(bs);
}

/* At exit: goodbyes on the bootstraps of this process that are still up.
 * trylock: a thread that holds the lock while the process exits must not
 * hang the exit. */
static void say_goodbye_at_exit(void) {
  if (pthread_mutex_trylock(&live_lock) != 0) return;
  for (kolo_bootstrap *bs = live_head; bs; bs = bs->next_live) kolo_bootstrap_goodbye(bs, KOLO_BYE_EXITED);
  pthread_mutex_unlock(&live_lock);
}

static void install_exit_hook(void) {
  if (atexit(say_goodbye_at_exit) != 0) KOLO_WARN("cannot install the exit hook: peers will see exits as losses");
}

void kolo_bs_enlist(kolo_bootstrap *bs) {
  pthread_once(&exit_hook_once, install_exit_hook);
  pthread_mutex_lock(&live_lock);
  bs->next_live = live_head;
  live_head = bs;
  pthread_mutex_unlock(&live_lock);
}

void kolo_bs_unlist(kolo_bootstrap *bs) {
  pthread_mutex_lock(&live_lock);
  for (kolo_bootstrap **at = &live_head; *at; at = &(*at)->next_live)
    if (*at == bs) {
      *at = bs->next_live;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}
