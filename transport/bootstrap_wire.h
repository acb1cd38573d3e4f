/* bootstrap_wire.h - what the bootstrap sends on the wire (internal). */
#ifndef KOLO_TRANSPORT_BOOTSTRAP_WIRE_H
#define KOLO_TRANSPORT_BOOTSTRAP_WIRE_H

#include "transport/bootstrap.h"
#include "transport/socket.h"

#define KOLO_WIRE_MAGIC 0x6b6f6c6f626f6f74ull /* "koloboot" */
/* Largest mesh message: bigger lengths are garbage or an attack. */
#define KOLO_MAX_MSG_BYTES (64u << 20)

/* rank -> root, first thing on the connection */
typedef struct {
  uint64_t magic;
  uint8_t secret[KOLO_SECRET_BYTES];
  int32_t rank, nranks;
  kolo_peer_info info;
} rank_hello;

/* root -> rank: status 0 + nranks peer infos, or status 1 + len bytes of text */
typedef struct {
  uint64_t magic;
  uint32_t status;
  uint32_t len;
} root_reply;

/* rank -> rank, first thing on a mesh connection */
typedef struct {
  uint64_t magic;
  uint8_t secret[KOLO_SECRET_BYTES];
  uint64_t job;
  int32_t rank, pad;
} mesh_hello;

/* header of every mesh message */
typedef struct {
  uint32_t magic; /* KOLO_MSG_MAGIC */
  uint32_t tag;
  uint64_t len;
} msg_header;
#define KOLO_MSG_MAGIC 0x6b6d7367u

static inline int kolo_secret_equal(const uint8_t *a, const uint8_t *b) {
  uint8_t diff = 0; /* constant time */
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}

koloResult_t kolo_random(void *buf, size_t len, kolo_errbuf *eb);

#endif
