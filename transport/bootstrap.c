/* bootstrap.c - a rank's side of the bootstrap: rendezvous at the root, the
 * mesh, tagged messages, allgather, barrier, liveness (bootstrap.h).
 *
 * Each mesh connection (a "link") is read by one non-blocking pump that
 * reassembles whole messages into the link's queue of messages not yet asked
 * for.  Every wait (recv, or a send whose peer is slow to read) polls all
 * links and pumps whichever is readable, so that ranks sending large
 * messages to each other at the same time cannot deadlock, and
 * kolo_bootstrap_dead_peer() never blocks on a partial message.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/bootstrap_wire.h"

/* The root gives up timeout_ms after the first rank joined; a rank waits
 * that long after its own hello plus this, so that it hears the root's
 * verdict (which ranks are missing) rather than timing out first. */
#define ROOT_REPLY_GRACE_MS 1000
#define MESH_MAX_PENDING 32

typedef struct queued_msg {
  struct queued_msg *next;
  uint32_t tag;
  size_t len;
  char data[];
} queued_msg;

/* The connection to one peer (for the own rank: only the queue). */
typedef struct {
  int fd;                  /* -1 for the own rank, or once down */
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
} mesh_link;

struct kolo_bootstrap {
  int rank, nranks;
  int timeout_ms;
  kolo_uid uid;      /* the job's: its id and secret name the mesh */
  kolo_uid meet;     /* the root this rank meets at (uid, unless several) */
  int nids, root_index;
  kolo_errbuf *eb;
  kolo_peer_info *peers;
  mesh_link *links;
  struct pollfd *pfd; /* nranks, for waits */
  int *pfd_peer;      /* which peer each pfd entry is */
  pid_t pid;          /* the process that made it (a forked child says no goodbye) */
  int said_goodbye;
  struct kolo_bootstrap *next_live; /* in the list the exit hook walks */
};

/* ---- identity of this host and process ------------------------------------ */

static pthread_once_t token_once = PTHREAD_ONCE_INIT;
static uint64_t proc_token;

static uint64_t fnv(uint64_t h, const void *p, size_t len) {
  const unsigned char *s = p;
  for (size_t i = 0; i < len; i++) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

static void draw_token_now(void) {
  if (kolo_random(&proc_token, sizeof proc_token, NULL) == koloSuccess) return;
  /* No getrandom: pid, time and an address still tell processes apart. */
  int64_t now = kolo_now_ms();
  pid_t pid = getpid();
  void *where = &now;
  proc_token = fnv(fnv(fnv(1469598103934665603ull, &pid, sizeof pid), &now, sizeof now), &where,
                   sizeof where);
}

/* A forked child is another process: it must not pass for its parent, or its
 * ranks would pick the in-process transport and share memory that fork copied. */
static void draw_token(void) {
  draw_token_now();
  pthread_atfork(NULL, NULL, draw_token_now);
}

/* KOLO_HOSTID (as NCCL_HOSTID) names the host instead: tests place ranks of
 * one machine on different "hosts" (net pipes between them, rings grouped by
 * it), and containers that share a hostname can be told apart. */
static uint64_t host_hash(void) {
  const char *id = kolo_param_str("KOLO_HOSTID");
  if (id != NULL) return fnv(0x686f737469643a31ull, id, strlen(id));
  char host[256] = "", boot[64] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f) {
    if (fgets(boot, sizeof boot, f) == NULL) boot[0] = '\0';
    fclose(f);
  }
  uint64_t h = fnv(1469598103934665603ull, host, strlen(host));
  return fnv(h, boot, strlen(boot));
}

/* ---- goodbyes ---------------------------------------------------------------- */

/* Bootstraps not destroyed yet, for the exit hook: a process that exits
 * without destroying its communicators still tells its peers so. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static kolo_bootstrap *live_head;
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;

const char *kolo_peer_fate_text(int fate) {
  switch (fate) {
  case KOLO_PEER_LEFT: return "left (destroyed its communicator)";
  case KOLO_PEER_EXITED: return "exited without destroying its communicator";
  default: return "was lost without a word (killed or crashed; its connection closed)";
  }
}

void kolo_bootstrap_goodbye(kolo_bootstrap *bs, int reason) {
  if (bs->said_goodbye || bs->pid != getpid()) return; /* a forked child's copy is not its to close */
  bs->said_goodbye = 1;
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_GOODBYE_BYTES];
  kolo_encode_header(m, KOLO_TAG_GOODBYE, KOLO_GOODBYE_BYTES);
  kolo_wire_out w = kolo_wire_writer(m + KOLO_WIRE_HDR_BYTES, KOLO_GOODBYE_BYTES);
  kolo_put_u32(&w, (uint32_t)reason);
  /* Whom this rank's leaving is due to, so that a peer that fails on it
   * names the rank that failed first, not this one. */
  kolo_put_i32(&w, reason == KOLO_BYE_LEFT ? kolo_bootstrap_culprit(bs, NULL) : -1);
  for (int r = 0; r < bs->nranks; r++) {
    if (bs->links[r].fd < 0) continue;
    /* never waits: a peer that does not read learns it from the close */
    if (send(bs->links[r].fd, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof m)
      KOLO_INFO("rank %d could not say goodbye to rank %d: %s", bs->rank, r, strerror(errno));
  }
}

/* At exit: goodbyes on the bootstraps of this process that are still up.
 * trylock: a thread that holds the lock while the process exits must not
 * hang the exit. */
static void say_goodbye_at_exit(void) {
  if (pthread_mutex_trylock(&live_lock) != 0) return;
  for (kolo_bootstrap *bs = live_head; bs; bs = bs->next_live) kolo_bootstrap_goodbye(bs, KOLO_BYE_EXITED);
  pthread_mutex_unlock(&live_lock);
}

static void install_exit_hook(void) {
  if (atexit(say_goodbye_at_exit) != 0) KOLO_WARN("cannot install the exit hook: peers will see exits as losses");
}

static void enlist(kolo_bootstrap *bs) {
  pthread_once(&exit_hook_once, install_exit_hook);
  pthread_mutex_lock(&live_lock);
  bs->next_live = live_head;
  live_head = bs;
  pthread_mutex_unlock(&live_lock);
}

static void unlist(kolo_bootstrap *bs) {
  pthread_mutex_lock(&live_lock);
  for (kolo_bootstrap **at = &live_head; *at; at = &(*at)->next_live)
    if (*at == bs) {
      *at = bs->next_live;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

/* ---- lifetime ------------------------------------------------------------- */

/* "rank 3 (10.0.0.2:4711)". */
static const char *peer_name(const kolo_bootstrap *bs, int r, char *buf, size_t len) {
  char addr[80];
  kolo_addr_str(&bs->peers[r].addr, addr, sizeof addr);
  snprintf(buf, len, "rank %d (%s)", r, addr);
  return buf;
}

static void free_queue(queued_msg *m) {
  while (m) {
    queued_msg *next = m->next;
    free(m);
    m = next;
  }
}

void kolo_bootstrap_destroy(kolo_bootstrap *bs) {
  if (bs == NULL) return;
  kolo_bootstrap_goodbye(bs, KOLO_BYE_LEFT);
  unlist(bs);
  for (int r = 0; r < bs->nranks; r++) {
    if (bs->links[r].fd >= 0) close(bs->links[r].fd);
    free(bs->links[r].rx);
    free_queue(bs->links[r].head);
  }
  free(bs->pfd_peer);
  free(bs->pfd);
  free(bs->links);
  free(bs->peers);
  free(bs);
}

static koloResult_t bs_alloc(const kolo_uid *uid, int rank, int nranks, int timeout_ms,
                             kolo_errbuf *eb, kolo_bootstrap **out) {
  kolo_bootstrap *bs = calloc(1, sizeof *bs);
  if (bs == NULL) return kolo_error(eb, koloSystemError, "rank %d: out of memory in bootstrap", rank);
  bs->peers = calloc((size_t)nranks, sizeof *bs->peers);
  bs->links = calloc((size_t)nranks, sizeof *bs->links);
  bs->pfd = calloc((size_t)nranks, sizeof *bs->pfd);
  bs->pfd_peer = calloc((size_t)nranks, sizeof *bs->pfd_peer);
  if (!bs->peers || !bs->links || !bs->pfd || !bs->pfd_peer) {
    free(bs->pfd_peer);
    free(bs->pfd);
    free(bs->links);
    free(bs->peers);
    free(bs);
    return kolo_error(eb, koloSystemError, "rank %d: out of memory in bootstrap", rank);
  }
  bs->rank = rank;
  bs->nranks = nranks;
  bs->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  bs->uid = *uid;
  bs->meet = *uid;
  bs->nids = 1;
  bs->eb = eb;
  bs->pid = getpid();
  for (int r = 0; r < nranks; r++) bs->links[r].fd = -1, bs->links[r].victim = -1;
  *out = bs;
  return koloSuccess;
}

/* ---- rendezvous at the root ------------------------------------------------- */

/* Listens for the mesh where this host reached the root (or on
 * KOLO_SOCKET_IFNAME's interface); fills the address to advertise. */
static koloResult_t open_listener(kolo_bootstrap *bs, int root_fd, struct sockaddr_storage *addr,
                                  int *lfd) {
  memset(addr, 0, sizeof *addr);
  socklen_t len = sizeof *addr;
  if (kolo_param_str("KOLO_SOCKET_IFNAME") != NULL) {
    koloResult_t res = kolo_bootstrap_pick_addr(addr, bs->eb);
    if (res != koloSuccess) return res;
  } else if (getsockname(root_fd, (struct sockaddr *)addr, &len) != 0) {
    return kolo_syserror(bs->eb, errno, "rank %d: getsockname on the root connection failed",
                         bs->rank);
  }
  kolo_addr_set_port(addr, 0);
  return kolo_sock_listen(addr, bs->eb, lfd);
}

static koloResult_t send_rank_hello(kolo_bootstrap *bs, int fd, const struct sockaddr_storage *addr,
                                    int64_t dl, const char *root) {
  kolo_rank_hello h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, bs->meet.secret, sizeof h.secret);
  h.rank = bs->rank;
  h.nranks = bs->nranks;
  h.nids = bs->nids;
  h.root_index = bs->root_index;
  h.role = KOLO_HELLO_RANK;
  if (bs->nids > 1) h.first = bs->uid;
  pthread_once(&token_once, draw_token);
  h.info = (kolo_peer_info){*addr, host_hash(), proc_token, (int32_t)getpid(), bs->rank};
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES];
  kolo_encode_header(m, KOLO_TAG_RANK_HELLO, KOLO_RANK_HELLO_BYTES);
  kolo_encode_rank_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  return kolo_sock_send_all(fd, m, sizeof m, dl, root, bs->eb);
}

/* The table of all ranks, or the root's verdict on this job. */
static koloResult_t read_root_reply(kolo_bootstrap *bs, int fd, int64_t dl, const char *root) {
  koloResult_t res = kolo_root_read_reply(fd, bs->nranks, bs->peers, dl, root, bs->eb);
  for (int r = 0; res == koloSuccess && r < bs->nranks; r++)
    if (bs->peers[r].rank != r)
      res = kolo_error(bs->eb, koloRemoteError, "%s sent a table whose entry %d is rank %d", root, r,
                       bs->peers[r].rank);
  return res;
}

/* Connects to the root, opens this rank's mesh listener (*lfd), presents
 * the hello and reads the table of all ranks. */
static koloResult_t rendezvous(kolo_bootstrap *bs, int *lfd) {
  char root[96], addr[80];
  kolo_addr_str(&bs->meet.root, addr, sizeof addr);
  snprintf(root, sizeof root, "root %s", addr);
  int fd;
  koloResult_t res = kolo_sock_connect(&bs->meet.root, kolo_deadline(bs->timeout_ms), bs->timeout_ms,
                                       root, bs->eb, &fd);
  if (res != koloSuccess) return res;
  struct sockaddr_storage me;
  res = open_listener(bs, fd, &me, lfd);
  if (res != koloSuccess) goto close_root;
  /* Several roots: root 0 may start its clock when this root is done. */
  int64_t wait = bs->nids > 1 ? 2 * (int64_t)bs->timeout_ms + 2 * ROOT_REPLY_GRACE_MS
                              : bs->timeout_ms + ROOT_REPLY_GRACE_MS;
  int64_t dl = bs->timeout_ms > 0 ? kolo_now_ms() + wait : 0;
  res = send_rank_hello(bs, fd, &me, dl, root);
  if (res == koloSuccess) res = read_root_reply(bs, fd, dl, root);
  if (res != koloSuccess) goto close_listener;
  close(fd);
  return koloSuccess;

close_listener:
  close(*lfd);
  *lfd = -1;
close_root:
  close(fd);
  return res;
}

/* ---- the mesh --------------------------------------------------------------- */

static koloResult_t mesh_connect(kolo_bootstrap *bs, int peer, int64_t dl) {
  char who[112];
  peer_name(bs, peer, who, sizeof who);
  int fd;
  koloResult_t res = kolo_sock_connect(&bs->peers[peer].addr, dl, bs->timeout_ms, who, bs->eb, &fd);
  if (res != koloSuccess) return res;
  kolo_mesh_hello h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, bs->uid.secret, sizeof h.secret);
  h.job = bs->uid.job;
  h.rank = bs->rank;
  h.nranks = bs->nranks;
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES];
  kolo_encode_header(m, KOLO_TAG_MESH_HELLO, KOLO_MESH_HELLO_BYTES);
  kolo_encode_mesh_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  res = kolo_sock_send_all(fd, m, sizeof m, dl, who, bs->eb);
  if (res != koloSuccess) {
    close(fd);
    return res;
  }
  bs->links[peer].fd = fd;
  return koloSuccess;
}

/* Why a complete mesh hello is not from a peer we wait for, or NULL. */
static const char *mesh_hello_fault(const kolo_bootstrap *bs, const kolo_mesh_hello *h) {
  if (!kolo_secret_equal(h->secret, bs->uid.secret, KOLO_SECRET_BYTES)) return "did not present the job's secret";
  if (h->job != bs->uid.job || h->nranks != bs->nranks) return "belongs to another job";
  if (h->rank <= bs->rank || h->rank >= bs->nranks) return "claims a rank that does not connect here";
  if (bs->links[h->rank].fd >= 0) return "claims a rank that is already connected";
  return NULL;
}

/* A connection that is no peer we wait for: told why where it can hear it
 * (a kolo rank of another version, or one that got the job wrong). */
static void mesh_refuse(kolo_bootstrap *bs, kolo_pending_hello *p, int other, uint32_t version, const char *fault) {
  char text[KOLO_ERR_LEN];
  if (other)
    snprintf(text, sizeof text, "rank %d refused a mesh connection: peer %s speaks kolo wire version %u, this rank "
             "speaks %u", bs->rank, p->from, version, KOLO_WIRE_VERSION);
  else
    snprintf(text, sizeof text, "rank %d dropped a mesh connection from %s that %s", bs->rank, p->from, fault);
  KOLO_WARN("%s", text);
  kolo_errbuf eb = {0};
  if (other && kolo_send_refusal(p->fd, koloInvalidUsage, text, p->from, &eb) != koloSuccess)
    KOLO_INFO("rank %d: could not tell %s why: %s", bs->rank, p->from, eb.msg);
  close(p->fd);
  p->fd = -1;
}

/* Reads a pending connection's hello; adopts it as a link when complete
 * and valid, drops it when bad.  Returns 1 when a link was added. */
static int mesh_serve_pending(kolo_bootstrap *bs, kolo_pending_hello *p) {
  char why[200];
  const char *fault = why;
  int s = kolo_pending_step(p, KOLO_TAG_MESH_HELLO, KOLO_TAG_MESH_HELLO_V1, why, sizeof why);
  if (s == KOLO_HELLO_MORE) return 0;
  kolo_mesh_hello h;
  uint32_t version = 1; /* KOLO_HELLO_REFUSE: version 1's tag */
  int d = s == KOLO_HELLO_DONE ? kolo_decode_mesh_hello(p->body, (size_t)p->hdr.len, &h, &version, why, sizeof why)
          : s == KOLO_HELLO_REFUSE ? KOLO_WIRE_OTHER_VERSION : KOLO_WIRE_GARBLED;
  if (d == KOLO_WIRE_OK) fault = mesh_hello_fault(bs, &h);
  if (d == KOLO_WIRE_OK && fault == NULL) {
    bs->links[h.rank].fd = p->fd;
    p->fd = -1;
    return 1;
  }
  mesh_refuse(bs, p, d == KOLO_WIRE_OTHER_VERSION, version, fault);
  return 0;
}

/* koloTimeout naming the first rank that did not connect, and how many. */
static koloResult_t mesh_missing(kolo_bootstrap *bs, int missing) {
  int first = bs->rank + 1;
  while (first < bs->nranks - 1 && bs->links[first].fd >= 0) first++;
  char who[112], more[32] = "";
  if (missing > 1) snprintf(more, sizeof more, " and %d more rank%s", missing - 1, missing > 2 ? "s" : "");
  return kolo_error(bs->eb, koloTimeout, "%s%s did not connect to rank %d within %d ms",
                    peer_name(bs, first, who, sizeof who), more, bs->rank, bs->timeout_ms);
}

typedef struct {
  int lfd;
  int npend;
  kolo_pending_hello pend[MESH_MAX_PENDING];
  struct pollfd pfd[1 + MESH_MAX_PENDING];
} mesh_listener;

/* No room for a newcomer: the table is full of connections that have
 * not been silent long enough to drop (bootstrap_wire.h). */
static int mesh_full(const mesh_listener *ml) {
  return ml->npend == MESH_MAX_PENDING && kolo_pending_evictable(ml->pend, ml->npend, kolo_now_ms()) < 0;
}

/* One round of waiting for higher ranks: returns links added, or -1 with
 * *res set. */
static int mesh_accept_round(kolo_bootstrap *bs, mesh_listener *ml, int64_t dl, koloResult_t *res) {
  int64_t next = dl;
  int full = mesh_full(ml);
  ml->pfd[0] = (struct pollfd){full ? -1 : ml->lfd, POLLIN, 0};
  for (int i = 0; i < ml->npend; i++) {
    ml->pfd[1 + i] = (struct pollfd){ml->pend[i].fd, POLLIN, 0};
    if (next == 0 || ml->pend[i].deadline < next) next = ml->pend[i].deadline;
  }
  int64_t room = full ? kolo_pending_next_evictable(ml->pend, ml->npend) : 0; /* a stranger can go then */
  if (room != 0 && (next == 0 || room < next)) next = room;
  if (kolo_poll(ml->pfd, 1 + (nfds_t)ml->npend, next) < 0) {
    *res = kolo_syserror(bs->eb, errno, "rank %d: poll failed waiting for mesh connections", bs->rank);
    return -1;
  }
  int added = 0, k = 0;
  int64_t now = kolo_now_ms();
  for (int i = 0; i < ml->npend; i++) {
    kolo_pending_hello *p = &ml->pend[i];
    if (ml->pfd[1 + i].revents) added += mesh_serve_pending(bs, p);
    if (p->fd >= 0 && now >= p->deadline) {
      KOLO_WARN("rank %d: dropped a mesh connection from %s that sent no hello within %d ms",
                bs->rank, p->from, KOLO_HELLO_TIMEOUT_MS);
      close(p->fd);
      p->fd = -1;
    }
    if (p->fd >= 0) ml->pend[k++] = *p;
  }
  ml->npend = k;
  return added;
}

/* Accepts newcomers while there is room, or a stranger to make room of. */
static koloResult_t mesh_accept_new(kolo_bootstrap *bs, mesh_listener *ml) {
  for (;;) {
    int slot = ml->npend < MESH_MAX_PENDING ? ml->npend : kolo_pending_evictable(ml->pend, ml->npend, kolo_now_ms());
    if (slot < 0) return koloSuccess;
    struct sockaddr_storage from;
    int fd;
    koloResult_t res = kolo_sock_accept(ml->lfd, &from, bs->eb, &fd);
    if (res != koloSuccess || fd < 0) return res;
    if (slot < ml->npend) {
      KOLO_INFO("rank %d: dropped a mesh connection from %s that sent nothing for %d ms, for a newcomer", bs->rank,
                ml->pend[slot].from, KOLO_HELLO_SILENT_MS);
      close(ml->pend[slot].fd);
    } else {
      ml->npend++;
    }
    kolo_pending_start(&ml->pend[slot], fd, &from);
  }
}

/* Accepts a link from every higher rank; drops strangers. */
static koloResult_t mesh_accept(kolo_bootstrap *bs, int lfd, int64_t dl) {
  mesh_listener *ml = calloc(1, sizeof *ml);
  if (ml == NULL) return kolo_error(bs->eb, koloSystemError, "rank %d: out of memory in bootstrap", bs->rank);
  ml->lfd = lfd;
  int missing = bs->nranks - 1 - bs->rank;
  koloResult_t res = koloSuccess;
  while (missing > 0 && res == koloSuccess) {
    int added = mesh_accept_round(bs, ml, dl, &res);
    if (added < 0) break;
    missing -= added;
    if (ml->pfd[0].revents) res = mesh_accept_new(bs, ml);
    if (res == koloSuccess && missing > 0 && dl != 0 && kolo_now_ms() >= dl)
      res = mesh_missing(bs, missing);
  }
  for (int i = 0; i < ml->npend; i++) close(ml->pend[i].fd);
  free(ml);
  return res;
}

static koloResult_t mesh_build(kolo_bootstrap *bs, int lfd) {
  int64_t dl = kolo_deadline(bs->timeout_ms);
  for (int peer = 0; peer < bs->rank; peer++) {
    koloResult_t res = mesh_connect(bs, peer, dl);
    if (res != koloSuccess) return res;
  }
  return mesh_accept(bs, lfd, dl);
}

koloResult_t kolo_bootstrap_init(const kolo_uid *uid, int rank, int nranks, int timeout_ms,
                                 kolo_errbuf *eb, kolo_bootstrap **out) {
  return kolo_bootstrap_init_multi(uid, 1, rank, nranks, timeout_ms, eb, out);
}

koloResult_t kolo_bootstrap_init_multi(const kolo_uid *uids, int nids, int rank, int nranks, int timeout_ms,
                                       kolo_errbuf *eb, kolo_bootstrap **out) {
  const kolo_uid *uid = uids;
  if (uid == NULL || out == NULL)
    return kolo_error(eb, koloInvalidArgument, "kolo_bootstrap_init: uid or out is NULL");
  if (nranks < 1 || nranks > KOLO_MAX_RANKS || rank < 0 || rank >= nranks)
    return kolo_error(eb, koloInvalidArgument, "kolo_bootstrap_init: rank %d of %d is not in 0..%d",
                      rank, nranks, nranks - 1);
  kolo_bootstrap *bs = NULL;
  if (nids < 1 || nids > nranks)
    return kolo_error(eb, koloInvalidArgument, "kolo_bootstrap_init: %d ids for %d ranks (1..%d)", nids, nranks,
                      nranks);
  koloResult_t res = bs_alloc(uid, rank, nranks, timeout_ms, eb, &bs);
  if (res != koloSuccess) return res;
  bs->nids = nids;
  bs->root_index = kolo_root_of(rank, nranks, nids);
  bs->meet = uids[bs->root_index];
  int lfd = -1;
  res = rendezvous(bs, &lfd);
  if (res != koloSuccess) goto free_bootstrap;
  res = mesh_build(bs, lfd);
  close(lfd);
  if (res != koloSuccess) goto free_bootstrap;
  KOLO_INFO("rank %d of %d: bootstrap mesh complete", rank, nranks);
  enlist(bs);
  *out = bs;
  return koloSuccess;

free_bootstrap:
  kolo_bootstrap_destroy(bs); /* closes the links made so far */
  return res;
}

int kolo_bootstrap_rank(const kolo_bootstrap *bs) { return bs->rank; }
int kolo_bootstrap_nranks(const kolo_bootstrap *bs) { return bs->nranks; }
const kolo_peer_info *kolo_bootstrap_peer(const kolo_bootstrap *bs, int rank) {
  return rank >= 0 && rank < bs->nranks ? &bs->peers[rank] : NULL;
}
kolo_errbuf *kolo_bootstrap_errbuf(kolo_bootstrap *bs) { return bs->eb; }
void kolo_bootstrap_set_errbuf(kolo_bootstrap *bs, kolo_errbuf *eb) { bs->eb = eb; }

/* ---- links ---------------------------------------------------------------------- */

static void link_down(mesh_link *l, koloResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void link_down(mesh_link *l, koloResult_t res, const char *fmt, ...) {
  static _Atomic unsigned down_clock;
  l->down_seq = atomic_fetch_add(&down_clock, 1) + 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->down_why, sizeof l->down_why, fmt, ap);
  va_end(ap);
  l->down = 1;
  l->down_res = res;
  if (l->fd >= 0) close(l->fd);
  l->fd = -1;
  free(l->rx);
  l->rx = NULL;
}

/* A goodbye or a refusal ends the link: 1 when m was one (and is freed). */
static int link_last_word(mesh_link *l, queued_msg *m) {
  if (m->tag == KOLO_TAG_GOODBYE) {
    kolo_wire_in r = kolo_wire_reader(m->data, m->len);
    uint32_t reason = kolo_get_u32(&r);
    int32_t victim = m->len >= 8 ? kolo_get_i32(&r) : -1; /* a goodbye of 4 bytes blames no one */
    l->victim = victim >= 0 && victim < KOLO_MAX_RANKS ? victim : -1;
    l->fate = reason == KOLO_BYE_EXITED ? KOLO_PEER_EXITED : KOLO_PEER_LEFT;
    if (l->victim >= 0) /* it gave up because of another rank: name the origin too */
      link_down(l, koloRemoteError, "%s after rank %d failed", kolo_peer_fate_text(l->fate), l->victim);
    else
      link_down(l, koloRemoteError, "%s", kolo_peer_fate_text(l->fate));
  } else if (m->tag == KOLO_TAG_REFUSED) {
    koloResult_t res = koloRemoteError;
    char text[KOLO_ERR_LEN - 64];
    if (kolo_decode_refusal(m->data, m->len, &res, text, sizeof text) != KOLO_WIRE_OK)
      snprintf(text, sizeof text, "a refusal of %zu bytes (garbage)", m->len);
    link_down(l, res, "refused this rank's mesh connection: %s", text);
  } else {
    return 0;
  }
  free(m);
  return 1;
}

/* err: 0 for end of stream, else the errno of a failed recv or send. */
static void link_lost(mesh_link *l, int err) {
  if (l->fate == KOLO_PEER_ALIVE) l->fate = KOLO_PEER_LOST;
  const char *mid = l->rx || l->hdr_got ? " in the middle of a message" : "";
  if (err == 0) link_down(l, koloRemoteError, "closed its connection%s", mid);
  else if (err == EPIPE || err == ECONNRESET)
    link_down(l, koloRemoteError, "closed its connection%s (%s)", mid, strerror(err));
  else link_down(l, koloSystemError, "failed%s: %s", mid, strerror(err));
}

/* The error a call on a link that is down returns. */
static koloResult_t link_error(kolo_bootstrap *bs, int peer) {
  char who[112];
  return kolo_error(bs->eb, bs->links[peer].down_res, "%s %s", peer_name(bs, peer, who, sizeof who),
                    bs->links[peer].down_why);
}

static void link_append(mesh_link *l, queued_msg *m) {
  m->next = NULL;
  if (l->last) l->last->next = m;
  else l->head = m;
  l->last = m;
}

/* The header is in: check it and make room for the payload. */
static void link_start_msg(mesh_link *l) {
  l->hdr = kolo_decode_header(l->hdr_raw);
  if (l->hdr.magic != KOLO_WIRE_MAGIC) {
    link_down(l, koloRemoteError, "sent garbage on the bootstrap mesh (magic 0x%08x)", l->hdr.magic);
  } else if (l->hdr.len > KOLO_MAX_MSG_BYTES) {
    link_down(l, koloRemoteError, "sent a message of %llu bytes, more than the limit of %llu",
              (unsigned long long)l->hdr.len, (unsigned long long)KOLO_MAX_MSG_BYTES);
  } else if ((l->rx = malloc(sizeof *l->rx + l->hdr.len)) == NULL) {
    link_down(l, koloSystemError, "sent a message of %llu bytes: out of memory",
              (unsigned long long)l->hdr.len);
  } else {
    l->rx->tag = l->hdr.tag;
    l->rx->len = l->hdr.len;
    l->rx_got = 0;
  }
}

/* Reads whatever has arrived on the link, without waiting, into whole
 * messages on its queue; marks it down at end of stream or on bad data. */
static void link_pump(mesh_link *l) {
  while (!l->down) {
    if (l->rx && l->rx_got == l->rx->len) { /* a whole message */
      queued_msg *m = l->rx;
      l->rx = NULL;
      l->hdr_got = 0;
      if (link_last_word(l, m)) return;
      link_append(l, m);
      continue;
    }
    char *dst = l->rx ? l->rx->data + l->rx_got : (char *)l->hdr_raw + l->hdr_got;
    size_t want = l->rx ? l->rx->len - l->rx_got : sizeof l->hdr_raw - l->hdr_got;
    int err = 0;
    ssize_t n = kolo_sock_read_some(l->fd, dst, want, &err);
    if (n == 0) return;
    if (n < 0) {
      link_lost(l, err);
      return;
    }
    if (l->rx) l->rx_got += (size_t)n;
    else if ((l->hdr_got += (size_t)n) == sizeof l->hdr_raw) link_start_msg(l);
  }
}

/* Pumps the links whose poll entry fired; a hang-up or error that the
 * pump did not see as such still takes the link down. */
static void pump_ready(kolo_bootstrap *bs, nfds_t n) {
  for (nfds_t i = 0; i < n; i++) {
    short ev = bs->pfd[i].revents;
    mesh_link *l = &bs->links[bs->pfd_peer[i]];
    if (ev == 0 || l->down) continue;
    link_pump(l);
    if (!l->down && (ev & (POLLHUP | POLLERR | POLLNVAL))) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      link_lost(l, err);
    }
  }
}

/* The links that are up, for poll(); out_peer's also waits for POLLOUT. */
static nfds_t fill_pollfds(kolo_bootstrap *bs, int out_peer) {
  nfds_t n = 0;
  for (int r = 0; r < bs->nranks; r++) {
    if (bs->links[r].fd < 0) continue;
    bs->pfd[n] = (struct pollfd){bs->links[r].fd, (short)(POLLIN | (r == out_peer ? POLLOUT : 0)), 0};
    bs->pfd_peer[n++] = r;
  }
  return n;
}

/* Waits until a link has news (or out_peer can take more), pumping what
 * arrived.  koloTimeout at the deadline, without a sentence. */
static koloResult_t mesh_wait(kolo_bootstrap *bs, int out_peer, int64_t dl) {
  nfds_t n = fill_pollfds(bs, out_peer);
  int ready = kolo_poll(bs->pfd, n, dl);
  if (ready < 0) return kolo_syserror(bs->eb, errno, "rank %d: poll on the bootstrap mesh failed", bs->rank);
  if (ready == 0) return koloTimeout;
  pump_ready(bs, n);
  return koloSuccess;
}

/* ---- messages -------------------------------------------------------------------- */

static koloResult_t check_call(kolo_bootstrap *bs, const char *what, int peer, const void *data,
                               size_t len) {
  if (peer < 0 || peer >= bs->nranks)
    return kolo_error(bs->eb, koloInvalidArgument, "bootstrap %s rank %d: not a rank in 0..%d", what,
                      peer, bs->nranks - 1);
  if (data == NULL && len > 0)
    return kolo_error(bs->eb, koloInvalidArgument, "bootstrap %s rank %d: data is NULL", what, peer);
  if (len > KOLO_MAX_MSG_BYTES) {
    char who[112];
    return kolo_error(bs->eb, koloInvalidArgument,
                      "bootstrap %s %s: a message of %zu bytes is larger than the limit of %llu", what,
                      peer_name(bs, peer, who, sizeof who), len, (unsigned long long)KOLO_MAX_MSG_BYTES);
  }
  return koloSuccess;
}

static koloResult_t send_self(kolo_bootstrap *bs, uint32_t tag, const void *data, size_t len) {
  queued_msg *m = malloc(sizeof *m + len);
  if (m == NULL)
    return kolo_error(bs->eb, koloSystemError, "rank %d: out of memory queueing a %zu-byte message",
                      bs->rank, len);
  m->tag = tag;
  m->len = len;
  if (len) memcpy(m->data, data, len);
  link_append(&bs->links[bs->rank], m);
  return koloSuccess;
}

/* sendmsg of header + payload from byte `off` on; like send(). */
static ssize_t send_from(int fd, const uint8_t *hdr, const void *data, size_t len, size_t off) {
  struct iovec iov[2];
  int n = 0;
  if (off < KOLO_WIRE_HDR_BYTES) iov[n++] = (struct iovec){(char *)hdr + off, KOLO_WIRE_HDR_BYTES - off};
  size_t doff = off > KOLO_WIRE_HDR_BYTES ? off - KOLO_WIRE_HDR_BYTES : 0;
  if (len > doff) iov[n++] = (struct iovec){(char *)data + doff, len - doff};
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
  return sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The peer does not read: a message cut in two spoils the stream. */
static koloResult_t send_timed_out(kolo_bootstrap *bs, int peer, size_t len, size_t sent) {
  if (sent > 0) {
    link_down(&bs->links[peer], koloTimeout, "did not read a %zu-byte message within %d ms", len,
              bs->timeout_ms);
    return link_error(bs, peer);
  }
  char who[112];
  return kolo_error(bs->eb, koloTimeout, "%s did not read a %zu-byte message within %d ms",
                    peer_name(bs, peer, who, sizeof who), len, bs->timeout_ms);
}

koloResult_t kolo_bootstrap_send(kolo_bootstrap *bs, int peer, uint32_t tag, const void *data,
                                 size_t len) {
  koloResult_t res = check_call(bs, "send to", peer, data, len);
  if (res != koloSuccess) return res;
  if (peer == bs->rank) return send_self(bs, tag, data, len);
  mesh_link *l = &bs->links[peer];
  uint8_t hdr[KOLO_WIRE_HDR_BYTES];
  kolo_encode_header(hdr, tag, len);
  int64_t dl = kolo_deadline(bs->timeout_ms);
  for (size_t sent = 0; sent < sizeof hdr + len;) {
    if (l->down) return link_error(bs, peer);
    ssize_t n = send_from(l->fd, hdr, data, len, sent);
    if (n > 0) {
      sent += (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KOLO_TRACE("rank %d: send to rank %d waits after %zu of %zu bytes", bs->rank, peer, sent,
                 sizeof hdr + len);
      res = mesh_wait(bs, peer, dl); /* reads meanwhile: no deadlock */
      if (res == koloTimeout) return send_timed_out(bs, peer, len, sent);
      if (res != koloSuccess) return res;
    } else if (n < 0 && errno != EINTR) {
      int err = errno;
      link_pump(l); /* keep what the peer sent before it went */
      if (!l->down) link_lost(l, err);
    }
  }
  return koloSuccess;
}

/* Unlinks and returns the first queued message with `tag`, or NULL. */
static queued_msg *queue_take(mesh_link *l, uint32_t tag) {
  queued_msg *prev = NULL;
  for (queued_msg *m = l->head; m; prev = m, m = m->next) {
    if (m->tag != tag) continue;
    if (prev) prev->next = m->next;
    else l->head = m->next;
    if (l->last == m) l->last = prev;
    return m;
  }
  return NULL;
}

static koloResult_t deliver(kolo_bootstrap *bs, int peer, queued_msg *m, void *data, size_t len) {
  koloResult_t res = koloSuccess;
  if (m->len != len) {
    char who[112];
    res = kolo_error(bs->eb, koloRemoteError, "%s sent %zu bytes with tag 0x%x, expected %zu",
                     peer_name(bs, peer, who, sizeof who), m->len, m->tag, len);
  } else if (len) {
    memcpy(data, m->data, len);
  }
  free(m);
  return res;
}

koloResult_t kolo_bootstrap_recv(kolo_bootstrap *bs, int peer, uint32_t tag, void *data, size_t len) {
  koloResult_t res = check_call(bs, "recv from", peer, data, len);
  if (res != koloSuccess) return res;
  mesh_link *l = &bs->links[peer];
  int64_t dl = kolo_deadline(bs->timeout_ms);
  for (;;) {
    queued_msg *m = queue_take(l, tag);
    if (m) return deliver(bs, peer, m, data, len);
    if (peer == bs->rank)
      return kolo_error(bs->eb, koloInvalidUsage,
                        "rank %d waits for a message to itself with tag 0x%x that it never sent", peer, tag);
    if (l->down) return link_error(bs, peer);
    res = mesh_wait(bs, -1, dl);
    if (res == koloTimeout) {
      char who[112];
      return kolo_error(bs->eb, koloTimeout, "no message with tag 0x%x from %s within %d ms", tag,
                        peer_name(bs, peer, who, sizeof who), bs->timeout_ms);
    }
    if (res != koloSuccess) return res;
  }
}

koloResult_t kolo_bootstrap_allgather(kolo_bootstrap *bs, uint32_t tag, void *all, size_t len) {
  if (all == NULL && len > 0)
    return kolo_error(bs->eb, koloInvalidArgument, "bootstrap allgather on rank %d: buffer is NULL", bs->rank);
  char *base = all;
  koloResult_t res = koloSuccess;
  for (int i = 1; i < bs->nranks && res == koloSuccess; i++) {
    int peer = (bs->rank + i) % bs->nranks;
    res = kolo_bootstrap_send(bs, peer, tag, base + (size_t)bs->rank * len, len);
  }
  for (int i = 1; i < bs->nranks && res == koloSuccess; i++) {
    int peer = (bs->rank + bs->nranks - i) % bs->nranks;
    res = kolo_bootstrap_recv(bs, peer, tag, base + (size_t)peer * len, len);
  }
  return res;
}

koloResult_t kolo_bootstrap_barrier(kolo_bootstrap *bs, uint32_t tag) {
  char *all = calloc((size_t)bs->nranks, 1);
  if (all == NULL) return kolo_error(bs->eb, koloSystemError, "rank %d: out of memory in a barrier", bs->rank);
  koloResult_t res = kolo_bootstrap_allgather(bs, tag, all, 1);
  free(all);
  return res;
}

int kolo_bootstrap_dead_peer(kolo_bootstrap *bs) {
  nfds_t n = fill_pollfds(bs, -1);
  if (n > 0 && poll(bs->pfd, n, 0) > 0) pump_ready(bs, n);
  for (int r = 0; r < bs->nranks; r++)
    if (bs->links[r].down) return r;
  return -1;
}

int kolo_bootstrap_peer_dead(kolo_bootstrap *bs, int rank) {
  if (rank < 0 || rank >= bs->nranks || rank == bs->rank) return 0;
  kolo_bootstrap_dead_peer(bs);
  mesh_link *l = &bs->links[rank];
  return !l->down ? KOLO_PEER_ALIVE : l->fate != KOLO_PEER_ALIVE ? l->fate : KOLO_PEER_LOST;
}

int kolo_bootstrap_peer_blamed(kolo_bootstrap *bs, int rank) {
  if (kolo_bootstrap_peer_dead(bs, rank) == KOLO_PEER_ALIVE) return -1;
  int victim = bs->links[rank].victim;
  return victim != bs->rank && victim != rank ? victim : -1;
}

/* The first peer lost without a word (a dead process: the first to fail). */
static int first_lost(const kolo_bootstrap *bs) {
  int best = -1;
  for (int r = 0; r < bs->nranks; r++) {
    const mesh_link *l = &bs->links[r];
    if (l->down && l->fate == KOLO_PEER_LOST && (best < 0 || l->down_seq < bs->links[best].down_seq)) best = r;
  }
  return best;
}

/* The first peer that left blaming another rank (not this one). */
static int first_blamer(const kolo_bootstrap *bs) {
  int best = -1;
  for (int r = 0; r < bs->nranks; r++) {
    const mesh_link *l = &bs->links[r];
    if (l->down && l->victim >= 0 && l->victim != bs->rank && (best < 0 || l->down_seq < bs->links[best].down_seq))
      best = r;
  }
  return best;
}

int kolo_bootstrap_culprit(kolo_bootstrap *bs, int *via) {
  if (via) *via = -1;
  if (bs->pid == getpid()) kolo_bootstrap_dead_peer(bs); /* what arrived so far */
  int lost = first_lost(bs);
  if (lost >= 0) return lost;
  int blamer = first_blamer(bs);
  if (blamer < 0) return -1;
  if (via) *via = blamer;
  return bs->links[blamer].victim;
}
