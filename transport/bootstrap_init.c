/* bootstrap_init.c - a rank joins the job (bootstrap.h, bootstrap_int.h):
 * it opens its listener, presents itself to its root with its peer info,
 * learns from the root only its ring predecessor's, and gathers the whole
 * peer table among the ranks (bootstrap_gather.c).  Also who this rank is:
 * its host and process identity. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/bootstrap_int.h"

/* The root gives up timeout_ms after the first rank joined; a rank waits
 * that long after its own hello plus this, so that it hears the root's
 * verdict (which ranks are missing) rather than timing out first. */
#define ROOT_REPLY_GRACE_MS 1000
/* A root that closes a rank's connection before answering it took the
 * rank for a silent stranger (its host is loaded): the rank connects
 * again, this many times. */
#define ROOT_MAX_ATTEMPTS 4

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

/* ---- rendezvous at the root ------------------------------------------------- */

/* Listens where this host reached the root (or on KOLO_SOCKET_IFNAME's
 * interface), and makes this rank's entry of the peer table. */
static koloResult_t open_listener(kolo_bootstrap *bs, int root_fd) {
  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  socklen_t len = sizeof addr;
  if (kolo_param_str("KOLO_SOCKET_IFNAME") != NULL) {
    koloResult_t res = kolo_bootstrap_pick_addr(&addr, bs->eb);
    if (res != koloSuccess) return res;
  } else if (getsockname(root_fd, (struct sockaddr *)&addr, &len) != 0) {
    return kolo_syserror(bs->eb, errno, "rank %d: getsockname on the root connection failed", bs->rank);
  }
  kolo_addr_set_port(&addr, 0);
  koloResult_t res = kolo_bs_listen(bs, &addr);
  if (res != koloSuccess) return res;
  pthread_once(&token_once, draw_token);
  bs->peers[bs->rank] = (kolo_peer_info){addr, host_hash(), proc_token, (int32_t)getpid(), bs->rank};
  return koloSuccess;
}

static koloResult_t send_rank_hello(kolo_bootstrap *bs, int fd, int64_t dl, const char *root) {
  kolo_rank_hello h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, bs->meet.secret, sizeof h.secret);
  h.rank = bs->rank;
  h.nranks = bs->nranks;
  h.nids = bs->nids;
  h.root_index = bs->root_index;
  h.role = KOLO_HELLO_RANK;
  if (bs->nids > 1) h.first = bs->uid;
  h.info = bs->peers[bs->rank];
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES];
  kolo_encode_header(m, KOLO_TAG_RANK_HELLO, KOLO_RANK_HELLO_BYTES);
  kolo_encode_rank_hello(&h, m + KOLO_WIRE_HDR_BYTES);
  return kolo_sock_send_all(fd, m, sizeof m, dl, root, bs->eb);
}

/* 1 when the root closed fd without a byte of answer (it dropped the
 * connection before reading its hello), 0 otherwise: data came, or the
 * deadline passed (the read that follows says so). */
static int dropped_unanswered(int fd, int64_t dl) {
  struct pollfd p = {fd, POLLIN, 0};
  if (kolo_poll(&p, 1, dl) <= 0) return 0;
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Connects again after the root dropped this rank's connection unanswered:
 * one attempt, so that a root that has gone (nothing listens any more) is
 * an error at once. */
static koloResult_t reconnect(kolo_bootstrap *bs, int *fd, int64_t dl, const char *root) {
  close(*fd);
  *fd = -1;
  int s, err = kolo_sock_connect_start(&bs->meet.root, &s);
  if (err == 0) {
    struct pollfd p = {s, POLLOUT, 0};
    int n = kolo_poll(&p, 1, dl);
    err = n < 0 ? errno : n == 0 ? ETIMEDOUT : kolo_sock_connect_done(s);
    if (err != 0) close(s);
  }
  if (err != 0)
    return kolo_error(bs->eb, koloRemoteError, "%s closed this rank's connection before answering, and connecting "
                      "again failed: %s", root, strerror(err));
  *fd = s;
  return koloSuccess;
}

/* Presents the hello and reads the answer, connecting again when the root
 * dropped the connection unanswered. */
static koloResult_t hello_and_answer(kolo_bootstrap *bs, int *fd, const char *root) {
  /* Several roots: root 0 may start its clock when this root is done. */
  int64_t wait = bs->nids > 1 ? 2 * (int64_t)bs->timeout_ms + 2 * ROOT_REPLY_GRACE_MS
                              : bs->timeout_ms + ROOT_REPLY_GRACE_MS;
  int64_t dl = bs->timeout_ms > 0 ? kolo_now_ms() + wait : 0;
  int pred = (bs->rank + bs->nranks - 1) % bs->nranks;
  for (int attempt = 1;; attempt++) {
    koloResult_t res = send_rank_hello(bs, *fd, dl, root);
    if (res != koloSuccess) return res;
    if (attempt == ROOT_MAX_ATTEMPTS || !dropped_unanswered(*fd, dl))
      return kolo_root_read_reply(*fd, pred, &bs->peers[pred], dl, root, bs->eb);
    KOLO_INFO("%s: %s closed its connection before answering (attempt %d of %d): connecting again", bs->name, root,
              attempt, ROOT_MAX_ATTEMPTS);
    res = reconnect(bs, fd, dl, root);
    if (res != koloSuccess) return res;
  }
}

/* Connects to the root, opens this rank's listener, presents the hello
 * and learns its ring predecessor's peer info. */
static koloResult_t rendezvous(kolo_bootstrap *bs) {
  char root[96], addr[80];
  kolo_addr_str(&bs->meet.root, addr, sizeof addr);
  snprintf(root, sizeof root, "root %s", addr);
  int fd;
  koloResult_t res = kolo_sock_connect(&bs->meet.root, kolo_deadline(bs->timeout_ms), bs->timeout_ms, root, bs->eb,
                                       &fd);
  if (res != koloSuccess) return res;
  res = open_listener(bs, fd);
  if (res == koloSuccess) res = hello_and_answer(bs, &fd, root);
  if (fd >= 0) close(fd);
  return res;
}

/* A rank whose gather failed because a peer failed keeps its listener a
 * moment, answering the ranks that come to it later with its goodbye,
 * which names that peer: they wait on this rank in the gather (for its
 * entries, or to send it theirs) and, finding nothing listening, would
 * blame this rank.  As long as a waiter's grace before it connects, and a
 * little more. */
#define LINGER_SLACK_MS 500

static void linger_for_late_peers(kolo_bootstrap *bs) {
  if (kolo_bootstrap_culprit(bs, NULL) < 0) return; /* no peer to name: nothing to tell */
  kolo_bootstrap_goodbye(bs, KOLO_BYE_LEFT);
  int64_t end = kolo_now_ms() + kolo_bs_reach_grace_ms(bs) + LINGER_SLACK_MS;
  while (kolo_now_ms() < end && kolo_bs_wait(bs, -1, end) != koloSystemError) kolo_bs_goodbye_new_links(bs);
}

koloResult_t kolo_bootstrap_init(const kolo_uid *uid, int rank, int nranks, int timeout_ms,
                                 kolo_errbuf *eb, kolo_bootstrap **out) {
  return kolo_bootstrap_init_multi(uid, 1, rank, nranks, timeout_ms, eb, out);
}

koloResult_t kolo_bootstrap_init_multi(const kolo_uid *uids, int nids, int rank, int nranks, int timeout_ms,
                                       kolo_errbuf *eb, kolo_bootstrap **out) {
  if (uids == NULL || out == NULL)
    return kolo_error(eb, koloInvalidArgument, "kolo_bootstrap_init: uid or out is NULL");
  if (nranks < 1 || nranks > KOLO_MAX_RANKS || rank < 0 || rank >= nranks)
    return kolo_error(eb, koloInvalidArgument, "kolo_bootstrap_init: rank %d of %d is not in 0..%d",
                      rank, nranks, nranks - 1);
  if (nids < 1 || nids > nranks)
    return kolo_error(eb, koloInvalidArgument, "kolo_bootstrap_init: %d ids for %d ranks (1..%d)", nids, nranks,
                      nranks);
  kolo_bootstrap *bs = NULL;
  koloResult_t res = kolo_bs_alloc(uids, rank, nranks, timeout_ms, eb, &bs);
  if (res != koloSuccess) return res;
  bs->nids = nids;
  bs->root_index = kolo_root_of(rank, nranks, nids);
  bs->meet = uids[bs->root_index];
  res = rendezvous(bs);
  if (res == koloSuccess) {
    res = kolo_bs_gather_peers(bs);
    if (res == koloSuccess) res = kolo_bs_link_process_peers(bs);
    if (res != koloSuccess) linger_for_late_peers(bs);
  }
  if (res != koloSuccess) {
    kolo_bootstrap_destroy(bs); /* says goodbye to the peers it reached, closes everything */
    return res;
  }
  KOLO_INFO("rank %d of %d: bootstrap complete, %d connection(s) to other ranks", rank, nranks,
            kolo_bootstrap_links(bs));
  kolo_bs_enlist(bs);
  *out = bs;
  return koloSuccess;
}
