/* bootstrap_root.c - the choice of interface and the rendezvous root
 * (bootstrap.h; the unique id's bytes are uid_codec.c's).
 *
 * The root is a detached thread serving one job with one poll() loop over
 * its listening socket, the connections that have not yet presented a hello
 * and the ranks that have joined.  A hello with a wrong secret, garbage, a
 * truncated or oversized hello, or none within KOLO_HELLO_TIMEOUT_MS is
 * dropped and logged, and the root keeps serving.  A hello with the right
 * secret but an inconsistent job (nranks differs, rank out of range, a rank
 * twice) fails the job: every rank that joined is told why.  Once all
 * nranks have joined, each gets the peer info of its ring predecessor
 * (rank - 1, mod nranks: where it starts the ranks' own allgather of the
 * table, bootstrap_gather.c) and the root exits.
 * A job of several roots (koloCommInitRankScalable, bootstrap_forward.c):
 * each root waits for its block of ranks only; root 0 also for the other
 * roots, which forward their blocks and pass root 0's answer on.
 * timeout_ms after the first rank joined the root gives up and tells the
 * ranks that came which ones are missing; after a failure it lingers for
 * timeout_ms (at most 10 s) to tell late ranks the same, then exits.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/bootstrap_wire.h"
#include "transport/iface_select.h"

/* ---- interface choice ------------------------------------------------------ */

/* KOLO_SOCKET_FAMILY as AF_INET / AF_INET6, or AF_UNSPEC when unset. */
static koloResult_t wanted_family(int *family, kolo_errbuf *eb) {
  const char *f = kolo_param_str("KOLO_SOCKET_FAMILY");
  if (f == NULL) *family = AF_UNSPEC;
  else if (strcmp(f, "AF_INET") == 0) *family = AF_INET;
  else if (strcmp(f, "AF_INET6") == 0) *family = AF_INET6;
  else
    return kolo_error(eb, koloInvalidArgument, "KOLO_SOCKET_FAMILY=%s is neither AF_INET nor AF_INET6",
                      f);
  return koloSuccess;
}

/* How much we like an interface: 0 not at all; higher is better.  With a
 * spec, only what it names; without one, NCCL's order: ordinary interfaces,
 * then docker bridges, then loopback.  IPv4 beats IPv6 unless a family is
 * asked for. */
static int if_score(const struct ifaddrs *i, const char *spec, int family) {
  if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) return 0;
  int f = i->ifa_addr->sa_family;
  if ((f != AF_INET && f != AF_INET6) || (family != AF_UNSPEC && f != family)) return 0;
  if (f == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
    return 0; /* needs a scope id, meaningless on other hosts */
  int v4 = f == AF_INET;
  if (spec) return kolo_iface_match(spec, i->ifa_name) ? 10 + v4 : 0;
  if (i->ifa_flags & IFF_LOOPBACK) return 1 + v4;
  if (strncmp(i->ifa_name, "docker", 6) == 0) return 3 + v4;
  return 5 + v4;
}

static koloResult_t pick_addr_of(int family, struct sockaddr_storage *addr, kolo_errbuf *eb) {
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) != 0) return kolo_syserror(eb, errno, "getifaddrs failed");
  const char *spec = kolo_param_str("KOLO_SOCKET_IFNAME");
  struct ifaddrs *best = NULL;
  int best_score = 0;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    int s = if_score(i, spec, family);
    if (s > best_score) best = i, best_score = s;
  }
  koloResult_t res = koloSuccess;
  if (best) {
    memset(addr, 0, sizeof *addr);
    memcpy(addr, best->ifa_addr, best->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                       : sizeof(struct sockaddr_in));
    KOLO_INFO("bootstrap uses interface %s", best->ifa_name);
  } else {
    res = kolo_error(eb, koloInvalidUsage,
                     "no network interface is up with an %s address that matches KOLO_SOCKET_IFNAME=%s",
                     family == AF_INET6 ? "IPv6" : family == AF_INET ? "IPv4" : "IP",
                     spec ? spec : "(unset)");
  }
  freeifaddrs(ifs);
  return res;
}

koloResult_t kolo_bootstrap_pick_addr(struct sockaddr_storage *addr, kolo_errbuf *eb) {
  int family = AF_UNSPEC;
  koloResult_t res = wanted_family(&family, eb);
  if (res != koloSuccess) return res;
  return pick_addr_of(family, addr, eb);
}

/* ---- the root's state ------------------------------------------------------- */

/* Connections without a hello yet, before the silent ones are dropped for
 * newcomers (a rank dropped before its answer connects again). */
#define ROOT_MAX_PENDING 64
/* After a failure the root still answers late ranks for timeout_ms, but
 * no longer than this (nor longer when the job has no timeout). */
#define ROOT_LINGER_MS 10000

typedef struct {
  int lfd;
  int timeout_ms;
  uint8_t secret[KOLO_SECRET_BYTES];
  char name[96];               /* "root 1.2.3.4:5", for logs */
  int nranks;                  /* 0 until the first valid hello */
  /* Several roots (bootstrap_forward.c): nids of them, this one's index,
   * the block of ranks [lo, hi) it serves, and root 0's id; one root:
   * nids 1, index 0, the block is every rank. */
  int nids, index, lo, hi;
  kolo_uid first;
  /* Slots: one per rank, then (root 0 of several) one per other root. */
  int nslots;
  int arrived, expected;       /* slots joined; slots the job needs here */
  char first_who[48];          /* who came first: "rank 2", "the root of commIds[1]"; "" before */
  int *fd;                     /* per slot: its connection, -1 until it joined */
  kolo_peer_info *table;
  int64_t deadline;            /* give up then; 0 before the first rank (or never) */
  koloResult_t failed;         /* koloSuccess while the job can still form */
  char why[KOLO_ERR_LEN];      /* the failure, told to every rank */
  int64_t linger_until;
  kolo_pending_set pend;
  uint64_t sent_bytes;         /* what the answers took, for the log */
  struct pollfd *pfd;          /* 1 + ROOT_MAX_PENDING + nslots + 1 */
  int stop_fd;                 /* an owned root's stop signal (eventfd, the owner's); -1: detached */
  int stopped;                 /* the owner said stop */
} root_state;

/* Slots every root of this process has taken (kolo_bootstrap_root_joins). */
static _Atomic int g_root_joins;

int kolo_bootstrap_root_joins(void) { return atomic_load(&g_root_joins); }

/* A root its starter owns: joined at kolo_bootstrap_root_stop. */
struct kolo_root {
  pthread_t tid;
  int stop_fd;
};

static void root_free(root_state *st) {
  kolo_pending_set_free(&st->pend);
  for (int r = 0; st->fd && r < st->nslots; r++)
    if (st->fd[r] >= 0) close(st->fd[r]);
  close(st->lfd);
  free(st->pfd);
  free(st->table);
  free(st->fd);
  free(st);
}

static int hello_nids(const kolo_rank_hello *h) { return h->nids < 1 ? 1 : h->nids; }

/* The slot of a rank, or of the root that forwards block k (root 0). */
static int sub_slot(const root_state *st, int k) { return st->nranks + k - 1; }
static int hello_slot(const root_state *st, const kolo_rank_hello *h) {
  return h->role == KOLO_HELLO_SUBROOT ? sub_slot(st, h->root_index) : h->rank;
}

/* Descriptors this process has open now (0 when /proc cannot tell). */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return 0;
  int n = 0;
  while (readdir(d) != NULL) n++;
  closedir(d);
  return n;
}

/* The root holds a connection per rank of its block until it answers: the
 * process must allow that many more descriptors (a soft limit of 1024
 * stops a root of 1024 ranks).  0, or -1 and why. */
static int root_fd_room(const root_state *st, char *why, size_t len) {
  long need = (long)open_fds() + (st->hi - st->lo) + (st->nslots - st->nranks) + ROOT_MAX_PENDING + 16;
  char how[200];
  if (kolo_fd_allow(need, how, sizeof how) == 0) return 0;
  snprintf(why, len, "%s cannot hold a connection per rank of its %d: %s, or spread the ranks over several "
           "roots (koloCommInitRankScalable)", st->name, st->hi - st->lo, how);
  return -1;
}

/* Sizes the job from its first hello: 0, or -1 and why. */
static int root_alloc(root_state *st, const kolo_rank_hello *h, char *why, size_t len) {
  int nranks = h->nranks, nids = hello_nids(h);
  int index = h->role == KOLO_HELLO_SUBROOT ? 0 : h->root_index;
  int nslots = nranks + (index == 0 ? nids - 1 : 0);
  int *fd = malloc((size_t)nslots * sizeof *fd);
  kolo_peer_info *table = calloc((size_t)nranks, sizeof *table);
  struct pollfd *pfd = calloc(2 + ROOT_MAX_PENDING + (size_t)nslots, sizeof *pfd);
  if (!fd || !table || !pfd) {
    free(pfd);
    free(table);
    free(fd);
    snprintf(why, len, "%s is out of memory for %d ranks", st->name, nranks);
    return -1;
  }
  for (int r = 0; r < nslots; r++) fd[r] = -1;
  free(st->pfd);
  st->fd = fd;
  st->table = table;
  st->pfd = pfd;
  st->nranks = nranks;
  st->nslots = nslots;
  st->nids = nids;
  st->index = index;
  st->first = h->first;
  kolo_root_block(index, nranks, nids, &st->lo, &st->hi);
  st->expected = st->hi - st->lo + (nslots - nranks);
  return root_fd_room(st, why, len);
}

/* ---- telling ranks ------------------------------------------------------------ */

static void root_send_refusal(const root_state *st, int fd, koloResult_t res, const char *text) {
  kolo_errbuf eb = {0};
  if (kolo_send_refusal(fd, res, text, "a rank", &eb) != koloSuccess)
    KOLO_INFO("%s: could not tell a rank why the job failed: %s", st->name, eb.msg);
}

/* The job cannot form: tell every rank that joined, then linger. */
static void root_fail(root_state *st, koloResult_t res, const char *why) {
  int named = strncmp(why, st->name, strlen(st->name)) == 0;
  KOLO_WARN("%s%s%s", named ? "" : st->name, named ? "" : ": ", why);
  st->failed = res;
  snprintf(st->why, sizeof st->why, "%s", why);
  int linger = st->timeout_ms > 0 && st->timeout_ms < ROOT_LINGER_MS ? st->timeout_ms : ROOT_LINGER_MS;
  st->linger_until = kolo_deadline(linger);
  for (int r = 0; r < st->nslots; r++) {
    if (st->fd[r] < 0) continue;
    root_send_refusal(st, st->fd[r], res, why);
    close(st->fd[r]);
    st->fd[r] = -1;
  }
  st->arrived = 0;
}

/* The peer info of rank `of` to fd, as the answer to a hello. */
static void root_send_neighbor(root_state *st, int fd, int of, const char *to) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES];
  kolo_encode_header(m, KOLO_TAG_NEIGHBOR, KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_info(&st->table[of], m + KOLO_WIRE_HDR_BYTES);
  kolo_errbuf eb = {0};
  if (kolo_sock_send_all(fd, m, sizeof m, kolo_deadline(KOLO_HELLO_TIMEOUT_MS), to, &eb) != koloSuccess)
    KOLO_WARN("%s: could not answer %s: %s", st->name, to, eb.msg);
  else st->sent_bytes += sizeof m;
}

/* The job formed: each rank of this root's block gets its ring
 * predecessor (rank - 1, mod nranks), each root that forwarded a block
 * that of its first rank.  A few dozen bytes per rank: the ranks gather
 * the table among themselves. */
static void root_answer(root_state *st) {
  for (int r = 0; r < st->nslots; r++) {
    if (st->fd[r] < 0) continue;
    int first = r;
    char to[48];
    if (r >= st->nranks) { /* the root of block k */
      int hi;
      kolo_root_block(r - st->nranks + 1, st->nranks, st->nids, &first, &hi);
      snprintf(to, sizeof to, "the root of commIds[%d]", r - st->nranks + 1);
    } else {
      snprintf(to, sizeof to, "rank %d", r);
    }
    root_send_neighbor(st, st->fd[r], (first + st->nranks - 1) % st->nranks, to);
  }
  KOLO_INFO("%s: all %d ranks joined; answered %d connection(s) with %llu bytes", st->name, st->nranks,
            st->expected, (unsigned long long)st->sent_bytes);
}

/* Root k > 0 of several, its block complete: root 0's answer, passed on. */
static void root_forward(root_state *st) {
  kolo_errbuf eb = {0};
  koloResult_t res = kolo_root_forward(&st->first, st->nranks, st->nids, st->index, st->table, st->timeout_ms, &eb);
  if (res == koloSuccess) root_answer(st);
  else root_fail(st, res, eb.msg);
}

/* " 2, 5 and 3 more": the missing slots in [from, to), shown as slot - base. */
static size_t list_missing(const root_state *st, int from, int to, int base, char *msg, size_t n, size_t cap) {
  int missing = 0, listed = 0;
  for (int r = from; r < to; r++) {
    if (st->fd[r] >= 0) continue;
    if (listed < 16) n += (size_t)snprintf(msg + n, cap - n, "%s%d", listed++ ? ", " : " ", r - base);
    missing++;
  }
  if (missing > listed) n += (size_t)snprintf(msg + n, cap - n, " and %d more", missing - listed);
  return n < cap ? n : cap - 1;
}

static int count_missing(const root_state *st, int from, int to) {
  int missing = 0;
  for (int r = from; r < to; r++) missing += st->fd[r] < 0;
  return missing;
}

/* "rank 2 of 3 did not join within 2000 ms", "ranks 2, 5 of 8 ...", and
 * with several roots "the roots of commIds 2, 3 (ranks 5..8) did not
 * forward their ranks". */
static void root_fail_missing(root_state *st) {
  char msg[KOLO_ERR_LEN];
  size_t n = 0;
  int ranks = count_missing(st, st->lo, st->hi), roots = count_missing(st, st->nranks, st->nslots);
  if (ranks > 0) {
    n = (size_t)snprintf(msg, sizeof msg, "rank%s", ranks > 1 ? "s" : "");
    n = list_missing(st, st->lo, st->hi, 0, msg, n, sizeof msg);
    n += (size_t)snprintf(msg + n, sizeof msg - n, " of %d did not join%s", st->nranks, roots ? "; " : "");
  }
  if (roots > 0) {
    n += (size_t)snprintf(msg + n, sizeof msg - n, "the root%s of commIds", roots > 1 ? "s" : "");
    n = list_missing(st, st->nranks, st->nslots, st->nranks - 1, msg, n, sizeof msg);
    n += (size_t)snprintf(msg + n, sizeof msg - n, " did not forward %s ranks", roots > 1 ? "their" : "its");
  }
  snprintf(msg + n, sizeof msg - n, " within %d ms", st->timeout_ms);
  root_fail(st, koloTimeout, msg);
}

/* ---- hellos --------------------------------------------------------------------- */

/* "rank 3", or "the root of commIds[2]" for a root that forwards. */
static const char *hello_who(const kolo_rank_hello *h, char *buf, size_t len) {
  if (h->role == KOLO_HELLO_SUBROOT) snprintf(buf, len, "the root of commIds[%d]", h->root_index);
  else snprintf(buf, len, "rank %d", h->rank);
  return buf;
}

/* What a hello of several roots gets wrong, or NULL (why: the sentence). */
static const char *roots_fault(const root_state *st, const kolo_rank_hello *h, char *why, size_t len) {
  int nids = hello_nids(h), sub = h->role == KOLO_HELLO_SUBROOT;
  char who[48];
  hello_who(h, who, sizeof who);
  if (nids > h->nranks) {
    snprintf(why, len, "%s refused %s: %d ids for %d ranks (nId must be 1..nranks)", st->name, who, nids, h->nranks);
  } else if (sub && (h->root_index < 1 || h->root_index >= nids || (st->nranks != 0 && st->index != 0))) {
    snprintf(why, len, "%s refused %s: roots forward to the root of commIds[0] only", st->name, who);
  } else if (!sub && h->root_index != kolo_root_of(h->rank, h->nranks, nids)) {
    snprintf(why, len, "%s refused %s: it meets at commIds[%d], not at the root of commIds[%d] of %d", st->name,
             who, kolo_root_of(h->rank, h->nranks, nids), h->root_index, nids);
  } else if (st->nranks != 0 && nids != st->nids) {
    snprintf(why, len, "%s refused %s: it passes %d ids, %s passed %d (the same ids on every rank)", st->name, who,
             nids, st->first_who, st->nids);
  } else if (st->nranks != 0 && !sub && h->root_index != st->index) {
    snprintf(why, len, "%s refused %s: it takes this root for commIds[%d], %s for commIds[%d] (the same ids in "
             "the same order on every rank)", st->name, who, h->root_index, st->first_who, st->index);
  } else if (st->nranks != 0 && nids > 1 && memcmp(&h->first, &st->first, sizeof st->first) != 0) {
    snprintf(why, len, "%s refused %s: its commIds[0] differs from that of %s", st->name, who, st->first_who);
  } else {
    return NULL;
  }
  return why;
}

/* A hello with the right secret that does not fit the job: 0, or -1 and why. */
static int root_check_hello(const root_state *st, const kolo_rank_hello *h, char *why, size_t len) {
  int sub = h->role == KOLO_HELLO_SUBROOT;
  if (h->nranks < 1 || h->nranks > KOLO_MAX_RANKS) {
    snprintf(why, len, "%s refused rank %d: nranks %d is outside 1..%d", st->name, h->rank, h->nranks,
             KOLO_MAX_RANKS);
  } else if (!sub && (h->rank < 0 || h->rank >= h->nranks)) {
    snprintf(why, len, "%s refused rank %d: it is outside 0..%d", st->name, h->rank, h->nranks - 1);
  } else if (st->nranks != 0 && h->nranks != st->nranks) {
    char who[48];
    snprintf(why, len, "%s refused %s: nranks %d differs from %s's %d", st->name, hello_who(h, who, sizeof who),
             h->nranks, st->first_who, st->nranks);
  } else if (roots_fault(st, h, why, len) != NULL) {
    return -1;
  } else if (st->nranks != 0 && st->fd[hello_slot(st, h)] >= 0) {
    snprintf(why, len, "%s refused %s %d: it joined twice", st->name, sub ? "the root of commIds" : "rank",
             sub ? h->root_index : h->rank);
  } else {
    return 0;
  }
  return -1;
}

/* A root that forwards its block (root 0): its block into the table. */
static int root_take_block(root_state *st, int fd, const kolo_rank_hello *h, char *why, size_t len) {
  if (h->role != KOLO_HELLO_SUBROOT) return 0;
  return kolo_root_read_block(fd, h, st->table, why, len);
}

/* Takes over fd, whose hello is complete. */
static void root_take(root_state *st, int fd, const kolo_rank_hello *h, const char *from) {
  char why[KOLO_ERR_LEN];
  if (!kolo_secret_equal(h->secret, st->secret, KOLO_SECRET_BYTES)) {
    KOLO_WARN("%s: dropped a connection from %s that did not present the job's secret", st->name, from);
  } else if (st->failed) {
    root_send_refusal(st, fd, st->failed, st->why);
  } else if (root_check_hello(st, h, why, sizeof why) != 0) {
    root_send_refusal(st, fd, koloInvalidUsage, why);
    root_fail(st, koloInvalidUsage, why);
  } else if (st->nranks == 0 && root_alloc(st, h, why, sizeof why) != 0) {
    root_send_refusal(st, fd, koloSystemError, why);
    root_fail(st, koloSystemError, why);
  } else if (root_take_block(st, fd, h, why, sizeof why) != 0) {
    root_send_refusal(st, fd, koloRemoteError, why);
    root_fail(st, koloRemoteError, why);
  } else {
    if (st->first_who[0] == '\0') { /* the clock starts with the first arrival */
      hello_who(h, st->first_who, sizeof st->first_who);
      st->deadline = kolo_deadline(st->timeout_ms);
    }
    if (h->role != KOLO_HELLO_SUBROOT) {
      st->table[h->rank] = h->info;
      st->table[h->rank].rank = h->rank;
    }
    st->fd[hello_slot(st, h)] = fd;
    st->arrived++;
    atomic_fetch_add(&g_root_joins, 1);
    KOLO_INFO("%s: %s %d of %d joined from %s", st->name, h->role == KOLO_HELLO_SUBROOT ? "the root of block" : "rank",
              h->role == KOLO_HELLO_SUBROOT ? h->root_index : h->rank, h->nranks, from);
    return;
  }
  close(fd);
}

static void root_drop_pending(root_state *st, kolo_pending_hello *p, const char *why, int quiet) {
  if (quiet) KOLO_INFO("%s: dropped a connection from %s: %s", st->name, p->from, why);
  else KOLO_WARN("%s: dropped a connection from %s: %s", st->name, p->from, why);
  close(p->fd);
  p->fd = -1;
}

/* A hello of another version, or a garbled one: the peer is told why (it
 * may be a kolo of another version, which reads refusals of any version). */
static void root_refuse_pending(root_state *st, kolo_pending_hello *p, int other, uint32_t version,
                                const char *why) {
  char text[KOLO_ERR_LEN];
  if (other)
    snprintf(text, sizeof text, "%s: peer %s speaks kolo wire version %u, this root speaks %u", st->name, p->from,
             version, KOLO_BOOTSTRAP_WIRE_VERSION);
  else
    snprintf(text, sizeof text, "%s: peer %s %s", st->name, p->from, why);
  KOLO_WARN("%s; refused it", text);
  root_send_refusal(st, p->fd, koloInvalidUsage, text);
  close(p->fd);
  p->fd = -1;
}

static void root_serve_pending(root_state *st, kolo_pending_hello *p) {
  char why[200];
  int s = kolo_pending_step(p, KOLO_TAG_RANK_HELLO, KOLO_TAG_RANK_HELLO_V1, why, sizeof why);
  if (s == KOLO_HELLO_MORE) return;
  if (s == KOLO_HELLO_DROP || s == KOLO_HELLO_GONE) {
    root_drop_pending(st, p, why, s == KOLO_HELLO_GONE);
    return;
  }
  kolo_rank_hello h;
  uint32_t version = 1; /* KOLO_HELLO_REFUSE: version 1's tag */
  int d = s == KOLO_HELLO_DONE ? kolo_decode_rank_hello(p->body, (size_t)p->hdr.len, &h, &version, why, sizeof why)
                               : KOLO_WIRE_OTHER_VERSION;
  if (d == KOLO_WIRE_OK) {
    int fd = p->fd;
    p->fd = -1;
    root_take(st, fd, &h, p->from);
    return;
  }
  root_refuse_pending(st, p, d == KOLO_WIRE_OTHER_VERSION, version, why);
}

/* Accepts newcomers while there is room (bootstrap_pending.c).  A root that
 * cannot accept (out of descriptors) cannot form the job: it says why to
 * the ranks that joined rather than spin on a listener it cannot serve. */
static void root_accept(root_state *st) {
  kolo_errbuf eb = {0};
  if (kolo_pending_accept(&st->pend, st->lfd, st->name, &eb) == koloSuccess) return;
  char why[KOLO_ERR_LEN + 100];
  snprintf(why, sizeof why, "%s: %s", st->name, eb.msg);
  if (!st->failed) root_fail(st, koloSystemError, why);
  else KOLO_WARN("%s", why);
}

/* A rank that joined sends nothing more: readable means it left (its init
 * failed or its process died) or broke the protocol. */
static void root_check_joined(root_state *st, int r) {
  char c;
  int err = 0;
  ssize_t n = kolo_sock_read_some(st->fd[r], &c, 1, &err);
  if (n == 0) return;
  char who[48];
  if (r < st->nranks) snprintf(who, sizeof who, "rank %d", r);
  else snprintf(who, sizeof who, "the root of commIds[%d]", r - st->nranks + 1);
  if (n > 0) KOLO_WARN("%s: %s sent data after its hello; dropped it", st->name, who);
  else KOLO_INFO("%s: %s left before all ranks joined", st->name, who);
  close(st->fd[r]);
  st->fd[r] = -1;
  st->arrived--;
}

/* ---- the loop -------------------------------------------------------------------- */

static int64_t earlier(int64_t a, int64_t b) { return a == 0 ? b : (b == 0 || a < b) ? a : b; }

static int64_t root_next_deadline(root_state *st) {
  int64_t dl = st->failed ? st->linger_until : st->deadline;
  return earlier(dl, kolo_pending_next_due(&st->pend, kolo_now_ms()));
}

/* Fills st->pfd: the listener, the pending connections, the joined ranks,
 * last the owner's stop signal (-1 for a detached root: poll skips it). */
static nfds_t root_fill_pollfds(root_state *st) {
  nfds_t n = 0;
  int full = kolo_pending_set_full(&st->pend, kolo_now_ms());
  st->pfd[n++] = (struct pollfd){full ? -1 : st->lfd, POLLIN, 0};
  for (int i = 0; i < st->pend.n; i++) st->pfd[n++] = (struct pollfd){st->pend.p[i].fd, POLLIN, 0};
  for (int r = 0; r < st->nslots; r++)
    if (st->fd[r] >= 0) st->pfd[n++] = (struct pollfd){st->fd[r], POLLIN, 0};
  st->pfd[n++] = (struct pollfd){st->stop_fd, POLLIN, 0};
  return n;
}

static void root_handle_events(root_state *st, nfds_t n) {
  if (st->pfd[n - 1].revents) st->stopped = 1;
  int npend = st->pend.n;
  nfds_t k = 1 + (nfds_t)npend;
  for (int r = 0; r < st->nslots; r++) /* same order as root_fill_pollfds */
    if (st->fd[r] >= 0 && st->pfd[k++].revents) root_check_joined(st, r);
  for (int i = 0; i < npend; i++)
    if (st->pfd[1 + i].revents && st->pend.p[i].fd >= 0) root_serve_pending(st, &st->pend.p[i]);
  kolo_pending_compact(&st->pend);
  if (st->pfd[0].revents) root_accept(st);
}

static void root_expire(root_state *st) {
  int64_t now = kolo_now_ms();
  kolo_pending_expire(&st->pend, now, st->name);
  if (!st->failed && st->deadline != 0 && now >= st->deadline && st->arrived < st->expected)
    root_fail_missing(st);
}

/* One round of the loop: 0 when the root is done. */
static int root_step(root_state *st) {
  nfds_t n = root_fill_pollfds(st);
  if (kolo_poll(st->pfd, n, root_next_deadline(st)) < 0) {
    char why[160];
    snprintf(why, sizeof why, "%s: poll failed: %s", st->name, strerror(errno));
    root_fail(st, koloSystemError, why);
    return 0;
  }
  root_handle_events(st, n);
  if (st->stopped) return 0; /* its owner's init ended: no one to serve */
  root_expire(st);
  if (!st->failed && st->nranks != 0 && st->arrived == st->expected) {
    if (st->index > 0) root_forward(st); /* the block's predecessor comes from root 0 */
    else root_answer(st);
    if (!st->failed) return 0;
  }
  return !st->failed || kolo_now_ms() < st->linger_until;
}

static void *root_main(void *arg) {
  root_state *st = arg;
  while (root_step(st)) {
  }
  KOLO_INFO("%s: done", st->name);
  root_free(st);
  return NULL;
}

/* ---- start -------------------------------------------------------------------------- */

static int is_wildcard(const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
  return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
}

/* Fills a new uid: where to listen, a job id and the secret. */
static koloResult_t root_new_uid(const struct sockaddr_storage *bind_addr, const uint8_t *secret,
                                 kolo_errbuf *eb, kolo_uid *u) {
  memset(u, 0, sizeof *u);
  u->magic = KOLO_UID_MAGIC;
  koloResult_t res = koloSuccess;
  if (bind_addr) u->root = *bind_addr;
  else res = kolo_bootstrap_pick_addr(&u->root, eb);
  if (res == koloSuccess && !bind_addr) kolo_addr_set_port(&u->root, 0);
  if (res == koloSuccess) res = kolo_random(&u->job, sizeof u->job, eb);
  if (res == koloSuccess && secret) memcpy(u->secret, secret, sizeof u->secret);
  else if (res == koloSuccess) res = kolo_random(u->secret, sizeof u->secret, eb);
  return res;
}

/* Ranks cannot connect to a wildcard: advertise this host's address. */
static koloResult_t root_advertise(kolo_uid *u, kolo_errbuf *eb) {
  if (!is_wildcard(&u->root)) return koloSuccess;
  struct sockaddr_storage a;
  koloResult_t res = pick_addr_of(u->root.ss_family, &a, eb);
  if (res != koloSuccess) return res;
  kolo_addr_set_port(&a, kolo_addr_port(&u->root));
  u->root = a;
  return koloSuccess;
}

/* Detached, or joinable when an owner will stop it (owned != NULL). */
static koloResult_t root_spawn(root_state *st, kolo_root *owned, kolo_errbuf *eb) {
  pthread_attr_t attr;
  pthread_t tid;
  int err = pthread_attr_init(&attr);
  if (err == 0 && owned == NULL) err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (err == 0) err = pthread_create(owned ? &owned->tid : &tid, &attr, root_main, st);
  pthread_attr_destroy(&attr);
  if (err != 0) return kolo_syserror(eb, err, "cannot start the bootstrap %s thread", st->name);
  return koloSuccess;
}

static koloResult_t root_new_owned(kolo_root **out, kolo_errbuf *eb) {
  kolo_root *r = calloc(1, sizeof *r);
  if (r == NULL) return kolo_error(eb, koloSystemError, "out of memory starting the bootstrap root");
  r->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (r->stop_fd < 0) {
    int err = errno;
    free(r);
    return kolo_syserror(eb, err, "cannot make the bootstrap root's stop signal (eventfd)");
  }
  *out = r;
  return koloSuccess;
}

static void root_free_owned(kolo_root *r) {
  if (r == NULL) return;
  close(r->stop_fd);
  free(r);
}

void kolo_bootstrap_root_stop(kolo_root *r) {
  if (r == NULL) return;
  uint64_t one = 1;
  if (write(r->stop_fd, &one, sizeof one) != (ssize_t)sizeof one)
    KOLO_WARN("cannot signal the bootstrap root to stop: %s", strerror(errno)); /* it ends by itself */
  int err = pthread_join(r->tid, NULL);
  if (err != 0) KOLO_WARN("cannot join the bootstrap root thread: %s", strerror(err));
  root_free_owned(r);
}

koloResult_t kolo_bootstrap_root_start(const struct sockaddr_storage *bind_addr, const uint8_t *secret,
                                       int timeout_ms, kolo_uid *uid, kolo_errbuf *eb) {
  return kolo_bootstrap_root_start_owned(bind_addr, secret, timeout_ms, uid, eb, NULL);
}

koloResult_t kolo_bootstrap_root_start_owned(const struct sockaddr_storage *bind_addr, const uint8_t *secret,
                                             int timeout_ms, kolo_uid *uid, kolo_errbuf *eb, kolo_root **owner) {
  kolo_uid u;
  koloResult_t res = root_new_uid(bind_addr, secret, eb, &u);
  if (res != koloSuccess) return res;
  kolo_root *owned = NULL;
  if (owner != NULL && (res = root_new_owned(&owned, eb)) != koloSuccess) return res;
  root_state *st = calloc(1, sizeof *st);
  if (st == NULL) {
    res = kolo_error(eb, koloSystemError, "out of memory starting the bootstrap root");
    goto free_owned;
  }
  st->stop_fd = owned ? owned->stop_fd : -1;
  kolo_pending_set_init(&st->pend, ROOT_MAX_PENDING);
  st->pfd = calloc(2 + ROOT_MAX_PENDING, sizeof *st->pfd);
  if (st->pfd == NULL) {
    res = kolo_error(eb, koloSystemError, "out of memory starting the bootstrap root");
    goto free_state;
  }
  res = kolo_sock_listen(&u.root, eb, &st->lfd);
  if (res != koloSuccess) goto free_state;
  res = root_advertise(&u, eb);
  if (res != koloSuccess) goto close_listener;
  st->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  memcpy(st->secret, u.secret, sizeof st->secret);
  char addr[80];
  kolo_addr_str(&u.root, addr, sizeof addr);
  snprintf(st->name, sizeof st->name, "root %s", addr);
  res = root_spawn(st, owned, eb); /* from here on the thread owns st */
  if (res != koloSuccess) goto close_listener;
  KOLO_INFO("bootstrap root listening on %s", addr);
  *uid = u;
  if (owner != NULL) *owner = owned;
  return koloSuccess;

close_listener:
  close(st->lfd);
free_state:
  free(st->pfd);
  free(st);
free_owned:
  root_free_owned(owned);
  return res;
}
