/* all_reduce_rd.c - recursive doubling all-reduce: log2(p) exchanges of the
 * whole message, for small messages, where the ring's 2(n-1) dependent
 * steps cost more than the bytes.
 *
 * A multi-peer program (ring/program.h), FLAT layout, one unblocked buffer
 * each way: every step names the rank's whole chunk of the round.  Pairs
 * and the fold of the ranks beyond a power of two: ring/doubling.h.  For a
 * rank of index q, at each level j (partner q ^ 2^j):
 *
 *   send            v -> partner                 v: in at level 0, else out
 *   recvReduceCopy  recv OP v -> out             (partner's half first when
 *                                                 it holds the lower ranks)
 *
 * the last level's recvReduceCopy FINAL (the average divides there, once).
 * A rank with an extra rank folded in starts with recvReduceCopy (its
 * input and the extra's, the extra's first) and ends by sending out back
 * to it; an extra rank only sends its input and receives the result.
 *
 * Both partners send before they receive: a chunk is at most half of a
 * pipe's slots (program.h), so the send never waits unless the partner is
 * a whole exchange behind on that pipe, and the rank furthest behind can
 * always move.  Every rank reduces each element with the same operands in
 * the same order (doubling.h), so the results are the same on all ranks.
 * Steps: 2 log2(p), + 2 with a fold; 2 on an extra rank; 1 copy on 1 rank.
 */
#include "ring/doubling.h"
#include "ring/schedule.h"

/* Appends step op on the rank's one chunk, with peer index `peer` as its
 * destination or source. */
static void add(kolo_program *p, int *s, int op, int flags, int src_buf, int peer) {
  kolo_program_set(p, *s, op, flags, src_buf, 0, KOLO_BUF_OUT, 0);
  kolo_program_set_peers(p, (*s)++, kolo_step_sends(op) ? peer : 0, kolo_step_recvs(op) ? peer : 0);
}

/* An extra rank: its input to its partner, the result back. */
static koloResult_t extra_program(int rank, kolo_program *p) {
  if (kolo_program_alloc(p, 2, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  if (kolo_program_alloc_peers(p, 1) != koloSuccess) return koloSystemError;
  p->peers[0].rank = rank + 1;
  int s = 0;
  add(p, &s, KOLO_STEP_SEND, 0, KOLO_BUF_IN, 0);
  add(p, &s, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, 0);
  return koloSuccess;
}

/* A rank of the doubling: [fold in,] the levels, [fold out].  Peer index
 * j is the partner of level j, the folded rank comes last. */
static koloResult_t doubling_program(int n, int rank, kolo_program *p) {
  const int q = kolo_rd_index(n, rank), levels = kolo_log2(kolo_pow2_floor(n));
  const int folded = kolo_rd_folded(n, rank);
  if (kolo_program_alloc(p, 2 * levels + (folded >= 0 ? 2 : 0), KOLO_LAYOUT_FLAT) != koloSuccess ||
      kolo_program_alloc_peers(p, levels + (folded >= 0)) != koloSuccess)
    return koloSystemError;
  int s = 0, v = KOLO_BUF_IN;
  if (folded >= 0) {
    p->peers[levels].rank = folded;
    add(p, &s, KOLO_STEP_RECV_REDUCE_COPY, 0, KOLO_BUF_IN, levels); /* the extra's input first */
    v = KOLO_BUF_OUT;
  }
  for (int j = 0; j < levels; j++) {
    p->peers[j].rank = kolo_rd_rank(n, q ^ (1 << j));
    int flags = (j == levels - 1 ? KOLO_STEP_FINAL : 0) | ((q & (1 << j)) ? 0 : KOLO_STEP_SRC_FIRST);
    add(p, &s, KOLO_STEP_SEND, 0, v, j);
    add(p, &s, KOLO_STEP_RECV_REDUCE_COPY, flags, v, j);
    v = KOLO_BUF_OUT;
  }
  if (folded >= 0) add(p, &s, KOLO_STEP_SEND, 0, KOLO_BUF_OUT, levels);
  return koloSuccess;
}

static koloResult_t rd_program(int n, int rank, kolo_program *p) {
  return kolo_rd_index(n, rank) < 0 ? extra_program(rank, p) : doubling_program(n, rank, p);
}

koloResult_t kolo_sched_all_reduce_rd(int n, int rank, kolo_program *out) {
  return kolo_sched_peer_all_reduce(n, rank, KOLO_LAYOUT_FLAT, rd_program, out);
}
