/* bootstrap_link.c - one connection between two ranks (bootstrap_int.h):
 * a non-blocking pump that reassembles whole messages into the link's queue
 * of messages not yet asked for, and how the link went down (a goodbye
 * says; a close without one is a loss).  No waiting and no other link:
 * the mesh decides when to pump. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/bootstrap_int.h"

void kolo_link_down(mesh_link *l, koloResult_t res, const char *fmt, ...) {
  static _Atomic unsigned down_clock;
  l->down_seq = atomic_fetch_add(&down_clock, 1) + 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->down_why, sizeof l->down_why, fmt, ap);
  va_end(ap);
  l->down = 1;
  l->down_res = res;
  if (l->fd >= 0) close(l->fd);
  l->fd = -1;
  if (l->out.fd >= 0) close(l->out.fd);
  l->out.fd = -1;
  l->out.state = OUT_NONE;
  free(l->rx);
  l->rx = NULL;
}

/* A goodbye or a refusal ends the link: 1 when m was one (and is freed). */
static int link_last_word(mesh_link *l, queued_msg *m) {
  if (m->tag == KOLO_TAG_GOODBYE) {
    kolo_wire_in r = kolo_wire_reader(m->data, m->len);
    uint32_t reason = kolo_get_u32(&r);
    int32_t victim = m->len >= 8 ? kolo_get_i32(&r) : -1; /* a goodbye of 4 bytes blames no one */
    l->victim = victim >= 0 && victim < KOLO_MAX_RANKS ? victim : -1;
    l->fate = reason == KOLO_BYE_EXITED ? KOLO_PEER_EXITED : KOLO_PEER_LEFT;
    if (l->victim >= 0) /* it gave up because of another rank: name the origin too */
      kolo_link_down(l, koloRemoteError, "%s after rank %d failed", kolo_peer_fate_text(l->fate), l->victim);
    else
      kolo_link_down(l, koloRemoteError, "%s", kolo_peer_fate_text(l->fate));
  } else if (m->tag == KOLO_TAG_REFUSED) {
    koloResult_t res = koloRemoteError;
    char text[KOLO_ERR_LEN - 64];
    if (kolo_decode_refusal(m->data, m->len, &res, text, sizeof text) != KOLO_WIRE_OK)
      snprintf(text, sizeof text, "a refusal of %zu bytes (garbage)", m->len);
    kolo_link_down(l, res, "refused this rank's mesh connection: %s", text);
  } else {
    return 0;
  }
  free(m);
  return 1;
}

void kolo_link_lost(mesh_link *l, int err) {
  if (l->fate == KOLO_PEER_ALIVE) l->fate = KOLO_PEER_LOST;
  const char *mid = l->rx || l->hdr_got ? " in the middle of a message" : "";
  if (err == 0) kolo_link_down(l, koloRemoteError, "closed its connection%s", mid);
  else if (err == EPIPE || err == ECONNRESET)
    kolo_link_down(l, koloRemoteError, "closed its connection%s (%s)", mid, strerror(err));
  else kolo_link_down(l, koloSystemError, "failed%s: %s", mid, strerror(err));
}

void kolo_link_append(mesh_link *l, queued_msg *m) {
  m->next = NULL;
  if (l->last) l->last->next = m;
  else l->head = m;
  l->last = m;
}

/* The header is in: check it and make room for the payload. */
static void link_start_msg(mesh_link *l) {
  l->hdr = kolo_decode_header(l->hdr_raw);
  if (l->hdr.magic != KOLO_WIRE_MAGIC) {
    kolo_link_down(l, koloRemoteError, "sent garbage on the bootstrap mesh (magic 0x%08x)", l->hdr.magic);
  } else if (l->hdr.len > KOLO_MAX_MSG_BYTES) {
    kolo_link_down(l, koloRemoteError, "sent a message of %llu bytes, more than the limit of %llu",
                   (unsigned long long)l->hdr.len, (unsigned long long)KOLO_MAX_MSG_BYTES);
  } else if ((l->rx = malloc(sizeof *l->rx + l->hdr.len)) == NULL) {
    kolo_link_down(l, koloSystemError, "sent a message of %llu bytes: out of memory",
                   (unsigned long long)l->hdr.len);
  } else {
    l->rx->tag = l->hdr.tag;
    l->rx->len = l->hdr.len;
    l->rx_got = 0;
  }
}

void kolo_link_pump(mesh_link *l) {
  while (!l->down && l->fd >= 0) {
    if (l->rx && l->rx_got == l->rx->len) { /* a whole message */
      queued_msg *m = l->rx;
      l->rx = NULL;
      l->hdr_got = 0;
      if (link_last_word(l, m)) return;
      kolo_link_append(l, m);
      continue;
    }
    char *dst = l->rx ? l->rx->data + l->rx_got : (char *)l->hdr_raw + l->hdr_got;
    size_t want = l->rx ? l->rx->len - l->rx_got : sizeof l->hdr_raw - l->hdr_got;
    int err = 0;
    ssize_t n = kolo_sock_read_some(l->fd, dst, want, &err);
    if (n == 0) return;
    if (n < 0) {
      kolo_link_lost(l, err);
      return;
    }
    if (l->rx) l->rx_got += (size_t)n;
    else if ((l->hdr_got += (size_t)n) == sizeof l->hdr_raw) link_start_msg(l);
  }
}

queued_msg *kolo_link_take(mesh_link *l, uint32_t tag) {
  queued_msg *prev = NULL;
  for (queued_msg *m = l->head; m; prev = m, m = m->next) {
    if (m->tag != tag) continue;
    if (prev) prev->next = m->next;
    else l->head = m->next;
    if (l->last == m) l->last = prev;
    return m;
  }
  return NULL;
}

void kolo_link_free(mesh_link *l) {
  if (l == NULL) return;
  if (l->fd >= 0) close(l->fd);
  if (l->out.fd >= 0) close(l->out.fd);
  free(l->rx);
  for (queued_msg *m = l->head; m;) {
    queued_msg *next = m->next;
    free(m);
    m = next;
  }
  free(l);
}
