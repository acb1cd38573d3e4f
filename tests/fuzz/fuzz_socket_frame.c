/* fuzz_socket_frame.c - the socket provider's decoders: a connection's
 * hello, then frame headers with what follows them.  Input: the hello
 * (KOLO_SOCK_HELLO_BYTES), then 16-byte headers, each checked as arriving
 * at a sender and at a receiver (slice i due at position i, slots of a size
 * taken from its position), each followed by the signature or report its
 * flags announce, decoded too. */
#include <stdint.h>
#include <stdlib.h>

#include "transport/net_wire.h"

static void records(const kolo_sock_frame *f, const uint8_t *at, size_t left) {
  char why[160];
  size_t extra = kolo_sock_frame_extra(f);
  if (extra > left) return;
  if (extra == KOLO_NET_SIG_BYTES) {
    kolo_call_sig s;
    if (kolo_decode_call_sig(at, &s, why, sizeof why) == KOLO_NET_WIRE_OK && s.set != 1) abort();
  } else if (extra == KOLO_NET_REPORT_BYTES) {
    kolo_call_mismatch m;
    if (kolo_decode_mismatch(at, &m, why, sizeof why) == KOLO_NET_WIRE_OK && (m.rank[0] < 0 || m.rank[1] < 0)) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t version;
  kolo_sock_hello h;
  char why[160];
  size_t n = size < KOLO_SOCK_HELLO_BYTES ? size : KOLO_SOCK_HELLO_BYTES;
  if (kolo_decode_sock_hello(data, n, &h, &version, why, sizeof why) == KOLO_NET_WIRE_OK &&
      (h.nstreams < 1 || h.nstreams > KOLO_NET_MAX_STREAMS || h.index >= h.nstreams))
    abort();
  uint32_t step = 0;
  for (size_t at = n; at + KOLO_SOCK_HDR_BYTES <= size; at += KOLO_SOCK_HDR_BYTES, step++) {
    size_t cap = (size_t)1 << (step % 24);
    for (int to_sender = 0; to_sender < 2; to_sender++) {
      kolo_sock_frame f;
      if (kolo_decode_sock_frame(data + at, to_sender, step, cap, &f, why, sizeof why) != KOLO_NET_WIRE_OK) continue;
      if (f.kind == KOLO_SOCK_DATA && (to_sender || f.value != step || f.len > cap)) abort();
      if (f.kind == KOLO_SOCK_CREDIT && !to_sender) abort();
      records(&f, data + at + KOLO_SOCK_HDR_BYTES, size - at - KOLO_SOCK_HDR_BYTES);
    }
  }
  return 0;
}
