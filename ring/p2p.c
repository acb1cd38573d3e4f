/* p2p.c - send and recv: one step over the connector to or from the peer. */
#include "ring/schedule.h"

koloResult_t kolo_sched_p2p(int coll, int rank, int peer, kolo_program *p) {
  (void)rank;
  if (kolo_program_alloc(p, 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  if (coll == KOLO_COLL_SEND) {
    p->send_peer = peer;
    kolo_program_set(p, 0, KOLO_STEP_SEND, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  } else {
    p->recv_peer = peer;
    kolo_program_set(p, 0, KOLO_STEP_RECV, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  }
  return koloSuccess;
}
