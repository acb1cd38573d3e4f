/* proxy.c - the callers' turns and the proxy thread (see proxy.h). */
#include "transport/proxy.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "transport/socket.h"

#define PROXY_EVENTS 64
#define PROXY_SLEEP_MS 1
/* epoll data of the two eventfds; a pipe's is its table slot and the
 * slot's generation (a stale event of a pipe gone finds another one). */
#define BELL_ID UINT64_MAX
#define STOP_ID (UINT64_MAX - 1)

static int idle_ms = 50;        /* KOLO_PROXY_IDLE_MS */

static pthread_mutex_t life_mu = PTHREAD_MUTEX_INITIALIZER;  /* thread start / stop */
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER; /* the pipes; held for the thread's turns */
static pthread_mutex_t hand_mu = PTHREAD_MUTEX_INITIALIZER;  /* the hand-off list */
static pthread_mutex_t lazy_mu = PTHREAD_MUTEX_INITIALIZER;  /* credits owed lazily */
static kolo_net_pipe *lazy_head;
static _Atomic int nlazy;
static kolo_net_pipe **table;
static uint32_t *gens;
static int table_cap, npipes, npolled;
static kolo_net_pipe *handed;
static int running;
static pthread_t thread;
static _Atomic int stop_flag;
static int ep = -1, bell_fd = -1, stop_fd = -1;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t caller_turns;

/* A child of fork() has no proxy thread and must not touch its parent's
 * pipes: it starts from nothing (the parent's fds are the parent's). */
static void atfork_child(void) {
  pthread_mutex_init(&life_mu, NULL);
  pthread_mutex_init(&table_mu, NULL);
  pthread_mutex_init(&hand_mu, NULL);
  pthread_mutex_init(&lazy_mu, NULL);
  lazy_head = NULL;
  atomic_store(&nlazy, 0);
  table = NULL;
  gens = NULL;
  table_cap = npipes = npolled = 0;
  handed = NULL;
  running = 0;
  atomic_store(&stop_flag, 0);
  if (ep >= 0) close(ep);
  if (bell_fd >= 0) close(bell_fd);
  if (stop_fd >= 0) close(stop_fd);
  ep = bell_fd = stop_fd = -1;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

static void ring(int fd) {
  if (fd >= 0) kolo_doorbell_ring(fd);
}

/* ---- what the proxy's epoll watches of a pipe ---------------------------------- */

static int find_fd(const struct pollfd *pf, int n, int fd) {
  for (int i = 0; i < n; i++)
    if (pf[i].fd == fd) return i;
  return -1;
}

static uint32_t epoll_events(short ev) { return (ev & POLLIN ? EPOLLIN : 0) | (ev & POLLOUT ? EPOLLOUT : 0); }

/* One epoll_ctl; 0, or the errno. */
static int watch_ctl(kolo_net_pipe *p, int op, int fd, short ev) {
  struct epoll_event e = {.events = epoll_events(ev), .data.u64 = p->key};
  return epoll_ctl(ep, op, fd, &e) == 0 ? 0 : errno;
}

/* The proxy cannot watch the pipe: it fails, saying why (never skipped). */
static void watch_failed(kolo_net_pipe *p, int err) {
  kolo_syserror(&p->err, err, "rank %d: the network proxy cannot watch the pipe %s %s (epoll_ctl)", p->self,
                p->is_send ? "to" : "from", p->who);
  p->failed = 1;
  uint32_t expected = 0, word = ((uint32_t)KOLO_STOP_ERROR << 24) | (uint32_t)(p->self + 1);
  atomic_compare_exchange_strong(&p->ctrl->abort, &expected, word);
  kolo_futex_wake(&p->ctrl->tail);
  kolo_futex_wake(&p->ctrl->head);
}

/* With p->mu held: the fds the proxy watches become those the pipe needs
 * watched now (none while its executor can be left to move it). */
static void update_watch(kolo_net_pipe *p) {
  struct pollfd want[KOLO_NET_PIPE_MAX_FDS];
  int n = 0;
  if (kolo_net_pipe_needs_proxy(p)) n = p->net->pollfds(p->comm, want, KOLO_NET_PIPE_MAX_FDS);
  else atomic_store_explicit(&p->bulk, 0, memory_order_relaxed);
  if (n == 0 && p->nwatched == 0) return;
  int err = 0;
  for (int i = 0; i < p->nwatched && err == 0; i++)
    if (find_fd(want, n, p->watched[i].fd) < 0) err = watch_ctl(p, EPOLL_CTL_DEL, p->watched[i].fd, 0);
  for (int i = 0; i < n && err == 0; i++) {
    int j = find_fd(p->watched, p->nwatched, want[i].fd);
    if (j < 0) err = watch_ctl(p, EPOLL_CTL_ADD, want[i].fd, want[i].events);
    else if (p->watched[j].events != want[i].events) err = watch_ctl(p, EPOLL_CTL_MOD, want[i].fd, want[i].events);
  }
  memcpy(p->watched, want, (size_t)n * sizeof *want);
  p->nwatched = n;
  if (err != 0) watch_failed(p, err);
}

/* Forgets every fd of the pipe (before its connection closes them). */
static void unwatch(kolo_net_pipe *p) {
  for (int i = 0; i < p->nwatched; i++) watch_ctl(p, EPOLL_CTL_DEL, p->watched[i].fd, 0);
  p->nwatched = 0;
}

/* ---- turns ------------------------------------------------------------------------- */

/* Takes the pipe's turns asked for so far, unless another thread holds it:
 * that one takes them before it lets go (it looks at `want` after its
 * unlock; the fences pair the two sides' store-then-look).  1 when one of
 * the turns taken here moved something. */
static int drive(kolo_net_pipe *p, unsigned dir) {
  int moved = 0;
  atomic_fetch_or_explicit(&p->want, dir, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  while (atomic_load_explicit(&p->want, memory_order_seq_cst) != 0 && pthread_mutex_trylock(&p->mu) == 0) {
    unsigned asked = atomic_exchange_explicit(&p->want, 0, memory_order_seq_cst);
    if (asked != 0) {
      moved |= kolo_net_pipe_turn(p, asked);
      update_watch(p);
    }
    pthread_mutex_unlock(&p->mu);
    atomic_thread_fence(memory_order_seq_cst);
  }
  return moved;
}

/* The proxy takes over the pipe's output now (a bulk slice, a post). */
static void hand_off(kolo_net_pipe *p) {
  if (atomic_exchange_explicit(&p->handed, 1, memory_order_seq_cst)) return; /* on the list already */
  pthread_mutex_lock(&hand_mu);
  p->handed_next = handed;
  handed = p;
  pthread_mutex_unlock(&hand_mu);
  ring(bell_fd);
}

/* ---- credits owed lazily ------------------------------------------------------------ */

/* A receive end whose drained slots wait for more before they are credited
 * (kolo_net_pipe_kick). */
static void owe_lazily(kolo_net_pipe *p) {
  /* On the list already (it stays there until paid): no lock on the way of
   * a small call.  seq_cst against pay_lazy's clear then look at the head:
   * either this sees the clear and lists the pipe again, or the payment
   * sees the head this executor stored before its kick. */
  if (atomic_load_explicit(&p->lazy, memory_order_seq_cst)) return;
  pthread_mutex_lock(&lazy_mu);
  if (!atomic_load_explicit(&p->lazy, memory_order_relaxed)) {
    atomic_store_explicit(&p->lazy, 1, memory_order_release);
    p->lazy_next = lazy_head;
    lazy_head = p;
    atomic_fetch_add_explicit(&nlazy, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&lazy_mu);
}

/* Credits every lazily owed head of this process (under lazy_mu, so that no
 * pipe leaves meanwhile; drive never blocks).  1 when a turn it took moved
 * something: a payment itself counts. */
static int pay_lazy(void) {
  if (atomic_load_explicit(&nlazy, memory_order_relaxed) == 0) return 0;
  int moved = 0;
  pthread_mutex_lock(&lazy_mu);
  for (kolo_net_pipe *p = lazy_head; p; p = p->lazy_next) {
    atomic_store_explicit(&p->lazy, 0, memory_order_seq_cst);
    moved |= drive(p, KOLO_NET_OUT | KOLO_NET_PIPE_PAY);
  }
  lazy_head = NULL;
  atomic_store_explicit(&nlazy, 0, memory_order_relaxed);
  pthread_mutex_unlock(&lazy_mu);
  return moved;
}

static void unlist_lazy(kolo_net_pipe *p) {
  pthread_mutex_lock(&lazy_mu);
  for (kolo_net_pipe **pp = &lazy_head; *pp; pp = &(*pp)->lazy_next)
    if (*pp == p) {
      *pp = p->lazy_next;
      atomic_fetch_sub_explicit(&nlazy, 1, memory_order_relaxed);
      break;
    }
  atomic_store_explicit(&p->lazy, 0, memory_order_release);
  pthread_mutex_unlock(&lazy_mu);
}

/* ---- the callers' turns ------------------------------------------------------------- */

void kolo_net_pipe_kick(kolo_net_pipe *p) {
  if (!p->is_send) {
    uint32_t head = atomic_load_explicit(&p->ctrl->head, memory_order_relaxed);
    uint32_t owed = head - atomic_load_explicit(&p->credit_sent, memory_order_relaxed);
    if (!kolo_net_pipe_credit_due(owed, p->nslots)) { /* the sender has enough window left: later */
      owe_lazily(p);
      return;
    }
    drive(p, KOLO_NET_OUT | KOLO_NET_PIPE_PAY);
    atomic_fetch_add_explicit(&caller_turns, 1, memory_order_relaxed);
    return;
  } else if (atomic_load_explicit(&p->bulk, memory_order_relaxed) || kolo_net_pipe_last_bytes(p) > p->caller_bytes) {
    atomic_store_explicit(&p->bulk, 1, memory_order_relaxed);
    hand_off(p);
    return;
  }
  drive(p, KOLO_NET_OUT);
  atomic_fetch_add_explicit(&caller_turns, 1, memory_order_relaxed);
}

int kolo_net_pipe_sends_from(kolo_net_pipe *p, size_t len) {
  /* a bulk slice is the proxy's share, from the slot: it sends while this thread reduces */
  return p->send_direct && !atomic_load_explicit(&p->bulk, memory_order_relaxed) && len <= p->caller_bytes;
}

void kolo_net_pipe_send(kolo_net_pipe *p, kolo_connector *c, const void *src, size_t len) {
  pthread_mutex_lock(&p->mu); /* src must be out or copied before this returns: no trylock */
  kolo_net_pipe_turn_from(p, c, src, len);
  update_watch(p);
  pthread_mutex_unlock(&p->mu);
  drive(p, 0); /* turns another thread asked for while this one held the pipe */
  atomic_fetch_add_explicit(&caller_turns, 1, memory_order_relaxed);
}

/* Pulls without anything arriving, in a row, after which a waiting thread
 * pays the credits owed lazily: a peer may wait for them (a wait of a
 * round trip's length does not get here). */
#define PULLS_BEFORE_PAYING 64
static _Thread_local unsigned idle_pulls;

int kolo_net_pipe_pull(kolo_net_pipe *p) {
  int moved = drive(p, KOLO_NET_OUT | KOLO_NET_IN);
  if (moved) idle_pulls = 0;
  else if (++idle_pulls == PULLS_BEFORE_PAYING) pay_lazy();
  atomic_fetch_add_explicit(&caller_turns, 1, memory_order_relaxed);
  return moved;
}

void kolo_net_pipe_wait(kolo_net_pipe *p, kolo_connector *c, int timeout_us) {
  struct pollfd pf[KOLO_NET_PIPE_MAX_FDS];
  int n = 0, held = 1;
  if (pthread_mutex_trylock(&p->mu) == 0) {
    held = 0;
    if (!p->failed) n = p->net->pollfds(p->comm, pf, KOLO_NET_PIPE_MAX_FDS);
    pthread_mutex_unlock(&p->mu);
    /* a turn of another thread that ended before this lock may have
     * published what c waits for, and left the socket with nothing to say */
    if (c != NULL && kolo_conn_ready(c)) return;
  }
  if (!(p->net->flags & KOLO_NET_EXACT_POLL) && timeout_us > PROXY_SLEEP_MS * 1000) timeout_us = PROXY_SLEEP_MS * 1000;
  struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000L};
  /* before sleeping: a peer may wait for them.  A wait that paid looks
   * again instead (the peer it paid may answer at once, and a provider may
   * have taken in what arrived); the next wait owes nothing and sleeps. */
  if (pay_lazy()) {
    kolo_net_pipe_pull(p);
    return;
  }
  /* Another thread in a turn of this pipe (the proxy) may take in what
   * this wait is for, leaving the socket with nothing to say: it
   * publishes what it moved on the end's counter, so sleep on that. */
  if (held && c != NULL) kolo_conn_sleep(c, timeout_us);
  else if (n > 0) ppoll(pf, (nfds_t)n, &ts, NULL);
  else nanosleep(&ts, NULL);
  kolo_net_pipe_pull(p);
}

uint64_t kolo_proxy_caller_turns(void) { return atomic_load_explicit(&caller_turns, memory_order_relaxed); }

void kolo_proxy_post(kolo_net_pipe *p, uint32_t slices) {
  if (slices == 0) return;
  atomic_fetch_add_explicit(&p->due, slices, memory_order_seq_cst);
  hand_off(p);
}

/* ---- the thread's phases ----------------------------------------------------------- */

static kolo_net_pipe *pipe_of_key(uint64_t key) {
  uint32_t id = (uint32_t)key;
  if ((int)id >= table_cap || table[id] == NULL || gens[id] != (uint32_t)(key >> 32)) return NULL;
  return table[id];
}

static void drain_eventfd(int fd) {
  uint64_t n;
  if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN && errno != EINTR)
    KOLO_WARN("the network proxy's eventfd failed: %s", strerror(errno));
}

/* The pipes handed over since the last look. */
static int take_hand_offs(void) {
  pthread_mutex_lock(&hand_mu);
  kolo_net_pipe *p = handed;
  handed = NULL;
  pthread_mutex_unlock(&hand_mu);
  int moved = 0;
  while (p) {
    /* Its link is read before its flag clears: from then on a hand-off may
     * put it on the list again, rewriting the link. */
    kolo_net_pipe *next = p->handed_next;
    atomic_store_explicit(&p->handed, 0, memory_order_seq_cst);
    moved |= drive(p, KOLO_NET_OUT | KOLO_NET_IN);
    p = next;
  }
  return moved;
}

/* A turn of every pipe that needs the proxy (stop words, missed events). */
static int sweep(void) {
  int moved = 0;
  for (int i = 0; i < table_cap; i++) {
    kolo_net_pipe *p = table[i];
    if (p == NULL || pthread_mutex_trylock(&p->mu) != 0) continue;
    int needs = kolo_net_pipe_needs_proxy(p);
    pthread_mutex_unlock(&p->mu);
    if (needs) moved |= drive(p, KOLO_NET_OUT | KOLO_NET_IN);
  }
  return moved;
}

/* Turns of the polled pipes; 1 when one is hot (proxy.h). */
static int poll_polled(int *moved) {
  int hot = 0;
  for (int i = 0; i < table_cap && npolled > 0; i++) {
    kolo_net_pipe *p = table[i];
    if (p == NULL || !p->polled) continue;
    *moved |= drive(p, KOLO_NET_OUT | KOLO_NET_IN);
    if (pthread_mutex_trylock(&p->mu) == 0) {
      hot |= kolo_net_pipe_hot(p);
      pthread_mutex_unlock(&p->mu);
    } else {
      hot = 1; /* a caller holds it: look again soon */
    }
  }
  return hot;
}

/* What the events say, with table_mu held. */
static int handle_events(const struct epoll_event *ev, int n, int *swept) {
  int moved = 0;
  for (int i = 0; i < n; i++) {
    if (ev[i].data.u64 == BELL_ID) {
      drain_eventfd(bell_fd);
    } else if (ev[i].data.u64 == STOP_ID) {
      drain_eventfd(stop_fd);
      *swept = 1;
    } else {
      kolo_net_pipe *p = pipe_of_key(ev[i].data.u64);
      if (p) moved |= drive(p, KOLO_NET_OUT | KOLO_NET_IN);
    }
  }
  return moved;
}

static void *proxy_main(void *arg) {
  (void)arg;
  struct epoll_event ev[PROXY_EVENTS];
  int hot = 0;
  int64_t next_sweep = kolo_now_ms() + idle_ms;
  while (!atomic_load(&stop_flag)) {
    int64_t now = kolo_now_ms();
    int timeout = hot ? 0 : next_sweep > now ? (int)(next_sweep - now) : 0;
    int n = epoll_wait(ep, ev, PROXY_EVENTS, timeout);
    if (n < 0 && errno != EINTR) {
      KOLO_WARN("the network proxy's epoll_wait failed: %s", strerror(errno));
      kolo_nap_us(PROXY_SLEEP_MS * 1000L);
    }
    int swept = 0, moved = 0;
    pthread_mutex_lock(&table_mu);
    moved |= handle_events(ev, n > 0 ? n : 0, &swept);
    moved |= take_hand_offs();
    if (swept || kolo_now_ms() >= next_sweep) {
      pay_lazy(); /* bounds what a peer waits for them when this rank is outside any call */
      moved |= sweep();
      next_sweep = kolo_now_ms() + idle_ms;
    }
    hot = poll_polled(&moved);
    pthread_mutex_unlock(&table_mu);
    /* A kernel is due to move a counter that nothing will announce: keep
     * looking, handing the CPU to others between looks. */
    if (hot && !moved) sched_yield();
  }
  return NULL;
}

/* ---- pipes in and out ------------------------------------------------------------- */

/* A free slot of the table (growing it); -1 when out of memory. */
static int table_slot(void) {
  for (int i = 0; i < table_cap; i++)
    if (table[i] == NULL) return i;
  int cap = table_cap ? 2 * table_cap : 64;
  kolo_net_pipe **t = realloc(table, (size_t)cap * sizeof *t);
  if (t != NULL) table = t;
  uint32_t *g = t ? realloc(gens, (size_t)cap * sizeof *g) : NULL;
  if (g == NULL) return -1;
  gens = g;
  for (int i = table_cap; i < cap; i++) table[i] = NULL, gens[i] = 0;
  int at = table_cap;
  table_cap = cap;
  return at;
}

/* The epoll set and both eventfds, with the thread (life_mu held). */
static koloResult_t open_fds(kolo_errbuf *eb, const kolo_net_pipe *p) {
  if (ep >= 0) return koloSuccess;
  ep = epoll_create1(EPOLL_CLOEXEC);
  bell_fd = ep < 0 ? -1 : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  stop_fd = bell_fd < 0 ? -1 : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct epoll_event b = {.events = EPOLLIN, .data.u64 = BELL_ID}, s = {.events = EPOLLIN, .data.u64 = STOP_ID};
  if (stop_fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, bell_fd, &b) == 0 && epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &s) == 0)
    return koloSuccess;
  int err = errno;
  if (ep >= 0) close(ep);
  if (bell_fd >= 0) close(bell_fd);
  if (stop_fd >= 0) close(stop_fd);
  ep = bell_fd = stop_fd = -1;
  return kolo_syserror(eb, err, "cannot make the network proxy's epoll set and eventfds for the pipe %s %s",
                       p->is_send ? "to" : "from", p->who);
}

static koloResult_t start_thread(kolo_errbuf *eb, const kolo_net_pipe *p) {
  koloResult_t res = open_fds(eb, p);
  if (res != koloSuccess || running) return res;
  int64_t ms = kolo_param_int("KOLO_PROXY_IDLE_MS");
  idle_ms = ms < 1 ? 1 : ms > 60000 ? 60000 : (int)ms;
  atomic_store(&stop_flag, 0);
  int err = pthread_create(&thread, NULL, proxy_main, NULL);
  if (err != 0)
    return kolo_syserror(eb, err, "cannot start the network proxy thread for the pipe %s %s",
                         p->is_send ? "to" : "from", p->who);
  running = 1;
  return koloSuccess;
}

static koloResult_t enlist(kolo_net_pipe *p, kolo_errbuf *eb) {
  pthread_mutex_lock(&table_mu);
  int id = table_slot();
  if (id >= 0) {
    table[id] = p;
    p->id = id;
    p->key = (uint64_t)gens[id] << 32 | (uint32_t)id;
    npipes++;
    npolled += p->polled;
    p->added = 1;
  }
  pthread_mutex_unlock(&table_mu);
  if (id < 0) return kolo_error(eb, koloSystemError, "out of memory adding the network pipe %s %s",
                                p->is_send ? "to" : "from", p->who);
  return koloSuccess;
}

koloResult_t kolo_proxy_add(kolo_net_pipe *p, kolo_errbuf *eb) {
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_init(&p->mu, NULL);
  atomic_store(&p->want, 0);
  p->nwatched = 0;
  koloResult_t res = kolo_net_pipe_bind(p, eb);
  pthread_mutex_lock(&life_mu);
  if (res == koloSuccess) res = start_thread(eb, p);
  if (res == koloSuccess) res = enlist(p, eb);
  if (res == koloSuccess) atomic_store(&p->ctrl->doorbell, stop_fd + 1); /* kolo_conn_stop rings it */
  pthread_mutex_unlock(&life_mu);
  if (res != koloSuccess) pthread_mutex_destroy(&p->mu);
  else if (p->polled) hand_off(p); /* a first look, so that the proxy watches it */
  return res;
}

/* Turns of the pipe until it flushed or the deadline; p->mu held, dropped
 * while it sleeps (the proxy thread moves other pipes). */
static void flush_until(kolo_net_pipe *p, int64_t deadline) {
  for (;;) {
    kolo_net_pipe_turn(p, KOLO_NET_OUT | KOLO_NET_IN);
    if (kolo_net_pipe_flushed(p)) return;
    if (kolo_now_ms() >= deadline) {
      int stopped = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire) != 0;
      KOLO_INFO("rank %d: closing the network pipe %s %s without flushing it (%s)", p->self,
                p->is_send ? "to" : "from", p->who, stopped ? "stopped; its peer reads nothing" : "past the deadline");
      return;
    }
    struct pollfd pf[KOLO_NET_PIPE_MAX_FDS];
    int n = p->net->pollfds(p->comm, pf, KOLO_NET_PIPE_MAX_FDS);
    pthread_mutex_unlock(&p->mu);
    poll(pf, (nfds_t)n, PROXY_SLEEP_MS);
    pthread_mutex_lock(&p->mu);
  }
}

/* Takes p out of the table, the epoll set and the hand-off list: the
 * thread never sees it again.  1 when it was the last pipe. */
static int delist(kolo_net_pipe *p) {
  atomic_store(&p->ctrl->doorbell, 0);
  pthread_mutex_lock(&table_mu);
  unwatch(p);
  table[p->id] = NULL;
  gens[p->id]++;
  npipes--;
  npolled -= p->polled;
  pthread_mutex_lock(&hand_mu);
  for (kolo_net_pipe **pp = &handed; *pp; pp = &(*pp)->handed_next)
    if (*pp == p) {
      *pp = p->handed_next;
      break;
    }
  pthread_mutex_unlock(&hand_mu);
  p->added = 0;
  int last = npipes == 0;
  pthread_mutex_unlock(&table_mu);
  return last;
}

/* The last pipe left: the thread ends (unless a pipe came meanwhile). */
static void stop_thread(void) {
  pthread_mutex_lock(&life_mu);
  pthread_mutex_lock(&table_mu);
  int stop = running && npipes == 0;
  pthread_mutex_unlock(&table_mu);
  if (stop) {
    atomic_store(&stop_flag, 1);
    ring(bell_fd); /* out of its sleep */
    pthread_join(thread, NULL);
    running = 0;
    close(ep);
    close(bell_fd);
    close(stop_fd);
    ep = bell_fd = stop_fd = -1;
    free(table);
    free(gens);
    table = NULL;
    gens = NULL;
    table_cap = 0;
  }
  pthread_mutex_unlock(&life_mu);
}

void kolo_proxy_remove(kolo_net_pipe *p, int64_t deadline) {
  if (!p->added) return;
  if (deadline == 0) deadline = kolo_now_ms() + p->flush_ms;
  pthread_mutex_lock(&p->mu);
  flush_until(p, deadline);
  pthread_mutex_unlock(&p->mu);
  unlist_lazy(p);
  int last = delist(p);
  pthread_mutex_destroy(&p->mu);
  if (last) stop_thread();
}
