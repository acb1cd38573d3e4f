/* verbs_smoke.c - kolo's soft-RoCE smoke test: the ibverbs data path that
 * transport/net's ib backend uses, reduced to two processes and one RC QP.
 *
 *   receiver: verbs_smoke -d DEV [-p TCPPORT] [-t SECS]           (listens)
 *   sender:   verbs_smoke -d DEV [-p TCPPORT] [-n COUNT] [-k SLOTS] [-S SEED] [-t SECS] HOST
 *   verbs_smoke -d DEV -G       print the GID index it would use and exit
 *
 * Protocol (the one kolo's ib backend speaks):
 *   1. Both sides open DEV by name, check port 1 is ACTIVE, pick the RoCEv2
 *      IPv4-mapped GID (KOLO_IB_GID_INDEX overrides), create an RC QP and
 *      swap {qpn, psn, gid, lid, mtu} over a TCP socket.
 *   2. The receiver registers SLOTS slots once and advertises each one as a
 *      credit {slot, addr, rkey, capacity}, sent as an ibv SEND message.
 *   3. The sender takes a credit, fills a staging buffer from a seeded random
 *      stream and posts RDMA WRITE WITH IMMEDIATE into that slot; the
 *      immediate is (slot << 24 | length).
 *   4. The receiver's completion names slot and length; it checks both, and
 *      every byte against the same random stream, then sends the credit back.
 *   Message sizes 1 B, 4095 B, 64 KiB and 1 MiB + 3, COUNT messages each.
 *   5. The receiver sends its totals over TCP; the sender checks them.
 * Every verbs call and every completion status is checked; errors name the
 * device, the peer and ibv_wc_status_str().  Exit status 0 = all checked. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x6b6f6c6fu /* "kolo" */
#define MAX_SLOTS 64      /* the immediate has 8 bits for the slot */
#define LEN_BITS 24       /* ... and 24 for the length */
static const size_t kSizes[] = {1, 4095, 65536, (1u << 20) + 3};
#define NSIZES (sizeof kSizes / sizeof kSizes[0])

static const char *g_role = "verbs_smoke";
static char g_peer[160] = "peer not connected yet";

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "verbs_smoke %s: ", g_role);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- random stream shared by both sides (splitmix64) ------------------- */
static uint64_t g_rng;
static uint64_t rng_next(void) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void rng_fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng_next();
    size_t k = n - i < 8 ? n - i : 8;
    memcpy(p + i, &v, k);
  }
}

/* ---- TCP side channel --------------------------------------------------- */
static void send_all(int fd, const void *p, size_t n) {
  for (size_t off = 0; off < n;) {
    ssize_t r = send(fd, (const char *)p + off, n - off, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("send to %s failed: %s", g_peer, strerror(errno));
    off += (size_t)r;
  }
}
static void recv_all(int fd, void *p, size_t n) {
  for (size_t off = 0; off < n;) {
    ssize_t r = recv(fd, (char *)p + off, n - off, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) die("%s closed the connection (it failed, see its output)", g_peer);
    if (r < 0) die("recv from %s failed: %s", g_peer, strerror(errno));
    off += (size_t)r;
  }
}
/* A peer that exits on an error closes its socket: notice it while polling
 * the CQ instead of waiting for the timeout. */
static void check_peer_alive(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  char c;
  if (poll(&p, 1, 0) > 0 && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
    die("%s closed the connection (it failed, see its output)", g_peer);
}

static int tcp_connect(const char *host, int port, double tmo) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
  int e = getaddrinfo(host, ps, &hints, &ai);
  if (e) die("cannot resolve %s: %s", host, gai_strerror(e));
  double t0 = now_s();
  for (;;) { /* the receiver may not be listening yet: retry */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      freeaddrinfo(ai);
      return fd;
    }
    int err = errno;
    close(fd);
    if (now_s() - t0 > tmo) die("connect to %s:%d: %s (is the receiver running?)", host, port, strerror(err));
    usleep(100 * 1000);
  }
}
static int tcp_accept(int port, struct sockaddr_in *from) {
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (s < 0) die("socket: %s", strerror(errno));
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) || listen(s, 1)) die("bind/listen on TCP port %d: %s", port, strerror(errno));
  socklen_t len = sizeof *from;
  int fd;
  while ((fd = accept(s, (struct sockaddr *)from, &len)) < 0 && errno == EINTR) {}
  if (fd < 0) die("accept: %s", strerror(errno));
  close(s);
  return fd;
}

/* ---- device, port, GID -------------------------------------------------- */
struct dev {
  struct ibv_context *ctx;
  struct ibv_port_attr port;
  int port_num, gid_index;
  union ibv_gid gid;
  const char *name;
};

static int is_ipv4_mapped(const union ibv_gid *g) {
  static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g->raw, pfx, sizeof pfx) == 0;
}

static void gid_str(const union ibv_gid *g, char *out, size_t n) {
  if (is_ipv4_mapped(g)) inet_ntop(AF_INET, g->raw + 12, out, (socklen_t)n);
  else inet_ntop(AF_INET6, g->raw, out, (socklen_t)n);
}

/* RoCE: the first RoCEv2 GID that is an IPv4-mapped address (routable over
 * UDP/IPv4, which is what rxe on a veth with an IPv4 address gives).
 * InfiniBand: index 0.  KOLO_IB_GID_INDEX overrides both. */
static int pick_gid(struct dev *d) {
  const char *env = getenv("KOLO_IB_GID_INDEX");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v >= d->port.gid_tbl_len)
      die("KOLO_IB_GID_INDEX=%s is not an index of %s port %d's GID table (0..%d)", env, d->name, d->port_num,
          d->port.gid_tbl_len - 1);
    return (int)v;
  }
  if (d->port.link_layer != IBV_LINK_LAYER_ETHERNET) return 0;
  for (int i = 0; i < d->port.gid_tbl_len; i++) {
    struct ibv_gid_entry e;
    if (ibv_query_gid_ex(d->ctx, (uint32_t)d->port_num, (uint32_t)i, &e, 0) == 0) {
      if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && is_ipv4_mapped(&e.gid)) return i;
      continue;
    }
    /* Empty entry, or a kernel without the GID-entry query: sysfs knows. */
    char path[256], type[32] = "";
    union ibv_gid g;
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", d->name, d->port_num, i);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(type, sizeof type, f)) type[0] = 0;
    fclose(f);
    if (strncmp(type, "RoCE v2", 7) == 0 && ibv_query_gid(d->ctx, (uint8_t)d->port_num, i, &g) == 0 &&
        is_ipv4_mapped(&g))
      return i;
  }
  die("%s port %d has no RoCEv2 GID with an IPv4 address (give its netdev an IPv4 address, "
      "or set KOLO_IB_GID_INDEX)", d->name, d->port_num);
  return -1;
}

static void open_dev(struct dev *d, const char *name, int port_num) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list) die("ibv_get_device_list: %s (is the ib_uverbs module loaded?)", strerror(errno));
  if (n == 0) die("no RDMA device found (for soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IF)");
  char names[512] = "";
  for (int i = 0; i < n; i++) {
    const char *nm = ibv_get_device_name(list[i]);
    if (strcmp(nm, name) == 0) {
      d->ctx = ibv_open_device(list[i]);
      if (!d->ctx) die("ibv_open_device(%s): %s", name, strerror(errno));
    }
    size_t l = strlen(names);
    snprintf(names + l, sizeof names - l, "%s%s", l ? " " : "", nm);
  }
  ibv_free_device_list(list);
  if (!d->ctx) die("no RDMA device named %s (found: %s)", name, names);
  d->name = name;
  d->port_num = port_num;
  if (ibv_query_port(d->ctx, (uint8_t)port_num, &d->port))
    die("ibv_query_port(%s, %d): %s", name, port_num, strerror(errno));
  if (d->port.state != IBV_PORT_ACTIVE)
    die("%s port %d is %s, not ACTIVE (is its network interface up and cabled?)", name, port_num,
        ibv_port_state_str(d->port.state));
  d->gid_index = pick_gid(d);
  if (ibv_query_gid(d->ctx, (uint8_t)port_num, d->gid_index, &d->gid))
    die("ibv_query_gid(%s, port %d, index %d): %s", name, port_num, d->gid_index, strerror(errno));
}

/* Memory registration pins pages: name the memlock limit when that fails. */
static struct ibv_mr *reg(struct ibv_pd *pd, const char *dev, void *p, size_t n, int access) {
  struct ibv_mr *mr = ibv_reg_mr(pd, p, n, access);
  if (mr) return mr;
  int err = errno;
  struct rlimit rl;
  if ((err == ENOMEM || err == EPERM || err == EAGAIN) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
      rl.rlim_cur != RLIM_INFINITY)
    die("ibv_reg_mr(%s, %zu bytes): %s; the locked-memory limit is %llu KiB: raise it (ulimit -l unlimited, "
        "or memlock in /etc/security/limits.conf)", dev, n, strerror(err), (unsigned long long)rl.rlim_cur / 1024);
  die("ibv_reg_mr(%s, %zu bytes): %s", dev, n, strerror(err));
  return NULL;
}

static void dereg(struct ibv_mr *mr) {
  int e = ibv_dereg_mr(mr);
  if (e) die("ibv_dereg_mr: %s", strerror(e));
}

/* ---- wire formats ------------------------------------------------------- */
struct hello { /* TCP, both ways */
  uint32_t magic, qpn, psn, count, nslots;
  uint16_t lid;
  uint8_t mtu, link_layer;
  uint64_t seed;
  uint8_t gid[16];
  char dev[32];
};
struct credit { /* ibv SEND, receiver -> sender */
  uint32_t magic, slot, rkey, capacity;
  uint64_t addr;
};
struct summary { /* TCP, receiver -> sender, at the end */
  uint32_t magic, errors;
  uint64_t messages, bytes;
};

enum { WR_WRITE = 1, WR_CREDIT_SEND, WR_CREDIT_RECV, WR_DATA_RECV };
#define WRID(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))

struct conn {
  struct dev d;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  int fd;
  double tmo;
};

static void connect_qp(struct conn *c, const struct hello *me, const struct hello *them) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = (uint8_t)c->d.port_num, .pkey_index = 0,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  int e = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (e) die("ibv_modify_qp(%s, INIT): %s", c->d.name, strerror(e));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = me->mtu < them->mtu ? me->mtu : them->mtu; /* enum ibv_mtu is ordered */
  a.dest_qp_num = them->qpn;
  a.rq_psn = them->psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = (uint8_t)c->d.port_num;
  a.ah_attr.dlid = them->lid;
  if (c->d.port.link_layer == IBV_LINK_LAYER_ETHERNET) { /* RoCE: routed by GID */
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, them->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)c->d.gid_index;
    a.ah_attr.grh.hop_limit = 64;
  }
  e = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (e) die("ibv_modify_qp(%s, RTR) towards %s: %s", c->d.name, g_peer, strerror(e));
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  /* 4.096 us * 2^14 = 67 ms per try */
  a.retry_cnt = 7;
  a.rnr_retry = 7; /* infinite: credits make RNR impossible, but be safe */
  a.sq_psn = me->psn;
  a.max_rd_atomic = 1;
  e = ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC);
  if (e) die("ibv_modify_qp(%s, RTS): %s", c->d.name, strerror(e));
}

static const char *wr_kind(uint64_t wr_id) {
  switch (wr_id >> 32) {
  case WR_WRITE: return "RDMA WRITE WITH IMM";
  case WR_CREDIT_SEND: return "credit SEND";
  case WR_CREDIT_RECV: return "credit RECV";
  case WR_DATA_RECV: return "RECV for WRITE WITH IMM";
  default: return "unknown work request";
  }
}

/* Poll one completion; wait at most c->tmo seconds, watching the peer. */
static int poll_one(struct conn *c, struct ibv_wc *wc, int block, const char *waiting_for) {
  double t0 = 0;
  for (unsigned spins = 0;; spins++) {
    int n = ibv_poll_cq(c->cq, 1, wc);
    if (n < 0) die("ibv_poll_cq(%s) failed (%d)", c->d.name, n);
    if (n == 1) {
      if (wc->status != IBV_WC_SUCCESS)
        die("completion error on %s (%s): %s #%u: status '%s' (%d), vendor_err 0x%x", c->d.name, g_peer,
            wr_kind(wc->wr_id), (unsigned)(wc->wr_id & 0xffffffffu), ibv_wc_status_str(wc->status), (int)wc->status,
            wc->vendor_err);
      return 1;
    }
    if (!block) return 0;
    if ((spins & 1023) == 1023) { /* rarely: clock, peer liveness */
      if (t0 == 0) t0 = now_s();
      else if (now_s() - t0 > c->tmo)
        die("no completion on %s for %.0f s while waiting for %s (%s)", c->d.name, c->tmo, waiting_for, g_peer);
      check_peer_alive(c->fd);
    }
    sched_yield(); /* soft-RoCE runs in kernel threads on the same few CPUs */
  }
}

static void post_recv(struct conn *c, uint64_t wr_id, struct ibv_sge *sge) {
  struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = sge, .num_sge = sge ? 1 : 0}, *bad;
  int e = ibv_post_recv(c->qp, &wr, &bad);
  if (e) die("ibv_post_recv(%s): %s", c->d.name, strerror(e));
}

static void post_send(struct conn *c, struct ibv_send_wr *wr) {
  struct ibv_send_wr *bad;
  int e = ibv_post_send(c->qp, wr, &bad);
  if (e) die("ibv_post_send(%s, %s): %s", c->d.name, wr_kind(wr->wr_id), strerror(e));
}

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
static void *xalloc(size_t n) {
  void *p = aligned_alloc(4096, round_up(n, 4096));
  if (!p) die("out of memory (%zu bytes)", n);
  memset(p, 0, round_up(n, 4096));
  return p;
}

/* ---- receiver ----------------------------------------------------------- */
static int run_receiver(struct conn *c, const struct hello *them) {
  const uint32_t nslots = them->nslots, count = them->count;
  const size_t slot_size = round_up(kSizes[NSIZES - 1], 4096);
  unsigned char *slots = xalloc(slot_size * nslots), *expect = xalloc(slot_size);
  struct credit *cred = xalloc(sizeof(struct credit) * nslots);
  struct ibv_mr *smr = reg(c->pd, c->d.name, slots, slot_size * nslots, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_mr *cmr = reg(c->pd, c->d.name, cred, sizeof(struct credit) * nslots, IBV_ACCESS_LOCAL_WRITE);
  int cred_busy[MAX_SLOTS] = {0}, with_sender[MAX_SLOTS] = {0};
  g_rng = them->seed;

  for (uint32_t i = 0; i < nslots; i++) post_recv(c, WRID(WR_DATA_RECV, i), NULL);
  char b = 0;
  send_all(c->fd, &b, 1); /* our receives are posted ... */
  recv_all(c->fd, &b, 1); /* ... and so are the sender's */

  struct ibv_wc wc;
  /* Give every slot to the sender: SEND {slot, addr, rkey, capacity}. */
  for (uint32_t s = 0; s < nslots; s++) {
    cred[s] = (struct credit){.magic = MAGIC, .slot = s, .rkey = smr->rkey, .capacity = (uint32_t)slot_size,
                              .addr = (uintptr_t)(slots + s * slot_size)};
    struct ibv_sge sge = {.addr = (uintptr_t)&cred[s], .length = sizeof cred[s], .lkey = cmr->lkey};
    struct ibv_send_wr wr = {.wr_id = WRID(WR_CREDIT_SEND, s), .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
    post_send(c, &wr);
    cred_busy[s] = with_sender[s] = 1;
  }

  uint64_t total = (uint64_t)count * NSIZES, done = 0, bytes = 0;
  uint32_t errors = 0;
  while (done < total) {
    poll_one(c, &wc, 1, "an RDMA WRITE WITH IMM from the sender");
    if (wc.wr_id >> 32 == WR_CREDIT_SEND) {
      cred_busy[wc.wr_id & 0xffffffffu] = 0;
      continue;
    }
    if (wc.wr_id >> 32 != WR_DATA_RECV) die("unexpected completion %s", wr_kind(wc.wr_id));
    size_t want = kSizes[done / count];
    uint32_t imm = ntohl(wc.imm_data), s = imm >> LEN_BITS, len = imm & ((1u << LEN_BITS) - 1);
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM))
      die("message %llu: completion opcode %d flags 0x%x, expected RECV_RDMA_WITH_IMM", (unsigned long long)done,
          (int)wc.opcode, (unsigned)wc.wc_flags);
    if (s >= nslots || !with_sender[s])
      die("message %llu: immediate 0x%08x names slot %u, which the sender does not hold", (unsigned long long)done, imm, s);
    if (len != want || wc.byte_len != want)
      die("message %llu: length %u in the immediate, %u in the completion, expected %zu", (unsigned long long)done, len,
          wc.byte_len, want);
    rng_fill(expect, want);
    unsigned char *got = slots + (size_t)s * slot_size;
    if (memcmp(got, expect, want) != 0) {
      size_t k = 0;
      while (got[k] == expect[k]) k++;
      if (errors++ < 5)
        fprintf(stderr, "verbs_smoke receiver: message %llu (slot %u, %zu B): byte %zu is 0x%02x, expected 0x%02x\n",
                (unsigned long long)done, s, want, k, got[k], expect[k]);
    }
    memset(got, 0, want); /* a stale slot must never pass the next check */
    done++;
    bytes += want;
    /* Recycle: repost the RECV that the next write into this slot consumes,
     * then hand the slot back (its previous credit SEND must be complete). */
    with_sender[s] = 0;
    post_recv(c, WRID(WR_DATA_RECV, s), NULL);
    while (cred_busy[s]) {
      poll_one(c, &wc, 1, "a credit SEND to complete");
      if (wc.wr_id >> 32 != WR_CREDIT_SEND) die("unexpected %s while recycling slot %u", wr_kind(wc.wr_id), s);
      cred_busy[wc.wr_id & 0xffffffffu] = 0;
    }
    { /* even near the end: the sender just holds unused credits */
      struct ibv_sge sge = {.addr = (uintptr_t)&cred[s], .length = sizeof cred[s], .lkey = cmr->lkey};
      struct ibv_send_wr wr = {.wr_id = WRID(WR_CREDIT_SEND, s), .sg_list = &sge, .num_sge = 1,
                               .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
      post_send(c, &wr);
      cred_busy[s] = with_sender[s] = 1;
    }
  }
  for (uint32_t s = 0; s < nslots; s++) /* drain our SENDs before reporting */
    while (cred_busy[s]) {
      poll_one(c, &wc, 1, "the last credit SENDs to complete");
      if (wc.wr_id >> 32 == WR_CREDIT_SEND) cred_busy[wc.wr_id & 0xffffffffu] = 0;
    }
  struct summary sum = {.magic = MAGIC, .errors = errors, .messages = done, .bytes = bytes};
  send_all(c->fd, &sum, sizeof sum);
  recv_all(c->fd, &b, 1); /* the sender has read it: now the QPs may go */
  printf("verbs_smoke receiver %s <- %s: %llu messages, %llu bytes checked, %u corrupt\n", c->d.name, g_peer,
         (unsigned long long)done, (unsigned long long)bytes, errors);
  dereg(cmr);
  dereg(smr);
  free(slots);
  free(expect);
  free(cred);
  return errors ? 1 : 0;
}

/* ---- sender ------------------------------------------------------------- */
static int run_sender(struct conn *c, const struct hello *me) {
  const uint32_t nslots = me->nslots, count = me->count;
  const size_t stage_size = round_up(kSizes[NSIZES - 1], 4096);
  unsigned char *stage = xalloc(stage_size * nslots);
  struct credit *inbox = xalloc(sizeof(struct credit) * nslots), fifo[MAX_SLOTS];
  struct ibv_mr *smr = reg(c->pd, c->d.name, stage, stage_size * nslots, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *imr = reg(c->pd, c->d.name, inbox, sizeof(struct credit) * nslots, IBV_ACCESS_LOCAL_WRITE);
  int stage_busy[MAX_SLOTS] = {0};
  unsigned head = 0, tail = 0; /* credit FIFO */
  g_rng = me->seed;

  for (uint32_t i = 0; i < nslots; i++) {
    struct ibv_sge sge = {.addr = (uintptr_t)&inbox[i], .length = sizeof inbox[i], .lkey = imr->lkey};
    post_recv(c, WRID(WR_CREDIT_RECV, i), &sge);
  }
  char b = 0;
  send_all(c->fd, &b, 1);
  recv_all(c->fd, &b, 1);

  uint64_t total = (uint64_t)count * NSIZES, posted = 0, completed = 0;
  double t_first[NSIZES] = {0}, t_last[NSIZES] = {0};
  struct ibv_wc wc;
  while (completed < total) {
    /* Everything that completed: credits in, writes done. */
    int block = !(posted < total && head != tail && !stage_busy[posted % nslots]);
    while (poll_one(c, &wc, block, posted < total ? "a credit from the receiver" : "the last writes to complete")) {
      block = 0;
      uint32_t i = wc.wr_id & 0xffffffffu;
      if (wc.wr_id >> 32 == WR_CREDIT_RECV) {
        if (wc.opcode != IBV_WC_RECV || wc.byte_len != sizeof(struct credit) || inbox[i].magic != MAGIC ||
            inbox[i].slot >= nslots || inbox[i].capacity < kSizes[NSIZES - 1])
          die("malformed credit (opcode %d, %u bytes, slot %u)", (int)wc.opcode, wc.byte_len, inbox[i].slot);
        if (head - tail == nslots) die("more credits than slots");
        fifo[head++ % MAX_SLOTS] = inbox[i];
        struct ibv_sge sge = {.addr = (uintptr_t)&inbox[i], .length = sizeof inbox[i], .lkey = imr->lkey};
        post_recv(c, WRID(WR_CREDIT_RECV, i), &sge);
      } else if (wc.wr_id >> 32 == WR_WRITE) {
        if (wc.opcode != IBV_WC_RDMA_WRITE) die("write completion with opcode %d", (int)wc.opcode);
        stage_busy[i % nslots] = 0;
        t_last[completed / count] = now_s();
        completed++;
      } else {
        die("unexpected completion %s", wr_kind(wc.wr_id));
      }
    }
    /* Post as many writes as credits and free staging buffers allow. */
    while (posted < total && head != tail && !stage_busy[posted % nslots]) {
      struct credit cr = fifo[tail++ % MAX_SLOTS];
      size_t len = kSizes[posted / count];
      unsigned k = (unsigned)(posted % nslots);
      unsigned char *src = stage + (size_t)k * stage_size;
      if (posted % count == 0) t_first[posted / count] = now_s();
      rng_fill(src, len);
      struct ibv_sge sge = {.addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = smr->lkey};
      struct ibv_send_wr wr = {.wr_id = WRID(WR_WRITE, posted), .sg_list = &sge, .num_sge = 1,
                               .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
                               .imm_data = htonl(cr.slot << LEN_BITS | (uint32_t)len),
                               .wr.rdma = {.remote_addr = cr.addr, .rkey = cr.rkey}};
      post_send(c, &wr);
      stage_busy[k] = 1;
      posted++;
    }
  }
  struct summary sum;
  recv_all(c->fd, &sum, sizeof sum);
  send_all(c->fd, &b, 1);
  uint64_t want_bytes = 0;
  for (size_t i = 0; i < NSIZES; i++) want_bytes += kSizes[i] * count;
  printf("verbs_smoke sender %s -> %s: %llu messages (%u slots, seed 0x%llx)", c->d.name, g_peer,
         (unsigned long long)total, nslots, (unsigned long long)me->seed);
  for (size_t i = 0; i < NSIZES; i++) {
    double dt = t_last[i] - t_first[i];
    double rate = dt > 0 ? count / dt : 0; /* messages per second */
    printf("%s %zu B: %.3g MB/s (%.0f msg/s)", i ? "," : ";", kSizes[i], rate * (double)kSizes[i] / 1e6, rate);
  }
  printf("\n");
  dereg(imr);
  dereg(smr);
  free(stage);
  free(inbox);
  if (sum.magic != MAGIC || sum.messages != total || sum.bytes != want_bytes || sum.errors) {
    fprintf(stderr, "verbs_smoke sender: receiver reports %llu messages / %llu bytes / %u corrupt, expected %llu / %llu / 0\n",
            (unsigned long long)sum.messages, (unsigned long long)sum.bytes, sum.errors, (unsigned long long)total,
            (unsigned long long)want_bytes);
    return 1;
  }
  return 0;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char m[] = "verbs_smoke: overall time limit (-T) reached\n";
  if (write(2, m, sizeof m - 1) < 0) {}
  _exit(1);
}

static void usage(void) {
  fprintf(stderr, "usage: verbs_smoke -d DEV [-P IBPORT] [-p TCPPORT] [-n COUNT] [-k SLOTS] [-S SEED] [-t SECS] [-T SECS] [HOST]\n"
                  "       verbs_smoke -d DEV -G   (print the GID index to use)\n"
                  "  without HOST: receiver (listens); with HOST: sender (connects to HOST's receiver)\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *devname = NULL;
  int ibport = 1, tcpport = 18515, count = 32, nslots = 8, print_gid = 0, total_tmo = 0, o;
  double tmo = 60;
  uint64_t seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
  while ((o = getopt(argc, argv, "d:P:p:n:k:S:t:T:G")) != -1) {
    switch (o) {
    case 'd': devname = optarg; break;
    case 'P': ibport = atoi(optarg); break;
    case 'p': tcpport = atoi(optarg); break;
    case 'n': count = atoi(optarg); break;
    case 'k': nslots = atoi(optarg); break;
    case 'S': seed = strtoull(optarg, NULL, 0); break;
    case 't': tmo = atof(optarg); break;
    case 'T': total_tmo = atoi(optarg); break;
    case 'G': print_gid = 1; break;
    default: usage();
    }
  }
  if (!devname || count < 1 || nslots < 1 || nslots > MAX_SLOTS || optind + 1 < argc) usage();
  const char *host = optind < argc ? argv[optind] : NULL;
  g_role = print_gid ? "gid" : host ? "sender" : "receiver";
  if (total_tmo > 0) {
    signal(SIGALRM, on_alarm);
    alarm((unsigned)total_tmo);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  struct conn c = {.tmo = tmo};
  open_dev(&c.d, devname, ibport);
  char gs[64];
  gid_str(&c.d.gid, gs, sizeof gs);
  if (print_gid) {
    printf("%d\n", c.d.gid_index);
    fprintf(stderr, "%s port %d: GID index %d (%s), %s, active MTU %d\n", devname, ibport, c.d.gid_index, gs,
            c.d.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", 128 << c.d.port.active_mtu);
    return 0;
  }

  c.pd = ibv_alloc_pd(c.d.ctx);
  if (!c.pd) die("ibv_alloc_pd(%s): %s", devname, strerror(errno));
  int depth = 2 * nslots + 8;
  c.cq = ibv_create_cq(c.d.ctx, 2 * depth, NULL, NULL, 0);
  if (!c.cq) die("ibv_create_cq(%s, %d): %s", devname, 2 * depth, strerror(errno));
  struct ibv_qp_init_attr ia = {.send_cq = c.cq, .recv_cq = c.cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
                                .cap = {.max_send_wr = (uint32_t)depth, .max_recv_wr = (uint32_t)depth,
                                        .max_send_sge = 1, .max_recv_sge = 1}};
  c.qp = ibv_create_qp(c.pd, &ia);
  if (!c.qp) die("ibv_create_qp(%s, RC): %s", devname, strerror(errno));

  struct hello me = {.magic = MAGIC, .qpn = c.qp->qp_num, .psn = (uint32_t)(seed ^ (seed >> 24)) & 0xffffff,
                     .count = (uint32_t)count, .nslots = (uint32_t)nslots, .lid = c.d.port.lid,
                     .mtu = (uint8_t)c.d.port.active_mtu, .link_layer = c.d.port.link_layer, .seed = seed},
               them;
  memcpy(me.gid, c.d.gid.raw, 16);
  snprintf(me.dev, sizeof me.dev, "%s", devname);
  struct sockaddr_in from;
  if (host) {
    c.fd = tcp_connect(host, tcpport, tmo);
  } else {
    c.fd = tcp_accept(tcpport, &from);
  }
  int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  send_all(c.fd, &me, sizeof me);
  recv_all(c.fd, &them, sizeof them);
  them.dev[sizeof them.dev - 1] = 0;
  char tg[64];
  gid_str((const union ibv_gid *)them.gid, tg, sizeof tg);
  snprintf(g_peer, sizeof g_peer, "peer %s (GID %s, qpn 0x%x)", them.dev, tg, them.qpn);
  if (them.magic != MAGIC) die("%s does not speak this protocol", g_peer);
  if (them.link_layer != me.link_layer) die("link layers differ: %s vs %s", devname, g_peer);
  if (!host && (them.nslots < 1 || them.nslots > MAX_SLOTS || them.count < 1))
    die("%s asks for %u slots (1..%d) and %u messages per size", g_peer, them.nslots, MAX_SLOTS, them.count);
  connect_qp(&c, &me, &them);
  fprintf(stderr, "verbs_smoke %s: %s GID[%d] %s qpn 0x%x <-> %s, MTU %d\n", g_role, devname, c.d.gid_index, gs,
          me.qpn, g_peer, 128 << (me.mtu < them.mtu ? me.mtu : them.mtu));

  int rc = host ? run_sender(&c, &me) : run_receiver(&c, &them);
  close(c.fd);
  int e;
  if ((e = ibv_destroy_qp(c.qp))) die("ibv_destroy_qp: %s", strerror(e));
  if ((e = ibv_destroy_cq(c.cq))) die("ibv_destroy_cq: %s", strerror(e));
  if ((e = ibv_dealloc_pd(c.pd))) die("ibv_dealloc_pd: %s", strerror(e));
  if ((e = ibv_close_device(c.d.ctx))) die("ibv_close_device: %s", strerror(e));
  return rc;
}
