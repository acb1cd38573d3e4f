/* bootstrap_wire.c - pieces of the wire format shared by the root and the
 * ranks: random bytes and the reader of a new connection's hello
 * (bootstrap_wire.h). */
#include "transport/bootstrap_wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

koloResult_t kolo_random(void *buf, size_t len, kolo_errbuf *eb) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return kolo_syserror(eb, errno, "getrandom failed");
    p += n;
    len -= (size_t)n;
  }
  return koloSuccess;
}

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
    snprintf(why, why_len, "speaks kolo wire version 1, this process speaks %u", KOLO_WIRE_VERSION);
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

int kolo_pending_evictable(const kolo_pending_hello *pend, int n, int64_t now) {
  int i = most_silent(pend, n);
  return i >= 0 && now - pend[i].last_rx >= KOLO_HELLO_SILENT_MS ? i : -1;
}

int64_t kolo_pending_next_evictable(const kolo_pending_hello *pend, int n) {
  int i = most_silent(pend, n);
  return i < 0 ? 0 : pend[i].last_rx + KOLO_HELLO_SILENT_MS;
}

koloResult_t kolo_send_refusal(int fd, koloResult_t res, const char *text, const char *who, kolo_errbuf *eb) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
  size_t n = kolo_encode_refusal(res, text, m + KOLO_WIRE_HDR_BYTES);
  kolo_encode_header(m, KOLO_TAG_REFUSED, n);
  return kolo_sock_send_all(fd, m, KOLO_WIRE_HDR_BYTES + n, kolo_deadline(KOLO_HELLO_TIMEOUT_MS), who, eb);
}
