/* net.h - network providers behind net pipes (docs/dev/architecture.md, "Net pipes").
 *
 * A provider is an ops table, the way libfabric's providers or NCCL's net
 * plugins are: it finds its devices, listens, connects and accepts, and then
 * carries one net pipe between its two ends:
 *   sender -> receiver: slices (a step number, a length and, on the first
 *                       slice of a call, the call's signature) and the
 *                       sender's stop word;
 *   receiver -> sender: credits (the receiver's head: slots drained) and the
 *                       receiver's stop word, with its mismatch report.
 * One message per slice: what the receiver needs travels with the bytes
 * (socket: one frame of header and payload; ib: one chain of writes).
 *
 * Slots.  After connecting, each end binds its connection once to its pipe
 * end's ring of slots (bind): the sender's provider reads slice `step` from
 * slot step % nslots, the receiver's writes it there.  The engine above
 * (proxy.h) never sends a slice beyond the credits it got, so a receiver's
 * slot is written only once drained; a sender's slot may be read by the
 * provider until the credit for its step comes back.  A slice may be shorter
 * than a slot (the filled part): its bytes land at the start of the slot.
 *
 * Arrivals are told to the engine through the sink given at bind, from
 * inside the provider's calls (bind, progress, the send calls), in order:
 * slices in step order, each whole, its signature in hand.
 *
 * Connection setup: the receiver listens and writes a handle (address plus
 * a random per-pipe token) that travels to the sender in the pipe
 * descriptor over the bootstrap (whose connections carry the job secret);
 * the sender connects and presents the token; accept drops connections that
 * do not present it.
 *
 * Errors name the peer ("rank 3 (10.0.0.2:41234) closed its connection").
 * A provider reports the peer's end (a close, a reset) only after it told the
 * sink everything that arrived before it.  All calls are non-blocking except
 * listen / connect / accept, which wait until the deadline.  One connection
 * is used by one thread at a time (the engine holds the pipe's lock).
 */
#ifndef KOLO_TRANSPORT_NET_H
#define KOLO_TRANSPORT_NET_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"
#include "transport/call_sig_types.h"

#define KOLO_NET_HANDLE_BYTES 64
#define KOLO_NET_MAX_STREAMS 8
/* Slices one connection may have in flight (>= the largest KOLO_NSLOTS). */
#define KOLO_NET_MAX_REQS 64

/* What the receiver publishes for the sender (opaque to everyone else). */
typedef struct {
  unsigned char bytes[KOLO_NET_HANDLE_BYTES];
} kolo_net_handle;

/* A pipe end's slots, as bind gives them to the provider. */
typedef struct {
  char *slots;       /* nslots * slot_bytes; page aligned */
  uint32_t nslots;   /* 1 .. KOLO_NET_MAX_REQS (net pipes: a power of two; kolo-perf net: any) */
  size_t slot_bytes;
  int devmem;        /* the slots are GPU memory registered with reg_dmabuf */
} kolo_net_ring;

/* Where a provider reports what arrived (the engine's callbacks, with its
 * pipe as ctx).  Called from inside the provider's calls, never later. */
typedef struct {
  void *ctx;
  /* Receiver: slice `step` is whole in its slot (`len` bytes from its start);
   * sig: the call signature that came with it, or NULL. */
  void (*slice)(void *ctx, uint32_t step, uint32_t len, const kolo_call_sig *sig);
  /* Sender: the receiver drained every slot before `head`. */
  void (*credit)(void *ctx, uint32_t head);
  /* Either end: the peer's stop word, with its mismatch report or NULL. */
  void (*stop)(void *ctx, uint32_t word, const kolo_call_mismatch *report);
} kolo_net_sink;

/* Which way progress moves bytes. */
enum {
  KOLO_NET_OUT = 1u << 0, /* what the send calls queued */
  KOLO_NET_IN = 1u << 1   /* what arrived (reads or polls the network) */
};

/* What a provider can do beyond the table's contract (its `flags`). */
enum {
  /* The fds of pollfds() become ready for every event the provider has
   * (no arrival can slip in unannounced): a waiter may sleep up to its
   * bound on them; without it, it looks again every 1 ms. */
  KOLO_NET_EXACT_POLL = 1u << 1,
  /* Waking up costs more than an arrival takes to come (a kernel-bypass
   * completion queue: on soft-RoCE in a VM a sleeping vCPU wakes in ms, a
   * half round trip takes ~50 us): `kolo-perf net` polls without sleeping
   * while its side sends, up to KOLO_NET_SPIN_MS after the last progress. */
  KOLO_NET_SPIN = 1u << 2
};
#define KOLO_NET_SPIN_MS 20

typedef struct kolo_net_provider {
  const char *name;
  unsigned flags; /* KOLO_NET_* above */
  /* Number of devices this provider can use (0: none; eb says why). */
  koloResult_t (*devices)(int *ndev, kolo_errbuf *eb);
  /* Listens on `local` (its port is ignored) and fills *handle.  `dev`
   * picks this end's device among those the provider may use (modulo their
   * number): the transport passes the pipe's channel, so that channels
   * spread over several NICs (ib: the ports KOLO_IB_HCA allows, in order;
   * socket: ignored, the route picks the interface). */
  koloResult_t (*listen)(const struct sockaddr_storage *local, int dev, kolo_net_handle *handle,
                         void **lcomm, kolo_errbuf *eb);
  /* Sender: connects to the listener of `handle` from its device `dev`
   * (as listen); `who` names the peer. */
  koloResult_t (*connect)(const kolo_net_handle *handle, int dev, int64_t deadline, int timeout_ms,
                          const char *who, void **comm, kolo_errbuf *eb);
  /* Receiver: accepts the sender's connection (refusing strays). */
  koloResult_t (*accept)(void *lcomm, int64_t deadline, int timeout_ms, const char *who,
                         void **comm, kolo_errbuf *eb);
  void (*close_listen)(void *lcomm);
  /* Binds the connection to this end's slots and sink, before any other
   * data call (after reg_dmabuf when the slots are GPU memory).  Again
   * only while nothing is in flight either way (every slice sent was
   * credited and delivered, nothing queued), and at both ends as often
   * (the ib provider pairs the sender's k-th bind with the receiver's
   * k-th ring): `kolo-perf net` binds each size's buffers so; step numbers
   * go on.  The slots must stay mapped until the next bind or close. */
  koloResult_t (*bind)(void *comm, const kolo_net_ring *ring, const kolo_net_sink *sink, kolo_errbuf *eb);
  /* Sender: slice `step` (the next one: steps go in order) of `len` bytes
   * (<= slot_bytes) from its slot, with the call's signature when sig is
   * not NULL (copied).  *queued = 0 when the provider has no room now
   * (progress, then retry). */
  koloResult_t (*send_slice)(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig, int *queued,
                             kolo_errbuf *eb);
  /* Optional (NULL: the engine copies into the slot and calls send_slice).
   * As send_slice, but the slice's bytes lie at src, outside the slot: the
   * provider writes what the network takes now straight from src, and
   * copies what it did not take into the slot (at the same offsets) before
   * it returns, so that src is free again on return whatever happened. */
  koloResult_t (*send_slice_from)(void *comm, uint32_t step, size_t len, const kolo_call_sig *sig, const void *src,
                                  int *queued, kolo_errbuf *eb);
  /* Receiver: its head.  A credit not yet on the wire is replaced by a
   * newer one (heads only grow). */
  koloResult_t (*send_credit)(void *comm, uint32_t head, int *queued, kolo_errbuf *eb);
  /* Either end, once: its stop word, after everything sent before it, with
   * the mismatch report when report is not NULL (copied). */
  koloResult_t (*send_stop)(void *comm, uint32_t word, const kolo_call_mismatch *report, int *queued,
                            kolo_errbuf *eb);
  /* Moves what it can in the directions `dir` names (KOLO_NET_OUT | IN),
   * telling the sink what arrived. */
  koloResult_t (*progress)(void *comm, unsigned dir, kolo_errbuf *eb);
  /* 1 while output is queued in user space or not yet acknowledged. */
  int (*pending)(void *comm);
  /* Optional (NULL: nothing to wait for): 1 while bytes this end wrote
   * are still in its kernel's send queue, unacknowledged by the peer's
   * host.  Closing a TCP socket that has unread input resets it and drops
   * what its kernel still held (a sender whose receiver was slow to read,
   * and whose last credits came after its last read): a flush waits for
   * this before close.  A system call: for the flush only. */
  int (*unacked)(void *comm);
  /* The fds and events worth waking for now (at most max); the count. */
  int (*pollfds)(void *comm, struct pollfd *pf, int max);
  void (*close)(void *comm);
  /* Optional (NULL: the provider cannot): registers [buf, buf + len) of
   * device memory, exported as the dma-buf fd (from offset), with the
   * connection, so that its slots may live there (GPUDirect RDMA); called
   * before bind.  The fd may be closed after the call.  Fails, saying why,
   * where the NIC or its driver cannot take dma-bufs; the caller then stays
   * with staging. */
  koloResult_t (*reg_dmabuf)(void *comm, void *buf, size_t len, int fd, uint64_t offset, kolo_errbuf *eb);
} kolo_net_provider;

extern const kolo_net_provider kolo_net_socket;
#ifdef KOLO_HAVE_IBVERBS
extern const kolo_net_provider kolo_net_ib;
#endif

/* Providers by name (net_registry.c). */
/* "socket" or "ib" (ib only where kolo was built with libibverbs); NULL
 * for any other name. */
const kolo_net_provider *kolo_net_find(const char *name);
/* The provider net pipes use: KOLO_NET=ib|socket forces one; unset, ib when
 * its devices() finds a usable device, else socket (that probe runs once
 * per process; the choice is logged at INFO once).  NULL with eb filled
 * when KOLO_NET names no provider; a forced provider without a usable
 * device fails later, in its devices() or connect, saying why. */
const kolo_net_provider *kolo_net_default(kolo_errbuf *eb);

#endif
