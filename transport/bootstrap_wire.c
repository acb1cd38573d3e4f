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
  kolo_addr_str(from, p->from, sizeof p->from);
}

/* Checks the header once it is complete: 0, or -1 with the reason. */
static int check_header(const kolo_pending_hello *p, uint32_t tag, size_t body_len, char *why,
                        size_t why_len) {
  if (p->hdr.magic != KOLO_WIRE_MAGIC || p->hdr.tag != tag) {
    snprintf(why, why_len, "sent garbage (header magic 0x%08x, tag 0x%08x)", p->hdr.magic,
             p->hdr.tag);
    return -1;
  }
  if (p->hdr.len != body_len) {
    snprintf(why, why_len, "announced a hello of %llu bytes, expected %zu%s",
             (unsigned long long)p->hdr.len, body_len,
             p->hdr.len > body_len ? " (oversized)" : "");
    return -1;
  }
  return 0;
}

/* Where the next bytes go: the header first, then the body. */
static unsigned char *next_bytes(kolo_pending_hello *p, size_t body_len, size_t *want) {
  size_t h = sizeof p->hdr;
  if (p->got < h) {
    *want = h - p->got;
    return (unsigned char *)&p->hdr + p->got;
  }
  *want = h + body_len - p->got;
  return p->body + (p->got - h);
}

int kolo_pending_step(kolo_pending_hello *p, uint32_t tag, size_t body_len, char *why,
                      size_t why_len) {
  if (body_len > sizeof p->body) {
    snprintf(why, why_len, "internal error: hello of %zu bytes does not fit", body_len);
    return KOLO_HELLO_DROP;
  }
  for (;;) {
    size_t want;
    unsigned char *dst = next_bytes(p, body_len, &want);
    if (want == 0) return KOLO_HELLO_DONE;
    int err = 0;
    ssize_t n = kolo_sock_read_some(p->fd, dst, want, &err);
    if (n == 0) return KOLO_HELLO_MORE;
    if (n < 0 && err == 0) {
      snprintf(why, why_len, "closed the connection after %zu of %zu bytes (truncated hello)",
               p->got, sizeof p->hdr + body_len);
      return KOLO_HELLO_DROP;
    }
    if (n < 0) {
      snprintf(why, why_len, "failed: %s", strerror(err));
      return KOLO_HELLO_DROP;
    }
    size_t before = p->got;
    p->got += (size_t)n;
    if (before < sizeof p->hdr && p->got >= sizeof p->hdr &&
        check_header(p, tag, body_len, why, why_len) != 0)
      return KOLO_HELLO_DROP;
  }
}
