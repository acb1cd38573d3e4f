/* doubling_pipes.c - the point-to-point pipes of the doubling all-reduces,
 * made at init.
 *
 * Recursive doubling, Rabenseifner's and the direct all-reduce
 * (ring/all_reduce_rd.c, all_reduce_rab.c, all_reduce_direct.c) are
 * multi-peer programs over point-to-point pipes (the first two to the same
 * peers: the partners of each level and the folded rank).  Other
 * multi-peer collectives make such pipes on first use, in a handshake with
 * each peer; for the all-reduce, the commonest call, that would put the
 * handshake into its first call's latency, and a rank waiting there for a
 * peer that never calls could not be stopped by koloCommRevoke or
 * koloCommAbort, only by the timeout.  So a communicator that may run them
 * (forced by KOLO_ALGO, or chosen by the cost model: ring/algo.h) makes
 * them at init, on every channel: 2 (log2 n + 1) pipes per channel at
 * most for the doubling, 2 (n - 1) for the direct one (one host only),
 * beside the ring's 2.  Shared memory pipes take memory as slots are
 * first used, so pipes only the small calls use stay small. */
#include "core/comm_state.h"
#include "core/p2p_pipes.h"
#include "core/doubling_pipes.h"
#include "core/mem_kind.h"
#include "ring/algo_select.h"

/* Every rank of the comm decides alike: the forced algorithm, the memory
 * kind (no_auto_peers), the rank and host counts are checked equal at
 * init. */
static int may_run(const struct koloComm *c, int algo) {
  if (c->nranks == 1 || !kolo_algo_is_multi_peer(algo)) return 0;
  return kolo_algo_may_run(&c->algo, algo) && kolo_algo_possible(&c->algo, algo);
}

koloResult_t kolo_comm_connect_at_init(struct koloComm *c, const kolo_op *ops, int n) {
  if (n == 0) return koloSuccess;
  koloResult_t res = kolo_p2p_connect(ops, n);
  for (int i = 0; i < n && res == koloSuccess && c->kind != NULL; i++)
    res = kolo_op_pipes(c, &ops[i], c->kind->p2p_ready, NULL);
  return res;
}

koloResult_t kolo_comm_connect_doubling(struct koloComm *c) {
  kolo_op ops[KOLO_ALGO_NUM];
  int n = 0;
  for (int a = 0; a < KOLO_ALGO_NUM; a++)
    if (may_run(c, a))
      ops[n++] = kolo_pipes_op(c, KOLO_COLL_ALL_REDUCE, a);
  return kolo_comm_connect_at_init(c, ops, n);
}
