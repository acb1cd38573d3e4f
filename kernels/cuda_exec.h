/* cuda_exec.h - the CUDA executor's plain-struct interface.
 *
 * STATUS: wired to koloMemCuda communicators (core/cuda_*.c) and compiled
 * for sm_90 with no spills, but not yet run on a GPU.
 *
 * What crosses from host to device is a kolo_dev_batch passed by value as
 * the kernel's parameter (so a launch is capturable in a CUDA graph; CUDA
 * allows 4 KiB of parameters): one task per thread block, each a step
 * program (steps in device memory) with its two buffers and its connector
 * ends: a single-peer program's two ends in the parameters, a multi-peer
 * program's (ring/program.h) in a table in device memory, one send and one
 * receive end per peer, which the planner points the task at (the
 * communicator keeps one table per program and channel, and the device
 * copies of its point-to-point ends that the tables point to).  Nothing
 * else: the kernel knows no communicator, topology or transport.
 *
 * Connector ends on the device: slots and the two counters live in the
 * receiver's GPU memory, or, for a net pipe, in this end's mapped pinned
 * host memory, where the proxy moves them (SIMPLE only there); `step`
 * is this end's running count, kept in device memory between launches so
 * that consecutive kernels on one stream continue where the last stopped.
 * Counters are written with st.release.sys after a __threadfence_system(),
 * read with ld.acquire.sys: correct for peers on the same GPU, on peer GPUs
 * and for a host proxy.
 *
 * Failure: every waiting thread (thread 0 for counters, each thread for its
 * own LL lines) polls, every few hundred spins, the abort word (mapped host
 * memory, set by koloCommAbort), the stop words of its connector ends, and
 * how long this one wait has stalled (batch.timeout_ns: a stall, not the
 * kernel's total time).  Any of them ends the block; the first records why in
 * `status` (mapped host memory, device-scope CAS) and the block writes a stop
 * word into its connector ends (a peer's stop word is passed on unchanged,
 * naming the rank where the failure started) so that the ranks waiting on it
 * stop too.  A block also leaves when another block of its launch stopped
 * (status set), passing that block's stop word on.  Before the timeout, a
 * wait that passes batch.stall_ms is noted once per launch in the status
 * words' stall slot (the peer, the call, why), for the host to warn about
 * (KOLO_STALL_WARN_S); the block keeps waiting.
 *
 * Calls that do not match: a single-peer task stamps its call's
 * signature (kolo_dev_sig, below) into each send end's control page on the
 * first slice of the call, and on the first slice it receives waits for the
 * sender's before it waits for the slice, clears it and compares.  A
 * mismatch stops the block with KOLO_DEV_MISMATCH, the report (both ranks
 * and calls) in the status words and in each of its pipes' report slots,
 * then the stop word KOLO_STOP_MISMATCH; a block that stops on such a word
 * passes the report on.  Multi-peer tasks do not check (yet).
 *
 * What the launcher checks (cudaErrorInvalidValue otherwise): one dtype and
 * one protocol per launch, elem_size == sizeof(T), equal send and receive
 * slot sizes within a task, slices of at least one element, ll_slots 16-byte
 * aligned with ll_slot_bytes a multiple of 16, and no connector end used by
 * two tasks of one launch.  The ends of a multi-peer task are in device
 * memory, out of the launcher's sight: the planner checks them (every end
 * exists, all slice alike, none is another task's).  A proxy moving LL slices must poll the lines'
 * flags itself (LL does not bump `tail`) and write each 8-byte half of a line
 * in one piece.  Plain C: no CUDA header needed.
 */
#ifndef KOLO_KERNELS_CUDA_EXEC_H
#define KOLO_KERNELS_CUDA_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "ring/program.h"

#define KOLO_DEV_MAX_TASKS 16
#define KOLO_DEV_THREADS 256

/* Why a kernel stopped early (status[0]); status[1] = task, status[2] = peer. */
enum {
  KOLO_DEV_OK = 0,
  KOLO_DEV_ABORTED = 1,
  KOLO_DEV_TIMEOUT = 2,
  KOLO_DEV_PEER_STOPPED = 3,
  /* A block found one of its connector ends held by a block of another
   * kernel (the end's owner word, below): two kernels of one communicator
   * ran at once on one pipe, which happens when a CUDA graph of its calls is
   * replayed concurrently with other calls of it. */
  KOLO_DEV_CONCURRENT = 4,
  /* A block found, on the first slice of a call from a pipe, that the
   * sender's call signature differs from its own: the report is
   * in the status words (below) and in the task's pipes, before the stop
   * word KOLO_STOP_MISMATCH. */
  KOLO_DEV_MISMATCH = 5
};

/* The status words (kolo_dev_batch.status): why, block, peer (above), the
 * stop word the block sent its peers, then a report slot (state 2 once
 * readable, a pad word, a kolo_dev_report) that the first block to find or
 * hear of a mismatch fills, then the stall slot (below). */
#define KOLO_DEV_STATUS_WORD 3
#define KOLO_DEV_STATUS_REPORT_STATE 4
#define KOLO_DEV_STATUS_REPORT 6
#define KOLO_DEV_STATUS_STALL 20
#define KOLO_DEV_STATUS_WORDS (KOLO_DEV_STATUS_STALL + KOLO_DEV_STALL_WORDS)

/* The stall slot (KOLO_STALL_WARN_S): the first waiting block of a launch
 * whose wait passes batch.stall_ms notes, once per launch, where it waits,
 * and keeps waiting; the host (core/cuda_stall.c) logs it while the kernel
 * still runs.  Words from KOLO_DEV_STATUS_STALL: CLAIM, the launch
 * (batch.launch) that took the slot (a CAS from the value it held: one
 * block per launch, never the same launch twice); then PEER, WHERE
 * (channel | KOLO_DEV_STALL_* << 16), the call's signature (6 words, as
 * a kolo_dev_report's); READY, that launch again, written last with
 * release.  A reader takes the words between READY and CLAIM as read
 * after them only when both name the same launch. */
#define KOLO_DEV_STALL_CLAIM 0
#define KOLO_DEV_STALL_PEER 1
#define KOLO_DEV_STALL_WHERE 2
#define KOLO_DEV_STALL_SIG 3
#define KOLO_DEV_STALL_READY 9
#define KOLO_DEV_STALL_WORDS 10
/* What the noted block waits for (WHERE >> 16). */
enum {
  KOLO_DEV_STALL_FIRST = 1, /* the peer's signature: it sent nothing of this call */
  KOLO_DEV_STALL_RECV = 2,  /* a slice from a peer that reached this call */
  KOLO_DEV_STALL_SEND = 3   /* a free slot of the peer: it takes no more data */
};

/* A call's signature as transport/connector.h's kolo_call_sig lays it out
 * (core/cuda_mismatch.c checks): the sender of a pipe writes its own with
 * the first slice of each call at KOLO_DEV_SIG_FROM_TAIL bytes after the
 * pipe's tail word, [step % KOLO_DEV_FILLED_WORDS], the `set` byte last
 * with release (a net pipe's proxy reads and writes it as a byte too); the
 * receiver polls `set` before it waits for the slice, compares, and clears
 * it. */
typedef struct {
  uint64_t count;
  uint32_t seq;
  int32_t root;
  uint8_t coll, type, op, set;
} kolo_dev_sig;

/* Two calls that do not match (connector.h's kolo_call_mismatch): the
 * higher rank and its call first. */
typedef struct {
  int32_t rank[2];
  kolo_dev_sig sig[2];
} kolo_dev_report;

#define KOLO_DEV_SIG_FROM_TAIL 448
#define KOLO_DEV_SEQ_NONE 0xffffu
/* A pipe's report slot: a state word (2: readable), then at + 8 the
 * report, written before the stop word KOLO_STOP_MISMATCH. */
#define KOLO_DEV_REPORT_FROM_TAIL 1984
#define KOLO_DEV_REPORT_WORDS 14 /* sizeof(kolo_dev_report) / 4 */

/* Protocols (kolo_dev_batch.protocol), chosen per launch by size:
 *
 *  SIMPLE: slices of slot_bytes in `slots`; the sender publishes `tail`
 *    after a fence, the receiver `head` after reading.
 *  LL (low latency, as NCCL's LL): slices travel in `ll_slots`, made of
 *    16-byte lines {data0, flag, data1, flag} written with one 16-byte
 *    volatile store, so data and flag arrive together and the receiver polls
 *    the lines themselves instead of a separate counter: one trip instead of
 *    two.  A line carries 8 payload bytes, so a slice carries ll_slot_bytes/2
 *    bytes.  flag = the sender's connector step of that slice + 1 (the region
 *    starts zeroed, and step s never reuses the flag of step s - k*ll_nslots).
 *    Both ends count LL slices in the same `step` as SIMPLE slices and the
 *    receiver still publishes `head` (the sender's credit), so calls of
 *    either protocol may follow each other on a connector; `tail` is not
 *    touched by LL.  ll_nslots == nslots. */
enum { KOLO_PROTO_SIMPLE = 0, KOLO_PROTO_LL = 1 };

/* kolo_dev_conn.flags */
enum {
  /* A net pipe's staging memory (transport/net_devmem.h): `tail` is the
   * tail word of a host control block (transport/connector.h) whose
   * `filled` words lie KOLO_DEV_FILLED_FROM_TAIL bytes after it; a sender
   * writes there how many bytes each slice filled, before publishing tail,
   * so that the proxy sends only those.  (A flag and a fixed offset instead
   * of a pointer keep the batch within 4 KiB of kernel parameters.) */
  KOLO_DEV_CONN_FILLED = 1u << 0
};
#define KOLO_DEV_END_WORDS 2
#define KOLO_DEV_STEP_OWNER 1
#define KOLO_DEV_OWNER_SIGNED 2u
#define KOLO_DEV_FILLED_FROM_TAIL 192
#define KOLO_DEV_FILLED_WORDS 64 /* KOLO_CONN_MAX_SLOTS */

typedef struct {
  char *slots;
  char *ll_slots;  /* LL region: nslots * ll_slot_bytes, receiver's memory */
  uint32_t ll_slot_bytes;
  uint32_t flags;  /* KOLO_DEV_CONN_* */
  uint32_t *tail;  /* bumped by the sender */
  uint32_t *head;  /* bumped by the receiver */
  uint32_t *stop;  /* non-zero: the other end stopped (connector.h words) */
  /* KOLO_DEV_END_WORDS words of device memory: this end's running count,
   * then its owner word (step[KOLO_DEV_STEP_OWNER]): 0 while no block holds
   * the end; a block sets it to 1 when it starts (CAS) and back to 0 when it
   * ends, after storing the count.  While it holds the end, the block adds
   * KOLO_DEV_OWNER_SIGNED once the call's signature went through it
   * (stamped or checked on the call's first slice through that end). */
  uint32_t *step;
  uint32_t nslots;
  uint32_t slot_bytes;
  int32_t peer;
  /* Host only (kernels ignore it): a net pipe's index + 1 in its
   * communicator's table, whose proxy the launcher posts the slices to
   * (core/cuda_comm.h); 0: not a net pipe. */
  int32_t net;
} kolo_dev_conn;

/* kolo_dev_task.op: a koloRedOp_t (koloAvg: sum, divided on FINAL steps),
 * or a premul-sum (a sum in which every step that reads this rank's input,
 * src in IN, multiplies it by a scalar first, rounded to the type): the
 * scalar's bits in kolo_dev_task.scalar, or (_PTR) at that device address,
 * read when the kernel runs. */
enum { KOLO_DEV_OP_PREMUL = 5, KOLO_DEV_OP_PREMUL_PTR = 6 };

/* A multi-peer task's ends: [2 * i] the send end to the program's peer i,
 * [2 * i + 1] the receive end from it (NULL where the program does not use
 * it), in device memory. */
typedef const kolo_dev_conn *const *kolo_dev_ends;

typedef struct {
  const kolo_step *steps; /* device copy of the program's steps */
  int32_t nsteps;
  uint8_t in_blocked, out_blocked;
  uint8_t has_send, has_recv; /* single-peer programs: send / recv are ends */
  kolo_geometry geo;
  char *in, *out;
  /* 16 bits each (a koloDataType_t; a koloRedOp_t or KOLO_DEV_OP_*): with
   * the premul scalar, 16 tasks of 32-bit fields outgrew 4 KiB. */
  int16_t type, op;
  int32_t div;
  int16_t channel;
  /* Multi-peer programs: their peer count (0: single-peer) and ends on
   * this task's channel; a step uses the ends of its peers (step.to,
   * step.from).  has_send = has_recv = 0 then. */
  int16_t npeers;
  /* The call's signature (kolo_dev_sig): count = geo.count, type, these,
   * and the batch's root[] and seq_base + seq_off: what the first slice of
   * the call on each single-peer pipe carries and checks (4 KiB of
   * parameters leave no room for a whole one per task). */
  uint8_t coll;     /* kolo_coll */
  uint8_t sig_op;   /* kernels/call_sig.h's op word */
  uint16_t seq_off; /* the call's collective number - batch.seq_base; KOLO_DEV_SEQ_NONE: 0 (send / recv) */
  kolo_dev_ends ends;
  kolo_dev_conn send, recv;
  uint64_t scalar; /* KOLO_DEV_OP_PREMUL: the bits of one element; _PTR: its address */
} kolo_dev_task;

typedef struct {
  int32_t ntasks;
  int32_t protocol;           /* KOLO_PROTO_* for every task of the launch */
  uint64_t timeout_ns;        /* 0: none */
  /* The stall warning (KOLO_STALL_WARN_S in ms, 0: none; the stall slot
   * above) and this launch's number, counted by the communicator from 1
   * (a CUDA graph replays the number it captured). */
  uint32_t stall_ms;
  uint32_t launch;
  uint32_t *abort;            /* mapped host memory; kernels read it relaxed */
  uint32_t *status;           /* mapped host memory, KOLO_DEV_STATUS_WORDS words */
  /* This rank: a block that stops early on abort or timeout writes
   * KOLO_DEV_STOP_WORD(reason, rank) into the `stop` word of each of its
   * connector ends, so that peers waiting on this rank stop too instead of
   * waiting for their own timeout; a block stopped by a peer's word passes
   * that word on unchanged. */
  int32_t rank;
  /* The collective number of the launch's first call (0: send / recv
   * only); a task's is seq_base + seq_off (see kolo_dev_task). */
  uint32_t seq_base;
  /* KOLO_BUF_SCRATCH (ring/program.h): the task of block i has
   * scratch_task_bytes at scratch + i * scratch_task_bytes (at least
   * kolo_geo_scratch_bytes of its geometry); NULL when no task's program
   * names scratch.  (One base for all: a pointer per task outgrew 4 KiB.) */
  char *scratch;
  uint64_t scratch_task_bytes;
  kolo_dev_task tasks[KOLO_DEV_MAX_TASKS];
  int32_t root[KOLO_DEV_MAX_TASKS]; /* the call's root per task (0: none) */
} kolo_dev_batch;

/* CUDA passes at most 4 KiB of kernel parameters. */
#ifdef __cplusplus
static_assert(sizeof(kolo_dev_batch) <= 4096, "a kolo_dev_batch must fit CUDA's 4 KiB of kernel parameters");
#else
_Static_assert(sizeof(kolo_dev_batch) <= 4096, "a kolo_dev_batch must fit CUDA's 4 KiB of kernel parameters");
#endif

/* A stop word as transport/connector.h stores it: (reason << 24) | (rank +
 * 1): reason 2 abort, 4 timeout (connector.h's kolo_stop_reason). */
#define KOLO_DEV_STOP_WORD(reason, rank) (((uint32_t)(reason) << 24) | (uint32_t)((rank) + 1))

#ifdef __cplusplus
extern "C" {
#endif
/* Launches the batch on `stream` (a cudaStream_t); returns a cudaError_t. */
int kolo_cuda_exec_launch(const kolo_dev_batch *batch, void *stream);
/* *blocks: the fewest blocks of the executor kernel (over every dtype and
 * protocol) that one SM of the current device holds at once
 * (cudaOccupancyMaxActiveBlocksPerMultiprocessor); returns a cudaError_t. */
int kolo_cuda_exec_blocks_per_sm(int *blocks);
#ifdef __cplusplus
}
#endif

#endif
