/* wire_codec.h - explicit encoding of what crosses a socket (internal).
 *
 * Every structure kolo sends to another process is written field by field
 * into a byte buffer: fixed widths, little-endian, no padding, never a C
 * struct's memory.  A cursor knows its buffer's end: a put past it or a get
 * past it sets `bad` and does nothing (gets return 0), so a decoder reads
 * every field and checks `bad` once instead of trusting a length.
 * Header-only, no system calls: the fuzz targets link it as it is.
 */
#ifndef KOLO_TRANSPORT_WIRE_CODEC_H
#define KOLO_TRANSPORT_WIRE_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The revision of every message format kolo speaks; the first message of
 * each connection carries it, and so does every koloUniqueId.  1: host-order
 * C structs (before versioning); 2: pipe offers, transport descriptors and
 * net handles still host-order structs inside bootstrap messages
 * (conn_wire.h encodes them since 3); 3: the unique id, and what ranks tell
 * each other at init, split, shrink and in a fusion, still host-order
 * structs (uid_codec.c, core/comm_wire.h and fusion/negotiate_wire.h encode
 * them since 4); 4: the bootstrap's root sent every rank the whole table,
 * ranks connected to every other at init, and a net pipe sent a call's
 * signature as control messages beside its slices.  Since 5 the ranks
 * gather the table themselves and connect when first needed
 * (bootstrap_wire.h), and a net pipe carries each slice in one message with
 * its signature (net_wire.h). */
#define KOLO_WIRE_VERSION 5u

typedef struct {
  uint8_t *p;
  size_t cap, off;
  int bad; /* a put did not fit */
} kolo_wire_out;

typedef struct {
  const uint8_t *p;
  size_t len, off;
  int bad; /* a get ran past the end */
} kolo_wire_in;

static inline kolo_wire_out kolo_wire_writer(void *buf, size_t cap) {
  return (kolo_wire_out){(uint8_t *)buf, cap, 0, 0};
}
static inline kolo_wire_in kolo_wire_reader(const void *buf, size_t len) {
  return (kolo_wire_in){(const uint8_t *)buf, len, 0, 0};
}

/* Room for n more bytes (and marks the cursor bad when there is none). */
static inline uint8_t *kolo_wire_room(kolo_wire_out *w, size_t n) {
  if (w->bad || n > w->cap - w->off) {
    w->bad = 1;
    return NULL;
  }
  uint8_t *at = w->p + w->off;
  w->off += n;
  return at;
}
static inline const uint8_t *kolo_wire_take(kolo_wire_in *r, size_t n) {
  if (r->bad || n > r->len - r->off) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *at = r->p + r->off;
  r->off += n;
  return at;
}

static inline void kolo_put_le(kolo_wire_out *w, uint64_t v, size_t n) {
  uint8_t *at = kolo_wire_room(w, n);
  for (size_t i = 0; at && i < n; i++) at[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t kolo_get_le(kolo_wire_in *r, size_t n) {
  const uint8_t *at = kolo_wire_take(r, n);
  uint64_t v = 0;
  for (size_t i = 0; at && i < n; i++) v |= (uint64_t)at[i] << (8 * i);
  return v;
}

static inline void kolo_put_u8(kolo_wire_out *w, uint8_t v) { kolo_put_le(w, v, 1); }
static inline void kolo_put_u16(kolo_wire_out *w, uint16_t v) { kolo_put_le(w, v, 2); }
static inline void kolo_put_u32(kolo_wire_out *w, uint32_t v) { kolo_put_le(w, v, 4); }
static inline void kolo_put_u64(kolo_wire_out *w, uint64_t v) { kolo_put_le(w, v, 8); }
static inline void kolo_put_i32(kolo_wire_out *w, int32_t v) { kolo_put_le(w, (uint32_t)v, 4); }
static inline void kolo_put_bytes(kolo_wire_out *w, const void *src, size_t n) {
  uint8_t *at = kolo_wire_room(w, n);
  if (at && n) memcpy(at, src, n);
}

static inline uint8_t kolo_get_u8(kolo_wire_in *r) { return (uint8_t)kolo_get_le(r, 1); }
static inline uint16_t kolo_get_u16(kolo_wire_in *r) { return (uint16_t)kolo_get_le(r, 2); }
static inline uint32_t kolo_get_u32(kolo_wire_in *r) { return (uint32_t)kolo_get_le(r, 4); }
static inline uint64_t kolo_get_u64(kolo_wire_in *r) { return kolo_get_le(r, 8); }
static inline int32_t kolo_get_i32(kolo_wire_in *r) { return (int32_t)(uint32_t)kolo_get_le(r, 4); }
static inline void kolo_get_bytes(kolo_wire_in *r, void *dst, size_t n) {
  const uint8_t *at = kolo_wire_take(r, n);
  if (at && n) memcpy(dst, at, n);
  else if (n) memset(dst, 0, n);
}
/* Bytes left unread: a decoder of a fixed-size message wants 0. */
static inline size_t kolo_wire_left(const kolo_wire_in *r) { return r->bad ? 0 : r->len - r->off; }

/* The end of a decoder of a record from rank `peer` (or of a list of
 * them): 0 when it read exactly `want` bytes, else -1 and a sentence
 * naming the sender ("rank 3 sent a split entry of 8 bytes, kolo wire
 * version 4 has 12"). */
static inline int kolo_wire_whole(const kolo_wire_in *r, size_t want, int peer, const char *what, char *why,
                                  size_t why_len) {
  if (!r->bad && r->len == want && kolo_wire_left(r) == 0) return 0;
  snprintf(why, why_len, "rank %d sent a %s of %zu bytes, kolo wire version %u has %zu", peer, what, r->len,
           KOLO_WIRE_VERSION, want);
  return -1;
}

/* Pads the rest of a fixed-size record with zeros. */
static inline void kolo_put_zeros(kolo_wire_out *w) {
  size_t n = w->bad ? 0 : w->cap - w->off;
  uint8_t *at = kolo_wire_room(w, n);
  if (at && n) memset(at, 0, n);
}
/* Reads the rest: 0 when every byte of it is zero (nothing hidden in the
 * padding), -1 otherwise. */
static inline int kolo_wire_rest_is_zero(kolo_wire_in *r) {
  size_t n = kolo_wire_left(r);
  const uint8_t *at = kolo_wire_take(r, n);
  for (size_t i = 0; at && i < n; i++)
    if (at[i] != 0) return -1;
  return 0;
}

#endif
