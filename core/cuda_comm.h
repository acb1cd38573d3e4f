/* cuda_comm.h - the device side of a koloMemCuda communicator.
 *
 * Made once at init, so that enqueueing a call allocates nothing and never
 * synchronizes the device (calls are capturable in CUDA graphs, once their
 * pipes exist):
 *
 *  - the device (config.cudaDev, or the current one), selected on the
 *    calling thread at init and again by every later call of the comm;
 *  - an abort word and the status words in mapped pinned host memory:
 *    kernels poll the abort word (koloCommAbort sets it) and write why they
 *    stopped into the status words (read by koloCommGetAsyncError), with a
 *    mismatch report when calls did not match;
 *  - device copies of every step program the comm can run (each collective,
 *    each root of broadcast and reduce, each peer of send and recv, and the
 *    three phases of the hierarchical all-reduce where the hosts allow it)
 *    in one device allocation;
 *  - the device copies of the point-to-point ends (made as the pipes are)
 *    and, per multi-peer program and channel, the table of its ends that
 *    kernels index by a step's peer (cuda_peers.c);
 *  - one step counter in device memory per connector end (ring ends and
 *    every possible point-to-point end), zeroed: a kernel continues each
 *    end's count where the last kernel left it; beside each, the end's
 *    owner word, which tells a kernel that another one holds the end
 *    (kernels/cuda_exec.h, KOLO_DEV_CONCURRENT);
 *  - a non-blocking "setup" stream for the copies of pipe setup and stop
 *    words (never the legacy stream: it would wait for kernels spinning on
 *    peers), and an event that orders the comm's calls across streams.
 *
 * Pipes of CUDA communicators are device connectors (transport p2p) within
 * a host and net pipes staged in pinned host memory between hosts
 * (transport net; polled by the proxy, which the launcher tells how many
 * slices each kernel moves; SIMPLE protocol only, so a communicator that
 * spans hosts never uses LL, on any rank); the point-to-point ones are made
 * on first use, which allocates device memory:
 * the first send/recv with a peer must not be captured into a CUDA graph
 * (do it once before capturing, as a warm-up; a captured first use fails
 * with koloInvalidUsage).
 *
 * The core reaches all this through the CUDA memory kind's table
 * (core/mem_kind.h, filled in cuda_kind.c).  Builds without CUDA have none
 * of the files behind it (CMakeLists.txt): koloMemCuda is refused at init. */
#ifndef KOLO_CORE_CUDA_COMM_H
#define KOLO_CORE_CUDA_COMM_H

#include "core/cuda_mismatch.h"
#include "core/cuda_peers.h"
#include "core/cuda_residency.h"
#include "core/cuda_stall.h"
#include "core/cuda_state.h"

/* Init, after the shape check: selects and checks the device on every rank
 * (a rank without a usable device fails them all, named), makes the
 * streams, mapped words and counters. */
koloResult_t kolo_cuda_comm_init(struct koloComm *c);
/* Init, after the ring is built: every program, uploaded once. */
koloResult_t kolo_cuda_comm_programs(struct koloComm *c);
/* Init, after the ring pipes are made: their device ends, and the planner's
 * table. */
void kolo_cuda_comm_ring_ready(struct koloComm *c);
/* After point-to-point pipes were made: the device ends of the channels of
 * (peer, direction) that exist, and their device copies (cuda_peers.c),
 * complete when this returns.  A kolo_pipe_fn (core/comm.h; arg unused),
 * so kolo_op_pipes can call it for every pipe an op needs. */
koloResult_t kolo_cuda_comm_p2p_ready(struct koloComm *c, int peer, int is_send, void *arg);

/* koloSuccess, or the comm's (sticky) failure: the first call that sees the
 * kernels' status word set turns it into an error sentence naming the rank
 * and the peer, and stops every pipe of the comm so that peers stop too. */
koloResult_t kolo_cuda_comm_status(struct koloComm *c);
/* Marks every existing pipe end of the comm as stopped by this rank. */
void kolo_cuda_comm_stop_all(struct koloComm *c, int reason);
/* Sets the abort word: the comm's kernels stop at their next poll. */
void kolo_cuda_comm_abort(struct koloComm *c);
/* Teardown (cuda_teardown.c).  quiesce: waits for the comm's own work (not
 * the device's), failing the comm (koloTimeout) and aborting its kernels
 * when it is not done within the timeout of the call `fn` (koloCommDestroy,
 * koloCommFinalize); before anything the kernels use is freed.  close_ipc:
 * closes the pipe ends that cross processes in CUDA IPC's order (importers
 * close and say so, then exporters free); the others are closed by the
 * caller. */
void kolo_cuda_comm_quiesce(struct koloComm *c, const char *fn);
/* 1 while work the comm enqueued has not finished (no wait). */
int kolo_cuda_comm_busy(struct koloComm *c);
void kolo_cuda_comm_close_ipc(struct koloComm *c);
/* Frees the device state (after the pipes were closed). */
void kolo_cuda_comm_free(struct koloComm *c);

/* The calling thread's current device, or -1. */
int kolo_cuda_current_device(void);

/* Enqueues ops of CUDA communicators on their streams (cuda_enqueue.c). */
koloResult_t kolo_cuda_run_ops(kolo_op *ops, int nops);

/* koloMemAlloc's device memory and registration's check (cuda_mem.c):
 * the memory operations of the CUDA kind's table (core/mem_kind.h). */
int kolo_cuda_mem_device(void);
koloResult_t kolo_cuda_mem_alloc(int device, size_t size, void **ptr);
koloResult_t kolo_cuda_mem_release(int device, void *ptr);
koloResult_t kolo_cuda_mem_check(struct koloComm *c, const void *buff, const char *fn);

#endif
