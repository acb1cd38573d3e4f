/* net_wire.c - encoders and decoders of the net transports' hellos,
 * frames and control messages (net_wire.h).  Decoders take a buffer and
 * check every field; no system calls. */
#include "transport/net_wire.h"

#include <stdio.h>
#include <string.h>

int kolo_net_hello_prefix(const uint8_t *in, size_t len, uint32_t magic, uint32_t v1_magic, uint32_t *version) {
  kolo_wire_in r = kolo_wire_reader(in, len < KOLO_NET_HELLO_PREFIX_BYTES ? len : KOLO_NET_HELLO_PREFIX_BYTES);
  uint32_t m = kolo_get_u32(&r);
  *version = kolo_get_u32(&r);
  if (!r.bad && m == v1_magic) *version = 1;
  if (r.bad || (m != magic && m != v1_magic)) return KOLO_NET_WIRE_GARBLED;
  return *version == KOLO_WIRE_VERSION ? KOLO_NET_WIRE_OK : KOLO_NET_WIRE_OTHER_VERSION;
}

/* The prefix and the exact length of a hello: OK, or the verdict and why. */
static int check_hello(const uint8_t *in, size_t len, size_t want, uint32_t magic, uint32_t v1_magic,
                       uint32_t *version, char *why, size_t why_len) {
  int p = kolo_net_hello_prefix(in, len, magic, v1_magic, version);
  if (p == KOLO_NET_WIRE_OTHER_VERSION)
    snprintf(why, why_len, "it speaks kolo wire version %u, this rank speaks %u", *version, KOLO_WIRE_VERSION);
  else if (p != KOLO_NET_WIRE_OK)
    snprintf(why, why_len, "it is not a kolo connection (%zu bytes without kolo's magic)", len);
  else if (len != want)
    snprintf(why, why_len, "it sent a hello of %zu bytes, expected %zu", len, want);
  else
    return KOLO_NET_WIRE_OK;
  return p == KOLO_NET_WIRE_OK ? KOLO_NET_WIRE_GARBLED : p;
}

static void put_prefix(kolo_wire_out *w, uint32_t magic) {
  kolo_put_u32(w, magic);
  kolo_put_u32(w, KOLO_WIRE_VERSION);
}

/* ---- socket provider ---------------------------------------------------------- */

void kolo_encode_sock_hello(const kolo_sock_hello *h, uint8_t out[KOLO_SOCK_HELLO_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_SOCK_HELLO_BYTES);
  put_prefix(&w, KOLO_SOCK_HELLO_MAGIC);
  kolo_put_u32(&w, h->index);
  kolo_put_u32(&w, h->nstreams);
  kolo_put_bytes(&w, h->token, sizeof h->token);
}

int kolo_decode_sock_hello(const uint8_t *in, size_t len, kolo_sock_hello *h, uint32_t *version, char *why,
                           size_t why_len) {
  memset(h, 0, sizeof *h);
  int v = check_hello(in, len, KOLO_SOCK_HELLO_BYTES, KOLO_SOCK_HELLO_MAGIC, KOLO_SOCK_HELLO_MAGIC_V1, version,
                      why, why_len);
  if (v != KOLO_NET_WIRE_OK) return v;
  kolo_wire_in r = kolo_wire_reader(in + KOLO_NET_HELLO_PREFIX_BYTES, len - KOLO_NET_HELLO_PREFIX_BYTES);
  h->index = kolo_get_u32(&r);
  h->nstreams = kolo_get_u32(&r);
  kolo_get_bytes(&r, h->token, sizeof h->token);
  if (h->nstreams >= 1 && h->nstreams <= KOLO_NET_MAX_STREAMS && h->index <= h->nstreams) return KOLO_NET_WIRE_OK;
  snprintf(why, why_len, "it sent a hello for stream %u of %u (1..%d streams)", h->index, h->nstreams,
           KOLO_NET_MAX_STREAMS);
  return KOLO_NET_WIRE_GARBLED;
}

#define FRAME_MAGIC 0x6b6c656eu /* "klen", mixed into the sequence number */

void kolo_encode_sock_frame(uint8_t out[KOLO_SOCK_FRAME_BYTES], uint32_t len, uint32_t seq) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_SOCK_FRAME_BYTES);
  kolo_put_u32(&w, len);
  kolo_put_u32(&w, seq ^ FRAME_MAGIC);
}

int kolo_decode_sock_frame(const uint8_t in[KOLO_SOCK_FRAME_BYTES], uint32_t seq, size_t cap, uint32_t *len,
                           char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_SOCK_FRAME_BYTES);
  uint32_t n = kolo_get_u32(&r), theirs = kolo_get_u32(&r) ^ FRAME_MAGIC;
  if (theirs != seq)
    snprintf(why, why_len, "is out of step on its network connection (request %u, header of %u)", seq, theirs);
  else if (n > cap)
    snprintf(why, why_len, "sent a region of %u bytes for a receive of %zu", n, cap);
  else {
    *len = n;
    return KOLO_NET_WIRE_OK;
  }
  return KOLO_NET_WIRE_GARBLED;
}

void kolo_encode_sock_ctrl(uint8_t out[KOLO_SOCK_CTRL_BYTES], uint32_t kind, uint32_t value) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_SOCK_CTRL_BYTES);
  kolo_put_u32(&w, kind);
  kolo_put_u32(&w, value);
}

void kolo_decode_sock_ctrl(const uint8_t in[KOLO_SOCK_CTRL_BYTES], uint32_t *kind, uint32_t *value) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_SOCK_CTRL_BYTES);
  *kind = kolo_get_u32(&r);
  *value = kolo_get_u32(&r);
}

/* ---- ib provider ---------------------------------------------------------------- */

void kolo_encode_ib_hello(const kolo_ib_hello *h, uint8_t out[KOLO_IB_HELLO_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_IB_HELLO_BYTES);
  put_prefix(&w, KOLO_IB_HELLO_MAGIC);
  kolo_put_u32(&w, h->nqps);
  kolo_put_bytes(&w, h->token, sizeof h->token);
  for (int q = 0; q < KOLO_IB_MAX_QPS; q++) kolo_put_u32(&w, h->qpn[q]);
  for (int q = 0; q < KOLO_IB_MAX_QPS; q++) kolo_put_u32(&w, h->psn[q]);
  kolo_put_bytes(&w, h->gid, sizeof h->gid);
  kolo_put_u16(&w, h->lid);
  kolo_put_u8(&w, h->link_layer);
  kolo_put_u8(&w, h->mtu);
  kolo_put_bytes(&w, h->dev, sizeof h->dev);
}

static int ib_hello_fault(const kolo_ib_hello *h, char *why, size_t why_len) {
  if (h->nqps < 1 || h->nqps > KOLO_IB_MAX_QPS)
    snprintf(why, why_len, "it offers %u QPs (1..%d)", h->nqps, KOLO_IB_MAX_QPS);
  else if (h->link_layer > 2)
    snprintf(why, why_len, "it names link layer %u (0..2)", h->link_layer);
  else if (h->mtu < 1 || h->mtu > 5)
    snprintf(why, why_len, "it names MTU code %u (1..5)", h->mtu);
  else if (memchr(h->dev, '\0', sizeof h->dev) == NULL)
    snprintf(why, why_len, "its device name is not terminated");
  else
    return KOLO_NET_WIRE_OK;
  return KOLO_NET_WIRE_GARBLED;
}

int kolo_decode_ib_hello(const uint8_t *in, size_t len, kolo_ib_hello *h, uint32_t *version, char *why,
                         size_t why_len) {
  memset(h, 0, sizeof *h);
  int v = check_hello(in, len, KOLO_IB_HELLO_BYTES, KOLO_IB_HELLO_MAGIC, KOLO_IB_HELLO_MAGIC_V1, version, why,
                      why_len);
  if (v != KOLO_NET_WIRE_OK) return v;
  kolo_wire_in r = kolo_wire_reader(in + KOLO_NET_HELLO_PREFIX_BYTES, len - KOLO_NET_HELLO_PREFIX_BYTES);
  h->nqps = kolo_get_u32(&r);
  kolo_get_bytes(&r, h->token, sizeof h->token);
  for (int q = 0; q < KOLO_IB_MAX_QPS; q++) h->qpn[q] = kolo_get_u32(&r);
  for (int q = 0; q < KOLO_IB_MAX_QPS; q++) h->psn[q] = kolo_get_u32(&r);
  kolo_get_bytes(&r, h->gid, sizeof h->gid);
  h->lid = kolo_get_u16(&r);
  h->link_layer = kolo_get_u8(&r);
  h->mtu = kolo_get_u8(&r);
  kolo_get_bytes(&r, h->dev, sizeof h->dev);
  return ib_hello_fault(h, why, why_len);
}
