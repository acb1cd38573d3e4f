/* ag_pipes.c - the point-to-point pipes of Bruck's all-gather, made at
 * init.
 *
 * Bruck's all-gather (ring/all_gather_bruck.c) is a multi-peer program:
 * rank r sends to r - 2^k and receives from r + 2^k (mod n) at each level
 * k.  Made on first use, as all-to-all's are, the handshake would land in
 * the latency of the first small all-gather, the very call Bruck's is
 * chosen to make fast, and a rank waiting there for a peer that never
 * calls could only be stopped by the timeout, not by koloCommRevoke or
 * koloCommAbort (core/doubling_pipes.c and tree_pipes.c have the same
 * reasons).  So a communicator whose all-gathers may run it (host memory
 * and 3 ranks or more, or KOLO_ALGO's allgather entry names bruck:
 * ring/algo.h) makes them at init, on every
 * channel: at most 2 ceil(log2 n) pipes per channel, most of them shared
 * with recursive doubling's and the tree's.
 *
 * Every rank's own program names all the pipes it uses, and both ends of
 * each: rank r asks for its send to r - 2^k, and rank r - 2^k, whose
 * program receives from (r - 2^k) + 2^k, for that pipe's other end. */
#include "core/comm_state.h"
#include "core/doubling_pipes.h"
#include "core/ag_pipes.h"
#include "ring/algo_select.h"

/* Every rank decides alike: KOLO_ALGO and the rank count are checked equal
 * at init. */
static int may_bruck(const struct koloComm *c) {
  if (c->nranks == 1 || !kolo_ag_may_run(&c->algo, KOLO_ALGO_BRUCK)) return 0;
  return c->nranks > 2 || !kolo_ag_may_run(&c->algo, KOLO_ALGO_RING); /* 2 ranks: the model keeps the ring */
}

koloResult_t kolo_comm_connect_bruck(struct koloComm *c) {
  if (!may_bruck(c)) return koloSuccess;
  const kolo_op op = kolo_pipes_op(c, KOLO_COLL_ALL_GATHER, KOLO_ALGO_BRUCK);
  return kolo_comm_connect_at_init(c, &op, 1);
}
