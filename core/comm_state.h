/* comm_state.h - the communicator: what init builds and every call uses,
 * and its state (ready, failed, stopped; comm_state.c). */
#ifndef KOLO_CORE_COMM_STATE_H
#define KOLO_CORE_COMM_STATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/error.h"
#include "core/algo_memo.h"
#include "core/op.h"
#include "kernels/host_exec.h"
#include "kolo.h"
#include "ring/algo.h"
#include "ring/algo_log.h"
#include "ring/sched_file.h"
#include "ring/schedule.h"
#include "ring/tuning.h"
#include "transport/bootstrap.h"
#include "transport/connector.h"

#define KOLO_MAX_CHANNELS 16

struct kolo_nb_queue;  /* non-blocking progress (core/progress.c) */
struct kolo_cuda_comm; /* device state of koloMemCuda communicators (core/cuda_comm.c) */
struct kolo_mem_kind;  /* operations of a memory kind other than host memory (core/mem_kind.h) */
struct kolo_conn_mem;  /* where pipes live (transport/transport.h) */
struct kolo_redop_table; /* ops made by koloRedOpCreatePreMulSum (core/redop.c) */

struct koloComm {
  int rank, nranks;
  int memory;      /* koloMemKind_t */
  int blocking;
  int timeout_ms;
  int nchannels;
  /* 1 when config.nChannels, KOLO_NCHANNELS, a tuning file or a minimum
   * above 1 fixed nchannels; 0: the default, which the topology may lower
   * (comm_topology.c: net_channels). */
  int channels_fixed;
  /* nchannels and channels_fixed before a tuning file's channels lines
   * raised them (kolo_comm_tuned_channels); untuned_channels 0: they did not. */
  int untuned_channels, untuned_fixed;
  int host_ranks, host_cpus; /* this rank's host: ranks of the comm on it, kolo_host_cpus() */
  int cpus_short;            /* some rank's host has fewer than two CPUs per rank (comm_agree.c) */
  int cpus_crowded;          /* some rank's host has more ranks than CPUs (comm_agree.c) */
  int ranks_per_cpu;         /* the most ranks per CPU on any rank's host, rounded up (comm_agree.c) */
  uint32_t nslots;
  size_t slot_bytes;
  /* Slots of the point-to-point pipes (send/recv and multi-peer programs):
   * there are up to 2 (n - 1) of them per channel, so they get a ring of
   * their own, KOLO_P2P_BUFFSIZE / nslots, never above slot_bytes. */
  size_t p2p_slot_bytes;
  /* The largest chunk of a round on the ring pipes, in bytes, where it is
   * below half their slots: host memory over the network (comm_topology.c);
   * 0 where half the slots is the chunk. */
  size_t chunk_cap;
  size_t net_chunk_bytes; /* KOLO_NET_CHUNK_BYTES: that chunk, set by the user (0: not set) */
  size_t min_channel_bytes;
  int cuda_dev;          /* koloMemCuda: the device asked for (-1: current) */
  size_t ll_threshold;   /* koloMemCuda: KOLO_LL_THRESHOLD: calls of at most this many bytes use LL (0: never) */
  uint32_t proto_off;    /* koloMemCuda: KOLO_PROTO's protocols left out, per collective (core/proto_select.h) */
  uint32_t ll_slot_bytes;/* koloMemCuda: bytes of one LL slot */
  uint64_t job;    /* names shm segments */
  kolo_errbuf err;
  kolo_bootstrap *bs;
  /* Flat rings: channel ch runs on rings[ch % nrings] (ring/topology.h:
   * rotated per channel; one ring when rotating changes nothing). */
  kolo_ring rings[KOLO_MAX_CHANNELS];
  int nrings;
  /* Programs per root/peer slot in the tables below: channel ch uses entry
   * ch % nvariants.  nrings, or nchannels when a schedule file is loaded
   * (its programs are per channel), or 2 on one ring where the double
   * binary tree may run (its odd channels run its second tree; comm.c). */
  int nvariants;
  /* KOLO_SCHEDULE_FILE (core/sched_env.c): the file's programs, proved at
   * init, and the hash every rank compares; NULL and 0 without one. */
  kolo_sched_file *sched;
  uint64_t sched_hash;
  /* Host calls' scratch (KOLO_BUF_SCRATCH, ring/program.h): one arena,
   * grown to the most a call has needed; each task of a call whose program
   * names scratch gets its own part (core/enqueue.c). */
  char *scratch;
  size_t scratch_bytes;
  int nhosts;
  /* Ring pipes, per channel: to its ring's next / from its ring's prev. */
  kolo_connector ring_send[KOLO_MAX_CHANNELS], ring_recv[KOLO_MAX_CHANNELS];
  /* Hierarchical all-reduce (ring/all_reduce_hier.c, ring/algo.h): what
   * the choice depends on; when hier_ready, this rank's three programs and
   * per channel the pipes of its intra-host ring [0] and inter-host ring [1]. */
  kolo_algo_topo algo;
  /* KOLO_TUNING_FILE (core/tune_env.c): the constants algo.tuned points
   * at, and the file's hash every rank compares (0: none); the shapes
   * whose choice was logged (ring/algo_log.h). */
  kolo_tuned tuned;
  uint64_t tuning_hash;
  kolo_algo_logged algo_logged;
  kolo_algo_memo algo_memo; /* the choices made so far, by size (core/algo_memo.h) */
  int hier_ready;
  kolo_program hier_prog[KOLO_HIER_PHASES];
  kolo_connector hier_send[2][KOLO_MAX_CHANNELS], hier_recv[2][KOLO_MAX_CHANNELS];
  /* Point-to-point pipes, made on first use: [peer * nchannels + channel]. */
  kolo_connector *p2p_send, *p2p_recv;
  unsigned char *p2p_send_ready, *p2p_recv_ready;
  /* Programs by collective, root/peer and ring (kolo_program_index),
   * built on first use. */
  kolo_program *programs[KOLO_COLL_NUM];
  unsigned char *program_ready[KOLO_COLL_NUM];
  kolo_exec_owner owner;
  /* Calls run (host executor), for their signatures (kernels/call_sig.h):
   * collectives, which every rank runs in the same order (the signature's
   * seq), and every call (a local number per call, never compared). */
  uint32_t ncollectives, ncalls;
  _Atomic int aborted;
  _Atomic int failed;   /* koloResult_t, sticky: once a call failed the comm is unusable */
  _Atomic int finalized; /* koloCommFinalize was called: calls are refused */
  struct kolo_nb_queue *nbq;
  /* The memory kind's operations, set when the config is read (NULL:
   * host memory), and its state, made by its init (CUDA: cuda_comm.h). */
  const struct kolo_mem_kind *kind;
  struct kolo_cuda_comm *cuda; /* NULL for host communicators */
  /* Init that goes on after the API call returned (inside a group, or
   * config.blocking = 0; core/init_async.c): init_busy is 1 until it has
   * finished, and nothing but rank and nranks may be read before. */
  _Atomic int init_busy;
  struct kolo_init_job *init_job; /* the ids and the thread of that init */
  kolo_root *root;                /* the rendezvous root this rank started at init, or NULL */
  _Atomic int ready;              /* init finished and succeeded */
  _Atomic int revoked;            /* koloCommRevoke was called (core/revoke.c) */
  struct kolo_redop_table *redops; /* NULL until the first op is made */
};

/* Stops every pipe end of c (stop words: peers waiting on it stop too). */
void kolo_comm_stop(struct koloComm *c, int reason);
/* Where c's pipes live, for kolo_connect: NULL for host communicators. */
const struct kolo_conn_mem *kolo_comm_conn_mem(const struct koloComm *c);
/* The same, said by `rank`, with a call mismatch's report first on each
 * pipe when m is not NULL (koloCommAbort: KOLO_STOP_ABORT, no report). */
void kolo_comm_stop_from(struct koloComm *c, int reason, int rank, const kolo_call_mismatch *m);
/* Fills the executor's hooks of c->owner: a peer's fate from the
 * bootstrap, and stopping every pipe of c. */
void kolo_comm_owner_hooks(kolo_exec_owner *o);

/* koloSuccess when comm's init has finished and succeeded (and, unless
 * revoked_ok, comm was not revoked); else the error of calling `fn` now,
 * with its sentence. */
koloResult_t kolo_comm_check_ready(struct koloComm *comm, const char *fn, int revoked_ok);

/* The error `res` of calling `fn` on a communicator that failed before:
 * said in the calling thread's buffer only, since the communicator's keeps
 * its first failure, which the sentence quotes. */
koloResult_t kolo_comm_failed_earlier(struct koloComm *comm, koloResult_t res, const char *fn);

/* A call of coll with arg (its algorithm, or a broadcast's kolo_bcast_arg)
 * and no buffers: what kolo_comm_connect_at_init reads the pipes of. */
static inline kolo_op kolo_pipes_op(struct koloComm *c, int coll, int arg) {
  return (kolo_op){coll, NULL, NULL, 0, koloFloat32, koloSum, arg, c, NULL, KOLO_PREMUL_NONE, 0, 0};
}

/* 1 when coll's programs on c may be multi-peer (they run over the
 * point-to-point pipes of their peers): all-to-all, gather, scatter, the
 * all-reduce (its doubling algorithms, ring/algo.h), the broadcast and the
 * reduce (their trees), the all-gather (Bruck's), and the collectives a
 * schedule file gives programs for. */
static inline int kolo_comm_multi_peer(const struct koloComm *c, int coll) {
  return kolo_coll_may_be_multi_peer(coll) || kolo_sched_has(c->sched, coll);
}

/* 1 when op's programs are multi-peer: its collective's (op.h), its
 * all-reduce, broadcast or all-gather algorithm's, or a schedule file's. */
static inline int kolo_op_runs_multi_peer(const kolo_op *op) {
  return kolo_op_is_multi_peer(op, op->comm->nranks) || kolo_sched_has(op->comm->sched, op->coll);
}

#endif
