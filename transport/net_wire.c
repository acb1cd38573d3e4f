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
  if (h->nstreams >= 1 && h->nstreams <= KOLO_NET_MAX_STREAMS && h->index < h->nstreams) return KOLO_NET_WIRE_OK;
  snprintf(why, why_len, "it sent a hello for stream %u of %u (streams 0..n-1, 1..%d of them)", h->index, h->nstreams,
           KOLO_NET_MAX_STREAMS);
  return KOLO_NET_WIRE_GARBLED;
}

#define FRAME_MAGIC 0x6b46u          /* "kF" */
#define FRAME_CHECK 0x6b6f6c6fu      /* mixed into the check word */

/* The flags byte: the flags, and the padding in 8-byte units above them. */
static uint32_t flags_byte(const kolo_sock_frame *f) { return (uint32_t)(f->flags & 0x0Fu) | (uint32_t)f->pad / 8u << 4; }

static uint32_t frame_check(const kolo_sock_frame *f) {
  return f->value ^ (f->len * 0x9e3779b1u) ^ FRAME_CHECK ^ ((uint32_t)f->kind << 8 | flags_byte(f));
}

void kolo_encode_sock_frame(uint8_t out[KOLO_SOCK_HDR_BYTES], const kolo_sock_frame *f) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_SOCK_HDR_BYTES);
  kolo_put_u32(&w, FRAME_MAGIC << 16 | (uint32_t)f->kind << 8 | flags_byte(f));
  kolo_put_u32(&w, f->value);
  kolo_put_u32(&w, f->len);
  kolo_put_u32(&w, frame_check(f));
}

static const char *kind_name(int kind) {
  return kind == KOLO_SOCK_DATA ? "a slice" : kind == KOLO_SOCK_CREDIT ? "a credit" : "a stop word";
}

/* Why a frame of a known kind does not belong here, or NULL. */
static const char *frame_fault(const kolo_sock_frame *f, int to_sender, uint32_t expect, size_t cap, char *why,
                               size_t why_len) {
  int ours = f->kind == KOLO_SOCK_STOP || (f->kind == KOLO_SOCK_CREDIT) == (to_sender != 0);
  if (!ours) snprintf(why, why_len, "sent %s to its %s", kind_name(f->kind), to_sender ? "sender" : "receiver");
  else if (f->flags & ~1u) snprintf(why, why_len, "sent a frame with unknown flags 0x%x", f->flags);
  else if (f->kind == KOLO_SOCK_CREDIT && f->flags) snprintf(why, why_len, "sent a credit with flags");
  else if (f->kind != KOLO_SOCK_DATA && f->len != 0) snprintf(why, why_len, "sent %s with a length", kind_name(f->kind));
  else if (f->kind != KOLO_SOCK_DATA && f->pad != 0) snprintf(why, why_len, "sent %s with padding", kind_name(f->kind));
  else if (f->pad > KOLO_SOCK_PAD_MAX)
    snprintf(why, why_len, "sent a slice padded with %u bytes (at most %d)", f->pad, KOLO_SOCK_PAD_MAX);
  else if (f->kind == KOLO_SOCK_DATA && f->value != expect)
    snprintf(why, why_len, "is out of step on its network connection (slice %u came where %u was due)", f->value,
             expect);
  else if (f->kind == KOLO_SOCK_DATA && f->len > cap)
    snprintf(why, why_len, "sent a slice of %u bytes for slots of %zu", f->len, cap);
  else return NULL;
  return why;
}

int kolo_decode_sock_frame(const uint8_t in[KOLO_SOCK_HDR_BYTES], int to_sender, uint32_t expect, size_t cap,
                           kolo_sock_frame *f, char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_SOCK_HDR_BYTES);
  uint32_t head = kolo_get_u32(&r);
  f->kind = (uint8_t)(head >> 8);
  f->flags = (uint8_t)(head & 0x0Fu);
  f->pad = (uint8_t)((head >> 4 & 0x0Fu) * 8u);
  f->value = kolo_get_u32(&r);
  f->len = kolo_get_u32(&r);
  uint32_t check = kolo_get_u32(&r);
  if (head >> 16 != FRAME_MAGIC || check != frame_check(f))
    snprintf(why, why_len, "sent bytes that are no kolo frame (header 0x%08x)", head);
  else if (f->kind < KOLO_SOCK_DATA || f->kind > KOLO_SOCK_STOP)
    snprintf(why, why_len, "sent a frame of unknown kind %u", f->kind);
  else if (frame_fault(f, to_sender, expect, cap, why, why_len) == NULL)
    return KOLO_NET_WIRE_OK;
  return KOLO_NET_WIRE_GARBLED;
}

size_t kolo_sock_frame_extra(const kolo_sock_frame *f) {
  if (!(f->flags & 1u)) return f->pad;
  return f->pad + (f->kind == KOLO_SOCK_DATA   ? KOLO_NET_SIG_BYTES
                   : f->kind == KOLO_SOCK_STOP ? KOLO_NET_REPORT_BYTES
                                               : 0);
}

/* ---- call signatures and mismatch reports -------------------------------------- */

static void put_sig(kolo_wire_out *w, const kolo_call_sig *s) {
  kolo_put_u64(w, s->count);
  kolo_put_u32(w, s->seq);
  kolo_put_i32(w, s->root);
  kolo_put_u8(w, s->coll);
  kolo_put_u8(w, s->type);
  kolo_put_u8(w, s->op);
  kolo_put_u8(w, 1);
  kolo_put_u32(w, 0);
}

static int get_sig(kolo_wire_in *r, kolo_call_sig *s, char *why, size_t why_len) {
  memset(s, 0, sizeof *s);
  s->count = kolo_get_u64(r);
  s->seq = kolo_get_u32(r);
  s->root = kolo_get_i32(r);
  s->coll = kolo_get_u8(r);
  s->type = kolo_get_u8(r);
  s->op = kolo_get_u8(r);
  s->set = kolo_get_u8(r);
  uint32_t pad = kolo_get_u32(r);
  if (!r->bad && s->set == 1 && pad == 0) return KOLO_NET_WIRE_OK;
  snprintf(why, why_len, "sent a call signature that is not one (marked %u, padding 0x%x)", s->set, pad);
  return KOLO_NET_WIRE_GARBLED;
}

void kolo_encode_call_sig(const kolo_call_sig *s, uint8_t out[KOLO_NET_SIG_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_NET_SIG_BYTES);
  put_sig(&w, s);
}

int kolo_decode_call_sig(const uint8_t in[KOLO_NET_SIG_BYTES], kolo_call_sig *s, char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_NET_SIG_BYTES);
  return get_sig(&r, s, why, why_len);
}

void kolo_encode_mismatch(const kolo_call_mismatch *m, uint8_t out[KOLO_NET_REPORT_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_NET_REPORT_BYTES);
  kolo_put_i32(&w, m->rank[0]);
  kolo_put_i32(&w, m->rank[1]);
  put_sig(&w, &m->sig[0]);
  put_sig(&w, &m->sig[1]);
}

int kolo_decode_mismatch(const uint8_t in[KOLO_NET_REPORT_BYTES], kolo_call_mismatch *m, char *why,
                         size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_NET_REPORT_BYTES);
  m->rank[0] = kolo_get_i32(&r);
  m->rank[1] = kolo_get_i32(&r);
  if (get_sig(&r, &m->sig[0], why, why_len) != KOLO_NET_WIRE_OK) return KOLO_NET_WIRE_GARBLED;
  if (get_sig(&r, &m->sig[1], why, why_len) != KOLO_NET_WIRE_OK) return KOLO_NET_WIRE_GARBLED;
  if (m->rank[0] >= 0 && m->rank[1] >= 0) return KOLO_NET_WIRE_OK;
  snprintf(why, why_len, "sent a mismatch report naming ranks %d and %d", m->rank[0], m->rank[1]);
  return KOLO_NET_WIRE_GARBLED;
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
  kolo_put_u64(&w, h->in_addr);
  kolo_put_u32(&w, h->in_rkey);
  kolo_put_u32(&w, h->in_bytes);
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
  else if (h->in_bytes < KOLO_IB_IN_MIN || h->in_bytes > KOLO_IB_IN_MAX)
    snprintf(why, why_len, "it offers a control area of %u bytes (%u..%u)", h->in_bytes, KOLO_IB_IN_MIN,
             KOLO_IB_IN_MAX);
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
  h->in_addr = kolo_get_u64(&r);
  h->in_rkey = kolo_get_u32(&r);
  h->in_bytes = kolo_get_u32(&r);
  return ib_hello_fault(h, why, why_len);
}

#define IB_MSG_MAGIC 0x6b49u      /* "kI" */
#define IB_MSG_CHECK 0x6b69626du  /* mixed into the check word */

static uint32_t ib_msg_check(uint32_t head, uint32_t value, uint32_t len) {
  return head ^ (value * 0x9e3779b1u) ^ (len << 20) ^ IB_MSG_CHECK;
}

static void put_ring(kolo_wire_out *w, const kolo_ib_ring *g) {
  kolo_put_u32(w, g->gen);
  kolo_put_u32(w, g->from_step);
  kolo_put_u64(w, g->addr);
  kolo_put_u32(w, g->rkey);
  kolo_put_u32(w, g->nslots);
  kolo_put_u32(w, g->slot_bytes);
  kolo_put_u32(w, g->inbox_max);
}

static void get_ring(kolo_wire_in *r, kolo_ib_ring *g) {
  g->gen = kolo_get_u32(r);
  g->from_step = kolo_get_u32(r);
  g->addr = kolo_get_u64(r);
  g->rkey = kolo_get_u32(r);
  g->nslots = kolo_get_u32(r);
  g->slot_bytes = kolo_get_u32(r);
  g->inbox_max = kolo_get_u32(r);
}

size_t kolo_encode_ib_msg(const kolo_ib_msg *m, uint8_t out[KOLO_IB_MSG_MAX]) {
  uint32_t body = m->kind == KOLO_IB_MSG_RING ? KOLO_IB_RING_BYTES
                  : (m->flags & KOLO_IB_FLAG_REPORT) ? KOLO_NET_REPORT_BYTES : 0;
  uint32_t head = IB_MSG_MAGIC << 16 | (uint32_t)m->kind << 8 | m->flags;
  kolo_wire_out w = kolo_wire_writer(out, KOLO_IB_MSG_MAX);
  kolo_put_u32(&w, head);
  kolo_put_u32(&w, m->value);
  kolo_put_u32(&w, body);
  kolo_put_u32(&w, ib_msg_check(head, m->value, body));
  if (m->kind == KOLO_IB_MSG_RING) put_ring(&w, &m->ring);
  else if (body) kolo_encode_mismatch(&m->report, out + KOLO_IB_MSG_HDR_BYTES);
  return KOLO_IB_MSG_HDR_BYTES + body;
}

/* Why a decoded ring cannot be one, or NULL. */
static const char *ring_fault(const kolo_ib_ring *g, char *why, size_t why_len) {
  if (g->gen == 0) snprintf(why, why_len, "advertised a ring of bind 0");
  else if (g->nslots == 0 || g->nslots > KOLO_NET_MAX_REQS)
    snprintf(why, why_len, "advertised a ring of %u slots (1..%d)", g->nslots, KOLO_NET_MAX_REQS);
  else if (g->slot_bytes > KOLO_IB_MAX_SLICE)
    snprintf(why, why_len, "advertised slots of %u bytes (at most %u)", g->slot_bytes, KOLO_IB_MAX_SLICE);
  else if (g->inbox_max > KOLO_IB_INBOX_MAX)
    snprintf(why, why_len, "advertised small slices of up to %u bytes (at most %u)", g->inbox_max,
             KOLO_IB_INBOX_MAX);
  else return NULL;
  return why;
}

/* The header's verdict: the body length it announces, or -1 with why. */
static long ib_msg_header(const uint8_t *in, size_t len, int to_sender, kolo_ib_msg *m, char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, len < KOLO_IB_MSG_HDR_BYTES ? len : KOLO_IB_MSG_HDR_BYTES);
  uint32_t head = kolo_get_u32(&r);
  m->value = kolo_get_u32(&r);
  uint32_t body = kolo_get_u32(&r), check = kolo_get_u32(&r);
  m->kind = (uint8_t)(head >> 8);
  m->flags = (uint8_t)head;
  uint32_t want = m->kind == KOLO_IB_MSG_RING ? KOLO_IB_RING_BYTES
                  : (m->flags & KOLO_IB_FLAG_REPORT) ? KOLO_NET_REPORT_BYTES : 0;
  if (r.bad || head >> 16 != IB_MSG_MAGIC || check != ib_msg_check(head, m->value, body))
    snprintf(why, why_len, "sent an ib control message that is no kolo message (%zu bytes)", len);
  else if (m->kind != KOLO_IB_MSG_STOP && (m->kind != KOLO_IB_MSG_RING || !to_sender))
    snprintf(why, why_len, "sent an ib control message of kind %u to its %s", m->kind, to_sender ? "sender" : "receiver");
  else if (m->flags & ~(m->kind == KOLO_IB_MSG_STOP ? KOLO_IB_FLAG_REPORT : 0u))
    snprintf(why, why_len, "sent an ib control message with unknown flags 0x%x", m->flags);
  else if (body != want || len != KOLO_IB_MSG_HDR_BYTES + (size_t)body)
    snprintf(why, why_len, "sent an ib control message of %zu bytes announcing %u, expected %u", len, body, want);
  else return (long)body;
  return -1;
}

int kolo_decode_ib_msg(const uint8_t *in, size_t len, int to_sender, kolo_ib_msg *m, char *why, size_t why_len) {
  memset(m, 0, sizeof *m);
  long body = ib_msg_header(in, len, to_sender, m, why, why_len);
  if (body < 0) return KOLO_NET_WIRE_GARBLED;
  if (m->kind == KOLO_IB_MSG_RING) {
    kolo_wire_in r = kolo_wire_reader(in + KOLO_IB_MSG_HDR_BYTES, (size_t)body);
    get_ring(&r, &m->ring);
    return ring_fault(&m->ring, why, why_len) == NULL ? KOLO_NET_WIRE_OK : KOLO_NET_WIRE_GARBLED;
  }
  if (body == 0) return KOLO_NET_WIRE_OK;
  return kolo_decode_mismatch(in + KOLO_IB_MSG_HDR_BYTES, &m->report, why, why_len);
}

#define IB_CREDIT_CHECK 0x6b435244u /* "kCRD" */

void kolo_encode_ib_credit(uint32_t head, uint8_t out[KOLO_IB_CREDIT_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_IB_CREDIT_BYTES);
  kolo_put_u32(&w, head);
  kolo_put_u32(&w, head ^ IB_CREDIT_CHECK);
}

int kolo_decode_ib_credit(const uint8_t in[KOLO_IB_CREDIT_BYTES], uint32_t *head) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_IB_CREDIT_BYTES);
  uint32_t h = kolo_get_u32(&r), check = kolo_get_u32(&r);
  if (check != (h ^ IB_CREDIT_CHECK)) return KOLO_NET_WIRE_GARBLED;
  *head = h;
  return KOLO_NET_WIRE_OK;
}

void kolo_encode_ib_sighdr(const kolo_call_sig *s, uint8_t out[KOLO_IB_SIGHDR_BYTES]) {
  memset(out, 0, KOLO_IB_SIGHDR_BYTES);
  kolo_encode_call_sig(s, out);
}

int kolo_decode_ib_sighdr(const uint8_t in[KOLO_IB_SIGHDR_BYTES], kolo_call_sig *s, int *has, char *why,
                          size_t why_len) {
  static const uint8_t zero[KOLO_IB_SIGHDR_BYTES];
  *has = 0;
  if (memcmp(in, zero, KOLO_IB_SIGHDR_BYTES) == 0) return KOLO_NET_WIRE_OK;
  if (memcmp(in + KOLO_NET_SIG_BYTES, zero, KOLO_IB_SIGHDR_BYTES - KOLO_NET_SIG_BYTES) != 0) {
    snprintf(why, why_len, "wrote a call signature header whose reserved bytes are not zero");
    return KOLO_NET_WIRE_GARBLED;
  }
  if (kolo_decode_call_sig(in, s, why, why_len) != KOLO_NET_WIRE_OK) return KOLO_NET_WIRE_GARBLED;
  *has = 1;
  return KOLO_NET_WIRE_OK;
}
