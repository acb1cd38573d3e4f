/* tree_pipes.c - the point-to-point pipes of the broadcast tree, made at
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
 * then asked for by both of its ends, and no other. */
#include "core/comm.h"
#include "ring/algo_select.h"

/* Every rank decides alike: KOLO_ALGO, the memory kind and the rank count
 * are checked equal at init. */
static int may_tree(const struct koloComm *c) {
  if (c->nranks == 1 || !kolo_bcast_may_run(&c->algo, KOLO_ALGO_TREE)) return 0;
  return c->nranks > 2 || !kolo_bcast_may_run(&c->algo, KOLO_ALGO_RING); /* 2 ranks: the model keeps the chain */
}

koloResult_t kolo_comm_connect_tree(struct koloComm *c) {
  if (!may_tree(c)) return koloSuccess;
  kolo_op ops[33];
  int nops = 0, n = c->nranks;
  for (int d = 0; d < n && nops < 33; d = d == 0 ? 1 : 2 * d) {
    int root = (c->rank - d + n) % n;
    ops[nops++] = (kolo_op){KOLO_COLL_BROADCAST, NULL, NULL, 0, koloFloat32, koloSum,
                            kolo_bcast_arg(root, KOLO_ALGO_TREE, n), c, NULL, KOLO_PREMUL_NONE, 0, 0};
  }
  return kolo_comm_connect_at_init(c, ops, nops);
}
