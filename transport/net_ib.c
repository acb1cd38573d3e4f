/* net_ib.c - the ibverbs provider's data path (see net.h; setup and
 * teardown in net_ib_setup.c, the connection's state in net_ib_conn.h).
 *
 * Regions: the receiver's irecv registers its buffer (once: registrations
 * are cached by address range for the connection's life, and the proxy's
 * slots never move, so later posts cost nothing; a region's memory must
 * stay mapped until close) and advertises it to the sender as a control
 * message {ADVERT, request number, address, rkey, length}.  The sender's
 * isend is accepted at once; when the advert with its number is there it
 * writes the region (which may be shorter than the receive: the proxy sends
 * only the filled part of a slot, KOLO_NET_SHORT_SENDS) with RDMA WRITE
 * WITH IMMEDIATE, in pieces: one piece below 64 KiB, else one per QP
 * (KOLO_IB_QPS_PER_CONN), and none larger than 4 MiB; piece i of request r
 * goes on QP (r + i) % nqps.  Every piece's immediate is
 * (r % KOLO_NET_MAX_REQS) << 26 | the region's length (below 64 MiB), so
 * the receiver knows the request and how many bytes come, computes the
 * same pieces from that length, and is done when all of them arrived (each
 * completion's byte_len counts its piece).  Adverts, credits and stop words
 * are SENDs on QP 0, so they arrive in order; the receive of a control
 * message is reposted at once, and RNR retries are unbounded so a peer
 * slow to repost only waits.  One SEND carries up to IB_CTRL_BATCH
 * messages: all that are queued when it is posted.
 *
 * Adverts are held back while the sender still holds more unused ones than
 * are waiting here (a piece of request r arriving says the sender used
 * advert r), and go out with any other control message (the proxy's
 * credit): a receiver that keeps several regions posted (the proxy's ring
 * of slots) advertises them a batch per SEND, not one SEND each, and a
 * sender never runs dry (when it has used all it holds, the rest go).  On
 * soft-RoCE every SEND costs as much kernel work as a write, and that is
 * what a half round trip is made of.  Every work request is signaled: a send's
 * completion frees its place in the send queue (sq_used), a write's marks
 * its piece done.  A piece of at most the QP's max_inline bytes (from host
 * memory) goes inline, as perftest's latency tests send: done when posted.
 *
 * The peer going away: its TCP setup socket ends.  Control messages and
 * regions that arrived before are still delivered: requests still open
 * fail only GONE_GRACE_MS after the end was seen, while the CQ is drained.
 *
 * Waking the proxy (KOLO_NET_EXACT_POLL): pollfds() arms the CQ's
 * completion channel (once per event) and returns its fd, plus the TCP
 * socket while the peer is there.  After arming it polls the CQ once more:
 * a completion that came before the arming (and so raises no event) is
 * kept for the next progress, and the socket is returned for POLLOUT,
 * which is ready at once, so the proxy does not sleep on it. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "transport/net_ib_conn.h"
#include "transport/socket.h"

#define IMM_LEN_BITS 26
#define MAX_REGION ((1u << IMM_LEN_BITS) - 1)
#define MAX_PIECE (4u << 20)
#define SPLIT_MIN (64u << 10)
#define GONE_GRACE_MS 20
/* The peer's socket is looked at every PEER_CHECK_CALLS progress calls (and
 * on the first call after pollfds, that is after a sleep), at most once a
 * millisecond.  Only then is the clock read, and a coarse one: a VM
 * without a usable TSC (QEMU's software emulation) reads the HPET, ~2 us
 * and an exit to the emulator per read, which slowed the polling loop and
 * the other vCPU, busy with the kernel's soft-RoCE, alike. */
#define PEER_CHECK_CALLS 64
#define OUTQ_USER (IB_OUTQ - KOLO_NET_MAX_REQS) /* adverts always find room */
#define CQ_BATCH 16

_Static_assert(KOLO_NET_MAX_REQS <= (1 << (32 - IMM_LEN_BITS)), "a request number must fit the immediate");

/* ---- pieces ------------------------------------------------------------------ */

static uint32_t npieces(size_t len, int nqps) {
  uint32_t n = (uint32_t)((len + MAX_PIECE - 1) / MAX_PIECE);
  if (len >= SPLIT_MIN && n < (uint32_t)nqps) n = (uint32_t)nqps;
  return n < 1 ? 1 : n;
}

static size_t piece_lo(size_t len, uint32_t n, uint32_t i) { return len / n * i; }
static size_t piece_hi(size_t len, uint32_t n, uint32_t i) { return i == n - 1 ? len : len / n * (i + 1); }

/* ---- errors ------------------------------------------------------------------ */

static koloResult_t failed_earlier(ib_comm *c, kolo_errbuf *eb) {
  return kolo_error_quiet(eb, koloRemoteError, "the ib network connection to %s failed earlier", c->who);
}

/* The peer left: reported without logging (the proxy decides whether that
 * is a failure: a sender that finished and left is none). */
static koloResult_t peer_closed(ib_comm *c, kolo_errbuf *eb) {
  c->failed = 1;
  return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection", c->who);
}

static const char *wr_kind(uint64_t wr_id) {
  switch ((int)(wr_id >> 56)) {
  case IB_WR_WRITE: return "RDMA WRITE WITH IMMEDIATE";
  case IB_WR_WRITE_INLINE: return "RDMA WRITE WITH IMMEDIATE (inline)";
  case IB_WR_CTRL: return "control SEND";
  case IB_WR_RECV: return "RECV";
  default: return "unknown work request";
  }
}

static koloResult_t wc_failed(ib_comm *c, const struct ibv_wc *wc, kolo_errbuf *eb) {
  if (c->gone) return peer_closed(c, eb);
  c->failed = 1;
  int q = (int)((wc->wr_id >> 48) & 0xff);
  int remote = wc->status == IBV_WC_RETRY_EXC_ERR || wc->status == IBV_WC_RNR_RETRY_EXC_ERR ||
               wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_INV_REQ_ERR ||
               wc->status == IBV_WC_REM_OP_ERR || wc->status == IBV_WC_REM_ABORT_ERR;
  return kolo_error(eb, remote ? koloRemoteError : koloSystemError,
                    "completion error on %s port %d (qpn 0x%x) with %s: %s: status '%s' (%d), vendor_err 0x%x",
                    c->port.name, c->port.port, q < c->nqps ? c->qp[q]->qp_num : 0, c->who, wr_kind(wc->wr_id),
                    ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
}

/* ---- memory registrations ----------------------------------------------------- */

/* The lkey/rkey of a registration covering [buf, buf + len), made (page
 * aligned) on a miss; the least recently used one goes when all are taken. */
static koloResult_t mr_for(ib_comm *c, void *buf, size_t len, struct ibv_mr **mr, kolo_errbuf *eb) {
  uintptr_t lo = (uintptr_t)buf, hi = lo + len;
  int victim = 0;
  if (c->dmabuf.mr && c->dmabuf.lo <= lo && hi <= c->dmabuf.hi) { /* device memory: cannot be re-registered */
    *mr = c->dmabuf.mr;
    return koloSuccess;
  }
  c->mr_clock++;
  for (int k = 0; k < IB_MR_CACHE; k++) {
    int i = (c->mr_last + k) % IB_MR_CACHE;
    ib_mr_entry *e = &c->mrs[i];
    if (e->mr && e->lo <= lo && hi <= e->hi) {
      e->used = c->mr_clock;
      c->mr_last = i;
      *mr = e->mr;
      return koloSuccess;
    }
    if (e->used < c->mrs[victim].used) victim = i;
  }
  ib_mr_entry *e = &c->mrs[victim];
  if (e->mr) {
    int err = ibv_dereg_mr(e->mr);
    e->mr = NULL;
    if (err != 0) return kolo_syserror(eb, err, "ibv_dereg_mr(%s) failed", c->port.name);
  }
  uintptr_t plo = lo & ~(uintptr_t)4095, phi = (hi + 4095) & ~(uintptr_t)4095;
  int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE);
  koloResult_t res = kolo_ib_reg(c->pd, c->port.name, (void *)plo, phi - plo, access, &e->mr, eb);
  if (res != koloSuccess) return res;
  e->lo = plo;
  e->hi = phi;
  e->used = c->mr_clock;
  c->mr_last = victim;
  *mr = e->mr;
  return koloSuccess;
}

/* GPUDirect RDMA: device memory exported as a dma-buf, registered once for
 * the connection's life (the sender's NIC reads it, the receiver's writes
 * it, as with host slots). */
static koloResult_t ib_reg_dmabuf(void *comm, void *buf, size_t len, int fd, uint64_t offset, kolo_errbuf *eb) {
  ib_comm *c = comm;
  if (c->dmabuf.mr != NULL)
    return kolo_error(eb, koloInternalError, "the ib connection with %s already has GPUDirect slots", c->who);
  int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr *mr = ibv_reg_dmabuf_mr(c->pd, offset, len, (uint64_t)(uintptr_t)buf, fd, access);
  if (mr == NULL)
    return kolo_syserror(eb, errno,
                         "ibv_reg_dmabuf_mr of %zu bytes of GPU memory on %s failed (the NIC driver must "
                         "support dma-buf, e.g. mlx5 with rdma-core 34+ and Linux 5.12+)",
                         len, c->port.name);
  c->dmabuf.mr = mr;
  c->dmabuf.lo = (uintptr_t)buf;
  c->dmabuf.hi = (uintptr_t)buf + len;
  return koloSuccess;
}

/* ---- control messages ---------------------------------------------------------- */

static void outq_push(ib_comm *c, const ib_msg *m) { c->outq[c->out_tail++ % IB_OUTQ] = *m; }

/* Queues the adverts held back (see the top of this file) when the sender
 * holds no more unused ones than wait here, or when another message goes
 * out anyway. */
static void queue_adverts(ib_comm *c) {
  uint32_t waiting = c->tail - c->adv_next, held = c->adv_next - c->seen;
  if (waiting == 0 || (held > waiting && c->out_head == c->out_tail)) return;
  for (; c->adv_next != c->tail; c->adv_next++) {
    ib_req *r = &c->reqs[c->adv_next % KOLO_NET_MAX_REQS];
    ib_msg m = {.kind = IB_MSG_ADVERT, .seq = c->adv_next, .rkey = r->rkey, .addr = (uintptr_t)r->buf,
                .len = r->len};
    outq_push(c, &m);
  }
}

/* Posts queued control messages as SENDs on QP 0 while it has room, up to
 * IB_CTRL_BATCH per SEND.  A SEND's sbufs slot is reused IB_SQ_DEPTH SENDs
 * later, when it has completed (one QP completes in posting order). */
static koloResult_t flush_out(ib_comm *c, kolo_errbuf *eb) {
  while (c->out_head != c->out_tail && c->sq_used[0] < IB_SQ_DEPTH) {
    ib_msg *m = &c->sbufs[(size_t)(c->ctrl_posted % IB_SQ_DEPTH) * IB_CTRL_BATCH];
    uint32_t k = 0;
    for (; k < IB_CTRL_BATCH && c->out_head + k != c->out_tail; k++) m[k] = c->outq[(c->out_head + k) % IB_OUTQ];
    struct ibv_sge sge = {.addr = (uintptr_t)m, .length = k * (uint32_t)sizeof *m, .lkey = c->smr->lkey};
    struct ibv_send_wr wr = {.wr_id = ib_wrid(IB_WR_CTRL, 0, c->ctrl_posted), .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED | (c->inline_ok ? IBV_SEND_INLINE : 0)},
                       *bad;
    int e = ibv_post_send(c->qp[0], &wr, &bad);
    if (e != 0) {
      c->failed = 1;
      return kolo_syserror(eb, e, "ibv_post_send(%s qpn 0x%x, control SEND) to %s failed", c->port.name,
                           c->qp[0]->qp_num, c->who);
    }
    c->sq_used[0]++;
    c->st.send_posts++;
    c->st.ctrl_sends++;
    c->st.ctrl_msgs += k;
    c->ctrl_posted++;
    c->out_head += k;
  }
  return koloSuccess;
}

/* A control message arrived. */
static koloResult_t got_msg(ib_comm *c, const ib_msg *m, kolo_errbuf *eb) {
  if (m->kind == IB_MSG_ADVERT && c->is_send) {
    ib_advert *a = &c->adv[m->seq % KOLO_NET_MAX_REQS];
    *a = (ib_advert){m->addr, m->len, m->rkey, m->seq, 1};
    return koloSuccess;
  }
  if (m->kind != IB_MSG_CREDIT && m->kind != IB_MSG_STOP && m->kind != KOLO_NET_CTRL_WORD &&
      m->kind != KOLO_NET_CTRL_SIG) {
    c->failed = 1;
    return kolo_error(eb, koloRemoteError, "%s sent an unknown ib control message (kind %u)", c->who, m->kind);
  }
  if (c->in_tail - c->in_head == IB_INBOX) {
    /* Full (nobody reads): a credit carries the peer's head, so a newer
     * one replaces an older one at the end without losing anything. */
    ib_msg *last = &c->inbox[(c->in_tail - 1) % IB_INBOX];
    if (m->kind == IB_MSG_CREDIT && last->kind == IB_MSG_CREDIT) {
      *last = *m;
      return koloSuccess;
    }
    c->failed = 1;
    return kolo_error(eb, koloInternalError, "%d control messages from %s are waiting to be read", IB_INBOX,
                      c->who);
  }
  c->inbox[c->in_tail++ % IB_INBOX] = *m;
  return koloSuccess;
}

/* A piece of a region arrived (receiver). */
static koloResult_t got_piece(ib_comm *c, uint32_t imm, uint32_t byte_len, kolo_errbuf *eb) {
  uint32_t slot = imm >> IMM_LEN_BITS, total = imm & MAX_REGION;
  ib_req *r = &c->reqs[slot % KOLO_NET_MAX_REQS];
  uint32_t id = c->head + ((slot - c->head) % KOLO_NET_MAX_REQS);
  int bad = c->is_send || (int32_t)(c->tail - id) <= 0 || total > r->len ||
            (r->npieces != 0 && r->total != total);
  if (!bad && r->npieces == 0) { /* the first piece says how many come */
    r->total = total;
    r->npieces = npieces(total, c->nqps);
  }
  if (bad || r->done >= r->npieces || r->bytes + byte_len > total) {
    c->failed = 1;
    return kolo_error(eb, koloRemoteError,
                      "%s wrote a region this end did not expect (immediate 0x%08x, %u bytes; request %u "
                      "receives at most %zu)", c->who, imm, byte_len, id, r->len);
  }
  r->done++;
  r->bytes += byte_len;
  if ((int32_t)(id + 1 - c->seen) > 0) c->seen = id + 1; /* the sender used advert id */
  return koloSuccess;
}

/* ---- completions ----------------------------------------------------------------- */

static koloResult_t completion(ib_comm *c, const struct ibv_wc *wc, kolo_errbuf *eb) {
  if (wc->status != IBV_WC_SUCCESS) return wc_failed(c, wc, eb);
  int kind = (int)(wc->wr_id >> 56), q = (int)((wc->wr_id >> 48) & 0xff);
  uint32_t n = (uint32_t)wc->wr_id;
  switch (kind) {
  case IB_WR_CTRL:
    c->sq_used[q]--;
    return koloSuccess;
  case IB_WR_WRITE:
    c->sq_used[q]--;
    c->reqs[n % KOLO_NET_MAX_REQS].done++;
    return koloSuccess;
  case IB_WR_WRITE_INLINE: /* counted written when posted */
    c->sq_used[q]--;
    return koloSuccess;
  case IB_WR_RECV: {
    ib_msg m[IB_CTRL_BATCH]; /* copied: the receive goes back at once */
    uint32_t k = wc->byte_len / (uint32_t)sizeof m[0];
    if (wc->opcode == IBV_WC_RECV && k <= IB_CTRL_BATCH)
      memcpy(m, &c->rbufs[((size_t)q * IB_RQ_DEPTH + n) * IB_CTRL_BATCH], k * sizeof m[0]);
    koloResult_t res = kolo_ib_post_recv(c, q, n, eb);
    c->st.recv_posts++;
    if (res != koloSuccess) {
      c->failed = 1;
      return res;
    }
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) return got_piece(c, ntohl(wc->imm_data), wc->byte_len, eb);
    if (wc->opcode == IBV_WC_RECV && k >= 1 && k <= IB_CTRL_BATCH && wc->byte_len == k * sizeof m[0]) {
      for (uint32_t i = 0; i < k && res == koloSuccess; i++) res = got_msg(c, &m[i], eb);
      return res;
    }
    c->failed = 1;
    return kolo_error(eb, koloRemoteError, "%s sent an ib message of %u bytes (opcode %d)", c->who, wc->byte_len,
                      (int)wc->opcode);
  }
  default:
    c->failed = 1;
    return kolo_error(eb, koloInternalError, "completion of an unknown ib work request 0x%llx from %s",
                      (unsigned long long)wc->wr_id, c->who);
  }
}

static koloResult_t poll_cq(ib_comm *c, kolo_errbuf *eb) {
  struct ibv_wc wc[CQ_BATCH];
  for (int i = 0; i < c->nstash; i++) { /* polled by pollfds, first in line */
    koloResult_t res = completion(c, &c->stash[i], eb);
    if (res != koloSuccess) {
      c->nstash = 0;
      return res;
    }
  }
  c->nstash = 0;
  for (;;) {
    int n = ibv_poll_cq(c->cq, CQ_BATCH, wc);
    c->st.polls++;
    c->st.cqes += n > 0 ? (uint64_t)n : 0;
    if (n < 0) {
      c->failed = 1;
      return kolo_error(eb, koloSystemError, "ibv_poll_cq(%s) for %s failed (%d)", c->port.name, c->who, n);
    }
    for (int i = 0; i < n; i++) {
      koloResult_t res = completion(c, &wc[i], eb);
      if (res != koloSuccess) return res;
    }
    if (n < CQ_BATCH) return koloSuccess;
  }
}

/* ---- writes (sender) ----------------------------------------------------------------- */

/* Takes request id's advert into it; 0 when it is not there yet. */
static koloResult_t take_advert(ib_comm *c, uint32_t id, ib_req *r, int *have, kolo_errbuf *eb) {
  ib_advert *a = &c->adv[id % KOLO_NET_MAX_REQS];
  *have = a->valid && a->seq == id;
  if (!*have) return koloSuccess;
  a->valid = 0;
  if (a->len < r->len) {
    c->failed = 1;
    return kolo_error(eb, koloInvalidUsage, "region %u: %s receives at most %llu bytes, this end sends %zu", id,
                      c->who, (unsigned long long)a->len, r->len);
  }
  r->raddr = a->addr;
  r->rkey = a->rkey;
  r->have_advert = 1;
  return koloSuccess;
}

static koloResult_t post_piece(ib_comm *c, uint32_t id, ib_req *r, int q, kolo_errbuf *eb) {
  uint32_t i = r->posted;
  size_t lo = piece_lo(r->len, r->npieces, i), hi = piece_hi(r->len, r->npieces, i);
  /* A small piece goes inline, as perftest's latency tests send: the NIC
   * (on soft-RoCE, the kernel) takes its bytes from the work request
   * instead of reading them through the registration, and the buffer is
   * free again once posted.  Never from GPU memory (GPUDirect slots): the
   * copy into the work request is the CPU's. */
  int inl = hi > lo && hi - lo <= c->max_inline && !r->devmem;
  struct ibv_sge sge = {.addr = (uintptr_t)(r->buf + lo), .length = (uint32_t)(hi - lo), .lkey = r->lkey};
  struct ibv_send_wr wr = {.wr_id = ib_wrid(inl ? IB_WR_WRITE_INLINE : IB_WR_WRITE, q, id), .sg_list = &sge,
                           .num_sge = hi > lo, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0),
                           .imm_data = htonl((id % KOLO_NET_MAX_REQS) << IMM_LEN_BITS | (uint32_t)r->len),
                           .wr.rdma = {.remote_addr = r->raddr + lo, .rkey = r->rkey}},
                     *bad;
  int e = ibv_post_send(c->qp[q], &wr, &bad);
  if (e != 0) {
    c->failed = 1;
    return kolo_syserror(eb, e, "ibv_post_send(%s qpn 0x%x, RDMA WRITE WITH IMMEDIATE of %zu bytes) to %s failed",
                         c->port.name, c->qp[q]->qp_num, hi - lo, c->who);
  }
  c->sq_used[q]++;
  c->st.send_posts++;
  c->st.writes++;
  c->st.inline_writes += (uint64_t)inl;
  r->posted++;
  r->done += (uint32_t)inl;
  return koloSuccess;
}

/* Writes the requests whose adverts arrived, in order, as far as the send
 * queues have room. */
static koloResult_t post_writes(ib_comm *c, kolo_errbuf *eb) {
  while (c->next_post != c->tail) {
    uint32_t id = c->next_post;
    ib_req *r = &c->reqs[id % KOLO_NET_MAX_REQS];
    if (!r->have_advert) {
      int have = 0;
      koloResult_t res = take_advert(c, id, r, &have, eb);
      if (res != koloSuccess || !have) return res;
    }
    while (r->posted < r->npieces) {
      int q = (int)((id + r->posted) % (uint32_t)c->nqps);
      if (c->sq_used[q] >= IB_SQ_DEPTH) return koloSuccess;
      koloResult_t res = post_piece(c, id, r, q, eb);
      if (res != koloSuccess) return res;
    }
    c->next_post++;
  }
  return koloSuccess;
}

/* ---- progress ----------------------------------------------------------------------- */

/* CLOCK_MONOTONIC in ms as of the kernel's last tick: no hardware read. */
static int64_t coarse_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the peer closed its TCP socket (see PEER_CHECK_CALLS). */
static koloResult_t check_peer(ib_comm *c, kolo_errbuf *eb) {
  if (c->gone || ++c->peer_calls < PEER_CHECK_CALLS) return koloSuccess;
  c->peer_calls = 0;
  int64_t now = coarse_ms();
  if (now < c->next_check) return koloSuccess;
  c->next_check = now + 1;
  unsigned char b;
  int err = 0;
  ssize_t k = kolo_sock_read_some(c->fd, &b, 1, &err);
  if (k >= 0) return koloSuccess;
  if (err != 0 && err != ECONNRESET && err != EPIPE) {
    c->failed = 1;
    return kolo_syserror(eb, err, "the ib setup connection with %s failed", c->who);
  }
  c->gone = 1;
  c->gone_at = kolo_now_ms(); /* the grace is measured with kolo_now_ms */
  return poll_cq(c, eb); /* what arrived before the end */
}

static koloResult_t progress(ib_comm *c, kolo_errbuf *eb) {
  if (c->failed) return failed_earlier(c, eb);
  koloResult_t res = koloSuccess;
  if (!c->ready) {
    int eof = 0;
    res = kolo_ib_handshake_step(c, &eof, eb);
    if (res != koloSuccess) c->failed = 1;
    if (eof) return peer_closed(c, eb);
  }
  if (res == koloSuccess) res = poll_cq(c, eb);
  if (res == koloSuccess && c->ready && !c->is_send) queue_adverts(c);
  if (res == koloSuccess && c->ready) res = flush_out(c, eb);
  if (res == koloSuccess && c->ready && c->is_send) res = post_writes(c, eb);
  if (res == koloSuccess && c->ready) res = check_peer(c, eb);
  return res;
}

/* The peer left and everything it sent before should have been seen. */
static int gone_for_good(const ib_comm *c) {
  return c->gone && kolo_now_ms() - c->gone_at >= GONE_GRACE_MS;
}

/* ---- the provider's calls --------------------------------------------------------------- */

static koloResult_t post(ib_comm *c, void *buf, size_t len, uint32_t *id, int *queued, kolo_errbuf *eb) {
  *queued = 0;
  if (c->failed) return failed_earlier(c, eb);
  if (c->tail - c->head >= KOLO_NET_MAX_REQS) return progress(c, eb);
  if (len > MAX_REGION)
    return kolo_error(eb, koloInvalidArgument,
                      "the ib provider moves regions of at most %u bytes, not %zu (fewer bytes per slot: "
                      "KOLO_BUFFSIZE / KOLO_NSLOTS)", MAX_REGION, len);
  struct ibv_mr *mr = c->rmr; /* zero bytes: any registration will do */
  if (len > 0) {
    koloResult_t res = mr_for(c, buf, len, &mr, eb);
    if (res != koloSuccess) return res;
  }
  ib_req *r = &c->reqs[c->tail % KOLO_NET_MAX_REQS];
  memset(r, 0, sizeof *r);
  r->buf = len > 0 ? buf : (char *)c->rbufs;
  r->len = len;
  r->lkey = mr->lkey;
  r->devmem = c->dmabuf.mr != NULL && mr == c->dmabuf.mr;
  r->npieces = c->is_send ? npieces(len, c->nqps) : 0; /* receiver: from the first piece */
  if (!c->is_send) r->rkey = mr->rkey; /* advertised by queue_adverts */
  *id = c->tail++;
  c->st.regions++;
  *queued = 1;
  return progress(c, eb);
}

static koloResult_t ib_isend(void *comm, const void *buf, size_t len, uint32_t *id, int *queued,
                             kolo_errbuf *eb) {
  return post(comm, (void *)buf, len, id, queued, eb);
}

static koloResult_t ib_irecv(void *comm, void *buf, size_t len, uint32_t *id, int *queued, kolo_errbuf *eb) {
  return post(comm, buf, len, id, queued, eb);
}

static koloResult_t ib_test(void *comm, uint32_t id, int *done, kolo_errbuf *eb) {
  ib_comm *c = comm;
  *done = 0;
  koloResult_t res = progress(c, eb);
  if (res != koloSuccess) return res;
  ib_req *r = &c->reqs[id % KOLO_NET_MAX_REQS];
  if (r->npieces == 0 || r->done < r->npieces) return gone_for_good(c) ? peer_closed(c, eb) : koloSuccess;
  *done = 1;
  if (id == c->head) c->head++;
  return koloSuccess;
}

static koloResult_t ib_ctrl_send(void *comm, uint32_t kind, uint32_t value, int *queued, kolo_errbuf *eb) {
  ib_comm *c = comm;
  *queued = 0;
  if (c->ctrl_gone || c->gone)
    return kolo_error(eb, koloRemoteError, "the network connection to %s is closed", c->who);
  if (c->out_tail - c->out_head >= OUTQ_USER) return progress(c, eb);
  ib_msg m = {.kind = kind, .value = value};
  outq_push(c, &m);
  *queued = 1;
  return progress(c, eb);
}

static koloResult_t ib_ctrl_recv(void *comm, uint32_t *kind, uint32_t *value, int *got, kolo_errbuf *eb) {
  ib_comm *c = comm;
  *got = 0;
  if (c->ctrl_gone) return kolo_error(eb, koloRemoteError, "the network connection to %s is closed", c->who);
  koloResult_t res = c->failed ? koloSuccess : progress(c, eb);
  if (c->in_head != c->in_tail) { /* what arrived goes first, failure or not */
    ib_msg *m = &c->inbox[c->in_head++ % IB_INBOX];
    *kind = m->kind;
    *value = m->value;
    *got = 1;
    return koloSuccess;
  }
  if (res != koloSuccess) return res;
  if (c->failed) return failed_earlier(c, eb);
  return gone_for_good(c) ? peer_closed(c, eb) : koloSuccess;
}

static void ib_ctrl_forget(void *comm) {
  ib_comm *c = comm;
  c->ctrl_gone = 1;
  c->out_head = c->out_tail;
}

static int ib_pending(void *comm) {
  ib_comm *c = comm;
  if (c->failed || c->gone) return 0;
  if (c->out_head != c->out_tail) return 1;
  for (int q = 0; q < c->nqps; q++)
    if (c->sq_used[q] > 0) return 1; /* not acknowledged yet: closing the QP could lose it */
  return c->is_send && c->next_post != c->tail;
}

static int ib_pollfds(void *comm, struct pollfd *pf, int max) {
  ib_comm *c = comm;
  int n = 0;
  if (c->failed) return 0;
  if (c->armed) { /* consume the event, if it fired, so the fd goes quiet */
    struct ibv_cq *cq;
    void *ctx;
    if (ibv_get_cq_event(c->chan, &cq, &ctx) == 0) {
      ibv_ack_cq_events(cq, 1);
      c->armed = 0;
      c->st.events++;
    }
  }
  if (!c->armed) {
    int e = ibv_req_notify_cq(c->cq, 0);
    c->st.arms++;
    if (e == 0) c->armed = 1;
    else KOLO_WARN("ibv_req_notify_cq(%s) failed: %s (polling instead)", c->port.name, strerror(e));
  }
  if (c->armed && c->nstash == 0) { /* what came before the arming raised no event */
    int k = ibv_poll_cq(c->cq, IB_STASH, c->stash);
    c->st.polls++;
    c->st.cqes += k > 0 ? (uint64_t)k : 0;
    c->nstash = k > 0 ? k : 0;
  }
  if (c->armed && n < max) pf[n++] = (struct pollfd){c->chan->fd, POLLIN, 0};
  c->peer_calls = PEER_CHECK_CALLS; /* after the sleep, look at the socket first */
  if (c->nstash > 0 && n < max) pf[n++] = (struct pollfd){c->fd, POLLOUT, 0}; /* ready now: no sleep */
  else if (!c->gone && n < max) pf[n++] = (struct pollfd){c->fd, POLLIN, 0};
  return n;
}

/* ---- devices ------------------------------------------------------------------------------ */

static koloResult_t ib_devices(int *ndev, kolo_errbuf *eb) {
  char why[KOLO_ERR_LEN];
  kolo_ib_port ports[1];
  koloResult_t res = kolo_ib_ports(ports, 1, ndev, why, sizeof why, eb);
  if (res == koloSuccess && *ndev == 0) /* said, not logged: TCP takes over (a note, no failure) */
    kolo_error_quiet(eb, koloSuccess, "%s", why);
  return res;
}

const kolo_net_provider kolo_net_ib = {
    .name = "ib",
    .flags = KOLO_NET_SHORT_SENDS | KOLO_NET_EXACT_POLL | KOLO_NET_SPIN,
    .devices = ib_devices,
    .listen = kolo_ib_listen,
    .connect = kolo_ib_connect,
    .accept = kolo_ib_accept,
    .close_listen = kolo_ib_close_listen,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .test = ib_test,
    .ctrl_send = ib_ctrl_send,
    .ctrl_recv = ib_ctrl_recv,
    .pending = ib_pending,
    .pollfds = ib_pollfds,
    .ctrl_forget = ib_ctrl_forget,
    .close = kolo_ib_close,
    .reg_dmabuf = ib_reg_dmabuf,
};
