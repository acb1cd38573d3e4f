/* fuzz_root_hello.c - the root's decoders of what a connection presents:
 * the message header, the rank hello, and (a root that forwards) its block
 * of peer entries.  Input: header, hello body, block header, block body.
 * Whatever a decoder accepts must be in its documented range and be
 * exactly what its encoder writes for the decoded value (no byte ignored,
 * nothing misread); a refusal comes with a terminated sentence, and a
 * block refused leaves the table outside the block untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/bootstrap_wire.h"
#include "tests/fuzz/fuzz_util.h"

/* A block of at most this many ranks is decoded into a table of its job. */
#define FUZZ_MAX_TABLE 4096

/* A header with kolo's magic re-encodes to its bytes. */
static void header_round_trip(const uint8_t *in, kolo_wire_header h) {
  uint8_t again[KOLO_WIRE_HDR_BYTES];
  if (h.magic != KOLO_WIRE_MAGIC) return;
  kolo_encode_header(again, h.tag, h.len);
  FUZZ_REQUIRE(memcmp(again, in, sizeof again) == 0);
}

/* Where the addresses of a hello body start: root 0's id's, the entry's. */
#define FIRST_ADDR_AT (4 + KOLO_SECRET_BYTES + 5 * 4 + 8 + 8 + KOLO_SECRET_BYTES)
#define INFO_ADDR_AT (4 + KOLO_SECRET_BYTES + 5 * 4 + KOLO_UID_WIRE_BYTES)

/* The canonical form of a hello body: an address of family 0 ("none",
 * where the hello may have none) is that byte alone, its port and bytes
 * read as zeros; the encoder writes zeros there. */
static void canonical_hello(uint8_t *body) {
  const size_t at[2] = {FIRST_ADDR_AT, INFO_ADDR_AT};
  for (int k = 0; k < 2; k++)
    if (body[at[k]] == 0) memset(body + at[k] + 1, 0, KOLO_ADDR_WIRE_BYTES - 1);
}

/* An accepted hello is in range and re-encodes to its input (canonical). */
static void hello_accepted(const kolo_rank_hello *h, const uint8_t *in, size_t len) {
  int nids = h->nids < 1 ? 1 : h->nids;
  FUZZ_REQUIRE(h->role == KOLO_HELLO_RANK || h->role == KOLO_HELLO_SUBROOT);
  FUZZ_REQUIRE(h->nranks >= 1 && h->nranks <= KOLO_MAX_RANKS && nids <= h->nranks);
  FUZZ_REQUIRE(h->root_index >= 0 && h->root_index < nids);
  FUZZ_REQUIRE(h->role == KOLO_HELLO_RANK ? h->rank >= 0 && h->rank < h->nranks : h->rank == -1);
  uint8_t again[KOLO_RANK_HELLO_BYTES], want[KOLO_RANK_HELLO_BYTES];
  FUZZ_REQUIRE(len == sizeof want);
  memcpy(want, in, sizeof want);
  canonical_hello(want);
  kolo_encode_rank_hello(h, again);
  FUZZ_REQUIRE(memcmp(again, want, sizeof want) == 0);
}

static int all_poison(const kolo_peer_info *t, int from, int to) {
  return fuzz_is_poison(t + from, (size_t)(to - from) * sizeof *t);
}

/* The block's verdict: accepted entries are ranks lo..hi-1 and re-encode to
 * the input; either way nothing outside [lo, hi) was written. */
static void block_verdict(int v, const kolo_peer_info *table, int nranks, int lo, int hi, const uint8_t *in,
                          size_t len, const char *why) {
  FUZZ_REQUIRE(all_poison(table, 0, lo) && all_poison(table, hi, nranks));
  if (v != KOLO_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_said(why, 256));
    return;
  }
  for (int k = lo; k < hi; k++) FUZZ_REQUIRE(table[k].rank == k);
  uint8_t *again = malloc(len + 1);
  if (again == NULL) abort();
  kolo_encode_peer_table(table, lo, hi, again);
  FUZZ_REQUIRE(memcmp(again, in, len) == 0);
  free(again);
}

static void decode_block(const kolo_rank_hello *h, const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES || h->nranks > FUZZ_MAX_TABLE) return;
  kolo_wire_header bh = kolo_decode_header(data);
  header_round_trip(data, bh);
  int lo, hi;
  kolo_root_block(h->root_index, h->nranks, h->nids, &lo, &hi);
  FUZZ_REQUIRE(lo >= 0 && hi <= h->nranks && lo <= hi); /* else the decoder let a bad root through */
  size_t blen = size - KOLO_WIRE_HDR_BYTES;
  if (bh.len < blen) blen = (size_t)bh.len;
  kolo_peer_info *table = malloc((size_t)h->nranks * sizeof *table);
  if (table == NULL) return;
  memset(table, FUZZ_POISON, (size_t)h->nranks * sizeof *table);
  char why[256] = "";
  const uint8_t *body = data + KOLO_WIRE_HDR_BYTES;
  int v = kolo_decode_peer_table(body, blen, lo, hi, table, why, sizeof why);
  block_verdict(v, table, h->nranks, lo, hi, body, blen, why);
  free(table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES) return 0;
  kolo_wire_header hdr = kolo_decode_header(data);
  header_round_trip(data, hdr);
  size_t body = size - KOLO_WIRE_HDR_BYTES;
  if (hdr.len < body) body = (size_t)hdr.len;
  kolo_rank_hello h;
  uint32_t version = 0;
  char why[256] = "";
  int v = kolo_decode_rank_hello(data + KOLO_WIRE_HDR_BYTES, body, &h, &version, why, sizeof why);
  if (v != KOLO_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_said(why, sizeof why));
    FUZZ_REQUIRE(v != KOLO_WIRE_OTHER_VERSION || version != KOLO_BOOTSTRAP_WIRE_VERSION);
    return 0;
  }
  hello_accepted(&h, data + KOLO_WIRE_HDR_BYTES, body);
  if (h.role == KOLO_HELLO_SUBROOT) decode_block(&h, data + KOLO_WIRE_HDR_BYTES + body, size - KOLO_WIRE_HDR_BYTES - body);
  return 0;
}
