/* polled_pipe.c - see polled_pipe.h. */
#define _GNU_SOURCE
#include "util/polled_pipe.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/net.h"
#include "transport/proxy.h"
#include "transport/socket.h"

#define POISON 0xEE

typedef struct {
  const kt_polled_cfg *cfg;
  kolo_net_pipe *send, *recv;
  uint32_t *slices;       /* per launch */
  uint32_t total;         /* slices in all launches */
  uint32_t *bytes;        /* per global step */
  _Atomic int released;   /* launches the launcher let run */
  _Atomic uint32_t sent, drained;
  _Atomic int failed;
  char err[256];
  pthread_mutex_t err_mu;
} run_state;

static void fail(run_state *st, const char *fmt, unsigned a, unsigned b) {
  pthread_mutex_lock(&st->err_mu);
  if (!atomic_load(&st->failed)) snprintf(st->err, sizeof st->err, fmt, a, b);
  atomic_store(&st->failed, 1);
  pthread_mutex_unlock(&st->err_mu);
}

static unsigned char pattern(unsigned seed, uint32_t step, size_t i) {
  return (unsigned char)((seed * 2654435761u) ^ (step * 40503u) ^ (uint32_t)(i * 131u + 7u));
}

/* First global step of launch k. */
static uint32_t launch_start(const run_state *st, int k) {
  uint32_t s = 0;
  for (int i = 0; i < k; i++) s += st->slices[i];
  return s;
}

/* While a thread waits on pipe p: a kernel only yields; an executor takes
 * the pipe's turn itself, and now and then sleeps on its fds. */
static void idle(const run_state *st, kolo_net_pipe *p, unsigned *polls) {
  if (!st->cfg->caller) {
    sched_yield();
    return;
  }
  if (++*polls % 64 == 0) kolo_net_pipe_wait(p, NULL, 200);
  else kolo_net_pipe_pull(p);
}

/* Waits until `ready` says yes, the run failed, or stall_ms passed. */
#define WAIT_FOR(st, p, cond, what, step)                                                \
  do {                                                                                   \
    int64_t t0_ = kolo_now_ms();                                                         \
    unsigned polls_ = 0;                                                                 \
    while (!(cond)) {                                                                    \
      if (atomic_load(&(st)->failed)) return NULL;                                       \
      if (kolo_now_ms() - t0_ > (st)->cfg->stall_ms) {                                   \
        fail(st, "stalled %u ms waiting for " what " of step %u (nothing moved the pipe)", \
             (unsigned)(st)->cfg->stall_ms, (unsigned)(step));                           \
        return NULL;                                                                     \
      }                                                                                  \
      idle(st, p, &polls_);                                                              \
    }                                                                                    \
  } while (0)

/* The sending "kernel": fills each slot, declares its bytes, bumps tail. */
static void *sender(void *arg) {
  run_state *st = arg;
  kolo_net_pipe *p = st->send;
  for (int k = 0; k < st->cfg->launches; k++) {
    WAIT_FOR(st, p, atomic_load(&st->released) > k, "launch", k);
    uint32_t first = launch_start(st, k);
    for (uint32_t step = first; step < first + st->slices[k]; step++) {
      WAIT_FOR(st, p, step - atomic_load_explicit(&p->ctrl->head, memory_order_acquire) < p->nslots, "credit", step);
      unsigned char *slot = (unsigned char *)p->slots + (size_t)(step % p->nslots) * p->slot_bytes;
      for (size_t i = 0; i < st->bytes[step]; i++) slot[i] = pattern(st->cfg->seed, step, i);
      p->ctrl->filled[step % KOLO_CONN_MAX_SLOTS] = st->bytes[step];
      atomic_store_explicit(&p->ctrl->tail, step + 1, memory_order_release); /* no wake, no ring */
      if (st->cfg->caller) kolo_net_pipe_kick(p);
    }
    atomic_store(&st->sent, first + st->slices[k]);
  }
  return NULL;
}

/* The receiving "kernel": checks each slot, poisons it, bumps head. */
static void *receiver(void *arg) {
  run_state *st = arg;
  kolo_net_pipe *p = st->recv;
  for (int k = 0; k < st->cfg->launches; k++) {
    WAIT_FOR(st, p, atomic_load(&st->released) > k, "launch", k);
    uint32_t first = launch_start(st, k);
    for (uint32_t step = first; step < first + st->slices[k]; step++) {
      WAIT_FOR(st, p, (int32_t)(atomic_load_explicit(&p->ctrl->tail, memory_order_acquire) - step) > 0, "data", step);
      unsigned char *slot = (unsigned char *)p->slots + (size_t)(step % p->nslots) * p->slot_bytes;
      for (size_t i = 0; i < p->slot_bytes; i++) {
        unsigned char want = i < st->bytes[step] ? pattern(st->cfg->seed, step, i) : POISON;
        if (slot[i] != want) {
          fail(st, i < st->bytes[step] ? "step %u: byte %u differs from what was sent"
                                       : "step %u: byte %u past the filled bytes was overwritten",
               step, (unsigned)i);
          return NULL;
        }
      }
      memset(slot, POISON, p->slot_bytes);
      atomic_store_explicit(&p->ctrl->head, step + 1, memory_order_release);
      if (st->cfg->caller) kolo_net_pipe_kick(p);
    }
    atomic_store(&st->drained, first + st->slices[k]);
  }
  return NULL;
}

static kolo_net_pipe *pipe_make(const kt_polled_cfg *cfg, const kolo_net_provider *net, int is_send) {
  kolo_net_pipe *p = calloc(1, sizeof *p);
  size_t bytes = KOLO_CONN_CTRL_BYTES + cfg->slot_bytes * cfg->nslots;
  bytes = (bytes + 4095) / 4096 * 4096; /* aligned_alloc: a multiple of the alignment */
  void *mem = p ? aligned_alloc(4096, bytes) : NULL;
  if (mem == NULL) {
    free(p);
    return NULL;
  }
  memset(mem, 0, KOLO_CONN_CTRL_BYTES);
  memset((char *)mem + KOLO_CONN_CTRL_BYTES, POISON, bytes - KOLO_CONN_CTRL_BYTES);
  p->net = net;
  p->mem = mem;
  p->ctrl = mem;
  p->slots = (char *)mem + KOLO_CONN_CTRL_BYTES;
  p->nslots = cfg->nslots;
  p->slot_bytes = cfg->slot_bytes;
  p->is_send = is_send;
  p->self = is_send ? 0 : 1;
  p->peer = is_send ? 1 : 0;
  p->flush_ms = 5000;
  p->polled = !cfg->caller;
  p->caller_bytes = cfg->caller_bytes;
  snprintf(p->who, sizeof p->who, "rank %d (loopback)", p->peer);
  return p;
}

static void pipe_free(kolo_net_pipe *p) {
  if (p == NULL) return;
  kolo_proxy_remove(p, 0);
  if (p->comm) p->net->close(p->comm);
  free(p->mem);
  free(p);
}

typedef struct {
  const kolo_net_provider *net;
  kolo_net_handle h;
  void *comm;
  koloResult_t res;
  kolo_errbuf eb;
} connect_arg;

static void *connect_main(void *arg) {
  connect_arg *a = arg;
  a->res = a->net->connect(&a->h, 0, kolo_deadline(10000), 10000, "rank 1 (loopback)", &a->comm, &a->eb);
  return NULL;
}

/* Draws each launch's slice count and each step's filled bytes (small,
 * whole and in between) from the seed; 1 when out of memory. */
static int plan_run(run_state *st, const kt_polled_cfg *cfg) {
  st->cfg = cfg;
  st->slices = calloc((size_t)cfg->launches, sizeof *st->slices);
  if (st->slices == NULL) return 1;
  srand(cfg->seed);
  for (int k = 0; k < cfg->launches; k++)
    st->total += st->slices[k] = 1 + (uint32_t)rand() % (uint32_t)cfg->max_slices;
  st->bytes = calloc(st->total, sizeof *st->bytes);
  if (st->bytes == NULL) return 1;
  for (uint32_t s = 0; s < st->total; s++)
    st->bytes[s] = s % 5 == 0 ? (uint32_t)cfg->slot_bytes : 1 + (uint32_t)rand() % (uint32_t)cfg->slot_bytes;
  return 0;
}

/* Connects the send pipe to the receive pipe over loopback and hands both
 * to the proxy; 1 with err filled on failure. */
static int connect_pair(run_state *st, const kolo_net_provider *net, char *err, size_t errlen) {
  kolo_errbuf eb = {0};
  connect_arg ca = {0};
  ca.net = net;
  void *lcomm = NULL;
  struct sockaddr_storage local = {0};
  struct sockaddr_in *v4 = (struct sockaddr_in *)&local;
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (net->listen(&local, 0, &ca.h, &lcomm, &eb) != koloSuccess) {
    snprintf(err, errlen, "listen: %s", eb.msg);
    return 1;
  }
  pthread_t ct;
  pthread_create(&ct, NULL, connect_main, &ca);
  koloResult_t ares = net->accept(lcomm, kolo_deadline(10000), 10000, "rank 0 (loopback)", &st->recv->comm, &eb);
  pthread_join(ct, NULL);
  net->close_listen(lcomm);
  st->send->comm = ca.comm;
  if (ares != koloSuccess || ca.res != koloSuccess) {
    snprintf(err, errlen, "connect/accept: %s / %s", eb.msg, ca.eb.msg);
    return 1;
  }
  if (kolo_proxy_add(st->send, &eb) != koloSuccess || kolo_proxy_add(st->recv, &eb) != koloSuccess) {
    snprintf(err, errlen, "kolo_proxy_add: %s", eb.msg);
    return 1;
  }
  return 0;
}

/* Lets the "kernels" run launch by launch, posting to the proxy as the
 * CUDA launcher does (launch, then post), with a pause between launches in
 * which the proxy goes to sleep. */
static void drive_launches(run_state *st) {
  const kt_polled_cfg *cfg = st->cfg;
  for (int k = 0; k < cfg->launches && !atomic_load(&st->failed); k++) {
    uint32_t end = launch_start(st, k) + st->slices[k];
    atomic_store(&st->released, k + 1);
    if (!cfg->caller) {
      kolo_proxy_post(st->send, st->slices[k]);
      kolo_proxy_post(st->recv, st->slices[k]);
    }
    while (!atomic_load(&st->failed) && (atomic_load(&st->sent) != end || atomic_load(&st->drained) != end))
      usleep(50);
    usleep((useconds_t)cfg->pause_us);
  }
}

/* Runs the sender and receiver threads over the connected pair; 1 with err
 * filled when either saw wrong bytes or a pipe failed. */
static int run_kernels(run_state *st, char *err, size_t errlen) {
  pthread_t ts, tr;
  pthread_create(&ts, NULL, sender, st);
  pthread_create(&tr, NULL, receiver, st);
  drive_launches(st);
  pthread_join(ts, NULL);
  pthread_join(tr, NULL);
  if (atomic_load(&st->failed)) {
    snprintf(err, errlen, "%s", st->err);
    return 1;
  }
  if (st->send->failed || st->recv->failed) {
    snprintf(err, errlen, "a pipe failed: %s%s", st->send->err.msg, st->recv->err.msg);
    return 1;
  }
  return 0;
}

int kt_polled_pipe_run(const kt_polled_cfg *cfg, char *err, size_t errlen) {
  const kolo_net_provider *net = kolo_net_find(cfg->provider);
  if (net == NULL) {
    snprintf(err, errlen, "no provider named %s", cfg->provider);
    return 1;
  }
  run_state st;
  memset(&st, 0, sizeof st);
  pthread_mutex_init(&st.err_mu, NULL);
  int rc = 1;
  if (plan_run(&st, cfg) == 0) {
    st.send = pipe_make(cfg, net, 1);
    st.recv = pipe_make(cfg, net, 0);
  }
  if (st.send == NULL || st.recv == NULL)
    snprintf(err, errlen, "out of memory");
  else if (connect_pair(&st, net, err, errlen) == 0)
    rc = run_kernels(&st, err, errlen);
  pipe_free(st.send);
  pipe_free(st.recv);
  free(st.slices);
  free(st.bytes);
  pthread_mutex_destroy(&st.err_mu);
  return rc;
}
