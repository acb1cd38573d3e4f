/* fuzz_root_reply.c - a root's answer as a rank decodes it: the table of
 * every rank, or a refusal.  Input: one byte for nranks (1..64), then the
 * message, header and body. */
#include <stdint.h>
#include <stdlib.h>

#include "transport/bootstrap_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int nranks = 1 + data[0] % 64;
  kolo_peer_info *table = calloc((size_t)nranks, sizeof *table);
  if (table == NULL) return 0;
  kolo_errbuf eb = {0};
  if (kolo_root_decode_reply(data + 1, size - 1, nranks, table, "root", &eb) == koloSuccess)
    for (int r = 0; r < nranks; r++)
      if (table[r].rank != r) abort(); /* a table the decoder should have refused */
  free(table);
  return 0;
}
