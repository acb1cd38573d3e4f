/* reduce_scatter.c - ring reduce-scatter.
 *
 * The input holds one block per rank; rank r ends with the reduction of
 * block r.  From the rank at ring position p (ago(j): the rank j before p):
 *
 *   send            in[block ago(1)]                 start that block's sum
 *   recvReduceSend  in[block ago(j)], j = 2..n-1     add ours, pass it on
 *   recvReduceCopy  in[block self] -> out            last addend, final
 */
#include "ring/schedule.h"

static int ago(const kolo_ring *ring, int rank, int j) {
  int n = ring->nranks;
  return ring->order[(ring->pos[rank] + n - (j % n)) % n];
}

koloResult_t kolo_sched_reduce_scatter(const kolo_ring *ring, int rank, kolo_program *p) {
  int n = ring->nranks;
  if (kolo_program_alloc(p, n, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  p->in_blocked = 1;
  if (n == 1) {
    kolo_program_set(p, 0, KOLO_STEP_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, rank, KOLO_BUF_OUT, 0);
    return koloSuccess;
  }
  p->send_peer = kolo_ring_next(ring, rank);
  p->recv_peer = kolo_ring_prev(ring, rank);
  int s = 0;
  kolo_program_set(p, s++, KOLO_STEP_SEND, 0, KOLO_BUF_IN, ago(ring, rank, 1), KOLO_BUF_OUT, 0);
  for (int j = 2; j <= n - 1; j++)
    kolo_program_set(p, s++, KOLO_STEP_RECV_REDUCE_SEND, 0, KOLO_BUF_IN, ago(ring, rank, j),
                     KOLO_BUF_OUT, 0);
  kolo_program_set(p, s++, KOLO_STEP_RECV_REDUCE_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, rank,
                   KOLO_BUF_OUT, 0);
  return koloSuccess;
}
