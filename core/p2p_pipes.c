/* p2p_pipes.c - the point-to-point pipes of a batch of calls, made on
 * first use for send/recv and for the peers of multi-peer collectives:
 * every communicator of the batch connects its missing pipes at once. */
#include "core/p2p_pipes.h"

#include <stdlib.h>

#include "core/comm_state.h"
#include "core/plan.h"
#include "transport/transport.h"

#define TAG_P2P_PIPE 0x2000u

koloResult_t kolo_op_pipes(struct koloComm *c, const kolo_op *op, kolo_pipe_fn f, void *arg) {
  if (kolo_coll_is_p2p(op->coll)) return f(c, op->arg, op->coll == KOLO_COLL_SEND, arg);
  if (!kolo_op_runs_multi_peer(op)) return koloSuccess;
  for (int v = 0; v < c->nvariants; v++) { /* one program per variant (comm_state.h) */
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
    if (!kolo_coll_is_p2p(ops[i].coll) && !kolo_op_runs_multi_peer(&ops[i])) continue;
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
