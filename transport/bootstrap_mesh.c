/* bootstrap_mesh.c - a rank's connections to other ranks, made when first
 * needed (bootstrap_int.h; docs/dev/bootstrap.md).
 *
 * A rank listens for its whole life.  To reach a peer it connects, sends a
 * mesh hello (the job's secret, its rank) and waits for the peer's
 * verdict; the peer accepts whoever presents the secret, at any time it
 * waits in the bootstrap, concurrently with its other traffic.  Two ranks
 * that connect to each other at once keep the connection the lower rank
 * made (bootstrap_wire.h: KOLO_MESH_CROSSED), so that every pair ends with
 * one connection, and no data travels before the verdict.  Every wait polls
 * the listener, the connections that have not said hello, this rank's
 * connection attempts and its links, and never blocks on any one of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "transport/bootstrap_int.h"

/* A connection dropped before its verdict (the peer's listener took it for
 * a silent stranger: its host is loaded) is made again, this many times. */
#define OUT_MAX_ATTEMPTS 4
/* Pause before another attempt after a transient failure. */
#define OUT_RETRY_MS 50

const char *kolo_bs_peer_name(const kolo_bootstrap *bs, int r, char *buf, size_t len) {
  if (bs->peers[r].addr.ss_family == 0) {
    snprintf(buf, len, "rank %d", r);
    return buf;
  }
  char addr[80];
  kolo_addr_str(&bs->peers[r].addr, addr, sizeof addr);
  snprintf(buf, len, "rank %d (%s)", r, addr);
  return buf;
}

koloResult_t kolo_bs_link_error(kolo_bootstrap *bs, int peer) {
  char who[112];
  return kolo_error(bs->eb, bs->links[peer]->down_res, "%s %s", kolo_bs_peer_name(bs, peer, who, sizeof who),
                    bs->links[peer]->down_why);
}

/* ---- links ------------------------------------------------------------------------ */

static int remember_used(kolo_bootstrap *bs, int peer) {
  if (bs->nused == bs->cap_used) {
    int cap = bs->cap_used ? 2 * bs->cap_used : 16;
    int *used = realloc(bs->used, (size_t)cap * sizeof *used);
    if (used == NULL) return -1;
    bs->used = used;
    bs->cap_used = cap;
  }
  bs->used[bs->nused++] = peer;
  return 0;
}

mesh_link *kolo_bs_link(kolo_bootstrap *bs, int peer) {
  if (bs->links[peer]) return bs->links[peer];
  mesh_link *l = calloc(1, sizeof *l);
  if (l == NULL || remember_used(bs, peer) != 0) {
    free(l);
    kolo_error(bs->eb, koloSystemError, "%s: out of memory for a link to rank %d", bs->name, peer);
    return NULL;
  }
  l->peer = peer;
  l->fd = -1;
  l->out.fd = -1;
  l->victim = -1;
  bs->links[peer] = l;
  return l;
}

/* ---- this rank's connection attempts ---------------------------------------------- */

/* Sends a few bytes on a fresh connection, whose buffer is empty: all of
 * them at once, or the errno. */
static int send_small(int fd, const void *buf, size_t len) {
  ssize_t n;
  do n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)len) return 0;
  return n < 0 ? errno : EAGAIN;
}

static void out_close(link_out *o, int state) {
  if (o->fd >= 0) close(o->fd);
  o->fd = -1;
  o->state = state;
  o->got = 0;
}

/* The peer is gone: its listener refused (it closed it: its process ended or
 * its bootstrap was destroyed), or it dropped this rank too often. */
static void out_gone(kolo_bootstrap *bs, mesh_link *l, int err) {
  out_close(&l->out, OUT_NONE);
  l->fate = KOLO_PEER_LOST;
  if (err == ECONNREFUSED)
    kolo_link_down(l, koloRemoteError, "is gone: nothing listens at its bootstrap address any more (its process "
                   "ended or destroyed its communicator)");
  else
    kolo_link_down(l, koloRemoteError, "closed %d connections of rank %d before answering their hello", l->out.attempts,
                   bs->rank);
}

/* A failure worth another attempt: after a pause, within the caller's
 * deadline. */
static void out_later(mesh_link *l, int64_t pause_ms) {
  out_close(&l->out, OUT_NONE);
  l->out.retry_at = kolo_now_ms() + pause_ms;
}

static int transient(int err) {
  return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN || err == EADDRNOTAVAIL ||
         err == ECONNRESET || err == EINTR;
}

koloResult_t kolo_bs_reach(kolo_bootstrap *bs, mesh_link *l) {
  if (l->down || l->fd >= 0 || l->out.state != OUT_NONE) return koloSuccess;
  if (l->out.retry_at > kolo_now_ms()) return koloSuccess; /* the wait starts it then */
  l->out.retry_at = 0;
  int fd, err = kolo_sock_connect_start(&bs->peers[l->peer].addr, &fd);
  if (err == 0) {
    l->out = (link_out){OUT_CONNECTING, fd, l->out.attempts + 1, 0, 0, {0}};
    return koloSuccess;
  }
  if (err == ECONNREFUSED) out_gone(bs, l, err);
  else if (transient(err)) out_later(l, OUT_RETRY_MS);
  else {
    char who[112], text[200];
    return kolo_error(bs->eb, koloSystemError, "%s: cannot connect to %s: %s", bs->name,
                      kolo_bs_peer_name(bs, l->peer, who, sizeof who), kolo_fd_errtext(err, text, sizeof text));
  }
  return koloSuccess;
}

static void out_send_hello(kolo_bootstrap *bs, mesh_link *l) {
  kolo_mesh_hello h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, bs->uid.secret, sizeof h.secret);
  h.job = bs->uid.job;
  h.rank = bs->rank;
  h.nranks = bs->nranks;
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES];
  kolo_encode_header(m, KOLO_TAG_MESH_HELLO, KOLO_MESH_HELLO_BYTES);
  kolo_encode_mesh_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  int err = send_small(l->out.fd, m, sizeof m);
  if (err == 0) l->out.state = OUT_HELLO_SENT;
  else out_later(l, OUT_RETRY_MS);
}

/* The socket is writable: connected, or how it failed. */
static void out_connected(kolo_bootstrap *bs, mesh_link *l) {
  int err = kolo_sock_connect_done(l->out.fd);
  if (err == 0) out_send_hello(bs, l);
  else if (err == ECONNREFUSED) out_gone(bs, l, err);
  else out_later(l, OUT_RETRY_MS);
}

/* The connection was closed before its verdict: dropped as a stranger by a
 * loaded peer (connect again), or the peer went. */
static void out_dropped(kolo_bootstrap *bs, mesh_link *l) {
  char who[112];
  KOLO_INFO("%s: %s closed this rank's connection before answering its hello (attempt %d of %d)", bs->name,
            kolo_bs_peer_name(bs, l->peer, who, sizeof who), l->out.attempts, OUT_MAX_ATTEMPTS);
  if (l->out.attempts >= OUT_MAX_ATTEMPTS) out_gone(bs, l, 0);
  else out_later(l, 0);
}

/* A complete verdict (or refusal) in l->out.raw. */
static void out_verdict(kolo_bootstrap *bs, mesh_link *l, kolo_wire_header h) {
  const uint8_t *body = l->out.raw + KOLO_WIRE_HDR_BYTES;
  uint32_t v = 0;
  if (h.tag == KOLO_TAG_MESH_VERDICT && kolo_decode_verdict(body, (size_t)h.len, &v) == KOLO_WIRE_OK) {
    if (v == KOLO_MESH_ACCEPTED) {
      l->fd = l->out.fd; /* what follows on it is the peer's messages */
      l->out.fd = -1;
      out_close(&l->out, OUT_NONE);
    } else {
      KOLO_TRACE("%s: rank %d connects to this rank too, and its connection wins", bs->name, l->peer);
      out_close(&l->out, OUT_CROSSED); /* the peer's connection comes */
    }
    return;
  }
  koloResult_t res = koloRemoteError;
  char text[KOLO_ERR_LEN - 64];
  if (h.tag == KOLO_TAG_REFUSED && kolo_decode_refusal(body, (size_t)h.len, &res, text, sizeof text) == KOLO_WIRE_OK)
    kolo_link_down(l, res, "refused this rank's mesh connection: %s", text);
  else
    kolo_link_down(l, koloRemoteError, "answered this rank's mesh hello with garbage (tag 0x%08x, %llu bytes)", h.tag,
                   (unsigned long long)h.len);
}

/* Reads the verdict as far as it has come: its header, then exactly its
 * body, never a byte of what follows. */
static void out_read(kolo_bootstrap *bs, mesh_link *l) {
  link_out *o = &l->out;
  for (;;) {
    size_t want = KOLO_WIRE_HDR_BYTES;
    if (o->got >= KOLO_WIRE_HDR_BYTES) {
      kolo_wire_header h = kolo_decode_header(o->raw);
      if (h.magic != KOLO_WIRE_MAGIC || h.len > KOLO_REFUSAL_MAX_BYTES) {
        kolo_link_down(l, koloRemoteError, "answered this rank's mesh hello with garbage (magic 0x%08x, %llu bytes)",
                       h.magic, (unsigned long long)h.len);
        return;
      }
      want += (size_t)h.len;
      if (o->got == want) {
        out_verdict(bs, l, h);
        return;
      }
    }
    int err = 0;
    ssize_t n = kolo_sock_read_some(o->fd, o->raw + o->got, want - o->got, &err);
    if (n == 0) return;
    if (n < 0 && (err == 0 || err == ECONNRESET)) {
      out_dropped(bs, l);
      return;
    }
    if (n < 0) {
      out_later(l, OUT_RETRY_MS);
      return;
    }
    o->got += (size_t)n;
  }
}

/* ---- the listener ------------------------------------------------------------------- */

/* Why a complete mesh hello is not from a peer of this job, or NULL. */
static const char *hello_fault(const kolo_bootstrap *bs, const kolo_mesh_hello *h) {
  if (!kolo_secret_equal(h->secret, bs->uid.secret, KOLO_SECRET_BYTES)) return "did not present the job's secret";
  if (h->job != bs->uid.job || h->nranks != bs->nranks) return "belongs to another job";
  if (h->rank == bs->rank) return "claims this rank's own rank";
  const mesh_link *l = bs->links[h->rank];
  /* A higher rank's hello while linked: it crossed this rank's own
   * connection, which won (adopt answers it).  A lower one's is a stranger. */
  if (l && l->fd >= 0 && h->rank < bs->rank) return "claims a rank that is already connected";
  if (l && l->down) return "claims a rank whose connection is down";
  return NULL;
}

/* A connection that is no peer we wait for: told why where it can hear it
 * (a kolo rank of another version, or one that got the job wrong). */
static void refuse(kolo_bootstrap *bs, kolo_pending_hello *p, int other, uint32_t version, const char *fault) {
  char text[KOLO_ERR_LEN];
  if (other)
    snprintf(text, sizeof text, "%s refused a mesh connection: peer %s speaks kolo wire version %u, this rank "
             "speaks %u", bs->name, p->from, version, KOLO_BOOTSTRAP_WIRE_VERSION);
  else
    snprintf(text, sizeof text, "%s dropped a mesh connection from %s that %s", bs->name, p->from, fault);
  KOLO_WARN("%s", text);
  kolo_errbuf eb = {0};
  if (other && kolo_send_refusal(p->fd, koloInvalidUsage, text, p->from, &eb) != koloSuccess)
    KOLO_INFO("%s: could not tell %s why: %s", bs->name, p->from, eb.msg);
  close(p->fd);
  p->fd = -1;
}

/* Tells the peer of p its verdict; takes p's connection (adopted or closed). */
static void answer(kolo_bootstrap *bs, kolo_pending_hello *p, mesh_link *l, uint32_t verdict) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_VERDICT_BYTES];
  kolo_encode_header(m, KOLO_TAG_MESH_VERDICT, KOLO_VERDICT_BYTES);
  kolo_encode_verdict(verdict, m + KOLO_WIRE_HDR_BYTES);
  int err = send_small(p->fd, m, sizeof m);
  if (err != 0 || verdict != KOLO_MESH_ACCEPTED) {
    if (err != 0) KOLO_INFO("%s: could not answer rank %d's hello: %s", bs->name, l->peer, strerror(err));
    close(p->fd);
  } else {
    l->fd = p->fd;
    out_close(&l->out, OUT_NONE); /* the lower rank's connection wins: this one */
    l->out.retry_at = 0;
  }
  p->fd = -1;
}

/* A valid hello from rank h->rank: its connection becomes the link, unless
 * this rank is connecting to it too and is the lower of the two. */
static void adopt(kolo_bootstrap *bs, kolo_pending_hello *p, const kolo_mesh_hello *h) {
  mesh_link *l = kolo_bs_link(bs, h->rank);
  if (l == NULL) {
    close(p->fd);
    p->fd = -1;
    return;
  }
  int mine = l->out.state == OUT_CONNECTING || l->out.state == OUT_HELLO_SENT || l->fd >= 0;
  if (mine && bs->rank < h->rank) {
    KOLO_TRACE("%s: rank %d connected while this rank connects to it: this rank's connection wins", bs->name,
               h->rank);
    answer(bs, p, l, KOLO_MESH_CROSSED);
  } else {
    answer(bs, p, l, KOLO_MESH_ACCEPTED);
  }
}

/* Reads a pending connection's hello; adopts or drops it when complete. */
static void serve_pending(kolo_bootstrap *bs, kolo_pending_hello *p) {
  char why[200];
  const char *fault = why;
  int s = kolo_pending_step(p, KOLO_TAG_MESH_HELLO, KOLO_TAG_MESH_HELLO_V1, why, sizeof why);
  if (s == KOLO_HELLO_MORE) return;
  if (s == KOLO_HELLO_GONE) {
    KOLO_TRACE("%s: a connection from %s %s", bs->name, p->from, why);
    close(p->fd);
    p->fd = -1;
    return;
  }
  kolo_mesh_hello h;
  uint32_t version = 1; /* KOLO_HELLO_REFUSE: version 1's tag */
  int d = s == KOLO_HELLO_DONE ? kolo_decode_mesh_hello(p->body, (size_t)p->hdr.len, &h, &version, why, sizeof why)
          : s == KOLO_HELLO_REFUSE ? KOLO_WIRE_OTHER_VERSION : KOLO_WIRE_GARBLED;
  if (d == KOLO_WIRE_OK) fault = hello_fault(bs, &h);
  if (d == KOLO_WIRE_OK && fault == NULL) adopt(bs, p, &h);
  else refuse(bs, p, d == KOLO_WIRE_OTHER_VERSION, version, fault);
}

/* ---- the wait ------------------------------------------------------------------------- */

/* pfd_who of an entry after the listener and the pending connections: a
 * link's peer, or nranks + the peer of a connection attempt. */
static int room_for_pollfds(kolo_bootstrap *bs) {
  int need = 1 + bs->pend.n + 2 * bs->nused;
  if (need <= bs->cap_pfd) return 0;
  struct pollfd *pfd = realloc(bs->pfd, (size_t)need * sizeof *pfd);
  if (pfd) bs->pfd = pfd;
  int *who = realloc(bs->pfd_who, (size_t)need * sizeof *who);
  if (who) bs->pfd_who = who;
  if (!pfd || !who) return -1;
  bs->cap_pfd = need;
  return 0;
}

static nfds_t fill_pollfds(kolo_bootstrap *bs, int out_peer) {
  nfds_t n = 0;
  int full = kolo_pending_set_full(&bs->pend, kolo_now_ms());
  bs->pfd[n++] = (struct pollfd){full ? -1 : bs->lfd, POLLIN, 0};
  for (int i = 0; i < bs->pend.n; i++) bs->pfd[n++] = (struct pollfd){bs->pend.p[i].fd, POLLIN, 0};
  for (int u = 0; u < bs->nused; u++) {
    mesh_link *l = bs->links[bs->used[u]];
    if (l->out.fd >= 0) {
      short ev = l->out.state == OUT_CONNECTING ? POLLOUT : POLLIN;
      bs->pfd_who[n] = bs->nranks + l->peer;
      bs->pfd[n++] = (struct pollfd){l->out.fd, ev, 0};
    }
    if (l->fd >= 0) {
      bs->pfd_who[n] = l->peer;
      bs->pfd[n++] = (struct pollfd){l->fd, (short)(POLLIN | (l->peer == out_peer ? POLLOUT : 0)), 0};
    }
  }
  return n;
}

/* A link's socket fired: read it; a hang-up or error that the read did
 * not see as such still takes the link down. */
static void serve_link(mesh_link *l, short ev) {
  kolo_link_pump(l);
  if (l->down || l->fd < 0 || !(ev & (POLLHUP | POLLERR | POLLNVAL))) return;
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  kolo_link_lost(l, err);
}

static void serve_attempt(kolo_bootstrap *bs, mesh_link *l) {
  if (l->out.state == OUT_CONNECTING) out_connected(bs, l);
  else if (l->out.state == OUT_HELLO_SENT) out_read(bs, l);
}

static void serve_sockets(kolo_bootstrap *bs, nfds_t n) {
  int npend = bs->pend.n;
  for (int i = 0; i < npend; i++)
    if (bs->pfd[1 + i].revents && bs->pend.p[i].fd >= 0) serve_pending(bs, &bs->pend.p[i]);
  for (nfds_t k = 1 + (nfds_t)npend; k < n; k++) {
    if (bs->pfd[k].revents == 0) continue;
    int who = bs->pfd_who[k];
    mesh_link *l = bs->links[who % bs->nranks];
    if (who >= bs->nranks && l->out.fd == bs->pfd[k].fd) serve_attempt(bs, l);
    else if (who < bs->nranks && l->fd == bs->pfd[k].fd) serve_link(l, bs->pfd[k].revents);
  }
  kolo_pending_compact(&bs->pend);
}

/* Attempts whose pause is over start again; the earliest pause still
 * running (0: none). */
static koloResult_t restart_attempts(kolo_bootstrap *bs, int64_t *next) {
  int64_t now = kolo_now_ms();
  *next = 0;
  for (int u = 0; u < bs->nused; u++) {
    mesh_link *l = bs->links[bs->used[u]];
    if (l->down || l->fd >= 0 || l->out.state != OUT_NONE || l->out.retry_at == 0) continue;
    if (l->out.retry_at > now) {
      if (*next == 0 || l->out.retry_at < *next) *next = l->out.retry_at;
      continue;
    }
    koloResult_t res = kolo_bs_reach(bs, l);
    if (res != koloSuccess) return res;
  }
  return koloSuccess;
}

static int64_t earlier(int64_t a, int64_t b) { return a == 0 ? b : (b == 0 || a < b) ? a : b; }

/* One round: poll until dl (or sooner, when something inside is due). */
static koloResult_t wait_round(kolo_bootstrap *bs, int out_peer, int64_t dl) {
  int64_t retry;
  koloResult_t res = restart_attempts(bs, &retry);
  if (res != koloSuccess) return res;
  if (room_for_pollfds(bs) != 0) return kolo_error(bs->eb, koloSystemError, "%s: out of memory in a wait", bs->name);
  nfds_t n = fill_pollfds(bs, out_peer);
  int64_t due = earlier(earlier(dl, retry), kolo_pending_next_due(&bs->pend, kolo_now_ms()));
  int ready = kolo_poll(bs->pfd, n, due);
  if (ready < 0) return kolo_syserror(bs->eb, errno, "%s: poll on the bootstrap connections failed", bs->name);
  if (ready > 0) serve_sockets(bs, n);
  kolo_pending_expire(&bs->pend, kolo_now_ms(), bs->name);
  if (ready > 0 && bs->pfd[0].revents) {
    kolo_errbuf eb = {0};
    if (kolo_pending_accept(&bs->pend, bs->lfd, bs->name, &eb) != koloSuccess)
      return kolo_error(bs->eb, koloSystemError, "%s: cannot take bootstrap connections: %s", bs->name, eb.msg);
  }
  return ready == 0 && dl != 0 && kolo_now_ms() >= dl ? koloTimeout : koloSuccess;
}

koloResult_t kolo_bs_wait(kolo_bootstrap *bs, int out_peer, int64_t dl) { return wait_round(bs, out_peer, dl); }

void kolo_bs_poll_now(kolo_bootstrap *bs) {
  if (wait_round(bs, -1, 1) == koloSystemError) /* 1: a deadline long past, so poll does not wait */
    KOLO_INFO("%s: a liveness check failed: %s", bs->name, bs->eb->msg);
}

void kolo_bs_mesh_free(kolo_bootstrap *bs) {
  if (bs->lfd >= 0) close(bs->lfd);
  bs->lfd = -1;
  kolo_pending_set_free(&bs->pend);
  for (int u = 0; u < bs->nused; u++) {
    kolo_link_free(bs->links[bs->used[u]]);
    bs->links[bs->used[u]] = NULL;
  }
  bs->nused = 0;
  free(bs->used);
  free(bs->pfd);
  free(bs->pfd_who);
  bs->used = NULL;
  bs->pfd = NULL;
  bs->pfd_who = NULL;
  bs->cap_used = bs->cap_pfd = 0;
}
