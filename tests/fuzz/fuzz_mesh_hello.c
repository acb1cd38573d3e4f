/* fuzz_mesh_hello.c - what a rank decodes on its mesh: the hello of a new
 * connection, then (once it is a link) the last words a peer may send: a
 * goodbye or a refusal.  Input: header and hello body, then a header and
 * body of a message on the link. */
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
