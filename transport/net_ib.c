/* net_ib.c - the ibverbs provider's calls (net.h): bind, slices, credits,
 * stop words, progress.  Setup and teardown in net_ib_setup.c, send queues
 * in net_ib_sq.c, arrivals in net_ib_rx.c, the state in net_ib_conn.h.
 *
 * The protocol, perftest-style (one write per slice, nothing per request):
 *
 * Rings.  At setup each end's hello names its registered control area (the
 * receiver's per-step entries, the sender's credit record).  At each bind
 * the receiver registers its slots and advertises them in a RING message
 * (a SEND on QP 0, once the sender's QPs are ready): address, rkey, nslots,
 * slot bytes, the largest slice that travels in an entry, the first step it
 * applies to and the bind's number.  The sender's k-th bind uses the
 * receiver's k-th ring (both ends bind again together, as `kolo-perf net`
 * does); until it has it, send_slice queues nothing.
 *
 * Slices.  Slice s lands in the receiver's slot s % nslots; every write of
 * it carries the immediate (s % 64) << 26 | its length, which completes a
 * receive at the receiver and says which step it is and how many bytes come.
 *  - Small (at most the ring's inbox_max: 224 bytes, host slots): ONE RDMA
 *    WRITE WITH IMMEDIATE into the receiver's entry s % 64, inline where the
 *    device allows: the call's signature header (32 bytes, net_wire.h) when
 *    the slice starts a call, then its bytes, contiguous; the receiver
 *    copies the bytes into the slot when it delivers (no extra packet for
 *    the signature: on soft-RoCE every packet is kernel work at both ends).
 *  - Larger (or into GPU slots): written into the slot itself, one piece
 *    below 64 KiB, else one per QP (KOLO_IB_QPS_PER_CONN), none over 4 MiB,
 *    piece i on QP (s + i) % nqps, each WITH IMMEDIATE; a signature header
 *    goes first as an unsignaled (inline) RDMA WRITE into the entry,
 *    chained before piece 0 in the same ibv_post_send on piece 0's QP: RC
 *    places one QP's writes in order, so the completion of piece 0 proves
 *    the header landed.
 * The receiver reads the entry's header once all pieces came (all zero: no
 * signature), clears it, and tells the sink, in step order.
 *
 * Credits.  The receiver writes its head as an 8-byte record (head and a
 * check word) into the sender's credit record: an inline, unsignaled RDMA
 * WRITE; a newer head replaces one not yet written.  The sender reads the
 * record in every progress call.  A plain write raises no completion, so a
 * waiter sleeping on the sender's fds would not wake for it; two things
 * cover that: (1) the provider does not claim KOLO_NET_EXACT_POLL, so such a
 * waiter looks again within 1 ms (proxy.c); (2) a credit written when the
 * receiver sees the sender's window full (it delivered nslots slices past
 * the last credit it wrote: the sender cannot send before it hears of this
 * one) goes WITH IMMEDIATE (the head), which completes a receive at the
 * sender and wakes it at once.
 *
 * Stop words: a STOP message (SEND on QP 0, with the mismatch report when
 * there is one), signaled; pending() until it completed.
 *
 * Signaling and close (net_ib_sq.c): selective; slices and credits are done
 * once posted (as bytes handed to a socket), and close waits, bounded,
 * until the QPs acknowledged everything posted.
 *
 * The peer going away: its TCP setup socket ends.  The CQ is still drained
 * and what arrived delivered for GONE_GRACE_MS, then every call reports
 * "closed its network connection" naming the peer.
 *
 * Waking: pollfds() arms the CQ's completion channel and returns its fd and
 * the TCP socket; after arming it polls the CQ once more (a completion that
 * came before the arming raises no event) and looks at the credit record:
 * with something found it returns the socket for POLLOUT, ready at once, so
 * the waiter does not sleep. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "transport/net_ib_conn.h"
#include "transport/socket.h"

#define GONE_GRACE_MS 20
/* The peer's socket is looked at every PEER_CHECK_CALLS progress calls (and
 * on the first call after pollfds, that is after a sleep), at most once a
 * millisecond, with a coarse clock: a VM without a usable TSC (QEMU's
 * software emulation) reads the HPET, ~2 us and an exit to the emulator per
 * read, which slowed the polling loop and the other vCPU alike. */
#define PEER_CHECK_CALLS 64

/* ---- bind ---------------------------------------------------------------------- */

static char *slot_of(const ib_comm *c, uint32_t step) {
  return c->ring.slots + (size_t)(step % c->ring.nslots) * c->ring.slot_bytes;
}

/* The lkey (and, for the receiver, the rkey) of the ring's slots: the
 * GPUDirect registration, or a registration of its own, made anew at every
 * bind (the previous slots may be gone). */
static koloResult_t ring_keys(ib_comm *c, const kolo_net_ring *r, kolo_errbuf *eb) {
  kolo_ib_dereg(c, &c->ring_mr, "ibv_dereg_mr (the previous ring)");
  size_t bytes = (size_t)r->nslots * r->slot_bytes;
  uintptr_t lo = (uintptr_t)r->slots;
  if (r->devmem) {
    if (c->dmabuf_mr == NULL || lo < c->dmabuf_lo || lo + bytes > c->dmabuf_hi)
      return kolo_error(eb, koloInvalidUsage, "the ib connection with %s: GPU slots outside its GPUDirect registration",
                        c->who);
    c->ring_lkey = c->dmabuf_mr->lkey;
    return koloSuccess;
  }
  if (bytes == 0) bytes = 1;
  int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE);
  koloResult_t res = kolo_ib_reg_for(c, r->slots, bytes, access, &c->ring_mr, eb);
  if (res == koloSuccess) c->ring_lkey = c->ring_mr->lkey;
  return res;
}

static koloResult_t ib_bind(void *comm, const kolo_net_ring *ring, const kolo_net_sink *sink, kolo_errbuf *eb) {
  ib_comm *c = comm;
  if (c->failed) return kolo_ib_failed_earlier(c, eb);
  if (ring->nslots == 0 || ring->nslots > KOLO_NET_MAX_REQS || ring->slot_bytes > KOLO_IB_MAX_SLICE)
    return kolo_error(eb, koloInvalidArgument,
                      "the ib connection with %s cannot carry %u slots of %zu bytes (up to %d slots of at "
                      "most %u bytes: fewer bytes per slot, KOLO_BUFFSIZE / KOLO_NSLOTS)",
                      c->who, ring->nslots, ring->slot_bytes, KOLO_NET_MAX_REQS, KOLO_IB_MAX_SLICE);
  koloResult_t res = ring_keys(c, ring, eb);
  if (res != koloSuccess) {
    c->bound = 0; /* the previous ring's registration is gone too */
    return res;
  }
  c->ring = *ring;
  c->sink = *sink;
  c->bound = 1;
  c->binds++;
  if (!c->is_send) { /* advertised as soon as the sender is ready */
    c->inbox_max = ring->devmem ? 0 : KOLO_IB_INBOX_MAX;
    c->ring_due = 1;
    return koloSuccess;
  }
  c->have_peer = 0;
  return kolo_ib_take_ring(c, eb);
}

static koloResult_t ib_reg_dmabuf(void *comm, void *buf, size_t len, int fd, uint64_t offset, kolo_errbuf *eb) {
  ib_comm *c = comm;
  if (c->dmabuf_mr != NULL)
    return kolo_error(eb, koloInternalError, "the ib connection with %s already has GPUDirect slots", c->who);
  int access = IBV_ACCESS_LOCAL_WRITE | (c->is_send ? 0 : IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr *mr = ibv_reg_dmabuf_mr(c->pd, offset, len, (uint64_t)(uintptr_t)buf, fd, access);
  if (mr == NULL)
    return kolo_syserror(eb, errno,
                         "ibv_reg_dmabuf_mr of %zu bytes of GPU memory on %s port %d for %s failed (the NIC driver "
                         "must support dma-buf, e.g. mlx5 with rdma-core 34+ and Linux 5.12+)",
                         len, c->port.name, c->port.port, c->who);
  c->dmabuf_mr = mr;
  c->dmabuf_lo = (uintptr_t)buf;
  c->dmabuf_hi = (uintptr_t)buf + len;
  return koloSuccess;
}

/* ---- slices (sender) ------------------------------------------------------------ */

/* The signature header of step's slice, encoded where it is written from. */
static uint8_t *stage_sig(ib_comm *c, uint32_t step, const kolo_call_sig *sig) {
  uint8_t *hdr = c->area + IB_AREA_STAGE + (size_t)(step % IB_STEPS) * KOLO_IB_SIGHDR_BYTES;
  kolo_encode_ib_sighdr(sig, hdr);
  return hdr;
}

static uint64_t entry_addr(const ib_comm *c, uint32_t step) {
  return c->them.in_addr + (uint64_t)(step % IB_STEPS) * KOLO_IB_ENTRY_BYTES;
}

/* A small slice: header (when it starts a call) and bytes as one write
 * into the receiver's entry.  Inline unless the slots are GPU memory (the
 * CPU cannot copy from there). */
static koloResult_t post_small(ib_comm *c, uint32_t step, size_t len, const kolo_call_sig *sig, kolo_errbuf *eb) {
  int q = (int)(step % (uint32_t)c->nqps);
  struct ibv_sge sge[2];
  int n = 0;
  if (sig) sge[n++] = (struct ibv_sge){(uintptr_t)stage_sig(c, step, sig), KOLO_IB_SIGHDR_BYTES, c->area_mr->lkey};
  if (len) sge[n++] = (struct ibv_sge){(uintptr_t)slot_of(c, step), (uint32_t)len, c->ring_lkey};
  size_t total = len + (sig ? KOLO_IB_SIGHDR_BYTES : 0);
  int inl = total <= c->max_inline && !c->ring.devmem;
  struct ibv_send_wr wr = {.sg_list = sge, .num_sge = n, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = inl ? IBV_SEND_INLINE : 0, .imm_data = htonl(ib_imm(step, (uint32_t)len)),
                           .wr.rdma = {.remote_addr = entry_addr(c, step) + (sig ? 0 : KOLO_IB_SIGHDR_BYTES),
                                       .rkey = c->them.in_rkey}};
  koloResult_t res = kolo_ib_post_chain(c, q, &wr, 1, 0, "RDMA WRITE WITH IMMEDIATE of a small slice", eb);
  c->st.writes++;
  c->st.inline_writes += (uint64_t)inl;
  return res;
}

/* Piece i of a large slice (the signature header chained before piece 0). */
static koloResult_t post_piece(ib_comm *c, uint32_t step, size_t len, uint32_t np, uint32_t i,
                               const kolo_call_sig *sig, kolo_errbuf *eb) {
  int q = (int)((step + i) % (uint32_t)c->nqps);
  size_t lo = kolo_ib_piece_lo(len, np, i), hi = kolo_ib_piece_hi(len, np, i);
  int with_hdr = sig != NULL && i == 0;
  struct ibv_sge hs = {(uintptr_t)(with_hdr ? stage_sig(c, step, sig) : NULL), KOLO_IB_SIGHDR_BYTES,
                       c->area_mr->lkey};
  struct ibv_sge ps = {(uintptr_t)(slot_of(c, step) + lo), (uint32_t)(hi - lo), c->ring_lkey};
  int inl = hi - lo <= c->max_inline && !c->ring.devmem;
  struct ibv_send_wr wr[2] = {
      {.sg_list = &hs, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
       .send_flags = KOLO_IB_SIGHDR_BYTES <= c->max_inline ? IBV_SEND_INLINE : 0,
       .wr.rdma = {.remote_addr = entry_addr(c, step), .rkey = c->them.in_rkey}},
      {.sg_list = &ps, .num_sge = hi > lo, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
       .send_flags = inl ? IBV_SEND_INLINE : 0, .imm_data = htonl(ib_imm(step, (uint32_t)len)),
       .wr.rdma = {.remote_addr = c->peer.addr + (uint64_t)(step % c->peer.nslots) * c->peer.slot_bytes + lo,
                   .rkey = c->peer.rkey}}};
  koloResult_t res = kolo_ib_post_chain(c, q, wr + !with_hdr, 1 + with_hdr, 0, "RDMA WRITE WITH IMMEDIATE of a slice", eb);
  c->st.writes++;
  c->st.sig_writes += (uint64_t)with_hdr;
  c->st.inline_writes += (uint64_t)inl;
  return res;
}

/* Room for every work request of a slice of np pieces (and its header). */
static int slice_room(const ib_comm *c, uint32_t step, uint32_t np, int sig) {
  uint32_t need[IB_MAX_QPS] = {0};
  for (uint32_t i = 0; i < np; i++) need[(step + i) % (uint32_t)c->nqps] += 1 + (i == 0 && sig);
  for (int q = 0; q < c->nqps; q++)
    if (need[q] && !kolo_ib_sq_room(c, q, need[q])) return 0;
  return 1;
}

static koloResult_t ib_send_slice(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig, int *queued,
                                  kolo_errbuf *eb) {
  ib_comm *c = comm;
  *queued = 0;
  if (c->failed) return kolo_ib_failed_earlier(c, eb);
  if (!c->bound || !c->is_send || step != c->next_step || len > c->ring.slot_bytes)
    return kolo_error(eb, koloInternalError, "slice %u of %zu bytes to %s does not fit its ib connection (next %u)",
                      step, len, c->who, c->next_step);
  if (!c->ready || !c->have_peer) return koloSuccess; /* the receiver's ring is not here yet */
  if (len > c->peer.slot_bytes)
    return kolo_error(eb, koloInvalidUsage, "slice %u of %zu bytes: %s receives at most %u bytes per slot", step, len,
                      c->who, c->peer.slot_bytes);
  int small = len <= c->peer.inbox_max;
  uint32_t np = small ? 1 : kolo_ib_pieces(len, c->nqps);
  if (!slice_room(c, step, small ? 1 : np, sig != NULL && !small)) return koloSuccess;
  koloResult_t res = koloSuccess;
  if (small) res = post_small(c, step, len, sig, eb);
  for (uint32_t i = 0; !small && i < np && res == koloSuccess; i++) res = post_piece(c, step, len, np, i, sig, eb);
  if (res != koloSuccess) return res;
  c->next_step++;
  c->st.slices++;
  *queued = 1;
  return koloSuccess;
}

/* ---- credits and rings (receiver), stop words ------------------------------------------- */

/* The due credit, when QP 0 has room; WITH IMMEDIATE when the sender's
 * window is full (see the top). */
static koloResult_t post_credit(ib_comm *c, kolo_errbuf *eb) {
  if (!c->ready || c->credit_due == c->credit_sent || !kolo_ib_sq_room(c, 0, 1)) return koloSuccess;
  uint8_t *rec = c->area + IB_AREA_STAGE + (size_t)(c->credit_writes % (IB_STAGE_BYTES / KOLO_IB_CREDIT_BYTES)) *
                                              KOLO_IB_CREDIT_BYTES;
  kolo_encode_ib_credit(c->credit_due, rec);
  int wake = c->delivered - c->credit_sent >= c->ring.nslots;
  struct ibv_sge sge = {(uintptr_t)rec, KOLO_IB_CREDIT_BYTES, c->area_mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
                           .opcode = wake ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                           .send_flags = KOLO_IB_CREDIT_BYTES <= c->max_inline ? IBV_SEND_INLINE : 0,
                           .imm_data = htonl(c->credit_due),
                           .wr.rdma = {.remote_addr = c->them.in_addr, .rkey = c->them.in_rkey}};
  koloResult_t res = kolo_ib_post_chain(c, 0, &wr, 1, 0, "RDMA WRITE of a credit", eb);
  if (res != koloSuccess) return res;
  c->credit_sent = c->credit_due;
  c->credit_writes++;
  c->st.credits++;
  c->st.imm_credits += (uint64_t)wake;
  return koloSuccess;
}

static koloResult_t ib_send_credit(void *comm, uint32_t head, int *queued, kolo_errbuf *eb) {
  ib_comm *c = comm;
  *queued = 0;
  if (c->failed) return kolo_ib_failed_earlier(c, eb);
  if (c->is_send || !c->bound)
    return kolo_error(eb, koloInternalError, "a credit for %s on an ib connection that does not receive", c->who);
  c->credit_due = head; /* replaces one not yet written: heads only grow */
  *queued = 1;
  return post_credit(c, eb);
}

static koloResult_t post_ring(ib_comm *c, kolo_errbuf *eb) {
  if (!c->ready || !c->ring_due) return koloSuccess;
  kolo_ib_msg m = {.kind = KOLO_IB_MSG_RING};
  m.ring = (kolo_ib_ring){c->binds, c->delivered, (uintptr_t)c->ring.slots,
                          c->ring_mr ? c->ring_mr->rkey : c->dmabuf_mr->rkey, c->ring.nslots,
                          (uint32_t)c->ring.slot_bytes, c->inbox_max};
  int posted = 0;
  koloResult_t res = kolo_ib_send_msg(c, &m, &posted, eb);
  if (posted) c->ring_due = 0;
  return res;
}

static koloResult_t post_stop(ib_comm *c, kolo_errbuf *eb) {
  if (!c->ready || !c->stop_due || c->stop_posted) return koloSuccess;
  kolo_ib_msg m = {.kind = KOLO_IB_MSG_STOP, .flags = c->stop_has_report ? KOLO_IB_FLAG_REPORT : 0,
                   .value = c->stop_word, .report = c->stop_report};
  uint32_t n = c->sq[0].posted;
  int posted = 0;
  koloResult_t res = kolo_ib_send_msg(c, &m, &posted, eb);
  if (posted) c->stop_posted = 1, c->stop_wr = n + 1;
  return res;
}

static koloResult_t ib_send_stop(void *comm, uint32_t word, const kolo_call_mismatch *report, int *queued,
                                 kolo_errbuf *eb) {
  ib_comm *c = comm;
  *queued = 0;
  if (c->failed) return kolo_ib_failed_earlier(c, eb);
  if (!c->stop_due) { /* once: a second one has nothing to add */
    c->stop_due = 1;
    c->stop_word = word;
    c->stop_has_report = report != NULL;
    if (report) c->stop_report = *report;
  }
  *queued = 1;
  return post_stop(c, eb);
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
  return koloSuccess;
}

/* What arrived: completions, the sender's credit record, whole slices. */
static koloResult_t take_in(ib_comm *c, kolo_errbuf *eb) {
  koloResult_t res = kolo_ib_poll(c, eb);
  if (res == koloSuccess && c->is_send) res = kolo_ib_read_credit(c, eb);
  if (res == koloSuccess && !c->is_send) res = kolo_ib_deliver(c, eb);
  return res;
}

/* What waits for room or for the sender's readiness. */
static koloResult_t give_out(ib_comm *c, kolo_errbuf *eb) {
  koloResult_t res = post_ring(c, eb);
  if (res == koloSuccess) res = post_credit(c, eb);
  if (res == koloSuccess) res = post_stop(c, eb);
  return res;
}

static koloResult_t ib_progress(void *comm, unsigned dir, kolo_errbuf *eb) {
  ib_comm *c = comm;
  (void)dir; /* the CQ holds both ways: polling it is what moves either */
  if (c->failed) return kolo_ib_failed_earlier(c, eb);
  if (!c->bound) return koloSuccess;
  if (!c->ready) {
    int eof = 0;
    koloResult_t res = kolo_ib_handshake_step(c, &eof, eb);
    if (res != koloSuccess) c->failed = 1;
    if (res != koloSuccess || eof) return eof ? kolo_ib_peer_closed(c, eb) : res;
    if (c->ready && c->is_send) res = kolo_ib_take_ring(c, eb);
    if (res != koloSuccess) return res;
  }
  koloResult_t res = take_in(c, eb);
  if (res == koloSuccess) res = give_out(c, eb);
  if (res == koloSuccess && c->ready) res = check_peer(c, eb);
  if (res == koloSuccess && c->gone && kolo_now_ms() - c->gone_at >= GONE_GRACE_MS) res = kolo_ib_peer_closed(c, eb);
  return res;
}

/* Output held in user space (a credit, a ring, a stop word not yet
 * posted), or a stop word not yet acknowledged. */
static int ib_pending(void *comm) {
  ib_comm *c = comm;
  if (c->failed || c->gone) return 0;
  if (c->ring_due || c->credit_due != c->credit_sent || (c->stop_due && !c->stop_posted)) return 1;
  return c->stop_posted && (int32_t)(c->sq[0].acked - c->stop_wr) < 0;
}

/* Consumes the channel's event, if it fired, and arms it again; 1 when armed. */
static int arm(ib_comm *c) {
  if (c->armed) {
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
    else KOLO_WARN("ibv_req_notify_cq(%s port %d) for %s failed: %s (polling instead)", c->port.name, c->port.port,
                   c->who, strerror(e));
  }
  return c->armed;
}

/* Something to take now that raised no event: completions that came before
 * the arming, a credit record newer than the last one seen. */
static int found_now(ib_comm *c) {
  if (c->nstash == 0) {
    int k = ibv_poll_cq(c->cq, IB_STASH, c->stash);
    c->st.polls++;
    c->nstash = k > 0 ? k : 0;
  }
  return c->nstash > 0 || (c->is_send && kolo_ib_credit_waiting(c));
}

static int ib_pollfds(void *comm, struct pollfd *pf, int max) {
  ib_comm *c = comm;
  int n = 0;
  if (c->failed) return 0;
  int armed = arm(c);
  if (armed && n < max) pf[n++] = (struct pollfd){c->chan->fd, POLLIN, 0};
  c->peer_calls = PEER_CHECK_CALLS; /* after the sleep, look at the socket first */
  if (found_now(c) && n < max) pf[n++] = (struct pollfd){c->fd, POLLOUT, 0}; /* ready now: no sleep */
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
    /* Not KOLO_NET_EXACT_POLL: a plain credit write raises no event (see the top). */
    .flags = KOLO_NET_SPIN,
    .devices = ib_devices,
    .listen = kolo_ib_listen,
    .connect = kolo_ib_connect,
    .accept = kolo_ib_accept,
    .close_listen = kolo_ib_close_listen,
    .bind = ib_bind,
    .send_slice = ib_send_slice,
    .send_credit = ib_send_credit,
    .send_stop = ib_send_stop,
    .progress = ib_progress,
    .pending = ib_pending,
    .pollfds = ib_pollfds,
    .close = kolo_ib_close,
    .reg_dmabuf = ib_reg_dmabuf,
};
