/* net_ib_sq.c - the ib provider's send queues: posting, which work requests
 * are signaled, control messages, and the drain before close (the
 * connection's state in net_ib_conn.h, the protocol in net_ib.c).
 *
 * Signaling: a work request is signaled when it is the IB_SIGNAL_EVERY-th
 * since the last signaled one on its QP, when its queue is half full, and
 * whenever the caller forces it (control messages, the drain's marker).  A
 * QP completes in posting order, so a signaled completion says that every
 * work request before it is done too (kolo_ib_sq_done); unsignaled ones cost
 * no completion.  A queue never holds more than IB_SQ_DEPTH work requests,
 * and never IB_SQ_DEPTH / 2 without a signaled one among them, so its room
 * always comes back; the CQ has room for every signaled one and every
 * receive of every QP. */
#include <errno.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "transport/net_ib_conn.h"
#include "transport/socket.h"

int kolo_ib_sq_room(const ib_comm *c, int q, uint32_t n) {
  return c->sq[q].posted - c->sq[q].acked + n <= IB_SQ_DEPTH;
}

int kolo_ib_sq_busy(const ib_comm *c) {
  for (int q = 0; q < c->nqps; q++)
    if (c->sq[q].posted != c->sq[q].acked) return 1;
  return 0;
}

/* Whether the chain ending with work request `last` is signaled. */
static int want_signal(const ib_sq *s, uint32_t last, int force) {
  return force || last + 1 - s->signaled_to >= IB_SIGNAL_EVERY || last + 1 - s->acked >= IB_SQ_DEPTH / 2;
}

koloResult_t kolo_ib_post_chain(ib_comm *c, int q, struct ibv_send_wr *wr, int n, int force, const char *what,
                                kolo_errbuf *eb) {
  ib_sq *s = &c->sq[q];
  uint32_t last = s->posted + (uint32_t)n - 1;
  int sig = want_signal(s, last, force);
  for (int i = 0; i < n; i++) {
    wr[i].wr_id = ib_wrid(IB_WR_SEND, q, s->posted + (uint32_t)i);
    wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    wr[i].send_flags &= ~(unsigned)IBV_SEND_SIGNALED;
  }
  if (sig) wr[n - 1].send_flags |= IBV_SEND_SIGNALED;
  struct ibv_send_wr *bad = NULL;
  int e = ibv_post_send(c->qp[q], wr, &bad);
  if (e != 0) {
    c->failed = 1;
    return kolo_syserror(eb, e, "ibv_post_send(%s port %d qpn 0x%x, %s) to %s failed", c->port.name, c->port.port,
                         c->qp[q]->qp_num, what, c->who);
  }
  s->posted += (uint32_t)n;
  if (sig) s->signaled_to = last + 1;
  c->st.send_posts++;
  c->st.signaled += (uint64_t)sig;
  return koloSuccess;
}

void kolo_ib_sq_done(ib_comm *c, int q, uint32_t n) {
  ib_sq *s = &c->sq[q];
  if ((int32_t)(n + 1 - s->acked) > 0) s->acked = n + 1;
}

/* ---- control messages ---------------------------------------------------------- */

/* A free message buffer (its previous SEND completed), or -1. */
static int free_sbuf(const ib_comm *c) {
  uint32_t i = c->send_slot % IB_SEND_SLOTS;
  uint32_t wr1 = c->sbuf_wr[i];
  return wr1 == 0 || (int32_t)(c->sq[0].acked - (wr1 - 1)) > 0 ? (int)i : -1;
}

koloResult_t kolo_ib_send_msg(ib_comm *c, const kolo_ib_msg *m, int *posted, kolo_errbuf *eb) {
  *posted = 0;
  int i = free_sbuf(c);
  if (i < 0 || !kolo_ib_sq_room(c, 0, 1)) return koloSuccess;
  uint8_t *buf = c->area + IB_AREA_SBUFS + (size_t)i * IB_MSG_SLOT;
  size_t len = kolo_encode_ib_msg(m, buf);
  /* Inline where the QP allows: the buffer is free again at once. */
  int inl = len <= c->max_inline;
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)len, .lkey = c->area_mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = inl ? IBV_SEND_INLINE : 0};
  uint32_t n = c->sq[0].posted;
  koloResult_t res = kolo_ib_post_chain(c, 0, &wr, 1, 1, m->kind == KOLO_IB_MSG_RING ? "SEND of the ring" : "SEND of the stop word", eb);
  if (res != koloSuccess) return res;
  c->sbuf_wr[i] = inl ? 0 : n + 1;
  c->send_slot++;
  *posted = 1;
  return koloSuccess;
}

/* ---- the drain before close ------------------------------------------------------ */

/* An empty RDMA WRITE, signaled, after the unsignaled work requests of QP
 * q: its completion says that they are done. */
static koloResult_t post_marker(ib_comm *c, int q, kolo_errbuf *eb) {
  struct ibv_send_wr wr = {.num_sge = 0, .opcode = IBV_WR_RDMA_WRITE,
                           .wr.rdma = {.remote_addr = c->them.in_addr, .rkey = c->them.in_rkey}};
  return kolo_ib_post_chain(c, q, &wr, 1, 1, "empty RDMA WRITE closing the connection", eb);
}

/* The peer's setup socket ended: nobody acknowledges any more. */
static int peer_left(ib_comm *c) {
  unsigned char b;
  int err = 0;
  return kolo_sock_read_some(c->fd, &b, 1, &err) < 0;
}

void kolo_ib_drain(ib_comm *c, int ms) {
  if (c->failed || c->gone || !c->ready || !kolo_ib_sq_busy(c)) return;
  kolo_errbuf eb = {0};
  koloResult_t res = koloSuccess;
  for (int q = 0; q < c->nqps && res == koloSuccess; q++)
    if (c->sq[q].signaled_to != c->sq[q].posted && kolo_ib_sq_room(c, q, 1)) res = post_marker(c, q, &eb);
  int64_t deadline = kolo_now_ms() + ms;
  while (res == koloSuccess && kolo_ib_sq_busy(c) && kolo_now_ms() < deadline && !peer_left(c)) {
    res = kolo_ib_poll(c, &eb);
    if (res == koloSuccess && kolo_ib_sq_busy(c)) kolo_nap_us(50);
  }
  if (res == koloSuccess && kolo_ib_sq_busy(c))
    KOLO_INFO("ib connection with %s (%s port %d): closing with work requests not acknowledged after %d ms",
              c->who, c->port.name, c->port.port, ms);
}
