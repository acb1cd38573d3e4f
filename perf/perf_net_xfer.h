/* perf_net_xfer.h - the timed rounds of `kolo-perf net` (perf_net.h): one
 * round of the bandwidth test or of the latency test at one size, each side
 * calling its half, driving a net provider (transport/net.h) directly, as
 * kolo's net pipes do: each side binds a ring of buffers to its end of each
 * connection, a message is a slice (its step's buffer), and the receiver
 * credits what it drained when a net pipe would (a quarter of the sender's
 * window left: kolo_net_pipe_credit_due), and at the end.
 *
 * Bandwidth (ib_write_bw's shape): the client sends `iters` messages of
 * `bytes` on the forward connection, keeping up to `window` uncredited, out
 * of a ring of `window` buffers; the server receives them into its own ring
 * of `window` buffers.  The client's clock runs from the server's "ready"
 * to the last credit, so the time covers delivery and the check, not only
 * hand-off to the kernel or the NIC.
 *
 * Both ways (--bidir, ib_write_bw -b's shape): each side sends `iters`
 * messages on its own connection and receives the other's at the same
 * time; the time runs until both directions are done.
 *
 * Latency (ib_write_lat's shape): ping-pong, one message each way per
 * iteration (client -> server on the forward connection, back on the other);
 * the client times each round trip (from its send to the answer's
 * arrival); half of it is the latency.  Both rings hold `window` buffers, so
 * that credits, which lag by up to all but a quarter of a ring, stay off the
 * round trip.
 *
 * A round ends settled: every message sent was credited and every credit
 * read, so that the next size may bind other buffers (net.h).
 *
 * Payload check: every message carries a pattern of 64-bit words that
 * depends on its buffer (seed) and, in its first and last word, on its
 * iteration number, so stale or misplaced data shows.  Rounds with
 * full = 1 (warm-up) poison each receive buffer before it is credited and
 * check every byte; timed rounds check the first and last word and one word
 * in every 4 KiB.  Wrong bytes are counted, never fatal.
 */
#ifndef KOLO_PERF_NET_XFER_H
#define KOLO_PERF_NET_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "transport/net.h"

/* One end of one provider connection, as kolo-perf drives it (the sink's
 * counters and this side's own). */
typedef struct {
  void *comm;
  uint32_t base;     /* the step of the round's first message */
  uint32_t next;     /* sender: messages handed over; receiver: messages drained */
  uint32_t landed;   /* receiver: messages that arrived */
  uint32_t head;     /* sender: the receiver's last credit */
  uint32_t credited; /* receiver: the head handed over */
  int stopped;       /* the peer sent a stop word */
} net_end;

typedef struct {
  const kolo_net_provider *net;
  net_end *fwd_end;  /* client -> server: the client's send end, the server's receive end */
  net_end *back_end; /* server -> client */
  int oob;           /* the setup socket: handshakes of each round */
  int timeout_ms;    /* bound on any wait for the peer */
  const char *who;
  int busy;          /* never sleep in poll(): spin on test() as perftest does */
} net_link;

typedef struct {
  size_t bytes;
  uint64_t iters;
  int lat;        /* the latency test (else bandwidth) */
  int full;       /* poison and check every byte (untimed rounds) */
  double *rtt_us; /* latency, client: one round trip per iteration (iters entries) */
  double seconds; /* out: bandwidth, client: from "ready" to "got all" */
  uint64_t wrong; /* out: bytes found wrong, both sides (the server's come back to the client) */
} net_round;

/* A ring of n buffers of one size, one after another (the slots bound to a
 * connection): allocated by net_bufs_init, filled with the pattern;
 * net_bufs_fini frees it, also after a failed init. */
typedef struct {
  char *base;
  char **pool; /* pool[k] = base + k * bytes */
  int n;
  size_t bytes;
} net_bufs;

int net_bufs_init(net_bufs *b, int n, size_t bytes);
void net_bufs_fini(net_bufs *b);

/* One round at this side: its rings hold the messages in flight at most
 * (latency: 2 buffers or more).  Bandwidth one way takes one ring (the
 * client's send ring, the server's receive ring; the other NULL), both ways
 * at once (--bidir) and latency both.  0, or -1 with a message on stderr (a
 * failed provider call, a timeout, a peer gone). */
int net_round_run(const net_link *l, net_round *r, int server, net_bufs *send, net_bufs *recv);

#endif
