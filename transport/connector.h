/* connector.h - a one-way pipe between two ranks, the same shape for every
 * transport (docs/dev/architecture.md, "Connectors").
 *
 * nslots slots of slot_bytes each, a `tail` the sender bumps after filling a
 * slot and a `head` the receiver bumps after draining one.  The sender may
 * fill slot `step` when step - head < nslots; the receiver may drain it when
 * tail - step > 0.  Counters are 32-bit and wrap: compare differences.
 * Data is written before the counter with release order and read after it
 * with acquire order, which is enough on host memory within a host
 * (processes or threads).  A waiter that has spun long enough registers in
 * `*_waiters` and sleeps on the counter's futex; the writer wakes it.
 *
 * The control block and the slots live in the receiver's memory (plain
 * memory for ranks of one process, POSIX shared memory across processes).
 * `abort` is written by either end when it stops for good (error, abort,
 * dead peer) so that the other end fails fast and learns why.
 */
#ifndef KOLO_TRANSPORT_CONNECTOR_H
#define KOLO_TRANSPORT_CONNECTOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "kolo.h"
#include "transport/call_sig_types.h"

#define KOLO_CACHELINE 64

/* Why an end stopped: stored in ctrl->abort as (reason << 24) | (rank + 1). */
enum kolo_stop_reason {
  KOLO_STOP_ERROR = 1,     /* a call failed on that rank */
  KOLO_STOP_ABORT = 2,     /* koloCommAbort on that rank */
  KOLO_STOP_DEAD_PEER = 3, /* that rank saw a peer die (rank = the dead one) */
  KOLO_STOP_TIMEOUT = 4,
  KOLO_STOP_PEER_LEFT = 5,  /* that rank saw a peer leave (destroy its communicator) */
  KOLO_STOP_PEER_EXITED = 6, /* that rank saw a peer exit without destroying it */
  KOLO_STOP_MISMATCH = 7     /* that rank found that two ranks' calls differ */
};

/* Most slots a connector may have (KOLO_NSLOTS). */
#define KOLO_CONN_MAX_SLOTS 64

/* Call signatures a sender may have written ahead of its receiver on a
 * pipe whose ends share the control block (kolo_connector.sig_box). */
#define KOLO_SIG_BOXES 2

typedef struct kolo_conn_ctrl {
  _Alignas(KOLO_CACHELINE) _Atomic uint32_t tail;
  _Atomic uint32_t tail_waiters;
  /* Shared-control pipes (shm, plain memory): the signature of the
   * sender's k-th call on this pipe, at [k % KOLO_SIG_BOXES], written with
   * that call's first slice before tail moves.  It sits on tail's cache
   * line, which both ends touch for every slice anyway, so checking calls
   * costs no extra line transfer (a signature on a line of its own cost
   * 10-18% of an 8 B - 512 B all-reduce between 2 processes). */
  kolo_call_sig sig_box[KOLO_SIG_BOXES];
  _Alignas(KOLO_CACHELINE) _Atomic uint32_t head;
  _Atomic uint32_t head_waiters;
  /* Shared-control pipes: calls whose signature the receiver has
   * compared; the sender writes box k only once sig_seen >= k - 1
   * (kolo_conn_can_send). */
  _Atomic uint32_t sig_seen;
  _Alignas(KOLO_CACHELINE) _Atomic uint32_t abort;
  _Atomic uint32_t refs; /* ends still attached (plain-memory transport) */
  /* Net pipes (transport/proxy.h): the proxy's eventfd + 1, rung once
   * when this end stops (kolo_conn_stop), so that the proxy sends the stop
   * word to the peer; 0 otherwise.  Only in a pipe end's own memory (net
   * pipes), never shared. */
  _Atomic int32_t doorbell;
  /* Bytes the sender filled in the slot of step s, at [s % KOLO_CONN_MAX_SLOTS],
   * written before tail moves past s: a net pipe sends only those (the
   * last slice of a chunk, small messages).  0: the whole slot. */
  _Alignas(KOLO_CACHELINE) uint32_t filled[KOLO_CONN_MAX_SLOTS];
  /* The call of the slice of step s, at [s % KOLO_CONN_MAX_SLOTS], when it
   * is the first slice of its call on this pipe; written before tail moves
   * past s, like `filled`.  A net pipe carries it with the slice to the
   * other end's block, where it is written before tail moves too; there
   * `set` is read and cleared with atomics (__atomic builtins: the
   * receiver's engine writes it while the executor may poll). */
  kolo_call_sig sig[KOLO_CONN_MAX_SLOTS];
  /* A mismatch report for the stop word KOLO_STOP_MISMATCH: mismatch_state
   * 0 none, 1 being written, 2 readable. */
  _Atomic uint32_t mismatch_state;
  kolo_call_mismatch mismatch;
} kolo_conn_ctrl;

/* Bytes before the first slot: the control block, padded to 4 KiB so that
 * slots start page aligned. */
#define KOLO_CONN_CTRL_BYTES 4096
_Static_assert(sizeof(kolo_conn_ctrl) <= KOLO_CONN_CTRL_BYTES, "the control block must fit its page");
_Static_assert(offsetof(kolo_conn_ctrl, sig_box) + sizeof(((kolo_conn_ctrl *)0)->sig_box) <= KOLO_CACHELINE,
               "call signatures ride on tail's cache line");

struct kolo_transport;

typedef struct kolo_connector {
  kolo_conn_ctrl *ctrl;
  char *slots;
  uint32_t nslots;
  uint32_t step; /* this end's count of slots filled (send) or drained (recv) */
  /* The executor's local number (+ 1) of the last call that sent (stamped
   * its signature) or received (checked it) on this end; this end only. */
  uint32_t sig_call;
  /* Receive ends whose signatures another party writes (net pipes: the
   * engine, with the slice, before tail): the receiver waits for one on the
   * first slice of each call, and clears it after the comparison, so that
   * the place is empty for a later step.  0 where the sender writes it
   * before tail. */
  int sig_late;
  /* 1 where both ends share the control block (shm, plain memory): the
   * signatures travel in ctrl->sig_box, and sig_calls counts the calls
   * this end stamped (send) or compared (recv).  0: in ctrl->sig[]. */
  int sig_box;
  uint32_t sig_calls;
  /* Send ends: ctrl->head and ctrl->sig_seen as last read.  Both only
   * grow, so an old value is a safe bound: the sender reloads them (one
   * line the receiver wrote, a transfer between cores) only when the old
   * values would make it wait.  Zero at connect, like the counters. */
  uint32_t seen_head, seen_sig;
  size_t slot_bytes;
  int peer;      /* rank at the other end */
  int is_send;
  int channel;
  const struct kolo_transport *transport;
  void *mem;       /* what this end maps or owns */
  size_t mem_bytes;
  int64_t close_by; /* flush no later than this at close (kolo_now_ms; 0: the transport's bound) */
  /* Receive ends whose transport credits in batches (kick): the executor
   * drained slots since it last kicked this end (its own bookkeeping). */
  int credit_owed;
  char name[64];   /* shm segment name while it exists (receiver) */
  /* Device connectors (transport p2p): ctrl is NULL, `slots` and these
   * words are in the receiver's GPU memory, used by kernels only (see
   * kernels/cuda_exec.h); the host touches them through the CUDA API. */
  struct {
    uint32_t *tail, *head, *stop; /* control words (KOLO_DEV_CTRL_* offsets) */
    char *ll_slots;               /* LL region: nslots * ll_slot_bytes */
    uint32_t ll_slot_bytes;
    int cuda_dev;                 /* device of this end's rank */
    void *share;                  /* same-process pipes: the refcounted owner record */
    int ipc_mapped;               /* mem was opened with cudaIpcOpenMemHandle */
  } dev;
} kolo_connector;

/* Layout of a device connector's memory: control words each on its own
 * 128-byte line (the sender polls head, the receiver tail, across NVLink or
 * PCIe), then the SIMPLE slots, then the LL region. */
#define KOLO_DEV_CTRL_TAIL 0
#define KOLO_DEV_CTRL_HEAD 128
#define KOLO_DEV_CTRL_STOP 256

/* Futex helpers on a counter (shared mappings work across processes). */
void kolo_futex_wait(_Atomic uint32_t *word, uint32_t seen, int timeout_us);
void kolo_futex_wake(_Atomic uint32_t *word);

/* Rings the doorbell eventfd (connector.c). */
void kolo_doorbell_ring(int fd);
/* After this end stored its stop word: wakes the proxy of a net pipe end.
 * One ring per arming: the exchange disarms it. */
static inline void kolo_conn_ring(kolo_conn_ctrl *ctrl) {
  if (atomic_load_explicit(&ctrl->doorbell, memory_order_seq_cst) == 0) return;
  int32_t fd1 = atomic_exchange_explicit(&ctrl->doorbell, 0, memory_order_seq_cst);
  if (fd1 > 0) kolo_doorbell_ring(fd1 - 1);
}

/* Publish a counter value and wake sleepers. */
static inline void kolo_conn_publish(_Atomic uint32_t *counter, _Atomic uint32_t *waiters,
                                     uint32_t value) {
  /* seq_cst store then seq_cst load, against the sleeper's seq_cst
   * increment of waiters then load of the counter: one of the two sides
   * sees the other (no lost wake-up). */
  atomic_store_explicit(counter, value, memory_order_seq_cst);
  if (atomic_load_explicit(waiters, memory_order_seq_cst) != 0) kolo_futex_wake(counter);
}

/* A sender that shares the control block also needs a free signature box
 * (for any slice, not only a call's first: the receiver frees boxes in the
 * order of calls already sent, so waiting never forms a cycle). */
static inline int kolo_conn_can_send(kolo_connector *c) {
  if ((uint32_t)(c->step - c->seen_head) >= c->nslots) {
    c->seen_head = atomic_load_explicit(&c->ctrl->head, memory_order_acquire);
    if ((uint32_t)(c->step - c->seen_head) >= c->nslots) return 0;
  }
  if (!c->sig_box || c->sig_calls - c->seen_sig < KOLO_SIG_BOXES) return 1;
  c->seen_sig = atomic_load_explicit(&c->ctrl->sig_seen, memory_order_acquire);
  return c->sig_calls - c->seen_sig < KOLO_SIG_BOXES;
}
static inline int kolo_conn_can_recv(const kolo_connector *c) {
  uint32_t tail = atomic_load_explicit(&c->ctrl->tail, memory_order_acquire);
  return (int32_t)(tail - c->step) > 0;
}
/* Whether end c can move its next slice: send (a free slot) or receive
 * (a full one), as it is. */
static inline int kolo_conn_ready(kolo_connector *c) {
  return c->is_send ? kolo_conn_can_send(c) : kolo_conn_can_recv(c);
}
/* Where this end's next call signature goes (send) or comes from (recv):
 * a box on tail's line, or the entry of the current slot. */
static inline kolo_call_sig *kolo_conn_sig_place(const kolo_connector *c) {
  if (c->sig_box) return &c->ctrl->sig_box[c->sig_calls % KOLO_SIG_BOXES];
  return &c->ctrl->sig[c->step % KOLO_CONN_MAX_SLOTS];
}
/* The receiver compared the signature at kolo_conn_sig_place: frees its box. */
static inline void kolo_conn_sig_seen(kolo_connector *c) {
  if (!c->sig_box) return;
  c->sig_calls++;
  atomic_store_explicit(&c->ctrl->sig_seen, c->sig_calls, memory_order_release);
}
static inline char *kolo_conn_slot(const kolo_connector *c) {
  return c->slots + (size_t)(c->step % c->nslots) * c->slot_bytes;
}
/* The slot of this step holds `bytes` (<= slot_bytes) from its start. */
static inline void kolo_conn_sent_bytes(kolo_connector *c, size_t bytes) {
  c->ctrl->filled[c->step % KOLO_CONN_MAX_SLOTS] = (uint32_t)bytes;
  c->step++;
  kolo_conn_publish(&c->ctrl->tail, &c->ctrl->tail_waiters, c->step);
}
static inline void kolo_conn_sent(kolo_connector *c) { kolo_conn_sent_bytes(c, c->slot_bytes); }
static inline void kolo_conn_received(kolo_connector *c) {
  c->step++;
  kolo_conn_publish(&c->ctrl->head, &c->ctrl->head_waiters, c->step);
}

/* Sleeps until this end's blocking counter may have moved, or timeout_us. */
void kolo_conn_sleep(kolo_connector *c, int timeout_us);

/* Marks the pipe as stopped by `rank` for `reason` (first writer wins). */
void kolo_conn_stop(kolo_connector *c, int reason, int rank);
/* Leaves a mismatch report in the pipe for the other end (first writer
 * wins); call before kolo_conn_stop(c, KOLO_STOP_MISMATCH, ...). */
void kolo_conn_report_mismatch(kolo_connector *c, const kolo_call_mismatch *m);
/* The same on a bare control block (the proxy of a net pipe, passing on
 * the report that came with the peer's stop word). */
void kolo_ctrl_report_mismatch(kolo_conn_ctrl *ctrl, const kolo_call_mismatch *m);
/* 1 and *m when the pipe holds a mismatch report. */
int kolo_conn_read_mismatch(const kolo_connector *c, kolo_call_mismatch *m);
/* kolo_conn_read_mismatch on a bare control block. */
int kolo_ctrl_read_mismatch(const kolo_conn_ctrl *ctrl, kolo_call_mismatch *m);
/* 0 when running, else the stored word; see kolo_stop_reason. */
static inline uint32_t kolo_conn_stopped(const kolo_connector *c) {
  return atomic_load_explicit(&c->ctrl->abort, memory_order_acquire);
}

#endif
