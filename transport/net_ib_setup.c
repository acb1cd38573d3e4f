/* net_ib_setup.c - ib provider connections: listen, connect, accept, the
 * TCP handshake that trades QP numbers, and teardown (see net_ib_conn.h).
 *
 * The handle (from listen) is the TCP address of the process's listener
 * (one per address, shared by its ib pipes: net_listen.h), the pipe's
 * random 16-byte token and the number of QPs (KOLO_IB_QPS_PER_CONN of the
 * receiver).  The sender's connect opens its device, makes its QPs, posts
 * its receives and sends its hello (token, QP numbers, PSNs, GID, LID, MTU)
 * without waiting for an answer: in transport_net the receiver accepts only
 * after the sender's connect returned.  accept() drops connections whose
 * hello is not there within a second or lacks the token, makes its own QPs,
 * brings them to RTS and answers; the sender finishes (RTR, RTS, one ready
 * byte) in its first data call (kolo_ib_handshake_step).  The receiver
 * sends nothing over its QPs before that byte, so no message meets a QP
 * that is not ready.  The TCP socket then stays open: its end is how either
 * side learns that the other went away.
 *
 * Teardown mirrors setup: QPs, memory regions, CQ, completion channel, PD,
 * device, socket; it goes on past a failed step and logs it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/conn_wire.h"
#include "transport/net_ib_conn.h"
#include "transport/net_listen.h"
#include "transport/socket.h"

#define READY_BYTE 'R'
/* The sender's ready byte goes out within this. */
#define READY_WAIT_MS 1000

/* Ports one process spreads its connections over. */
#define IB_MAX_PORTS 16

_Static_assert(IB_TOKEN_BYTES == KOLO_NET_TOKEN_BYTES && IB_MAX_QPS <= KOLO_NET_MAX_STREAMS &&
                   IB_TOKEN_BYTES == KOLO_NET_LISTEN_TOKEN_BYTES,
               "the handle (conn_wire.h) carries the token and QP count; the listener files by the token");

typedef struct {
  kolo_net_listener *shared;
  struct sockaddr_storage addr;
  uint8_t token[IB_TOKEN_BYTES];
  int nqps;
  int dev; /* which usable port the accepted connection uses (listen's dev) */
} ib_listener;

/* The sender's hello, as the process's listener reads it (net_listen.h). */
static int read_hello(int fd, int64_t soon, void *out, uint8_t *token, uint32_t *nstreams, char *why,
                      size_t why_len) {
  uint8_t m[KOLO_IB_HELLO_BYTES];
  size_t got;
  uint32_t version;
  ib_hello *h = out;
  if (kolo_net_listen_read(fd, soon, m, sizeof m, KOLO_IB_HELLO_MAGIC, KOLO_IB_HELLO_MAGIC_V1, &got, why,
                           why_len) != 0 ||
      kolo_decode_ib_hello(m, got, h, &version, why, why_len) != KOLO_NET_WIRE_OK)
    return -1;
  memcpy(token, h->token, IB_TOKEN_BYTES);
  *nstreams = h->nqps;
  return 0;
}

static const kolo_net_hello_kind hello_kind = {"ib", sizeof(ib_hello), read_hello};

static int nqps_param(void) {
  int64_t n = kolo_param_int("KOLO_IB_QPS_PER_CONN");
  return n < 1 ? 1 : n > IB_MAX_QPS ? IB_MAX_QPS : (int)n;
}

/* ---- listen ----------------------------------------------------------------- */

koloResult_t kolo_ib_listen(const struct sockaddr_storage *local, int dev, kolo_net_handle *handle, void **lcomm,
                            kolo_errbuf *eb) {
  ib_listener *l = calloc(1, sizeof *l);
  if (l == NULL) return kolo_error(eb, koloSystemError, "out of memory for an ib network listener");
  l->dev = dev;
  l->nqps = nqps_param();
  koloResult_t res = koloSuccess;
  if (getrandom(l->token, sizeof l->token, 0) != (ssize_t)sizeof l->token)
    res = kolo_syserror(eb, errno, "getrandom for a pipe token failed");
  if (res == koloSuccess) res = kolo_net_listener_join(local, &hello_kind, l->token, l->nqps, &l->shared, &l->addr, eb);
  if (res != koloSuccess) {
    free(l);
    return res;
  }
  kolo_net_listen_info w = {KOLO_NET_HANDLE_IB_MAGIC, l->addr, {0}, (uint32_t)l->nqps};
  memcpy(w.token, l->token, IB_TOKEN_BYTES);
  kolo_encode_net_handle(&w, handle);
  *lcomm = l;
  return koloSuccess;
}

void kolo_ib_close_listen(void *lcomm) {
  ib_listener *l = lcomm;
  if (l == NULL) return;
  kolo_net_listener_leave(l->shared, l->token);
  free(l);
}

/* ---- verbs resources -------------------------------------------------------- */

koloResult_t kolo_ib_post_recvs(ib_comm *c, int q, const uint32_t *idx, int n, kolo_errbuf *eb) {
  struct ibv_sge sge[IB_RQ_DEPTH];
  struct ibv_recv_wr wr[IB_RQ_DEPTH], *bad = NULL;
  for (int k = 0; k < n; k++) {
    /* QP 0 takes control messages into rbufs; the others only writes with
     * immediates, which need no buffer. */
    sge[k] = (struct ibv_sge){(uintptr_t)(c->area + IB_AREA_RBUFS + (size_t)idx[k] * IB_MSG_SLOT), IB_MSG_SLOT,
                              c->area_mr->lkey};
    wr[k] = (struct ibv_recv_wr){.wr_id = ib_wrid(IB_WR_RECV, q, idx[k]), .next = k + 1 < n ? &wr[k + 1] : NULL,
                                 .sg_list = &sge[k], .num_sge = q == 0};
  }
  int e = ibv_post_recv(c->qp[q], wr, &bad);
  c->st.recv_posts++;
  if (e != 0)
    return kolo_syserror(eb, e, "ibv_post_recv(%s port %d qpn 0x%x, %d receives) for %s failed", c->port.name,
                         c->port.port, c->qp[q]->qp_num, n, c->who);
  return koloSuccess;
}

koloResult_t kolo_ib_reg_for(ib_comm *c, void *addr, size_t len, int access, struct ibv_mr **mr, kolo_errbuf *eb) {
  char dev[256];
  snprintf(dev, sizeof dev, "%s port %d, connection with %s", c->port.name, c->port.port, c->who);
  return kolo_ib_reg(c->pd, dev, addr, len, access, mr, eb);
}

/* Creates QP q with as much inline room as the device gives, up to
 * IB_INLINE_WANT (some devices refuse any: then none). */
static struct ibv_qp *create_qp(ib_comm *c, struct ibv_qp_init_attr *ia) {
  static const uint32_t tries[] = {IB_INLINE_WANT, 64, 0};
  struct ibv_qp *qp = NULL;
  for (size_t t = 0; qp == NULL && t < sizeof tries / sizeof tries[0]; t++) {
    ia->cap.max_inline_data = tries[t];
    qp = ibv_create_qp(c->pd, ia);
  }
  return qp;
}

/* Receives 0 .. IB_RQ_DEPTH - 1 of QP q. */
static koloResult_t first_recvs(ib_comm *c, int q, kolo_errbuf *eb) {
  uint32_t idx[IB_RQ_DEPTH];
  for (uint32_t i = 0; i < IB_RQ_DEPTH; i++) idx[i] = i;
  return kolo_ib_post_recvs(c, q, idx, IB_RQ_DEPTH, eb);
}

static koloResult_t make_qp(ib_comm *c, int q, kolo_errbuf *eb) {
  struct ibv_qp_init_attr ia = {.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = IB_SQ_DEPTH, .max_recv_wr = IB_RQ_DEPTH,
                                        .max_send_sge = 2, .max_recv_sge = 1}};
  c->qp[q] = create_qp(c, &ia);
  if (c->qp[q] == NULL) {
    int err = errno;
    char hint[200];
    return kolo_syserror(eb, err, "ibv_create_qp(%s port %d, RC, %d+%d work requests) for %s%s", c->port.name,
                         c->port.port, IB_SQ_DEPTH, IB_RQ_DEPTH, c->who, kolo_ib_memlock_hint(err, hint, sizeof hint));
  }
  if (q == 0 || ia.cap.max_inline_data < c->max_inline) c->max_inline = ia.cap.max_inline_data;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = (uint8_t)c->port.port,
                          .pkey_index = 0, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  int e = ibv_modify_qp(c->qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (e != 0)
    return kolo_syserror(eb, e, "ibv_modify_qp(%s port %d qpn 0x%x, RESET -> INIT) for %s failed", c->port.name,
                         c->port.port, c->qp[q]->qp_num, c->who);
  koloResult_t res = first_recvs(c, q, eb);
  uint32_t psn = 0;
  if (getrandom(&psn, sizeof psn, 0) != (ssize_t)sizeof psn) psn = (uint32_t)getpid() * 2654435761u;
  c->me.qpn[q] = c->qp[q]->qp_num;
  c->me.psn[q] = psn & 0xffffff;
  return res;
}

/* The device, PD, channel, CQ, control area and QPs (in INIT, receives
 * posted) of a new connection; fills c->me.  Opens port `dev` (modulo their number) of the usable ones, in
 * KOLO_IB_HCA's order: pipes of channel ch use port ch % nports, so the
 * channels of a communicator spread over the NICs. */
static koloResult_t make_verbs(ib_comm *c, int dev, kolo_errbuf *eb) {
  char why[KOLO_ERR_LEN];
  int n = 0;
  kolo_ib_port ports[IB_MAX_PORTS];
  koloResult_t res = kolo_ib_ports(ports, IB_MAX_PORTS, &n, why, sizeof why, eb);
  if (res != koloSuccess) return res;
  if (n == 0) return kolo_error(eb, koloSystemError, "no usable RDMA port for the connection with %s: %s", c->who, why);
  c->port = ports[(dev < 0 ? 0 : dev) % n];
  res = kolo_ib_open(&c->port, &c->ctx, eb);
  if (res != koloSuccess) return res;
  char hint[200];
  if ((c->pd = ibv_alloc_pd(c->ctx)) == NULL)
    return kolo_syserror(eb, errno, "ibv_alloc_pd(%s port %d) for %s failed", c->port.name, c->port.port, c->who);
  if ((c->chan = ibv_create_comp_channel(c->ctx)) == NULL)
    return kolo_syserror(eb, errno, "ibv_create_comp_channel(%s port %d) for %s failed", c->port.name, c->port.port,
                         c->who);
  int fl = fcntl(c->chan->fd, F_GETFL);
  if (fl < 0 || fcntl(c->chan->fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return kolo_syserror(eb, errno, "cannot make %s port %d's completion channel for %s non-blocking", c->port.name,
                         c->port.port, c->who);
  /* Room for every receive and every send work request of every QP: only
   * some sends are signaled, so this is more than enough. */
  int cqe = c->nqps * (IB_SQ_DEPTH + IB_RQ_DEPTH) + 16;
  if ((c->cq = ibv_create_cq(c->ctx, cqe, NULL, c->chan, 0)) == NULL) {
    int err = errno;
    return kolo_syserror(eb, err, "ibv_create_cq(%s port %d, %d entries) for %s%s", c->port.name, c->port.port, cqe,
                         c->who, kolo_ib_memlock_hint(err, hint, sizeof hint));
  }
  /* The control area (net_ib_conn.h), registered once; the peer writes
   * into its first part. */
  c->area = aligned_alloc(4096, IB_AREA_BYTES);
  if (c->area == NULL)
    return kolo_error(eb, koloSystemError, "out of memory for the ib control area of the connection with %s", c->who);
  memset(c->area, 0, IB_AREA_BYTES);
  res = kolo_ib_reg_for(c, c->area, IB_AREA_BYTES, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &c->area_mr, eb);
  for (int q = 0; q < c->nqps && res == koloSuccess; q++) res = make_qp(c, q, eb);
  if (res != koloSuccess) return res;
  c->me.nqps = (uint32_t)c->nqps;
  c->me.in_addr = (uintptr_t)(c->area + IB_AREA_IN);
  c->me.in_rkey = c->area_mr->rkey;
  c->me.in_bytes = IB_IN_BYTES;
  memcpy(c->me.gid, c->port.gid.raw, 16);
  c->me.lid = c->port.lid;
  c->me.link_layer = c->port.link_layer;
  c->me.mtu = (uint8_t)c->port.mtu;
  snprintf(c->me.dev, sizeof c->me.dev, "%s", c->port.name);
  return koloSuccess;
}

/* The ack timeout's exponent (4.096 us << t).  Long by default, as NCCL's:
 * a peer that died is seen through the TCP socket, not through retries, and
 * a short timeout retransmits needlessly on a loaded host (soft-RoCE under
 * emulation acknowledges in tens of ms, and its retransmission of large
 * writes is fragile). */
static int ack_timeout(void) {
  int64_t t = kolo_param_int("KOLO_IB_TIMEOUT");
  return t < 0 ? 0 : t > 31 ? 31 : (int)t;
}

/* INIT -> RTR -> RTS towards the peer's QPs. */
static koloResult_t qps_ready(ib_comm *c, const ib_hello *them, kolo_errbuf *eb) {
  int timeout_exp = ack_timeout();
  char dev[sizeof them->dev + 1];
  memcpy(dev, them->dev, sizeof them->dev);
  dev[sizeof them->dev] = '\0';
  if (them->link_layer != c->port.link_layer)
    return kolo_error(eb, koloInvalidUsage, "%s's %s is %s, this rank's %s is %s: they cannot connect", c->who,
                      dev, them->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", c->port.name,
                      c->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
  /* enum ibv_mtu is ordered: the smaller end's MTU */
  enum ibv_mtu mtu = them->mtu < (uint8_t)c->port.mtu ? (enum ibv_mtu)them->mtu : c->port.mtu;
  for (int q = 0; q < c->nqps; q++) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = them->qpn[q];
    a.rq_psn = them->psn[q];
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12; /* 0.64 ms */
    a.ah_attr.port_num = (uint8_t)c->port.port;
    a.ah_attr.dlid = them->lid;
    if (c->port.link_layer == IBV_LINK_LAYER_ETHERNET) { /* RoCE routes by GID */
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, them->gid, 16);
      a.ah_attr.grh.sgid_index = (uint8_t)c->port.gid_index;
      a.ah_attr.grh.hop_limit = 64;
    }
    int e = ibv_modify_qp(c->qp[q], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (e != 0)
      return kolo_syserror(eb, e, "ibv_modify_qp(%s port %d qpn 0x%x, INIT -> RTR) towards %s (%s qpn 0x%x) failed",
                           c->port.name, c->port.port, c->qp[q]->qp_num, c->who, dev, them->qpn[q]);
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)timeout_exp; /* see ack_timeout() */
    a.retry_cnt = 7;
    a.rnr_retry = 7;  /* forever: a peer slow to repost receives is not dead */
    a.sq_psn = c->me.psn[q];
    a.max_rd_atomic = 1;
    e = ibv_modify_qp(c->qp[q], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (e != 0)
      return kolo_syserror(eb, e, "ibv_modify_qp(%s port %d qpn 0x%x, RTR -> RTS) towards %s failed", c->port.name,
                           c->port.port, c->qp[q]->qp_num, c->who);
  }
  char g[64];
  union ibv_gid gid; /* the hello's bytes are not aligned as the union needs */
  memcpy(gid.raw, them->gid, sizeof gid.raw);
  kolo_ib_gid_str(&gid, g, sizeof g);
  KOLO_INFO("ib connection with %s: %s port %d (GID index %d) <-> %s (%s), %d QP(s), MTU %d", c->who,
            c->port.name, c->port.port, c->port.gid_index, dev, g, c->nqps,
            128 << (int)mtu);
  return koloSuccess;
}

/* ---- connections ------------------------------------------------------------ */

static ib_comm *comm_new(int is_send, int nqps, const char *who) {
  ib_comm *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->is_send = is_send;
  c->nqps = nqps;
  c->fd = -1;
  snprintf(c->who, sizeof c->who, "%s", who);
  return c;
}

static void warn_rc(int e, const char *what, const ib_comm *c) {
  if (e != 0)
    KOLO_WARN("%s (%s port %d, connection with %s) failed: %s", what, c->port.name, c->port.port, c->who, strerror(e));
}

void kolo_ib_dereg(ib_comm *c, struct ibv_mr **mr, const char *what) {
  if (*mr) warn_rc(ibv_dereg_mr(*mr), what, c);
  *mr = NULL;
}

/* What the connection cost in verbs calls (see ib_stats). */
static void log_stats(const ib_comm *c) {
  const ib_stats *s = &c->st;
  if (s->slices == 0) return;
  double r = (double)s->slices;
  KOLO_INFO("ib connection with %s (%s port %d) closed: %llu slices %s; per slice: %.2f writes (%.2f inline, %.2f in "
            "an entry, %.2f signature headers apart), %.2f credits (%.2f with an immediate), %.2f ibv_post_send "
            "(%.2f signaled), %.2f ibv_post_recv, %.2f CQ polls returning %.2f completions, %.2f CQ arms, %.2f "
            "channel events",
            c->who, c->port.name, c->port.port, (unsigned long long)s->slices, c->is_send ? "sent" : "received",
            (double)s->writes / r, (double)s->inline_writes / r, (double)s->inbox / r, (double)s->sig_writes / r,
            (double)s->credits / r, (double)s->imm_credits / r, (double)s->send_posts / r, (double)s->signaled / r,
            (double)s->recv_posts / r, (double)s->polls / r, (double)s->cqes / r, (double)s->arms / r,
            (double)s->events / r);
}

/* The drain before the QPs go: long enough for an acknowledgement from a
 * loaded soft-RoCE guest, short enough for a close after a failure. */
#define CLOSE_DRAIN_MS 250

/* Mirrors make_verbs and bind: QPs, the registrations, CQ, channel, PD,
 * device, then the socket. */
void kolo_ib_close(void *comm) {
  ib_comm *c = comm;
  if (c == NULL) return;
  c->closing = 1;
  if (c->cq) kolo_ib_drain(c, CLOSE_DRAIN_MS);
  log_stats(c);
  for (int q = 0; q < IB_MAX_QPS; q++) {
    char what[64];
    snprintf(what, sizeof what, "ibv_destroy_qp(qpn 0x%x)", c->qp[q] ? c->qp[q]->qp_num : 0);
    if (c->qp[q]) warn_rc(ibv_destroy_qp(c->qp[q]), what, c);
  }
  kolo_ib_dereg(c, &c->ring_mr, "ibv_dereg_mr (the ring)");
  kolo_ib_dereg(c, &c->dmabuf_mr, "ibv_dereg_mr (GPUDirect slots)");
  kolo_ib_dereg(c, &c->area_mr, "ibv_dereg_mr (the control area)");
  if (c->cq) warn_rc(ibv_destroy_cq(c->cq), "ibv_destroy_cq", c);
  if (c->chan) warn_rc(ibv_destroy_comp_channel(c->chan), "ibv_destroy_comp_channel", c);
  if (c->pd) warn_rc(ibv_dealloc_pd(c->pd), "ibv_dealloc_pd", c);
  if (c->ctx) warn_rc(ibv_close_device(c->ctx), "ibv_close_device", c);
  if (c->fd >= 0) close(c->fd);
  free(c->area);
  free(c);
}

static koloResult_t send_hello(ib_comm *c, int64_t deadline, kolo_errbuf *eb) {
  uint8_t m[KOLO_IB_HELLO_BYTES];
  kolo_encode_ib_hello(&c->me, m);
  return kolo_sock_send_all(c->fd, m, sizeof m, deadline, c->who, eb);
}

koloResult_t kolo_ib_connect(const kolo_net_handle *handle, int dev, int64_t deadline, int timeout_ms,
                             const char *who, void **comm, kolo_errbuf *eb) {
  kolo_net_listen_info w;
  char why[KOLO_ERR_LEN];
  if (kolo_decode_net_handle(handle, KOLO_NET_HANDLE_IB_MAGIC, who, &w, why, sizeof why) != KOLO_CONN_WIRE_OK)
    return kolo_error(eb, koloRemoteError, "%s", why);
  struct sockaddr_storage addr = w.addr;
  ib_comm *c = comm_new(1, (int)w.nconns, who);
  if (c == NULL) return kolo_error(eb, koloSystemError, "out of memory connecting to %s", who);
  koloResult_t res = make_verbs(c, dev, eb);
  if (res == koloSuccess) res = kolo_sock_connect(&addr, deadline, timeout_ms, who, eb, &c->fd);
  memcpy(c->me.token, w.token, IB_TOKEN_BYTES);
  if (res == koloSuccess) res = send_hello(c, deadline, eb);
  if (res != koloSuccess) {
    kolo_ib_close(c);
    return res;
  }
  *comm = c;
  return koloSuccess;
}

/* Waits for the sender's TCP connection with its hello (the listener
 * refuses strays). */
static koloResult_t accept_sender(ib_listener *l, int64_t deadline, int timeout_ms, const char *who,
                                  ib_hello *them, int *fd, kolo_errbuf *eb) {
  koloResult_t res = kolo_net_listener_take(l->shared, l->token, deadline, fd, them, eb);
  if (res == koloTimeout)
    return kolo_error(eb, koloTimeout, "%s did not open its ib connection within %d ms", who, timeout_ms);
  return res;
}

koloResult_t kolo_ib_accept(void *lcomm, int64_t deadline, int timeout_ms, const char *who, void **comm,
                            kolo_errbuf *eb) {
  ib_listener *l = lcomm;
  ib_comm *c = comm_new(0, l->nqps, who);
  if (c == NULL) return kolo_error(eb, koloSystemError, "out of memory accepting %s", who);
  ib_hello them;
  koloResult_t res = accept_sender(l, deadline, timeout_ms, who, &them, &c->fd, eb);
  c->them = them;
  if (res == koloSuccess) res = make_verbs(c, l->dev, eb);
  if (res == koloSuccess) res = qps_ready(c, &them, eb);
  if (res == koloSuccess) res = send_hello(c, deadline, eb);
  if (res != koloSuccess) {
    kolo_ib_close(c);
    return res;
  }
  *comm = c;
  return koloSuccess;
}

koloResult_t kolo_ib_handshake_step(ib_comm *c, int *eof, kolo_errbuf *eb) {
  *eof = 0;
  int err = 0;
  if (!c->is_send) { /* the sender's ready byte */
    unsigned char b = 0;
    ssize_t k = kolo_sock_read_some(c->fd, &b, 1, &err);
    if (k < 0 && err == 0) *eof = 1;
    else if (k < 0) return kolo_syserror(eb, err, "reading from %s's ib setup connection failed", c->who);
    else if (k == 1 && b != READY_BYTE)
      return kolo_error(eb, koloRemoteError, "%s sent 0x%02x instead of its ready byte", c->who, b);
    else if (k == 1) c->ready = 1;
    return koloSuccess;
  }
  while (c->hin_len < sizeof c->hin) {
    ssize_t k = kolo_sock_read_some(c->fd, c->hin + c->hin_len, sizeof c->hin - c->hin_len, &err);
    if (k == 0) return koloSuccess;
    if (k < 0 && err == 0) {
      *eof = 1;
      return koloSuccess;
    }
    if (k < 0) return kolo_syserror(eb, err, "reading from %s's ib setup connection failed", c->who);
    c->hin_len += (size_t)k;
  }
  ib_hello them;
  uint32_t version;
  char why[160];
  if (kolo_decode_ib_hello(c->hin, sizeof c->hin, &them, &version, why, sizeof why) != KOLO_NET_WIRE_OK)
    return kolo_error(eb, koloRemoteError, "%s answered the ib setup wrongly: %s", c->who, why);
  if (them.nqps != (uint32_t)c->nqps)
    return kolo_error(eb, koloRemoteError, "%s answered the ib setup with %u QPs, expected %d", c->who, them.nqps,
                      c->nqps);
  if (them.in_bytes < IB_IN_BYTES)
    return kolo_error(eb, koloRemoteError, "%s answered the ib setup with a control area of %u bytes, expected %u",
                      c->who, them.in_bytes, (unsigned)IB_IN_BYTES);
  c->them = them;
  koloResult_t res = qps_ready(c, &them, eb);
  unsigned char b = READY_BYTE;
  if (res == koloSuccess) res = kolo_sock_send_all(c->fd, &b, 1, kolo_deadline(READY_WAIT_MS), c->who, eb);
  if (res == koloSuccess) c->ready = 1;
  return res;
}
