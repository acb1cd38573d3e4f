/* comm_peek.h - read-only looks inside a host communicator, for tests that
 * compare an independent count with what the executor really did. */
#ifndef KOLO_TESTS_UTIL_COMM_PEEK_H
#define KOLO_TESTS_UTIL_COMM_PEEK_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The running step counts of the ring pipe ends of channel ch (slices sent
 * and slices drained since the comm was made); 0 where no pipe exists. */
void kt_ring_steps(koloComm_t comm, int ch, uint32_t *send, uint32_t *recv);
/* The same for the point-to-point pipe ends to / from `peer` on channel ch
 * (send/recv's, and the multi-peer collectives'). */
void kt_p2p_steps(koloComm_t comm, int peer, int ch, uint32_t *send, uint32_t *recv);
/* Slices the comm's peers have put into its inbound pipes (ring and
 * point-to-point, every channel) since it was made: when it grows, a peer
 * is inside a call that sends to this rank.  Read with acquire loads, so
 * another thread may call it while the peers run; the comm itself must be
 * idle (its pipes are not being made meanwhile). */
uint64_t kt_slices_in(koloComm_t comm);
/* Waits until kt_slices_in(comm) exceeds `above`, for at most bound_ms;
 * returns whether it did. */
int kt_wait_slices_in(koloComm_t comm, uint64_t above, double bound_ms);
/* The comm's shape: channels, slots per pipe, bytes per slot, and the bytes
 * a channel must have before another is used. */
void kt_comm_shape(koloComm_t comm, int *nchannels, uint32_t *nslots, size_t *slot_bytes,
                   size_t *min_channel_bytes);
/* The largest chunk of a round on the comm's ring pipes where it is capped
 * below half their slots (core/comm_topology.c), in bytes; 0: not capped. */
size_t kt_comm_chunk_cap(koloComm_t comm);
/* The all-reduce algorithm (ring/algo.h's KOLO_ALGO_*) the comm's cost
 * model picks for `bytes` on `channels` channels. */
int kt_comm_algo(koloComm_t comm, size_t bytes, int channels);
/* The algorithm the cost model picks afresh, never remembered, for a call
 * of `coll` (KOLO_COLL_ALL_REDUCE, _BROADCAST, _ALL_GATHER or _REDUCE) of
 * count elements of type on the channels such a call runs on: what
 * kolo_comm_*_algo must answer (an all-reduce's hier where the comm has no
 * hier programs: the ring). */
int kt_fresh_algo(koloComm_t comm, int coll, size_t count, koloDataType_t type);
/* A memo of chosen algorithms (core/algo_memo.h) of the test's own, empty
 * at first, behind C calls (its words are C11 atomics): kinds are
 * KOLO_MEMO_ALL_REDUCE .. _REDUCE, as kt_memo_kinds() counts them. */
typedef struct kt_memo kt_memo;
kt_memo *kt_memo_new(void);
void kt_memo_free(kt_memo *m);
int kt_memo_kinds(void);
int kt_memo_ways(void);
size_t kt_memo_max_bytes(void);
unsigned kt_memo_way(size_t bytes);
int kt_memo_get(kt_memo *m, int kind, size_t bytes);
void kt_memo_put(kt_memo *m, int kind, size_t bytes, int algo);
/* Bytes per slot of the comm's point-to-point pipes (KOLO_P2P_BUFFSIZE). */
size_t kt_comm_p2p_slot_bytes(koloComm_t comm);
/* Bytes per slot of the pipe that exists to (send) / from peer on channel
 * ch, point-to-point (p2p) or the ring's (peer ignored); 0 where none. */
size_t kt_pipe_slot_bytes(koloComm_t comm, int p2p, int peer, int ch, int send);
/* Turns blocked executors of this process took over the net proxy's pipes
 * themselves (transport/proxy.h: kolo_proxy_caller_turns). */
uint64_t kt_proxy_caller_turns(void);
/* The program comm runs for collective coll (root arg) on channel ch: its
 * steps and peers (0: a single-peer program); -1 when it has none. */
int kt_program_shape(koloComm_t comm, int coll, int arg, int ch, int *nsteps, int *npeers);
/* Registrations and windows of comm not deregistered (core/register.c). */
int kt_reg_count(koloComm_t comm);
/* The koloMemAlloc block holding [p, p + size): its CUDA device, -1 for
 * host memory, -2 when no one block holds it (core/mem.h). */
int kt_mem_device(const void *p, size_t size);

#ifdef __cplusplus
}
#endif

#endif
