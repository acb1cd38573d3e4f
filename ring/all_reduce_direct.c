/* all_reduce_direct.c - the direct (two-shot) all-reduce: every rank talks
 * to every other rank.  Two dependent exchanges instead of the ring's
 * 2(n-1) steps and recursive doubling's log2(n), for the ranks of one host,
 * where every pair of ranks has a pipe of its own (shared memory, NVLink).
 *
 * A multi-peer program (ring/program.h) in the RING layout: a round has n
 * chunks per channel, and rank r owns chunk r.  At distance d = 1 .. n-1:
 *
 *   reduce-scatter  send            in[r+d] -> rank r+d
 *                   recvReduceCopy  recv(from r-d) OP v[r] -> out[r]
 *                                   v: in at d = 1, else out; FINAL at d = n-1
 *   all-gather      send            out[r] -> rank r+d
 *                   recv            recv(from r-d) -> out[r-d]
 *
 * (indices mod n), each phase's n-1 sends before its n-1 receives: a rank
 * then waits on no peer before it has handed all of them their part, so a
 * phase costs one wait, not n-1 waits one after another (which is what the
 * sends and receives taken in turn cost where ranks outnumber cores:
 * measured with 4 processes on 2 cores, two builds running beside them,
 * 40 us against 16-18 us at 512 B).
 * Rank r+d is peer index d-1, so the rank d behind, r+(n-d), is index
 * n-d-1.
 *
 * Bits.  Chunk r is reduced by rank r alone, x[r-n+1] OP (... OP (x[r-1]
 * OP x[r])), and copied to the others: the same bits on every rank.  The
 * one-shot form (every rank sends its whole input to every peer and reduces
 * all n of them itself) halves the latency again but gives each rank the
 * same bits only if each reduces in the same order, which needs its own
 * input kept beside the running result: a buffer more than in-place calls
 * have.  kolo does not have it.
 *
 * No deadlock: each pipe carries two chunks per round (in[k] then out[r]),
 * and a chunk is at most half a pipe's slots, so a phase's sends never
 * wait: a rank that sends in round t+1 has received round t's all-gather
 * from every peer, so they have consumed its round t reduce-scatter chunk,
 * and a pipe never holds more than two.
 * Steps: 4(n-1); 1 copy on 1 rank.
 */
#include "ring/schedule.h"

/* Appends step op on chunk `chunk` (its src and dst: one index, as the
 * RING layout wants) with peer index `peer`. */
static void add(kolo_program *p, int *s, int op, int flags, int src_buf, int chunk, int peer) {
  kolo_program_set(p, *s, op, flags, src_buf, chunk, KOLO_BUF_OUT, chunk);
  kolo_program_set_peers(p, (*s)++, kolo_step_sends(op) ? peer : 0, kolo_step_recvs(op) ? peer : 0);
}

static koloResult_t direct_program(int n, int r, kolo_program *p) {
  if (kolo_program_alloc(p, 4 * (n - 1), KOLO_LAYOUT_RING) != koloSuccess ||
      kolo_program_alloc_peers(p, n - 1) != koloSuccess)
    return koloSystemError;
  for (int d = 1; d < n; d++) p->peers[d - 1].rank = (r + d) % n;
  int s = 0;
  for (int d = 1; d < n; d++) add(p, &s, KOLO_STEP_SEND, 0, KOLO_BUF_IN, (r + d) % n, d - 1);
  for (int d = 1; d < n; d++)
    add(p, &s, KOLO_STEP_RECV_REDUCE_COPY, d == n - 1 ? KOLO_STEP_FINAL : 0, d == 1 ? KOLO_BUF_IN : KOLO_BUF_OUT, r,
        n - d - 1);
  for (int d = 1; d < n; d++) add(p, &s, KOLO_STEP_SEND, 0, KOLO_BUF_OUT, r, d - 1);
  for (int d = 1; d < n; d++) add(p, &s, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, (r - d + n) % n, n - d - 1);
  return koloSuccess;
}

koloResult_t kolo_sched_all_reduce_direct(int n, int rank, kolo_program *out) {
  return kolo_sched_peer_all_reduce(n, rank, KOLO_LAYOUT_RING, direct_program, out);
}
