/* program_build.c - helpers shared by the schedules, and the dispatcher. */
#include <stdlib.h>

#include "ring/schedule.h"

koloResult_t kolo_program_alloc(kolo_program *p, int nsteps, int layout) {
  p->steps = calloc((size_t)nsteps, sizeof *p->steps);
  if (p->steps == NULL) return koloSystemError;
  p->nsteps = nsteps;
  p->layout = (uint8_t)layout;
  p->in_blocked = p->out_blocked = 0;
  p->send_peer = p->recv_peer = -1;
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
                                             "Recv"};
  return (coll >= 0 && coll < KOLO_COLL_NUM) ? names[coll] : "?";
}

koloResult_t kolo_schedule_build(int coll, const kolo_ring *ring, int rank, int arg,
                                 kolo_program *out) {
  switch (coll) {
  case KOLO_COLL_ALL_REDUCE: return kolo_sched_all_reduce(ring, rank, out);
  case KOLO_COLL_REDUCE_SCATTER: return kolo_sched_reduce_scatter(ring, rank, out);
  case KOLO_COLL_ALL_GATHER: return kolo_sched_all_gather(ring, rank, out);
  case KOLO_COLL_BROADCAST: return kolo_sched_broadcast(ring, rank, arg, out);
  case KOLO_COLL_REDUCE: return kolo_sched_reduce(ring, rank, arg, out);
  case KOLO_COLL_SEND:
  case KOLO_COLL_RECV: return kolo_sched_p2p(coll, rank, arg, out);
  default: return koloInternalError;
  }
}
