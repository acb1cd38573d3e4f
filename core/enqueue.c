/* enqueue.c - from a batch of recorded ops to executor tasks (pipes,
 * programs, scratch, signatures per channel), and the run itself: on this
 * thread, on a non-blocking communicator's progress thread, or on CUDA
 * streams. */
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/p2p_pipes.h"
#include "core/plan.h"
#include "core/enqueue.h"
#include "core/simulate.h"
#include "core/progress.h"
#include "core/op_sig.h"
#include "core/mem_kind.h"
#include "common/log.h"
#include "ring/geometry.h"
#include "transport/transport.h"





/* ---- tasks -------------------------------------------------------------- */


static kolo_connector *pipe_for(struct koloComm *c, int coll, int peer, int ch, int send) {
  if (peer < 0) return NULL;
  if (kolo_coll_is_p2p(coll)) {
    size_t k = (size_t)peer * (size_t)c->nchannels + (size_t)ch;
    return send ? &c->p2p_send[k] : &c->p2p_recv[k];
  }
  return send ? &c->ring_send[ch] : &c->ring_recv[ch];
}

/* 1 when task t uses connector x. */
static int task_uses(const kolo_exec_task *t, const kolo_connector *x) {
  if (t->send == x || t->recv == x) return 1;
  for (int i = 0; t->ends && i < 2 * t->prog->npeers; i++)
    if (t->ends[i] == x) return 1;
  return 0;
}

/* The last earlier task that uses connector x, or -1. */
static int last_user(const kolo_exec_task *tasks, int n, const kolo_connector *x) {
  if (x == NULL) return -1;
  for (int i = n - 1; i >= 0; i--)
    if (task_uses(&tasks[i], x)) return i;
  return -1;
}


/* A premul-sum's scalar, read now, when the call runs: at its address
 * (koloScalarDevice: a host pointer, for a host communicator) or as bound
 * when the call was made. */
static void set_premul(kolo_exec_task *t, const kolo_op *op) {
  t->premul = op->premul != KOLO_PREMUL_NONE;
  t->scalar = op->scalar;
  if (op->premul == KOLO_PREMUL_POINTER) {
    t->scalar = 0;
    memcpy(&t->scalar, (const void *)(uintptr_t)op->scalar, koloTypeSize(op->type));
  }
}

/* A task of op on channel ch running prog over the connectors send and
 * recv, after the earlier tasks that use them and after task `after`. */
static void add_task(const kolo_op *op, const kolo_program *prog, int nch, int ch,
                     kolo_connector *send, kolo_connector *recv, int after,
                     kolo_exec_task *tasks, int *ntasks) {
  struct koloComm *c = op->comm;
  kolo_exec_task *t = &tasks[*ntasks];
  memset(t, 0, sizeof *t);
  t->prog = prog;
  int p2p = kolo_on_p2p_pipes(op->coll, prog);
  t->geo = kolo_op_geometry(op, prog, c->nranks, nch, p2p ? c->p2p_slot_bytes : c->slot_bytes, c->nslots,
                            p2p ? 0 : c->chunk_cap);
  t->in = (char *)(uintptr_t)op->sendbuff;
  t->out = op->recvbuff;
  t->type = op->type;
  t->op = op->op;
  t->div = op->op == koloAvg ? c->nranks : 1;
  set_premul(t, op);
  t->channel = ch;
  t->coll = op->coll;
  t->send = send;
  t->recv = recv;
  t->owner = &c->owner;
  t->dep[0] = last_user(tasks, *ntasks, t->send);
  t->dep[1] = last_user(tasks, *ntasks, t->recv);
  t->dep[2] = after;
  kolo_exec_task_init(t);
  (*ntasks)++;
}

/* Hierarchical all-reduce: per channel, its three phases as three tasks,
 * each after the one before (it reads what that one wrote); the intra
 * phases share the intra pipes, so the third also waits on the first. */
static void add_hier_tasks(const kolo_op *op, kolo_exec_task *tasks, int *ntasks) {
  struct koloComm *c = op->comm;
  int nch = kolo_comm_op_channels(c, op);
  for (int ch = 0; ch < nch; ch++) {
    int prev = -1;
    for (int k = 0; k < KOLO_HIER_PHASES; k++) {
      int pipe = k == KOLO_HIER_INTER_AR; /* 0: intra pipes, 1: inter pipes */
      add_task(op, &c->hier_prog[k], nch, ch, &c->hier_send[pipe][ch], &c->hier_recv[pipe][ch], prev,
               tasks, ntasks);
      prev = *ntasks - 1;
    }
  }
}

/* Where a batch's multi-peer tasks keep their end tables and their lists
 * of earlier tasks (2 * (nranks - 1) entries per task at most). */
typedef struct {
  kolo_connector **ends;
  int *deps;
  size_t nends, ndeps;
} peer_store;

/* A multi-peer task: its ends are the point-to-point pipes of its peers on
 * channel ch; it waits for the last earlier user of each. */
static void add_peer_task(const kolo_op *op, const kolo_program *prog, int nch, int ch, kolo_exec_task *tasks,
                          int *ntasks, peer_store *st) {
  struct koloComm *c = op->comm;
  add_task(op, prog, nch, ch, NULL, NULL, -1, tasks, ntasks);
  kolo_exec_task *t = &tasks[*ntasks - 1];
  kolo_connector **ends = st->ends + st->nends;
  int *deps = st->deps + st->ndeps, ndeps = 0;
  for (int i = 0; i < prog->npeers; i++) {
    size_t k = (size_t)prog->peers[i].rank * (size_t)c->nchannels + (size_t)ch;
    ends[2 * i] = prog->peers[i].sends ? &c->p2p_send[k] : NULL;
    ends[2 * i + 1] = prog->peers[i].recvs ? &c->p2p_recv[k] : NULL;
    for (int e = 2 * i; e <= 2 * i + 1; e++) {
      int d = last_user(tasks, *ntasks - 1, ends[e]), seen = d < 0;
      for (int j = 0; j < ndeps && !seen; j++) seen = deps[j] == d;
      if (!seen) deps[ndeps++] = d;
    }
  }
  st->nends += 2 * (size_t)prog->npeers;
  st->ndeps += (size_t)ndeps;
  t->ends = ends;
  t->more_deps = deps;
  t->nmore_deps = ndeps;
}

/* Gives tasks [first, n) of op its signature and a fresh call number. */
static void sign_tasks(const kolo_op *op, kolo_exec_task *tasks, int first, int n) {
  struct koloComm *c = op->comm;
  if (!kolo_coll_is_p2p(op->coll)) c->ncollectives++;
  if (++c->ncalls == 0) c->ncalls = 1; /* 0: no call yet (kolo_connector.sig_call) */
  kolo_call_sig sig = kolo_op_sig(op, c->ncollectives);
  for (int i = first; i < n; i++) {
    tasks[i].sig = sig;
    tasks[i].call = c->ncalls;
  }
}

static koloResult_t add_op_tasks(const kolo_op *op, kolo_exec_task *tasks, int *ntasks, peer_store *st) {
  struct koloComm *c = op->comm;
  if (op->coll == KOLO_COLL_ALL_REDUCE && op->arg == KOLO_ALGO_HIER) {
    add_hier_tasks(op, tasks, ntasks);
    return koloSuccess;
  }
  int nch = kolo_comm_op_channels(c, op);
  for (int ch = 0; ch < nch; ch++) {
    const kolo_program *prog = NULL; /* set on success: gcc -O3 cannot tell once it inlines the (hidden) callee */
    koloResult_t res = kolo_comm_program(c, op->coll, op->arg, ch, &prog);
    if (res != koloSuccess) return res;
    if (prog->npeers > 0) add_peer_task(op, prog, nch, ch, tasks, ntasks, st);
    else
      add_task(op, prog, nch, ch, pipe_for(c, op->coll, prog->send_peer, ch, 1),
               pipe_for(c, op->coll, prog->recv_peer, ch, 0), -1, tasks, ntasks);
  }
  return koloSuccess;
}

/* The tasks of op, signed. */
static koloResult_t add_tasks(const kolo_op *op, kolo_exec_task *tasks, int *ntasks, peer_store *st) {
  int first = *ntasks;
  koloResult_t res = add_op_tasks(op, tasks, ntasks, st);
  if (res == koloSuccess) sign_tasks(op, tasks, first, *ntasks);
  return res;
}

/* Room for the peers of the multi-peer ops of most calls, on the stack. */
#define PEER_STORE_LOCAL 256
typedef struct {
  kolo_connector *ends[PEER_STORE_LOCAL];
  int deps[PEER_STORE_LOCAL];
} peer_store_local;

/* Sizes *st for the multi-peer ops among ops (nothing when there are none):
 * in *local where they fit (the latency path), else on the heap. */
static koloResult_t peer_store_init(peer_store *st, peer_store_local *local, const kolo_op *ops, int nops) {
  size_t cap = 0;
  for (int i = 0; i < nops; i++)
    if (kolo_op_runs_multi_peer(&ops[i]))
      cap += 2 * (size_t)ops[i].comm->nchannels * (size_t)ops[i].comm->nranks;
  *st = (peer_store){NULL, NULL, 0, 0};
  if (cap == 0) return koloSuccess;
  if (cap <= PEER_STORE_LOCAL) {
    *st = (peer_store){local->ends, local->deps, 0, 0};
    return koloSuccess;
  }
  st->ends = malloc(cap * sizeof *st->ends);
  st->deps = malloc(cap * sizeof *st->deps);
  if (st->ends && st->deps) return koloSuccess;
  free(st->ends);
  free(st->deps);
  *st = (peer_store){NULL, NULL, 0, 0};
  return kolo_error(&ops[0].comm->err, koloSystemError, "out of memory running a call");
}

static void peer_store_free(peer_store *st, peer_store_local *local) {
  if (st->ends == local->ends) return;
  free(st->ends);
  free(st->deps);
}

/* Scratch bytes of the tasks of comm c among tasks[0, n), each task's
 * offset in t->scratch (as an address from 0) when `assign`. */
static size_t scratch_need(const struct koloComm *c, kolo_exec_task *tasks, int n, int assign) {
  size_t need = 0;
  for (int i = 0; i < n; i++) {
    kolo_exec_task *t = &tasks[i];
    if (t->owner != &c->owner || !kolo_program_uses_scratch(t->prog)) continue;
    if (assign) t->scratch = c->scratch + need;
    need += (kolo_geo_scratch_bytes(&t->geo) + 63) & ~(size_t)63;
  }
  return need;
}

/* Gives each task whose program names scratch its part of its
 * communicator's arena, grown when this call needs more than any before. */
static koloResult_t attach_scratch(kolo_op *ops, int nops, kolo_exec_task *tasks, int n) {
  /* The latency path: most calls run no program that names scratch, and
   * a group's ops often share one communicator (scanned once). */
  int any = 0;
  for (int i = 0; i < n && !any; i++) any = kolo_program_uses_scratch(tasks[i].prog);
  for (int i = 0; i < nops && any; i++) {
    if (!kolo_op_first_of_comm(ops, i)) continue;
    struct koloComm *c = ops[i].comm;
    size_t need = scratch_need(c, tasks, n, 0);
    if (need > c->scratch_bytes) {
      free(c->scratch);
      c->scratch_bytes = 0;
      c->scratch = aligned_alloc(64, need);
      if (c->scratch == NULL) return kolo_error(&c->err, koloSystemError, "out of memory: %zu bytes of scratch", need);
      c->scratch_bytes = need;
    }
    if (need > 0) scratch_need(c, tasks, n, 1);
  }
  return koloSuccess;
}

/* Runs ops of blocking communicators on this thread. */
static koloResult_t run_here(kolo_op *ops, int nops) {
  koloResult_t res = kolo_p2p_connect(ops, nops);
  if (res != koloSuccess) return res;
  /* Single calls (the latency path) use the stack, groups the heap. */
  kolo_exec_task local[KOLO_HIER_PHASES * KOLO_MAX_CHANNELS];
  int cap = 0;
  for (int i = 0; i < nops; i++)
    cap += ops[i].comm->nchannels * (ops[i].coll == KOLO_COLL_ALL_REDUCE ? KOLO_HIER_PHASES : 1);
  kolo_exec_task *tasks = cap <= KOLO_HIER_PHASES * KOLO_MAX_CHANNELS ? local : malloc((size_t)cap * sizeof *tasks);
  if (tasks == NULL) return kolo_error(&ops[0].comm->err, koloSystemError, "out of memory running a call");
  peer_store st;
  peer_store_local st_local;
  res = peer_store_init(&st, &st_local, ops, nops);
  int n = 0;
  for (int i = 0; i < nops && res == koloSuccess; i++) {
    ops[i].comm->owner.failed = koloSuccess;
    res = add_tasks(&ops[i], tasks, &n, &st);
  }
  if (res == koloSuccess) res = attach_scratch(ops, nops, tasks, n);
  if (res == koloSuccess) res = kolo_host_exec_run(tasks, n);
  for (int i = 0; i < nops; i++)
    if (ops[i].comm->owner.failed != koloSuccess) ops[i].comm->failed = ops[i].comm->owner.failed;
  if (tasks != local) free(tasks);
  peer_store_free(&st, &st_local);
  return res;
}

/* Submits, per non-blocking communicator, all of its ops as one batch (a
 * send and its matching receive must run together). */
static koloResult_t submit_nonblocking(kolo_op *ops, int nops) {
  koloResult_t res = koloInProgress;
  kolo_op *mine = malloc((size_t)nops * sizeof *mine);
  if (mine == NULL) return kolo_error(&ops[0].comm->err, koloSystemError, "out of memory queueing a call");
  for (int i = 0; i < nops; i++) {
    if (!kolo_op_first_of_comm(ops, i)) continue;
    int n = 0;
    for (int j = i; j < nops; j++)
      if (ops[j].comm == ops[i].comm) mine[n++] = ops[j];
    koloResult_t r = kolo_nb_submit(ops[i].comm, mine, n);
    if (r != koloSuccess && r != koloInProgress && res == koloInProgress) res = r;
  }
  free(mine);
  return res;
}

/* Ops of host communicators: those of non-blocking communicators go to
 * their progress threads, in order; the rest run here. */
static koloResult_t run_host(kolo_op *ops, int nops) {
  int all_blocking = 1;
  for (int i = 0; i < nops && all_blocking; i++) all_blocking = ops[i].comm->blocking;
  if (all_blocking) return run_here(ops, nops);
  int nhere = 0, nnb = 0;
  kolo_op *nb = malloc((size_t)nops * sizeof *nb);
  if (nb == NULL) return kolo_error(&ops[0].comm->err, koloSystemError, "out of memory running a call");
  for (int i = 0; i < nops; i++) {
    if (ops[i].comm->blocking) ops[nhere++] = ops[i];
    else nb[nnb++] = ops[i];
  }
  koloResult_t res = nnb > 0 ? submit_nonblocking(nb, nnb) : koloSuccess;
  free(nb);
  if (nhere > 0) {
    koloResult_t r = run_here(ops, nhere);
    if (r != koloSuccess) res = r;
  }
  return res;
}

koloResult_t kolo_run_ops(kolo_op *ops, int nops) {
  const kolo_mem_kind *kind = NULL; /* the first op's other than host memory */
  for (int i = 0; i < nops && kind == NULL; i++) kind = ops[i].comm->kind;
  if (kind == NULL) return run_host(ops, nops);
  int nk = 0;
  for (int i = 0; i < nops; i++) nk += ops[i].comm->kind == kind;
  if (nk == nops) return kind->run(ops, nops);
  /* A group mixing memory kinds: the device ops are enqueued first, so
   * that the devices progress while the host ops run here. */
  kolo_op *rest = malloc((size_t)nops * sizeof *rest);
  if (rest == NULL) return kolo_error(&ops[0].comm->err, koloSystemError, "out of memory running a call");
  int nr = 0;
  nk = 0;
  for (int i = 0; i < nops; i++) {
    if (ops[i].comm->kind == kind) ops[nk++] = ops[i];
    else rest[nr++] = ops[i];
  }
  koloResult_t res = kind->run(ops, nk);
  koloResult_t r = kolo_run_ops(rest, nr);
  free(rest);
  return res != koloSuccess ? res : r;
}

koloResult_t kolo_run_ops_here(kolo_op *ops, int nops) { return run_here(ops, nops); }
