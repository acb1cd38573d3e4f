/* fuzz_ib_handshake.c - the ib provider's setup hello as both ends decode
 * it (the sender's at accept, the receiver's answer at the sender): the
 * magic and version prefix first, as accept reads it, then the whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t version;
  (void)kolo_net_hello_prefix(data, size, KOLO_IB_HELLO_MAGIC, KOLO_IB_HELLO_MAGIC_V1, &version);
  kolo_ib_hello h;
  char why[160];
  if (kolo_decode_ib_hello(data, size, &h, &version, why, sizeof why) != KOLO_NET_WIRE_OK) return 0;
  if (h.nqps < 1 || h.nqps > KOLO_IB_MAX_QPS || memchr(h.dev, '\0', sizeof h.dev) == NULL) abort();
  uint8_t again[KOLO_IB_HELLO_BYTES]; /* what decodes re-encodes to the same bytes */
  kolo_encode_ib_hello(&h, again);
  if (size != sizeof again || memcmp(again, data, size) != 0) abort();
  return 0;
}
