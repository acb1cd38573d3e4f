/* fuzz_mesh_hello.c - what a rank decodes on its mesh: the hello of a new
 * connection, then a message of the bootstrap's own on the link: the
 * verdict on a hello, a peer entry of init's allgather (its blocks, or the
 * next partner's entry), or the last words a peer may send: a goodbye or a
 * refusal.  Input: header and hello body, then a header and body of a
 * message on the link.  Whatever a decoder accepts must be in its
 * documented range and re-encode to its input (a refusal, whose sentence
 * ends at its first NUL, to a form that decodes the same); a refused peer
 * entry leaves the output untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/bootstrap_wire.h"
#include "tests/fuzz/fuzz_util.h"

/* A refusal fails, its sentence ends within the buffer, and re-encoded it
 * decodes to the same code and sentence. */
static void refusal(const uint8_t *in, size_t len) {
  koloResult_t res, res2;
  char text[KOLO_ERR_LEN], text2[KOLO_ERR_LEN];
  if (kolo_decode_refusal(in, len, &res, text, sizeof text) != KOLO_WIRE_OK) {
    FUZZ_REQUIRE(len < 4 || len > KOLO_REFUSAL_MAX_BYTES);
    return;
  }
  FUZZ_REQUIRE(res != koloSuccess && res != koloInProgress && memchr(text, '\0', sizeof text) != NULL);
  uint8_t again[KOLO_REFUSAL_MAX_BYTES];
  size_t n = kolo_encode_refusal(res, text, again);
  FUZZ_REQUIRE(n == 4 + strlen(text));
  FUZZ_REQUIRE(kolo_decode_refusal(again, n, &res2, text2, sizeof text2) == KOLO_WIRE_OK);
  FUZZ_REQUIRE(res2 == res && strcmp(text2, text) == 0);
  kolo_wire_in r = kolo_wire_reader(in, len);
  const int32_t code = kolo_get_i32(&r);
  /* exact unless the decoder read it canonically: a code that is no failure
   * as koloRemoteError, a sentence cut at its first NUL or at the buffer */
  if (code == (int32_t)res && len - 4 < KOLO_ERR_LEN && memchr(in + 4, '\0', len - 4) == NULL)
    FUZZ_REQUIRE(n == len && memcmp(again, in, n) == 0);
}

static void verdict(const uint8_t *in, size_t len) {
  uint32_t v;
  if (kolo_decode_verdict(in, len, &v) != KOLO_WIRE_OK) return;
  FUZZ_REQUIRE(v == KOLO_MESH_ACCEPTED || v == KOLO_MESH_CROSSED);
  uint8_t again[KOLO_VERDICT_BYTES];
  kolo_encode_verdict(v, again);
  FUZZ_REQUIRE(len == sizeof again && memcmp(again, in, len) == 0);
}

/* The next partner's entry: rank 5's, re-encoding to its input; a refused
 * one leaves *p as it was. */
static void next_entry(const uint8_t *in, size_t len) {
  kolo_peer_info p;
  char why[256] = "";
  memset(&p, FUZZ_POISON, sizeof p);
  if (kolo_decode_peer_info(in, len, 5, &p, why, sizeof why) != KOLO_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_is_poison(&p, sizeof p) && fuzz_said(why, sizeof why));
    return;
  }
  FUZZ_REQUIRE(p.rank == 5);
  uint8_t again[KOLO_PEER_INFO_BYTES];
  kolo_encode_peer_info(&p, again);
  FUZZ_REQUIRE(len == sizeof again && memcmp(again, in, len) == 0);
}

static void peer_table(const uint8_t *in, size_t len) {
  kolo_peer_info t[8];
  char why[256] = "";
  int hi = (int)(len / KOLO_PEER_INFO_BYTES);
  if (len > 8 * KOLO_PEER_INFO_BYTES || kolo_decode_peer_table(in, len, 0, hi, t, why, sizeof why) != KOLO_WIRE_OK)
    return;
  for (int k = 0; k < hi; k++) FUZZ_REQUIRE(t[k].rank == k);
  uint8_t again[8 * KOLO_PEER_INFO_BYTES];
  kolo_encode_peer_table(t, 0, hi, again);
  FUZZ_REQUIRE(len == (size_t)hi * KOLO_PEER_INFO_BYTES && memcmp(again, in, len) == 0);
}

static void decode_last_word(const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES) return;
  kolo_wire_header hdr = kolo_decode_header(data);
  size_t len = size - KOLO_WIRE_HDR_BYTES;
  if (hdr.len < len) len = (size_t)hdr.len;
  const uint8_t *body = data + KOLO_WIRE_HDR_BYTES;
  if (hdr.tag == KOLO_TAG_REFUSED) refusal(body, len);
  if (hdr.tag == KOLO_TAG_MESH_VERDICT) verdict(body, len);
  if (hdr.tag == KOLO_TAG_NEXT) next_entry(body, len);
  if (hdr.tag == KOLO_TAG_PEERS) peer_table(body, len);
  kolo_wire_in r = kolo_wire_reader(body, len);
  if (hdr.tag == KOLO_TAG_GOODBYE) (void)kolo_get_u32(&r);
  if (hdr.tag == KOLO_TAG_GOODBYE && len >= 8) (void)kolo_get_i32(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES) return 0;
  kolo_wire_header hdr = kolo_decode_header(data);
  size_t body = size - KOLO_WIRE_HDR_BYTES;
  if (hdr.len < body) body = (size_t)hdr.len;
  kolo_mesh_hello h;
  uint32_t version = 0;
  char why[256] = "";
  int d = kolo_decode_mesh_hello(data + KOLO_WIRE_HDR_BYTES, body, &h, &version, why, sizeof why);
  if (d == KOLO_WIRE_OK) {
    FUZZ_REQUIRE(h.nranks >= 1 && h.nranks <= KOLO_MAX_RANKS && h.rank >= 0 && h.rank < h.nranks);
    uint8_t again[KOLO_MESH_HELLO_BYTES];
    kolo_encode_mesh_hello(&h, again);
    FUZZ_REQUIRE(body == sizeof again && memcmp(again, data + KOLO_WIRE_HDR_BYTES, body) == 0);
  } else {
    FUZZ_REQUIRE(fuzz_said(why, sizeof why));
  }
  decode_last_word(data + KOLO_WIRE_HDR_BYTES + body, size - KOLO_WIRE_HDR_BYTES - body);
  return 0;
}
