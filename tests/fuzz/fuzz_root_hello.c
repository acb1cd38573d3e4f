/* fuzz_root_hello.c - the root's decoders of what a connection presents:
 * the message header, the rank hello, and (a root that forwards) its block
 * of peer entries.  Input: header, hello body, block header, block body. */
#include <stdint.h>
#include <stdlib.h>

#include "transport/bootstrap_wire.h"

/* A block of at most this many ranks is decoded into a table of its job. */
#define FUZZ_MAX_TABLE 4096

static void decode_block(const kolo_rank_hello *h, const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES || h->nranks > FUZZ_MAX_TABLE) return;
  kolo_wire_header bh = kolo_decode_header(data);
  int lo, hi;
  kolo_root_block(h->root_index, h->nranks, h->nids, &lo, &hi);
  if (lo < 0 || hi > h->nranks || lo > hi) abort(); /* the decoder let a bad root through */
  size_t blen = size - KOLO_WIRE_HDR_BYTES;
  if (bh.len < blen) blen = (size_t)bh.len;
  kolo_peer_info *table = calloc((size_t)h->nranks, sizeof *table);
  if (table == NULL) return;
  char why[256];
  kolo_decode_peer_table(data + KOLO_WIRE_HDR_BYTES, blen, lo, hi, table, why, sizeof why);
  free(table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES) return 0;
  kolo_wire_header hdr = kolo_decode_header(data);
  size_t body = size - KOLO_WIRE_HDR_BYTES;
  if (hdr.len < body) body = (size_t)hdr.len;
  kolo_rank_hello h;
  uint32_t version;
  char why[256];
  if (kolo_decode_rank_hello(data + KOLO_WIRE_HDR_BYTES, body, &h, &version, why, sizeof why) != KOLO_WIRE_OK)
    return 0;
  if (h.role == KOLO_HELLO_SUBROOT) decode_block(&h, data + KOLO_WIRE_HDR_BYTES + body, size - KOLO_WIRE_HDR_BYTES - body);
  return 0;
}
