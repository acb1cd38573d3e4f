/* fuzz_root_reply.c - a root's answer as a rank decodes it: the peer info
 * of its ring predecessor, or a refusal.  Input: one byte for the rank the
 * entry must be (0..63), then the message, header and body. */
#include <stdint.h>
#include <stdlib.h>

#include "transport/bootstrap_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int rank = data[0] % 64;
  kolo_peer_info info;
  kolo_errbuf eb = {0};
  if (kolo_root_decode_reply(data + 1, size - 1, rank, &info, "root", &eb) == koloSuccess && info.rank != rank)
    abort(); /* an entry the decoder should have refused */
  return 0;
}
