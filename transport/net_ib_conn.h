/* net_ib_conn.h - the state of one ib provider connection, shared by its
 * setup (net_ib_setup.c: devices, QPs, the TCP handshake, teardown), its
 * send queues (net_ib_sq.c), its completions and arrivals (net_ib_rx.c) and
 * the provider's calls (net_ib.c).  Private to those files.
 *
 * A connection has nqps RC queue pairs on one CQ (with a completion
 * channel, so that a waiter can sleep in poll()), a TCP socket (the
 * handshake, then only to notice that the peer went away), and one
 * registered control area (IB_AREA_* below):
 *   in:    what the peer writes: the receiver's per-step entries (a call
 *          signature header, then a small slice's bytes), the sender's
 *          credit record;
 *   stage: what this end writes from when it cannot inline: the sender's
 *          signature headers, the receiver's credit records;
 *   rbufs: QP 0's receives (control messages: rings, stop words);
 *   sbufs: control messages sent, when they cannot be inlined.
 * The protocol is described at the top of net_ib.c. */
#ifndef KOLO_TRANSPORT_NET_IB_CONN_H
#define KOLO_TRANSPORT_NET_IB_CONN_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "transport/ib_dev.h"
#include "transport/net.h"
#include "transport/net_wire.h"

#define IB_TOKEN_BYTES 16
#define IB_MAX_QPS KOLO_NET_MAX_STREAMS
#define IB_SQ_DEPTH 256   /* send work requests in flight per QP */
#define IB_RQ_DEPTH 256   /* receives kept posted per QP */
#define IB_SIGNAL_EVERY 16 /* at least every 16th send work request is signaled */
#define IB_STASH 16       /* completions pollfds() found after arming */
#define IB_STEPS KOLO_NET_MAX_REQS /* per-step entries: steps in flight at most */
#define IB_MSG_SLOT 128   /* one control message's buffer */
#define IB_SEND_SLOTS 16  /* control messages sent from sbufs at once */
#define IB_INLINE_WANT 256 /* inline bytes asked of each QP (a small slice with its header) */

/* The control area, in this order (page aligned, registered once). */
#define IB_AREA_IN 0
#define IB_IN_BYTES (IB_STEPS * KOLO_IB_ENTRY_BYTES)
#define IB_AREA_STAGE IB_IN_BYTES
#define IB_STAGE_BYTES (IB_STEPS * KOLO_IB_SIGHDR_BYTES)
#define IB_AREA_RBUFS (IB_AREA_STAGE + IB_STAGE_BYTES)
#define IB_AREA_SBUFS (IB_AREA_RBUFS + IB_RQ_DEPTH * IB_MSG_SLOT)
#define IB_AREA_BYTES (IB_AREA_SBUFS + IB_SEND_SLOTS * IB_MSG_SLOT)
_Static_assert(IB_IN_BYTES <= KOLO_IB_IN_MAX && KOLO_IB_MSG_MAX <= IB_MSG_SLOT, "ib control area sizes");
_Static_assert(KOLO_NET_MAX_REQS <= (1 << (32 - KOLO_IB_IMM_LEN_BITS)), "a step's slot must fit the immediate");

typedef kolo_ib_hello ib_hello;
_Static_assert(IB_TOKEN_BYTES == KOLO_IB_TOKEN_BYTES && IB_MAX_QPS == KOLO_IB_MAX_QPS, "ib hello sizes");

/* One QP's send queue: work requests are numbered in posting order; a
 * signaled one's completion says that it and all before it are done. */
typedef struct {
  uint32_t posted; /* work requests posted */
  uint32_t acked;  /* of them, known complete */
  uint32_t signaled_to; /* number (+ 1) of the newest signaled one */
} ib_sq;

/* Receiver: one step in flight. */
typedef struct {
  uint32_t len;     /* 0 until its first piece came */
  uint16_t pieces, got;
  uint64_t bytes;
  int inbox;        /* its bytes came in its per-step entry */
  int seen;         /* a piece came */
} ib_step;

/* Verbs calls of one connection, logged at close (KOLO_DEBUG=INFO). */
typedef struct {
  uint64_t slices;     /* sent or delivered */
  uint64_t writes;     /* RDMA WRITE (WITH IMMEDIATE) work requests for them */
  uint64_t inline_writes;
  uint64_t inbox;      /* slices carried in a per-step entry */
  uint64_t sig_writes; /* separate signature header writes */
  uint64_t credits;    /* credit writes (receiver) or credits seen (sender) */
  uint64_t imm_credits; /* of them, with an immediate (a blocked sender) */
  uint64_t send_posts; /* ibv_post_send calls */
  uint64_t signaled;
  uint64_t recv_posts; /* ibv_post_recv calls */
  uint64_t polls, cqes, arms, events;
} ib_stats;

typedef struct {
  int is_send, nqps;
  int ready;     /* QPs in RTS at both ends: messages may go */
  int failed;    /* an error was reported: every call fails */
  int closing;   /* close drains the queues: the sink hears nothing more */
  int gone;      /* the peer closed its TCP socket */
  int64_t gone_at, next_check;
  uint32_t peer_calls;
  char who[96];
  int fd;
  kolo_ib_port port;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *chan;
  struct ibv_cq *cq;
  struct ibv_qp *qp[IB_MAX_QPS];
  ib_sq sq[IB_MAX_QPS];
  uint32_t max_inline; /* bytes a work request may carry inline (the least over the QPs) */
  int armed;
  struct ibv_wc stash[IB_STASH];
  int nstash;
  ib_hello me, them;
  unsigned char hin[KOLO_IB_HELLO_BYTES]; /* sender: the receiver's hello, encoded */
  size_t hin_len;
  /* the control area */
  uint8_t *area;
  struct ibv_mr *area_mr;
  uint32_t send_slot;          /* sbufs used so far */
  uint32_t sbuf_wr[IB_SEND_SLOTS]; /* the work request (+ 1) on QP 0 each sbuf went with */
  /* slots (bind) */
  int bound;
  uint32_t binds;
  kolo_net_ring ring;
  kolo_net_sink sink;
  struct ibv_mr *ring_mr; /* NULL for GPUDirect slots (dmabuf_mr covers them) */
  uint32_t ring_lkey;
  struct ibv_mr *dmabuf_mr;
  uintptr_t dmabuf_lo, dmabuf_hi;
  /* sender */
  kolo_ib_ring peer;       /* the receiver's ring, newest advertised */
  int have_peer;           /* peer.gen == binds and it was checked */
  uint32_t next_step;      /* the next slice's step */
  uint32_t credited;       /* the receiver's head, as last seen */
  /* receiver */
  uint32_t inbox_max;      /* as this end's ring advertised it */
  uint32_t delivered;      /* slices told to the sink */
  ib_step steps[IB_STEPS];
  uint32_t credit_due, credit_sent; /* the head to write, and the last one written */
  uint32_t credit_writes;  /* credit records written (their stage slot) */
  int ring_due;            /* the ring is to be advertised */
  /* stop words */
  int stop_due, stop_posted, stop_seen;
  uint32_t stop_word, stop_wr; /* stop_wr: its work request on QP 0 (+ 1) */
  int stop_has_report;
  kolo_call_mismatch stop_report;
  ib_stats st;
} ib_comm;

/* wr_id: kind in the top byte, QP below it, the work request's number (send)
 * or the receive's index (recv) in the low 32 bits. */
enum { IB_WR_SEND = 1, IB_WR_RECV = 2 };
static inline uint64_t ib_wrid(int kind, int qp, uint32_t n) {
  return (uint64_t)kind << 56 | (uint64_t)qp << 48 | n;
}

/* The immediate of a slice's write: its slot among the steps in flight and
 * its length (every piece carries the whole slice's). */
static inline uint32_t ib_imm(uint32_t step, uint32_t len) {
  return (step % IB_STEPS) << KOLO_IB_IMM_LEN_BITS | len;
}

/* ---- net_ib_setup.c -------------------------------------------------------------- */
koloResult_t kolo_ib_listen(const struct sockaddr_storage *local, int dev, kolo_net_handle *handle, void **lcomm,
                            kolo_errbuf *eb);
void kolo_ib_close_listen(void *lcomm);
koloResult_t kolo_ib_connect(const kolo_net_handle *handle, int dev, int64_t deadline, int timeout_ms,
                             const char *who, void **comm, kolo_errbuf *eb);
koloResult_t kolo_ib_accept(void *lcomm, int64_t deadline, int timeout_ms, const char *who, void **comm,
                            kolo_errbuf *eb);
void kolo_ib_close(void *comm);
/* Sender: the receiver's hello, then RTR/RTS and the ready byte, without
 * waiting; receiver: the ready byte.  Sets c->ready; *eof when the TCP
 * socket reached its end (the peer left). */
koloResult_t kolo_ib_handshake_step(ib_comm *c, int *eof, kolo_errbuf *eb);
/* Posts receives idx[0..n-1] of QP q (their buffers: rbufs on QP 0, none
 * on the others, which take only writes with immediates). */
koloResult_t kolo_ib_post_recvs(ib_comm *c, int q, const uint32_t *idx, int n, kolo_errbuf *eb);
/* Registers memory with the connection's PD (naming the peer on failure). */
koloResult_t kolo_ib_reg_for(ib_comm *c, void *addr, size_t len, int access, struct ibv_mr **mr, kolo_errbuf *eb);
/* Deregisters, logging a failure; *mr becomes NULL. */
void kolo_ib_dereg(ib_comm *c, struct ibv_mr **mr, const char *what);

/* ---- net_ib_sq.c ------------------------------------------------------------------- */
/* Room on QP q's send queue for n more work requests. */
int kolo_ib_sq_room(const ib_comm *c, int q, uint32_t n);
/* Posts the chain wr[0..n-1] on QP q, signaling its last work request when
 * the policy says (or `force`); numbers them. */
koloResult_t kolo_ib_post_chain(ib_comm *c, int q, struct ibv_send_wr *wr, int n, int force, const char *what,
                                kolo_errbuf *eb);
/* A signaled completion of QP q's work request n. */
void kolo_ib_sq_done(ib_comm *c, int q, uint32_t n);
/* Sends an encoded control message on QP 0 (signaled); *posted = 0 when
 * the send queue or the message buffers are full. */
koloResult_t kolo_ib_send_msg(ib_comm *c, const kolo_ib_msg *m, int *posted, kolo_errbuf *eb);
/* Before the QPs go: waits (up to ms) until every work request posted was
 * acknowledged, so that the last slices and credits are not lost. */
void kolo_ib_drain(ib_comm *c, int ms);
/* 1 while a work request posted on some QP is not known complete. */
int kolo_ib_sq_busy(const ib_comm *c);

/* ---- net_ib_rx.c ------------------------------------------------------------------ */
/* Polls the CQ (stashed completions first), handling every completion. */
koloResult_t kolo_ib_poll(ib_comm *c, kolo_errbuf *eb);
/* Sender: a new head in its credit record, told to the sink. */
koloResult_t kolo_ib_read_credit(ib_comm *c, kolo_errbuf *eb);
/* Sender: 1 when the credit record holds a head not yet told. */
int kolo_ib_credit_waiting(const ib_comm *c);
/* Sender: the receiver's ring for this end's bind, once both are there
 * (checked against this end's ring and step). */
koloResult_t kolo_ib_take_ring(ib_comm *c, kolo_errbuf *eb);
/* Receiver: tells the sink the slices whose pieces all came, in order. */
koloResult_t kolo_ib_deliver(ib_comm *c, kolo_errbuf *eb);
/* The connection failed earlier / the peer left (quiet: the engine decides). */
koloResult_t kolo_ib_failed_earlier(ib_comm *c, kolo_errbuf *eb);
koloResult_t kolo_ib_peer_closed(ib_comm *c, kolo_errbuf *eb);

/* Pieces of a slice of len bytes over nqps QPs, and piece i's bounds. */
uint32_t kolo_ib_pieces(size_t len, int nqps);
size_t kolo_ib_piece_lo(size_t len, uint32_t n, uint32_t i);
size_t kolo_ib_piece_hi(size_t len, uint32_t n, uint32_t i);

#endif
