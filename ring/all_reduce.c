/* all_reduce.c - ring all-reduce: a reduce-scatter then an all-gather.
 *
 * The buffer is cut into nranks chunks per channel and round, chunk j
 * "belonging" to the rank that finishes its reduction.  Seen from the rank at
 * ring position p, with ago(j) = the rank j positions before p:
 *
 *   send            in[ago(1)]                 start chunk ago(1)'s sum
 *   recvReduceSend  in[ago(j)], j = 2..n-1     add ours, pass it on
 *   recvReduceCopySend in[self] -> out[self]   last addend: final, keep + pass
 *   recvCopySend    out[ago(j)], j = 1..n-2    forward finished chunks
 *   recv            out[ago(n-1)]              the last one stops here
 *
 * 2n-1 steps; with one rank a single copy.
 */
#include "ring/schedule.h"

static int ago(const kolo_ring *ring, int rank, int j) {
  int n = ring->nranks;
  return ring->order[(ring->pos[rank] + n - (j % n)) % n];
}

koloResult_t kolo_sched_all_reduce(const kolo_ring *ring, int rank, kolo_program *p) {
  int n = ring->nranks;
  if (kolo_program_alloc(p, n == 1 ? 1 : 2 * n - 1, KOLO_LAYOUT_RING) != koloSuccess)
    return koloSystemError;
  if (n == 1) {
    kolo_program_set(p, 0, KOLO_STEP_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, rank, KOLO_BUF_OUT,
                     rank);
    return koloSuccess;
  }
  p->send_peer = kolo_ring_next(ring, rank);
  p->recv_peer = kolo_ring_prev(ring, rank);
  int s = 0, c;
  c = ago(ring, rank, 1);
  kolo_program_set(p, s++, KOLO_STEP_SEND, 0, KOLO_BUF_IN, c, KOLO_BUF_OUT, c);
  for (int j = 2; j <= n - 1; j++) {
    c = ago(ring, rank, j);
    kolo_program_set(p, s++, KOLO_STEP_RECV_REDUCE_SEND, 0, KOLO_BUF_IN, c, KOLO_BUF_OUT, c);
  }
  kolo_program_set(p, s++, KOLO_STEP_RECV_REDUCE_COPY_SEND, KOLO_STEP_FINAL, KOLO_BUF_IN, rank,
                   KOLO_BUF_OUT, rank);
  for (int j = 1; j <= n - 2; j++) {
    c = ago(ring, rank, j);
    kolo_program_set(p, s++, KOLO_STEP_RECV_COPY_SEND, 0, KOLO_BUF_OUT, c, KOLO_BUF_OUT, c);
  }
  c = ago(ring, rank, n - 1);
  kolo_program_set(p, s++, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, c, KOLO_BUF_OUT, c);
  return koloSuccess;
}
