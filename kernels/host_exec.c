/* host_exec.c - the host executor (see host_exec.h). */
#include "kernels/host_exec.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common/peer_fate.h"
#include "kernels/host_checks.h"
#include "kernels/host_reduce.h"
#include "ring/geometry.h"
#include "transport/transport.h"

enum { TASK_PROGRESS, TASK_BLOCKED, TASK_DONE, TASK_MISMATCH };

/* Slices one task may move before the executor looks at the others. */
#define KOLO_SLICES_PER_TURN 8
/* How often a sleeping executor checks peers' liveness. */
#define KOLO_LIVENESS_PERIOD_NS (20 * 1000 * 1000LL)
#define KOLO_SLEEP_US 1000
/* A peer whose bootstrap connection closed may have finished its part and
 * left while its last slots are still on the way (a net pipe's proxy reads
 * them from the socket after the close): only a wait that also saw no
 * progress for this long blames it. */
#define KOLO_DEAD_PEER_GRACE_NS (250 * 1000 * 1000LL)
/* Receive ends drained in this pass whose transport credits in batches
 * (kick: net pipes), credited once when the pass ends; one end at most
 * once per pass (kolo_connector.credit_owed). */
#define OWED_MAX 64
typedef struct {
  kolo_connector *c[OWED_MAX];
  int n;
} owed_list;
static _Thread_local owed_list owed;

static void pay_credits(void) {
  for (int i = 0; i < owed.n; i++) {
    owed.c[i]->credit_owed = 0;
    owed.c[i]->transport->kick(owed.c[i]);
  }
  owed.n = 0;
}

/* After draining a slot of rc. */
static inline void drained(kolo_connector *rc) {
  const kolo_transport *tr = rc->transport;
  if (tr == NULL || tr->kick == NULL || rc->credit_owed) return;
  if (owed.n == OWED_MAX) pay_credits();
  rc->credit_owed = 1;
  owed.c[owed.n++] = rc;
}

/* After filling a slot of sc. */
static inline void filled(kolo_connector *sc) {
  const kolo_transport *tr = sc->transport;
  if (tr != NULL && tr->kick != NULL) tr->kick(sc);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void kolo_exec_task_init(kolo_exec_task *t) {
  t->base = 0;
  t->rce = kolo_round_chunk(&t->geo, 0);
  t->step = 0;
  t->chunk_ready = 0;
  t->slice = t->nslices = 0;
  t->done = t->rce == 0;
  t->blocker = NULL;
}

static char *buf_of(const kolo_exec_task *t, int buf) {
  return buf == KOLO_BUF_IN ? t->in : buf == KOLO_BUF_OUT ? t->out : t->scratch;
}

/* The connector step s sends into / receives from (NULL: it does not). */
static kolo_connector *send_end(const kolo_exec_task *t, const kolo_step *s) {
  if (!kolo_step_sends(s->op)) return NULL;
  return t->ends ? t->ends[2 * (size_t)s->to] : t->send;
}
static kolo_connector *recv_end(const kolo_exec_task *t, const kolo_step *s) {
  if (!kolo_step_recvs(s->op)) return NULL;
  return t->ends ? t->ends[2 * (size_t)s->from + 1] : t->recv;
}

/* Elements of one slice: a slot of the task's pipes (single-peer: its send
 * pipe's when it has one, as ever; multi-peer: the step's; every pipe of a
 * communicator has the same slots). */
static size_t slot_elems_of(const kolo_exec_task *t, const kolo_step *s) {
  const kolo_connector *c = t->ends ? send_end(t, s) : t->send;
  if (c == NULL) c = t->ends ? recv_end(t, s) : t->recv;
  return (c ? c->slot_bytes : SIZE_MAX) / t->geo.elem_size;
}

/* Locates the current step's chunk; returns its element count. */
static size_t ready_chunk(kolo_exec_task *t, const kolo_step *s) {
  size_t n_src, n_dst;
  const kolo_program *p = t->prog;
  kolo_geo_buf_range(&t->geo, t->base, t->rce, t->channel, s->src_buf, s->src_chunk, p->in_blocked,
                     p->out_blocked, &t->src_off, &n_src);
  kolo_geo_buf_range(&t->geo, t->base, t->rce, t->channel, s->dst_buf, s->dst_chunk, p->in_blocked,
                     p->out_blocked, &t->dst_off, &n_dst);
  t->n = n_src < n_dst ? n_src : n_dst;
  size_t slot_elems = slot_elems_of(t, s);
  if (!kolo_step_sends(s->op) && !kolo_step_recvs(s->op)) slot_elems = t->n ? t->n : 1;
  t->nslices = (t->n + slot_elems - 1) / slot_elems;
  t->slice = 0;
  t->chunk_ready = 1;
  return t->n;
}

/* The first slice of a call on a send pipe carries the call's signature. */
static inline void stamp_call(const kolo_exec_task *t, kolo_connector *sc) {
  if (sc->sig_call == t->call) return;
  sc->sig_call = t->call;
  *kolo_conn_sig_place(sc) = t->sig;
  sc->sig_calls++; /* counts boxes on shared-control pipes; unused elsewhere */
}

enum { SIG_MATCH, SIG_DIFFERS, SIG_NOT_YET };

/* Whether the first slice of this call on receive pipe rc (ready) comes
 * from a call like t's (later slices are not looked at).  SIG_NOT_YET: a
 * net pipe whose signature is still on its way (connector.h, sig_late);
 * once compared, a net pipe's is cleared so that a later step in that
 * place cannot take it for its own. */
static inline int call_check(const kolo_exec_task *t, kolo_connector *rc) {
  if (rc->sig_call == t->call) return SIG_MATCH;
  kolo_call_sig *theirs = kolo_conn_sig_place(rc);
  int set = __atomic_load_n(&theirs->set, __ATOMIC_ACQUIRE);
  if (!set && rc->sig_late) return SIG_NOT_YET;
  rc->sig_call = t->call;
  if (set && !kolo_call_sig_match(theirs, &t->sig)) return SIG_DIFFERS; /* kept for the report */
  if (set && rc->sig_late) __atomic_store_n(&theirs->set, 0, __ATOMIC_RELAXED);
  kolo_conn_sig_seen(rc);
  return SIG_MATCH;
}

/* Where the slice to send will lie outside the send slot, for a transport
 * that moves it from there (net pipes: the socket copies from the user's
 * buffer, and the slot copy is saved): the step's other output (the slot
 * is dropped from the reduction's outputs), or its source when the step
 * only copies it (no reduction, no division, no scaling).  NULL: the slot. */
static const char *send_source(const kolo_connector *sc, size_t bytes, kolo_step_operands *x, int div, int scales) {
  if (sc->transport == NULL || sc->transport->sends_from == NULL || !sc->transport->sends_from(sc, bytes)) return NULL;
  if (x->o1 != NULL) { /* o1 is the send slot: the reduction writes o0 only */
    x->o1 = NULL;
    return x->o0;
  }
  if (x->b != NULL || div != 1 || scales || x->a == NULL) return NULL;
  const char *from = x->a; /* a pure copy into the slot: none at all */
  x->o0 = NULL;
  return from;
}

/* Moves one slice of the current step over its connectors sc and rc (NULL
 * where it does not send / receive): both are known ready. */
static void do_slice(kolo_exec_task *t, const kolo_step *s, kolo_connector *sc, kolo_connector *rc) {
  size_t esz = t->geo.elem_size;
  size_t per = t->nslices == 1 ? t->n : slot_elems_of(t, s);
  size_t off = t->slice * per;
  size_t n = t->n - off < per ? t->n - off : per;
  char *src = buf_of(t, s->src_buf) + (t->src_off + off) * esz;
  char *dst = buf_of(t, s->dst_buf) + (t->dst_off + off) * esz;
  char *rslot = rc ? kolo_conn_slot(rc) : NULL;
  char *sslot = sc ? kolo_conn_slot(sc) : NULL;
  /* a premul-sum scales the rank's own input where a step reads it: the
   * step's src (b, or a when the step has no b) */
  int scales = t->premul && kolo_step_reads_src(s->op) && s->src_buf == KOLO_BUF_IN;
  int src_first = (s->flags & KOLO_STEP_SRC_FIRST) && !scales;
  kolo_step_operands x = kolo_step_operands_of(s->op, src_first, rslot, sslot, src, dst);
  int div = x.post && (s->flags & KOLO_STEP_FINAL) ? t->div : 1;
  const char *from = sslot ? send_source(sc, n * esz, &x, div, scales) : NULL;
  if (scales)
    kolo_host_reduce_premul(x.o0, x.o1, x.a, x.b, n, t->type, &t->scalar);
  else if (x.o0 != NULL)
    kolo_host_reduce(x.o0, x.o1, x.a, x.b, n, t->type, t->op, div);
  if (sslot) {
    stamp_call(t, sc);
    if (from != NULL) {
      sc->transport->send_from(sc, from, n * esz);
    } else {
      kolo_conn_sent_bytes(sc, n * esz); /* a net pipe sends only these */
      filled(sc);
    }
  }
  if (rslot) {
    kolo_conn_received(rc);
    drained(rc);
  }
}

/* Advances a task as far as its connectors allow (a bounded number of
 * slices).  *blocker: the connector it waits on when blocked. */
static int task_advance(kolo_exec_task *t, kolo_connector **blocker) {
  const kolo_program *p = t->prog;
  int moved = 0;
  for (int budget = KOLO_SLICES_PER_TURN; budget > 0;) {
    if (t->step == p->nsteps) {
      t->base += kolo_round_span(&t->geo, t->rce);
      t->rce = kolo_round_chunk(&t->geo, t->base);
      t->step = 0;
      if (t->rce == 0) {
        t->done = 1;
        return TASK_DONE;
      }
    }
    const kolo_step *s = &p->steps[t->step];
    if (!t->chunk_ready && ready_chunk(t, s) == 0) {
      t->step++;
      t->chunk_ready = 0;
      continue;
    }
    kolo_connector *rc = recv_end(t, s), *sc = send_end(t, s);
    if (rc && !kolo_conn_can_recv(rc)) {
      *blocker = rc;
      return moved ? TASK_PROGRESS : TASK_BLOCKED;
    }
    if (sc && !kolo_conn_can_send(sc)) {
      *blocker = sc;
      return moved ? TASK_PROGRESS : TASK_BLOCKED;
    }
    int sig = rc ? call_check(t, rc) : SIG_MATCH;
    if (sig != SIG_MATCH) {
      *blocker = rc;
      if (sig == SIG_DIFFERS) return TASK_MISMATCH;
      return moved ? TASK_PROGRESS : TASK_BLOCKED;
    }
    do_slice(t, s, sc, rc);
    moved = 1;
    budget--;
    if (++t->slice == t->nslices) {
      t->step++;
      t->chunk_ready = 0;
    }
  }
  return TASK_PROGRESS;
}

static const char *stop_reason_text(int reason) {
  switch (reason) {
  case KOLO_STOP_ERROR: return "a call failed there";
  case KOLO_STOP_ABORT: return "koloCommAbort was called there";
  case KOLO_STOP_DEAD_PEER: return "it died";
  case KOLO_STOP_PEER_LEFT: return "it left";
  case KOLO_STOP_PEER_EXITED: return "it exited";
  case KOLO_STOP_TIMEOUT: return "it timed out waiting";
  case KOLO_STOP_MISMATCH: return "calls do not match";
  default: return "unknown reason";
  }
}

/* A peer's fate (common/peer_fate.h) as the stop word that carries it to the
 * other ranks, and back. */
static int fate_stop(int fate) {
  return fate == KOLO_PEER_LEFT ? KOLO_STOP_PEER_LEFT : fate == KOLO_PEER_EXITED ? KOLO_STOP_PEER_EXITED
                                                                                  : KOLO_STOP_DEAD_PEER;
}
static int stop_fate(int reason) {
  switch (reason) {
  case KOLO_STOP_DEAD_PEER: return KOLO_PEER_LOST;
  case KOLO_STOP_PEER_LEFT: return KOLO_PEER_LEFT;
  case KOLO_STOP_PEER_EXITED: return KOLO_PEER_EXITED;
  default: return KOLO_PEER_ALIVE;
  }
}

static void fail_owner(kolo_exec_owner *o, koloResult_t res, int reason, int rank) {
  if (o->failed != koloSuccess) return;
  o->failed = res;
  if (o->stop_all) o->stop_all(o, reason, rank);
}

/* "rank 1 left (destroyed its communicator) after rank 0 was lost without
 * a word": a peer that gave up names the rank its goodbye blamed, so that
 * a survivor names the origin of a failure, not the last rank to leave. */
static void peer_gone_text(kolo_exec_owner *o, int who, int fate, char *buf, size_t len) {
  int n = snprintf(buf, len, "rank %d %s", who, kolo_peer_fate_text(fate));
  int blamed = o->peer_blamed ? o->peer_blamed(o, who) : -1;
  if (blamed < 0 || n < 0 || (size_t)n >= len) return;
  int seen = o->peer_dead ? o->peer_dead(o, blamed) : KOLO_PEER_ALIVE;
  const char *how = seen == KOLO_PEER_LOST     ? "was lost without a word"
                    : seen == KOLO_PEER_EXITED ? "exited without destroying its communicator"
                                               : "failed";
  snprintf(buf + n, len - (size_t)n, " after rank %d %s", blamed, how);
}

/* A stop word from a peer: fails the owner with the sentence it calls for. */
static void stopped_by_peer(kolo_exec_task *t, kolo_connector *c, uint32_t word, const char *what) {
  kolo_exec_owner *o = t->owner;
  int reason = (int)(word >> 24), who = (int)(word & 0xffffff) - 1, fate;
  if (reason == KOLO_STOP_MISMATCH) {
    kolo_exec_mismatch_seen(t, c, who);
    fail_owner(o, koloInvalidUsage, reason, who);
    return;
  }
  /* A dead peer seen by this rank's own proxy: its goodbye may say more. */
  if (reason == KOLO_STOP_DEAD_PEER && who == c->peer && o->peer_dead && (fate = o->peer_dead(o, who)) != 0)
    reason = fate_stop(fate);
  if (stop_fate(reason) != KOLO_PEER_ALIVE) {
    char gone[200];
    peer_gone_text(o, who, stop_fate(reason), gone, sizeof gone);
    kolo_error(o->eb, koloRemoteError, "rank %d: during a collective, a peer saw that %s", o->rank, gone);
  } else
    kolo_error(o->eb, koloRemoteError, "rank %d: rank %d stopped (%s) while rank %d waited to %s rank %d",
               o->rank, who, stop_reason_text(reason), o->rank, what, c->peer);
  fail_owner(o, koloRemoteError, reason, who);
}

/* A net pipe's proxy stops its end when the peer's connection closes, and
 * that connection may close before this rank's mesh has read the peer's
 * goodbye (it left; it was not lost).  1 while the mesh still has the peer
 * up, for at most the dead-peer grace: the goodbye then says what it was. */
static int mesh_behind(kolo_exec_task *t, kolo_connector *c, uint32_t word) {
  kolo_exec_owner *o = t->owner;
  int reason = (int)(word >> 24), who = (int)(word & 0xffffff) - 1;
  if (reason != KOLO_STOP_DEAD_PEER || who != c->peer || o->peer_dead == NULL ||
      o->peer_dead(o, who) != KOLO_PEER_ALIVE)
    return 0;
  int64_t now = now_ns();
  if (t->peer_stop_ns == 0) t->peer_stop_ns = now;
  return now - t->peer_stop_ns < KOLO_DEAD_PEER_GRACE_NS;
}

/* Checks why a sleeping task may never move again; fails its owner if so. */
static void check_stalled(kolo_exec_task *t, kolo_connector *c, int64_t stall_ns,
                          int check_liveness) {
  kolo_exec_owner *o = t->owner;
  const char *what = c->is_send ? "send to" : "receive from";
  int dead = -1, fate;
  uint32_t word = kolo_conn_stopped(c);
  /* A stop word that came after the end it blocked on moved (a net pipe's
   * proxy stops a receive end when its sender's connection closes, after
   * delivering every slice sent before the close: the sender may have
   * finished and left) is no failure yet: the next pass moves the slice,
   * and a later wait that cannot move fails then. */
  if (word != 0 && kolo_conn_ready(c)) return;
  if (o->abort_flag && atomic_load(o->abort_flag)) {
    kolo_error(o->eb, koloRemoteError, "rank %d: communicator aborted (koloCommAbort or koloCommRevoke)", o->rank);
    fail_owner(o, koloRemoteError, KOLO_STOP_ABORT, o->rank);
  } else if (word != 0) {
    if (!mesh_behind(t, c, word)) stopped_by_peer(t, c, word, what);
  } else if (check_liveness && stall_ns >= KOLO_DEAD_PEER_GRACE_NS && o->peer_dead &&
             (fate = o->peer_dead(o, c->peer)) != KOLO_PEER_ALIVE) {
    char gone[200];
    dead = c->peer;
    peer_gone_text(o, dead, fate, gone, sizeof gone);
    kolo_error(o->eb, koloRemoteError, "rank %d: %s while rank %d waited to %s rank %d on channel %d", o->rank,
               gone, o->rank, what, c->peer, t->channel);
    fail_owner(o, koloRemoteError, fate_stop(fate), dead);
  } else if (o->timeout_ms > 0 && stall_ns > (int64_t)o->timeout_ms * 1000000LL) {
    kolo_error(o->eb, koloTimeout,
               "rank %d waited %d ms to %s rank %d (channel %d) without progress: is rank %d "
               "running the same collective?",
               o->rank, o->timeout_ms, what, c->peer, t->channel, c->peer);
    fail_owner(o, koloTimeout, KOLO_STOP_TIMEOUT, o->rank);
  }
}

static int deps_done(const kolo_exec_task *tasks, const kolo_exec_task *t) {
  for (int i = 0; i < 3; i++)
    if (t->dep[i] >= 0 && !tasks[t->dep[i]].done) return 0;
  for (int i = 0; i < t->nmore_deps; i++)
    if (!tasks[t->more_deps[i]].done) return 0;
  return 1;
}

/* One pass over all tasks; returns how many moved. */
static int run_pass(kolo_exec_task *tasks, int n, int *remaining, kolo_exec_task **blocked_task,
                    kolo_connector **blocker) {
  int moved = 0;
  for (int i = 0; i < n; i++) {
    kolo_exec_task *t = &tasks[i];
    if (t->done) continue;
    if (t->owner->failed != koloSuccess) {
      t->done = 1;
      (*remaining)--;
      continue;
    }
    if (!deps_done(tasks, t)) continue;
    kolo_connector *c = NULL;
    int r = task_advance(t, &c);
    if (r == TASK_MISMATCH) {
      kolo_exec_mismatch_found(t, c);
      fail_owner(t->owner, koloInvalidUsage, KOLO_STOP_MISMATCH, t->owner->rank);
      c = NULL;
    }
    if (r == TASK_DONE) (*remaining)--;
    t->blocker = r == TASK_BLOCKED ? c : NULL;
    if (r != TASK_BLOCKED) moved++;
    else {
      *blocked_task = t;
      *blocker = c;
    }
  }
  if (owed.n > 0) pay_credits();
  return moved;
}

/* Pipes whose bytes move by system calls (net): nothing moves their
 * counters but a turn, so every poll takes one of each pipe a task waits
 * on, from this thread (not only the last one's: two ranks whose sends wait
 * for credits would wait for ever if neither read the other's slices).
 * 1 when a turn moved something: what the tasks wait for may be here, and
 * a sleep now would wait for a wake-up that already came. */
static int pull_blockers(kolo_exec_task *tasks, int ntasks) {
  int moved = 0;
  for (int i = 0; i < ntasks; i++) {
    kolo_connector *c = tasks[i].blocker;
    if (tasks[i].done || c == NULL || c->transport == NULL || c->transport->progress == NULL) continue;
    moved |= c->transport->progress(c);
  }
  return moved;
}

/* Whether a wait that has polled `idle` times should yield again rather
 * than sleep: up to the owner's count of yields, or, with a yield time,
 * for that long since the yields began (*since: when, 0 until then; the
 * clock is read once every 32 yields), unless the transport has a wait of
 * its own (own_wait): then up to the owner's wake_yields. */
static int keep_yielding(const kolo_exec_owner *o, int64_t idle, int64_t *since, int own_wait) {
  if (o->yield_ns <= 0) return idle < (int64_t)o->spin + o->yields;
  if (own_wait) return idle < (int64_t)o->spin + o->wake_yields;
  if ((idle - o->spin) % 32 != 0) return 1;
  int64_t now = now_ns();
  if (*since == 0) *since = now;
  return now - *since < o->yield_ns;
}

koloResult_t kolo_host_exec_run(kolo_exec_task *tasks, int ntasks) {
  int remaining = 0;
  for (int i = 0; i < ntasks; i++) remaining += !tasks[i].done;
  if (ntasks == 0) return koloSuccess;
  const kolo_exec_owner *first = tasks[0].owner;
  const int64_t spin_limit = first->spin;
  int64_t idle = 0, stall_start = 0, last_liveness = 0, warn_ns = -1, yields_since = 0;
  int yielding = 1;
  for (int i = 0; i < ntasks; i++) tasks[i].owner->stall_warned = tasks[i].owner->has_mismatch = 0;
  while (remaining > 0) {
    kolo_exec_task *bt = NULL;
    kolo_connector *bc = NULL;
    if (run_pass(tasks, ntasks, &remaining, &bt, &bc) > 0 || bt == NULL) {
      idle = 0;
      stall_start = yields_since = 0;
      yielding = 1;
      continue;
    }
    if (pull_blockers(tasks, ntasks)) continue; /* look again before spinning on */
    const kolo_transport *tr = bc->transport;
    if (++idle < spin_limit) {
      cpu_relax();
      continue;
    }
    int own_wait = tr != NULL && tr->wait != NULL;
    if (yielding && (yielding = keep_yielding(first, idle, &yields_since, own_wait))) {
      sched_yield();
      continue;
    }
    int64_t now = now_ns();
    if (stall_start == 0) stall_start = now;
    int liveness = now - last_liveness > KOLO_LIVENESS_PERIOD_NS;
    if (liveness) last_liveness = now;
    if (warn_ns < 0) warn_ns = kolo_exec_stall_warn_ns(); /* once per batch, off the hot path */
    if (warn_ns > 0 && now - stall_start >= warn_ns) kolo_exec_stall_warn(tasks, ntasks, now - stall_start);
    for (int i = 0; i < ntasks; i++) {
      kolo_exec_task *t = &tasks[i];
      if (t->done || t->blocker == NULL || t->owner->failed != koloSuccess) continue;
      check_stalled(t, t->blocker, now - stall_start, liveness);
    }
    if (bt->owner->failed != koloSuccess) continue;
    if (own_wait) tr->wait(bc, KOLO_SLEEP_US);
    else kolo_conn_sleep(bc, KOLO_SLEEP_US);
  }
  koloResult_t res = koloSuccess;
  for (int i = 0; i < ntasks && res == koloSuccess; i++) res = tasks[i].owner->failed;
  return res;
}
