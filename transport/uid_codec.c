/* uid_codec.c - the koloUniqueId as bytes (bootstrap_wire.h): what users
 * pass between processes (MPI_Bcast, a file, a launcher's store) and what
 * koloCommSplit and koloCommShrink send over the mesh.  It stands alone,
 * so it carries a magic and the wire version; its fields are encoded as
 * the rank hello's uid (little-endian, the root's address as family, port
 * and address bytes), so hosts of any byte order read the same id, and its
 * size stays NCCL's 128 bytes.  No system calls: the fuzz targets link it.
 */
#include <stdio.h>
#include <string.h>

#include "transport/bootstrap_wire.h"

_Static_assert(KOLO_UID_ID_HEAD_BYTES + KOLO_UID_WIRE_BYTES <= KOLO_UNIQUE_ID_BYTES,
               "an encoded uid must fit in a koloUniqueId");

void kolo_uid_encode(const kolo_uid *uid, koloUniqueId *id) {
  memset(id, 0, sizeof *id);
  kolo_wire_out w = kolo_wire_writer(id->internal, sizeof id->internal);
  kolo_put_u32(&w, KOLO_UID_ID_MAGIC);
  kolo_put_u32(&w, KOLO_WIRE_VERSION);
  kolo_wire_put_uid(&w, uid);
}

static uint64_t byte_swap64(uint64_t v) {
  uint64_t s = 0;
  for (int i = 0; i < 8; i++) s |= ((v >> (8 * i)) & 0xff) << (8 * (7 - i));
  return s;
}

/* Ids of wire version 3 and before were a kolo_uid's memory: its u64 magic
 * first, in the maker's byte order. */
static int is_host_order_id(const uint8_t *in) {
  kolo_wire_in r = kolo_wire_reader(in, 8);
  uint64_t m = kolo_get_u64(&r);
  for (int swap = 0; swap < 2; swap++, m = byte_swap64(m))
    if (m == KOLO_UID_MAGIC || m == KOLO_UID_MAGIC_ROOT_AT_INIT) return 1;
  return 0;
}

/* The magic and version in front: KOLO_WIRE_OK when they are this kolo's. */
static int check_head(kolo_wire_in *r, const char *who, char *why, size_t why_len) {
  uint32_t magic = kolo_get_u32(r), version = kolo_get_u32(r);
  if (r->len != KOLO_UNIQUE_ID_BYTES)
    snprintf(why, why_len, "%s is %zu bytes, a koloUniqueId has %d", who, r->len, KOLO_UNIQUE_ID_BYTES);
  else if (magic != KOLO_UID_ID_MAGIC && is_host_order_id(r->p))
    snprintf(why, why_len,
             "%s comes from a kolo of wire version 3 or older (a host-order struct), this process speaks %u: "
             "run the same kolo in every process", who, KOLO_WIRE_VERSION);
  else if (magic != KOLO_UID_ID_MAGIC)
    snprintf(why, why_len, "%s is not one from koloGetUniqueId (bad magic 0x%08x)", who, magic);
  else if (version != KOLO_WIRE_VERSION) {
    snprintf(why, why_len, "%s comes from a kolo of wire version %u, this process speaks %u: run the same kolo "
             "in every process", who, version, KOLO_WIRE_VERSION);
    return KOLO_WIRE_OTHER_VERSION;
  } else
    return KOLO_WIRE_OK;
  return KOLO_WIRE_GARBLED;
}

int kolo_decode_unique_id(const void *in, size_t len, const char *who, kolo_uid *uid, char *why, size_t why_len) {
  kolo_wire_in r = kolo_wire_reader(in, len);
  memset(uid, 0, sizeof *uid);
  int v = check_head(&r, who, why, why_len);
  if (v != KOLO_WIRE_OK) return v;
  kolo_uid u;
  int bad_addr = kolo_wire_get_uid(&r, &u, 0);
  if (u.magic != KOLO_UID_MAGIC && u.magic != KOLO_UID_MAGIC_ROOT_AT_INIT)
    snprintf(why, why_len, "%s is of no kind kolo makes (0x%016llx)", who, (unsigned long long)u.magic);
  else if (bad_addr || kolo_addr_port(&u.root) == 0)
    snprintf(why, why_len, "%s holds no valid root address (an IPv4 or IPv6 address and a port)", who);
  else if (kolo_wire_rest_is_zero(&r) != 0)
    snprintf(why, why_len, "%s has garbage in its unused bytes", who);
  else {
    *uid = u;
    return KOLO_WIRE_OK;
  }
  return KOLO_WIRE_GARBLED;
}

koloResult_t kolo_uid_decode(const koloUniqueId *id, kolo_uid *uid, kolo_errbuf *eb) {
  char why[KOLO_ERR_LEN];
  if (kolo_decode_unique_id(id->internal, sizeof id->internal, "the unique id", uid, why, sizeof why) == KOLO_WIRE_OK)
    return koloSuccess;
  return kolo_error(eb, koloInvalidArgument, "%s", why);
}
