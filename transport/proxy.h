/* proxy.h - the network proxy: one progress thread per process that moves
 * the slots of net pipes (DESIGN.md, "Connectors": net).
 *
 * Each end of a net pipe has its own control block and slots in local
 * memory, so executors use them exactly as local / shm pipes:
 *   sender:   the executor fills a slot and bumps its local tail; the proxy
 *             sees the tail move and sends the slot's bytes to the peer; a
 *             credit (the receiver's head) coming back bumps the local head.
 *   receiver: the proxy receives slots in order into local slots and bumps
 *             the local tail (kolo_conn_publish, so futex sleepers wake);
 *             when the executor bumps head the proxy sends it as a credit.
 * Stop words cross the same way (each end forwards a local stop word once;
 * one that arrives is stored locally, first writer wins).  A connection
 * that fails or closes sets the local stop word KOLO_STOP_DEAD_PEER naming
 * the peer, after everything that arrived before the close was delivered.
 *
 * A sender pipe sends only the bytes the executor filled in each slot
 * (ctrl->filled, see connector.h), so a small message costs a small send,
 * where its provider allows (KOLO_NET_SHORT_SENDS).
 *
 * The thread starts with the first pipe and stops with the last one.  When
 * nothing moved for a few sched_yield()s it sleeps in poll() on the pipes'
 * sockets and its doorbell, an eventfd: it arms each pipe's ctrl->doorbell,
 * and an executor that then moves a counter or stops rings it
 * (kolo_conn_ring), so new work wakes it at once instead of at a polling
 * period.  The sleep is bounded (50 ms; 1 ms while a broken connection is
 * in its grace period or a provider's fds may miss an event, without
 * KOLO_NET_EXACT_POLL) for whatever neither announces.
 *
 * Blocked executors lend a hand: a host executor waiting on a net pipe
 * takes the proxy's turn itself (kolo_proxy_progress, through the net
 * transport's `progress` op) every few polls while it spins, unless the
 * proxy thread holds it; so a small message's hop needs no thread wake-up
 * on either side while the ranks are busy with a call (2-rank 8-byte
 * all-reduce over loopback TCP: median ~290 us -> ~130-175 us on a 2-core VM).  The
 * thread still moves everything nobody waits for (a call's last sends).
 *
 * Polled pipes (CUDA communicators: the executor is a kernel, which moves
 * the counters in mapped host memory but cannot ring a doorbell).  Whoever
 * launches the kernel posts how many slices it will move through the pipe
 * (kolo_proxy_post, right after the launch); the proxy keeps polling while
 * a polled pipe has posted slices outstanding (sender: not yet sent and
 * completed; receiver: not yet drained and credited), and sleeps as above
 * once none has, or once the pipe stopped.  A post rings the pipe's
 * doorbell, so a sleeping proxy wakes for it.
 */
#ifndef KOLO_TRANSPORT_PROXY_H
#define KOLO_TRANSPORT_PROXY_H

#include <stdint.h>

#include "transport/connector.h"
#include "transport/net.h"

/* Most control messages of one record (a mismatch report: 14 words and
 * its stop word). */
#define KOLO_PROXY_RECORD_MSGS 16

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
  int is_send, self, peer;
  int flush_ms;         /* bound on the flush at close */
  int polled;           /* the executor rings no doorbell: see kolo_proxy_post */
  int flush_dev1;       /* device + 1 whose GPUDirect writes are flushed before tail moves (0: none) */
  char who[96];         /* "rank 3 (10.0.0.2:4711)" */
  /* proxy state (under the proxy's lock) */
  int added;
  uint32_t posted, completed;
  uint32_t ids[KOLO_NET_MAX_REQS];
  uint32_t credit_sent;
  int stop_sent, stop_remote, failed, ctrl_gone;
  int64_t grace_until;  /* the connection broke: when to call the peer dead */
  _Atomic uint32_t due; /* polled pipes: slices posted so far (a running count like tail) */
  /* Control messages queued in order (proxy_records.c): a call signature's
   * words and its SIG, a mismatch report's words and its STOP. */
  uint32_t outq[KOLO_PROXY_RECORD_MSGS][2];
  int outq_n, outq_at;
  uint32_t in_words[KOLO_PROXY_RECORD_MSGS]; /* words of the record coming in */
  int in_n;
  int stop_queued;
  kolo_errbuf err;
  struct kolo_net_pipe *next;
} kolo_net_pipe;

/* Hands the pipe to the proxy (starting its thread if needed). */
koloResult_t kolo_proxy_add(kolo_net_pipe *p, kolo_errbuf *eb);
/* Flushes what the pipe still has to send (its data up to the tail, its
 * stop word; only the stop word once the pipe stopped: its data is moot),
 * until `deadline` (kolo_now_ms; 0: p->flush_ms from now), then takes it
 * back from the proxy (stopping the thread with the last pipe).  The
 * proxy no longer touches the pipe when this returns; a peer that never
 * reads (stopped, cut off) costs at most the deadline. */
void kolo_proxy_remove(kolo_net_pipe *p, int64_t deadline);
/* One turn over every pipe from the calling thread, unless the proxy
 * thread (or another caller) is taking its turn now: a blocked executor's
 * way to move its messages without waiting for the proxy to wake. */
void kolo_proxy_progress(void);
/* Turns kolo_proxy_progress took in this process so far (tests). */
uint64_t kolo_proxy_caller_turns(void);
/* A polled pipe will move `slices` more slices (posted by the thread that
 * launched the kernel moving them): the proxy polls the pipe until they
 * have gone through. */
void kolo_proxy_post(kolo_net_pipe *p, uint32_t slices);

#endif
