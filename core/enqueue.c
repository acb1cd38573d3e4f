/* enqueue.c - from recorded ops to executor tasks: groups, p2p pipes made
 * on first use (for send/recv and for the peers of multi-peer collectives),
 * channels per op, and the run itself. */
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/comm_init.h"
#include "core/mem_kind.h"
#include "core/op_sig.h"
#include "common/log.h"
#include "ring/geometry.h"
#include "transport/transport.h"

#define TAG_P2P_PIPE 0x2000u

/* ---- groups ------------------------------------------------------------- */

typedef struct {
  int depth;
  int nops, cap;
  kolo_op *ops;
  koloResult_t first_error;
} group_state;

static _Thread_local group_state group;

koloResult_t koloGroupStart(void) {
  group.depth++;
  return koloSuccess;
}

int kolo_group_depth(void) { return group.depth; }

/* Ends the outermost group: runs its inits (init_async.c), its splits
 * (split_group.c) or its calls
 * (run), or only estimates the calls (simulate: koloGroupSimulateEnd). */
static koloResult_t group_finish(int run, koloSimInfo_t *sim) {
  koloResult_t res = group.first_error;
  int inits = kolo_group_has_inits(), splits = kolo_group_has_splits();
  if (inits || splits) {
    if (inits) res = kolo_group_end_inits(group.nops + splits, run);
    /* splits with inits, with other calls or in a simulation: refused */
    koloResult_t r = splits ? kolo_group_end_splits(run && !inits ? group.nops : 1) : koloSuccess;
    if (res == koloSuccess) res = r;
  } else if (res == koloSuccess && !run) res = kolo_sim_estimate(group.ops, group.nops, sim);
  else if (res == koloSuccess && group.nops > 0) res = kolo_run_ops(group.ops, group.nops);
  free(group.ops);
  group = (group_state){0, 0, 0, NULL, koloSuccess};
  return res;
}

koloResult_t koloGroupEnd(void) {
  if (group.depth == 0)
    return kolo_error(NULL, koloInvalidUsage, "koloGroupEnd without a matching koloGroupStart");
  if (--group.depth > 0) return koloSuccess;
  return group_finish(1, NULL);
}

/* As koloGroupEnd, issuing nothing: an inner level only closes itself. */
koloResult_t koloGroupSimulateEnd(koloSimInfo_t *simInfo) {
  koloResult_t res = kolo_sim_check_info(simInfo);
  if (res != koloSuccess) return res;
  if (group.depth == 0)
    return kolo_error(NULL, koloInvalidUsage, "koloGroupSimulateEnd without a matching koloGroupStart");
  if (--group.depth > 0) return koloSuccess;
  return group_finish(0, simInfo);
}

/* An all-reduce, an all-gather or a broadcast runs the algorithm chosen
 * now, when it is recorded: every later stage (pipes, programs, tasks,
 * launches) reads it from op->arg (a broadcast's with its root:
 * kolo_bcast_arg). */
static kolo_op recorded(const kolo_op *op) {
  kolo_op o = *op;
  if (o.coll == KOLO_COLL_ALL_REDUCE) o.arg = kolo_comm_all_reduce_algo(o.comm, o.count, o.type);
  if (o.coll == KOLO_COLL_ALL_GATHER) o.arg = kolo_comm_ag_algo(o.comm, o.count, o.type);
  if (o.coll == KOLO_COLL_BROADCAST)
    o.arg = kolo_bcast_arg(o.arg, kolo_comm_bcast_algo(o.comm, o.count, o.type), o.comm->nranks);
  if (o.coll == KOLO_COLL_REDUCE)
    o.arg = kolo_reduce_arg(o.arg, kolo_comm_reduce_algo(o.comm, o.count, o.type), o.comm->nranks);
  return o;
}

koloResult_t kolo_enqueue(const kolo_op *op) {
  if (group.depth == 0) {
    kolo_op one = recorded(op);
    return kolo_run_ops(&one, 1);
  }
  if (group.nops == group.cap) {
    int cap = group.cap ? 2 * group.cap : 16;
    kolo_op *ops = realloc(group.ops, (size_t)cap * sizeof *ops);
    if (ops == NULL) {
      group.first_error = koloSystemError;
      return kolo_error(&op->comm->err, koloSystemError, "out of memory recording a group call");
    }
    group.ops = ops;
    group.cap = cap;
  }
  group.ops[group.nops++] = recorded(op);
  return koloSuccess;
}

/* ---- programs ----------------------------------------------------------- */

/* The file's program where KOLO_SCHEDULE_FILE gives one (a copy), else the
 * built-in one of variant v (comm.h: v = ch % nvariants) on its ring. */
static koloResult_t make_program(struct koloComm *c, int coll, int arg, int v, kolo_program *out) {
  const int root = kolo_arg_root(coll, arg, c->nranks);
  const kolo_program *loaded = kolo_sched_find(c->sched, coll, root, v, c->rank);
  if (loaded != NULL) return kolo_program_clone(loaded, out);
  return kolo_schedule_build_on(coll, &c->rings[v % c->nrings], c->rank, root, kolo_arg_algo(coll, arg, c->nranks),
                                v, out);
}

koloResult_t kolo_comm_program(struct koloComm *c, int coll, int arg, int ch, const kolo_program **out) {
  int slot = kolo_program_index(coll, arg, ch, c->nvariants);
  if (!c->program_ready[coll][slot]) {
    if (make_program(c, coll, arg, ch % c->nvariants, &c->programs[coll][slot]) != koloSuccess)
      return kolo_error(&c->err, koloSystemError, "out of memory building a %s program",
                        kolo_coll_name(coll));
    c->program_ready[coll][slot] = 1;
  }
  *out = &c->programs[coll][slot];
  return koloSuccess;
}

/* ---- point-to-point pipes ----------------------------------------------- */

static int is_p2p(int coll) { return kolo_coll_is_p2p(coll); }

koloResult_t kolo_op_pipes(struct koloComm *c, const kolo_op *op, kolo_pipe_fn f, void *arg) {
  if (is_p2p(op->coll)) return f(c, op->arg, op->coll == KOLO_COLL_SEND, arg);
  if (!kolo_op_runs_multi_peer(op)) return koloSuccess;
  for (int v = 0; v < c->nvariants; v++) { /* one program per variant (comm.h) */
    const kolo_program *p;
    koloResult_t res = kolo_comm_program(c, op->coll, op->arg, v, &p);
    for (int i = 0; res == koloSuccess && i < p->npeers; i++) {
      if (p->peers[i].sends) res = f(c, p->peers[i].rank, 1, arg);
      if (res == koloSuccess && p->peers[i].recvs) res = f(c, p->peers[i].rank, 0, arg);
    }
    if (res != koloSuccess) return res;
  }
  return koloSuccess;
}

typedef struct {
  kolo_conn_set *set;
  int cap;
} pipe_requests;

/* Requests the pipes of (peer, direction) on every channel that do not
 * exist yet (kolo_pipe_fn). */
static koloResult_t request_pipes(struct koloComm *c, int peer, int send, void *arg) {
  pipe_requests *pr = arg;
  kolo_conn_set *set = pr->set;
  for (int ch = 0; ch < c->nchannels; ch++) {
    size_t k = (size_t)peer * (size_t)c->nchannels + (size_t)ch;
    unsigned char *ready = send ? &c->p2p_send_ready[k] : &c->p2p_recv_ready[k];
    if (*ready) continue;
    if (set->n == pr->cap) {
      pr->cap = pr->cap ? 2 * pr->cap : 16;
      kolo_conn_request *r = realloc(set->reqs, (size_t)pr->cap * sizeof *r);
      if (r == NULL) return kolo_error(&c->err, koloSystemError, "out of memory making point-to-point pipes");
      set->reqs = r;
    }
    set->reqs[set->n++] = (kolo_conn_request){send ? &c->p2p_send[k] : &c->p2p_recv[k], peer, send, ch,
                                              TAG_P2P_PIPE | (uint32_t)ch};
    *ready = 2; /* requested: not to be asked twice in this group */
  }
  return koloSuccess;
}

/* Appends to *set the requests for the pipes of comm c that ops need and
 * that do not exist yet. */
static koloResult_t p2p_requests(struct koloComm *c, const kolo_op *ops, int nops, kolo_conn_set *set) {
  pipe_requests pr = {set, 0};
  *set = (kolo_conn_set){c->bs,   c->job, c->p2p_slot_bytes, c->nslots, kolo_comm_conn_mem(c),
                         NULL,    0,      &c->err,       NULL,      koloSuccess, 0, 0};
  for (int i = 0; i < nops; i++) {
    if (ops[i].comm != c) continue;
    koloResult_t res = kolo_op_pipes(c, &ops[i], request_pipes, &pr);
    if (res != koloSuccess) return res;
  }
  return koloSuccess;
}

static void p2p_mark(struct koloComm *c, const kolo_conn_set *set, koloResult_t res) {
  for (int i = 0; i < set->n; i++) {
    const kolo_conn_request *r = &set->reqs[i];
    size_t k = (size_t)r->peer * (size_t)c->nchannels + (size_t)r->channel;
    (r->is_send ? c->p2p_send_ready : c->p2p_recv_ready)[k] = res == koloSuccess;
  }
}

/* kolo_pipe_fn: koloInProgress when a pipe of (peer, direction) is
 * missing on some channel. */
static koloResult_t pipe_missing(struct koloComm *c, int peer, int send, void *arg) {
  (void)arg;
  const unsigned char *ready = send ? c->p2p_send_ready : c->p2p_recv_ready;
  for (int ch = 0; ch < c->nchannels; ch++)
    if (!ready[(size_t)peer * (size_t)c->nchannels + (size_t)ch]) return koloInProgress;
  return koloSuccess;
}

/* 1 when some op needs a point-to-point pipe that does not exist yet. */
static int pipes_missing(const kolo_op *ops, int nops) {
  for (int i = 0; i < nops; i++) {
    if (!is_p2p(ops[i].coll) && !kolo_op_runs_multi_peer(&ops[i])) continue;
    if (kolo_op_pipes(ops[i].comm, &ops[i], pipe_missing, NULL) != koloSuccess) return 1;
  }
  return 0;
}

koloResult_t kolo_p2p_connect(const kolo_op *ops, int nops) {
  /* The latency path: after a call's first time its pipes exist, and
   * nothing is allocated to find that out. */
  if (!pipes_missing(ops, nops)) return koloSuccess;
  kolo_conn_set *sets = calloc((size_t)nops, sizeof *sets);
  struct koloComm **comms = calloc((size_t)nops, sizeof *comms);
  koloResult_t res = sets && comms ? koloSuccess
                                   : kolo_error(&ops[0].comm->err, koloSystemError, "out of memory making pipes");
  int nsets = 0;
  for (int i = 0; i < nops && res == koloSuccess; i++) {
    if (!kolo_op_first_of_comm(ops, i)) continue;
    comms[nsets] = ops[i].comm;
    res = p2p_requests(ops[i].comm, ops, nops, &sets[nsets]);
    nsets++;
  }
  int tried = res == koloSuccess;
  if (tried) res = kolo_connect_sets(sets, nsets);
  for (int k = 0; k < nsets; k++) {
    /* a set's pipes exist iff that set connected (failed sets are closed) */
    p2p_mark(comms[k], &sets[k], tried ? sets[k].res : koloSystemError);
    free(sets[k].reqs);
  }
  free(sets);
  free(comms);
  return res;
}

/* ---- tasks -------------------------------------------------------------- */

static int channels_for(const struct koloComm *c, const kolo_op *op) {
  return kolo_op_channels(op, c->nranks, c->nchannels, c->min_channel_bytes, c->algo.tuned);
}

static kolo_connector *pipe_for(struct koloComm *c, int coll, int peer, int ch, int send) {
  if (peer < 0) return NULL;
  if (is_p2p(coll)) {
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

/* The algorithm of an all-reduce (ring/algo.h): the same on every rank
 * (hier only where the comm built it: a topology that allows it, not
 * forced off). */
static int all_reduce_algo(const struct koloComm *c, const kolo_op *op) {
  int a = kolo_algo_choose(&c->algo, op->count * koloTypeSize(op->type), channels_for(c, op));
  return a == KOLO_ALGO_HIER && !c->hier_ready ? KOLO_ALGO_RING : a;
}

int kolo_comm_all_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_ALL_REDUCE, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int a = all_reduce_algo(comm, &op);
  if (comm->rank == 0) /* tuning hook: KOLO_DEBUG=INFO; every rank chooses alike */
    kolo_algo_log_choice(&comm->algo_logged, &comm->algo, comm->hier_ready, count * koloTypeSize(type),
                         channels_for(comm, &op), a);
  return a;
}

int kolo_comm_bcast_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_BROADCAST, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int nch = channels_for(comm, &op), a = kolo_bcast_choose(&comm->algo, count * koloTypeSize(type), nch);
  if (comm->rank == 0) kolo_algo_log_bcast_choice(&comm->algo_logged, &comm->algo, count * koloTypeSize(type), nch, a);
  return a;
}

int kolo_comm_reduce_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_REDUCE, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int nch = channels_for(comm, &op), a = kolo_reduce_choose(&comm->algo, count * koloTypeSize(type), nch);
  if (comm->rank == 0) kolo_algo_log_reduce_choice(&comm->algo_logged, &comm->algo, count * koloTypeSize(type), nch, a);
  return a;
}

int kolo_comm_ag_algo(struct koloComm *comm, size_t count, koloDataType_t type) {
  kolo_op op = {KOLO_COLL_ALL_GATHER, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  int nch = channels_for(comm, &op), a = kolo_ag_choose(&comm->algo, count * koloTypeSize(type), nch);
  if (comm->rank == 0) kolo_algo_log_ag_choice(&comm->algo_logged, &comm->algo, count * koloTypeSize(type), nch, a);
  return a;
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
  size_t slot_bytes = kolo_on_p2p_pipes(op->coll, prog) ? c->p2p_slot_bytes : c->slot_bytes;
  t->geo = kolo_op_geometry(op, prog, c->nranks, nch, slot_bytes, c->nslots);
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
  int nch = channels_for(c, op);
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
  if (!is_p2p(op->coll)) c->ncollectives++;
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
  int nch = channels_for(c, op);
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
