/* bootstrap_pending.c - the connections a listener (the root, or a rank's
 * mesh listener) has accepted that have not presented their hello yet
 * (bootstrap_wire.h): reading a hello as it trickles in, and the table of
 * such connections, which grows as they come up to its most and then makes
 * room by dropping the connection silent longest.  No connection is
 * waited on: the listener polls them all with its other sockets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "transport/bootstrap_wire.h"

/* ---- one connection ---------------------------------------------------------- */

void kolo_pending_start(kolo_pending_hello *p, int fd, const struct sockaddr_storage *from) {
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->deadline = kolo_deadline(KOLO_HELLO_TIMEOUT_MS);
  p->last_rx = kolo_now_ms();
  kolo_addr_str(from, p->from, sizeof p->from);
}

/* Checks the header once it is complete: KOLO_HELLO_MORE to go on, or
 * why not. */
static int check_header(kolo_pending_hello *p, uint32_t tag, uint32_t v1_tag, char *why, size_t why_len) {
  p->hdr = kolo_decode_header(p->raw);
  if (p->hdr.magic == KOLO_WIRE_MAGIC && p->hdr.tag == v1_tag) {
    snprintf(why, why_len, "speaks kolo wire version 1, this process speaks %u", KOLO_BOOTSTRAP_WIRE_VERSION);
    return KOLO_HELLO_REFUSE;
  }
  if (p->hdr.magic != KOLO_WIRE_MAGIC || p->hdr.tag != tag) {
    snprintf(why, why_len, "sent garbage (header magic 0x%08x, tag 0x%08x)", p->hdr.magic, p->hdr.tag);
    return KOLO_HELLO_DROP;
  }
  if (p->hdr.len > KOLO_HELLO_MAX_BYTES) {
    snprintf(why, why_len, "announced a hello of %llu bytes, more than %d (oversized)",
             (unsigned long long)p->hdr.len, KOLO_HELLO_MAX_BYTES);
    return KOLO_HELLO_DROP;
  }
  return KOLO_HELLO_MORE;
}

/* Where the next bytes go: the header first, then the body. */
static unsigned char *next_bytes(kolo_pending_hello *p, size_t *want) {
  size_t h = KOLO_WIRE_HDR_BYTES;
  if (p->got < h) {
    *want = h - p->got;
    return p->raw + p->got;
  }
  *want = h + (size_t)p->hdr.len - p->got;
  return p->body + (p->got - h);
}

int kolo_pending_step(kolo_pending_hello *p, uint32_t tag, uint32_t v1_tag, char *why, size_t why_len) {
  for (;;) {
    size_t want;
    unsigned char *dst = next_bytes(p, &want);
    if (want == 0) return KOLO_HELLO_DONE;
    int err = 0;
    ssize_t n = kolo_sock_read_some(p->fd, dst, want, &err);
    if (n == 0) return KOLO_HELLO_MORE;
    if (n < 0 && err == 0 && p->got == 0) {
      snprintf(why, why_len, "closed the connection before sending a byte");
      return KOLO_HELLO_GONE;
    }
    if (n < 0 && err == 0) {
      snprintf(why, why_len, "closed the connection after %zu bytes (truncated hello)", p->got);
      return KOLO_HELLO_DROP;
    }
    if (n < 0) {
      snprintf(why, why_len, "failed: %s", strerror(err));
      return KOLO_HELLO_DROP;
    }
    size_t before = p->got;
    p->got += (size_t)n;
    p->last_rx = kolo_now_ms();
    if (before < KOLO_WIRE_HDR_BYTES && p->got == KOLO_WIRE_HDR_BYTES) {
      int s = check_header(p, tag, v1_tag, why, why_len);
      if (s != KOLO_HELLO_MORE) return s;
    }
  }
}

static int most_silent(const kolo_pending_hello *pend, int n) {
  int best = -1;
  for (int i = 0; i < n; i++)
    if (pend[i].fd >= 0 && (best < 0 || pend[i].last_rx < pend[best].last_rx)) best = i;
  return best;
}

/* Bytes wait on fd that the listener has not read yet. */
static int has_unread(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0;
}

/* ---- the table ------------------------------------------------------------------ */

void kolo_pending_set_init(kolo_pending_set *s, int max) { *s = (kolo_pending_set){NULL, 0, 0, max}; }

void kolo_pending_set_free(kolo_pending_set *s) {
  for (int i = 0; i < s->n; i++)
    if (s->p[i].fd >= 0) close(s->p[i].fd);
  free(s->p);
  *s = (kolo_pending_set){NULL, 0, 0, s->max};
}

/* The connection to drop for a newcomer: silent for KOLO_HELLO_SILENT_MS
 * and nothing unread; -1 when there is none. */
static int evictable(kolo_pending_set *s, int64_t now) {
  for (;;) {
    int i = most_silent(s->p, s->n);
    if (i < 0 || now - s->p[i].last_rx < KOLO_HELLO_SILENT_MS) return -1;
    if (!has_unread(s->p[i].fd)) return i;
    /* It spoke while the listener was away (a loaded host preempts it for
     * longer than the silence allowed): not silent, and read next round. */
    s->p[i].last_rx = now;
  }
}

int kolo_pending_set_full(kolo_pending_set *s, int64_t now) { return s->n == s->max && evictable(s, now) < 0; }

/* Room for one more entry at the end; 0, or -1 when out of memory. */
static int grow(kolo_pending_set *s) {
  if (s->n < s->cap) return 0;
  int cap = s->cap ? 2 * s->cap : 8;
  if (cap > s->max) cap = s->max;
  kolo_pending_hello *p = realloc(s->p, (size_t)cap * sizeof *p);
  if (p == NULL) return -1;
  s->p = p;
  s->cap = cap;
  return 0;
}

/* Where a newcomer goes: the end, or a silent connection's place (closed
 * here); -1 when there is no room. */
static int room(kolo_pending_set *s, const char *who) {
  if (s->n < s->max) return grow(s) == 0 ? s->n : -1;
  int i = evictable(s, kolo_now_ms());
  if (i < 0) return -1;
  KOLO_INFO("%s: dropped a connection from %s that sent nothing for %d ms, for a newcomer (%d connections wait "
            "for their hello)", who, s->p[i].from, KOLO_HELLO_SILENT_MS, s->n);
  close(s->p[i].fd);
  s->p[i].fd = -1;
  return i;
}

koloResult_t kolo_pending_accept(kolo_pending_set *s, int lfd, const char *who, kolo_errbuf *eb) {
  for (;;) {
    int slot = room(s, who);
    if (slot < 0) return koloSuccess; /* the rest wait in the listen backlog */
    struct sockaddr_storage from;
    int fd;
    koloResult_t res = kolo_sock_accept(lfd, &from, eb, &fd);
    if (res != koloSuccess || fd < 0) return res;
    if (slot == s->n) s->n++;
    kolo_pending_start(&s->p[slot], fd, &from);
  }
}

void kolo_pending_expire(kolo_pending_set *s, int64_t now, const char *who) {
  for (int i = 0; i < s->n; i++) {
    if (s->p[i].fd < 0 || now < s->p[i].deadline) continue;
    KOLO_WARN("%s: dropped a connection from %s: sent no complete hello within %d ms", who, s->p[i].from,
              KOLO_HELLO_TIMEOUT_MS);
    close(s->p[i].fd);
    s->p[i].fd = -1;
  }
  kolo_pending_compact(s);
}

void kolo_pending_compact(kolo_pending_set *s) {
  int k = 0;
  for (int i = 0; i < s->n; i++)
    if (s->p[i].fd >= 0) s->p[k++] = s->p[i];
  s->n = k;
}

int64_t kolo_pending_next_due(kolo_pending_set *s, int64_t now) {
  int64_t due = 0;
  for (int i = 0; i < s->n; i++)
    if (due == 0 || s->p[i].deadline < due) due = s->p[i].deadline;
  if (s->n > 0 && kolo_pending_set_full(s, now)) { /* room once the silent one may go */
    int64_t go = s->p[most_silent(s->p, s->n)].last_rx + KOLO_HELLO_SILENT_MS;
    if (go < due) due = go;
  }
  return due;
}
