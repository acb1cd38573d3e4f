/* bootstrap_codec.c - the bootstrap's messages as bytes (bootstrap_wire.h):
 * one encoder and one decoder per message, on wire_codec.h's cursors.
 * Decoders take a buffer, not an fd (the fuzz targets call them on raw
 * input), read every field, and check each one: versions, ranks in range,
 * addresses of a known family, exact lengths.  No system calls.
 */
#include <stdio.h>
#include <string.h>

#include "transport/bootstrap_wire.h"

/* ---- pieces ------------------------------------------------------------------ */

/* Address families on the wire: 4 and 6, whatever the OS numbers them. */
static void put_addr(kolo_wire_out *w, const struct sockaddr_storage *a) {
  uint16_t family, port;
  uint8_t bytes[16];
  kolo_addr_to_wire(a, &family, &port, bytes);
  kolo_put_u8(w, family == AF_INET6 ? 6 : family == AF_INET ? 4 : 0);
  kolo_put_u16(w, port);
  kolo_put_bytes(w, bytes, sizeof bytes);
}

/* 0, or -1 when the family is neither 4 nor 6 or an IPv4 address has
 * bytes past its 4 that are not zero (a zeroed address is valid only where
 * allow_none says so). */
static int get_addr(kolo_wire_in *r, struct sockaddr_storage *a, int allow_none) {
  uint8_t family = kolo_get_u8(r);
  uint16_t port = kolo_get_u16(r);
  uint8_t bytes[16];
  kolo_get_bytes(r, bytes, sizeof bytes);
  memset(a, 0, sizeof *a);
  if (family == 0 && allow_none) return 0;
  static const uint8_t zeros[12];
  if (family != 6 && (family != 4 || memcmp(bytes + 4, zeros, sizeof zeros) != 0)) return -1;
  kolo_addr_from_wire(family == 6 ? AF_INET6 : AF_INET, port, bytes, a);
  return 0;
}

void kolo_wire_put_addr(kolo_wire_out *w, const struct sockaddr_storage *a) { put_addr(w, a); }
int kolo_wire_get_addr(kolo_wire_in *r, struct sockaddr_storage *a) { return get_addr(r, a, 0); }

static void put_peer_info(kolo_wire_out *w, const kolo_peer_info *p) {
  put_addr(w, &p->addr);
  kolo_put_u64(w, p->host_hash);
  kolo_put_u64(w, p->proc_token);
  kolo_put_i32(w, p->pid);
  kolo_put_i32(w, p->rank);
}

static int get_peer_info(kolo_wire_in *r, kolo_peer_info *p, int allow_none) {
  int bad = get_addr(r, &p->addr, allow_none);
  p->host_hash = kolo_get_u64(r);
  p->proc_token = kolo_get_u64(r);
  p->pid = kolo_get_i32(r);
  p->rank = kolo_get_i32(r);
  return bad;
}

void kolo_wire_put_uid(kolo_wire_out *w, const kolo_uid *u) {
  kolo_put_u64(w, u->magic);
  kolo_put_u64(w, u->job);
  kolo_put_bytes(w, u->secret, sizeof u->secret);
  put_addr(w, &u->root);
}

int kolo_wire_get_uid(kolo_wire_in *r, kolo_uid *u, int allow_none) {
  u->magic = kolo_get_u64(r);
  u->job = kolo_get_u64(r);
  kolo_get_bytes(r, u->secret, sizeof u->secret);
  return get_addr(r, &u->root, allow_none);
}

void kolo_encode_header(uint8_t out[KOLO_WIRE_HDR_BYTES], uint32_t tag, uint64_t len) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_WIRE_HDR_BYTES);
  kolo_put_u32(&w, KOLO_WIRE_MAGIC);
  kolo_put_u32(&w, tag);
  kolo_put_u64(&w, len);
}

kolo_wire_header kolo_decode_header(const uint8_t in[KOLO_WIRE_HDR_BYTES]) {
  kolo_wire_in r = kolo_wire_reader(in, KOLO_WIRE_HDR_BYTES);
  kolo_wire_header h;
  h.magic = kolo_get_u32(&r);
  h.tag = kolo_get_u32(&r);
  h.len = kolo_get_u64(&r);
  return h;
}

/* The version in front of a hello: KOLO_WIRE_OK when it is ours. */
static int check_version(kolo_wire_in *r, uint32_t *version, char *why, size_t why_len) {
  *version = kolo_get_u32(r);
  if (r->bad) {
    snprintf(why, why_len, "sent a hello too short to hold a wire version (%zu bytes)", r->len);
    return KOLO_WIRE_GARBLED;
  }
  if (*version == KOLO_BOOTSTRAP_WIRE_VERSION) return KOLO_WIRE_OK;
  snprintf(why, why_len, "speaks kolo wire version %u, this process speaks %u", *version, KOLO_BOOTSTRAP_WIRE_VERSION);
  return KOLO_WIRE_OTHER_VERSION;
}

/* The end of a fixed-size message's decoding: every byte read, none more. */
static int check_end(const kolo_wire_in *r, const char *what, size_t want, char *why, size_t why_len) {
  if (!r->bad && kolo_wire_left(r) == 0) return KOLO_WIRE_OK;
  snprintf(why, why_len, "sent a %s of %zu bytes, expected %zu (%s)", what, r->len, want,
           r->bad ? "truncated" : "oversized");
  return KOLO_WIRE_GARBLED;
}

/* ---- hellos ---------------------------------------------------------------------- */

void kolo_encode_rank_hello(const kolo_rank_hello *h, uint8_t out[KOLO_RANK_HELLO_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_RANK_HELLO_BYTES);
  kolo_put_u32(&w, KOLO_BOOTSTRAP_WIRE_VERSION);
  kolo_put_bytes(&w, h->secret, sizeof h->secret);
  kolo_put_i32(&w, h->rank);
  kolo_put_i32(&w, h->nranks);
  kolo_put_i32(&w, h->nids);
  kolo_put_i32(&w, h->root_index);
  kolo_put_i32(&w, h->role);
  kolo_wire_put_uid(&w, &h->first);
  put_peer_info(&w, &h->info);
}

/* Ranges a rank hello must respect before the root looks at it. */
static int rank_hello_fault(const kolo_rank_hello *h, char *why, size_t why_len) {
  int nids = h->nids < 1 ? 1 : h->nids;
  if (h->role != KOLO_HELLO_RANK && h->role != KOLO_HELLO_SUBROOT)
    snprintf(why, why_len, "sent a hello of unknown role %d", h->role);
  else if (h->nranks < 1 || h->nranks > KOLO_MAX_RANKS)
    snprintf(why, why_len, "sent a hello for %d ranks (1..%d)", h->nranks, KOLO_MAX_RANKS);
  else if (nids > h->nranks || h->root_index < 0 || h->root_index >= nids)
    snprintf(why, why_len, "sent a hello for root %d of %d ids, %d ranks", h->root_index, h->nids, h->nranks);
  else if (h->role == KOLO_HELLO_RANK ? h->rank < 0 || h->rank >= h->nranks : h->rank != -1)
    snprintf(why, why_len, "sent a hello for rank %d of %d", h->rank, h->nranks);
  else
    return KOLO_WIRE_OK;
  return KOLO_WIRE_GARBLED;
}

int kolo_decode_rank_hello(const void *body, size_t len, kolo_rank_hello *h, uint32_t *version, char *why,
                           size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(body, len);
  memset(h, 0, sizeof *h);
  int v = check_version(&r, version, why, why_len);
  if (v != KOLO_WIRE_OK) return v;
  kolo_get_bytes(&r, h->secret, sizeof h->secret);
  h->rank = kolo_get_i32(&r);
  h->nranks = kolo_get_i32(&r);
  h->nids = kolo_get_i32(&r);
  h->root_index = kolo_get_i32(&r);
  h->role = kolo_get_i32(&r);
  int bad_addr = kolo_wire_get_uid(&r, &h->first, 1);
  bad_addr |= get_peer_info(&r, &h->info, h->role == KOLO_HELLO_SUBROOT);
  if (check_end(&r, "rank hello", KOLO_RANK_HELLO_BYTES, why, why_len) != KOLO_WIRE_OK) return KOLO_WIRE_GARBLED;
  if (bad_addr) {
    snprintf(why, why_len, "sent a hello with an address that is neither IPv4 nor IPv6");
    return KOLO_WIRE_GARBLED;
  }
  return rank_hello_fault(h, why, why_len);
}

void kolo_encode_mesh_hello(const kolo_mesh_hello *h, uint8_t out[KOLO_MESH_HELLO_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_MESH_HELLO_BYTES);
  kolo_put_u32(&w, KOLO_BOOTSTRAP_WIRE_VERSION);
  kolo_put_bytes(&w, h->secret, sizeof h->secret);
  kolo_put_u64(&w, h->job);
  kolo_put_i32(&w, h->rank);
  kolo_put_i32(&w, h->nranks);
}

int kolo_decode_mesh_hello(const void *body, size_t len, kolo_mesh_hello *h, uint32_t *version, char *why,
                           size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(body, len);
  memset(h, 0, sizeof *h);
  int v = check_version(&r, version, why, why_len);
  if (v != KOLO_WIRE_OK) return v;
  kolo_get_bytes(&r, h->secret, sizeof h->secret);
  h->job = kolo_get_u64(&r);
  h->rank = kolo_get_i32(&r);
  h->nranks = kolo_get_i32(&r);
  if (check_end(&r, "mesh hello", KOLO_MESH_HELLO_BYTES, why, why_len) != KOLO_WIRE_OK) return KOLO_WIRE_GARBLED;
  if (h->nranks < 1 || h->nranks > KOLO_MAX_RANKS || h->rank < 0 || h->rank >= h->nranks) {
    snprintf(why, why_len, "sent a mesh hello for rank %d of %d", h->rank, h->nranks);
    return KOLO_WIRE_GARBLED;
  }
  return KOLO_WIRE_OK;
}

/* ---- tables, refusals ------------------------------------------------------------- */

void kolo_encode_peer_table(const kolo_peer_info *table, int lo, int hi, uint8_t *out) {
  kolo_wire_out w = kolo_wire_writer(out, (size_t)(hi - lo) * KOLO_PEER_INFO_BYTES);
  for (int r = lo; r < hi; r++) put_peer_info(&w, &table[r]);
}

int kolo_decode_peer_table(const void *body, size_t len, int lo, int hi, kolo_peer_info *table, char *why,
                           size_t why_len) {
  size_t want = (size_t)(hi - lo) * KOLO_PEER_INFO_BYTES;
  if (len != want) {
    snprintf(why, why_len, "sent %zu bytes of peer entries, expected %zu (ranks %d..%d)", len, want, lo, hi - 1);
    return KOLO_WIRE_GARBLED;
  }
  kolo_wire_in r = kolo_wire_reader(body, len);
  for (int k = lo; k < hi; k++) {
    kolo_peer_info p;
    if (get_peer_info(&r, &p, 0) != 0 || p.rank != k) {
      snprintf(why, why_len, "sent entry %d as rank %d%s", k, p.rank,
               p.rank == k ? " with an address that is neither IPv4 nor IPv6" : "");
      return KOLO_WIRE_GARBLED;
    }
    table[k] = p;
  }
  return KOLO_WIRE_OK;
}

void kolo_encode_peer_info(const kolo_peer_info *p, uint8_t out[KOLO_PEER_INFO_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_PEER_INFO_BYTES);
  put_peer_info(&w, p);
}

int kolo_decode_peer_info(const void *body, size_t len, int rank, kolo_peer_info *p, char *why, size_t why_len) {
  if (len != KOLO_PEER_INFO_BYTES) {
    snprintf(why, why_len, "sent a peer entry of %zu bytes, expected %d", len, KOLO_PEER_INFO_BYTES);
    return KOLO_WIRE_GARBLED;
  }
  kolo_wire_in r = kolo_wire_reader(body, len);
  kolo_peer_info q;
  if (get_peer_info(&r, &q, 0) != 0 || q.rank != rank) {
    snprintf(why, why_len, "sent the entry of rank %d as rank %d%s", rank, q.rank,
             q.rank == rank ? " with an address that is neither IPv4 nor IPv6" : "");
    return KOLO_WIRE_GARBLED;
  }
  *p = q;
  return KOLO_WIRE_OK;
}

void kolo_encode_verdict(uint32_t verdict, uint8_t out[KOLO_VERDICT_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_VERDICT_BYTES);
  kolo_put_u32(&w, verdict);
}

int kolo_decode_verdict(const void *body, size_t len, uint32_t *verdict) {
  if (len != KOLO_VERDICT_BYTES) return KOLO_WIRE_GARBLED;
  kolo_wire_in r = kolo_wire_reader(body, len);
  *verdict = kolo_get_u32(&r);
  return *verdict == KOLO_MESH_ACCEPTED || *verdict == KOLO_MESH_CROSSED ? KOLO_WIRE_OK : KOLO_WIRE_GARBLED;
}

size_t kolo_encode_refusal(koloResult_t res, const char *text, uint8_t out[KOLO_REFUSAL_MAX_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_REFUSAL_MAX_BYTES);
  kolo_put_i32(&w, (int32_t)res);
  kolo_put_bytes(&w, text, strnlen(text, KOLO_ERR_LEN - 1));
  return w.off;
}

int kolo_decode_refusal(const void *body, size_t len, koloResult_t *res, char *text, size_t text_len) {
  if (len < 4 || len > KOLO_REFUSAL_MAX_BYTES || text_len == 0) return KOLO_WIRE_GARBLED;
  kolo_wire_in r = kolo_wire_reader(body, len);
  int32_t code = kolo_get_i32(&r);
  *res = code == koloSuccess || code == koloInProgress || !kolo_result_valid(code) ? koloRemoteError
                                                                                   : (koloResult_t)code;
  size_t n = len - 4 < text_len - 1 ? len - 4 : text_len - 1;
  kolo_get_bytes(&r, text, n);
  text[n] = '\0';
  return KOLO_WIRE_OK;
}

koloResult_t kolo_root_decode_reply(const uint8_t *msg, size_t len, int rank, kolo_peer_info *info,
                                    const char *who, kolo_errbuf *eb) {
  if (len < KOLO_WIRE_HDR_BYTES)
    return kolo_error(eb, koloRemoteError, "%s sent %zu bytes, less than a message header", who, len);
  kolo_wire_header h = kolo_decode_header(msg);
  const uint8_t *body = msg + KOLO_WIRE_HDR_BYTES;
  size_t blen = len - KOLO_WIRE_HDR_BYTES;
  if (h.magic != KOLO_WIRE_MAGIC || (h.tag != KOLO_TAG_REFUSED && h.tag != KOLO_TAG_NEIGHBOR))
    return kolo_error(eb, koloRemoteError, "%s sent garbage (magic 0x%08x, tag 0x%08x)", who, h.magic, h.tag);
  if (h.len != blen)
    return kolo_error(eb, koloRemoteError, "%s announced %llu bytes and sent %zu", who, (unsigned long long)h.len,
                      blen);
  char text[KOLO_ERR_LEN];
  if (h.tag == KOLO_TAG_NEIGHBOR) {
    if (kolo_decode_peer_info(body, blen, rank, info, text, sizeof text) == KOLO_WIRE_OK) return koloSuccess;
    return kolo_error(eb, koloRemoteError, "%s %s", who, text);
  }
  koloResult_t res;
  if (kolo_decode_refusal(body, blen, &res, text, sizeof text) != KOLO_WIRE_OK)
    return kolo_error(eb, koloRemoteError, "%s sent a refusal of %zu bytes (garbage)", who, blen);
  return kolo_error(eb, res, "%s", text);
}
