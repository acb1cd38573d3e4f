/* net_pipe.h - one end of a net pipe and its turn: what moves its slices,
 * credits and stop word between the connector's control block and a network
 * provider (net.h).  Who takes the turns, and when, is the proxy's business
 * (proxy.h); this file only knows one pipe, under that pipe's lock.
 *
 * Each end has its own control block and slots in local memory, so that
 * executors use them exactly as local / shm pipes:
 *   sender:   the executor fills a slot and bumps its local tail; a turn hands
 *             every slice up to the tail to the provider (its filled bytes,
 *             and the call's signature when the executor left one), and a
 *             credit coming back bumps the local head;
 *   receiver: a slice that arrives is written into its slot by the provider,
 *             its signature into ctrl->sig, then the local tail moves
 *             (kolo_conn_publish, so futex sleepers wake); a turn hands the
 *             executor's head to the provider as a credit.
 * Stop words cross the same way (each end forwards a local stop word once;
 * one that arrives is stored locally, first writer wins, after its mismatch
 * report).  A connection that fails or closes sets the local stop word
 * KOLO_STOP_DEAD_PEER naming the peer, after everything that arrived before
 * the close was delivered.
 */
#ifndef KOLO_TRANSPORT_NET_PIPE_H
#define KOLO_TRANSPORT_NET_PIPE_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "transport/connector.h"
#include "transport/net.h"
#include "transport/net_credit.h"

#define KOLO_NET_PIPE_MAX_FDS (KOLO_NET_MAX_STREAMS + 2)

typedef struct kolo_net_pipe {
  /* set by the transport before kolo_proxy_add */
  const kolo_net_provider *net;
  void *comm;           /* provider connection */
  void *lcomm;          /* receiver: listener until accepted */
  void *mem;            /* control block + slots */
  kolo_conn_ctrl *ctrl;
  char *slots;
  uint32_t nslots;
  size_t slot_bytes;
  int devmem;           /* the slots are GPU memory (GPUDirect RDMA) */
  int is_send, self, peer;
  int flush_ms;         /* bound on the flush at close */
  int polled;           /* the executor is a kernel: the proxy takes every turn (kolo_proxy_post) */
  size_t caller_bytes;  /* the largest slice the executor sends itself; larger: the proxy */
  int send_direct;      /* send end whose provider sends from outside the slot, KOLO_NET_SEND_DIRECT on */
  int flush_dev1;       /* device + 1 whose GPUDirect writes are flushed before tail moves (0: none) */
  char who[96];         /* "rank 3 (10.0.0.2:4711)" */
  /* the turn's state, under mu */
  pthread_mutex_t mu;
  _Atomic unsigned want; /* turns asked for (KOLO_NET_OUT | IN) while mu was held */
  uint32_t posted;       /* sender: slices handed to the provider */
  _Atomic uint32_t credit_sent; /* receiver: head handed to the provider (read without mu by kicks) */
  uint32_t landed;       /* receiver: slices that arrived (the tail to publish) */
  uint32_t arrivals;     /* what the sink was told, counted (a turn that moved) */
  int stop_sent, stop_remote, failed;
  _Atomic uint32_t due;  /* polled pipes: slices posted so far (a running count like tail) */
  kolo_errbuf err;
  /* the proxy's (proxy.c), under its table lock */
  int added;
  int id;                /* slot in the proxy's table */
  uint64_t key;          /* its epoll data: the slot and the slot's generation */
  _Atomic int handed;    /* on the proxy's hand-off list */
  _Atomic int bulk;      /* the proxy moves its output (a slice above the caller's share) */
  _Atomic int lazy;      /* on the list of credits owed lazily (proxy.c; changed under its lock) */
  struct kolo_net_pipe *lazy_next;
  struct kolo_net_pipe *handed_next;
  struct pollfd watched[KOLO_NET_PIPE_MAX_FDS]; /* what the proxy's epoll has of it */
  int nwatched;
} kolo_net_pipe;

/* Binds the provider connection to the pipe's slots and to this engine
 * (net.h's bind); once, after connecting (and GPUDirect registration). */
koloResult_t kolo_net_pipe_bind(kolo_net_pipe *p, kolo_errbuf *eb);

/* A turn that credits the drained slots whatever their number (a receive
 * end credits on its own only when half its slots are drained, or when it
 * is polled). */
#define KOLO_NET_PIPE_PAY (1u << 8)

/* One turn, with mu held: hands the provider what the counters say (slices
 * up to the tail, the head as a credit when it is due, the stop word), then
 * moves bytes in the directions `dir` names (KOLO_NET_OUT, | KOLO_NET_IN to
 * read what arrived; | KOLO_NET_PIPE_PAY).  1 when something moved. */
int kolo_net_pipe_turn(kolo_net_pipe *p, unsigned dir);

/* Sender, with mu held: the executor's next slice on connector c (this
 * pipe's send end), `len` bytes at src outside its slot (the caller's
 * buffer).  What the provider takes now goes from src; the rest is copied
 * into the slot; the tail is published; then a turn as above (OUT).  src is
 * free again on return.  1 when something moved. */
int kolo_net_pipe_turn_from(kolo_net_pipe *p, kolo_connector *c, const void *src, size_t len);
/* With mu held: 1 when the pipe cannot be left to its executor's turns: it
 * is polled, output is queued, slices wait to be handed over, or its stop
 * word has to go out. */
int kolo_net_pipe_needs_proxy(kolo_net_pipe *p);

/* With mu held: 1 while a polled pipe has posted slices outstanding that
 * only its counters show (the proxy keeps looking; see proxy.h). */
int kolo_net_pipe_hot(kolo_net_pipe *p);

/* With mu held: 1 once what the pipe has to send is out (its data up to the
 * tail and its stop word; only the stop word once the pipe stopped). */
int kolo_net_pipe_flushed(kolo_net_pipe *p);

/* Bytes of the newest slice the executor filled (send ends). */
static inline size_t kolo_net_pipe_last_bytes(const kolo_net_pipe *p) {
  uint32_t tail = atomic_load_explicit(&p->ctrl->tail, memory_order_relaxed);
  size_t len = p->ctrl->filled[(tail - 1) % KOLO_CONN_MAX_SLOTS];
  return len == 0 || len > p->slot_bytes ? p->slot_bytes : len;
}

#endif
