/* bcast_tree.c - broadcast as a binomial tree: ceil(log2 n) dependent hops
 * instead of the chain's n - 1, for small messages, where the hops' latency
 * costs more than the bytes (ring/algo.h chooses).
 *
 * Ranks are relabelled v = (rank - root + n) % n, so the root is 0.  The
 * parent of v > 0 is v without its highest set bit; its children are
 * v + 2^j for every 2^j above v's highest bit with v + 2^j < n.  So every
 * peer of a rank lies at a distance 2^j (mod n) from it, for any root:
 * the pipes a communicator may connect ahead (core/tree_pipes.c).
 *
 * A multi-peer program (ring/program.h), FLAT layout, one unblocked buffer
 * each way, one chunk per round, so the tree is pipelined over rounds:
 *
 *   root:      copySend in -> out and to its first child,  send in -> the rest
 *   interior:  recvCopySend parent -> out and the first,   send out -> the rest
 *   leaf:      recv parent -> out
 *
 * (NCCL's rule: the root's recvbuff receives the data too; in place, the
 * copy-and-send writes the slot only.)  Children are served largest
 * subtree first (highest 2^j first), so the deepest leaves start early.
 *
 * No rank waits in a cycle: a rank waits for its parent (receive) or for a
 * child to free a slot (send), a child is at most one round behind on a
 * pipe that holds two chunks (a chunk is half a pipe's slots), and the
 * leaves only receive.  Steps: 1 + children; with one rank, one copy.
 */
#include "ring/schedule.h"

/* The highest power of two <= v (v >= 1). */
static int top_bit(int v) {
  int b = 1;
  while (b <= v / 2) b *= 2;
  return b;
}

/* The children's distances 2^j (largest first) of relabelled rank v among
 * n; returns how many. */
static int child_offsets(int n, int v, int offs[32]) {
  int lo = v == 0 ? 1 : 2 * top_bit(v), k = 0, j = 1;
  while (j < lo) j *= 2; /* the lowest 2^j above v's highest bit */
  int first = j;
  while (v + j < n && j > 0) j *= 2; /* one past the largest child */
  for (j /= 2; j >= first; j /= 2) offs[k++] = j;
  return k;
}

/* Steps: the chunk from the parent (or in, at the root) to out and the
 * first child, then out (in) to each other child; a root without children
 * (one rank) copies in to out. */
static void fill_tree(kolo_program *q, int parent, const int *kids, int nkids) {
  const int has_parent = parent >= 0;
  if (has_parent) q->peers[nkids].rank = parent; /* peer nkids: the parent */
  for (int k = 0; k < nkids; k++) q->peers[k].rank = kids[k];
  int first = has_parent ? (nkids > 0 ? KOLO_STEP_RECV_COPY_SEND : KOLO_STEP_RECV)
                         : (nkids > 0 ? KOLO_STEP_COPY_SEND : KOLO_STEP_COPY);
  kolo_program_set(q, 0, first, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
  kolo_program_set_peers(q, 0, 0, has_parent ? nkids : 0);
  for (int k = 1; k < nkids; k++) {
    kolo_program_set(q, k, KOLO_STEP_SEND, 0, has_parent ? KOLO_BUF_OUT : KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
    kolo_program_set_peers(q, k, k, 0);
  }
}

koloResult_t kolo_sched_tree_program(int parent, const int *kids, int nkids, kolo_program *out) {
  kolo_program q = {0};
  const int npeers = nkids + (parent >= 0);
  if (kolo_program_alloc(&q, nkids > 0 ? nkids : 1, KOLO_LAYOUT_FLAT) != koloSuccess ||
      (npeers > 0 && kolo_program_alloc_peers(&q, npeers) != koloSuccess)) {
    kolo_program_free(&q);
    return koloSystemError;
  }
  fill_tree(&q, parent, kids, nkids);
  if (npeers > 0) kolo_program_index_peers(&q);
  *out = q;
  return koloSuccess;
}

int kolo_sched_binomial_peers(int n, int rank, int root, int *parent, int kids[32]) {
  int offs[32], v = (rank - root + n) % n;
  int nkids = n == 1 ? 0 : child_offsets(n, v, offs);
  for (int k = 0; k < nkids; k++) kids[k] = (rank + offs[k]) % n;
  *parent = v > 0 ? (rank - top_bit(v) + n) % n : -1;
  return nkids;
}

koloResult_t kolo_sched_broadcast_tree(int n, int rank, int root, kolo_program *out) {
  int parent, kids[32], nkids = kolo_sched_binomial_peers(n, rank, root, &parent, kids);
  return kolo_sched_tree_program(parent, kids, nkids, out);
}
