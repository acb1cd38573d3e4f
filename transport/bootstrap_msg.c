/* bootstrap_msg.c - a rank's tagged messages (bootstrap.h, bootstrap_int.h).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/bootstrap_int.h"

#define RECV_REACH_MS 1000

/* Inside an allgather every rank's entry is needed: a wait there ends as
 * soon as a peer is known to have failed (lost without a word, or gone
 * blaming another rank), not only the one waited on, with that link's
 * error.  So a failure spreads along the links at once instead of leaving
 * ranks to time out on peers that will never send.  A peer that left with
 * a plain goodbye has done its part and ends nothing. */
static koloResult_t wait_on(kolo_bootstrap *bs, int peer, int out_peer, int64_t dl) {
  koloResult_t res = kolo_bs_wait(bs, out_peer, dl);
  if (res != koloSuccess || !bs->whole_job) return res;
  int failed = kolo_bs_first_failed(bs);
  return failed >= 0 && failed != peer ? kolo_bs_link_error(bs, failed) : koloSuccess;
}

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
