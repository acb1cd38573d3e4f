/* program_build.c - helpers shared by the schedules, and the dispatcher. */
#include <stdlib.h>
#include <string.h>

#include "ring/algo.h"
#include "ring/schedule.h"

koloResult_t kolo_program_alloc(kolo_program *p, int nsteps, int layout) {
  p->steps = calloc((size_t)nsteps, sizeof *p->steps);
  if (p->steps == NULL) return koloSystemError;
  p->nsteps = nsteps;
  p->layout = (uint8_t)layout;
  p->in_blocked = p->out_blocked = 0;
  p->send_peer = p->recv_peer = -1;
  p->npeers = 0;
  p->peers = NULL;
  return koloSuccess;
}

koloResult_t kolo_program_alloc_peers(kolo_program *p, int n) {
  p->peers = calloc((size_t)n, sizeof *p->peers);
  if (p->peers == NULL) return koloSystemError;
  p->npeers = n;
  for (int i = 0; i < n; i++) p->peers[i].rank = -1;
  return koloSuccess;
}

void kolo_program_set_peers(kolo_program *p, int i, int to, int from) {
  p->steps[i].to = (uint16_t)to;
  p->steps[i].from = (uint16_t)from;
}

void kolo_program_index_peers(kolo_program *p) {
  for (int i = 0; i < p->npeers; i++) p->peers[i].sends = p->peers[i].recvs = 0;
  for (int i = 0; i < p->nsteps && p->npeers > 0; i++) {
    const kolo_step *s = &p->steps[i];
    if (kolo_step_sends(s->op) && s->to < p->npeers) p->peers[s->to].sends = 1;
    if (kolo_step_recvs(s->op) && s->from < p->npeers) p->peers[s->from].recvs = 1;
  }
}

koloResult_t kolo_program_clone(const kolo_program *p, kolo_program *out) {
  kolo_program q = *p;
  q.steps = malloc((size_t)(p->nsteps > 0 ? p->nsteps : 1) * sizeof *q.steps);
  q.peers = p->npeers > 0 ? malloc((size_t)p->npeers * sizeof *q.peers) : NULL;
  if (q.steps == NULL || (p->npeers > 0 && q.peers == NULL)) {
    free(q.steps);
    free(q.peers);
    return koloSystemError;
  }
  if (p->nsteps > 0) memcpy(q.steps, p->steps, (size_t)p->nsteps * sizeof *q.steps);
  if (p->npeers > 0) memcpy(q.peers, p->peers, (size_t)p->npeers * sizeof *q.peers);
  *out = q;
  return koloSuccess;
}

void kolo_program_set(kolo_program *p, int i, int op, int flags, int src_buf,
                      int src_chunk, int dst_buf, int dst_chunk) {
  kolo_step *s = &p->steps[i];
  s->op = (uint8_t)op;
  s->flags = (uint8_t)flags;
  s->src_buf = (uint8_t)src_buf;
  s->src_chunk = src_chunk;
  s->dst_buf = (uint8_t)dst_buf;
  s->dst_chunk = dst_chunk;
}

const char *kolo_coll_name(int coll) {
  static const char *names[KOLO_COLL_NUM] = {"AllReduce", "ReduceScatter", "AllGather",
                                             "Broadcast", "Reduce",        "Send",
                                             "Recv",      "AlltoAll",      "Gather",
                                             "Scatter"};
  return (coll >= 0 && coll < KOLO_COLL_NUM) ? names[coll] : "?";
}

koloResult_t kolo_sched_peer_all_reduce(int n, int rank, int layout, kolo_peer_builder build, kolo_program *out) {
  kolo_program p = {0};
  koloResult_t res;
  if (n == 1) {
    res = kolo_program_alloc(&p, 1, layout);
    if (res == koloSuccess) kolo_program_set(&p, 0, KOLO_STEP_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  } else {
    res = build(n, rank, &p);
  }
  if (res != koloSuccess) {
    kolo_program_free(&p);
    return res;
  }
  kolo_program_index_peers(&p);
  *out = p;
  return koloSuccess;
}

/* The all-reduce of algorithm `algo` (ring/algo.h). */
static koloResult_t all_reduce(const kolo_ring *ring, int rank, int algo, kolo_program *out) {
  switch (algo) {
  case KOLO_ALGO_RD: return kolo_sched_all_reduce_rd(ring->nranks, rank, out);
  case KOLO_ALGO_RABENSEIFNER: return kolo_sched_all_reduce_rab(ring->nranks, rank, out);
  case KOLO_ALGO_DIRECT: return kolo_sched_all_reduce_direct(ring->nranks, rank, out);
  case KOLO_ALGO_ONESHOT: return kolo_sched_all_reduce_oneshot(ring->nranks, rank, out);
  default: return kolo_sched_all_reduce(ring, rank, out);
  }
}

/* The broadcast of algorithm `algo`: the binomial tree, channel's tree of
 * the double binary tree, or the chain. */
static koloResult_t broadcast(const kolo_ring *ring, int rank, int root, int algo, int channel, kolo_program *out) {
  if (algo == KOLO_ALGO_TREE) return kolo_sched_broadcast_tree(ring->nranks, rank, root, out);
  if (algo == KOLO_ALGO_DBTREE) return kolo_sched_broadcast_dbtree(ring->nranks, rank, root, channel, out);
  return kolo_sched_broadcast(ring, rank, root, out);
}

/* The all-gather of algorithm `algo`: Bruck's, or the ring. */
static koloResult_t all_gather(const kolo_ring *ring, int rank, int algo, kolo_program *out) {
  if (algo == KOLO_ALGO_BRUCK) return kolo_sched_all_gather_bruck(ring->nranks, rank, out);
  return kolo_sched_all_gather(ring, rank, out);
}

koloResult_t kolo_schedule_build(int coll, const kolo_ring *ring, int rank, int arg, int algo,
                                 kolo_program *out) {
  return kolo_schedule_build_on(coll, ring, rank, arg, algo, 0, out);
}

koloResult_t kolo_schedule_build_on(int coll, const kolo_ring *ring, int rank, int arg, int algo, int channel,
                                    kolo_program *out) {
  switch (coll) {
  case KOLO_COLL_ALL_REDUCE: return all_reduce(ring, rank, algo, out);
  case KOLO_COLL_REDUCE_SCATTER: return kolo_sched_reduce_scatter(ring, rank, out);
  case KOLO_COLL_ALL_GATHER: return all_gather(ring, rank, algo, out);
  case KOLO_COLL_BROADCAST: return broadcast(ring, rank, arg, algo, channel, out);
  case KOLO_COLL_REDUCE:
    if (algo == KOLO_ALGO_TREE) return kolo_sched_reduce_tree(ring->nranks, rank, arg, out);
    if (algo == KOLO_ALGO_DBTREE) return kolo_sched_reduce_dbtree(ring->nranks, rank, arg, channel, out);
    return kolo_sched_reduce(ring, rank, arg, out);
  case KOLO_COLL_SEND:
  case KOLO_COLL_RECV: return kolo_sched_p2p(coll, rank, arg, out);
  case KOLO_COLL_ALL_TO_ALL: return kolo_sched_all_to_all(ring->nranks, rank, out);
  case KOLO_COLL_GATHER: return kolo_sched_gather(ring->nranks, rank, arg, out);
  case KOLO_COLL_SCATTER: return kolo_sched_scatter(ring->nranks, rank, arg, out);
  default: return koloInternalError;
  }
}
