/* net_wire.h - what the net transports' own connections carry, encoded
 * explicitly (wire_codec.h: fixed widths, little-endian) (internal).
 *
 * Each TCP connection of the socket provider and the ib provider's setup
 * connection opens with a hello whose first 8 bytes are a magic and the
 * sender's KOLO_WIRE_VERSION.  Version 1 sent host-order structs under
 * other magics ("knet", "kib1"): those name a version 1 peer.  The socket
 * provider's frames (an 8-byte request header) and control messages (kind,
 * value) have codecs here too.  No system calls: the fuzz targets link it.
 */
#ifndef KOLO_TRANSPORT_NET_WIRE_H
#define KOLO_TRANSPORT_NET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "transport/net.h"
#include "transport/wire_codec.h"

/* Verdicts, as the bootstrap's decoders (bootstrap_wire.h). */
enum { KOLO_NET_WIRE_OK = 0, KOLO_NET_WIRE_GARBLED = -1, KOLO_NET_WIRE_OTHER_VERSION = -2 };

/* The magic and version in front of every hello. */
#define KOLO_NET_HELLO_PREFIX_BYTES 8
/* 0, or why the prefix is not ours: GARBLED (not kolo's), OTHER_VERSION
 * (*version says which; version 1 by its old magic). */
int kolo_net_hello_prefix(const uint8_t *in, size_t len, uint32_t magic, uint32_t v1_magic, uint32_t *version);

/* ---- socket provider ---------------------------------------------------------- */

#define KOLO_SOCK_HELLO_MAGIC 0x6b4e4554u    /* "kNET" */
#define KOLO_SOCK_HELLO_MAGIC_V1 0x6b6e6574u /* "knet" */
#define KOLO_SOCK_TOKEN_BYTES 16
typedef struct {
  uint32_t index, nstreams; /* stream index: 0 (frames both ways) .. nstreams - 1 */
  uint8_t token[KOLO_SOCK_TOKEN_BYTES];
} kolo_sock_hello;
#define KOLO_SOCK_HELLO_BYTES (KOLO_NET_HELLO_PREFIX_BYTES + 8 + KOLO_SOCK_TOKEN_BYTES)

void kolo_encode_sock_hello(const kolo_sock_hello *h, uint8_t out[KOLO_SOCK_HELLO_BYTES]);
/* Checks the prefix, the length, and that 1 <= nstreams <= KOLO_NET_MAX_STREAMS
 * and index <= nstreams. */
int kolo_decode_sock_hello(const uint8_t *in, size_t len, kolo_sock_hello *h, uint32_t *version, char *why,
                           size_t why_len);

/* Frames (stream 0, both ways; the provider's other streams carry only the
 * further parts of large slices).  A 16-byte header: a magic with the kind
 * and its flags, a value, a length and a check word; then, by flag, a call
 * signature (DATA) or a mismatch report (STOP); then a DATA frame's first
 * part.  sender -> receiver: DATA, STOP; receiver -> sender: CREDIT, STOP. */
enum { KOLO_SOCK_DATA = 1, KOLO_SOCK_CREDIT = 2, KOLO_SOCK_STOP = 3 };
#define KOLO_SOCK_FLAG_SIG 1u    /* DATA: a call signature follows the header */
#define KOLO_SOCK_FLAG_REPORT 1u /* STOP: a mismatch report follows the header */
#define KOLO_SOCK_HDR_BYTES 16
typedef struct {
  uint8_t kind, flags;
  uint32_t value; /* DATA: the step; CREDIT: the receiver's head; STOP: the word */
  uint32_t len;   /* DATA: the slice's bytes (every part); else 0 */
} kolo_sock_frame;
void kolo_encode_sock_frame(uint8_t out[KOLO_SOCK_HDR_BYTES], const kolo_sock_frame *f);
/* A header arriving at a sender end (to_sender: CREDIT or STOP) or at a
 * receiver end (DATA or STOP).  DATA must be step `expect` (slices come in
 * order) and at most `cap` bytes.  GARBLED with why (a phrase that follows
 * the peer's name) otherwise. */
int kolo_decode_sock_frame(const uint8_t in[KOLO_SOCK_HDR_BYTES], int to_sender, uint32_t expect, size_t cap,
                           kolo_sock_frame *f, char *why, size_t why_len);
/* Bytes that follow a decoded header before a DATA frame's payload. */
size_t kolo_sock_frame_extra(const kolo_sock_frame *f);

/* ---- records both providers carry (explicit bytes, never the structs) ---------- */

#define KOLO_NET_SIG_BYTES 24
void kolo_encode_call_sig(const kolo_call_sig *s, uint8_t out[KOLO_NET_SIG_BYTES]);
/* Checks that it is marked set and that its padding is zero. */
int kolo_decode_call_sig(const uint8_t in[KOLO_NET_SIG_BYTES], kolo_call_sig *s, char *why, size_t why_len);

#define KOLO_NET_REPORT_BYTES (8 + 2 * KOLO_NET_SIG_BYTES)
void kolo_encode_mismatch(const kolo_call_mismatch *m, uint8_t out[KOLO_NET_REPORT_BYTES]);
/* Checks both signatures and that the ranks are >= 0. */
int kolo_decode_mismatch(const uint8_t in[KOLO_NET_REPORT_BYTES], kolo_call_mismatch *m, char *why,
                         size_t why_len);

/* ---- ib provider ---------------------------------------------------------------- */

#define KOLO_IB_HELLO_MAGIC 0x6b494256u    /* "kIBV" */
#define KOLO_IB_HELLO_MAGIC_V1 0x6b696231u /* "kib1" */
#define KOLO_IB_TOKEN_BYTES 16
#define KOLO_IB_MAX_QPS KOLO_NET_MAX_STREAMS
#define KOLO_IB_DEV_BYTES 64
/* The setup hello, both ways: the sender's first (with the token), then
 * the receiver's answer. */
typedef struct {
  uint32_t nqps;
  uint8_t token[KOLO_IB_TOKEN_BYTES];
  uint32_t qpn[KOLO_IB_MAX_QPS], psn[KOLO_IB_MAX_QPS];
  uint8_t gid[16];
  uint16_t lid;
  uint8_t link_layer, mtu; /* enum ibv_port_link_layer (0..2), enum ibv_mtu (1..5) */
  char dev[KOLO_IB_DEV_BYTES]; /* NUL-terminated */
} kolo_ib_hello;
#define KOLO_IB_HELLO_BYTES \
  (KOLO_NET_HELLO_PREFIX_BYTES + 4 + KOLO_IB_TOKEN_BYTES + 8 * KOLO_IB_MAX_QPS + 16 + 4 + KOLO_IB_DEV_BYTES)

void kolo_encode_ib_hello(const kolo_ib_hello *h, uint8_t out[KOLO_IB_HELLO_BYTES]);
/* Checks the prefix, the length, 1 <= nqps <= KOLO_IB_MAX_QPS, the link
 * layer, the MTU and that dev is NUL-terminated. */
int kolo_decode_ib_hello(const uint8_t *in, size_t len, kolo_ib_hello *h, uint32_t *version, char *why,
                         size_t why_len);

#endif
