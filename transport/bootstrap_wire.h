/* bootstrap_wire.h - what the bootstrap sends on the wire (internal).
 *
 * Every message, on root and mesh connections alike, is a header
 * {magic, tag, len} followed by len bytes.  A connection opens with a hello:
 * a rank_hello to the root, a mesh_hello between ranks, whose first field
 * is the sender's KOLO_BOOTSTRAP_WIRE_VERSION; a mesh hello is answered with a verdict
 * (accepted, or crossed: the peer's own connection wins).  Nothing travels
 * as a C struct: each message has an encoder and a decoder
 * (bootstrap_codec.c, on wire_codec.h: fixed widths, little-endian), and
 * decoders check every field, so a peer of another version or a garbled
 * message is refused, never misread.  docs/dev/bootstrap.md: the protocol.
 */
#ifndef KOLO_TRANSPORT_BOOTSTRAP_WIRE_H
#define KOLO_TRANSPORT_BOOTSTRAP_WIRE_H

#include "transport/bootstrap.h"
#include "transport/socket.h"
#include "transport/wire_codec.h"

#define KOLO_WIRE_MAGIC 0x6b6f6c6fu /* "kolo" */
/* The revision of the bootstrap's messages, first in every hello: kolo's
 * one wire version (wire_codec.h).  4's root sent every rank the whole
 * table of ranks, and each rank connected to every other at init; since 5
 * the root sends each rank its ring predecessor, the ranks gather the table
 * in log2(n) rounds and connect when first needed, and a mesh hello is
 * answered with a verdict. */
#define KOLO_BOOTSTRAP_WIRE_VERSION KOLO_WIRE_VERSION
/* Largest message: bigger lengths are garbage or an attack. */
#define KOLO_MAX_MSG_BYTES ((uint64_t)64 << 20)
/* Most ranks a job may have (as in koloCommInitRank). */
#define KOLO_MAX_RANKS (1 << 20)
/* A new connection must present its whole hello this soon. */
#define KOLO_HELLO_TIMEOUT_MS 5000

/* Tags of the bootstrap's own messages (mesh messages after the hello
 * carry the caller's tags).  The hellos of wire version 1 had tags of their
 * own: a hello with one of those is from a version 1 peer. */
enum {
  KOLO_TAG_RANK_HELLO_V1 = 0x6b000001u, /* version 1's rank_hello (host-order struct) */
  KOLO_TAG_TABLE_V4 = 0x6b000002u,   /* versions up to 4: root -> rank, the whole table (never sent now) */
  KOLO_TAG_REFUSED = 0x6b000003u,    /* root -> rank, rank -> rank: root_refusal */
  KOLO_TAG_MESH_HELLO_V1 = 0x6b000004u, /* version 1's mesh_hello */
  KOLO_TAG_BLOCK = 0x6b000005u,      /* root k -> root 0: its block of peer infos */
  KOLO_TAG_GOODBYE = 0x6b000006u,    /* rank -> rank: why it is leaving (u32 KOLO_BYE_*, i32 blamed) */
  KOLO_TAG_NEIGHBOR = 0x6b000007u,   /* root -> rank, root 0 -> root k: one peer info, the ring predecessor */
  KOLO_TAG_MESH_VERDICT = 0x6b000008u, /* rank -> rank: the answer to a mesh hello (u32 KOLO_MESH_*) */
  KOLO_TAG_PEERS = 0x6b000009u,      /* rank -> rank, init's allgather: peer infos (Bruck blocks) */
  KOLO_TAG_NEXT = 0x6b00000au,       /* rank -> rank, init's allgather: the peer info of the receiver's next target */
  KOLO_TAG_RANK_HELLO = 0x6b000011u, /* rank -> root: rank_hello, version first */
  KOLO_TAG_MESH_HELLO = 0x6b000014u  /* rank -> rank: mesh_hello, version first */
};

/* A mesh hello's verdict.  Two ranks that connect to each other at the same
 * time keep the connection the lower rank made: the higher one answers the
 * lower's hello ACCEPTED and drops its own attempt, the lower one answers the
 * higher's CROSSED (wait for my connection) and closes it. */
enum { KOLO_MESH_ACCEPTED = 1, KOLO_MESH_CROSSED = 2 };

/* On the wire: magic u32, tag u32, len u64 (bytes that follow). */
#define KOLO_WIRE_HDR_BYTES 16
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

/* Reads a root's answer on fd: the peer info of rank `rank` (this rank's
 * ring predecessor) into *info, or its refusal (its result code, its
 * sentence into eb). */
koloResult_t kolo_root_read_reply(int fd, int rank, kolo_peer_info *info, int64_t dl, const char *who,
                                  kolo_errbuf *eb);
/* Root k > 0: sends table[lo..hi) to root 0 (`first`) and reads back the
 * peer info of rank lo - 1 (mod nranks), the ring predecessor of its first
 * rank, into that entry of table, within timeout_ms (0: none).  Fails with
 * root 0's refusal (its code, why in eb), or naming root 0. */
koloResult_t kolo_root_forward(const kolo_uid *first, int nranks, int nids, int index,
                               kolo_peer_info *table, int timeout_ms, kolo_errbuf *eb);
/* Root 0: reads the block of the root that sent hello h on fd into table,
 * checking that every entry is a rank of that block; 0, or -1 and why. */
int kolo_root_read_block(int fd, const kolo_rank_hello *h, kolo_peer_info *table, char *why,
                         size_t why_len);

/* root -> rank when the job failed: a result code, then a sentence of
 * len - 4 bytes (not NUL-terminated).  Its format never changes, so that a
 * peer of any version learns why it was refused. */
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
/* Room for a hello body of any version: a longer one is garbage. */
#define KOLO_HELLO_MAX_BYTES 512
typedef struct {
  int fd;
  int64_t deadline; /* drop it when the hello is not complete by then */
  int64_t last_rx;  /* when it was accepted or last sent a byte */
  size_t got;       /* bytes of hdr + body received */
  char from[64];    /* the peer's address, for logs */
  unsigned char raw[KOLO_WIRE_HDR_BYTES];
  kolo_wire_header hdr; /* decoded once raw is complete */
  unsigned char body[KOLO_HELLO_MAX_BYTES];
} kolo_pending_hello;

/* KOLO_HELLO_REFUSE: a peer that speaks another wire version; it is told
 * why (a refusal) before the connection closes.  KOLO_HELLO_GONE: it closed
 * without sending a byte (a rank that gave up its own connection attempt
 * for its peer's, or a port scan): dropped without a warning. */
enum { KOLO_HELLO_MORE = 0, KOLO_HELLO_DONE = 1, KOLO_HELLO_DROP = -1, KOLO_HELLO_REFUSE = -2, KOLO_HELLO_GONE = -3 };

/* Starts reading a hello on a freshly accepted fd (taken over). */
void kolo_pending_start(kolo_pending_hello *p, int fd, const struct sockaddr_storage *from);
/* Reads what has arrived.  KOLO_HELLO_DONE once the header (tag `tag`,
 * a length of at most KOLO_HELLO_MAX_BYTES) and body are in (hdr.len
 * bytes in body, for the caller's decoder); KOLO_HELLO_DROP with a
 * sentence in why when the peer sent garbage, an oversized length, closed
 * early (truncated) or failed; KOLO_HELLO_REFUSE when the tag is version
 * 1's (`v1_tag`); KOLO_HELLO_GONE when it closed before its first byte.
 * KOLO_HELLO_MORE otherwise. */
int kolo_pending_step(kolo_pending_hello *p, uint32_t tag, uint32_t v1_tag, char *why, size_t why_len);
/* A listener whose table of pending connections is full makes room for a
 * newcomer by dropping the one that has been silent longest, once silent
 * for KOLO_HELLO_SILENT_MS: a real peer sends its whole hello at once, so
 * a connection that sends nothing for that long is a stranger, and
 * strangers cost a newcomer at most this wait, not KOLO_HELLO_TIMEOUT_MS.
 * (A real peer on a host so loaded that it is preempted for longer between
 * its connect and its hello may be dropped too: a rank that loses its
 * connection before the verdict connects again.) */
#define KOLO_HELLO_SILENT_MS 250

/* The connections a listener has accepted that have not presented a hello
 * yet (bootstrap_pending.c): up to `max` of them, the table growing as
 * they come. */
typedef struct {
  kolo_pending_hello *p;
  int n, cap, max;
} kolo_pending_set;

void kolo_pending_set_init(kolo_pending_set *s, int max);
/* Closes every connection still pending and frees the table. */
void kolo_pending_set_free(kolo_pending_set *s);
/* No room for a newcomer: the table is at its most and no connection in it
 * has been silent long enough to drop.  Silence is what the peer did, not
 * what the listener saw: a connection with bytes waiting unread is not
 * silent (a listener preempted for longer than KOLO_HELLO_SILENT_MS would
 * otherwise drop real peers whose hellos it had not read yet). */
int kolo_pending_set_full(kolo_pending_set *s, int64_t now);
/* Accepts every connection waiting on lfd while there is room (dropping a
 * silent one for a newcomer where the table is full); `who` names the
 * listener in logs ("root 1.2.3.4:5", "rank 3").  koloSuccess, or why
 * accept failed in eb (too many open files names RLIMIT_NOFILE). */
koloResult_t kolo_pending_accept(kolo_pending_set *s, int lfd, const char *who, kolo_errbuf *eb);
/* Drops (closing, logging why) the connections whose hello is overdue. */
void kolo_pending_expire(kolo_pending_set *s, int64_t now, const char *who);
/* Removes the entries whose fd was taken over or dropped (fd -1). */
void kolo_pending_compact(kolo_pending_set *s);
/* The next moment something is due: a hello deadline or, when full, the
 * moment a silent connection may go; 0 when nothing is pending. */
int64_t kolo_pending_next_due(kolo_pending_set *s, int64_t now);

/* Sends a refusal (result, text) on fd, bounded by KOLO_HELLO_TIMEOUT_MS;
 * koloSuccess or why not in eb. */
koloResult_t kolo_send_refusal(int fd, koloResult_t res, const char *text, const char *who, kolo_errbuf *eb);

/* ---- encoders and decoders (bootstrap_codec.c) ------------------------------ */

/* Encoded sizes: address (family 4/6, port, 16 bytes), peer info, uid. */
#define KOLO_ADDR_WIRE_BYTES 19
#define KOLO_PEER_INFO_BYTES (KOLO_ADDR_WIRE_BYTES + 8 + 8 + 4 + 4)
#define KOLO_UID_WIRE_BYTES (8 + 8 + KOLO_SECRET_BYTES + KOLO_ADDR_WIRE_BYTES)
#define KOLO_RANK_HELLO_BYTES (4 + KOLO_SECRET_BYTES + 5 * 4 + KOLO_UID_WIRE_BYTES + KOLO_PEER_INFO_BYTES)
#define KOLO_MESH_HELLO_BYTES (4 + KOLO_SECRET_BYTES + 8 + 4 + 4)
#define KOLO_REFUSAL_MAX_BYTES (4 + KOLO_ERR_LEN)
#define KOLO_GOODBYE_BYTES 8 /* reason u32, the rank blamed i32 (-1: none); 4-byte ones are read too */
#define KOLO_VERDICT_BYTES 4 /* KOLO_MESH_ACCEPTED or KOLO_MESH_CROSSED, u32 */

/* A decoder's verdict: fine, garbled (why says how) or another version
 * (*version says which). */
enum { KOLO_WIRE_OK = 0, KOLO_WIRE_GARBLED = -1, KOLO_WIRE_OTHER_VERSION = -2 };

/* An address (KOLO_ADDR_WIRE_BYTES), for the other codecs (conn_wire.h);
 * get: 0, or -1 when the family is neither 4 nor 6 or an IPv4 address has
 * non-zero bytes past its 4. */
void kolo_wire_put_addr(kolo_wire_out *w, const struct sockaddr_storage *a);
int kolo_wire_get_addr(kolo_wire_in *r, struct sockaddr_storage *a);

void kolo_encode_header(uint8_t out[KOLO_WIRE_HDR_BYTES], uint32_t tag, uint64_t len);
kolo_wire_header kolo_decode_header(const uint8_t in[KOLO_WIRE_HDR_BYTES]);

void kolo_encode_rank_hello(const kolo_rank_hello *h, uint8_t out[KOLO_RANK_HELLO_BYTES]);
int kolo_decode_rank_hello(const void *body, size_t len, kolo_rank_hello *h, uint32_t *version, char *why,
                           size_t why_len);
void kolo_encode_mesh_hello(const kolo_mesh_hello *h, uint8_t out[KOLO_MESH_HELLO_BYTES]);
int kolo_decode_mesh_hello(const void *body, size_t len, kolo_mesh_hello *h, uint32_t *version, char *why,
                           size_t why_len);
/* A koloUniqueId's bytes (uid_codec.c; KOLO_UNIQUE_ID_BYTES): magic u32
 * "kUID", KOLO_WIRE_VERSION u32, then the uid (KOLO_UID_WIRE_BYTES: its
 * magic, job, secret, root address), then zeros.  The decoder names the
 * id as `who` says ("the unique id", "rank 3's unique id") and refuses a
 * length other than KOLO_UNIQUE_ID_BYTES, another magic (one of version 3
 * or older, a host-order struct, by name), another version
 * (KOLO_WIRE_OTHER_VERSION), a uid magic that is neither KOLO_UID_MAGIC
 * nor KOLO_UID_MAGIC_ROOT_AT_INIT, a root that is not IPv4 or IPv6 or has
 * no port, and non-zero padding. */
#define KOLO_UID_ID_MAGIC 0x6b554944u /* "kUID" */
#define KOLO_UID_ID_HEAD_BYTES 8      /* magic, version */
int kolo_decode_unique_id(const void *in, size_t len, const char *who, kolo_uid *uid, char *why, size_t why_len);
/* The uid alone, as in a rank hello and a unique id: get refuses (-1) a
 * root address of another family than 4 or 6 unless allow_none. */
void kolo_wire_put_uid(kolo_wire_out *w, const kolo_uid *u);
int kolo_wire_get_uid(kolo_wire_in *r, kolo_uid *u, int allow_none);

/* Entries [lo, hi) of table: (hi - lo) * KOLO_PEER_INFO_BYTES bytes. */
void kolo_encode_peer_table(const kolo_peer_info *table, int lo, int hi, uint8_t *out);
/* Into table[lo..hi): the length must be exact, entry k must be rank k. */
int kolo_decode_peer_table(const void *body, size_t len, int lo, int hi, kolo_peer_info *table, char *why,
                           size_t why_len);
/* One peer info (KOLO_PEER_INFO_BYTES): that of rank `rank`, or garbled. */
void kolo_encode_peer_info(const kolo_peer_info *p, uint8_t out[KOLO_PEER_INFO_BYTES]);
int kolo_decode_peer_info(const void *body, size_t len, int rank, kolo_peer_info *p, char *why, size_t why_len);
/* A mesh hello's verdict (KOLO_MESH_*); decode: garbled unless it is one. */
void kolo_encode_verdict(uint32_t verdict, uint8_t out[KOLO_VERDICT_BYTES]);
int kolo_decode_verdict(const void *body, size_t len, uint32_t *verdict);
/* Returns the bytes written (at most KOLO_REFUSAL_MAX_BYTES). */
size_t kolo_encode_refusal(koloResult_t res, const char *text, uint8_t out[KOLO_REFUSAL_MAX_BYTES]);
/* A valid failure code into *res (koloRemoteError for any other), the
 * sentence NUL-terminated into text (cut to text_len - 1). */
int kolo_decode_refusal(const void *body, size_t len, koloResult_t *res, char *text, size_t text_len);
/* A root's answer as a rank reads it, header and body in msg: the peer
 * info of rank `rank` into *info, or the refusal as the error in eb. */
koloResult_t kolo_root_decode_reply(const uint8_t *msg, size_t len, int rank, kolo_peer_info *info,
                                    const char *who, kolo_errbuf *eb);

#endif
