/* transport.h - connector transports as ops tables, and connection setup.
 *
 * Which transports may carry a pipe follows from the memory kind of the
 * communicator, passed explicitly with every setup (kolo_conn_mem): host
 * communicators try local -> net -> shm (net only connects other hosts, or
 * other processes with KOLO_NET_FORCE=1), CUDA communicators try p2p
 * (device memory, ranks of one host) -> net (other hosts, or other
 * processes with KOLO_NET_FORCE=1; slots staged in pinned host memory).  Within the list the first whose
 * can_connect says yes wins; callers never switch on the transport.
 * Setting up a pipe takes three messages over the bootstrap mesh: the
 * receiver creates the memory and sends a descriptor, the sender attaches
 * and acknowledges, the receiver then drops what let others attach (e.g.
 * unlinks the shm name, so no segment outlives a crash).
 */
#ifndef KOLO_TRANSPORT_TRANSPORT_H
#define KOLO_TRANSPORT_TRANSPORT_H

#include "transport/bootstrap.h"
#include "transport/conn_wire.h"
#include "transport/connector.h"

/* Where a communicator's pipes live.  NULL or memory == koloMemHost: host
 * memory (local, shm).  koloMemCuda: device memory of cuda_dev (p2p), with
 * an LL region of nslots * ll_slot_bytes beside the slots; cuda_stream is a
 * non-blocking stream of that device for setup copies (never the legacy
 * stream, which would wait for kernels that spin on peers). */
typedef struct kolo_conn_mem {
  int memory;             /* koloMemKind_t */
  int cuda_dev;
  uint32_t ll_slot_bytes;
  void *cuda_stream;      /* cudaStream_t */
} kolo_conn_mem;

typedef struct kolo_conn_setup {
  uint64_t job;          /* names shm segments */
  const kolo_peer_info *self, *peer;
  size_t slot_bytes;
  uint32_t nslots;
  uint32_t tag;          /* unique per pipe within the communicator */
  kolo_errbuf *eb;
  const kolo_conn_mem *mem; /* never NULL here (connect.c fills in host) */
  int local_ranks;       /* ranks of the communicator on this rank's host (they share its CPUs) */
} kolo_conn_setup;

/* Ranks of one process: the same process token, pid and host (a child made
 * by a raw clone() keeps the token but not the pid). */
static inline int kolo_same_process(const kolo_peer_info *a, const kolo_peer_info *b) {
  return a->proc_token == b->proc_token && a->pid == b->pid && a->host_hash == b->host_hash;
}

typedef struct kolo_transport {
  const char *name;
  int (*can_connect)(const kolo_conn_setup *s);
  /* receiver: create the pipe's memory, write a descriptor for the sender */
  koloResult_t (*recv_create)(const kolo_conn_setup *s, kolo_connector *c, char *desc);
  /* sender: attach to the receiver's memory */
  koloResult_t (*send_attach)(const kolo_conn_setup *s, kolo_connector *c, const char *desc);
  /* receiver, after the sender acknowledged: finish the connection (NULL:
   * nothing to do; net accepts the sender's sockets here) */
  koloResult_t (*recv_accept)(const kolo_conn_setup *s, kolo_connector *c);
  /* receiver, after the sender attached (or gave up): stop further attaches */
  void (*recv_attached)(kolo_connector *c);
  /* either end: release this end's share */
  void (*close)(kolo_connector *c);
  /* Optional, sender whose setup failed before it attached: remove what the
   * receiver may have made that only this sender would have removed (shm:
   * the segment's name, left for good if the receiver was killed or stopped
   * after making it). */
  void (*send_abandon)(const kolo_conn_setup *s);
  /* Optional (NULL: the counters say it all, as in shared memory).  The
   * executor moved this end's counter: a send end filled a slice (called
   * right after each one), a receive end drained slots (called once at the
   * end of the executor's pass over them).  Net: a small slice goes out
   * from the calling thread, drained slots go back as one credit. */
  void (*kick)(kolo_connector *c);
  /* Optional (NULL: never).  1 when send end c would move its next slice
   * of `bytes` from where it lies (send_from) rather than from its slot:
   * the executor then leaves the slot out of the step's outputs.  Net: a
   * socket pipe, within the calling thread's share (a bulk slice is the
   * proxy's, from the slot), unless KOLO_NET_SEND_DIRECT=0. */
  int (*sends_from)(const kolo_connector *c, size_t bytes);
  /* Where sends_from said 1: the next slice of `bytes` lies at src, outside
   * the slot (the caller's buffer, or a reduction's other output); the
   * transport moves it from there and publishes the tail, as a fill and a
   * kick would.  src is free again on return. */
  void (*send_from)(kolo_connector *c, const void *src, size_t bytes);
  /* Optional (NULL: nothing to do): moves, from the calling thread, what
   * has arrived for this end (net: this pipe's turn).  A blocked executor
   * calls it on every poll while it spins, so a small message costs no
   * thread hand-off on the critical path (as MPI progresses in the caller).
   * 1 when it moved something (a slice landed, a credit came in): the
   * executor then looks again before it sleeps. */
  int (*progress)(kolo_connector *c);
  /* Optional (NULL: kolo_conn_sleep, a futex on the counter): a blocked
   * executor's sleep of at most timeout_us (net: on the pipe's own fds).
   * It must return when what the end waits for arrives: where ranks
   * outnumber CPUs, waits on such a transport yield only wake_yields times
   * before it (kernels/host_exec.h). */
  void (*wait)(kolo_connector *c, int timeout_us);
} kolo_transport;

extern const kolo_transport kolo_transport_local;
extern const kolo_transport kolo_transport_shm;
/* Device memory (CUDA IPC or plain pointers with peer access).  In builds
 * without CUDA it connects nothing. */
extern const kolo_transport kolo_transport_p2p;
/* Other hosts (or, with KOLO_NET_FORCE=1, other processes): local slots at
 * each end, moved by the proxy thread over the network (proxy.h). */
extern const kolo_transport kolo_transport_net;

/* Whether a pipe between these ranks goes over the network: another host,
 * or another process with KOLO_NET_FORCE=1 (the one rule the net and p2p
 * transports and the CUDA planner's protocol choice share). */
int kolo_net_between(const kolo_peer_info *a, const kolo_peer_info *b);
/* The same rule as groups, for whoever prices links (the cost model): equal
 * on ranks that reach each other without the network, their host, or with
 * KOLO_NET_FORCE=1 their process (a 64-bit mix: a clash is a 2^-64 chance). */
uint64_t kolo_link_group(const kolo_peer_info *p);
/* The proxy's record of a net pipe end (proxy.h), NULL for other transports. */
struct kolo_net_pipe *kolo_net_pipe_of(const kolo_connector *c);

/* One pipe to set up: this rank is its sender (is_send) or receiver. */
typedef struct {
  kolo_connector *conn; /* filled on success */
  int peer;
  int is_send;
  int channel;
  uint32_t tag;
} kolo_conn_request;

/* Sets up every requested pipe with the peers doing the matching requests,
 * in the memory `mem` says (NULL: host memory).  On failure every pipe set
 * up so far by this call is closed. */
koloResult_t kolo_connect(kolo_bootstrap *bs, uint64_t job, size_t slot_bytes,
                          uint32_t nslots, const kolo_conn_mem *mem,
                          kolo_conn_request *reqs, int n, kolo_errbuf *eb);
void kolo_connector_close(kolo_connector *c);
/* Closes c, waiting to flush what this end sent no later than `deadline`
 * (kolo_now_ms; 0: the transport's own bound): a communicator closing all
 * its pipes gives them one deadline, so that the waits do not add up. */
void kolo_connector_close_by(kolo_connector *c, int64_t deadline);

/* CUDA IPC's rule (cudaIpcOpenMemHandle): the process that exported device
 * memory may free it only after every process that opened it closed it.
 * A device pipe between processes is memory the receiver exported and the
 * sender imported: teardown closes imported ends, tells their receivers,
 * and frees an exported end only once its sender said so (core's
 * cuda_teardown.c). */
int kolo_connector_ipc_imported(const kolo_connector *c);
int kolo_connector_ipc_exported(const kolo_connector *c);
/* Forgets an end without releasing its memory (an exported block whose
 * importer never confirmed its close: leaked until the process ends rather
 * than freed under a mapping). */
void kolo_connector_abandon(kolo_connector *c);

/* The pipes of one communicator, for kolo_connect_sets. */
typedef struct {
  kolo_bootstrap *bs;
  uint64_t job;
  size_t slot_bytes;
  uint32_t nslots;
  const kolo_conn_mem *mem; /* NULL: host memory */
  kolo_conn_request *reqs;
  int n;
  kolo_errbuf *eb;
  int *made;        /* internal */
  koloResult_t res; /* this set's outcome */
  /* On failure, leave the device pipes this rank exported to other
   * processes open (a peer may have opened them already): the owner's
   * teardown frees them in CUDA IPC's order (core/cuda_teardown.c). */
  int keep_exported;
  int local_ranks;  /* internal (0 at first): counted once per set */
} kolo_conn_set;

/* Sets up the pipes of several communicators of this thread at once (one
 * thread driving several ranks in a group). */
koloResult_t kolo_connect_sets(kolo_conn_set *sets, int nsets);

#endif
