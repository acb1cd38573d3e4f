/* bootstrap_root.c - the rendezvous root and the unique id (bootstrap.h).
 *
 * The root is a detached thread serving one job: it collects one hello per
 * rank, checks each (magic, secret, rank, nranks), then sends every rank the
 * table of all ranks and exits.  Connections that do not present the secret,
 * send garbage or stall are dropped and logged; the root keeps waiting for
 * the real ranks.  It gives up timeout_ms after the first rank arrived and
 * tells the ranks that came which ones are missing. */
#include <errno.h>
#include <stddef.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "transport/bootstrap_wire.h"

/* A hello must arrive this soon after its connection. */
#define HELLO_TIMEOUT_MS 2000

/* The id holds the uid packed: the root address takes the size of an IPv6
 * address, not of a sockaddr_storage. */
#define UID_ADDR_BYTES sizeof(struct sockaddr_in6)
#define UID_HEAD_BYTES offsetof(kolo_uid, root)

void kolo_uid_encode(const kolo_uid *uid, koloUniqueId *id) {
  _Static_assert(UID_HEAD_BYTES + UID_ADDR_BYTES <= KOLO_UNIQUE_ID_BYTES, "kolo_uid must fit the unique id");
  memset(id, 0, sizeof *id);
  memcpy(id->internal, uid, UID_HEAD_BYTES);
  memcpy(id->internal + UID_HEAD_BYTES, &uid->root, UID_ADDR_BYTES);
}

koloResult_t kolo_uid_decode(const koloUniqueId *id, kolo_uid *uid, kolo_errbuf *eb) {
  memset(uid, 0, sizeof *uid);
  memcpy(uid, id->internal, UID_HEAD_BYTES);
  memcpy(&uid->root, id->internal + UID_HEAD_BYTES, UID_ADDR_BYTES);
  if (uid->magic != KOLO_UID_MAGIC)
    return kolo_error(eb, koloInvalidArgument, "the unique id is not one from koloGetUniqueId (bad magic)");
  if (uid->root.ss_family != AF_INET && uid->root.ss_family != AF_INET6)
    return kolo_error(eb, koloInvalidArgument, "the unique id holds no root address");
  return koloSuccess;
}

koloResult_t kolo_random(void *buf, size_t len, kolo_errbuf *eb) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return kolo_syserror(eb, errno, "getrandom failed");
    p += n;
    len -= (size_t)n;
  }
  return koloSuccess;
}

/* ---- interface choice --------------------------------------------------- */

/* NCCL's syntax: "eth,ib" prefixes; "^lo" excludes; "=eth0" exact. */
static int if_matches(const char *name, const char *spec) {
  int exclude = spec[0] == '^', exact;
  if (exclude) spec++;
  exact = spec[0] == '=';
  if (exact) spec++;
  int hit = 0;
  char list[256];
  snprintf(list, sizeof list, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && !hit;
       tok = strtok_r(NULL, ",", &save))
    hit = exact ? strcmp(name, tok) == 0 : strncmp(name, tok, strlen(tok)) == 0;
  return exclude ? !hit : hit;
}

static int family_wanted(int family) {
  const char *f = kolo_param_str("KOLO_SOCKET_FAMILY");
  if (family != AF_INET && family != AF_INET6) return 0;
  if (f == NULL) return 1;
  return (strcmp(f, "AF_INET6") == 0) ? family == AF_INET6 : family == AF_INET;
}

koloResult_t kolo_bootstrap_pick_addr(struct sockaddr_storage *addr, kolo_errbuf *eb) {
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) != 0) return kolo_syserror(eb, errno, "getifaddrs failed");
  const char *spec = kolo_param_str("KOLO_SOCKET_IFNAME");
  struct ifaddrs *best = NULL, *loop = NULL;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || !family_wanted(i->ifa_addr->sa_family)) continue;
    if (i->ifa_addr->sa_family == AF_INET6) {
      const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)i->ifa_addr;
      if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue; /* needs a scope id */
    }
    if (spec) {
      if (if_matches(i->ifa_name, spec) && !best) best = i;
    } else if (i->ifa_flags & IFF_LOOPBACK) {
      if (!loop) loop = i;
    } else if (!best || (best->ifa_addr->sa_family == AF_INET6 && i->ifa_addr->sa_family == AF_INET)) {
      best = i; /* prefer IPv4 when both exist */
    }
  }
  if (!best) best = spec ? NULL : loop;
  koloResult_t res = koloSuccess;
  if (best) {
    memset(addr, 0, sizeof *addr);
    memcpy(addr, best->ifa_addr, best->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                       : sizeof(struct sockaddr_in));
    KOLO_INFO("bootstrap interface %s", best->ifa_name);
  } else {
    res = kolo_error(eb, koloInvalidUsage, "no network interface is up that matches KOLO_SOCKET_IFNAME=%s",
                     spec ? spec : "(unset)");
  }
  freeifaddrs(ifs);
  return res;
}

/* ---- the root thread ---------------------------------------------------- */

typedef struct {
  int lfd;
  int timeout_ms;
  uint8_t secret[KOLO_SECRET_BYTES];
  char name[80];
} root_args;

typedef struct {
  int nranks; /* 0 until the first valid hello */
  int arrived;
  int *fd;    /* per rank, -1 until it arrived */
  kolo_peer_info *table;
} root_state;

static void root_reply_error(int fd, const char *msg) {
  root_reply r = {KOLO_WIRE_MAGIC, 1, (uint32_t)strlen(msg)};
  kolo_errbuf eb;
  int64_t dl = kolo_deadline(HELLO_TIMEOUT_MS);
  if (kolo_sock_send(fd, &r, sizeof r, dl, &eb, "a rank") == koloSuccess)
    kolo_sock_send(fd, msg, r.len, dl, &eb, "a rank");
}

/* Reads and checks one hello; takes fd (closes it unless it is kept). */
static void root_take(root_args *a, root_state *st, int fd) {
  rank_hello h;
  kolo_errbuf eb;
  char msg[256];
  if (kolo_sock_recv(fd, &h, sizeof h, kolo_deadline(HELLO_TIMEOUT_MS), &eb, "a new connection") != koloSuccess) {
    KOLO_WARN("root %s: dropped a connection: %s", a->name, eb.msg);
    close(fd);
    return;
  }
  if (h.magic != KOLO_WIRE_MAGIC || !kolo_secret_equal(h.secret, a->secret)) {
    KOLO_WARN("root %s: dropped a connection that did not present the job's secret", a->name);
    close(fd);
    return;
  }
  int bad = 0;
  if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks) {
    snprintf(msg, sizeof msg, "root refused rank %d of %d: not a valid rank", h.rank, h.nranks);
    bad = 1;
  } else if (st->nranks != 0 && h.nranks != st->nranks) {
    snprintf(msg, sizeof msg, "root refused rank %d: nranks %d differs from the first rank's %d", h.rank,
             h.nranks, st->nranks);
    bad = 1;
  } else if (st->nranks != 0 && st->fd[h.rank] >= 0) {
    snprintf(msg, sizeof msg, "root refused rank %d: that rank already joined", h.rank);
    bad = 1;
  }
  if (bad) {
    KOLO_WARN("root %s: %s", a->name, msg);
    root_reply_error(fd, msg);
    close(fd);
    return;
  }
  if (st->nranks == 0) {
    st->fd = malloc((size_t)h.nranks * sizeof *st->fd);
    st->table = calloc((size_t)h.nranks, sizeof *st->table);
    if (!st->fd || !st->table) {
      free(st->fd);
      free(st->table);
      st->fd = NULL;
      st->table = NULL;
      root_reply_error(fd, "root out of memory");
      close(fd);
      return;
    }
    for (int r = 0; r < h.nranks; r++) st->fd[r] = -1;
    st->nranks = h.nranks;
  }
  h.info.rank = h.rank;
  st->table[h.rank] = h.info;
  st->fd[h.rank] = fd;
  st->arrived++;
}

static void root_send_table(root_state *st) {
  root_reply r = {KOLO_WIRE_MAGIC, 0, (uint32_t)st->nranks};
  for (int q = 0; q < st->nranks; q++) {
    kolo_errbuf eb;
    int64_t dl = kolo_deadline(HELLO_TIMEOUT_MS);
    if (kolo_sock_send(st->fd[q], &r, sizeof r, dl, &eb, "a rank") != koloSuccess ||
        kolo_sock_send(st->fd[q], st->table, (size_t)st->nranks * sizeof *st->table, dl, &eb, "a rank") != koloSuccess)
      KOLO_WARN("root: could not send the table to rank %d: %s", q, eb.msg);
  }
}

static void root_send_missing(root_args *a, root_state *st) {
  char msg[512];
  int n = snprintf(msg, sizeof msg, "rank%s", st->nranks - st->arrived > 1 ? "s" : "");
  int listed = 0;
  for (int q = 0; q < st->nranks && n < (int)sizeof msg - 64; q++) {
    if (st->fd[q] >= 0) continue;
    n += snprintf(msg + n, sizeof msg - (size_t)n, "%s%d", listed++ ? ", " : " ", q);
  }
  snprintf(msg + n, sizeof msg - (size_t)n, " of %d did not join within %d ms", st->nranks, a->timeout_ms);
  KOLO_WARN("root %s: %s", a->name, msg);
  for (int q = 0; q < st->nranks; q++)
    if (st->fd[q] >= 0) root_reply_error(st->fd[q], msg);
}

static void *root_main(void *p) {
  root_args *a = p;
  root_state st = {0, 0, NULL, NULL};
  int64_t deadline = 0;
  while (st.nranks == 0 || st.arrived < st.nranks) {
    int fd;
    kolo_errbuf eb;
    koloResult_t res = kolo_sock_accept(a->lfd, deadline, &fd, &eb);
    if (res == koloTimeout) {
      root_send_missing(a, &st);
      break;
    }
    if (res != koloSuccess) {
      KOLO_WARN("root %s: %s", a->name, eb.msg);
      break;
    }
    root_take(a, &st, fd);
    if (st.nranks != 0 && deadline == 0) deadline = kolo_deadline(a->timeout_ms);
  }
  if (st.nranks != 0 && st.arrived == st.nranks) root_send_table(&st);
  for (int q = 0; q < st.nranks; q++)
    if (st.fd[q] >= 0) close(st.fd[q]);
  free(st.fd);
  free(st.table);
  close(a->lfd);
  free(a);
  return NULL;
}

koloResult_t kolo_bootstrap_root_start(const struct sockaddr_storage *bind_addr, const uint8_t *secret,
                                       int timeout_ms, kolo_uid *uid, kolo_errbuf *eb) {
  kolo_uid u;
  memset(&u, 0, sizeof u);
  u.magic = KOLO_UID_MAGIC;
  koloResult_t res = bind_addr ? koloSuccess : kolo_bootstrap_pick_addr(&u.root, eb);
  if (bind_addr) u.root = *bind_addr;
  if (res == koloSuccess) res = kolo_random(&u.job, sizeof u.job, eb);
  if (res == koloSuccess && secret) memcpy(u.secret, secret, sizeof u.secret);
  else if (res == koloSuccess) res = kolo_random(u.secret, sizeof u.secret, eb);
  root_args *a = res == koloSuccess ? calloc(1, sizeof *a) : NULL;
  if (res == koloSuccess && a == NULL) res = kolo_error(eb, koloSystemError, "out of memory starting the root");
  if (res != koloSuccess) return res;
  if (!bind_addr) ((struct sockaddr_in *)&u.root)->sin_port = 0; /* same offset for v6 */
  res = kolo_sock_listen(&u.root, &a->lfd, eb);
  if (res != koloSuccess) {
    free(a);
    return res;
  }
  a->timeout_ms = timeout_ms;
  memcpy(a->secret, u.secret, sizeof a->secret);
  kolo_addr_str(&u.root, a->name, sizeof a->name);
  char name[80];
  memcpy(name, a->name, sizeof name); /* the thread owns `a` once started */
  pthread_attr_t attr;
  pthread_t tid;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&tid, &attr, root_main, a);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    close(a->lfd);
    free(a);
    return kolo_syserror(eb, err, "cannot start the bootstrap root thread");
  }
  KOLO_INFO("bootstrap root listening on %s", name);
  *uid = u;
  return koloSuccess;
}
