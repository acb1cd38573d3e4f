/* comm_state.c - what a communicator is in: ready (init done), failed,
 * revoked, and stopping its pipes; and the hooks by which its executor
 * learns of peers' fates and stops every pipe. */
#include "core/comm_state.h"

#include <stddef.h>

#include "core/mem_kind.h"

static int owner_peer_dead(kolo_exec_owner *o, int peer) {
  struct koloComm *c = (struct koloComm *)((char *)o - offsetof(struct koloComm, owner));
  return kolo_bootstrap_peer_dead(c->bs, peer);
}

static int owner_peer_blamed(kolo_exec_owner *o, int peer) {
  struct koloComm *c = (struct koloComm *)((char *)o - offsetof(struct koloComm, owner));
  return kolo_bootstrap_peer_blamed(c->bs, peer);
}

/* Stops one pipe; a mismatch's report goes first, for the other end. */
static void stop_pipe(kolo_connector *x, int reason, int rank, const kolo_call_mismatch *m) {
  if (x->ctrl == NULL) return;
  if (m != NULL) kolo_conn_report_mismatch(x, m);
  kolo_conn_stop(x, reason, rank);
}

void kolo_comm_stop_from(struct koloComm *c, int reason, int rank, const kolo_call_mismatch *m) {
  if (c->kind) {
    c->kind->stop(c, reason); /* device pipes: always "stopped by this rank" */
    return;
  }
  for (int ch = 0; ch < c->nchannels; ch++) {
    stop_pipe(&c->ring_send[ch], reason, rank, m);
    stop_pipe(&c->ring_recv[ch], reason, rank, m);
    for (int k = 0; k < 2; k++) {
      stop_pipe(&c->hier_send[k][ch], reason, rank, m);
      stop_pipe(&c->hier_recv[k][ch], reason, rank, m);
    }
  }
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  for (size_t i = 0; c->p2p_send && i < np; i++) {
    if (c->p2p_send_ready[i]) stop_pipe(&c->p2p_send[i], reason, rank, m);
    if (c->p2p_recv_ready[i]) stop_pipe(&c->p2p_recv[i], reason, rank, m);
  }
}

const struct kolo_conn_mem *kolo_comm_conn_mem(const struct koloComm *c) { return c->kind ? c->kind->conn_mem(c) : NULL; }

void kolo_comm_stop(struct koloComm *c, int reason) { kolo_comm_stop_from(c, reason, c->rank, NULL); }

static void owner_stop_all(kolo_exec_owner *o, int reason, int rank) {
  struct koloComm *c = (struct koloComm *)((char *)o - offsetof(struct koloComm, owner));
  kolo_comm_stop_from(c, reason, rank, reason == KOLO_STOP_MISMATCH && o->has_mismatch ? &o->mismatch : NULL);
}

void kolo_comm_owner_hooks(kolo_exec_owner *o) {
  o->peer_dead = owner_peer_dead;
  o->peer_blamed = owner_peer_blamed;
  o->stop_all = owner_stop_all;
}

koloResult_t kolo_comm_check_ready(struct koloComm *c, const char *fn, int revoked_ok) {
  if (atomic_load(&c->init_busy))
    return kolo_error(&c->err, koloInvalidUsage,
                      "%s: rank %d: the communicator's init is still in progress (koloCommGetAsyncError says "
                      "koloInProgress until it is done)", fn, c->rank);
  if (!atomic_load(&c->ready))
    return kolo_error(NULL, (koloResult_t)c->failed, "%s: rank %d: the communicator's init failed: %s", fn,
                      c->rank, kolo_error_read(&c->err, (char[KOLO_ERR_LEN]){0}, KOLO_ERR_LEN));
  if (!revoked_ok && atomic_load(&c->revoked))
    return kolo_error(&c->err, koloInvalidUsage,
                      "%s: rank %d: the communicator was revoked (koloCommRevoke): only koloCommDestroy, "
                      "koloCommAbort, koloCommSplit and koloCommShrink may follow", fn, c->rank);
  return koloSuccess;
}

koloResult_t kolo_comm_failed_earlier(struct koloComm *c, koloResult_t res, const char *fn) {
  char why[KOLO_ERR_LEN];
  return kolo_error(NULL, res, "%s: the communicator failed earlier: %s", fn,
                    kolo_error_read(&c->err, why, sizeof why));
}
