/* bootstrap.c - a rank's side of the bootstrap: rendezvous at the root,
 * the mesh, tagged messages, allgather, barrier, liveness (bootstrap.h). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "transport/bootstrap_wire.h"

typedef struct queued_msg {
  struct queued_msg *next;
  uint32_t tag;
  size_t len;
  char data[];
} queued_msg;

struct kolo_bootstrap {
  int rank, nranks;
  int timeout_ms;
  kolo_uid uid;
  kolo_errbuf *eb;
  kolo_peer_info *peers;
  int *fd;             /* mesh socket per peer; -1 for self */
  unsigned char *dead; /* peer's connection closed or failed */
  queued_msg **queue;  /* messages received but not yet asked for, per peer */
};

/* ---- identity of this host and process --------------------------------- */

static pthread_once_t token_once = PTHREAD_ONCE_INIT;
static uint64_t proc_token;

static void draw_token(void) {
  if (kolo_random(&proc_token, sizeof proc_token, NULL) != koloSuccess)
    proc_token = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull; /* still unique per host */
}

static uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static uint64_t host_hash(void) {
  char host[256] = "", boot[64] = "";
  gethostname(host, sizeof host - 1);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f) {
    if (fgets(boot, sizeof boot, f) == NULL) boot[0] = '\0';
    fclose(f);
  }
  return fnv(fnv(1469598103934665603ull, host), boot);
}

/* ---- teardown ------------------------------------------------------------ */

static void free_queue(queued_msg *m) {
  while (m) {
    queued_msg *next = m->next;
    free(m);
    m = next;
  }
}

void kolo_bootstrap_destroy(kolo_bootstrap *bs) {
  if (bs == NULL) return;
  for (int r = 0; bs->fd && r < bs->nranks; r++)
    if (bs->fd[r] >= 0) close(bs->fd[r]);
  for (int r = 0; bs->queue && r < bs->nranks; r++) free_queue(bs->queue[r]);
  free(bs->queue);
  free(bs->dead);
  free(bs->fd);
  free(bs->peers);
  free(bs);
}

/* ---- rendezvous ---------------------------------------------------------- */

static koloResult_t read_root_reply(kolo_bootstrap *bs, int fd, int64_t dl, const char *root) {
  root_reply r;
  koloResult_t res = kolo_sock_recv(fd, &r, sizeof r, dl, bs->eb, root);
  if (res != koloSuccess) return res;
  if (r.magic != KOLO_WIRE_MAGIC) return kolo_error(bs->eb, koloRemoteError, "%s sent garbage", root);
  if (r.status != 0) {
    char msg[KOLO_ERR_LEN];
    size_t n = r.len < sizeof msg - 1 ? r.len : sizeof msg - 1;
    res = kolo_sock_recv(fd, msg, n, dl, bs->eb, root);
    if (res != koloSuccess) return res;
    msg[n] = '\0';
    return kolo_error(bs->eb, koloRemoteError, "rank %d: %s", bs->rank, msg);
  }
  if (r.len != (uint32_t)bs->nranks)
    return kolo_error(bs->eb, koloRemoteError, "%s sent a table of %u ranks, expected %d", root, r.len, bs->nranks);
  return kolo_sock_recv(fd, bs->peers, (size_t)bs->nranks * sizeof *bs->peers, dl, bs->eb, root);
}

/* Listens for the mesh on the address this host used to reach the root. */
static koloResult_t rendezvous(kolo_bootstrap *bs, int64_t dl, int *lfd) {
  char root[96], name[80];
  kolo_addr_str(&bs->uid.root, name, sizeof name);
  snprintf(root, sizeof root, "root %s", name);
  int fd;
  koloResult_t res = kolo_sock_connect(&bs->uid.root, dl, &fd, bs->eb, root);
  if (res != koloSuccess) return res;
  rank_hello h;
  memset(&h, 0, sizeof h);
  h.magic = KOLO_WIRE_MAGIC;
  memcpy(h.secret, bs->uid.secret, sizeof h.secret);
  h.rank = bs->rank;
  h.nranks = bs->nranks;
  socklen_t len = sizeof h.info.addr;
  if (kolo_param_str("KOLO_SOCKET_IFNAME") != NULL) res = kolo_bootstrap_pick_addr(&h.info.addr, bs->eb);
  else if (getsockname(fd, (struct sockaddr *)&h.info.addr, &len) != 0)
    res = kolo_syserror(bs->eb, errno, "getsockname failed");
  if (res == koloSuccess) {
    ((struct sockaddr_in *)&h.info.addr)->sin_port = 0;
    res = kolo_sock_listen(&h.info.addr, lfd, bs->eb);
  }
  if (res == koloSuccess) {
    pthread_once(&token_once, draw_token);
    h.info.host_hash = host_hash();
    h.info.proc_token = proc_token;
    h.info.pid = (int32_t)getpid();
    h.info.rank = bs->rank;
    res = kolo_sock_send(fd, &h, sizeof h, dl, bs->eb, root);
    if (res == koloSuccess) res = read_root_reply(bs, fd, dl, root);
    if (res != koloSuccess) close(*lfd);
  }
  close(fd);
  return res;
}

/* ---- mesh ---------------------------------------------------------------- */

static koloResult_t mesh_connect(kolo_bootstrap *bs, int peer, int64_t dl) {
  char who[32];
  snprintf(who, sizeof who, "rank %d", peer);
  int fd;
  koloResult_t res = kolo_sock_connect(&bs->peers[peer].addr, dl, &fd, bs->eb, who);
  if (res != koloSuccess) return res;
  mesh_hello h;
  memset(&h, 0, sizeof h);
  h.magic = KOLO_WIRE_MAGIC;
  memcpy(h.secret, bs->uid.secret, sizeof h.secret);
  h.job = bs->uid.job;
  h.rank = bs->rank;
  res = kolo_sock_send(fd, &h, sizeof h, dl, bs->eb, who);
  if (res != koloSuccess) {
    close(fd);
    return res;
  }
  bs->fd[peer] = fd;
  return koloSuccess;
}

/* Accepts until every higher rank is connected; drops strangers. */
static koloResult_t mesh_accept(kolo_bootstrap *bs, int lfd, int64_t dl) {
  int missing = bs->nranks - 1 - bs->rank;
  while (missing > 0) {
    int fd;
    koloResult_t res = kolo_sock_accept(lfd, dl, &fd, bs->eb);
    if (res == koloTimeout) {
      int first = -1;
      for (int r = bs->nranks - 1; r > bs->rank; r--)
        if (bs->fd[r] < 0) first = r;
      return kolo_error(bs->eb, koloTimeout, "rank %d: rank %d did not connect within %d ms", bs->rank, first,
                        bs->timeout_ms);
    }
    if (res != koloSuccess) return res;
    mesh_hello h;
    kolo_errbuf quiet;
    int64_t hdl = kolo_deadline(2000);
    if (dl != 0 && hdl > dl) hdl = dl;
    res = kolo_sock_recv(fd, &h, sizeof h, hdl, &quiet, "a mesh connection");
    if (res != koloSuccess || h.magic != KOLO_WIRE_MAGIC || !kolo_secret_equal(h.secret, bs->uid.secret) ||
        h.job != bs->uid.job || h.rank <= bs->rank || h.rank >= bs->nranks || bs->fd[h.rank] >= 0) {
      KOLO_WARN("rank %d: dropped a mesh connection without a valid hello (wrong secret, job or rank)", bs->rank);
      close(fd);
      continue;
    }
    bs->fd[h.rank] = fd;
    missing--;
  }
  return koloSuccess;
}

static koloResult_t alloc_bootstrap(const kolo_uid *uid, int rank, int nranks, int timeout_ms,
                                    kolo_errbuf *eb, kolo_bootstrap **out) {
  kolo_bootstrap *bs = calloc(1, sizeof *bs);
  if (bs == NULL) return kolo_error(eb, koloSystemError, "out of memory in bootstrap");
  bs->rank = rank;
  bs->nranks = nranks;
  bs->timeout_ms = timeout_ms;
  bs->uid = *uid;
  bs->eb = eb;
  bs->peers = calloc((size_t)nranks, sizeof *bs->peers);
  bs->fd = malloc((size_t)nranks * sizeof *bs->fd);
  bs->dead = calloc((size_t)nranks, 1);
  bs->queue = calloc((size_t)nranks, sizeof *bs->queue);
  if (!bs->peers || !bs->fd || !bs->dead || !bs->queue) {
    kolo_bootstrap_destroy(bs);
    return kolo_error(eb, koloSystemError, "out of memory in bootstrap");
  }
  for (int r = 0; r < nranks; r++) bs->fd[r] = -1;
  *out = bs;
  return koloSuccess;
}

koloResult_t kolo_bootstrap_init(const kolo_uid *uid, int rank, int nranks, int timeout_ms,
                                 kolo_errbuf *eb, kolo_bootstrap **out) {
  kolo_bootstrap *bs = NULL;
  koloResult_t res = alloc_bootstrap(uid, rank, nranks, timeout_ms, eb, &bs);
  if (res != koloSuccess) return res;
  int64_t dl = kolo_deadline(timeout_ms);
  int lfd = -1;
  res = rendezvous(bs, dl, &lfd);
  for (int peer = 0; peer < rank && res == koloSuccess; peer++) res = mesh_connect(bs, peer, dl);
  if (res == koloSuccess) res = mesh_accept(bs, lfd, dl);
  if (lfd >= 0) close(lfd);
  if (res != koloSuccess) {
    kolo_bootstrap_destroy(bs);
    return res;
  }
  *out = bs;
  return koloSuccess;
}

int kolo_bootstrap_rank(const kolo_bootstrap *bs) { return bs->rank; }
int kolo_bootstrap_nranks(const kolo_bootstrap *bs) { return bs->nranks; }
const kolo_peer_info *kolo_bootstrap_peer(const kolo_bootstrap *bs, int rank) { return &bs->peers[rank]; }
kolo_errbuf *kolo_bootstrap_errbuf(kolo_bootstrap *bs) { return bs->eb; }
void kolo_bootstrap_set_errbuf(kolo_bootstrap *bs, kolo_errbuf *eb) { bs->eb = eb; }

/* ---- messages ------------------------------------------------------------ */

static koloResult_t enqueue(kolo_bootstrap *bs, int peer, uint32_t tag, const void *data, size_t len) {
  queued_msg *m = malloc(sizeof *m + len);
  if (m == NULL) return kolo_error(bs->eb, koloSystemError, "out of memory queueing a message from rank %d", peer);
  m->next = NULL;
  m->tag = tag;
  m->len = len;
  if (len) memcpy(m->data, data, len);
  queued_msg **p = &bs->queue[peer];
  while (*p) p = &(*p)->next;
  *p = m;
  return koloSuccess;
}

koloResult_t kolo_bootstrap_send(kolo_bootstrap *bs, int peer, uint32_t tag, const void *data, size_t len) {
  if (peer == bs->rank) return enqueue(bs, peer, tag, data, len);
  if (len > KOLO_MAX_MSG_BYTES)
    return kolo_error(bs->eb, koloInternalError, "bootstrap message of %zu bytes to rank %d is too large", len, peer);
  char who[32];
  snprintf(who, sizeof who, "rank %d", peer);
  if (bs->dead[peer] || bs->fd[peer] < 0) return kolo_error(bs->eb, koloRemoteError, "rank %d is gone", peer);
  msg_header h = {KOLO_MSG_MAGIC, tag, len};
  int64_t dl = kolo_deadline(bs->timeout_ms);
  koloResult_t res = kolo_sock_send(bs->fd[peer], &h, sizeof h, dl, bs->eb, who);
  if (res == koloSuccess && len) res = kolo_sock_send(bs->fd[peer], data, len, dl, bs->eb, who);
  if (res == koloRemoteError) bs->dead[peer] = 1;
  return res;
}

/* Reads one whole message from peer into its queue. */
static koloResult_t read_one(kolo_bootstrap *bs, int peer, int64_t dl) {
  char who[32];
  snprintf(who, sizeof who, "rank %d", peer);
  msg_header h;
  koloResult_t res = kolo_sock_recv(bs->fd[peer], &h, sizeof h, dl, bs->eb, who);
  if (res == koloSuccess && h.magic != KOLO_MSG_MAGIC)
    res = kolo_error(bs->eb, koloRemoteError, "rank %d sent garbage on the bootstrap mesh", peer);
  if (res == koloSuccess && h.len > KOLO_MAX_MSG_BYTES)
    res = kolo_error(bs->eb, koloRemoteError, "rank %d sent a message of %llu bytes, more than %u", peer,
                     (unsigned long long)h.len, KOLO_MAX_MSG_BYTES);
  queued_msg *m = res == koloSuccess ? malloc(sizeof *m + h.len) : NULL;
  if (res == koloSuccess && m == NULL) res = kolo_error(bs->eb, koloSystemError, "out of memory reading from rank %d", peer);
  if (res == koloSuccess) res = kolo_sock_recv(bs->fd[peer], m->data, h.len, dl, bs->eb, who);
  if (res != koloSuccess) {
    free(m);
    if (res == koloRemoteError) bs->dead[peer] = 1;
    return res;
  }
  m->next = NULL;
  m->tag = h.tag;
  m->len = h.len;
  queued_msg **p = &bs->queue[peer];
  while (*p) p = &(*p)->next;
  *p = m;
  return koloSuccess;
}

koloResult_t kolo_bootstrap_recv(kolo_bootstrap *bs, int peer, uint32_t tag, void *data, size_t len) {
  int64_t dl = kolo_deadline(bs->timeout_ms);
  for (;;) {
    for (queued_msg **p = &bs->queue[peer]; *p; p = &(*p)->next) {
      queued_msg *m = *p;
      if (m->tag != tag) continue;
      *p = m->next;
      koloResult_t res = koloSuccess;
      if (m->len != len)
        res = kolo_error(bs->eb, koloRemoteError, "rank %d sent %zu bytes for tag 0x%x, expected %zu", peer, m->len,
                         tag, len);
      else if (len)
        memcpy(data, m->data, len);
      free(m);
      return res;
    }
    if (peer == bs->rank)
      return kolo_error(bs->eb, koloInternalError, "rank %d waits for a message to itself never sent (tag 0x%x)",
                        peer, tag);
    if (bs->dead[peer]) return kolo_error(bs->eb, koloRemoteError, "rank %d closed its connection", peer);
    koloResult_t res = read_one(bs, peer, dl);
    if (res == koloTimeout)
      return kolo_error(bs->eb, koloTimeout, "rank %d: no message from rank %d within %d ms", bs->rank, peer,
                        bs->timeout_ms);
    if (res != koloSuccess) return res;
  }
}

koloResult_t kolo_bootstrap_allgather(kolo_bootstrap *bs, uint32_t tag, void *all, size_t len) {
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
  if (all == NULL) return kolo_error(bs->eb, koloSystemError, "out of memory in a barrier");
  koloResult_t res = kolo_bootstrap_allgather(bs, tag, all, 1);
  free(all);
  return res;
}

int kolo_bootstrap_dead_peer(kolo_bootstrap *bs) {
  for (int r = 0; r < bs->nranks; r++) {
    if (bs->dead[r]) return r;
    if (r == bs->rank || bs->fd[r] < 0) continue;
    struct pollfd p = {bs->fd[r], POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) continue;
    char c;
    ssize_t n = recv(bs->fd[r], &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      bs->dead[r] = 1;
      return r;
    }
    /* Data: a message for later.  Take it off the socket so the next poll
     * can see a close behind it. */
    kolo_errbuf quiet;
    kolo_errbuf *saved = bs->eb;
    bs->eb = &quiet;
    if (read_one(bs, r, kolo_deadline(bs->timeout_ms)) == koloRemoteError) bs->dead[r] = 1;
    bs->eb = saved;
    if (bs->dead[r]) return r;
  }
  return -1;
}
