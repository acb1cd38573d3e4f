/* bcast_dbtree.c - broadcast down two binary trees, half the channels on
 * each (the double binary tree of Sanders, Speck and Träff, 2009; NCCL's
 * trees have the same shape).
 *
 * Why: the chain takes n - 1 hops before the last rank has a chunk, the
 * binomial tree (bcast_tree.c) ceil(log2 n) hops but its root sends every
 * byte ceil(log2 n) times.  A binary tree takes about log2 n hops and
 * sends every byte at most twice from any rank; two trees in which every
 * rank is an inner node of at most one, each carrying half the data (the
 * even channels run the first, the odd channels the second), make every
 * rank send about as many bytes as the chain does.
 *
 * Ranks are relabelled v = (rank - root + n) % n, so the root is 0.  The
 * m = n - 1 others carry labels 1..m in each tree:
 *
 *   tree 0: label = v;
 *   tree 1: m even: label = m + 1 - v (the mirror); m odd: label = v + 1,
 *           and v = m takes label 1 (a shift).
 *
 * Over labels 1..m the tree is the in-order binary tree: with L = the
 * lowest set bit of a, label a's children are a - L/2 and a + d for the
 * largest power of two d <= L/2 with a + d <= m; its root is the largest
 * power of two P <= m, whose parent is the root rank.  Labels with L = 1
 * (odd) are leaves, so in tree 0 every odd v is a leaf, and in tree 1 every
 * even v (its label is odd; with m odd, v = m is a leaf in both).
 *
 * Per round and channel, as in the binomial tree (the same FLAT layout,
 * the same argument against waiting in a cycle: a rank waits for its
 * parent, or for a child to free a slot, and leaves only receive):
 *
 *   root:      copySend in -> out and to label P
 *   interior:  recvCopySend parent -> out and the first child, send out -> the second
 *   leaf:      recv parent -> out
 */
#include "ring/schedule.h"

/* The largest power of two <= m (m >= 1). */
static int pow2_floor(int m) {
  int p = 1;
  while (p <= m / 2) p *= 2;
  return p;
}

/* Children of label a among 1..m (0, 1 or 2), left first. */
static int label_children(int a, int m, int kids[2]) {
  int low = a & -a, k = 0;
  if (low < 2) return 0;
  kids[k++] = a - low / 2;
  for (int d = low / 2; d >= 1; d /= 2)
    if (a + d <= m) {
      kids[k++] = a + d;
      break;
    }
  return k;
}

/* The parent label of a (not the tree's root): a's neighbour 2^j away
 * whose children include a. */
static int label_parent(int a, int m) {
  for (int d = 1; d <= m; d *= 2)
    for (int q = a - d; q <= a + d; q += 2 * d) {
      int kids[2], k = q >= 1 && q <= m ? label_children(q, m, kids) : 0;
      for (int i = 0; i < k; i++)
        if (kids[i] == a) return q;
    }
  return 0; /* unreachable for a != the root (tests/test_schedule.cc) */
}

static int label_of(int v, int m, int tree) {
  if (tree == 0) return v;
  if (m % 2 == 0) return m + 1 - v;
  return v < m ? v + 1 : 1;
}

static int v_of(int label, int m, int tree) {
  if (tree == 0) return label;
  if (m % 2 == 0) return m + 1 - label;
  return label >= 2 ? label - 1 : m;
}

/* Relabelled v's parent and children as ranks; returns the children. */
static int tree_peers(int n, int root, int v, int tree, int *parent, int kids[2]) {
  const int m = n - 1, a = label_of(v, m, tree), top = pow2_floor(m);
  const int pv = a == top ? 0 : v_of(label_parent(a, m), m, tree);
  *parent = (pv + root) % n;
  int k = label_children(a, m, kids);
  for (int i = 0; i < k; i++) kids[i] = (v_of(kids[i], m, tree) + root) % n;
  return k;
}

int kolo_sched_dbtree_peers(int n, int rank, int root, int channel, int *parent, int kids[2]) {
  int v = (rank - root + n) % n, nkids = 0;
  *parent = -1;
  if (n > 1 && v == 0) kids[nkids++] = (v_of(pow2_floor(n - 1), n - 1, channel % 2) + root) % n;
  else if (n > 1) nkids = tree_peers(n, root, v, channel % 2, parent, kids);
  return nkids;
}

koloResult_t kolo_sched_broadcast_dbtree(int n, int rank, int root, int channel, kolo_program *out) {
  int parent, kids[2], nkids = kolo_sched_dbtree_peers(n, rank, root, channel, &parent, kids);
  return kolo_sched_tree_program(parent, kids, nkids, out);
}
