/* all_gather.c - ring all-gather.
 *
 * The output holds one block per rank; each rank contributes block `rank`.
 * From the rank at ring position p (ago(j): the rank j before p):
 *
 *   copySend  in -> out[block self]              ours: keep and pass on
 *   recvCopySend out[block ago(j)], j = 1..n-2   keep and forward
 *   recv      out[block ago(n-1)]                the last one stops here
 */
#include "ring/schedule.h"

static int ago(const kolo_ring *ring, int rank, int j) {
  int n = ring->nranks;
  return ring->order[(ring->pos[rank] + n - (j % n)) % n];
}

koloResult_t kolo_sched_all_gather(const kolo_ring *ring, int rank, kolo_program *p) {
  int n = ring->nranks;
  if (kolo_program_alloc(p, n, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  p->out_blocked = 1;
  if (n == 1) {
    kolo_program_set(p, 0, KOLO_STEP_COPY, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, rank);
    return koloSuccess;
  }
  p->send_peer = kolo_ring_next(ring, rank);
  p->recv_peer = kolo_ring_prev(ring, rank);
  int s = 0;
  kolo_program_set(p, s++, KOLO_STEP_COPY_SEND, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, rank);
  for (int j = 1; j <= n - 2; j++) {
    int c = ago(ring, rank, j);
    kolo_program_set(p, s++, KOLO_STEP_RECV_COPY_SEND, 0, KOLO_BUF_OUT, c, KOLO_BUF_OUT, c);
  }
  int c = ago(ring, rank, n - 1);
  kolo_program_set(p, s++, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, c, KOLO_BUF_OUT, c);
  return koloSuccess;
}
