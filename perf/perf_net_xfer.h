/* perf_net_xfer.h - the timed rounds of `kolo-perf net` (perf_net.h): one
 * round of the bandwidth test or of the latency test at one size, each side
 * calling its half, driving a net provider (transport/net.h) directly.
 *
 * Bandwidth (ib_write_bw's shape): the client sends `iters` messages of
 * `bytes` on the forward connection, keeping up to `window` in flight, out
 * of a pool of `window` buffers; the server receives them into its own pool
 * of `window` buffers.  The client's clock runs from the server's "ready"
 * (every receive of the first window posted) to the server's "got all" on
 * the setup socket, so the time covers delivery, not only hand-off to the
 * kernel or the NIC.
 *
 * Both ways (--bidir, ib_write_bw -b's shape): each side sends `iters`
 * messages on its own connection and receives the other's at the same
 * time; the time runs until both directions are done.
 *
 * Latency (ib_write_lat's shape): ping-pong, one message each way per
 * iteration (client -> server on the forward connection, back on the other);
 * the client times each round trip (from posting its send to the answer's
 * arrival); half of it is the latency.  Each side keeps `window` - 1
 * receives posted ahead (as the proxy keeps its ring of slots posted) and
 * posts the next one right after its send.
 *
 * Payload check: every message carries a pattern of 64-bit words that
 * depends on its buffer (seed) and, in its first and last word, on its
 * iteration number, so stale or misplaced data shows.  Rounds with
 * full = 1 (warm-up) poison each receive buffer before posting it and check
 * every byte; timed rounds check the first and last word and one word in
 * every 4 KiB.  Wrong bytes are counted, never fatal.
 */
#ifndef KOLO_PERF_NET_XFER_H
#define KOLO_PERF_NET_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "transport/net.h"

typedef struct {
  const kolo_net_provider *net;
  void *fwd;      /* client -> server: the client's send end, the server's receive end */
  void *back;     /* server -> client */
  int oob;        /* the setup socket: handshakes of each round */
  int timeout_ms; /* bound on any wait for the peer */
  const char *who;
  int busy;       /* never sleep in poll(): spin on test() as perftest does */
} net_link;

typedef struct {
  size_t bytes;
  uint64_t iters;
  int window;     /* messages in flight (bandwidth); buffers in each pool (latency: in
                   * the receive pool, >= 2) */
  int full;       /* poison and check every byte (untimed rounds) */
  int timed;      /* the client records times */
  double *rtt_us; /* latency, client: one round trip per iteration (iters entries) */
} net_round;

typedef struct {
  double seconds;  /* bandwidth, client: from "ready" to "got all" */
  uint64_t wrong;  /* bytes found wrong, both sides (the server's come back to the client) */
} net_round_result;

/* Buffers of one size: allocated by net_bufs_init, filled with the pattern. */
typedef struct {
  char **pool;
  int n;
  size_t bytes;
} net_bufs;

int net_bufs_init(net_bufs *b, int n, size_t bytes);
void net_bufs_fini(net_bufs *b);

/* 0, or -1 with a message on stderr (a failed provider call, a timeout, a
 * peer gone). */
int net_bw_client(const net_link *l, const net_round *r, net_bufs *send, net_round_result *out);
int net_bw_server(const net_link *l, const net_round *r, net_bufs *recv);
/* --bidir: both sides send and receive at once (bandwidth per direction). */
int net_bw_bidir(const net_link *l, const net_round *r, int server, net_bufs *send, net_bufs *recv,
                 net_round_result *out);
int net_lat_client(const net_link *l, const net_round *r, net_bufs *send, net_bufs *recv,
                   net_round_result *out);
int net_lat_server(const net_link *l, const net_round *r, net_bufs *send, net_bufs *recv);

/* The setup socket's 16-byte messages. */
enum { NET_MSG_PLAN = 1, NET_MSG_READY = 2, NET_MSG_DONE = 3 };
int net_msg_send(const net_link *l, uint32_t tag, uint64_t value);
int net_msg_recv(const net_link *l, uint32_t tag, uint64_t *value);

#endif
