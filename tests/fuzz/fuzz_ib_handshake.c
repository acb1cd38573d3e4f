/* fuzz_ib_handshake.c - what an ib provider connection decodes from its
 * peer: the setup hello as both ends read it (the magic and version prefix
 * first, as accept reads it, then the whole), then, in what follows the
 * hello's KOLO_IB_HELLO_BYTES, the records that arrive later: control
 * messages (a 2-byte length, then the message, decoded at a sender and at
 * a receiver end) until the input ends, and the last 8 and 32 bytes as a
 * credit record and a per-step signature header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_util.h"
#include "transport/net_wire.h"

static void hello(const uint8_t *data, size_t size) {
  uint32_t version;
  (void)kolo_net_hello_prefix(data, size, KOLO_IB_HELLO_MAGIC, KOLO_IB_HELLO_MAGIC_V1, &version);
  kolo_ib_hello h;
  char why[160];
  if (kolo_decode_ib_hello(data, size, &h, &version, why, sizeof why) != KOLO_NET_WIRE_OK) return;
  FUZZ_REQUIRE(h.nqps >= 1 && h.nqps <= KOLO_IB_MAX_QPS && memchr(h.dev, '\0', sizeof h.dev) != NULL);
  FUZZ_REQUIRE(h.in_bytes >= KOLO_IB_IN_MIN && h.in_bytes <= KOLO_IB_IN_MAX);
  uint8_t again[KOLO_IB_HELLO_BYTES]; /* what decodes re-encodes to the same bytes */
  kolo_encode_ib_hello(&h, again);
  FUZZ_REQUIRE(size == sizeof again && memcmp(again, data, size) == 0);
}

/* A control message as either end decodes it; what decodes re-encodes to
 * the same bytes, and a ring is one a sender may use. */
static void message(const uint8_t *m, size_t len) {
  for (int to_sender = 0; to_sender < 2; to_sender++) {
    kolo_ib_msg msg;
    char why[200];
    if (kolo_decode_ib_msg(m, len, to_sender, &msg, why, sizeof why) != KOLO_NET_WIRE_OK) continue;
    FUZZ_REQUIRE(msg.kind == KOLO_IB_MSG_STOP || (to_sender && msg.kind == KOLO_IB_MSG_RING));
    if (msg.kind == KOLO_IB_MSG_RING) {
      const kolo_ib_ring *g = &msg.ring;
      FUZZ_REQUIRE(g->gen >= 1 && g->nslots >= 1 && g->nslots <= KOLO_NET_MAX_REQS);
      FUZZ_REQUIRE(g->slot_bytes <= KOLO_IB_MAX_SLICE && g->inbox_max <= KOLO_IB_INBOX_MAX);
    }
    uint8_t again[KOLO_IB_MSG_MAX];
    FUZZ_REQUIRE(kolo_encode_ib_msg(&msg, again) == len && memcmp(again, m, len) == 0);
  }
}

static void records(const uint8_t *data, size_t size) {
  uint32_t head;
  if (size >= KOLO_IB_CREDIT_BYTES && kolo_decode_ib_credit(data + size - KOLO_IB_CREDIT_BYTES, &head) == KOLO_NET_WIRE_OK) {
    uint8_t again[KOLO_IB_CREDIT_BYTES];
    kolo_encode_ib_credit(head, again);
    FUZZ_REQUIRE(memcmp(again, data + size - KOLO_IB_CREDIT_BYTES, sizeof again) == 0);
  }
  kolo_call_sig sig;
  int has;
  char why[200];
  if (size >= KOLO_IB_SIGHDR_BYTES &&
      kolo_decode_ib_sighdr(data + size - KOLO_IB_SIGHDR_BYTES, &sig, &has, why, sizeof why) == KOLO_NET_WIRE_OK &&
      has) {
    uint8_t again[KOLO_IB_SIGHDR_BYTES];
    kolo_encode_ib_sighdr(&sig, again);
    FUZZ_REQUIRE(memcmp(again, data + size - KOLO_IB_SIGHDR_BYTES, sizeof again) == 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t n = size < KOLO_IB_HELLO_BYTES ? size : KOLO_IB_HELLO_BYTES;
  hello(data, n);
  for (size_t at = n; at + 2 <= size;) {
    size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
    at += 2;
    if (len > size - at) len = size - at;
    message(data + at, len);
    at += len;
  }
  records(data + n, size - n);
  return 0;
}
