/* net_socket.c - the TCP provider (see net.h): its devices, listening,
 * connecting, accepting and closing; the frames are net_socket_io.c's, the
 * connection's state net_socket_conn.h's.
 *
 * Each socket starts with a hello from the sender: magic, wire version,
 * stream index, stream count and the receiving pipe's random 16-byte token.
 * The pipes of a process share one listening socket per address
 * (net_socket_listen.h), which files each connection under the token it
 * presents and drops connections whose hello is wrong, of another version
 * (the log names both), of no pipe, or does not arrive within a second.
 * Hellos are encoded explicitly (net_wire.h).
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
#include "transport/net_listen.h"
#include "transport/socket.h"

#define TOKEN_BYTES KOLO_SOCK_TOKEN_BYTES
_Static_assert(TOKEN_BYTES == KOLO_NET_TOKEN_BYTES && TOKEN_BYTES == KOLO_NET_LISTEN_TOKEN_BYTES,
               "the handle carries the hello's token, the listener files by it");

typedef struct {
  kolo_net_listener *shared;
  struct sockaddr_storage addr;
  uint8_t token[TOKEN_BYTES];
  int nstreams;
} sock_listen;

/* The sender's hello, as the process's listener reads it (net_listen.h). */
static int read_hello(int fd, int64_t soon, void *out, uint8_t *token, uint32_t *nstreams, char *why,
                      size_t why_len) {
  uint8_t m[KOLO_SOCK_HELLO_BYTES];
  size_t got;
  uint32_t version;
  kolo_sock_hello *h = out;
  if (kolo_net_listen_read(fd, soon, m, sizeof m, KOLO_SOCK_HELLO_MAGIC, KOLO_SOCK_HELLO_MAGIC_V1, &got, why,
                           why_len) != 0 ||
      kolo_decode_sock_hello(m, got, h, &version, why, why_len) != KOLO_NET_WIRE_OK)
    return -1;
  memcpy(token, h->token, TOKEN_BYTES);
  *nstreams = h->nstreams;
  return 0;
}

static const kolo_net_hello_kind hello_kind = {"socket", sizeof(kolo_sock_hello), read_hello};

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
  l->nstreams = nstreams_param();
  if (getrandom(l->token, sizeof l->token, 0) != (ssize_t)sizeof l->token) {
    koloResult_t res = kolo_syserror(eb, errno, "getrandom for a pipe token failed");
    free(l);
    return res;
  }
  koloResult_t res = kolo_net_listener_join(local, &hello_kind, l->token, l->nstreams, &l->shared, &l->addr, eb);
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
  kolo_net_listener_leave(l->shared, l->token);
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

static koloResult_t sock_accept(void *lcomm, int64_t deadline, int timeout_ms, const char *who,
                                void **comm, kolo_errbuf *eb) {
  sock_listen *l = lcomm;
  sock_comm *c = comm_new(0, l->nstreams, who);
  if (c == NULL) return kolo_error(eb, koloSystemError, "out of memory accepting %s", who);
  int have = 0;
  koloResult_t res = koloSuccess;
  while (have < l->nstreams && res == koloSuccess) {
    int fd = -1;
    kolo_sock_hello h;
    res = kolo_net_listener_take(l->shared, l->token, deadline, &fd, &h, eb);
    if (res == koloTimeout)
      res = kolo_error(eb, koloTimeout, "%s did not open its %d network connection(s) within %d ms (%d arrived)",
                       who, l->nstreams, timeout_ms, have);
    if (res != koloSuccess) break;
    int idx = (int)h.index;
    if (idx >= l->nstreams || c->fds[idx] >= 0) {
      KOLO_WARN("refused a network connection of %s: it repeated stream %d", who, idx);
      close(fd);
      continue;
    }
    c->fds[idx] = fd;
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
    .send_slice_from = kolo_sock_send_slice_from,
    .send_credit = kolo_sock_send_credit,
    .send_stop = kolo_sock_send_stop,
    .progress = kolo_sock_progress,
    .pending = kolo_sock_pending,
    .unacked = kolo_sock_unacked,
    .pollfds = kolo_sock_pollfds,
    .close = sock_close,
};
