/* schedule.h - compiling collectives into step programs (one algorithm per
 * file: allreduce.c, reduce_scatter.c, all_gather.c, chain.c, p2p.c).
 *
 * A schedule knows ranks and ring order, nothing about memory kinds or
 * transports.  The program for (rank, channel) depends only on the ring of
 * that channel, the collective and its root or peer.
 */
#ifndef KOLO_RING_SCHEDULE_H
#define KOLO_RING_SCHEDULE_H

#include "kolo.h"
#include "ring/program.h"

typedef enum {
  KOLO_COLL_ALL_REDUCE = 0,
  KOLO_COLL_REDUCE_SCATTER,
  KOLO_COLL_ALL_GATHER,
  KOLO_COLL_BROADCAST,
  KOLO_COLL_REDUCE,
  KOLO_COLL_SEND,
  KOLO_COLL_RECV,
  KOLO_COLL_NUM
} kolo_coll;

const char *kolo_coll_name(int coll);

/* A ring: order[i] is the rank at position i; pos[r] the position of r. */
typedef struct {
  int nranks;
  int *order;
  int *pos;
} kolo_ring;

static inline int kolo_ring_next(const kolo_ring *ring, int rank) {
  return ring->order[(ring->pos[rank] + 1) % ring->nranks];
}
static inline int kolo_ring_prev(const kolo_ring *ring, int rank) {
  return ring->order[(ring->pos[rank] + ring->nranks - 1) % ring->nranks];
}

/* Fills *out with rank's program.  `arg` is the root (broadcast, reduce) or
 * the peer (send, recv); ignored otherwise.  koloSystemError when out of
 * memory; *out is untouched on failure. */
koloResult_t kolo_schedule_build(int coll, const kolo_ring *ring, int rank, int arg,
                                 kolo_program *out);

/* Per-algorithm builders (called by kolo_schedule_build). */
koloResult_t kolo_sched_all_reduce(const kolo_ring *ring, int rank, kolo_program *p);
koloResult_t kolo_sched_reduce_scatter(const kolo_ring *ring, int rank, kolo_program *p);
koloResult_t kolo_sched_all_gather(const kolo_ring *ring, int rank, kolo_program *p);
koloResult_t kolo_sched_broadcast(const kolo_ring *ring, int rank, int root, kolo_program *p);
koloResult_t kolo_sched_reduce(const kolo_ring *ring, int rank, int root, kolo_program *p);
koloResult_t kolo_sched_p2p(int coll, int rank, int peer, kolo_program *p);

/* Allocates p->steps for n steps and sets the header (peers -1). */
koloResult_t kolo_program_alloc(kolo_program *p, int nsteps, int layout);
/* Appends nothing: sets step i. */
void kolo_program_set(kolo_program *p, int i, int op, int flags, int src_buf,
                      int src_chunk, int dst_buf, int dst_chunk);

#endif
