/* net.h - network providers behind the proxy (DESIGN.md, "Connectors": net).
 *
 * A provider is an ops table, the way libfabric's providers or NCCL's net
 * plugins are: it finds its devices, listens, connects and accepts, and
 * moves buffer regions (slots) one way over a connection, with a small
 * control channel both ways (credits, stop words).  The proxy (proxy.h) is
 * its only user; executors never see it.  Two backends: TCP sockets
 * (net_socket.c) and ibverbs RDMA (net_ib.c, built with libibverbs).
 *
 * Connection setup: the receiver listens and writes a handle (address plus
 * a random per-pipe token) that travels to the sender in the pipe
 * descriptor over the bootstrap (whose connections carry the job secret);
 * the sender connects and presents the token; accept drops connections that
 * do not present it.
 *
 * Data: isend (sender) / irecv (receiver) post one region each; regions
 * match in posting order.  A sent region may be shorter than the receive
 * it meets (the proxy sends only the filled part of a slot; the receiver's
 * executor knows how much it needs): its bytes land at the start of the
 * receive, the rest is left as it was.  Longer is an error.  test()
 * progresses the connection and says whether request `id` finished (the
 * sender's buffer may be reused; the receiver's holds the bytes).  Requests
 * finish in order and are tested in order.  Control: 8-byte messages
 * (kind, value), either direction, delivered in order.
 *
 * Errors name the peer ("rank 3 (10.0.0.2:41234) closed its connection").
 * All calls are non-blocking except listen / connect / accept, which wait
 * until the deadline.  One connection is used by one thread at a time.
 */
#ifndef KOLO_TRANSPORT_NET_H
#define KOLO_TRANSPORT_NET_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"

#define KOLO_NET_HANDLE_BYTES 64
#define KOLO_NET_MAX_STREAMS 8
/* Requests one connection may have in flight (>= the largest KOLO_NSLOTS). */
#define KOLO_NET_MAX_REQS 64

/* What the receiver publishes for the sender (opaque to everyone else). */
typedef struct {
  unsigned char bytes[KOLO_NET_HANDLE_BYTES];
} kolo_net_handle;

enum kolo_net_ctrl_kind {
  KOLO_NET_CTRL_CREDIT = 1, /* receiver -> sender: its head (slots drained) */
  KOLO_NET_CTRL_STOP = 2,   /* either way: a connector stop word */
  /* Records longer than one message (transport/proxy_records.c): words of
   * a record, then the message that says what they were. */
  KOLO_NET_CTRL_WORD = 3,   /* one 32-bit word of the record being sent */
  KOLO_NET_CTRL_SIG = 4     /* sender -> receiver: the words are the call
                             * signature of the slice of step `value` */
  /* A STOP whose reason is a mismatch follows the words of its report. */
};

/* What a provider can do beyond the table's contract (its `flags`). */
enum {
  /* An isend may be shorter than the irecv it meets (see Data above);
   * without it the proxy sends whole slots. */
  KOLO_NET_SHORT_SENDS = 1u << 0,
  /* The fds of pollfds() become ready for every event the provider has
   * (no completion can slip in unannounced): the proxy may sleep up to
   * 50 ms on them; without it the proxy looks again every 1 ms. */
  KOLO_NET_EXACT_POLL = 1u << 1,
  /* Waking up costs more than a completion takes to come (a kernel-bypass
   * completion queue: on soft-RoCE in a VM a sleeping vCPU wakes in ms,
   * a half round trip takes ~50 us): `kolo-perf net` polls without
   * sleeping while its side sends (a send is in flight, or one finished
   * less than KOLO_NET_SPIN_MS ago: an answer is due), up to
   * KOLO_NET_SPIN_MS after the last progress; a side that only receives
   * sleeps as before, leaving the CPU to whoever moves the bytes.  The
   * proxy does not (yet): it shares the cores with the executors, and in
   * the 2-vCPU soft-RoCE guest a proxy spinning so made the 2-rank
   * collectives of tests/rdma slower (1.3-2.3 s instead of 1.0-1.6 s). */
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
  /* *id: the request, or *queued = 0 when too many are in flight (retry). */
  koloResult_t (*isend)(void *comm, const void *buf, size_t len, uint32_t *id, int *queued,
                        kolo_errbuf *eb);
  koloResult_t (*irecv)(void *comm, void *buf, size_t len, uint32_t *id, int *queued,
                        kolo_errbuf *eb);
  koloResult_t (*test)(void *comm, uint32_t id, int *done, kolo_errbuf *eb);
  /* *queued = 0 when the control queue is full (retry later). */
  koloResult_t (*ctrl_send)(void *comm, uint32_t kind, uint32_t value, int *queued,
                            kolo_errbuf *eb);
  /* *got = 1 with a message, 0 when none is there. */
  koloResult_t (*ctrl_recv)(void *comm, uint32_t *kind, uint32_t *value, int *got,
                            kolo_errbuf *eb);
  /* 1 while output (data or control) is still queued in user space. */
  int (*pending)(void *comm);
  /* The fds and events worth waking for now (at most max); the count. */
  int (*pollfds)(void *comm, struct pollfd *pf, int max);
  /* Stops watching the control channel (after its peer went away). */
  void (*ctrl_forget)(void *comm);
  void (*close)(void *comm);
  /* Optional (NULL: the provider cannot): registers [buf, buf + len) of
   * device memory, exported as the dma-buf fd (from offset), with the
   * connection, so that later isend / irecv of regions inside it go
   * straight from and to GPU memory (GPUDirect RDMA).  The fd may be closed
   * after the call.  Fails, saying why, where the NIC or its driver cannot
   * take dma-bufs; the caller then stays with staging. */
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
