/* net_listen.c - the process's shared listeners (net_listen.h). */
#include "transport/net_listen.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "transport/socket.h"

#define TOKEN_BYTES KOLO_NET_LISTEN_TOKEN_BYTES
/* A connection's hello arrives within this, or the connection is refused. */
#define HELLO_WAIT_MS 1000
/* How long the accepting thread polls before it lets another pipe's
 * thread see what it filed; how long a waiting thread sleeps between looks. */
#define ACCEPT_TURN_MS 20
#define WAIT_TURN_US 1000L

typedef struct filed {
  int fd;
  uint8_t token[TOKEN_BYTES];
  struct filed *next;
  unsigned char hello[]; /* the kind's decoded hello */
} filed;

typedef struct reg {
  uint8_t token[TOKEN_BYTES];
  int nstreams;
  struct reg *next;
} reg;

struct kolo_net_listener {
  struct sockaddr_storage addr; /* bound: the address and port peers connect to */
  const kolo_net_hello_kind *kind;
  int fd, users, accepting;
  pid_t pid;
  reg *regs;
  filed *filed;
  kolo_net_listener *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kolo_net_listener *listeners;

static int same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET)
    return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
  const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a, *y = (const struct sockaddr_in6 *)b;
  return memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0 && x->sin6_scope_id == y->sin6_scope_id;
}

static void free_listener(kolo_net_listener *l) {
  for (reg *r = l->regs, *n; r; r = n) {
    n = r->next;
    free(r);
  }
  for (filed *f = l->filed, *n; f; f = n) {
    n = f->next;
    close(f->fd);
    free(f);
  }
  if (l->fd >= 0) close(l->fd);
  free(l);
}

/* A forked child's copies of its parent's listeners: closed, forgotten
 * (the parent's stay open). Under lock. */
static void forget_foreign(void) {
  pid_t me = getpid();
  for (kolo_net_listener **p = &listeners; *p;) {
    kolo_net_listener *l = *p;
    if (l->pid == me) {
      p = &l->next;
      continue;
    }
    *p = l->next;
    free_listener(l);
  }
}

static kolo_net_listener *find_or_make(const struct sockaddr_storage *local, const kolo_net_hello_kind *kind,
                                       kolo_errbuf *eb) {
  for (kolo_net_listener *l = listeners; l; l = l->next)
    if (l->kind == kind && same_address(&l->addr, local)) return l;
  kolo_net_listener *l = calloc(1, sizeof *l);
  if (l == NULL) {
    kolo_error(eb, koloSystemError, "out of memory for a network listener");
    return NULL;
  }
  l->addr = *local;
  l->kind = kind;
  kolo_addr_set_port(&l->addr, 0);
  if (kolo_sock_listen(&l->addr, eb, &l->fd) != koloSuccess) {
    free(l);
    return NULL;
  }
  l->pid = getpid();
  l->next = listeners;
  listeners = l;
  return l;
}

koloResult_t kolo_net_listener_join(const struct sockaddr_storage *local, const kolo_net_hello_kind *kind,
                                    const uint8_t *token, int nstreams, kolo_net_listener **out,
                                    struct sockaddr_storage *addr, kolo_errbuf *eb) {
  reg *r = calloc(1, sizeof *r);
  if (r == NULL) return kolo_error(eb, koloSystemError, "out of memory for a network listener");
  memcpy(r->token, token, TOKEN_BYTES);
  r->nstreams = nstreams;
  pthread_mutex_lock(&lock);
  forget_foreign();
  kolo_net_listener *l = find_or_make(local, kind, eb);
  if (l != NULL) {
    r->next = l->regs;
    l->regs = r;
    l->users++;
    *addr = l->addr;
    *out = l;
  }
  pthread_mutex_unlock(&lock);
  if (l == NULL) free(r);
  return l ? koloSuccess : koloSystemError;
}

static int token_is(const uint8_t *a, const uint8_t *b) { return kolo_secret_equal(a, b, TOKEN_BYTES); }

/* Under lock: the registration of token, NULL if none. */
static reg **reg_of(kolo_net_listener *l, const uint8_t *token) {
  for (reg **p = &l->regs; *p; p = &(*p)->next)
    if (token_is((*p)->token, token)) return p;
  return NULL;
}

static void unlink_listener(kolo_net_listener *l) {
  for (kolo_net_listener **p = &listeners; *p; p = &(*p)->next)
    if (*p == l) {
      *p = l->next;
      return;
    }
}

void kolo_net_listener_leave(kolo_net_listener *l, const uint8_t *token) {
  if (l == NULL) return;
  pthread_mutex_lock(&lock);
  reg **r = reg_of(l, token);
  if (r) {
    reg *gone = *r;
    *r = gone->next;
    free(gone);
  }
  for (filed **p = &l->filed; *p;) {
    filed *f = *p;
    if (!token_is(f->token, token)) {
      p = &f->next;
      continue;
    }
    *p = f->next;
    close(f->fd);
    free(f);
  }
  int last = --l->users == 0;
  if (last) unlink_listener(l);
  pthread_mutex_unlock(&lock);
  if (last) free_listener(l);
}

/* Under lock: takes a connection filed under token; 1 when there was one. */
static int unfile(kolo_net_listener *l, const uint8_t *token, int *fd, void *hello) {
  for (filed **p = &l->filed; *p; p = &(*p)->next) {
    filed *f = *p;
    if (!token_is(f->token, token)) continue;
    *p = f->next;
    *fd = f->fd;
    memcpy(hello, f->hello, l->kind->bytes);
    free(f);
    return 1;
  }
  return 0;
}

int kolo_net_listen_read(int fd, int64_t soon, uint8_t *m, size_t len, uint32_t magic, uint32_t magic_v1,
                         size_t *got, char *why, size_t why_len) {
  kolo_errbuf tmp = {0};
  uint32_t version;
  *got = KOLO_NET_HELLO_PREFIX_BYTES;
  int ok = kolo_sock_recv_all(fd, m, *got, soon, "a connecting peer", &tmp) == koloSuccess;
  if (ok && kolo_net_hello_prefix(m, *got, magic, magic_v1, &version) == KOLO_NET_WIRE_OK) {
    ok = kolo_sock_recv_all(fd, m + *got, len - *got, soon, "a connecting peer", &tmp) == koloSuccess;
    *got = len;
  }
  if (!ok) snprintf(why, why_len, "it sent no complete hello");
  return ok ? 0 : -1;
}

/* Under lock: NULL when a pipe registered token with nstreams streams,
 * else why the connection presenting them is no pipe's. */
static const char *unclaimed(kolo_net_listener *l, const uint8_t *token, uint32_t nstreams) {
  reg **r = reg_of(l, token);
  if (r == NULL) return "it did not present a pipe's token";
  return nstreams == (uint32_t)(*r)->nstreams ? NULL : "its stream count does not match";
}

/* Files fd under its hello's token when a pipe registered that token with
 * as many streams; else refuses it, saying why. */
static void file_or_refuse(kolo_net_listener *l, int fd, const struct sockaddr_storage *from, int64_t deadline) {
  filed *f = calloc(1, sizeof *f + l->kind->bytes);
  uint32_t nstreams = 0;
  char why[160] = "out of memory";
  int64_t soon = kolo_deadline(HELLO_WAIT_MS);
  if (deadline != 0 && deadline < soon) soon = deadline;
  int keep = f != NULL && l->kind->read(fd, soon, f->hello, f->token, &nstreams, why, sizeof why) == 0;
  pthread_mutex_lock(&lock);
  const char *bad = keep ? unclaimed(l, f->token, nstreams) : NULL;
  if (bad != NULL) {
    snprintf(why, sizeof why, "%s", bad);
    keep = 0;
  }
  if (keep) {
    f->fd = fd;
    f->next = l->filed;
    l->filed = f;
  }
  pthread_mutex_unlock(&lock);
  if (keep) return;
  free(f);
  char a[80];
  kolo_addr_str(from, a, sizeof a);
  KOLO_WARN("refused a network connection (%s) from %s: %s", l->kind->name, a, why);
  close(fd);
}

/* The accepting thread's turn: waits up to ACCEPT_TURN_MS for a connection
 * and files it. */
static koloResult_t accept_turn(kolo_net_listener *l, int64_t deadline, kolo_errbuf *eb) {
  int64_t turn = kolo_deadline(ACCEPT_TURN_MS);
  struct pollfd p = {l->fd, POLLIN, 0};
  int n = kolo_poll(&p, 1, deadline != 0 && deadline < turn ? deadline : turn);
  if (n < 0) return kolo_syserror(eb, errno, "poll on the network listener failed");
  if (n == 0) return koloSuccess;
  struct sockaddr_storage from;
  int fd = -1;
  koloResult_t res = kolo_sock_accept(l->fd, &from, eb, &fd);
  if (res == koloSuccess && fd >= 0) file_or_refuse(l, fd, &from, deadline);
  return res;
}

koloResult_t kolo_net_listener_take(kolo_net_listener *l, const uint8_t *token, int64_t deadline, int *fd,
                                    void *hello, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  pthread_mutex_lock(&lock);
  while (res == koloSuccess && !unfile(l, token, fd, hello)) {
    if (deadline != 0 && kolo_now_ms() >= deadline) {
      res = koloTimeout;
      break;
    }
    int mine = !l->accepting;
    l->accepting = 1;
    pthread_mutex_unlock(&lock);
    if (mine) {
      res = accept_turn(l, deadline, eb);
    } else {
      kolo_nap_us(WAIT_TURN_US);
    }
    pthread_mutex_lock(&lock);
    if (mine) l->accepting = 0;
  }
  pthread_mutex_unlock(&lock);
  return res;
}
