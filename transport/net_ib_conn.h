/* net_ib_conn.h - the state of one ib provider connection, shared by its
 * setup (net_ib_setup.c: devices, QPs, the TCP handshake, teardown) and its
 * data path (net_ib.c: requests, control messages, completions).  Private
 * to those two files.
 *
 * A connection has nqps RC queue pairs on one CQ (with a completion
 * channel, so the proxy can sleep in poll()), a TCP socket (the handshake,
 * then only to notice that the peer went away), and registered rings:
 * rbufs for the control messages that arrive (every posted RECV has one
 * slot of IB_CTRL_BATCH messages; a WRITE WITH IMMEDIATE consumes a RECV
 * too and leaves its slot untouched) and sbufs for the control messages
 * sent on QP 0. */
#ifndef KOLO_TRANSPORT_NET_IB_CONN_H
#define KOLO_TRANSPORT_NET_IB_CONN_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "transport/ib_dev.h"
#include "transport/net.h"
#include "transport/net_wire.h"

#define IB_TOKEN_BYTES 16
#define IB_MAX_QPS KOLO_NET_MAX_STREAMS
#define IB_SQ_DEPTH 256 /* send work requests in flight per QP */
#define IB_RQ_DEPTH 256 /* receives kept posted per QP */
#define IB_OUTQ 512     /* control messages waiting for the send queue */
#define IB_INBOX 1024   /* credits and stop words waiting for ctrl_recv */
#define IB_STASH 16     /* completions pollfds() found after arming */
/* Registrations kept per connection.  More than twice the requests in
 * flight: those use at most KOLO_NET_MAX_REQS entries, all touched more
 * recently than the least recently used one, which is never theirs. */
#define IB_MR_CACHE (2 * KOLO_NET_MAX_REQS)

/* One control message, 32 bytes; a SEND on QP 0 carries 1 .. IB_CTRL_BATCH
 * of them (each receive has room for a full batch). */
#define IB_CTRL_BATCH 8
enum { IB_MSG_CREDIT = KOLO_NET_CTRL_CREDIT, IB_MSG_STOP = KOLO_NET_CTRL_STOP, IB_MSG_ADVERT = 0x100 };
typedef struct {
  uint32_t kind, value; /* credit / stop: the user's (kind, value) */
  uint32_t seq, rkey;   /* advert: request number, the slot's rkey */
  uint64_t addr, len;   /* advert: the slot */
} ib_msg;

/* TCP handshake, both ways: the sender's first (with the token), then the
 * receiver's answer, then one byte from the sender once its QPs are ready.
 * The hellos travel encoded (net_wire.h), with the wire version. */
typedef kolo_ib_hello ib_hello;
_Static_assert(IB_TOKEN_BYTES == KOLO_IB_TOKEN_BYTES && IB_MAX_QPS == KOLO_IB_MAX_QPS, "ib hello sizes");

typedef struct {
  char *buf;
  size_t len;
  uint32_t lkey;
  uint32_t npieces; /* receiver: 0 until the first piece says */
  uint32_t total;   /* receiver: bytes the sender sends (<= len) */
  uint32_t posted;  /* sender: pieces posted */
  uint32_t done;   /* pieces written (sender) or arrived (receiver) */
  uint64_t bytes;  /* receiver: bytes arrived */
  uint64_t raddr;  /* sender: the slot the receiver advertised */
  uint32_t rkey;
  int have_advert;
  int devmem; /* in the GPUDirect registration (never sent inline) */
} ib_req;

typedef struct {
  uint64_t addr, len;
  uint32_t rkey, seq;
  int valid;
} ib_advert;

typedef struct {
  uintptr_t lo, hi;
  struct ibv_mr *mr;
  uint64_t used;
} ib_mr_entry;

/* Verbs calls of one connection, logged at close (KOLO_DEBUG=INFO): what a
 * region costs beside perftest's one write per message. */
typedef struct {
  uint64_t regions;    /* requests posted (isend / irecv) */
  uint64_t writes;     /* RDMA WRITE WITH IMMEDIATE work requests */
  uint64_t inline_writes; /* of them, inline (a piece of at most max_inline bytes) */
  uint64_t ctrl_sends; /* control SENDs posted (one or more messages each) */
  uint64_t ctrl_msgs;  /* control messages in them */
  uint64_t send_posts; /* ibv_post_send calls (each one enters the kernel on rxe) */
  uint64_t recv_posts; /* receives reposted */
  uint64_t polls;      /* ibv_poll_cq calls */
  uint64_t cqes;       /* completions they returned */
  uint64_t arms;       /* ibv_req_notify_cq calls */
  uint64_t events;     /* completion channel events consumed */
} ib_stats;

typedef struct {
  int is_send, nqps;
  int ready;     /* QPs in RTS at both ends: control messages may go */
  int failed;    /* an error was reported: every call fails */
  int gone;      /* the peer closed its TCP socket */
  int ctrl_gone; /* ctrl_forget: control messages are dropped */
  int64_t gone_at, next_check; /* next_check: coarse ms (net_ib.c's check_peer) */
  uint32_t peer_calls;         /* progress calls since the peer's socket was looked at */
  char who[96];
  int fd;
  kolo_ib_port port;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *chan;
  struct ibv_cq *cq;
  struct ibv_qp *qp[IB_MAX_QPS];
  int sq_used[IB_MAX_QPS];
  int inline_ok, armed;
  uint32_t max_inline; /* bytes a work request may carry inline (the least over the QPs) */
  struct ibv_wc stash[IB_STASH]; /* polled by pollfds, not handled yet */
  int nstash;
  ib_hello me;
  unsigned char hin[KOLO_IB_HELLO_BYTES]; /* sender: the receiver's hello, encoded */
  size_t hin_len;
  ib_msg *rbufs, *sbufs;
  struct ibv_mr *rmr, *smr;
  uint32_t ctrl_posted;
  ib_msg outq[IB_OUTQ];
  uint32_t out_head, out_tail;
  ib_msg inbox[IB_INBOX];
  uint32_t in_head, in_tail;
  ib_req reqs[KOLO_NET_MAX_REQS];
  uint32_t head, tail, next_post;
  /* Receiver: requests before adv_next are advertised (queued in outq);
   * a piece of every request before seen arrived. */
  uint32_t adv_next, seen;
  ib_advert adv[KOLO_NET_MAX_REQS];
  ib_mr_entry mrs[IB_MR_CACHE];
  ib_mr_entry dmabuf; /* GPUDirect slots (reg_dmabuf): looked up first, never evicted */
  uint64_t mr_clock;
  int mr_last; /* the entry found last: slots are posted in turn */
  ib_stats st;
} ib_comm;

/* wr_id: kind in the top byte, QP below it, a number in the low 32 bits. */
/* IB_WR_WRITE_INLINE: a piece small enough to go inline (its bytes copied
 * into the work request at posting), counted written at once. */
enum { IB_WR_WRITE = 1, IB_WR_CTRL = 2, IB_WR_RECV = 3, IB_WR_WRITE_INLINE = 4 };
static inline uint64_t ib_wrid(int kind, int qp, uint32_t n) {
  return (uint64_t)kind << 56 | (uint64_t)qp << 48 | n;
}

/* net_ib_setup.c */
koloResult_t kolo_ib_listen(const struct sockaddr_storage *local, int dev, kolo_net_handle *handle, void **lcomm,
                            kolo_errbuf *eb);
void kolo_ib_close_listen(void *lcomm);
koloResult_t kolo_ib_connect(const kolo_net_handle *handle, int dev, int64_t deadline, int timeout_ms,
                             const char *who, void **comm, kolo_errbuf *eb);
koloResult_t kolo_ib_accept(void *lcomm, int64_t deadline, int timeout_ms, const char *who, void **comm,
                            kolo_errbuf *eb);
void kolo_ib_close(void *comm);
/* Sender: the receiver's hello, then RTR/RTS and the ready byte, without
 * waiting; receiver: the ready byte.  Sets c->ready; 1 when the TCP
 * socket reached its end (the peer left). */
koloResult_t kolo_ib_handshake_step(ib_comm *c, int *eof, kolo_errbuf *eb);
/* (Re)posts receive i of QP q. */
koloResult_t kolo_ib_post_recv(ib_comm *c, int q, uint32_t i, kolo_errbuf *eb);

#endif
