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
 * part.  sender -> receiver: DATA, STOP; receiver -> sender: CREDIT, STOP.
 * A DATA frame may carry up to KOLO_SOCK_PAD_MAX zero bytes between its
 * signature and its payload (the flags byte's high nibble, in 8-byte
 * units): the sender places the payload in the kernel's socket buffer
 * with them (net_socket_io.c). */
enum { KOLO_SOCK_DATA = 1, KOLO_SOCK_CREDIT = 2, KOLO_SOCK_STOP = 3 };
#define KOLO_SOCK_FLAG_SIG 1u    /* DATA: a call signature follows the header */
#define KOLO_SOCK_FLAG_REPORT 1u /* STOP: a mismatch report follows the header */
#define KOLO_SOCK_HDR_BYTES 16
#define KOLO_SOCK_PAD_MAX 64
typedef struct {
  uint8_t kind, flags;
  uint32_t value; /* DATA: the step; CREDIT: the receiver's head; STOP: the word */
  uint32_t len;   /* DATA: the slice's bytes (every part); else 0 */
  uint8_t pad;    /* DATA: zero bytes before the payload (a multiple of 8); else 0 */
} kolo_sock_frame;
void kolo_encode_sock_frame(uint8_t out[KOLO_SOCK_HDR_BYTES], const kolo_sock_frame *f);
/* A header arriving at a sender end (to_sender: CREDIT or STOP) or at a
 * receiver end (DATA or STOP).  DATA must be step `expect` (slices come in
 * order) and at most `cap` bytes.  GARBLED with why (a phrase that follows
 * the peer's name) otherwise. */
int kolo_decode_sock_frame(const uint8_t in[KOLO_SOCK_HDR_BYTES], int to_sender, uint32_t expect, size_t cap,
                           kolo_sock_frame *f, char *why, size_t why_len);
/* Bytes that follow a decoded header before a DATA frame's payload: its
 * signature or report, then its padding. */
size_t kolo_sock_frame_extra(const kolo_sock_frame *f);

/* ---- records both providers carry (explicit bytes, never the structs) ---------- */

#define KOLO_NET_SIG_BYTES 24
void kolo_encode_call_sig(const kolo_call_sig *s, uint8_t out[KOLO_NET_SIG_BYTES]);
/* Checks that it is marked set and that its padding is zero. */
int kolo_decode_call_sig(const uint8_t in[KOLO_NET_SIG_BYTES], kolo_call_sig *s, char *why, size_t why_len);

#define KOLO_NET_REPORT_BYTES (8 + 2 * KOLO_NET_SIG_BYTES)
/* The most a socket frame's header is followed by before its payload. */
#define KOLO_SOCK_EXTRA_MAX \
  (KOLO_NET_REPORT_BYTES > KOLO_NET_SIG_BYTES + KOLO_SOCK_PAD_MAX ? KOLO_NET_REPORT_BYTES \
                                                                  : KOLO_NET_SIG_BYTES + KOLO_SOCK_PAD_MAX)
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
  /* The registered area the peer writes into, for the connection's life:
   * the receiver's per-step entries (call signatures, small slices), the
   * sender's credit record. */
  uint64_t in_addr;
  uint32_t in_rkey, in_bytes;
} kolo_ib_hello;
#define KOLO_IB_HELLO_BYTES \
  (KOLO_NET_HELLO_PREFIX_BYTES + 4 + KOLO_IB_TOKEN_BYTES + 8 * KOLO_IB_MAX_QPS + 16 + 4 + KOLO_IB_DEV_BYTES + 16)
/* Bounds of in_bytes a hello may name. */
#define KOLO_IB_IN_MIN 8u
#define KOLO_IB_IN_MAX (1u << 20)

void kolo_encode_ib_hello(const kolo_ib_hello *h, uint8_t out[KOLO_IB_HELLO_BYTES]);
/* Checks the prefix, the length, 1 <= nqps <= KOLO_IB_MAX_QPS, the link
 * layer, the MTU and that dev is NUL-terminated. */
int kolo_decode_ib_hello(const uint8_t *in, size_t len, kolo_ib_hello *h, uint32_t *version, char *why,
                         size_t why_len);

/* Control messages (SENDs on QP 0, rare): the receiver's ring of slots,
 * after each bind; either end's stop word, with its mismatch report.  A
 * 16-byte header (a magic with the kind and its flags, a value, the body's
 * length, a check word), then the body: RING: the ring (32 bytes); STOP
 * with KOLO_IB_FLAG_REPORT: the report. */
enum { KOLO_IB_MSG_RING = 1, KOLO_IB_MSG_STOP = 2 };
#define KOLO_IB_FLAG_REPORT 1u
#define KOLO_IB_MSG_HDR_BYTES 16
#define KOLO_IB_RING_BYTES 32
#define KOLO_IB_MSG_MAX (KOLO_IB_MSG_HDR_BYTES + KOLO_NET_REPORT_BYTES)
/* Slices of at most this many bytes may travel in the receiver's per-step
 * entries (KOLO_IB_ENTRY_BYTES each, a KOLO_IB_SIGHDR_BYTES header first). */
#define KOLO_IB_ENTRY_BYTES 256u
#define KOLO_IB_SIGHDR_BYTES 32u
#define KOLO_IB_INBOX_MAX (KOLO_IB_ENTRY_BYTES - KOLO_IB_SIGHDR_BYTES)
/* Largest slice: its length travels in the immediate's low 26 bits. */
#define KOLO_IB_IMM_LEN_BITS 26
#define KOLO_IB_MAX_SLICE ((1u << KOLO_IB_IMM_LEN_BITS) - 1)
typedef struct {
  uint32_t gen;        /* the receiver's binds so far, this one included (1, 2, ...) */
  uint32_t from_step;  /* the first step that lands in this ring */
  uint64_t addr;       /* the slots, nslots * slot_bytes */
  uint32_t rkey, nslots, slot_bytes;
  uint32_t inbox_max;  /* slices of at most this many bytes go to the per-step entries (0: none do) */
} kolo_ib_ring;
typedef struct {
  uint8_t kind, flags;
  uint32_t value;      /* STOP: the word */
  kolo_ib_ring ring;   /* RING */
  kolo_call_mismatch report; /* STOP with KOLO_IB_FLAG_REPORT */
} kolo_ib_msg;
/* Bytes written to out. */
size_t kolo_encode_ib_msg(const kolo_ib_msg *m, uint8_t out[KOLO_IB_MSG_MAX]);
/* A message of len bytes arriving at a sender end (to_sender: RING or
 * STOP) or at a receiver end (STOP only).  Checks the header, the length,
 * the ring (gen >= 1, nslots in 1..KOLO_NET_MAX_REQS,
 * slot_bytes <= KOLO_IB_MAX_SLICE, inbox_max <= KOLO_IB_INBOX_MAX) and the
 * report.  GARBLED with why (a phrase that follows the peer's name). */
int kolo_decode_ib_msg(const uint8_t *in, size_t len, int to_sender, kolo_ib_msg *m, char *why, size_t why_len);

/* The receiver's head as it lands in the sender's memory (an RDMA WRITE):
 * the head and a check word, so that a record read while it is being
 * written is not taken. */
#define KOLO_IB_CREDIT_BYTES 8
void kolo_encode_ib_credit(uint32_t head, uint8_t out[KOLO_IB_CREDIT_BYTES]);
/* OK with *head, or GARBLED (empty, or caught mid-write: look again). */
int kolo_decode_ib_credit(const uint8_t in[KOLO_IB_CREDIT_BYTES], uint32_t *head);

/* A per-step entry's header: the slice's call signature, or zeros. */
void kolo_encode_ib_sighdr(const kolo_call_sig *s, uint8_t out[KOLO_IB_SIGHDR_BYTES]);
/* OK with *has = 0 (all zero) or 1 (*s), else GARBLED with why. */
int kolo_decode_ib_sighdr(const uint8_t in[KOLO_IB_SIGHDR_BYTES], kolo_call_sig *s, int *has, char *why,
                          size_t why_len);

#endif
