/* bootstrap.h - TCP rendezvous and the out-of-band links between ranks.
 *
 * A job starts with a root (kolo_bootstrap_root_start): a detached thread
 * listening on a TCP socket.  Its address and a random 16-byte secret form
 * the unique id.  Every rank opens a listener of its own, connects to the
 * root and presents the secret and its peer info (listening address, host,
 * process); when all `nranks` have arrived the root tells each rank only its
 * ring predecessor's peer info and exits.  The ranks then gather the whole
 * peer table among themselves in log2(n) rounds (Bruck's allgather), each
 * round telling a rank the address of its next partner.  Connections
 * between ranks are made when first needed (a send, or a recv whose peer has
 * not connected after a moment), so a rank holds about 2 log2(n) of them
 * after init, plus those to the peers it sets pipes up with: the
 * out-of-band channel for connector setup, allgathers, barriers and
 * liveness (a process that dies closes its sockets, so the peers connected
 * to it see EOF and can name it).  docs/dev/bootstrap.md: the protocol.
 *
 * Every connection starts with a hello carrying the secret; a connection
 * that does not present it, sends garbage, or a truncated or oversized
 * message is dropped and logged (the root and the listeners keep serving
 * the real peers).  All waits are bounded by timeout_ms (0: unbounded) and
 * errors name the rank(s) concerned.
 *
 * Thread safety: one kolo_bootstrap is used by one thread at a time.  The
 * root thread is internal.
 */
#ifndef KOLO_TRANSPORT_BOOTSTRAP_H
#define KOLO_TRANSPORT_BOOTSTRAP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"
#include "common/peer_fate.h"
#include "kolo.h"

#define KOLO_SECRET_BYTES 16
#define KOLO_UID_MAGIC 0x6b6f6c6f75696430ull /* "kolouid0" */
/* An id computed from the environment (core/rendezvous.h): its root is not
 * running yet; rank 0 starts it at init. */
#define KOLO_UID_MAGIC_ROOT_AT_INIT 0x6b6f6c6f656e7630ull /* "koloenv0" */

/* What a koloUniqueId holds (fits in KOLO_UNIQUE_ID_BYTES). */
typedef struct {
  uint64_t magic;                     /* KOLO_UID_MAGIC[_ROOT_AT_INIT] */
  uint64_t job;                       /* random job id: names shm segments */
  uint8_t secret[KOLO_SECRET_BYTES];  /* presented on every connection */
  struct sockaddr_storage root;       /* where the root listens */
} kolo_uid;

/* What each rank tells the others. */
typedef struct {
  struct sockaddr_storage addr; /* where this rank's mesh listener is */
  uint64_t host_hash;           /* equal on ranks of one host (hostname+boot id) */
  uint64_t proc_token;          /* equal on ranks of one process */
  int32_t pid;
  int32_t rank;
} kolo_peer_info;

typedef struct kolo_bootstrap kolo_bootstrap;

/* Encode/decode the id (uid_codec.c: explicit bytes, the same on hosts of
 * any byte order).  decode fails (koloInvalidArgument), saying why, on any
 * id that is not one of this kolo's: another magic or wire version, an
 * unknown kind, no root address, garbage in its unused bytes. */
void kolo_uid_encode(const kolo_uid *uid, koloUniqueId *id);
koloResult_t kolo_uid_decode(const koloUniqueId *id, kolo_uid *uid, kolo_errbuf *eb);

/* Picks this host's address for bootstrap: the interface named by
 * KOLO_SOCKET_IFNAME (NCCL syntax: prefix list, '^' excludes, '=' exact),
 * else the first non-loopback interface that is up, else loopback. */
koloResult_t kolo_bootstrap_pick_addr(struct sockaddr_storage *addr, kolo_errbuf *eb);

/* Starts the root thread.  bind_addr: where to listen (port 0: any free
 * port); NULL: kolo_bootstrap_pick_addr() with a free port.  secret: NULL to
 * draw a random one (getrandom).  The root serves one job, then exits; it
 * gives up timeout_ms after the first rank arrived (0: never), telling every
 * rank that did arrive which ranks are missing.  Fills *uid. */
koloResult_t kolo_bootstrap_root_start(const struct sockaddr_storage *bind_addr,
                                       const uint8_t *secret, int timeout_ms,
                                       kolo_uid *uid, kolo_errbuf *eb);

/* The same, owned by the caller (*owner): the thread is joinable and
 * serves until the job formed or failed (and lingered), or until
 * kolo_bootstrap_root_stop, which ends it at once and joins it: a failed
 * init leaves no root thread or socket behind.  Every owned root must be
 * stopped once. */
typedef struct kolo_root kolo_root;
koloResult_t kolo_bootstrap_root_start_owned(const struct sockaddr_storage *bind_addr, const uint8_t *secret,
                                             int timeout_ms, kolo_uid *uid, kolo_errbuf *eb, kolo_root **owner);
void kolo_bootstrap_root_stop(kolo_root *root);

/* Ranks (and forwarding roots) that the roots of this process have taken
 * in, counted since the process started.  Lets a caller wait until a rank
 * has really joined rather than guess how long joining takes. */
int kolo_bootstrap_root_joins(void);

/* Joins the job as `rank` of `nranks`: rendezvous at the root, then the
 * peer table among the ranks.  On failure nothing is left open and eb says why (e.g. "rank 3 of 4
 * did not join within 2000 ms", "root 10.0.0.1:4000 did not answer within
 * 2000 ms", "root refused: nranks 4 differs from rank 0's 8"). */
koloResult_t kolo_bootstrap_init(const kolo_uid *uid, int rank, int nranks,
                                 int timeout_ms, kolo_errbuf *eb,
                                 kolo_bootstrap **out);
/* The same through nids roots (koloCommInitRankScalable): rank r meets at
 * the root of uids[kolo_root_of(r)] (bootstrap_wire.h), which receives only
 * its block of ranks; the roots of uids[1..] forward their blocks to that of
 * uids[0], whose job id and secret the mesh uses.  nids == 1: as above. */
koloResult_t kolo_bootstrap_init_multi(const kolo_uid *uids, int nids, int rank, int nranks,
                                       int timeout_ms, kolo_errbuf *eb, kolo_bootstrap **out);
void kolo_bootstrap_destroy(kolo_bootstrap *bs);

int kolo_bootstrap_rank(const kolo_bootstrap *bs);
int kolo_bootstrap_nranks(const kolo_bootstrap *bs);
const kolo_peer_info *kolo_bootstrap_peer(const kolo_bootstrap *bs, int rank);
/* Ranks on this rank's host (itself included: at least 1). */
int kolo_bootstrap_host_ranks(const kolo_bootstrap *bs);
/* The errbuf this bootstrap reports into (the one given at init). */
kolo_errbuf *kolo_bootstrap_errbuf(kolo_bootstrap *bs);
/* Points error reports to another buffer (e.g. the communicator's). */
void kolo_bootstrap_set_errbuf(kolo_bootstrap *bs, kolo_errbuf *eb);

/* The connections to other ranks this rank holds now. */
int kolo_bootstrap_links(const kolo_bootstrap *bs);

/* Tagged messages to one peer (peer == own rank is allowed: the message is
 * queued locally), over the link to it, connected first if there is none.
 * send does not wait for a matching recv (small messages are buffered by
 * the kernel; large ones wait for the peer to read, bounded by timeout_ms).  recv returns the first message from
 * `peer` with `tag`, queueing others it meets; its length must be `len`
 * exactly, else koloRemoteError naming the peer. */
koloResult_t kolo_bootstrap_send(kolo_bootstrap *bs, int peer, uint32_t tag,
                                 const void *data, size_t len);
koloResult_t kolo_bootstrap_recv(kolo_bootstrap *bs, int peer, uint32_t tag,
                                 void *data, size_t len);
/* all holds nranks * len bytes; this rank's part must be filled in.
 * log2(nranks) rounds; a rank exchanges with ranks r +- 2^k only. */
koloResult_t kolo_bootstrap_allgather(kolo_bootstrap *bs, uint32_t tag, void *all,
                                      size_t len);
koloResult_t kolo_bootstrap_barrier(kolo_bootstrap *bs, uint32_t tag);

/* Non-blocking liveness check: the lowest rank whose connection was closed
 * or failed, or -1 when every peer this rank is connected to still is (a
 * peer it never talked to counts as alive).  Cheap enough
 * to call every few milliseconds from a waiting executor. */
int kolo_bootstrap_dead_peer(kolo_bootstrap *bs);
/* Same check, answering for one peer: KOLO_PEER_ALIVE (0) while its
 * connection is up, else how it went (common/peer_fate.h: a goodbye says;
 * no word: lost). */
int kolo_bootstrap_peer_dead(kolo_bootstrap *bs, int rank);
/* The rank a failure on this rank is most likely due to: the peer whose
 * connection closed first without a goodbye (a process that died), else
 * the rank named by the first goodbye that blamed one (a peer that gave
 * up because of it; *via, when not NULL, says which peer, else -1);
 * -1 when no peer is known to have failed. */
int kolo_bootstrap_culprit(kolo_bootstrap *bs, int *via);
/* The rank a gone peer's goodbye blamed for its leaving (it gave up
 * because that rank failed), or -1: none, this rank, or the peer is up. */
int kolo_bootstrap_peer_blamed(kolo_bootstrap *bs, int rank);

/* Tells every connected peer why this rank goes (once; never waits):
 * KOLO_BYE_LEFT from kolo_bootstrap_destroy, KOLO_BYE_EXITED from the exit
 * hook for bootstraps still up when the process exits. */
enum { KOLO_BYE_LEFT = 1, KOLO_BYE_EXITED = 2 };
void kolo_bootstrap_goodbye(kolo_bootstrap *bs, int reason);

#endif
