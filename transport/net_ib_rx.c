/* net_ib_rx.c - what comes in on an ib provider connection: completions,
 * slices (the receiver), credits and rings (the sender), stop words (both)
 * (the protocol at the top of net_ib.c, the state in net_ib_conn.h).
 *
 * Receives are taken back in one ibv_post_recv per QP and poll, after the
 * completions that used them were handled (a control message is decoded in
 * its buffer first).  The sink hears of a slice only once all its pieces
 * came, in step order, and of a stop word only after every slice that came
 * whole before it. */
#include <arpa/inet.h>
#include <string.h>

#include "transport/net_ib_conn.h"

/* GCC refuses thread fences under TSan (-Werror=tsan); TSan does not see
 * the NIC's writes either, so there the compiler barrier is all it takes. */
#if defined(__SANITIZE_THREAD__)
#define acquire_after_completion() __atomic_signal_fence(__ATOMIC_ACQUIRE)
#else
#define acquire_after_completion() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

#define MAX_PIECE (4u << 20)
#define SPLIT_MIN (64u << 10)
#define CQ_BATCH 16

/* ---- pieces ------------------------------------------------------------------ */

uint32_t kolo_ib_pieces(size_t len, int nqps) {
  uint32_t n = (uint32_t)((len + MAX_PIECE - 1) / MAX_PIECE);
  if (len >= SPLIT_MIN && n < (uint32_t)nqps) n = (uint32_t)nqps;
  return n < 1 ? 1 : n;
}

size_t kolo_ib_piece_lo(size_t len, uint32_t n, uint32_t i) { return len / n * i; }
size_t kolo_ib_piece_hi(size_t len, uint32_t n, uint32_t i) { return i == n - 1 ? len : len / n * (i + 1); }

/* ---- errors ------------------------------------------------------------------ */

koloResult_t kolo_ib_failed_earlier(ib_comm *c, kolo_errbuf *eb) {
  return kolo_error_quiet(eb, koloRemoteError, "the ib network connection to %s failed earlier", c->who);
}

koloResult_t kolo_ib_peer_closed(ib_comm *c, kolo_errbuf *eb) {
  c->failed = 1;
  return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection", c->who);
}

static koloResult_t garbled(ib_comm *c, kolo_errbuf *eb, const char *why) {
  c->failed = 1;
  return kolo_error(eb, koloRemoteError, "%s %s (ib connection on %s port %d)", c->who, why, c->port.name,
                    c->port.port);
}

static const char *wr_kind(const struct ibv_wc *wc) {
  if ((int)(wc->wr_id >> 56) == IB_WR_RECV) return "RECV";
  switch (wc->opcode) {
  case IBV_WC_RDMA_WRITE: return "RDMA WRITE";
  case IBV_WC_SEND: return "SEND";
  default: return "send work request";
  }
}

static koloResult_t wc_failed(ib_comm *c, const struct ibv_wc *wc, kolo_errbuf *eb) {
  if (c->gone) return kolo_ib_peer_closed(c, eb);
  c->failed = 1;
  int q = (int)((wc->wr_id >> 48) & 0xff);
  int remote = wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR ||
               wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_INV_REQ_ERR ||
               wc->status == IBV_WC_REM_OP_ERR || wc->status == IBV_WC_REM_ABORT_ERR;
  return kolo_error(eb, remote ? koloRemoteError : koloSystemError,
                    "completion error on %s port %d (qpn 0x%x) with %s: %s: status '%s' (%d), vendor_err 0x%x",
                    c->port.name, c->port.port, q < c->nqps ? c->qp[q]->qp_num : 0, c->who, wr_kind(wc),
                    ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
}

/* ---- the receiver: slices ------------------------------------------------------- */

static char *slot_of(const ib_comm *c, uint32_t step) {
  return c->ring.slots + (size_t)(step % c->ring.nslots) * c->ring.slot_bytes;
}

static uint8_t *entry_of(const ib_comm *c, uint32_t step) {
  return c->area + IB_AREA_IN + (size_t)(step % IB_STEPS) * KOLO_IB_ENTRY_BYTES;
}

/* The first piece of a step says what the slice is. */
static void step_begin(ib_comm *c, ib_step *st, uint32_t len) {
  st->seen = 1;
  st->len = len;
  st->inbox = len <= c->inbox_max;
  st->pieces = st->inbox ? 1 : (uint16_t)kolo_ib_pieces(len, c->nqps);
  st->got = 0;
  st->bytes = 0;
}

/* A write of a slice (one piece) completed a receive. */
static koloResult_t on_piece(ib_comm *c, uint32_t imm, uint32_t byte_len, kolo_errbuf *eb) {
  uint32_t len = imm & KOLO_IB_MAX_SLICE, at = imm >> KOLO_IB_IMM_LEN_BITS;
  uint32_t step = c->delivered + ((at - c->delivered) % IB_STEPS);
  char why[200];
  if (c->is_send || !c->bound || step - c->delivered >= c->ring.nslots || len > c->ring.slot_bytes) {
    snprintf(why, sizeof why, "wrote slice %u of %u bytes where this end expects slices %u..%u of at most %zu",
             step, len, c->delivered, c->delivered + c->ring.nslots - 1, c->ring.slot_bytes);
    return garbled(c, eb, why);
  }
  ib_step *st = &c->steps[step % IB_STEPS];
  if (!st->seen) step_begin(c, st, len);
  st->got++;
  st->bytes += byte_len;
  int fits = st->inbox ? byte_len == len || byte_len == len + KOLO_IB_SIGHDR_BYTES : st->bytes <= len;
  if (st->len != len || st->got > st->pieces || !fits) {
    snprintf(why, sizeof why, "wrote a piece of %u bytes of slice %u (%u bytes) that does not fit it", byte_len,
             step, len);
    return garbled(c, eb, why);
  }
  return koloSuccess;
}

/* The next slice is whole: its signature out of its entry (cleared for a
 * later step), its bytes into its slot when they came in the entry. */
static koloResult_t deliver_one(ib_comm *c, ib_step *st, kolo_errbuf *eb) {
  uint8_t *entry = entry_of(c, c->delivered);
  kolo_call_sig sig;
  int has = 0;
  char why[200];
  acquire_after_completion(); /* the entry after the completion that announced it */
  if (!st->inbox && st->bytes != st->len) {
    snprintf(why, sizeof why, "wrote %llu bytes of slice %u, which has %u", (unsigned long long)st->bytes,
             c->delivered, st->len);
    return garbled(c, eb, why);
  }
  if (kolo_decode_ib_sighdr(entry, &sig, &has, why, sizeof why) != KOLO_NET_WIRE_OK) return garbled(c, eb, why);
  if (st->inbox && st->len > 0) memcpy(slot_of(c, c->delivered), entry + KOLO_IB_SIGHDR_BYTES, st->len);
  memset(entry, 0, KOLO_IB_SIGHDR_BYTES);
  st->seen = 0;
  c->st.slices++;
  c->st.inbox += (uint64_t)st->inbox;
  uint32_t step = c->delivered++;
  if (!c->closing) c->sink.slice(c->sink.ctx, step, st->len, has ? &sig : NULL);
  return koloSuccess;
}

koloResult_t kolo_ib_deliver(ib_comm *c, kolo_errbuf *eb) {
  for (;;) {
    ib_step *st = &c->steps[c->delivered % IB_STEPS];
    if (!st->seen || st->got < st->pieces) return koloSuccess;
    koloResult_t res = deliver_one(c, st, eb);
    if (res != koloSuccess) return res;
  }
}

/* ---- the sender: credits and rings ------------------------------------------------- */

static koloResult_t take_credit(ib_comm *c, uint32_t head, kolo_errbuf *eb) {
  if ((int32_t)(head - c->credited) <= 0) return koloSuccess; /* an older record, or the same */
  if ((int32_t)(head - c->next_step) > 0) {
    char why[160];
    snprintf(why, sizeof why, "credited %u slices where %u were sent", head, c->next_step);
    return garbled(c, eb, why);
  }
  c->credited = head;
  c->st.credits++;
  if (!c->closing) c->sink.credit(c->sink.ctx, head);
  return koloSuccess;
}

/* The head in the credit record (one 8-byte load); 0 when there is none
 * yet or it was caught mid-write (look again later). */
static int credit_record(const ib_comm *c, uint32_t *head) {
  uint64_t word = __atomic_load_n((const uint64_t *)(c->area + IB_AREA_IN), __ATOMIC_ACQUIRE);
  uint8_t rec[KOLO_IB_CREDIT_BYTES];
  memcpy(rec, &word, sizeof rec);
  return kolo_decode_ib_credit(rec, head) == KOLO_NET_WIRE_OK;
}

koloResult_t kolo_ib_read_credit(ib_comm *c, kolo_errbuf *eb) {
  uint32_t head;
  return credit_record(c, &head) ? take_credit(c, head, eb) : koloSuccess;
}

int kolo_ib_credit_waiting(const ib_comm *c) {
  uint32_t head;
  return credit_record(c, &head) && head != c->credited;
}

/* A ring the receiver advertised; it applies from the sender's bind of the
 * same number (kolo_ib_take_ring). */
static koloResult_t on_ring(ib_comm *c, const kolo_ib_ring *g, kolo_errbuf *eb) {
  if (c->peer.gen != 0 && (int32_t)(g->gen - c->peer.gen) <= 0) {
    char why[160];
    snprintf(why, sizeof why, "advertised the ring of its bind %u after that of bind %u", g->gen, c->peer.gen);
    return garbled(c, eb, why);
  }
  c->peer = *g;
  c->have_peer = 0;
  return kolo_ib_take_ring(c, eb);
}

koloResult_t kolo_ib_take_ring(ib_comm *c, kolo_errbuf *eb) {
  if (!c->bound || c->have_peer || c->peer.gen != c->binds) return koloSuccess;
  if (c->peer.from_step != c->next_step) {
    char why[200];
    snprintf(why, sizeof why, "advertised a ring from step %u at this end's step %u (bind %u)", c->peer.from_step,
             c->next_step, c->binds);
    return garbled(c, eb, why);
  }
  if (c->peer.nslots < c->ring.nslots) {
    c->failed = 1;
    return kolo_error(eb, koloInvalidUsage, "%s receives into %u slots, this end sends from %u (ib connection)",
                      c->who, c->peer.nslots, c->ring.nslots);
  }
  c->have_peer = 1;
  return koloSuccess;
}

/* ---- control messages ----------------------------------------------------------- */

static koloResult_t on_msg(ib_comm *c, const uint8_t *buf, uint32_t len, kolo_errbuf *eb) {
  kolo_ib_msg m;
  char why[200];
  if (kolo_decode_ib_msg(buf, len, c->is_send, &m, why, sizeof why) != KOLO_NET_WIRE_OK) return garbled(c, eb, why);
  if (m.kind == KOLO_IB_MSG_RING) return on_ring(c, &m.ring, eb);
  koloResult_t res = c->is_send ? koloSuccess : kolo_ib_deliver(c, eb); /* what came before it first */
  if (res != koloSuccess) return res;
  c->stop_seen = 1;
  if (!c->closing) c->sink.stop(c->sink.ctx, m.value, (m.flags & KOLO_IB_FLAG_REPORT) ? &m.report : NULL);
  return koloSuccess;
}

/* ---- completions ----------------------------------------------------------------- */

typedef struct {
  uint32_t idx[IB_MAX_QPS][CQ_BATCH + IB_STASH];
  int n[IB_MAX_QPS];
} reposts;

static koloResult_t on_recv(ib_comm *c, const struct ibv_wc *wc, int q, uint32_t i, kolo_errbuf *eb) {
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    uint32_t imm = ntohl(wc->imm_data);
    if (!c->is_send) return on_piece(c, imm, wc->byte_len, eb);
    c->st.imm_credits++; /* a credit that woke this end; the record says the same or newer */
    return take_credit(c, imm, eb);
  }
  if (wc->opcode == IBV_WC_RECV && q == 0 && wc->byte_len <= IB_MSG_SLOT)
    return on_msg(c, c->area + IB_AREA_RBUFS + (size_t)i * IB_MSG_SLOT, wc->byte_len, eb);
  char why[160];
  snprintf(why, sizeof why, "sent an ib message of %u bytes (opcode %d) on QP %d", wc->byte_len, (int)wc->opcode, q);
  return garbled(c, eb, why);
}

static koloResult_t completion(ib_comm *c, const struct ibv_wc *wc, reposts *rp, kolo_errbuf *eb) {
  if (wc->status != IBV_WC_SUCCESS) return wc_failed(c, wc, eb);
  int kind = (int)(wc->wr_id >> 56), q = (int)((wc->wr_id >> 48) & 0xff);
  uint32_t n = (uint32_t)wc->wr_id;
  if (q >= c->nqps || (kind != IB_WR_SEND && kind != IB_WR_RECV)) {
    c->failed = 1;
    return kolo_error(eb, koloInternalError, "completion of an unknown ib work request 0x%llx from %s",
                      (unsigned long long)wc->wr_id, c->who);
  }
  if (kind == IB_WR_SEND) {
    kolo_ib_sq_done(c, q, n);
    return koloSuccess;
  }
  rp->idx[q][rp->n[q]++] = n;
  return on_recv(c, wc, q, n, eb);
}

static koloResult_t repost(ib_comm *c, reposts *rp, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  for (int q = 0; q < c->nqps && res == koloSuccess; q++)
    if (rp->n[q] > 0) res = kolo_ib_post_recvs(c, q, rp->idx[q], rp->n[q], eb);
  if (res != koloSuccess) c->failed = 1;
  return res;
}

/* Handles n completions, then gives their receives back. */
static koloResult_t handle(ib_comm *c, const struct ibv_wc *wc, int n, kolo_errbuf *eb) {
  reposts rp;
  memset(rp.n, 0, sizeof rp.n);
  koloResult_t res = koloSuccess;
  for (int i = 0; i < n && res == koloSuccess; i++) res = completion(c, &wc[i], &rp, eb);
  koloResult_t r2 = c->failed ? koloSuccess : repost(c, &rp, eb);
  return res != koloSuccess ? res : r2;
}

koloResult_t kolo_ib_poll(ib_comm *c, kolo_errbuf *eb) {
  if (c->nstash > 0) { /* polled by pollfds, first in line */
    int n = c->nstash;
    c->nstash = 0;
    koloResult_t res = handle(c, c->stash, n, eb);
    if (res != koloSuccess) return res;
  }
  for (;;) {
    struct ibv_wc wc[CQ_BATCH];
    int n = ibv_poll_cq(c->cq, CQ_BATCH, wc);
    c->st.polls++;
    if (n < 0) {
      c->failed = 1;
      return kolo_error(eb, koloSystemError, "ibv_poll_cq(%s port %d) for %s failed (%d)", c->port.name,
                        c->port.port, c->who, n);
    }
    c->st.cqes += (uint64_t)n;
    koloResult_t res = n > 0 ? handle(c, wc, n, eb) : koloSuccess;
    if (res != koloSuccess || n < CQ_BATCH) return res;
  }
}
