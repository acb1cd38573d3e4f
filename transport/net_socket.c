/* net_socket.c - the TCP provider (see net.h).
 *
 * A connection is one control socket plus KOLO_SOCKET_NSTREAMS data sockets
 * (default 2), all non-blocking, close-on-exec and TCP_NODELAY (socket.c).
 * A sent region may be shorter than the receive it meets (net.h), so each
 * request starts on stream 0 with an 8-byte header: its length and its
 * sequence number (a check that both ends are in step).  The region is then
 * cut into k contiguous parts, part i travelling on stream i, where k is
 * nstreams or fewer for small regions (parts of at least 64 KiB): a small
 * message is one header and one send on one socket.  Streams carry their
 * parts in request order; a receiving stream past 0 waits for the header
 * of its next request to know its part.  A request is finished when every
 * stream has moved (or skipped) its part.  The control socket carries
 * 8-byte messages (kind, value) both ways.
 *
 * Each socket starts with a hello from the sender: magic, wire version,
 * stream index, stream count and the listener's random 16-byte token.
 * accept() drops connections whose hello is wrong, of another version (the
 * log names both) or does not arrive within a second.  Hellos, headers and
 * control messages are encoded explicitly (net_wire.h).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/conn_wire.h"
#include "transport/net.h"
#include "transport/net_wire.h"
#include "transport/socket.h"

#define TOKEN_BYTES KOLO_SOCK_TOKEN_BYTES
_Static_assert(TOKEN_BYTES == KOLO_NET_TOKEN_BYTES, "the handle carries the hello's token");
#define CTRL_MSG KOLO_SOCK_CTRL_BYTES
#define CTRL_OBUF 4096
#define HELLO_WAIT_MS 1000
#define HDR_BYTES KOLO_SOCK_FRAME_BYTES
/* Regions below nstreams x this travel on fewer streams. */
#define MIN_PART_BYTES ((size_t)64 << 10)

typedef struct {
  int fd;
  struct sockaddr_storage addr;
  uint8_t token[TOKEN_BYTES];
  int nstreams;
} sock_listen;

typedef struct {
  char *buf;
  size_t len;    /* sender: the region; receiver: from the header, once known */
  size_t cap;    /* receiver: room posted */
  int known;     /* len is known (sender: always; receiver: header read) */
  uint32_t seq;  /* the request's number on this connection */
  size_t hoff;   /* header bytes moved on stream 0 */
  uint8_t hdr[HDR_BYTES];
  size_t off[KOLO_NET_MAX_STREAMS];
} sock_req;

typedef struct {
  int is_send;
  int nstreams;
  int ctrl_fd, ctrl_gone;
  int fds[KOLO_NET_MAX_STREAMS];
  int failed;
  char who[96];
  sock_req reqs[KOLO_NET_MAX_REQS];
  uint32_t head, tail;                 /* requests in flight: [head, tail) */
  uint32_t cur[KOLO_NET_MAX_STREAMS];  /* per stream: the request it moves */
  int eof[KOLO_NET_MAX_STREAMS];       /* receiver: the stream ended */
  unsigned char obuf[CTRL_OBUF];
  size_t olen;
  unsigned char ibuf[CTRL_MSG];
  size_t ilen;
} sock_comm;

static int nstreams_param(void) {
  int64_t n = kolo_param_int("KOLO_SOCKET_NSTREAMS");
  if (n < 1) n = 1;
  if (n > KOLO_NET_MAX_STREAMS) n = KOLO_NET_MAX_STREAMS;
  return (int)n;
}

static koloResult_t sock_devices(int *ndev, kolo_errbuf *eb) {
  (void)eb;
  *ndev = 1; /* the interface the bootstrap chose (KOLO_SOCKET_IFNAME) */
  return koloSuccess;
}

/* The handle on the wire (conn_wire.h): address, token, streams. */
static void handle_encode(const sock_listen *l, kolo_net_handle *h) {
  kolo_net_listen_info w = {KOLO_NET_HANDLE_SOCK_MAGIC, l->addr, {0}, (uint32_t)l->nstreams};
  memcpy(w.token, l->token, TOKEN_BYTES);
  kolo_encode_net_handle(&w, h);
}

static koloResult_t sock_listen_fn(const struct sockaddr_storage *local, int dev, kolo_net_handle *handle,
                                   void **lcomm, kolo_errbuf *eb) {
  (void)dev; /* the bootstrap's interface (KOLO_SOCKET_IFNAME); routes pick the rest */
  sock_listen *l = calloc(1, sizeof *l);
  if (l == NULL) return kolo_error(eb, koloSystemError, "out of memory for a network listener");
  l->addr = *local;
  kolo_addr_set_port(&l->addr, 0);
  l->nstreams = nstreams_param();
  if (getrandom(l->token, sizeof l->token, 0) != (ssize_t)sizeof l->token) {
    koloResult_t res = kolo_syserror(eb, errno, "getrandom for a pipe token failed");
    free(l);
    return res;
  }
  koloResult_t res = kolo_sock_listen(&l->addr, eb, &l->fd);
  if (res != koloSuccess) {
    free(l);
    return res;
  }
  handle_encode(l, handle);
  *lcomm = l;
  return koloSuccess;
}

static void sock_close_listen(void *lcomm) {
  sock_listen *l = lcomm;
  if (l == NULL) return;
  if (l->fd >= 0) close(l->fd);
  free(l);
}

static sock_comm *comm_new(int is_send, int nstreams, const char *who) {
  sock_comm *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->is_send = is_send;
  c->nstreams = nstreams;
  c->ctrl_fd = -1;
  for (int i = 0; i < KOLO_NET_MAX_STREAMS; i++) c->fds[i] = -1;
  snprintf(c->who, sizeof c->who, "%s", who);
  return c;
}

static void sock_close(void *comm) {
  sock_comm *c = comm;
  if (c == NULL) return;
  if (c->ctrl_fd >= 0) close(c->ctrl_fd);
  for (int i = 0; i < KOLO_NET_MAX_STREAMS; i++)
    if (c->fds[i] >= 0) close(c->fds[i]);
  free(c);
}

static koloResult_t sock_connect(const kolo_net_handle *handle, int dev, int64_t deadline, int timeout_ms,
                                 const char *who, void **comm, kolo_errbuf *eb) {
  (void)dev;
  kolo_net_listen_info w;
  char why[KOLO_ERR_LEN];
  if (kolo_decode_net_handle(handle, KOLO_NET_HANDLE_SOCK_MAGIC, who, &w, why, sizeof why) != KOLO_CONN_WIRE_OK)
    return kolo_error(eb, koloRemoteError, "%s", why);
  struct sockaddr_storage addr = w.addr;
  sock_comm *c = comm_new(1, (int)w.nconns, who);
  if (c == NULL) return kolo_error(eb, koloSystemError, "out of memory connecting to %s", who);
  koloResult_t res = koloSuccess;
  for (int i = 0; i <= c->nstreams && res == koloSuccess; i++) {
    int fd = -1;
    res = kolo_sock_connect(&addr, deadline, timeout_ms, who, eb, &fd);
    if (res != koloSuccess) break;
    if (i == 0) c->ctrl_fd = fd;
    else c->fds[i - 1] = fd;
    kolo_sock_hello h = {(uint32_t)i, w.nconns, {0}};
    memcpy(h.token, w.token, TOKEN_BYTES);
    uint8_t m[KOLO_SOCK_HELLO_BYTES];
    kolo_encode_sock_hello(&h, m);
    res = kolo_sock_send_all(fd, m, sizeof m, deadline, who, eb);
  }
  if (res != koloSuccess) {
    sock_close(c);
    return res;
  }
  *comm = c;
  return koloSuccess;
}

/* Reads and checks the hello of an accepted connection; the stream index,
 * or -1 (with the reason in why) when it is no connection of this pipe.
 * The magic and version come first: a peer of another version is named
 * as such even when its hello is shorter. */
static int read_hello(sock_listen *l, int fd, int64_t deadline, char *why, size_t why_len) {
  uint8_t m[KOLO_SOCK_HELLO_BYTES];
  kolo_errbuf tmp = {0};
  int64_t soon = kolo_deadline(HELLO_WAIT_MS);
  if (deadline != 0 && deadline < soon) soon = deadline;
  uint32_t version;
  size_t got = KOLO_NET_HELLO_PREFIX_BYTES;
  int ok = kolo_sock_recv_all(fd, m, got, soon, "a connecting peer", &tmp) == koloSuccess;
  if (ok && kolo_net_hello_prefix(m, got, KOLO_SOCK_HELLO_MAGIC, KOLO_SOCK_HELLO_MAGIC_V1, &version) ==
                KOLO_NET_WIRE_OK) {
    ok = kolo_sock_recv_all(fd, m + got, sizeof m - got, soon, "a connecting peer", &tmp) == koloSuccess;
    got = sizeof m;
  }
  if (!ok) {
    snprintf(why, why_len, "it sent no complete hello");
    return -1;
  }
  kolo_sock_hello h;
  if (kolo_decode_sock_hello(m, got, &h, &version, why, why_len) != KOLO_NET_WIRE_OK) return -1;
  if (!kolo_secret_equal(h.token, l->token, TOKEN_BYTES)) snprintf(why, why_len, "it did not present this pipe's token");
  else if (h.nstreams != (uint32_t)l->nstreams) snprintf(why, why_len, "its stream numbers do not match");
  else return (int)h.index;
  return -1;
}

static koloResult_t sock_accept(void *lcomm, int64_t deadline, int timeout_ms, const char *who,
                                void **comm, kolo_errbuf *eb) {
  sock_listen *l = lcomm;
  sock_comm *c = comm_new(0, l->nstreams, who);
  if (c == NULL) return kolo_error(eb, koloSystemError, "out of memory accepting %s", who);
  int have = 0;
  koloResult_t res = koloSuccess;
  while (have <= l->nstreams && res == koloSuccess) {
    struct pollfd p = {l->fd, POLLIN, 0};
    int n = kolo_poll(&p, 1, deadline);
    if (n < 0) {
      res = kolo_syserror(eb, errno, "poll on the network listener for %s failed", who);
      break;
    }
    if (n == 0) {
      res = kolo_error(eb, koloTimeout,
                       "%s did not open its %d network connection(s) within %d ms (%d arrived)", who,
                       l->nstreams + 1, timeout_ms, have);
      break;
    }
    struct sockaddr_storage from;
    int fd = -1;
    res = kolo_sock_accept(l->fd, &from, eb, &fd);
    if (res != koloSuccess || fd < 0) continue;
    char why[160] = "";
    int idx = read_hello(l, fd, deadline, why, sizeof why);
    int *slot = idx < 0 ? NULL : idx == 0 ? &c->ctrl_fd : &c->fds[idx - 1];
    if (slot == NULL || *slot >= 0) {
      char a[80];
      kolo_addr_str(&from, a, sizeof a);
      KOLO_WARN("refused a network connection from %s while waiting for %s: %s", a, who,
                slot ? "it repeated a stream" : why);
      close(fd);
      continue;
    }
    *slot = fd;
    have++;
  }
  if (res != koloSuccess) {
    sock_close(c);
    return res;
  }
  *comm = c;
  return koloSuccess;
}

/* ---- data ------------------------------------------------------------------ */

/* How many streams carry a region of len bytes. */
static int parts_of(size_t len, int nstreams) {
  size_t k = len / MIN_PART_BYTES;
  return k < 1 ? 1 : k > (size_t)nstreams ? nstreams : (int)k;
}
static size_t part_lo(size_t len, int s, int n) { return len / (size_t)n * (size_t)s; }
static size_t part_hi(size_t len, int s, int n) {
  return s == n - 1 ? len : len / (size_t)n * (size_t)(s + 1);
}

/* A peer that closes or resets is reported without logging: the proxy
 * decides whether that is a failure (a sender that finished and left is
 * none).  Other errors are logged as errors. */
static koloResult_t fail(sock_comm *c, kolo_errbuf *eb, int err, int eof) {
  c->failed = 1;
  if (!eof && err != EPIPE && err != ECONNRESET)
    return kolo_syserror(eb, err, "the network connection to %s failed", c->who);
  if (eof) return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection", c->who);
  return kolo_error_quiet(eb, koloRemoteError, "%s closed its network connection (%s)", c->who, strerror(err));
}

/* Asked again after a failure (the sentence was given then): no log. */
static koloResult_t failed_earlier(sock_comm *c, kolo_errbuf *eb) {
  return kolo_error_quiet(eb, koloRemoteError, "the network connection to %s failed earlier", c->who);
}

/* The control channel failed: the data streams go on (a sender that
 * closed may have left a reset on it while its data is still queued). */
static koloResult_t fail_ctrl(sock_comm *c, kolo_errbuf *eb, int err, int eof) {
  int failed = c->failed;
  koloResult_t res = fail(c, eb, err, eof);
  c->failed = failed;
  c->ctrl_gone = 1;
  c->olen = 0;
  return res;
}

/* One sendmsg or recvmsg on stream s: the bytes moved, 0 when it would
 * block or the stream ended (eof set), -1 on failure (*res says why). */
static ssize_t move(sock_comm *c, int s, struct iovec *iov, int niov, koloResult_t *res, kolo_errbuf *eb) {
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = iov;
  m.msg_iovlen = (size_t)niov;
  for (;;) {
    ssize_t k = c->is_send ? sendmsg(c->fds[s], &m, MSG_NOSIGNAL | MSG_DONTWAIT)
                           : recvmsg(c->fds[s], &m, MSG_DONTWAIT);
    if (k > 0) return k;
    if (k == 0 && !c->is_send) {
      /* The other streams may still hold data sent before the close:
       * a request fails only when it needs this stream (test). */
      c->eof[s] = 1;
      return 0;
    }
    if (k == 0) *res = fail(c, eb, EPIPE, 0);
    else if (errno == EINTR) continue;
    else if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    else *res = fail(c, eb, errno, 0);
    return -1;
  }
}

/* Moves the header of request r on stream 0; 1 when it is complete.  The
 * sender sends part 0 in the same call: one segment for a small message,
 * not a lone header first (TCP_NODELAY would send it on its own). */
static int move_header(sock_comm *c, sock_req *r, koloResult_t *res, kolo_errbuf *eb) {
  while (r->hoff < HDR_BYTES) {
    struct iovec iov[2] = {{r->hdr + r->hoff, HDR_BYTES - r->hoff}, {NULL, 0}};
    int niov = 1;
    if (c->is_send) { /* part 0 starts at the region's start; none of it moved yet */
      iov[1] = (struct iovec){r->buf, part_hi(r->len, 0, parts_of(r->len, c->nstreams))};
      niov = iov[1].iov_len > 0 ? 2 : 1;
    }
    ssize_t k = move(c, 0, iov, niov, res, eb);
    if (k <= 0) return 0;
    size_t h = (size_t)k < HDR_BYTES - r->hoff ? (size_t)k : HDR_BYTES - r->hoff;
    r->hoff += h;
    r->off[0] += (size_t)k - h;
  }
  if (c->is_send || r->known) return 1;
  uint32_t len;
  char why[160];
  if (kolo_decode_sock_frame(r->hdr, r->seq, r->cap, &len, why, sizeof why) != KOLO_NET_WIRE_OK) {
    *res = kolo_error(eb, koloRemoteError, "%s %s", c->who, why);
  } else {
    r->len = len;
    r->known = 1;
    return 1;
  }
  c->failed = 1;
  return 0;
}

/* Moves what stream s can of its requests, in order. */
static koloResult_t progress_stream(sock_comm *c, int s, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  while (c->cur[s] != c->tail) {
    sock_req *r = &c->reqs[c->cur[s] % KOLO_NET_MAX_REQS];
    if (s == 0 && !move_header(c, r, &res, eb)) return res;
    if (!r->known) return koloSuccess; /* stream 0 has not read its header yet */
    int k = parts_of(r->len, c->nstreams);
    if (s < k) {
      size_t lo = part_lo(r->len, s, k), hi = part_hi(r->len, s, k);
      while (lo + r->off[s] < hi) {
        struct iovec iov = {r->buf + lo + r->off[s], hi - lo - r->off[s]};
        ssize_t n = move(c, s, &iov, 1, &res, eb);
        if (n <= 0) return res;
        r->off[s] += (size_t)n;
      }
    }
    c->cur[s]++;
  }
  return koloSuccess;
}

static koloResult_t progress(sock_comm *c, kolo_errbuf *eb) {
  if (c->failed) return failed_earlier(c, eb);
  for (int s = 0; s < c->nstreams; s++) {
    koloResult_t res = progress_stream(c, s, eb);
    if (res != koloSuccess) return res;
  }
  return koloSuccess;
}

static koloResult_t post(void *comm, const void *buf, size_t len, uint32_t *id, int *queued,
                         kolo_errbuf *eb) {
  sock_comm *c = comm;
  *queued = 0;
  if (c->failed) return failed_earlier(c, eb);
  if (len > UINT32_MAX)
    return kolo_error(eb, koloInvalidArgument, "a region of %zu bytes is too large for the network "
                      "connection to %s (4 GiB at most)", len, c->who);
  if (c->tail - c->head >= KOLO_NET_MAX_REQS) return koloSuccess;
  sock_req *r = &c->reqs[c->tail % KOLO_NET_MAX_REQS];
  memset(r, 0, sizeof *r);
  r->buf = (char *)buf;
  r->seq = c->tail;
  if (c->is_send) {
    r->len = len;
    r->known = 1;
    kolo_encode_sock_frame(r->hdr, (uint32_t)len, r->seq);
  } else {
    r->cap = len;
  }
  *id = c->tail++;
  *queued = 1;
  return progress(c, eb);
}

static koloResult_t sock_isend(void *comm, const void *buf, size_t len, uint32_t *id, int *queued,
                               kolo_errbuf *eb) {
  return post(comm, buf, len, id, queued, eb);
}

static koloResult_t sock_irecv(void *comm, void *buf, size_t len, uint32_t *id, int *queued,
                               kolo_errbuf *eb) {
  return post(comm, buf, len, id, queued, eb);
}

static koloResult_t sock_test(void *comm, uint32_t id, int *done, kolo_errbuf *eb) {
  sock_comm *c = comm;
  *done = 0;
  koloResult_t res = progress(c, eb);
  if (res != koloSuccess) return res;
  for (int s = 0; s < c->nstreams; s++) {
    if ((int32_t)(c->cur[s] - id) > 0) continue;
    /* Stream s still owes a part.  Ended, it fails the request when the
     * request needs it: stream 0 always, others once the header said so
     * (a part not needed would have been skipped by progress). */
    if (c->eof[s] && (s == 0 || c->reqs[c->cur[s] % KOLO_NET_MAX_REQS].known)) return fail(c, eb, 0, 1);
    return koloSuccess;
  }
  *done = 1;
  if (id == c->head) c->head++;
  return koloSuccess;
}

/* ---- control --------------------------------------------------------------- */

static koloResult_t ctrl_flush(sock_comm *c, kolo_errbuf *eb) {
  size_t done = 0;
  while (done < c->olen) {
    ssize_t k = send(c->ctrl_fd, c->obuf + done, c->olen - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      done += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return fail_ctrl(c, eb, k < 0 ? errno : EPIPE, 0);
  }
  memmove(c->obuf, c->obuf + done, c->olen - done);
  c->olen -= done;
  return koloSuccess;
}

static koloResult_t sock_ctrl_send(void *comm, uint32_t kind, uint32_t value, int *queued,
                                   kolo_errbuf *eb) {
  sock_comm *c = comm;
  *queued = 0;
  if (c->ctrl_gone)
    return kolo_error(eb, koloRemoteError, "the network connection to %s is closed", c->who);
  if (c->olen + CTRL_MSG > sizeof c->obuf) return ctrl_flush(c, eb);
  kolo_encode_sock_ctrl((uint8_t *)c->obuf + c->olen, kind, value);
  c->olen += CTRL_MSG;
  *queued = 1;
  return ctrl_flush(c, eb);
}

static koloResult_t sock_ctrl_recv(void *comm, uint32_t *kind, uint32_t *value, int *got,
                                   kolo_errbuf *eb) {
  sock_comm *c = comm;
  *got = 0;
  if (c->ctrl_gone)
    return kolo_error(eb, koloRemoteError, "the network connection to %s is closed", c->who);
  koloResult_t res = ctrl_flush(c, eb);
  if (res != koloSuccess) return res;
  while (c->ilen < CTRL_MSG) {
    int err = 0;
    ssize_t k = kolo_sock_read_some(c->ctrl_fd, c->ibuf + c->ilen, CTRL_MSG - c->ilen, &err);
    if (k == 0) return koloSuccess;
    if (k < 0) return fail_ctrl(c, eb, err, err == 0);
    c->ilen += (size_t)k;
  }
  kolo_decode_sock_ctrl((const uint8_t *)c->ibuf, kind, value);
  c->ilen = 0;
  *got = 1;
  return koloSuccess;
}

static void sock_ctrl_forget(void *comm) {
  sock_comm *c = comm;
  c->ctrl_gone = 1;
  c->olen = 0;
}

static int sock_pending(void *comm) {
  sock_comm *c = comm;
  if (c->olen > 0 && !c->ctrl_gone) return 1;
  if (!c->is_send || c->failed) return 0;
  for (int s = 0; s < c->nstreams; s++)
    if (c->cur[s] != c->tail) return 1;
  return 0;
}

static int sock_pollfds(void *comm, struct pollfd *pf, int max) {
  sock_comm *c = comm;
  int n = 0;
  if (!c->ctrl_gone && n < max)
    pf[n++] = (struct pollfd){c->ctrl_fd, (short)(POLLIN | (c->olen ? POLLOUT : 0)), 0};
  for (int s = 0; s < c->nstreams && n < max && !c->failed; s++)
    if (c->cur[s] != c->tail && !c->eof[s])
      pf[n++] = (struct pollfd){c->fds[s], c->is_send ? POLLOUT : POLLIN, 0};
  return n;
}

const kolo_net_provider kolo_net_socket = {
    .name = "socket",
    .flags = KOLO_NET_SHORT_SENDS | KOLO_NET_EXACT_POLL,
    .devices = sock_devices,
    .listen = sock_listen_fn,
    .connect = sock_connect,
    .accept = sock_accept,
    .close_listen = sock_close_listen,
    .isend = sock_isend,
    .irecv = sock_irecv,
    .test = sock_test,
    .ctrl_send = sock_ctrl_send,
    .ctrl_recv = sock_ctrl_recv,
    .pending = sock_pending,
    .pollfds = sock_pollfds,
    .ctrl_forget = sock_ctrl_forget,
    .close = sock_close,
};
