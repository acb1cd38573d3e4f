/* net_ends.c - see net_ends.h. */
#define _GNU_SOURCE
#include "util/net_ends.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/conn_wire.h"
#include "transport/net.h"
#include "transport/socket.h"

#define MAX_RINGS 16

typedef struct {
  kt_net_event *ev;
  size_t n, head, cap;
} event_log;

struct kt_net_ends {
  const kolo_net_provider *net;
  void *comm[2];
  event_log log[2];
  void *rings[2][MAX_RINGS]; /* every ring an end was bound to (freed last) */
  int nrings[2];
  kolo_net_ring ring[2];
  struct ends_ctx {
    kt_net_ends *e;
    int end;
  } ctx[2];
};

/* ---- environment for one end ------------------------------------------------------ */

typedef struct {
  const char *name;
  char *old;
  int had;
} saved_env;

static saved_env env_set(const char *name, const char *value) {
  saved_env s = {name, NULL, 0};
  const char *o = getenv(name);
  if (o) s.old = strdup(o), s.had = 1;
  if (value) setenv(name, value, 1);
  return s;
}

static void env_restore(saved_env *s) {
  if (s->had) setenv(s->name, s->old, 1);
  else unsetenv(s->name);
  free(s->old);
}

/* ---- sinks ------------------------------------------------------------------------ */

static kt_net_event *push(void *ctx) {
  struct ends_ctx *c = ctx;
  event_log *l = &c->e->log[c->end];
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    kt_net_event *ev = realloc(l->ev, cap * sizeof *ev);
    if (ev == NULL) abort();
    l->ev = ev;
    l->cap = cap;
  }
  kt_net_event *ev = &l->ev[l->n++];
  memset(ev, 0, sizeof *ev);
  return ev;
}

static void sig_out(const kolo_call_sig *s, kt_sig *o) {
  *o = (kt_sig){s->count, s->seq, s->root, s->coll, s->type, s->op};
}

static void sig_in(const kt_sig *s, kolo_call_sig *o) {
  memset(o, 0, sizeof *o);
  o->count = s->count, o->seq = s->seq, o->root = s->root;
  o->coll = s->coll, o->type = s->type, o->op = s->op, o->set = 1;
}

static void on_slice(void *ctx, uint32_t step, uint32_t len, const kolo_call_sig *sig) {
  kt_net_event *ev = push(ctx);
  ev->kind = KT_SLICE, ev->value = step, ev->len = len, ev->has_sig = sig != NULL;
  if (sig) sig_out(sig, &ev->sig);
}

static void on_credit(void *ctx, uint32_t head) {
  kt_net_event *ev = push(ctx);
  ev->kind = KT_CREDIT, ev->value = head;
}

static void on_stop(void *ctx, uint32_t word, const kolo_call_mismatch *r) {
  kt_net_event *ev = push(ctx);
  ev->kind = KT_STOP, ev->value = word, ev->has_report = r != NULL;
  if (r == NULL) return;
  ev->report.rank[0] = r->rank[0], ev->report.rank[1] = r->rank[1];
  sig_out(&r->sig[0], &ev->report.sig[0]);
  sig_out(&r->sig[1], &ev->report.sig[1]);
}

int kt_net_take(kt_net_ends *e, int end, kt_net_event *ev) {
  event_log *l = &e->log[end];
  if (l->head == l->n) return 0;
  *ev = l->ev[l->head++];
  return 1;
}

/* ---- opening ---------------------------------------------------------------------- */

static struct sockaddr_storage loopback(void) {
  struct sockaddr_storage a = {0};
  struct sockaddr_in *v4 = (struct sockaddr_in *)&a;
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* A connection to the listener that sends an HTTP request instead of a hello. */
static int send_stray(const kolo_net_handle *h, int64_t deadline, int *fd, char *err, size_t errlen) {
  kolo_net_listen_info w;
  kolo_errbuf eb = {0};
  char why[200];
  if (kolo_decode_net_handle(h, KOLO_NET_HANDLE_IB_MAGIC, "listener", &w, why, sizeof why) != KOLO_CONN_WIRE_OK &&
      kolo_decode_net_handle(h, KOLO_NET_HANDLE_SOCK_MAGIC, "listener", &w, why, sizeof why) != KOLO_CONN_WIRE_OK) {
    snprintf(err, errlen, "the handle: %s", why);
    return -1;
  }
  char junk[400];
  memset(junk, 'x', sizeof junk);
  memcpy(junk, "GET / HTTP/1.0\r\n\r\n", 18);
  if (kolo_sock_connect(&w.addr, deadline, 2000, "listener", &eb, fd) != koloSuccess ||
      kolo_sock_send_all(*fd, junk, sizeof junk, deadline, "listener", &eb) != koloSuccess) {
    snprintf(err, errlen, "the stray connection: %s", eb.msg);
    return -1;
  }
  return 0;
}

static int connect_both(kt_net_ends *e, const kt_net_cfg *cfg, char *err, size_t errlen) {
  const char *streams_var = strcmp(e->net->name, "ib") == 0 ? "KOLO_IB_QPS_PER_CONN" : "KOLO_SOCKET_NSTREAMS";
  char streams[16];
  snprintf(streams, sizeof streams, "%d", cfg->streams);
  saved_env qs = env_set(streams_var, cfg->streams > 0 ? streams : NULL);
  struct sockaddr_storage lo = loopback();
  kolo_net_handle h;
  void *lcomm = NULL;
  kolo_errbuf eb = {0};
  int t = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000, stray = -1, rc = -1;
  if (e->net->listen(&lo, 0, &h, &lcomm, &eb) != koloSuccess) {
    snprintf(err, errlen, "listen: %s", eb.msg);
  } else if (!cfg->stray || send_stray(&h, kolo_deadline(t), &stray, err, errlen) == 0) {
    saved_env sh = env_set("KOLO_IB_HCA", cfg->send_hca);
    koloResult_t r = e->net->connect(&h, 0, kolo_deadline(t), t, "rank 0 (test)", &e->comm[KT_SEND], &eb);
    env_restore(&sh);
    saved_env rh = env_set("KOLO_IB_HCA", cfg->recv_hca);
    if (r == koloSuccess) r = e->net->accept(lcomm, kolo_deadline(t), t, "rank 1 (test)", &e->comm[KT_RECV], &eb);
    env_restore(&rh);
    if (r != koloSuccess) snprintf(err, errlen, "connect/accept: %s", eb.msg);
    rc = r == koloSuccess ? 0 : -1;
  }
  if (stray >= 0) close(stray);
  if (lcomm) e->net->close_listen(lcomm);
  env_restore(&qs);
  return rc;
}

kt_net_ends *kt_net_open(const kt_net_cfg *cfg, char *err, size_t errlen) {
  kt_net_ends *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->net = kolo_net_find(cfg->provider);
  for (int end = 0; end < 2; end++) e->ctx[end] = (struct ends_ctx){e, end};
  if (e->net == NULL) {
    snprintf(err, errlen, "no provider named %s", cfg->provider);
  } else if (connect_both(e, cfg, err, errlen) == 0) {
    return e;
  }
  kt_net_free(e);
  return NULL;
}

void kt_net_close_end(kt_net_ends *e, int end) {
  if (e->comm[end]) e->net->close(e->comm[end]);
  e->comm[end] = NULL;
}

void kt_net_free(kt_net_ends *e) {
  if (e == NULL) return;
  for (int end = 0; end < 2; end++) {
    kt_net_close_end(e, end);
    for (int i = 0; i < e->nrings[end]; i++) free(e->rings[end][i]);
    free(e->log[end].ev);
  }
  free(e);
}

/* ---- the calls ---------------------------------------------------------------------- */

static int result(koloResult_t r, const kolo_errbuf *eb, char *err, size_t errlen) {
  if (r == koloSuccess) return 0;
  snprintf(err, errlen, "%s", eb->msg);
  return -1;
}

int kt_net_bind(kt_net_ends *e, int end, uint32_t nslots, size_t slot_bytes, char *err, size_t errlen) {
  size_t bytes = ((size_t)nslots * slot_bytes + 4095) / 4096 * 4096;
  if (e->nrings[end] == MAX_RINGS || bytes == 0) {
    snprintf(err, errlen, "too many rings, or an empty one");
    return -1;
  }
  char *slots = aligned_alloc(4096, bytes);
  if (slots == NULL) {
    snprintf(err, errlen, "out of memory for %zu bytes of slots", bytes);
    return -1;
  }
  memset(slots, KT_POISON, bytes);
  e->rings[end][e->nrings[end]++] = slots;
  e->ring[end] = (kolo_net_ring){slots, nslots, slot_bytes, 0};
  kolo_net_sink sink = {&e->ctx[end], on_slice, on_credit, on_stop};
  kolo_errbuf eb = {0};
  return result(e->net->bind(e->comm[end], &e->ring[end], &sink, &eb), &eb, err, errlen);
}

unsigned char *kt_net_slot(kt_net_ends *e, int end, uint32_t step) {
  const kolo_net_ring *r = &e->ring[end];
  return (unsigned char *)r->slots + (size_t)(step % r->nslots) * r->slot_bytes;
}

int kt_net_send_slice(kt_net_ends *e, uint32_t step, size_t len, const kt_sig *sig, int *queued, char *err,
                      size_t errlen) {
  kolo_call_sig s;
  if (sig) sig_in(sig, &s);
  kolo_errbuf eb = {0};
  return result(e->net->send_slice(e->comm[KT_SEND], step, len, sig ? &s : NULL, queued, &eb), &eb, err, errlen);
}

int kt_net_send_credit(kt_net_ends *e, uint32_t head, int *queued, char *err, size_t errlen) {
  kolo_errbuf eb = {0};
  return result(e->net->send_credit(e->comm[KT_RECV], head, queued, &eb), &eb, err, errlen);
}

int kt_net_send_stop(kt_net_ends *e, int end, uint32_t word, const kt_report *r, int *queued, char *err,
                     size_t errlen) {
  kolo_call_mismatch m;
  if (r) {
    m.rank[0] = r->rank[0], m.rank[1] = r->rank[1];
    sig_in(&r->sig[0], &m.sig[0]);
    sig_in(&r->sig[1], &m.sig[1]);
  }
  kolo_errbuf eb = {0};
  return result(e->net->send_stop(e->comm[end], word, r ? &m : NULL, queued, &eb), &eb, err, errlen);
}

int kt_net_progress(kt_net_ends *e, int end, char *err, size_t errlen) {
  kolo_errbuf eb = {0};
  return result(e->net->progress(e->comm[end], KOLO_NET_OUT | KOLO_NET_IN, &eb), &eb, err, errlen);
}

int kt_net_pending(kt_net_ends *e, int end) { return e->net->pending(e->comm[end]); }

int kt_net_pollfds(kt_net_ends *e, int end, struct pollfd *pf, int max) {
  return e->net->pollfds(e->comm[end], pf, max);
}

int kt_net_cross_connect(const char *listen_provider, const char *connect_provider, const char *who, char *err,
                         size_t errlen) {
  const kolo_net_provider *l = kolo_net_find(listen_provider), *c = kolo_net_find(connect_provider);
  struct sockaddr_storage lo = loopback();
  kolo_net_handle h;
  void *lcomm = NULL, *comm = NULL;
  kolo_errbuf eb = {0};
  if (l == NULL || c == NULL || l->listen(&lo, 0, &h, &lcomm, &eb) != koloSuccess) {
    snprintf(err, errlen, "no listener: %s", eb.msg);
    return -1;
  }
  koloResult_t r = c->connect(&h, 0, kolo_deadline(2000), 2000, who, &comm, &eb);
  snprintf(err, errlen, "%s", eb.msg);
  if (comm) c->close(comm);
  l->close_listen(lcomm);
  return r == koloSuccess ? -1 : 0;
}
