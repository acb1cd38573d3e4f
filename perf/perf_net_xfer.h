/* perf_net_xfer.h - the timed rounds of `kolo-perf net` (perf_net.h),
 * driving a net provider (transport/net.h) as kolo's net pipes do: each side
 * binds a ring of buffers to its end of each connection, a message is a
 * slice, and the receiver credits what it drained when a net pipe would.
 * A round ends settled, so that the next size may bind other buffers.  How
 * the figures are taken and checked: docs/benchmarking.md. */
#ifndef KOLO_PERF_NET_XFER_H
#define KOLO_PERF_NET_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "transport/net.h"

/* Says "kolo-perf net: <fmt>" on stderr, a line; returns -1. */
int net_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A ring of n buffers of one size, one after another, filled with the
 * pattern; net_bufs_fini frees it, also after a failed init. */
typedef struct {
  char *base;
  int n;
  size_t bytes;
} net_bufs;

int net_bufs_init(net_bufs *b, int n, size_t bytes);
void net_bufs_fini(net_bufs *b);

/* One end of one provider connection: the sink's counters and this side's. */
typedef struct {
  void *comm;
  uint32_t base;     /* the step of the round's first message */
  uint32_t next;     /* sender: messages handed over; receiver: messages drained */
  uint32_t landed;   /* receiver: messages that arrived */
  uint32_t head;     /* sender: the receiver's last credit */
  uint32_t credited; /* receiver: the head handed over */
  int stopped;       /* the peer sent a stop word */
  net_bufs *ring;    /* bound for the round */
} net_end;

typedef struct {
  const kolo_net_provider *net;
  net_end fwd, back; /* client -> server, server -> client */
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

/* One round at this side, its rings holding the messages in flight at most
 * (latency: 2 or more): the client's send ring or the server's receive ring
 * for bandwidth one way, both for --bidir and latency.  0, or -1 (said). */
int net_round_run(net_link *l, net_round *r, int server, net_bufs *send, net_bufs *recv);

#endif
