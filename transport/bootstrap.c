/* bootstrap.c - a rank's bootstrap handle (bootstrap.h, bootstrap_int.h):
 * its life, goodbyes, tagged messages and liveness.
 *
 * A message to a peer goes over the link to it, which bootstrap_mesh.c
 * makes when first needed; every wait (a recv, a send whose peer is slow to
 * read or not connected yet) serves all of this rank's connections, so
 * that ranks sending large messages to each other at the same time cannot
 * deadlock, and kolo_bootstrap_dead_peer() never blocks.  A receiver whose
 * peer has not connected after RECV_REACH_MS connects itself: a peer that
 * died is then named at once (nothing listens at its address), not after
 * the timeout.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/bootstrap_int.h"

#define RECV_REACH_MS 1000
/* Connections that may wait at a rank's listener for their hello. */
#define MESH_MAX_PENDING 32

/* ---- goodbyes ---------------------------------------------------------------- */

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

static void unlist(kolo_bootstrap *bs) {
  pthread_mutex_lock(&live_lock);
  for (kolo_bootstrap **at = &live_head; *at; at = &(*at)->next_live)
    if (*at == bs) {
      *at = bs->next_live;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

/* ---- lifetime ------------------------------------------------------------- */

void kolo_bootstrap_destroy(kolo_bootstrap *bs) {
  if (bs == NULL) return;
  kolo_bootstrap_goodbye(bs, KOLO_BYE_LEFT);
  unlist(bs);
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
kolo_errbuf *kolo_bootstrap_errbuf(kolo_bootstrap *bs) { return bs->eb; }
void kolo_bootstrap_set_errbuf(kolo_bootstrap *bs, kolo_errbuf *eb) { bs->eb = eb; }

int kolo_bootstrap_links(const kolo_bootstrap *bs) {
  int n = 0;
  for (int u = 0; u < bs->nused; u++) n += bs->links[bs->used[u]]->fd >= 0;
  return n;
}

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

/* Inside an allgather every rank's entry is needed: a wait there ends as
 * soon as a peer is known to have failed (lost without a word, or gone
 * blaming another rank), not only the one waited on, with that link's
 * error.  So a failure spreads along the links at once instead of leaving
 * ranks to time out on peers that will never send.  A peer that left with
 * a plain goodbye has done its part and ends nothing. */
static koloResult_t wait_on(kolo_bootstrap *bs, int peer, int out_peer, int64_t dl) {
  koloResult_t res = kolo_bs_wait(bs, out_peer, dl);
  if (res != koloSuccess || !bs->whole_job) return res;
  int failed = first_lost(bs);
  if (failed < 0) failed = first_blamer(bs);
  return failed >= 0 && failed != peer ? kolo_bs_link_error(bs, failed) : koloSuccess;
}

/* ---- messages -------------------------------------------------------------------- */

static koloResult_t check_call(kolo_bootstrap *bs, const char *what, int peer, const void *data,
                               size_t len) {
  if (peer < 0 || peer >= bs->nranks)
    return kolo_error(bs->eb, koloInvalidArgument, "bootstrap %s rank %d: not a rank in 0..%d", what,
                      peer, bs->nranks - 1);
  if (data == NULL && len > 0)
    return kolo_error(bs->eb, koloInvalidArgument, "bootstrap %s rank %d: data is NULL", what, peer);
  if (len > KOLO_MAX_MSG_BYTES) {
    char who[112];
    return kolo_error(bs->eb, koloInvalidArgument,
                      "bootstrap %s %s: a message of %zu bytes is larger than the limit of %llu", what,
                      kolo_bs_peer_name(bs, peer, who, sizeof who), len, (unsigned long long)KOLO_MAX_MSG_BYTES);
  }
  return koloSuccess;
}

static koloResult_t send_self(kolo_bootstrap *bs, mesh_link *l, uint32_t tag, const void *data, size_t len) {
  queued_msg *m = malloc(sizeof *m + len);
  if (m == NULL)
    return kolo_error(bs->eb, koloSystemError, "rank %d: out of memory queueing a %zu-byte message",
                      bs->rank, len);
  m->tag = tag;
  m->len = len;
  if (len) memcpy(m->data, data, len);
  kolo_link_append(l, m);
  return koloSuccess;
}

/* What a connection that did not come up within the timeout got to. */
static const char *stuck_at(const mesh_link *l, char *buf, size_t len) {
  char text[200];
  switch (l->out.state) {
  case OUT_CROSSED: return "said it would connect to this rank and did not";
  case OUT_HELLO_SENT: return "did not answer this rank's bootstrap hello (stopped, or its host overloaded)";
  case OUT_CONNECTING:
    snprintf(buf, len, "did not take this rank's connection (%s)", kolo_connect_errtext(ETIMEDOUT, text, sizeof text));
    return buf;
  default: return "could not be reached (its address did not answer)";
  }
}

/* The link to peer is up, or why not (its error, or a timeout naming the
 * stage the connection got to). */
static koloResult_t link_ready(kolo_bootstrap *bs, mesh_link *l, int64_t dl) {
  char who[112], why[240];
  if (l->fd < 0 && !l->down && bs->peers[l->peer].addr.ss_family == 0)
    return kolo_error(bs->eb, koloInternalError, "%s: the address of rank %d is not known yet", bs->name, l->peer);
  while (l->fd < 0 && !l->down) {
    koloResult_t res = kolo_bs_reach(bs, l);
    if (res == koloSuccess) res = wait_on(bs, l->peer, -1, dl);
    if (res == koloTimeout)
      return kolo_error(bs->eb, koloTimeout, "%s %s within %d ms", kolo_bs_peer_name(bs, l->peer, who, sizeof who),
                        stuck_at(l, why, sizeof why), bs->timeout_ms);
    if (res != koloSuccess) return res;
  }
  return l->down ? kolo_bs_link_error(bs, l->peer) : koloSuccess;
}

/* sendmsg of header + payload from byte `off` on; like send(). */
static ssize_t send_from(int fd, const uint8_t *hdr, const void *data, size_t len, size_t off) {
  struct iovec iov[2];
  int n = 0;
  if (off < KOLO_WIRE_HDR_BYTES) iov[n++] = (struct iovec){(char *)hdr + off, KOLO_WIRE_HDR_BYTES - off};
  size_t doff = off > KOLO_WIRE_HDR_BYTES ? off - KOLO_WIRE_HDR_BYTES : 0;
  if (len > doff) iov[n++] = (struct iovec){(char *)data + doff, len - doff};
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  return sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The peer does not read: a message cut in two spoils the stream. */
static koloResult_t send_timed_out(kolo_bootstrap *bs, mesh_link *l, size_t len, size_t sent) {
  if (sent > 0) {
    kolo_link_down(l, koloTimeout, "did not read a %zu-byte message within %d ms", len, bs->timeout_ms);
    return kolo_bs_link_error(bs, l->peer);
  }
  char who[112];
  return kolo_error(bs->eb, koloTimeout, "%s did not read a %zu-byte message within %d ms",
                    kolo_bs_peer_name(bs, l->peer, who, sizeof who), len, bs->timeout_ms);
}

static koloResult_t send_on(kolo_bootstrap *bs, mesh_link *l, const uint8_t *hdr, const void *data, size_t len,
                            int64_t dl) {
  for (size_t sent = 0; sent < KOLO_WIRE_HDR_BYTES + len;) {
    if (l->down) return kolo_bs_link_error(bs, l->peer);
    ssize_t n = send_from(l->fd, hdr, data, len, sent);
    if (n > 0) {
      sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KOLO_TRACE("%s: send to rank %d waits after %zu of %zu bytes", bs->name, l->peer, sent,
                 KOLO_WIRE_HDR_BYTES + len);
      koloResult_t res = wait_on(bs, l->peer, l->peer, dl); /* reads meanwhile: no deadlock */
      if (res == koloTimeout) return send_timed_out(bs, l, len, sent);
      if (res != koloSuccess) return res;
    } else if (n < 0 && errno != EINTR) {
      int err = errno;
      kolo_link_pump(l); /* keep what the peer sent before it went */
      if (!l->down) kolo_link_lost(l, err);
    }
  }
  return koloSuccess;
}

/* Links to the ranks of this process, made before init returns.  A thread
 * may drive several of this process's ranks in one group (one thread per
 * process, several devices); a link made on first use there would wait for
 * the verdict of a rank whose thread is this one, busy waiting: it never
 * comes.  During init every rank waits in the bootstrap, so all of them
 * answer. */
koloResult_t kolo_bs_link_process_peers(kolo_bootstrap *bs) {
  if (kolo_param_int("KOLO_BOOTSTRAP_PROCESS_LINKS") == 0) return koloSuccess;
  uint64_t mine = bs->peers[bs->rank].proc_token;
  int64_t dl = kolo_deadline(bs->timeout_ms);
  for (int r = 0; r < bs->nranks; r++) {
    if (r == bs->rank || bs->peers[r].proc_token != mine) continue;
    mesh_link *l = kolo_bs_link(bs, r);
    if (l == NULL) return koloSystemError;
    kolo_errbuf before = *bs->eb;
    koloResult_t res = link_ready(bs, l, dl);
    /* A peer that finished its init and already left said goodbye on the
     * link: it was made.  Its leaving is for the calls that use it. */
    if (res != koloSuccess && l->down && l->fate != KOLO_PEER_LOST && l->victim < 0) {
      *bs->eb = before;
      res = koloSuccess;
    }
    if (res != koloSuccess) return res;
  }
  return koloSuccess;
}

koloResult_t kolo_bootstrap_send(kolo_bootstrap *bs, int peer, uint32_t tag, const void *data,
                                 size_t len) {
  koloResult_t res = check_call(bs, "send to", peer, data, len);
  if (res != koloSuccess) return res;
  mesh_link *l = kolo_bs_link(bs, peer);
  if (l == NULL) return koloSystemError;
  if (peer == bs->rank) return send_self(bs, l, tag, data, len);
  int64_t dl = kolo_deadline(bs->timeout_ms);
  res = link_ready(bs, l, dl);
  if (res != koloSuccess) return res;
  uint8_t hdr[KOLO_WIRE_HDR_BYTES];
  kolo_encode_header(hdr, tag, len);
  return send_on(bs, l, hdr, data, len, dl);
}

static koloResult_t deliver(kolo_bootstrap *bs, int peer, queued_msg *m, void *data, size_t len) {
  koloResult_t res = koloSuccess;
  if (m->len != len) {
    char who[112];
    res = kolo_error(bs->eb, koloRemoteError, "%s sent %zu bytes with tag 0x%x, expected %zu",
                     kolo_bs_peer_name(bs, peer, who, sizeof who), m->len, m->tag, len);
  } else if (len) {
    memcpy(data, m->data, len);
  }
  free(m);
  return res;
}

int kolo_bs_reach_grace_ms(const kolo_bootstrap *bs) {
  return bs->timeout_ms > 0 && bs->timeout_ms / 4 < RECV_REACH_MS ? bs->timeout_ms / 4 : RECV_REACH_MS;
}

/* When a receiver connects to a peer that has not connected to it. */
static int64_t reach_at(const kolo_bootstrap *bs, int64_t start) { return start + kolo_bs_reach_grace_ms(bs); }

/* One wait of a recv from the link l: connects to the peer once the grace
 * is over (where its address is known). */
static koloResult_t recv_wait(kolo_bootstrap *bs, mesh_link *l, int64_t start, int64_t dl) {
  int64_t reach = reach_at(bs, start);
  int known = bs->peers[l->peer].addr.ss_family != 0;
  if (l->fd < 0 && known && kolo_now_ms() >= reach) {
    koloResult_t res = kolo_bs_reach(bs, l);
    if (res != koloSuccess) return res;
  }
  int64_t until = l->fd < 0 && known && kolo_now_ms() < reach && (dl == 0 || reach < dl) ? reach : dl;
  koloResult_t res = wait_on(bs, l->peer, -1, until);
  return res == koloTimeout && until != dl ? koloSuccess : res;
}

koloResult_t kolo_bootstrap_recv(kolo_bootstrap *bs, int peer, uint32_t tag, void *data, size_t len) {
  koloResult_t res = check_call(bs, "recv from", peer, data, len);
  if (res != koloSuccess) return res;
  mesh_link *l = kolo_bs_link(bs, peer);
  if (l == NULL) return koloSystemError;
  int64_t start = kolo_now_ms(), dl = kolo_deadline(bs->timeout_ms);
  for (;;) {
    queued_msg *m = kolo_link_take(l, tag);
    if (m) return deliver(bs, peer, m, data, len);
    if (peer == bs->rank)
      return kolo_error(bs->eb, koloInvalidUsage,
                        "rank %d waits for a message to itself with tag 0x%x that it never sent", peer, tag);
    if (l->down) return kolo_bs_link_error(bs, peer);
    res = recv_wait(bs, l, start, dl);
    if (res == koloTimeout) {
      char who[112];
      return kolo_error(bs->eb, koloTimeout, "no message with tag 0x%x from %s within %d ms", tag,
                        kolo_bs_peer_name(bs, peer, who, sizeof who), bs->timeout_ms);
    }
    if (res != koloSuccess) return res;
  }
}

/* ---- liveness ------------------------------------------------------------------- */

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
