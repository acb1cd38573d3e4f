/* doubling_pipes.c - the point-to-point pipes of the doubling all-reduces,
 * made at init.
 *
 * Recursive doubling and Rabenseifner's all-reduce (ring/all_reduce_rd.c,
 * all_reduce_rab.c) are multi-peer programs over point-to-point pipes, to
 * the same peers (the partners of each level and the folded rank).  Other
 * multi-peer collectives make such pipes on first use, in a handshake with
 * each peer; for the all-reduce, the commonest call, that would put the
 * handshake into its first call's latency, and a rank waiting there for a
 * peer that never calls could not be stopped by koloCommRevoke or
 * koloCommAbort, only by the timeout.  So a communicator that may run them
 * (forced by KOLO_ALGO, or chosen by the cost model: ring/algo.h) makes
 * them at init, on every channel: 2 (log2 n + 1) pipes per channel at
 * most, beside the ring's 2. */
#include "core/comm.h"
#include "core/cuda_comm.h"
#include "ring/algo_select.h"

/* Every rank of the comm decides alike: the forced algorithm, the memory
 * kind (no_auto_peers) and the rank count are checked equal at init. */
static int may_double(const struct koloComm *c) {
  if (c->nranks == 1) return 0;
  return kolo_algo_may_run(&c->algo, KOLO_ALGO_RD) || kolo_algo_may_run(&c->algo, KOLO_ALGO_RABENSEIFNER);
}

/* kolo_pipe_fn: the device ends of (peer, direction), for CUDA comms. */
static koloResult_t device_ends(struct koloComm *c, int peer, int is_send, void *arg) {
  (void)arg;
  return kolo_cuda_comm_p2p_ready(c, peer, is_send);
}

koloResult_t kolo_comm_connect_doubling(struct koloComm *c) {
  if (!may_double(c)) return koloSuccess;
  kolo_op ops[2];
  for (int i = 0; i < 2; i++)
    ops[i] = (kolo_op){KOLO_COLL_ALL_REDUCE, NULL, NULL, 0, koloFloat32, koloSum,
                       i == 0 ? KOLO_ALGO_RD : KOLO_ALGO_RABENSEIFNER, c, NULL, KOLO_PREMUL_NONE, 0, 0};
  koloResult_t res = kolo_p2p_connect(ops, 2);
  for (int i = 0; i < 2 && res == koloSuccess && c->cuda != NULL; i++) res = kolo_op_pipes(c, &ops[i], device_ends, NULL);
  return res;
}
