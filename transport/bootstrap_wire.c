/* bootstrap_wire.c - pieces of the wire format shared by the root and the
 * ranks: random bytes and refusals (bootstrap_wire.h). */
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

koloResult_t kolo_send_refusal(int fd, koloResult_t res, const char *text, const char *who, kolo_errbuf *eb) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
  size_t n = kolo_encode_refusal(res, text, m + KOLO_WIRE_HDR_BYTES);
  kolo_encode_header(m, KOLO_TAG_REFUSED, n);
  return kolo_sock_send_all(fd, m, KOLO_WIRE_HDR_BYTES + n, kolo_deadline(KOLO_HELLO_TIMEOUT_MS), who, eb);
}
