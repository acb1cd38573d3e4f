/* fuzz_mesh_hello.c - what a rank decodes on its mesh: the hello of a new
 * connection, then a message of the bootstrap's own on the link: the
 * verdict on a hello, a peer entry of init's allgather (its blocks, or the
 * next partner's entry), or the last words a peer may send: a goodbye or a
 * refusal.  Input: header and hello body, then a header and body of a
 * message on the link. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/bootstrap_wire.h"

static void decode_last_word(const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES) return;
  kolo_wire_header hdr = kolo_decode_header(data);
  size_t len = size - KOLO_WIRE_HDR_BYTES;
  if (hdr.len < len) len = (size_t)hdr.len;
  koloResult_t res;
  char text[128];
  if (hdr.tag == KOLO_TAG_REFUSED &&
      kolo_decode_refusal(data + KOLO_WIRE_HDR_BYTES, len, &res, text, sizeof text) == KOLO_WIRE_OK &&
      (res == koloSuccess || strnlen(text, sizeof text) == sizeof text))
    abort(); /* a refusal must fail, and its sentence end within the buffer */
  uint32_t verdict;
  if (hdr.tag == KOLO_TAG_MESH_VERDICT &&
      kolo_decode_verdict(data + KOLO_WIRE_HDR_BYTES, len, &verdict) == KOLO_WIRE_OK &&
      verdict != KOLO_MESH_ACCEPTED && verdict != KOLO_MESH_CROSSED)
    abort(); /* a verdict the decoder should have refused */
  kolo_peer_info p;
  char why[256];
  if (hdr.tag == KOLO_TAG_NEXT && kolo_decode_peer_info(data + KOLO_WIRE_HDR_BYTES, len, 5, &p, why, sizeof why) ==
                                      KOLO_WIRE_OK && p.rank != 5)
    abort();
  if (hdr.tag == KOLO_TAG_PEERS && len <= 8 * KOLO_PEER_INFO_BYTES) {
    kolo_peer_info t[8];
    int hi = (int)(len / KOLO_PEER_INFO_BYTES);
    if (kolo_decode_peer_table(data + KOLO_WIRE_HDR_BYTES, len, 0, hi, t, why, sizeof why) == KOLO_WIRE_OK)
      for (int k = 0; k < hi; k++)
        if (t[k].rank != k) abort();
  }
  kolo_wire_in r = kolo_wire_reader(data + KOLO_WIRE_HDR_BYTES, len);
  if (hdr.tag == KOLO_TAG_GOODBYE) (void)kolo_get_u32(&r);
  if (hdr.tag == KOLO_TAG_GOODBYE && len >= 8) (void)kolo_get_i32(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < KOLO_WIRE_HDR_BYTES) return 0;
  kolo_wire_header hdr = kolo_decode_header(data);
  size_t body = size - KOLO_WIRE_HDR_BYTES;
  if (hdr.len < body) body = (size_t)hdr.len;
  kolo_mesh_hello h;
  uint32_t version;
  char why[256];
  int d = kolo_decode_mesh_hello(data + KOLO_WIRE_HDR_BYTES, body, &h, &version, why, sizeof why);
  if (d == KOLO_WIRE_OK && (h.rank < 0 || h.rank >= h.nranks)) abort();
  decode_last_word(data + KOLO_WIRE_HDR_BYTES + body, size - KOLO_WIRE_HDR_BYTES - body);
  return 0;
}
