/* conn_codec.c - pipe offers, transport descriptors and net handles as
 * bytes (conn_wire.h): one encoder and one decoder each, on wire_codec.h's
 * cursors.  Decoders take a buffer (the fuzz targets call them on raw
 * input), read every field, check each one and that the padding is zero,
 * and name the peer in their sentence.  No system calls.
 */
#include <stdio.h>
#include <string.h>

#include "transport/bootstrap_wire.h"
#include "transport/conn_wire.h"

/* ---- pieces ------------------------------------------------------------------ */

/* The common end of a descriptor's decoder: another length than
 * KOLO_CONN_DESC_BYTES, or garbage in the padding, is refused with a sentence naming the peer and what it sent. */
static int finish(kolo_wire_in *r, int peer, const char *what, char *why, size_t why_len) {
  if (r->bad || r->len != KOLO_CONN_DESC_BYTES) {
    snprintf(why, why_len, "rank %d sent a %s of %zu bytes, kolo wire version %u has %d", peer, what, r->len,
             KOLO_WIRE_VERSION, KOLO_CONN_DESC_BYTES);
    return KOLO_CONN_WIRE_GARBLED;
  }
  if (kolo_wire_rest_is_zero(r) != 0) {
    snprintf(why, why_len, "rank %d sent a %s with garbage in its unused bytes", peer, what);
    return KOLO_CONN_WIRE_GARBLED;
  }
  return KOLO_CONN_WIRE_OK;
}

static int refuse(char *why, size_t why_len, int peer, const char *what, const char *wrong) {
  snprintf(why, why_len, "rank %d sent a %s %s", peer, what, wrong);
  return KOLO_CONN_WIRE_GARBLED;
}

/* ---- the offer --------------------------------------------------------------- */

void kolo_encode_conn_offer(const kolo_conn_offer *o, uint8_t out[KOLO_CONN_OFFER_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_CONN_OFFER_BYTES);
  kolo_put_u32(&w, o->transport);
  kolo_put_u64(&w, o->slot_bytes);
  kolo_put_u32(&w, o->nslots);
  kolo_put_u32(&w, o->ll_slot_bytes);
  kolo_put_bytes(&w, o->desc, sizeof o->desc);
}

int kolo_decode_conn_offer(const void *in, size_t len, uint32_t ntransports, int peer, kolo_conn_offer *o,
                           char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, len);
  o->transport = kolo_get_u32(&r);
  o->slot_bytes = kolo_get_u64(&r);
  o->nslots = kolo_get_u32(&r);
  o->ll_slot_bytes = kolo_get_u32(&r);
  kolo_get_bytes(&r, o->desc, sizeof o->desc);
  if (r.bad || kolo_wire_left(&r) != 0) {
    snprintf(why, why_len, "rank %d sent a pipe offer of %zu bytes, kolo wire version %u has %d", peer, len,
             KOLO_WIRE_VERSION, KOLO_CONN_OFFER_BYTES);
    return KOLO_CONN_WIRE_GARBLED;
  }
  if (o->transport >= ntransports) {
    snprintf(why, why_len, "rank %d offered a pipe over transport %u, which is none of kolo's %u", peer,
             o->transport, ntransports);
    return KOLO_CONN_WIRE_GARBLED;
  }
  return KOLO_CONN_WIRE_OK;
}

/* ---- local --------------------------------------------------------------------- */

void kolo_encode_local_desc(uint64_t addr, uint8_t desc[KOLO_CONN_DESC_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(desc, KOLO_CONN_DESC_BYTES);
  kolo_put_u64(&w, addr);
  kolo_put_zeros(&w);
}

int kolo_decode_local_desc(const void *in, size_t len, int peer, uint64_t *addr, char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, len);
  *addr = kolo_get_u64(&r);
  int v = finish(&r, peer, "local pipe descriptor", why, why_len);
  if (v == KOLO_CONN_WIRE_OK && *addr == 0) return refuse(why, why_len, peer, "local pipe descriptor", "with a null address");
  return v;
}

/* ---- shm ----------------------------------------------------------------------- */

void kolo_encode_shm_desc(const char *name, uint8_t desc[KOLO_CONN_DESC_BYTES]) {
  size_t n = strnlen(name, KOLO_SHM_NAME_BYTES - 1);
  kolo_wire_out w = kolo_wire_writer(desc, KOLO_CONN_DESC_BYTES);
  kolo_put_u8(&w, (uint8_t)n);
  kolo_put_bytes(&w, name, n);
  kolo_put_zeros(&w);
}

/* Why a segment name is not one kolo made, or NULL: kolo's names are
 * "/kolo-" and then no '/' (shm_open wants one leading slash) nor NUL. */
static const char *shm_name_wrong(const char *name, size_t n) {
  if (n < 6 || memcmp(name, "/kolo-", 6) != 0) return "whose segment name is not kolo's";
  if (memchr(name, '\0', n) != NULL) return "whose segment name holds a NUL";
  if (memchr(name + 1, '/', n - 1) != NULL) return "whose segment name holds a '/'";
  return NULL;
}

int kolo_decode_shm_desc(const void *in, size_t len, int peer, char name[KOLO_SHM_NAME_BYTES], char *why,
                         size_t why_len) {
  static const char what[] = "shm pipe descriptor";
  kolo_wire_in r = kolo_wire_reader(in, len);
  size_t n = kolo_get_u8(&r);
  name[0] = '\0';
  if (!r.bad && n >= KOLO_SHM_NAME_BYTES) return refuse(why, why_len, peer, what, "whose segment name is too long");
  kolo_get_bytes(&r, name, n);
  name[n] = '\0';
  int v = finish(&r, peer, what, why, why_len);
  const char *wrong = v == KOLO_CONN_WIRE_OK ? shm_name_wrong(name, n) : NULL;
  if (wrong == NULL) return v;
  name[0] = '\0';
  return refuse(why, why_len, peer, what, wrong);
}

/* ---- p2p ----------------------------------------------------------------------- */

void kolo_encode_p2p_desc(const kolo_p2p_desc *d, uint8_t desc[KOLO_CONN_DESC_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(desc, KOLO_CONN_DESC_BYTES);
  kolo_put_u32(&w, d->mode);
  kolo_put_i32(&w, d->dev);
  kolo_put_u64(&w, d->bytes);
  kolo_put_u64(&w, d->share);
  kolo_put_bytes(&w, d->ipc, sizeof d->ipc);
  kolo_put_zeros(&w);
}

static const char *p2p_wrong(const kolo_p2p_desc *d) {
  if (d->mode != KOLO_P2P_LOCAL && d->mode != KOLO_P2P_IPC) return "of an unknown mode";
  if (d->dev < 0 || d->dev >= KOLO_P2P_MAX_DEV) return "naming no device ordinal";
  if (d->bytes == 0) return "of an empty block";
  if ((d->mode == KOLO_P2P_LOCAL) != (d->share != 0))
    return d->share ? "of an IPC handle with a pointer" : "of a pointer that is null";
  return NULL;
}

int kolo_decode_p2p_desc(const void *in, size_t len, int peer, kolo_p2p_desc *d, char *why, size_t why_len) {
  static const char what[] = "device pipe descriptor";
  kolo_wire_in r = kolo_wire_reader(in, len);
  d->mode = kolo_get_u32(&r);
  d->dev = kolo_get_i32(&r);
  d->bytes = kolo_get_u64(&r);
  d->share = kolo_get_u64(&r);
  kolo_get_bytes(&r, d->ipc, sizeof d->ipc);
  int v = finish(&r, peer, what, why, why_len);
  const char *wrong = v == KOLO_CONN_WIRE_OK ? p2p_wrong(d) : NULL;
  if (wrong == NULL) return v;
  snprintf(why, why_len, "rank %d sent a %s %s (mode %u, device %d, %llu bytes)", peer, what, wrong, d->mode,
           d->dev, (unsigned long long)d->bytes);
  return KOLO_CONN_WIRE_GARBLED;
}

/* ---- net ----------------------------------------------------------------------- */

void kolo_encode_net_desc(const kolo_net_handle *h, const char *provider, uint8_t desc[KOLO_CONN_DESC_BYTES]) {
  char name[KOLO_NET_PROVIDER_BYTES] = {0};
  snprintf(name, sizeof name, "%s", provider);
  kolo_wire_out w = kolo_wire_writer(desc, KOLO_CONN_DESC_BYTES);
  kolo_put_bytes(&w, h->bytes, sizeof h->bytes);
  kolo_put_bytes(&w, name, sizeof name);
  kolo_put_zeros(&w);
}

int kolo_decode_net_desc(const void *in, size_t len, int peer, kolo_net_handle *h,
                         char provider[KOLO_NET_PROVIDER_BYTES], char *why, size_t why_len) {
  static const char what[] = "network pipe descriptor";
  kolo_wire_in r = kolo_wire_reader(in, len);
  kolo_get_bytes(&r, h->bytes, sizeof h->bytes);
  kolo_get_bytes(&r, provider, KOLO_NET_PROVIDER_BYTES);
  int v = finish(&r, peer, what, why, why_len);
  size_t n = strnlen(provider, KOLO_NET_PROVIDER_BYTES);
  int printable = 1;
  for (size_t i = 0; i < n; i++) printable &= provider[i] > ' ' && provider[i] < 0x7f;
  if (v == KOLO_CONN_WIRE_OK && (n == 0 || n == KOLO_NET_PROVIDER_BYTES || !printable))
    v = refuse(why, why_len, peer, what, "whose provider name is empty, unterminated or not printable");
  if (v != KOLO_CONN_WIRE_OK) provider[0] = '\0';
  return v;
}

void kolo_encode_net_handle(const kolo_net_listen_info *l, kolo_net_handle *h) {
  kolo_wire_out w = kolo_wire_writer(h->bytes, sizeof h->bytes);
  kolo_put_u32(&w, l->magic);
  kolo_wire_put_addr(&w, &l->addr);
  kolo_put_bytes(&w, l->token, sizeof l->token);
  kolo_put_u32(&w, l->nconns);
  kolo_put_zeros(&w);
}

static const char *provider_of(uint32_t magic) {
  return magic == KOLO_NET_HANDLE_SOCK_MAGIC ? "socket" : magic == KOLO_NET_HANDLE_IB_MAGIC ? "ib" : NULL;
}

/* Why a decoded handle is not one for this provider, or NULL. */
static const char *handle_wrong(const kolo_net_listen_info *l, uint32_t magic, int bad_addr, char *buf, size_t n) {
  if (l->magic != magic && provider_of(l->magic) != NULL) {
    snprintf(buf, n, "is the %s provider's, this rank uses %s (is KOLO_NET the same there?)",
             provider_of(l->magic), provider_of(magic) ? provider_of(magic) : "another");
    return buf;
  }
  if (l->magic != magic) return "is no kolo network handle";
  if (bad_addr) return "has an address that is neither IPv4 nor IPv6";
  if (l->nconns < 1 || l->nconns > KOLO_NET_MAX_STREAMS) {
    snprintf(buf, n, "asks for %u connections (1..%d)", l->nconns, KOLO_NET_MAX_STREAMS);
    return buf;
  }
  return NULL;
}

int kolo_decode_net_handle(const kolo_net_handle *h, uint32_t magic, const char *who, kolo_net_listen_info *l,
                           char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(h->bytes, sizeof h->bytes);
  l->magic = kolo_get_u32(&r);
  int bad_addr = kolo_wire_get_addr(&r, &l->addr);
  kolo_get_bytes(&r, l->token, sizeof l->token);
  l->nconns = kolo_get_u32(&r);
  char buf[160];
  const char *wrong = handle_wrong(l, magic, bad_addr, buf, sizeof buf);
  if (wrong == NULL && kolo_wire_rest_is_zero(&r) != 0) wrong = "has garbage in its unused bytes";
  if (wrong == NULL) return KOLO_CONN_WIRE_OK;
  snprintf(why, why_len, "%s's network handle %s", who, wrong);
  return KOLO_CONN_WIRE_GARBLED;
}
