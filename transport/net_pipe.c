/* net_pipe.c - one net pipe end's turn (see net_pipe.h). */
#include "transport/net_pipe.h"

#include <string.h>

#include "common/copy.h"
#include "common/log.h"
#include "transport/net_devmem.h"

static void set_stop(kolo_net_pipe *p, uint32_t word) {
  uint32_t expected = 0;
  atomic_compare_exchange_strong(&p->ctrl->abort, &expected, word);
  kolo_futex_wake(&p->ctrl->tail);
  kolo_futex_wake(&p->ctrl->head);
}

/* ---- what the provider tells (net.h's sink) ------------------------------------ */

/* The slice's signature where the receiving executor looks for it, `set`
 * last: the executor may be polling that place right now. */
static void take_sig(kolo_net_pipe *p, uint32_t step, const kolo_call_sig *sig) {
  kolo_call_sig *dst = &p->ctrl->sig[step % KOLO_CONN_MAX_SLOTS];
  dst->count = sig->count;
  dst->seq = sig->seq;
  dst->root = sig->root;
  dst->coll = sig->coll;
  dst->type = sig->type;
  dst->op = sig->op;
  __atomic_store_n(&dst->set, sig->set, __ATOMIC_RELEASE);
}

static void on_slice(void *ctx, uint32_t step, uint32_t len, const kolo_call_sig *sig) {
  kolo_net_pipe *p = ctx;
  (void)len; /* the executor knows how much it needs */
  if (sig) take_sig(p, step, sig);
  p->landed = step + 1;
  p->arrivals++;
}

static void on_credit(void *ctx, uint32_t head) {
  kolo_net_pipe *p = ctx;
  kolo_conn_publish(&p->ctrl->head, &p->ctrl->head_waiters, head);
  p->arrivals++;
}

/* Its report first: readers look at it after the word. */
static void on_stop(void *ctx, uint32_t word, const kolo_call_mismatch *report) {
  kolo_net_pipe *p = ctx;
  p->stop_remote = 1;
  if (report) kolo_ctrl_report_mismatch(p->ctrl, report);
  set_stop(p, word);
  p->arrivals++;
}

koloResult_t kolo_net_pipe_bind(kolo_net_pipe *p, kolo_errbuf *eb) {
  kolo_net_ring ring = {p->slots, p->nslots, p->slot_bytes, p->devmem};
  kolo_net_sink sink = {p, on_slice, on_credit, on_stop};
  return p->net->bind(p->comm, &ring, &sink, eb);
}

/* ---- handing over ------------------------------------------------------------------ */

/* Sender: every slice up to the tail, its filled bytes (written before tail
 * moved) and the call's signature when it starts a call. */
static koloResult_t ship_slices(kolo_net_pipe *p) {
  uint32_t tail = atomic_load_explicit(&p->ctrl->tail, memory_order_acquire);
  koloResult_t res = koloSuccess;
  while (res == koloSuccess && p->posted != tail) {
    uint32_t s = p->posted;
    size_t len = p->ctrl->filled[s % KOLO_CONN_MAX_SLOTS];
    if (len == 0 || len > p->slot_bytes) len = p->slot_bytes;
    kolo_call_sig *sig = &p->ctrl->sig[s % KOLO_CONN_MAX_SLOTS];
    int queued = 0;
    res = p->net->send_slice(p->comm, s, len, sig->set ? sig : NULL, &queued, &p->err);
    if (!queued) break;
    /* The executor may stamp this place again only for step s + 64, after
     * the receiver drained this slice: after this store. */
    sig->set = 0;
    p->posted++;
  }
  return res;
}

/* Sender (a pipe with send_direct): the executor's next slice, from src
 * when nothing is ahead of it; else into its slot, as the executor would
 * have copied it.  A failed provider call is handled by the
 * turn's caller (*res). */
static int hand_from(kolo_net_pipe *p, kolo_connector *c, const void *src, size_t len, koloResult_t *res) {
  uint32_t s = c->step;
  char *slot = kolo_conn_slot(c);
  int queued = 0;
  if (!p->failed && p->posted == s) {
    kolo_call_sig *sig = &p->ctrl->sig[s % KOLO_CONN_MAX_SLOTS];
    *res = p->net->send_slice_from(p->comm, s, len, sig->set ? sig : NULL, src, &queued, &p->err);
    if (queued) sig->set = 0;
  }
  if (!queued) kolo_copy(slot, src, len);
  kolo_conn_sent_bytes(c, len); /* no turn ships it meanwhile: mu is held */
  if (queued) p->posted++;
  return queued;
}

/* Receiver: the head, when it moved and is due (see KOLO_NET_PIPE_PAY):
 * credits go back in batches, a system call or a write for several slots. */
static koloResult_t give_credit(kolo_net_pipe *p, unsigned dir) {
  uint32_t head = atomic_load_explicit(&p->ctrl->head, memory_order_acquire);
  uint32_t owed = head - atomic_load_explicit(&p->credit_sent, memory_order_relaxed);
  int due = (dir & KOLO_NET_PIPE_PAY) || p->polled || kolo_net_pipe_credit_due(owed, p->nslots);
  if (owed == 0 || !due) return koloSuccess;
  int queued = 0;
  koloResult_t res = p->net->send_credit(p->comm, head, &queued, &p->err);
  if (queued) atomic_store_explicit(&p->credit_sent, head, memory_order_relaxed);
  return res;
}

/* The local stop word, once, with its mismatch report when it has one; not
 * back to a peer that stopped first. */
static koloResult_t give_stop(kolo_net_pipe *p) {
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  if (word == 0 || p->stop_sent || p->stop_remote) return koloSuccess;
  kolo_call_mismatch m;
  int has = (word >> 24) == KOLO_STOP_MISMATCH && kolo_ctrl_read_mismatch(p->ctrl, &m);
  int queued = 0;
  koloResult_t res = p->net->send_stop(p->comm, word, has ? &m : NULL, &queued, &p->err);
  if (queued) p->stop_sent = 1;
  return res;
}

/* ---- the turn ---------------------------------------------------------------------- */

/* The connection is gone: executors waiting on this pipe fail naming the
 * peer (everything that arrived before was delivered already). */
static void pipe_failed(kolo_net_pipe *p) {
  p->failed = 1;
  char why[KOLO_ERR_LEN];
  KOLO_INFO("rank %d: network pipe %s %s: %s", p->self, p->is_send ? "to" : "from", p->who,
            kolo_error_read(&p->err, why, sizeof why));
  set_stop(p, ((uint32_t)KOLO_STOP_DEAD_PEER << 24) | (uint32_t)(p->peer + 1));
}

/* Receiver: the slices that arrived, as the tail. */
static void publish_landed(kolo_net_pipe *p) {
  if (p->landed == atomic_load_explicit(&p->ctrl->tail, memory_order_relaxed)) return;
  /* GPUDirect: the NIC's writes into GPU memory before the tail the kernel
   * reads (net_devmem.h). */
  if (p->flush_dev1 > 0) kolo_net_devmem_flush(p->flush_dev1 - 1);
  kolo_conn_publish(&p->ctrl->tail, &p->ctrl->tail_waiters, p->landed);
}

int kolo_net_pipe_turn(kolo_net_pipe *p, unsigned dir) {
  if (p->failed) return 0;
  uint32_t before = p->arrivals, posted = p->posted, credited = atomic_load(&p->credit_sent);
  int stop_sent = p->stop_sent;
  koloResult_t res = p->is_send ? ship_slices(p) : give_credit(p, dir);
  if (res == koloSuccess) res = give_stop(p);
  if (res == koloSuccess) res = p->net->progress(p->comm, (dir & KOLO_NET_IN) | KOLO_NET_OUT, &p->err);
  if (!p->is_send) publish_landed(p);
  if (res != koloSuccess) {
    pipe_failed(p);
    return 1;
  }
  return p->arrivals != before || p->posted != posted || atomic_load(&p->credit_sent) != credited ||
         p->stop_sent != stop_sent;
}

int kolo_net_pipe_turn_from(kolo_net_pipe *p, kolo_connector *c, const void *src, size_t len) {
  koloResult_t res = koloSuccess;
  int sent = hand_from(p, c, src, len, &res);
  if (res != koloSuccess) {
    if (!p->failed) pipe_failed(p);
    return 1;
  }
  return kolo_net_pipe_turn(p, KOLO_NET_OUT) | sent;
}

int kolo_net_pipe_needs_proxy(kolo_net_pipe *p) {
  if (p->failed) return 0;
  if (p->polled || p->net->pending(p->comm)) return 1;
  if (p->is_send && p->posted != atomic_load_explicit(&p->ctrl->tail, memory_order_acquire)) return 1;
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  return word != 0 && !p->stop_sent && !p->stop_remote;
}

/* Not once it stopped (a kernel that stops early leaves slices it will
 * never move) and its stop word went out or came in. */
int kolo_net_pipe_hot(kolo_net_pipe *p) {
  if (!p->polled || p->failed) return 0;
  uint32_t due = atomic_load_explicit(&p->due, memory_order_seq_cst);
  int outstanding = p->is_send ? (p->posted != due || p->net->pending(p->comm))
                               : atomic_load(&p->credit_sent) != due;
  if (!outstanding) return 0;
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  return word == 0 || (!p->stop_sent && !p->stop_remote);
}

int kolo_net_pipe_flushed(kolo_net_pipe *p) {
  if (p->failed) return 1;
  uint32_t word = atomic_load_explicit(&p->ctrl->abort, memory_order_acquire);
  if (word != 0 && !p->stop_sent && !p->stop_remote) return 0;
  if (word == 0 && p->is_send && p->posted != atomic_load_explicit(&p->ctrl->tail, memory_order_acquire))
    return 0;
  if (p->net->pending(p->comm)) return 0;
  /* a stopped pipe owes its peer nothing more than its stop word */
  return word != 0 || p->stop_remote || p->net->unacked == NULL || !p->net->unacked(p->comm);
}
