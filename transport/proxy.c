/* proxy.c - the network proxy thread (see proxy.h). */
#include "transport/proxy.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/net_devmem.h"
#include "transport/proxy_records.h"
#include "transport/socket.h"

#define PROXY_MAX_FDS 1024
/* Empty passes before sleeping.  Few, and no sched_yield() between them:
 * on a busy machine each yield may hand the CPU away for a whole time
 * slice, while a sleeper woken by its doorbell or a socket runs soon. */
#define PROXY_IDLE_PASSES 4
#define PROXY_SLEEP_MS 1
#define PROXY_GRACE_MS 200
/* The longest sleep (KOLO_PROXY_IDLE_MS, default 50): the doorbell and the
 * sockets wake the proxy at once; this bound only covers what neither
 * announces.  Tests raise it so that a missed wake-up shows as a stall. */
static int idle_ms = 50;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;        /* pipes and their state */
static pthread_mutex_t life_mu = PTHREAD_MUTEX_INITIALIZER;   /* thread start / stop */
static kolo_net_pipe *pipes;
static int npipes;
static int running;
static pthread_t thread;
static _Atomic int stop_flag;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* The doorbell: an eventfd the executors ring (kolo_conn_ring) when they
 * move a counter of a pipe whose doorbell the sleeping proxy armed.  It
 * lives as long as the thread; a pipe is disarmed as it leaves, so no
 * executor rings it after its last pipe is gone. */
static int bell_fd = -1;

/* A child of fork() has no proxy thread and must not touch its parent's
 * pipes: it starts from nothing. */
static void atfork_child(void) {
  pthread_mutex_init(&mu, NULL);
  pthread_mutex_init(&life_mu, NULL);
  pipes = NULL;
  npipes = 0;
  running = 0;
  atomic_store(&stop_flag, 0);
  /* The parent's eventfd, shared: the child makes its own. */
  if (bell_fd >= 0) close(bell_fd);
  bell_fd = -1;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

static char *slot_of(const kolo_net_pipe *p, uint32_t step) {
  return p->slots + (size_t)(step % p->nslots) * p->slot_bytes;
}

static void set_stop(kolo_net_pipe *p, uint32_t word) {
  uint32_t expected = 0;
  atomic_compare_exchange_strong(&p->ctrl->abort, &expected, word);
  kolo_futex_wake(&p->ctrl->tail);
  kolo_futex_wake(&p->ctrl->head);
}

/* The connection is gone: executors waiting on this pipe fail naming the
 * peer (everything that arrived before was delivered already). */
static void pipe_failed(kolo_net_pipe *p) {
  p->failed = 1;
  char why[KOLO_ERR_LEN];
  KOLO_INFO("rank %d: network pipe %s %s: %s", p->self, p->is_send ? "to" : "from", p->who,
            kolo_error_read(&p->err, why, sizeof why));
  set_stop(p, ((uint32_t)KOLO_STOP_DEAD_PEER << 24) | (uint32_t)(p->peer + 1));
}

static koloResult_t pump_control(kolo_net_pipe *p, int *moved) {
  const kolo_net_provider *n = p->net;
  koloResult_t res = koloSuccess;
  if (p->ctrl_gone) return koloSuccess;
  if (!p->is_send) { /* credits */
    uint32_t head = atomic_load_explicit(&p->ctrl->head, memory_order_acquire);
    if (head != p->credit_sent) {
      int queued = 0;
      res = n->ctrl_send(p->comm, KOLO_NET_CTRL_CREDIT, head, &queued, &p->err);
      if (queued) p->credit_sent = head, *moved = 1;
    }
  }
  /* The stop word goes after what is queued (a signature), with its
   * mismatch report when it has one. */
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  if (res == koloSuccess && word != 0 && !p->stop_queued && !p->stop_remote && kolo_proxy_queue_stop(p, word))
    p->stop_queued = 1;
  if (res == koloSuccess) res = kolo_proxy_flush_records(p, moved);
  for (int got = 1; got && res == koloSuccess;) {
    uint32_t kind = 0, value = 0;
    res = n->ctrl_recv(p->comm, &kind, &value, &got, &p->err);
    if (res != koloSuccess || !got) break;
    *moved = 1;
    if (kind == KOLO_NET_CTRL_CREDIT && p->is_send) {
      kolo_conn_publish(&p->ctrl->head, &p->ctrl->head_waiters, value);
    } else if (kind == KOLO_NET_CTRL_STOP) {
      p->stop_remote = 1;
      kolo_proxy_take_stop(p, value); /* its report first: readers look after the word */
      set_stop(p, value);
    } else {
      kolo_proxy_take_record(p, kind, value);
    }
  }
  if (res != koloSuccess && !p->is_send) {
    /* The receiver learns of a dead sender from its data streams, after
     * every byte sent before the close: the control channel may break
     * first (a reset), so only stop watching it. */
    p->ctrl_gone = 1;
    n->ctrl_forget(p->comm);
    return koloSuccess;
  }
  return res;
}

/* One non-blocking turn of a pipe; 1 when something moved. */
static int pipe_progress(kolo_net_pipe *p) {
  if (p->failed) return 0;
  const kolo_net_provider *n = p->net;
  koloResult_t res = koloSuccess;
  int moved = 0;
  if (p->is_send) {
    uint32_t tail = atomic_load_explicit(&p->ctrl->tail, memory_order_acquire);
    while (res == koloSuccess && p->posted != tail) {
      int queued = 0;
      /* A call's signature goes out before its first slice (it may still
       * arrive after it: the receiver waits for it). */
      if (!kolo_proxy_queue_sig(p, p->posted)) break;
      res = kolo_proxy_flush_records(p, &moved);
      if (res != koloSuccess) break;
      /* Only the bytes the executor filled (written before tail moved). */
      size_t len = p->ctrl->filled[p->posted % KOLO_CONN_MAX_SLOTS];
      if (len == 0 || len > p->slot_bytes || !(n->flags & KOLO_NET_SHORT_SENDS)) len = p->slot_bytes;
      res = n->isend(p->comm, slot_of(p, p->posted), len, &p->ids[p->posted % KOLO_NET_MAX_REQS], &queued,
                     &p->err);
      if (!queued) break;
      p->posted++;
      moved = 1;
    }
    while (res == koloSuccess && p->completed != p->posted) {
      int done = 0;
      res = n->test(p->comm, p->ids[p->completed % KOLO_NET_MAX_REQS], &done, &p->err);
      if (!done) break;
      p->completed++;
      moved = 1;
    }
  } else {
    uint32_t head = atomic_load_explicit(&p->ctrl->head, memory_order_acquire);
    while (res == koloSuccess && p->posted - head < p->nslots) {
      int queued = 0;
      res = n->irecv(p->comm, slot_of(p, p->posted), p->slot_bytes, &p->ids[p->posted % KOLO_NET_MAX_REQS],
                     &queued, &p->err);
      if (!queued) break;
      p->posted++;
      moved = 1;
    }
    uint32_t before = p->completed;
    while (res == koloSuccess && p->completed != p->posted) {
      int done = 0;
      res = n->test(p->comm, p->ids[p->completed % KOLO_NET_MAX_REQS], &done, &p->err);
      if (!done) break;
      p->completed++;
    }
    if (p->completed != before) {
      /* GPUDirect: the NIC's writes into GPU memory before the tail the
       * kernel reads (net_devmem.h). */
      if (p->flush_dev1 > 0) kolo_net_devmem_flush(p->flush_dev1 - 1);
      kolo_conn_publish(&p->ctrl->tail, &p->ctrl->tail_waiters, p->completed);
      moved = 1;
    }
  }
  if (res == koloSuccess) res = pump_control(p, &moved);
  if (res != koloSuccess) {
    /* Before calling the peer dead, read what it said last: a stop word
     * sent before it closed travels on the control channel, which may
     * trail the data streams' end by a moment (bounded by the grace). */
    int64_t now = kolo_now_ms();
    if (p->grace_until == 0) p->grace_until = now + PROXY_GRACE_MS;
    int m = 0;
    if (!p->ctrl_gone && !p->stop_remote && pump_control(p, &m) != koloSuccess) p->ctrl_gone = 1;
    if (p->stop_remote || p->ctrl_gone || now >= p->grace_until) {
      pipe_failed(p);
      return 1;
    }
    return 0;
  }
  return moved;
}

/* A polled pipe with posted slices outstanding: the proxy must keep looking
 * at its counters, which nobody announces.  Not once it stopped (a kernel
 * that stops early leaves slices it will never move) and its stop word
 * went out or came in. */
static int pipe_hot(kolo_net_pipe *p) {
  if (!p->polled || p->failed) return 0;
  uint32_t due = atomic_load_explicit(&p->due, memory_order_seq_cst);
  int outstanding = p->is_send ? p->completed != due : (!p->ctrl_gone && p->credit_sent != due);
  if (!outstanding) return 0;
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  return word == 0 || (!p->stop_sent && !p->stop_remote && !p->ctrl_gone);
}

/* Would a turn of this pipe move something that only its counters or its
 * stop word show (the sockets announce the rest)? */
static int pipe_wants_turn(kolo_net_pipe *p) {
  if (p->failed) return 0;
  if (pipe_hot(p)) return 1;
  if (p->is_send && p->posted != atomic_load_explicit(&p->ctrl->tail, memory_order_seq_cst)) return 1;
  if (!p->is_send && !p->ctrl_gone &&
      p->credit_sent != atomic_load_explicit(&p->ctrl->head, memory_order_seq_cst))
    return 1;
  if (kolo_proxy_records_pending(p) && !p->ctrl_gone && !p->net->pending(p->comm)) return 1;
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_seq_cst);
  return word != 0 && !p->stop_sent && !p->stop_remote && !p->ctrl_gone;
}

/* Before sleeping: arms every pipe's doorbell, then looks at the counters
 * once more (an executor stores its counter, then reads the doorbell: one
 * of the two sides sees the other's store).  The poll timeout, or -1 when
 * some pipe has work already. */
static int arm_doorbells(void) {
  int timeout = idle_ms, busy = 0;
  pthread_mutex_lock(&mu);
  for (kolo_net_pipe *p = pipes; p; p = p->next)
    atomic_store_explicit(&p->ctrl->doorbell, bell_fd + 1, memory_order_seq_cst);
  for (kolo_net_pipe *p = pipes; p && !busy; p = p->next) {
    busy = pipe_wants_turn(p);
    /* A broken connection in its grace period is watched closely, and so
     * is a provider whose fds may miss an event. */
    if (!p->failed && (p->grace_until != 0 || !(p->net->flags & KOLO_NET_EXACT_POLL)))
      timeout = PROXY_SLEEP_MS;
  }
  pthread_mutex_unlock(&mu);
  return busy ? -1 : timeout;
}

static void disarm_doorbells(void) {
  pthread_mutex_lock(&mu);
  for (kolo_net_pipe *p = pipes; p; p = p->next)
    atomic_store_explicit(&p->ctrl->doorbell, 0, memory_order_seq_cst);
  pthread_mutex_unlock(&mu);
  uint64_t rings;
  if (read(bell_fd, &rings, sizeof rings) < 0 && errno != EAGAIN && errno != EINTR)
    KOLO_WARN("the network proxy's doorbell failed: %s", strerror(errno));
}

static void *proxy_main(void *arg) {
  (void)arg;
  struct pollfd pf[PROXY_MAX_FDS];
  int idle = 0;
  while (!atomic_load(&stop_flag)) {
    int moved = 0, nfds = 1, hot = 0;
    pf[0] = (struct pollfd){bell_fd, POLLIN, 0};
    pthread_mutex_lock(&mu);
    for (kolo_net_pipe *p = pipes; p; p = p->next) {
      moved |= pipe_progress(p);
      hot |= pipe_hot(p);
      if (!p->failed && nfds < PROXY_MAX_FDS)
        nfds += p->net->pollfds(p->comm, pf + nfds, PROXY_MAX_FDS - nfds);
    }
    pthread_mutex_unlock(&mu);
    if (moved) {
      idle = 0;
      continue;
    }
    if (++idle < PROXY_IDLE_PASSES) continue;
    if (hot) {
      /* A kernel is due to move a counter that nothing will announce:
       * keep looking, handing the CPU to others between looks. */
      sched_yield();
      continue;
    }
    /* Sleep until a socket is ready or an executor rings. */
    int timeout = arm_doorbells();
    if (timeout >= 0 && poll(pf, (nfds_t)nfds, timeout) < 0 && errno != EINTR) {
      struct timespec ts = {0, PROXY_SLEEP_MS * 1000000L};
      nanosleep(&ts, NULL);
    }
    disarm_doorbells();
    idle = 0;
  }
  return NULL;
}

koloResult_t kolo_proxy_add(kolo_net_pipe *p, kolo_errbuf *eb) {
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&life_mu);
  if (bell_fd < 0 && (bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    int err = errno;
    pthread_mutex_unlock(&life_mu);
    return kolo_syserror(eb, err, "cannot make the network proxy's doorbell (eventfd) for the pipe %s %s",
                         p->is_send ? "to" : "from", p->who);
  }
  if (!running) {
    int64_t ms = kolo_param_int("KOLO_PROXY_IDLE_MS");
    idle_ms = ms < 1 ? 1 : ms > 60000 ? 60000 : (int)ms;
    atomic_store(&stop_flag, 0);
    int err = pthread_create(&thread, NULL, proxy_main, NULL);
    if (err != 0) {
      pthread_mutex_unlock(&life_mu);
      return kolo_syserror(eb, err, "cannot start the network proxy thread for the pipe %s %s",
                           p->is_send ? "to" : "from", p->who);
    }
    running = 1;
  }
  pthread_mutex_lock(&mu);
  p->next = pipes;
  pipes = p;
  npipes++;
  p->added = 1;
  p->credit_sent = 0;
  pthread_mutex_unlock(&mu);
  kolo_doorbell_ring(bell_fd); /* a sleeping proxy polls the new pipe's sockets too */
  pthread_mutex_unlock(&life_mu);
  return koloSuccess;
}

/* Done flushing: the stop word, if any, is out, and so is the data up to
 * the tail (once the pipe stopped, only what was posted already: the rest
 * is moot). */
static int flushed(kolo_net_pipe *p) {
  if (p->failed) return 1;
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  if (word != 0 && !p->stop_sent && !p->stop_remote && !p->ctrl_gone) return 0;
  if (kolo_proxy_records_pending(p) && !p->ctrl_gone) return 0;
  if (word == 0 && p->is_send && p->completed != atomic_load_explicit(&p->ctrl->tail, memory_order_acquire))
    return 0;
  return !p->net->pending(p->comm);
}

/* Turns of the pipe until flushed() or the deadline; called with mu held,
 * which it drops while it sleeps (the proxy thread moves other pipes). */
static void flush_until(kolo_net_pipe *p, int64_t deadline) {
  for (;;) {
    pipe_progress(p);
    if (flushed(p)) return;
    if (kolo_now_ms() >= deadline) {
      int stopped = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire) != 0;
      KOLO_INFO("rank %d: closing the network pipe %s %s without flushing it (%s)", p->self,
                p->is_send ? "to" : "from", p->who, stopped ? "stopped; its peer reads nothing" : "past the deadline");
      return;
    }
    struct pollfd pf[KOLO_NET_MAX_STREAMS + 1];
    int n = p->net->pollfds(p->comm, pf, KOLO_NET_MAX_STREAMS + 1);
    pthread_mutex_unlock(&mu);
    poll(pf, (nfds_t)n, PROXY_SLEEP_MS);
    pthread_mutex_lock(&mu);
  }
}

/* Unlinks p (mu held): the proxy thread never sees it again. */
static int unlink_pipe(kolo_net_pipe *p) {
  for (kolo_net_pipe **pp = &pipes; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  atomic_store(&p->ctrl->doorbell, 0); /* no more rings for this pipe */
  npipes--;
  p->added = 0;
  return npipes == 0;
}

/* The last pipe left: the thread ends (unless a pipe came meanwhile). */
static void stop_thread(void) {
  pthread_mutex_lock(&life_mu);
  pthread_mutex_lock(&mu);
  int stop = running && npipes == 0;
  pthread_mutex_unlock(&mu);
  if (stop) {
    atomic_store(&stop_flag, 1);
    kolo_doorbell_ring(bell_fd); /* out of its sleep */
    pthread_join(thread, NULL);
    running = 0;
    close(bell_fd);
    bell_fd = -1;
  }
  pthread_mutex_unlock(&life_mu);
}

void kolo_proxy_remove(kolo_net_pipe *p, int64_t deadline) {
  if (!p->added) return;
  if (deadline == 0) deadline = kolo_now_ms() + p->flush_ms;
  pthread_mutex_lock(&mu);
  flush_until(p, deadline);
  int last = unlink_pipe(p);
  pthread_mutex_unlock(&mu);
  if (last) stop_thread();
}

static _Atomic uint64_t caller_turns;

void kolo_proxy_progress(void) {
  if (pthread_mutex_trylock(&mu) != 0) return; /* the proxy is at it */
  for (kolo_net_pipe *p = pipes; p; p = p->next) pipe_progress(p);
  pthread_mutex_unlock(&mu);
  atomic_fetch_add_explicit(&caller_turns, 1, memory_order_relaxed);
}

uint64_t kolo_proxy_caller_turns(void) { return atomic_load_explicit(&caller_turns, memory_order_relaxed); }

void kolo_proxy_post(kolo_net_pipe *p, uint32_t slices) {
  if (slices == 0) return;
  atomic_fetch_add_explicit(&p->due, slices, memory_order_seq_cst);
  /* A sleeping proxy armed the doorbell, then looked at `due`: one of the
   * two sides sees the other. */
  kolo_conn_ring(p->ctrl);
}
