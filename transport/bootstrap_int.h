/* bootstrap_int.h - a rank's side of the bootstrap, shared by its files
 * (internal; bootstrap.h is the interface).
 *
 *   bootstrap_link.c    one connection to a peer: messages in, its queue, how it went down
 *   bootstrap_mesh.c    the listener, connections made when first needed, the wait
 *   bootstrap_fate.c    liveness: which peers are down, how, and whom to blame
 *   bootstrap_goodbye.c goodbyes to the peers, at destroy and at exit
 *   bootstrap.c         the handle's life
 *   bootstrap_msg.c     tagged messages, and the links to this process's ranks
 *   bootstrap_gather.c  allgather and barrier in log2(n) rounds (Bruck)
 *   bootstrap_init.c    the rendezvous at the root and the peer table
 *
 * Each file calls only those listed above it.  docs/dev/bootstrap.md has
 * the protocol.
 */
#ifndef KOLO_TRANSPORT_BOOTSTRAP_INT_H
#define KOLO_TRANSPORT_BOOTSTRAP_INT_H

#include <poll.h>
#include <sys/types.h>

#include "transport/bootstrap_wire.h"

/* A message that arrived and was not asked for yet. */
typedef struct queued_msg {
  struct queued_msg *next;
  uint32_t tag;
  size_t len;
  char data[];
} queued_msg;

/* This rank's own attempt to connect to a peer: the socket connects, the
 * hello goes out, then the peer's verdict comes back (ACCEPTED: this is
 * the link; CROSSED: the peer's connection to this rank is). */
enum { OUT_NONE = 0, OUT_CONNECTING, OUT_HELLO_SENT, OUT_CROSSED };
typedef struct {
  int state;             /* OUT_* */
  int fd;                /* -1 unless CONNECTING or HELLO_SENT */
  int attempts;          /* connections made, for the retry of one dropped before its verdict */
  int64_t retry_at;      /* NONE after a failed attempt: when to try again (0: at once) */
  size_t got;            /* bytes of the verdict read */
  uint8_t raw[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
} link_out;

/* Everything about one peer this rank has talked to (for the own rank:
 * only the queue).  Made when first needed: a rank holds as many as the
 * peers it talks to. */
typedef struct {
  int peer;
  int fd;                  /* the connection once up; -1 before, and once down */
  int down;                /* closed or failed: never used again */
  koloResult_t down_res;   /* what calls on it return then */
  char down_why[KOLO_ERR_LEN]; /* "closed its connection", ... */
  int fate;                /* KOLO_PEER_*: why it is down (a goodbye says) */
  unsigned down_seq;       /* when it went down, in the order of this process's links */
  int victim;              /* the rank its goodbye blamed for its leaving, or -1 */
  uint8_t hdr_raw[KOLO_WIRE_HDR_BYTES]; /* header of the message being received */
  kolo_wire_header hdr;    /* hdr_raw decoded, once complete */
  size_t hdr_got;
  queued_msg *rx;          /* that message, once its header is in */
  size_t rx_got;
  queued_msg *head, *last; /* whole messages not yet asked for */
  link_out out;
  int told;                /* this rank's goodbye went out on it */
} mesh_link;

struct kolo_bootstrap {
  int rank, nranks;
  int timeout_ms;
  kolo_uid uid;      /* the job's: its id and secret name the mesh */
  kolo_uid meet;     /* the root this rank meets at (uid, unless several) */
  int nids, root_index;
  kolo_errbuf *eb;
  kolo_peer_info *peers; /* nranks; an entry whose address family is 0 is not known yet */
  mesh_link **links;     /* nranks pointers: NULL for a peer not talked to */
  int *used;             /* the peers that have a link, in the order they got one */
  int nused, cap_used;
  int lfd;               /* this rank's listener, open for its whole life */
  char name[32];         /* "rank 3", for logs */
  kolo_pending_set pend; /* accepted connections without a hello yet */
  struct pollfd *pfd;    /* for waits: the listener, pending, attempts, links */
  int *pfd_who;          /* what each entry is (mesh.c's encoding) */
  int cap_pfd;
  pid_t pid;             /* the process that made it (a forked child says no goodbye) */
  int said_goodbye;
  int bye_reason, bye_blamed; /* what the goodbye said */
  int whole_job;         /* in an allgather: a wait fails when any link is down */
  struct kolo_bootstrap *next_live; /* in the list the exit hook walks */
};

/* ---- bootstrap_link.c ------------------------------------------------------------ */

/* Takes the link down: closes its socket; `fmt` says how it went. */
void kolo_link_down(mesh_link *l, koloResult_t res, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Its peer is lost (err: 0 for end of stream, else the errno). */
void kolo_link_lost(mesh_link *l, int err);
/* Reads whatever has arrived, without waiting, into whole messages on the
 * queue; takes the link down at end of stream, on bad data, or on a
 * goodbye or refusal. */
void kolo_link_pump(mesh_link *l);
void kolo_link_append(mesh_link *l, queued_msg *m);
/* Unlinks and returns the first queued message with `tag`, or NULL. */
queued_msg *kolo_link_take(mesh_link *l, uint32_t tag);
/* Frees the link and whatever it holds; closes its sockets. */
void kolo_link_free(mesh_link *l);

/* ---- bootstrap_mesh.c ------------------------------------------------------------ */

/* "rank 3 (10.0.0.2:4711)", or "rank 3" while its address is unknown. */
const char *kolo_bs_peer_name(const kolo_bootstrap *bs, int r, char *buf, size_t len);
/* The link to peer, made (unconnected) when there is none: NULL only when
 * out of memory (said in eb). */
mesh_link *kolo_bs_link(kolo_bootstrap *bs, int peer);
/* Makes sure the link to peer is up or on its way: starts a connection
 * when there is neither one nor an attempt (the peer's address must be
 * known).  koloSuccess, or a local failure (no descriptor) in eb; a peer
 * that cannot be reached takes the link down instead. */
koloResult_t kolo_bs_reach(kolo_bootstrap *bs, mesh_link *l);
/* Waits until something happens: a connection comes or goes, a link has
 * news, or out_peer's link can take more bytes; serves the listener and
 * the connection attempts meanwhile.  koloTimeout (no sentence) at the
 * deadline; a local failure in eb. */
koloResult_t kolo_bs_wait(kolo_bootstrap *bs, int out_peer, int64_t dl);
/* The same without waiting: what has arrived by now. */
void kolo_bs_poll_now(kolo_bootstrap *bs);
/* The error a call on a link that is down returns, naming the peer. */
koloResult_t kolo_bs_link_error(kolo_bootstrap *bs, int peer);
/* Frees the listener, the pending connections and every link. */
void kolo_bs_mesh_free(kolo_bootstrap *bs);

/* ---- bootstrap_fate.c ----------------------------------------------------------- */

/* The first peer known to have failed: lost without a word, else gone
 * blaming another rank; -1 when none. */
int kolo_bs_first_failed(const kolo_bootstrap *bs);

/* ---- bootstrap_goodbye.c -------------------------------------------------------- */

/* Adds bs to the bootstraps the exit hook says goodbye for. */
void kolo_bs_enlist(kolo_bootstrap *bs);
/* Takes bs off that list (at destroy). */
void kolo_bs_unlist(kolo_bootstrap *bs);
/* After kolo_bootstrap_goodbye: the same goodbye on links made since. */
void kolo_bs_goodbye_new_links(kolo_bootstrap *bs);

/* ---- bootstrap.c ---------------------------------------------------------------- */

/* A handle for rank of nranks, its listener open at *listen_on (port 0: any;
 * the bound address written back). */
koloResult_t kolo_bs_alloc(const kolo_uid *uid, int rank, int nranks, int timeout_ms, kolo_errbuf *eb,
                           kolo_bootstrap **out);
koloResult_t kolo_bs_listen(kolo_bootstrap *bs, struct sockaddr_storage *listen_on);

/* ---- bootstrap_msg.c ------------------------------------------------------------ */

/* How long a receiver waits for its peer to connect before it connects. */
int kolo_bs_reach_grace_ms(const kolo_bootstrap *bs);
/* Makes the links to the other ranks of this process. */
koloResult_t kolo_bs_link_process_peers(kolo_bootstrap *bs);

/* ---- bootstrap_gather.c ------------------------------------------------------- */

/* The peer table among the ranks: this rank's entry and its predecessor's
 * (from the root) are in bs->peers; every other entry is filled, in log2(n)
 * rounds, each rank learning the address of its next partner from its
 * last. */
koloResult_t kolo_bs_gather_peers(kolo_bootstrap *bs);

#endif
