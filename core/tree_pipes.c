/* tree_pipes.c - the point-to-point pipes of the broadcast trees, made at
 * init.
 *
 * The tree broadcast (ring/bcast_tree.c) is a multi-peer program: rank x
 * sends to x + 2^j and receives from x - 2^j (mod n), for the 2^j < n a
 * tree of some root uses.  Made on first use, as all-to-all's are, the
 * handshake would land in the latency of the first small broadcast, the
 * very call the tree is chosen to make fast, and a rank waiting there for
 * a peer that never calls could only be stopped by the timeout, not by
 * koloCommRevoke or koloCommAbort (core/doubling_pipes.c has the same
 * reasons for the all-reduce).  So a communicator whose broadcasts may run
 * the tree (KOLO_ALGO forces it, or the model may choose it: 3 ranks or
 * more, host memory or KOLO_ALGO allowing it) makes them at init, on every
 * channel: at most 2 ceil(log2 n) pipes per channel, most of them shared
 * with recursive doubling's.
 *
 * Rank x asks for the pipes of the trees rooted at x (its sends to x + 2^j)
 * and at x - 2^j (its receive from x - 2^j): every pair (y, y + 2^j) is
 * then asked for by both of its ends, and no other.
 *
 * The double binary tree (ring/bcast_dbtree.c) relabels ranks from the
 * root too, but its peers lie 2^j away in either direction (and, with an
 * even rank count, its second tree's top P - 1 from the root): where it may
 * run, rank x asks for the pipes of its programs for every root, which
 * both ends of each pipe ask for alike, on both of its trees' channels.
 * About 4 log2 n pipes per channel; the n small programs are built once.
 *
 * The reduce's binomial tree (ring/reduce_tree.c) walks the broadcast
 * tree's edges the other way: where it may run (KOLO_ALGO's reduce entry
 * or a tuning override names it), rank x asks for the reduce programs of
 * roots x and x - 2^j, whose pipes, y + 2^j to y, both ends ask for by the
 * same argument; its double binary tree, every root's, as the broadcast's. */
#include <stdlib.h>

#include "core/comm_state.h"
#include "core/doubling_pipes.h"
#include "core/tree_pipes.h"
#include "ring/algo_select.h"

/* Every rank decides alike: KOLO_ALGO, the memory kind and the rank count
 * are checked equal at init. */
static int may_tree(const struct koloComm *c, int algo) {
  if (c->nranks == 1 || !kolo_bcast_may_run(&c->algo, algo)) return 0;
  return c->nranks > 2 || !kolo_bcast_may_run(&c->algo, KOLO_ALGO_RING); /* 2 ranks: the model keeps the chain */
}

/* The reduce's trees (ring/reduce_tree.c) likewise. */
static int may_reduce_tree(const struct koloComm *c, int algo) {
  if (c->nranks == 1 || !kolo_reduce_may_run(&c->algo, algo)) return 0;
  return c->nranks > 2 || !kolo_reduce_may_run(&c->algo, KOLO_ALGO_RING);
}

/* The binomial tree's roots x - 2^j (and x), the double tree's every
 * root: its peers depend on the root's distance in both directions. */
koloResult_t kolo_comm_connect_tree(struct koloComm *c) {
  const int n = c->nranks, binomial = may_tree(c, KOLO_ALGO_TREE), dbtree = may_tree(c, KOLO_ALGO_DBTREE);
  const int reduce = may_reduce_tree(c, KOLO_ALGO_TREE), reduce_db = may_reduce_tree(c, KOLO_ALGO_DBTREE);
  if (!binomial && !dbtree && !reduce && !reduce_db) return koloSuccess;
  kolo_op *ops = malloc((size_t)(2 * n + 66) * sizeof *ops);
  if (ops == NULL) return kolo_error(&c->err, koloSystemError, "out of memory connecting the broadcast trees");
  int nops = 0;
  for (int d = 0; binomial && d < n && nops < 33; d = d == 0 ? 1 : 2 * d)
    ops[nops++] = kolo_pipes_op(c, KOLO_COLL_BROADCAST, kolo_bcast_arg((c->rank - d + n) % n, KOLO_ALGO_TREE, n));
  for (int d = 0, k = 0; reduce && d < n && k < 33; d = d == 0 ? 1 : 2 * d, k++) /* the same roots, edges reversed */
    ops[nops++] = kolo_pipes_op(c, KOLO_COLL_REDUCE, kolo_reduce_arg((c->rank - d + n) % n, KOLO_ALGO_TREE, n));
  for (int root = 0; dbtree && root < n; root++)
    ops[nops++] = kolo_pipes_op(c, KOLO_COLL_BROADCAST, kolo_bcast_arg(root, KOLO_ALGO_DBTREE, n));
  for (int root = 0; reduce_db && root < n; root++)
    ops[nops++] = kolo_pipes_op(c, KOLO_COLL_REDUCE, kolo_reduce_arg(root, KOLO_ALGO_DBTREE, n));
  koloResult_t res = kolo_comm_connect_at_init(c, ops, nops);
  free(ops);
  return res;
}
