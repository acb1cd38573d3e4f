/* fuzz_socket_frame.c - the socket provider's decoders: a connection's
 * hello, then request headers (frames) and control messages.  Input: the
 * hello (KOLO_SOCK_HELLO_BYTES), then 8-byte frames checked against
 * requests 0, 1, 2, ... with a posted size taken from each frame's
 * position, the last 8 bytes also as a control message. */
#include <stdint.h>
#include <stdlib.h>

#include "transport/net_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t version;
  kolo_sock_hello h;
  char why[160];
  size_t n = size < KOLO_SOCK_HELLO_BYTES ? size : KOLO_SOCK_HELLO_BYTES;
  if (kolo_decode_sock_hello(data, n, &h, &version, why, sizeof why) == KOLO_NET_WIRE_OK &&
      (h.nstreams < 1 || h.nstreams > KOLO_NET_MAX_STREAMS || h.index > h.nstreams))
    abort();
  uint32_t seq = 0;
  for (size_t at = n; at + KOLO_SOCK_FRAME_BYTES <= size; at += KOLO_SOCK_FRAME_BYTES, seq++) {
    uint32_t len;
    size_t cap = (size_t)1 << (seq % 24);
    if (kolo_decode_sock_frame(data + at, seq, cap, &len, why, sizeof why) == KOLO_NET_WIRE_OK && len > cap)
      abort();
  }
  if (size >= KOLO_SOCK_CTRL_BYTES) {
    uint32_t kind, value;
    kolo_decode_sock_ctrl(data + size - KOLO_SOCK_CTRL_BYTES, &kind, &value);
  }
  return 0;
}
