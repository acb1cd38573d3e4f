/* all_reduce_oneshot.c - the one-shot all-reduce: every rank sends its
 * whole input to every other rank and reduces all n inputs itself.  One
 * exchange (the direct all-reduce's two, recursive doubling's log2 n), for
 * the ranks of one host, at n - 1 times the bytes each rank sends: a
 * small-message algorithm.
 *
 * A multi-peer program (ring/program.h) in the FLAT layout, one block per
 * buffer: channel c's chunk of a round is the same part of every rank's
 * buffers.  Rank r sends in[0] to r+1, ..., r+n-1 (peer index d-1 is rank
 * r+d), then folds the n inputs in rank order, 0 first:
 *
 *   x[0] OP x[1] OP ... OP x[n-1]   (left to right, the same on every rank)
 *
 * so every rank computes the same bits.  The running result lives in
 * SCRATCH[0]: OUT may be IN (in place), and rank r's own input must stay
 * there until its turn.  Its own turn is a local `reduce` (scratch OP in);
 * where its input comes first or second it rides along with a receive
 * instead (recvReduceCopy with src IN).  The last fold is FINAL (an
 * average divides there, in the same rounding as the fold) and writes OUT;
 * rank n-1, whose own input is last, folds it into SCRATCH[0] and copies
 * that to OUT.
 *
 * No deadlock: each pipe carries one chunk per round and a chunk is at most
 * half a pipe's slots (core/op.h), so the sends never wait: a rank that
 * sends in round t+1 has received round t from every peer, so they have
 * all finished their round t sends, and a pipe never holds more than two.
 * Steps: (n-1) sends, n-1 receives, at most 2 local steps.
 */
#include "ring/schedule.h"

/* Where the running result is while the program folds. */
enum { ACC_NONE, ACC_OWN /* rank 0: its own input, in IN */, ACC_SCRATCH };

typedef struct {
  kolo_program *p;
  int s, acc;
} folder;

static void add(folder *f, int op, int flags, int src_buf, int dst_buf, int peer) {
  kolo_program_set(f->p, f->s, op, flags, src_buf, 0, dst_buf, 0);
  kolo_program_set_peers(f->p, f->s++, kolo_step_sends(op) ? peer : 0, kolo_step_recvs(op) ? peer : 0);
}

/* Folds in rank k's input (a receive from peer index `peer`, or this
 * rank's own when k == r) into the running result; the last fold writes
 * OUT.  Returns the next k (a receive that carries the own input along
 * covers two). */
static int fold(folder *f, int n, int r, int k) {
  const int last = k == n - 1, next_own = k + 1 == r;
  const int dst = last ? KOLO_BUF_OUT : KOLO_BUF_SCRATCH, fin = last ? KOLO_STEP_FINAL : 0;
  const int peer = (k - r + n) % n - 1;
  if (k == r) { /* own turn: rank 0 waits for the next receive; others reduce locally */
    if (f->acc == ACC_NONE) f->acc = ACC_OWN;
    else add(f, KOLO_STEP_REDUCE, fin, KOLO_BUF_IN, KOLO_BUF_SCRATCH, 0);
    if (last) add(f, KOLO_STEP_COPY, 0, KOLO_BUF_SCRATCH, KOLO_BUF_OUT, 0);
    return k + 1;
  }
  if (f->acc == ACC_NONE && next_own) { /* x[k] OP own: both at once */
    const int to = r == n - 1 ? KOLO_BUF_OUT : KOLO_BUF_SCRATCH;
    add(f, KOLO_STEP_RECV_REDUCE_COPY, r == n - 1 ? KOLO_STEP_FINAL : 0, KOLO_BUF_IN, to, peer);
    f->acc = ACC_SCRATCH;
    return k + 2;
  }
  if (f->acc == ACC_NONE) add(f, KOLO_STEP_RECV, 0, KOLO_BUF_IN, KOLO_BUF_SCRATCH, peer);
  else
    add(f, KOLO_STEP_RECV_REDUCE_COPY, fin | KOLO_STEP_SRC_FIRST, f->acc == ACC_OWN ? KOLO_BUF_IN : KOLO_BUF_SCRATCH,
        dst, peer);
  f->acc = ACC_SCRATCH;
  return k + 1;
}

static koloResult_t oneshot_program(int n, int r, kolo_program *p) {
  if (kolo_program_alloc(p, 2 * n, KOLO_LAYOUT_FLAT) != koloSuccess || kolo_program_alloc_peers(p, n - 1) != koloSuccess)
    return koloSystemError;
  for (int d = 1; d < n; d++) p->peers[d - 1].rank = (r + d) % n;
  folder f = {p, 0, ACC_NONE};
  for (int d = 1; d < n; d++) add(&f, KOLO_STEP_SEND, 0, KOLO_BUF_IN, KOLO_BUF_OUT, d - 1);
  for (int k = 0; k < n;) k = fold(&f, n, r, k);
  p->nsteps = f.s;
  return koloSuccess;
}

koloResult_t kolo_sched_all_reduce_oneshot(int n, int rank, kolo_program *out) {
  return kolo_sched_peer_all_reduce(n, rank, KOLO_LAYOUT_FLAT, oneshot_program, out);
}
