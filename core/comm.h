/* comm.h - the communicator: what init builds and every call uses. */
#ifndef KOLO_CORE_COMM_H
#define KOLO_CORE_COMM_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/error.h"
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
  uint32_t nslots;
  size_t slot_bytes;
  /* Slots of the point-to-point pipes (send/recv and multi-peer programs):
   * there are up to 2 (n - 1) of them per channel, so they get a ring of
   * their own, KOLO_P2P_BUFFSIZE / nslots, never above slot_bytes. */
  size_t p2p_slot_bytes;
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

/* koloSuccess when comm's init has finished and succeeded (and, unless
 * revoked_ok, comm was not revoked); else the error of calling `fn` now,
 * with its sentence. */
koloResult_t kolo_comm_check_ready(struct koloComm *comm, const char *fn, int revoked_ok);

/* The error `res` of calling `fn` on a communicator that failed before:
 * said in the calling thread's buffer only, since the communicator's keeps
 * its first failure, which the sentence quotes. */
koloResult_t kolo_comm_failed_earlier(struct koloComm *comm, koloResult_t res, const char *fn);

/* Validates arguments, then runs the op now or records it in the current
 * group.  Returns what the API call returns. */
koloResult_t kolo_enqueue(const kolo_op *op);

/* Runs a batch of ops (a group): host ops to completion on this thread (or
 * queued for non-blocking communicators), CUDA ops enqueued on their streams. */
koloResult_t kolo_run_ops(kolo_op *ops, int nops);

/* koloGroupSimulateEnd (simulate.c): check_info refuses a simInfo not made
 * with KOLO_SIM_INFO_INITIALIZER; estimate fills its estimatedTime with the
 * cost model's time of ops, issuing nothing. */
koloResult_t kolo_sim_check_info(const koloSimInfo_t *info);
koloResult_t kolo_sim_estimate(const kolo_op *ops, int nops, koloSimInfo_t *info);

/* Runs ops on this thread, whatever their communicators' blocking mode. */
koloResult_t kolo_run_ops_here(kolo_op *ops, int nops);

/* Makes the point-to-point pipes the ops need, for every communicator in
 * the batch at once (host or device pipes, after each comm's memory kind). */
koloResult_t kolo_p2p_connect(const kolo_op *ops, int nops);

/* Makes the point-to-point pipes of the doubling all-reduces at init,
 * where the comm may run them (doubling_pipes.c). */
koloResult_t kolo_comm_connect_doubling(struct koloComm *c);
/* The pipes of ops (one comm's, multi-peer) made at init, with their
 * device ends on a CUDA comm (doubling_pipes.c; tree_pipes.c and
 * ag_pipes.c use it). */
koloResult_t kolo_comm_connect_at_init(struct koloComm *c, const kolo_op *ops, int n);
/* A call of coll with arg (its algorithm, or a broadcast's kolo_bcast_arg)
 * and no buffers: what kolo_comm_connect_at_init reads the pipes of. */
static inline kolo_op kolo_pipes_op(struct koloComm *c, int coll, int arg) {
  return (kolo_op){coll, NULL, NULL, 0, koloFloat32, koloSum, arg, c, NULL, KOLO_PREMUL_NONE, 0, 0};
}
/* The same for the broadcast trees (tree_pipes.c). */
koloResult_t kolo_comm_connect_tree(struct koloComm *c);
/* The same for Bruck's all-gather (ag_pipes.c). */
koloResult_t kolo_comm_connect_bruck(struct koloComm *c);

/* The point-to-point pipes op needs (enqueue.c): calls f(c, peer, is_send,
 * arg) for the peer of a send or recv, and for each peer and direction the
 * programs of a multi-peer collective use (ring/program.h; a pair may come
 * more than once).  Returns f's first failure, or a failure to build a
 * program. */
typedef koloResult_t (*kolo_pipe_fn)(struct koloComm *c, int peer, int is_send, void *arg);
koloResult_t kolo_op_pipes(struct koloComm *c, const kolo_op *op, kolo_pipe_fn f, void *arg);

/* KOLO_PROTO (proto_env.c): sets c->proto_off, the protocols each
 * collective of a CUDA comm may not use; koloInvalidArgument with a
 * sentence for a value kolo cannot read or that leaves a collective none. */
koloResult_t kolo_proto_apply(struct koloComm *c);

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

/* KOLO_SCHEDULE_FILE (sched_env.c): loads, parses and proves the file for
 * c's rank count into c->sched (nothing when unset); a failure's sentence
 * (naming fn, the file, its line and what is wrong) goes to the thread's
 * error buffer.  kolo_comm_free_schedule frees it. */
koloResult_t kolo_comm_load_schedule(struct koloComm *c, const char *fn);
void kolo_comm_free_schedule(struct koloComm *c);
/* KOLO_TUNING_FILE (tune_env.c): reads and parses it into c->tuned, points
 * c->algo.tuned there and sets c->tuning_hash (nothing when unset); a
 * failure's sentence ("FILE:LINE: what") goes to the thread's buffer. */
koloResult_t kolo_comm_load_tuning(struct koloComm *c, const char *fn);
/* The program of `coll` with root/peer `arg` on channel `ch`, cached. */
koloResult_t kolo_comm_program(struct koloComm *comm, int coll, int arg, int ch,
                               const kolo_program **out);

/* Non-blocking communicators: the progress thread and its queue. */
koloResult_t kolo_nb_start(struct koloComm *comm);
koloResult_t kolo_nb_submit(struct koloComm *comm, kolo_op *ops, int nops);
/* Queues fn(arg, run) to be called on the progress thread in issue order,
 * for a call made of several exchanges (koloAdasum): run is 0 when the
 * communicator failed or was aborted before its turn (fn must still free
 * arg).  Returns koloInProgress, or an error when it could not queue. */
typedef void (*kolo_nb_fn)(void *arg, int run);
koloResult_t kolo_nb_submit_fn(struct koloComm *comm, kolo_nb_fn fn, void *arg);
/* koloInProgress while submitted ops remain, else the first failure. */
koloResult_t kolo_nb_status(struct koloComm *comm);
void kolo_nb_stop(struct koloComm *comm);

#endif
