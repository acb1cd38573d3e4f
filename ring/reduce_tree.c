/* reduce_tree.c - reduce as a binomial tree: the broadcast tree's edges
 * (bcast_tree.c) walked from the leaves to the root, ceil(log2 n)
 * dependent hops instead of the chain's n - 1, for small messages; and as
 * the double binary tree (bcast_dbtree.c: even channels on the first
 * tree, odd on the second), about log2 n hops with no rank sending more
 * than its share of the bytes, for larger ones.
 *
 * A multi-peer program (ring/program.h), FLAT layout, one chunk per round:
 * each rank adds its children's partial results to its own input, the
 * smallest subtree first (it is ready first), and sends the sum to its
 * parent; the root writes the final value (FINAL) to its output.
 *
 *   leaf:      send in -> parent
 *   interior:  recvReduceCopy  child OP in -> scratch, ... ,
 *              recvReduceSend  last child OP scratch -> parent
 *   root:      recvReduceCopy  child OP in -> scratch, ... ,
 *              recvReduceCopy  last child OP scratch -> out, FINAL
 *
 * The running sum lives in SCRATCH[0]: a reduce gives only the root an
 * output buffer (NCCL: recvbuff is used on the root only), inputs stay as
 * they are, and the root writes its output once, with the final value (in
 * place, its in is its out: read first, written last).  With one child
 * the sum goes straight on (from in).
 *
 * No rank waits in a cycle: sends go to the parent only, receives come from
 * children only, and a pipe carries one chunk per round of the two it holds.
 * Steps: children, + 1 at a rank with a parent; with one rank, one copy.
 * (The double binary tree's root has one child: it folds that child's
 * sum with its input, FINAL, into its output.)
 */
#include "ring/schedule.h"

static void add(kolo_program *p, int *s, int op, int flags, int src_buf, int dst_buf, int to, int from) {
  kolo_program_set(p, *s, op, flags, src_buf, 0, dst_buf, 0);
  kolo_program_set_peers(p, (*s)++, to, from);
}

/* Peers: kids[0..nkids) then the parent (index nkids).  Children are
 * taken smallest subtree first: kids[] lists them largest first. */
static void fill(kolo_program *p, int parent, const int *kids, int nkids) {
  const int root = parent < 0, up = nkids;
  for (int k = 0; k < nkids; k++) p->peers[k].rank = kids[k];
  if (!root) p->peers[up].rank = parent;
  int s = 0, acc = KOLO_BUF_IN;
  for (int k = nkids - 1; k >= 0; k--) {
    const int last = k == 0;
    if (last && !root) add(p, &s, KOLO_STEP_RECV_REDUCE_SEND, 0, acc, KOLO_BUF_OUT, up, k);
    else {
      add(p, &s, KOLO_STEP_RECV_REDUCE_COPY, last ? KOLO_STEP_FINAL : 0, acc, last ? KOLO_BUF_OUT : KOLO_BUF_SCRATCH, 0,
          k);
      acc = KOLO_BUF_SCRATCH;
    }
  }
  if (nkids == 0) add(p, &s, KOLO_STEP_SEND, 0, KOLO_BUF_IN, KOLO_BUF_OUT, up, 0); /* a leaf */
}

/* The program of a rank with this parent (-1: the root) and children, of
 * a tree over n ranks. */
static koloResult_t tree_program(int n, int parent, const int *kids, int nkids, kolo_program *out) {
  kolo_program p = {0};
  if (n == 1) {
    if (kolo_program_alloc(&p, 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
    kolo_program_set(&p, 0, KOLO_STEP_COPY, KOLO_STEP_FINAL, KOLO_BUF_IN, 0, KOLO_BUF_OUT, 0);
    *out = p;
    return koloSuccess;
  }
  const int npeers = nkids + (parent >= 0);
  if (kolo_program_alloc(&p, nkids > 0 ? nkids : 1, KOLO_LAYOUT_FLAT) != koloSuccess ||
      kolo_program_alloc_peers(&p, npeers) != koloSuccess) {
    kolo_program_free(&p);
    return koloSystemError;
  }
  fill(&p, parent, kids, nkids);
  kolo_program_index_peers(&p);
  *out = p;
  return koloSuccess;
}

koloResult_t kolo_sched_reduce_tree(int n, int rank, int root, kolo_program *out) {
  int parent, kids[32], nkids = kolo_sched_binomial_peers(n, rank, root, &parent, kids);
  return tree_program(n, parent, kids, nkids, out);
}

koloResult_t kolo_sched_reduce_dbtree(int n, int rank, int root, int channel, kolo_program *out) {
  int parent, kids[2], nkids = kolo_sched_dbtree_peers(n, rank, root, channel, &parent, kids);
  return tree_program(n, parent, kids, nkids, out);
}
