/* fuzz_socket_frame.c - the socket provider's decoders: a connection's
 * hello, then frame headers with what follows them.  Input: the hello
 * (KOLO_SOCK_HELLO_BYTES), then 16-byte headers, each checked as arriving
 * at a sender and at a receiver (slice i due at position i, slots of a size
 * taken from its position), each followed by the signature or report its
 * flags announce, decoded too.  Whatever a decoder accepts must be in its
 * documented range and re-encode to exactly its input; a refusal comes
 * with a terminated sentence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/net_wire.h"
#include "tests/fuzz/fuzz_util.h"

static void call_sig(const uint8_t *at) {
  char why[160] = "";
  kolo_call_sig s;
  if (kolo_decode_call_sig(at, &s, why, sizeof why) != KOLO_NET_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_said(why, sizeof why));
    return;
  }
  FUZZ_REQUIRE(s.set == 1);
  uint8_t again[KOLO_NET_SIG_BYTES];
  kolo_encode_call_sig(&s, again);
  FUZZ_REQUIRE(memcmp(again, at, sizeof again) == 0);
}

static void mismatch(const uint8_t *at) {
  char why[160] = "";
  kolo_call_mismatch m;
  if (kolo_decode_mismatch(at, &m, why, sizeof why) != KOLO_NET_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_said(why, sizeof why));
    return;
  }
  FUZZ_REQUIRE(m.rank[0] >= 0 && m.rank[1] >= 0 && m.sig[0].set == 1 && m.sig[1].set == 1);
  uint8_t again[KOLO_NET_REPORT_BYTES];
  kolo_encode_mismatch(&m, again);
  FUZZ_REQUIRE(memcmp(again, at, sizeof again) == 0);
}

static void records(const kolo_sock_frame *f, const uint8_t *at, size_t left) {
  size_t extra = kolo_sock_frame_extra(f);
  FUZZ_REQUIRE(extra <= KOLO_SOCK_EXTRA_MAX);
  if (extra > left || !(f->flags & 1u)) return;
  if (f->kind == KOLO_SOCK_DATA) call_sig(at);
  else if (f->kind == KOLO_SOCK_STOP) mismatch(at);
}

static void hello(const uint8_t *data, size_t n) {
  uint32_t version = 0;
  kolo_sock_hello h;
  char why[160] = "";
  int v = kolo_decode_sock_hello(data, n, &h, &version, why, sizeof why);
  if (v != KOLO_NET_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_said(why, sizeof why));
    return;
  }
  FUZZ_REQUIRE(h.nstreams >= 1 && h.nstreams <= KOLO_NET_MAX_STREAMS && h.index < h.nstreams);
  uint8_t again[KOLO_SOCK_HELLO_BYTES];
  kolo_encode_sock_hello(&h, again);
  FUZZ_REQUIRE(n == sizeof again && memcmp(again, data, n) == 0);
}

/* One header as arriving at a sender or a receiver end. */
static void frame(const uint8_t *at, size_t left, int to_sender, uint32_t step, size_t cap) {
  char why[160] = "";
  kolo_sock_frame f;
  if (kolo_decode_sock_frame(at, to_sender, step, cap, &f, why, sizeof why) != KOLO_NET_WIRE_OK) {
    FUZZ_REQUIRE(fuzz_said(why, sizeof why));
    return;
  }
  FUZZ_REQUIRE(f.kind == KOLO_SOCK_DATA || f.kind == KOLO_SOCK_CREDIT || f.kind == KOLO_SOCK_STOP);
  FUZZ_REQUIRE(f.kind != KOLO_SOCK_DATA || (!to_sender && f.value == step && f.len <= cap));
  FUZZ_REQUIRE(f.kind != KOLO_SOCK_CREDIT || (to_sender && f.flags == 0));
  FUZZ_REQUIRE(f.kind == KOLO_SOCK_DATA || f.len == 0);
  FUZZ_REQUIRE((f.flags & ~KOLO_SOCK_FLAG_SIG) == 0);
  FUZZ_REQUIRE(f.pad % 8 == 0 && f.pad <= KOLO_SOCK_PAD_MAX && (f.kind == KOLO_SOCK_DATA || f.pad == 0));
  uint8_t again[KOLO_SOCK_HDR_BYTES];
  kolo_encode_sock_frame(again, &f);
  FUZZ_REQUIRE(memcmp(again, at, sizeof again) == 0);
  records(&f, at + KOLO_SOCK_HDR_BYTES, left - KOLO_SOCK_HDR_BYTES);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t n = size < KOLO_SOCK_HELLO_BYTES ? size : KOLO_SOCK_HELLO_BYTES;
  hello(data, n);
  uint32_t step = 0;
  for (size_t at = n; at + KOLO_SOCK_HDR_BYTES <= size; at += KOLO_SOCK_HDR_BYTES, step++) {
    size_t cap = (size_t)1 << (step % 24);
    for (int to_sender = 0; to_sender < 2; to_sender++) frame(data + at, size - at, to_sender, step, cap);
  }
  return 0;
}
