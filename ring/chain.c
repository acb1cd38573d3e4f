/* chain.c - broadcast and reduce as pipelined chains along the ring.
 *
 * Broadcast flows from the root in ring order: root copies in -> out and
 * sends, the middle ranks receive, keep and forward, the rank before the
 * root only receives.  Reduce flows *towards* the root: the rank after the
 * root sends its input, the middle ranks add theirs and forward, the root
 * adds its own and writes the final result.  Slices pipeline through the
 * chain, so a large message costs about one pass, not n.
 */
#include "ring/schedule.h"

/* Distance from the root along the ring (0 = root). */
static int hops_from_root(const kolo_ring *ring, int rank, int root) {
  int n = ring->nranks;
  return (ring->pos[rank] - ring->pos[root] + n) % n;
}

koloResult_t kolo_sched_broadcast(const kolo_ring *ring, int rank, int root, kolo_program *p) {
  int n = ring->nranks;
  if (kolo_program_alloc(p, 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  int q = hops_from_root(ring, rank, root);
  if (n == 1) {
    kolo_program_set(p, 0, KOLO_STEP_COPY, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
    return koloSuccess;
  }
  if (q != n - 1) p->send_peer = kolo_ring_next(ring, rank);
  if (q != 0) p->recv_peer = kolo_ring_prev(ring, rank);
  int op = q == 0 ? KOLO_STEP_COPY_SEND : q == n - 1 ? KOLO_STEP_RECV : KOLO_STEP_RECV_COPY_SEND;
  kolo_program_set(p, 0, op, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  return koloSuccess;
}

koloResult_t kolo_sched_reduce(const kolo_ring *ring, int rank, int root, kolo_program *p) {
  int n = ring->nranks;
  if (kolo_program_alloc(p, 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  int q = hops_from_root(ring, rank, root);
  if (n == 1) {
    kolo_program_set(p, 0, KOLO_STEP_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
    return koloSuccess;
  }
  if (q != 0) p->send_peer = kolo_ring_next(ring, rank);
  if (q != 1) p->recv_peer = kolo_ring_prev(ring, rank);
  int op = q == 1 ? KOLO_STEP_SEND : q == 0 ? KOLO_STEP_RECV_REDUCE_COPY : KOLO_STEP_RECV_REDUCE_SEND;
  kolo_program_set(p, 0, op, q == 0 ? KOLO_STEP_FINAL : 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  return koloSuccess;
}
