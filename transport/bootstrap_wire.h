/* bootstrap_wire.h - what the bootstrap sends on the wire (internal).
 *
 * Every message, on root and mesh connections alike, is a header
 * {magic, tag, len} followed by len bytes.  A connection opens with a hello:
 * a rank_hello to the root, a mesh_hello between ranks.  Both sides run the
 * same library build, so structs travel in host byte order.
 */
#ifndef KOLO_TRANSPORT_BOOTSTRAP_WIRE_H
#define KOLO_TRANSPORT_BOOTSTRAP_WIRE_H

#include "transport/bootstrap.h"
#include "transport/socket.h"

#define KOLO_WIRE_MAGIC 0x6b6f6c6fu /* "kolo" */
/* Largest message: bigger lengths are garbage or an attack. */
#define KOLO_MAX_MSG_BYTES ((uint64_t)64 << 20)
/* Most ranks a job may have (as in koloCommInitRank). */
#define KOLO_MAX_RANKS (1 << 20)
/* A new connection must present its whole hello this soon. */
#define KOLO_HELLO_TIMEOUT_MS 5000

/* Tags of the bootstrap's own messages (mesh messages after the hello
 * carry the caller's tags). */
enum {
  KOLO_TAG_RANK_HELLO = 0x6b000001u, /* rank -> root: rank_hello */
  KOLO_TAG_TABLE = 0x6b000002u,      /* root -> rank: nranks kolo_peer_info */
  KOLO_TAG_REFUSED = 0x6b000003u,    /* root -> rank: root_refusal */
  KOLO_TAG_MESH_HELLO = 0x6b000004u, /* rank -> rank: mesh_hello */
  KOLO_TAG_BLOCK = 0x6b000005u       /* root k -> root 0: its block of kolo_peer_info */
};

typedef struct {
  uint32_t magic; /* KOLO_WIRE_MAGIC */
  uint32_t tag;
  uint64_t len; /* bytes that follow */
} kolo_wire_header;

/* Who sends a rank_hello. */
enum { KOLO_HELLO_RANK = 0, KOLO_HELLO_SUBROOT = 1 };

/* rank -> root, first thing on the connection.  A job of several roots
 * (koloCommInitRankScalable, nids > 1): rank r goes to the root of block
 * kolo_root_of(r), and every root but root 0 presents its block to root 0
 * with a hello of role KOLO_HELLO_SUBROOT (rank -1, root_index its index,
 * info unused) followed by a KOLO_TAG_BLOCK message; root 0 answers it
 * as it answers a rank (the table, or a refusal), which it relays. */
typedef struct {
  uint8_t secret[KOLO_SECRET_BYTES];
  int32_t rank, nranks;
  int32_t nids;       /* roots of the job; 0 or 1: one */
  int32_t root_index; /* which of them this hello is for */
  int32_t role;       /* KOLO_HELLO_RANK or KOLO_HELLO_SUBROOT */
  int32_t pad;
  kolo_uid first;     /* nids > 1: root 0's id, where the others forward to */
  kolo_peer_info info;
} kolo_rank_hello;

/* The root of rank r in a job of nids roots, and the block [*lo, *hi) of
 * ranks root k serves: contiguous blocks, never empty (nids <= nranks). */
int kolo_root_of(int rank, int nranks, int nids);
void kolo_root_block(int k, int nranks, int nids, int *lo, int *hi);

/* Reads a root's answer on fd: the table of nranks entries into table, or
 * its refusal (its result code, its sentence into eb). */
koloResult_t kolo_root_read_reply(int fd, int nranks, kolo_peer_info *table, int64_t dl, const char *who,
                                  kolo_errbuf *eb);
/* Root k > 0: sends table[lo..hi) to root 0 (`first`) and reads back the
 * whole table (nranks entries) into table, within timeout_ms (0: none).
 * Fails with root 0's refusal (its code, why in eb), or naming root 0. */
koloResult_t kolo_root_forward(const kolo_uid *first, int nranks, int nids, int index,
                               kolo_peer_info *table, int timeout_ms, kolo_errbuf *eb);
/* Root 0: reads the block of the root that sent hello h on fd into table,
 * checking that every entry is a rank of that block; 0, or -1 and why. */
int kolo_root_read_block(int fd, const kolo_rank_hello *h, kolo_peer_info *table, char *why,
                         size_t why_len);

/* root -> rank when the job failed: a result code, then a sentence of
 * len - 4 bytes (not NUL-terminated). */
typedef struct {
  int32_t result;
  char text[KOLO_ERR_LEN];
} kolo_root_refusal;

/* rank -> rank, first thing on a mesh connection */
typedef struct {
  uint8_t secret[KOLO_SECRET_BYTES];
  uint64_t job;
  int32_t rank, nranks;
} kolo_mesh_hello;

/* Fills buf from getrandom(). */
koloResult_t kolo_random(void *buf, size_t len, kolo_errbuf *eb);

/* A connection that has been accepted but has not yet presented its hello.
 * The listener (root or mesh) keeps several, so that a stranger that
 * stalls cannot hold up the real peers. */
#define KOLO_HELLO_MAX_BYTES \
  (sizeof(kolo_rank_hello) > sizeof(kolo_mesh_hello) ? sizeof(kolo_rank_hello) : sizeof(kolo_mesh_hello))
typedef struct {
  int fd;
  int64_t deadline; /* drop it when the hello is not complete by then */
  size_t got;       /* bytes of hdr + body received */
  char from[64];    /* the peer's address, for logs */
  kolo_wire_header hdr;
  unsigned char body[KOLO_HELLO_MAX_BYTES];
} kolo_pending_hello;

enum { KOLO_HELLO_MORE = 0, KOLO_HELLO_DONE = 1, KOLO_HELLO_DROP = -1 };

/* Starts reading a hello on a freshly accepted fd (taken over). */
void kolo_pending_start(kolo_pending_hello *p, int fd, const struct sockaddr_storage *from);
/* Reads what has arrived.  KOLO_HELLO_DONE once the header (tag `tag`,
 * length `body_len` exactly) and body are in; KOLO_HELLO_DROP with a
 * sentence in why when the peer sent garbage, a wrong or oversized length,
 * closed early (truncated) or failed.  KOLO_HELLO_MORE otherwise. */
int kolo_pending_step(kolo_pending_hello *p, uint32_t tag, size_t body_len, char *why,
                      size_t why_len);

#endif
