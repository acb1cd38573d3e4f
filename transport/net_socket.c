/* net_socket.c - the TCP provider (see net.h): its devices, listening,
 * connecting, accepting and closing; the frames are net_socket_io.c's, the
 * connection's state net_socket_conn.h's.
 *
 * Each socket starts with a hello from the sender: magic, wire version,
 * stream index, stream count and the listener's random 16-byte token.
 * accept() drops connections whose hello is wrong, of another version (the
 * log names both) or does not arrive within a second.  Hellos are encoded
 * explicitly (net_wire.h).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/conn_wire.h"
#include "transport/net_socket_conn.h"
#include "transport/socket.h"

#define TOKEN_BYTES KOLO_SOCK_TOKEN_BYTES
_Static_assert(TOKEN_BYTES == KOLO_NET_TOKEN_BYTES, "the handle carries the hello's token");
#define HELLO_WAIT_MS 1000

typedef struct {
  int fd;
  struct sockaddr_storage addr;
  uint8_t token[TOKEN_BYTES];
  int nstreams;
} sock_listen;

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
  for (int i = 0; i < KOLO_NET_MAX_STREAMS; i++) c->fds[i] = -1;
  snprintf(c->who, sizeof c->who, "%s", who);
  c->stage_cap = is_send ? SOCK_SENDER_STAGE_BYTES : SOCK_STAGE_BYTES;
  c->stage = malloc(c->stage_cap);
  c->parts = nstreams > 1 ? calloc((size_t)nstreams - 1, sizeof *c->parts) : NULL;
  if (c->stage == NULL || (nstreams > 1 && c->parts == NULL)) {
    free(c->stage);
    free(c->parts);
    free(c);
    return NULL;
  }
  return c;
}

static void sock_close(void *comm) {
  sock_comm *c = comm;
  if (c == NULL) return;
  for (int i = 0; i < KOLO_NET_MAX_STREAMS; i++)
    if (c->fds[i] >= 0) close(c->fds[i]);
  free(c->stage);
  free(c->parts);
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
  for (int i = 0; i < c->nstreams && res == koloSuccess; i++) {
    int fd = -1;
    res = kolo_sock_connect(&addr, deadline, timeout_ms, who, eb, &fd);
    if (res != koloSuccess) break;
    c->fds[i] = fd;
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
  while (have < l->nstreams && res == koloSuccess) {
    struct pollfd p = {l->fd, POLLIN, 0};
    int n = kolo_poll(&p, 1, deadline);
    if (n < 0) {
      res = kolo_syserror(eb, errno, "poll on the network listener for %s failed", who);
      break;
    }
    if (n == 0) {
      res = kolo_error(eb, koloTimeout,
                       "%s did not open its %d network connection(s) within %d ms (%d arrived)", who,
                       l->nstreams, timeout_ms, have);
      break;
    }
    struct sockaddr_storage from;
    int fd = -1;
    res = kolo_sock_accept(l->fd, &from, eb, &fd);
    if (res != koloSuccess || fd < 0) continue;
    char why[160] = "";
    int idx = read_hello(l, fd, deadline, why, sizeof why);
    int *slot = idx < 0 ? NULL : &c->fds[idx];
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

const kolo_net_provider kolo_net_socket = {
    .name = "socket",
    .flags = KOLO_NET_EXACT_POLL,
    .devices = sock_devices,
    .listen = sock_listen_fn,
    .connect = sock_connect,
    .accept = sock_accept,
    .close_listen = sock_close_listen,
    .bind = kolo_sock_bind,
    .send_slice = kolo_sock_send_slice,
    .send_credit = kolo_sock_send_credit,
    .send_stop = kolo_sock_send_stop,
    .progress = kolo_sock_progress,
    .pending = kolo_sock_pending,
    .pollfds = kolo_sock_pollfds,
    .close = sock_close,
};
