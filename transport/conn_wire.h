/* conn_wire.h - what ranks send each other to set up a pipe, encoded
 * explicitly (wire_codec.h: fixed widths, little-endian) (internal).
 *
 * A receiver offers its pipe over the bootstrap mesh (connect.c): a fixed
 * offer header and a KOLO_CONN_DESC_BYTES descriptor written by its
 * transport (local, shm, p2p, net), whose net variant carries the
 * provider's handle (net.h).  Each has an encoder and a decoder here;
 * decoders check every field, and that unused bytes are zero, and say in
 * a sentence naming the peer rank what was wrong.  No system calls: the
 * fuzz targets link it.
 */
#ifndef KOLO_TRANSPORT_CONN_WIRE_H
#define KOLO_TRANSPORT_CONN_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/net.h"
#include "transport/wire_codec.h"

/* Verdicts, as the bootstrap's decoders. */
enum { KOLO_CONN_WIRE_OK = 0, KOLO_CONN_WIRE_GARBLED = -1 };

/* The descriptor a transport writes (transport.h's recv_create). */
#define KOLO_CONN_DESC_BYTES 128

/* ---- the offer (connect.c) ------------------------------------------------------ */

/* receiver -> sender: which transport, the pipe's geometry, the descriptor. */
typedef struct {
  uint32_t transport;     /* index into connect.c's table of transports */
  uint64_t slot_bytes;
  uint32_t nslots;
  uint32_t ll_slot_bytes; /* device pipes: LL region per slot; host: 0 */
  uint8_t desc[KOLO_CONN_DESC_BYTES];
} kolo_conn_offer;
#define KOLO_CONN_OFFER_BYTES (4 + 8 + 4 + 4 + KOLO_CONN_DESC_BYTES)

void kolo_encode_conn_offer(const kolo_conn_offer *o, uint8_t out[KOLO_CONN_OFFER_BYTES]);
/* Checks the length and that transport < ntransports. */
int kolo_decode_conn_offer(const void *in, size_t len, uint32_t ntransports, int peer, kolo_conn_offer *o,
                           char *why, size_t why_len);

/* ---- transport descriptors (KOLO_CONN_DESC_BYTES, zero-padded) ------------------ */

/* local (ranks of one process): the block's address in that process. */
void kolo_encode_local_desc(uint64_t addr, uint8_t desc[KOLO_CONN_DESC_BYTES]);
/* Refuses a null address. */
int kolo_decode_local_desc(const void *in, size_t len, int peer, uint64_t *addr, char *why, size_t why_len);

/* shm (processes of one host): the segment's name, "/kolo-..." (u8 length,
 * then the name without NUL). */
#define KOLO_SHM_NAME_BYTES 64 /* with its NUL, as kolo_connector.name */
void kolo_encode_shm_desc(const char *name, uint8_t desc[KOLO_CONN_DESC_BYTES]);
/* Into name (KOLO_SHM_NAME_BYTES, NUL-terminated): refuses names that are
 * too long, hold a NUL or a '/' past the first, or are not kolo's. */
int kolo_decode_shm_desc(const void *in, size_t len, int peer, char name[KOLO_SHM_NAME_BYTES], char *why,
                         size_t why_len);

/* p2p (device memory): a pointer to a refcounted owner record (same
 * process) or a CUDA IPC handle (64 opaque bytes, the runtime's). */
enum { KOLO_P2P_LOCAL = 1, KOLO_P2P_IPC = 2 };
#define KOLO_P2P_IPC_BYTES 64
#define KOLO_P2P_MAX_DEV 4096 /* device ordinals beyond this are garbage */
typedef struct {
  uint32_t mode;  /* KOLO_P2P_LOCAL or KOLO_P2P_IPC */
  int32_t dev;    /* the receiver's device ordinal (in its process) */
  uint64_t bytes; /* size of the block */
  uint64_t share; /* KOLO_P2P_LOCAL: the owner record's address; IPC: 0 */
  uint8_t ipc[KOLO_P2P_IPC_BYTES]; /* KOLO_P2P_IPC: cudaIpcMemHandle_t */
} kolo_p2p_desc;
void kolo_encode_p2p_desc(const kolo_p2p_desc *d, uint8_t desc[KOLO_CONN_DESC_BYTES]);
/* Checks the mode, 0 <= dev < KOLO_P2P_MAX_DEV, bytes > 0, and that share
 * is set exactly for KOLO_P2P_LOCAL. */
int kolo_decode_p2p_desc(const void *in, size_t len, int peer, kolo_p2p_desc *d, char *why, size_t why_len);

/* net: the provider's handle (KOLO_NET_HANDLE_BYTES), then its name. */
#define KOLO_NET_PROVIDER_BYTES 16 /* with its NUL */
void kolo_encode_net_desc(const kolo_net_handle *h, const char *provider, uint8_t desc[KOLO_CONN_DESC_BYTES]);
/* Refuses a provider name that is empty, unterminated or not printable. */
int kolo_decode_net_desc(const void *in, size_t len, int peer, kolo_net_handle *h,
                         char provider[KOLO_NET_PROVIDER_BYTES], char *why, size_t why_len);

/* ---- net handles (KOLO_NET_HANDLE_BYTES, zero-padded) ------------------------- */

/* What a provider's listener tells the sender: which provider, where to
 * connect, the pipe's token, and how many connections (socket: data
 * streams; ib: QPs). */
#define KOLO_NET_HANDLE_SOCK_MAGIC 0x6b534b48u /* "kSKH" */
#define KOLO_NET_HANDLE_IB_MAGIC 0x6b494248u   /* "kIBH" */
#define KOLO_NET_TOKEN_BYTES 16
typedef struct {
  uint32_t magic;
  struct sockaddr_storage addr;
  uint8_t token[KOLO_NET_TOKEN_BYTES];
  uint32_t nconns; /* 1..KOLO_NET_MAX_STREAMS */
} kolo_net_listen_info;
void kolo_encode_net_handle(const kolo_net_listen_info *l, kolo_net_handle *h);
/* Checks the magic against `magic` (another provider's is named), the
 * address family and nconns; `who` names the peer in why. */
int kolo_decode_net_handle(const kolo_net_handle *h, uint32_t magic, const char *who, kolo_net_listen_info *l,
                           char *why, size_t why_len);

#endif
