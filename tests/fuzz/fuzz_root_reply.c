/* fuzz_root_reply.c - a root's answer as a rank decodes it: the peer info
 * of its ring predecessor, or a refusal.  Input: one byte for the rank the
 * entry must be (0..63), then the message, header and body.  An accepted
 * entry is that rank's and re-encodes (header and body) to exactly the
 * message; a refused message leaves *info untouched and fails with a
 * sentence, and a refusal re-encoded decodes to the same code and
 * sentence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/bootstrap_wire.h"
#include "tests/fuzz/fuzz_util.h"

static void accepted(const kolo_peer_info *info, int rank, const uint8_t *msg, size_t len) {
  FUZZ_REQUIRE(info->rank == rank);
  uint8_t again[KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES];
  kolo_encode_header(again, KOLO_TAG_NEIGHBOR, KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_info(info, again + KOLO_WIRE_HDR_BYTES);
  FUZZ_REQUIRE(len == sizeof again && memcmp(again, msg, len) == 0);
}

/* The refusal the rank decoded, sent again: the same code and sentence. */
static void refusal_again(koloResult_t res, const kolo_errbuf *eb, int rank) {
  uint8_t again[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
  size_t n = kolo_encode_refusal(res, eb->msg, again + KOLO_WIRE_HDR_BYTES);
  kolo_encode_header(again, KOLO_TAG_REFUSED, n);
  kolo_peer_info info;
  kolo_errbuf eb2 = {0};
  FUZZ_REQUIRE(kolo_root_decode_reply(again, KOLO_WIRE_HDR_BYTES + n, rank, &info, "root", &eb2) == res);
  FUZZ_REQUIRE(strcmp(eb2.msg, eb->msg) == 0);
}

/* Whether msg is a well-formed refusal (its sentence may be empty). */
static int is_refusal(const uint8_t *msg, size_t len) {
  if (len < KOLO_WIRE_HDR_BYTES) return 0;
  kolo_wire_header h = kolo_decode_header(msg);
  size_t body = len - KOLO_WIRE_HDR_BYTES;
  return h.magic == KOLO_WIRE_MAGIC && h.tag == KOLO_TAG_REFUSED && h.len == body && body >= 4 &&
         body <= KOLO_REFUSAL_MAX_BYTES;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int rank = data[0] % 64;
  kolo_peer_info info;
  memset(&info, FUZZ_POISON, sizeof info);
  kolo_errbuf eb = {0};
  koloResult_t res = kolo_root_decode_reply(data + 1, size - 1, rank, &info, "root", &eb);
  if (res == koloSuccess) {
    accepted(&info, rank, data + 1, size - 1);
    return 0;
  }
  FUZZ_REQUIRE(fuzz_is_poison(&info, sizeof info));
  FUZZ_REQUIRE(res != koloInProgress && memchr(eb.msg, '\0', sizeof eb.msg) != NULL);
  if (is_refusal(data + 1, size - 1)) refusal_again(res, &eb, rank);
  else FUZZ_REQUIRE(eb.msg[0] != '\0'); /* garbage is named; a refusal says what its root said */
  return 0;
}
