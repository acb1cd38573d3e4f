/* gather_scatter.c - gather and scatter as direct transfers between the
 * root and each other rank.
 *
 * Gather: every non-root sends its input (one block) to the root; the root
 * receives from each peer in turn into out[block peer], then copies its own
 * input into out[block root] (nothing to move when in place: the input is
 * that block).  Scatter is the mirror: the root sends in[block peer] to each
 * peer, then copies in[block root] to its output; every non-root receives
 * its block.  The root's peers are the other ranks in the order root+1,
 * root+2, ... (mod n).
 *
 * Each pipe carries one chunk per round, half its slots: a sender is never
 * held up unless the root is two rounds behind, so the root, visiting the
 * peers in a fixed order, always finds its next peer able to move.  A
 * non-root's program has one peer (the root); with one rank, one copy.
 */
#include "ring/schedule.h"

/* The root's program: one transfer per peer, then its own block. */
static koloResult_t root_program(int n, int root, int op, kolo_program *q) {
  if (kolo_program_alloc(q, n, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  if (n > 1 && kolo_program_alloc_peers(q, n - 1) != koloSuccess) {
    kolo_program_free(q);
    return koloSystemError;
  }
  int gather = op == KOLO_STEP_RECV;
  q->in_blocked = !gather;
  q->out_blocked = gather;
  for (int k = 0; k < n - 1; k++) {
    int peer = (root + 1 + k) % n;
    q->peers[k].rank = peer;
    kolo_program_set(q, k, op, 0, KOLO_BUF_IN, peer, KOLO_BUF_OUT, peer);
    kolo_program_set_peers(q, k, k, k);
  }
  kolo_program_set(q, n - 1, KOLO_STEP_COPY, 0, KOLO_BUF_IN, root, KOLO_BUF_OUT, root);
  kolo_program_index_peers(q);
  return koloSuccess;
}

/* A non-root's program: one transfer with the root. */
static koloResult_t leaf_program(int root, int op, kolo_program *q) {
  if (kolo_program_alloc(q, 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  if (kolo_program_alloc_peers(q, 1) != koloSuccess) {
    kolo_program_free(q);
    return koloSystemError;
  }
  q->peers[0].rank = root;
  kolo_program_set(q, 0, op, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  kolo_program_index_peers(q);
  return koloSuccess;
}

koloResult_t kolo_sched_gather(int n, int rank, int root, kolo_program *p) {
  kolo_program q;
  koloResult_t res = rank == root ? root_program(n, root, KOLO_STEP_RECV, &q) : leaf_program(root, KOLO_STEP_SEND, &q);
  if (res == koloSuccess) *p = q;
  return res;
}

koloResult_t kolo_sched_scatter(int n, int rank, int root, kolo_program *p) {
  kolo_program q;
  koloResult_t res = rank == root ? root_program(n, root, KOLO_STEP_SEND, &q) : leaf_program(root, KOLO_STEP_RECV, &q);
  if (res == koloSuccess) *p = q;
  return res;
}
