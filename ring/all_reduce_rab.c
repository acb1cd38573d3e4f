/* all_reduce_rab.c - Rabenseifner's all-reduce: a reduce-scatter by
 * recursive halving, then an all-gather by recursive doubling.  The ring's
 * bytes (2(p-1)/p of the message per rank) in 2 log2(p) exchanges instead
 * of 2(n-1) steps: for medium messages.
 *
 * A multi-peer program (ring/program.h) in the RING layout: a round has n
 * chunks per channel (n ranks), and the halving splits the chunk indices.
 * Pairs and the fold beyond a power of two as in recursive doubling
 * (ring/doubling.h).  At halving level j (bit b = k-1-j of index q, partner
 * q ^ 2^b) the rank's current range of chunks [lo, hi) splits at
 * mid = lo + (hi-lo)/2; the half of the lower indices stays with the
 * lower partner.  Each rank sends the partner's half and receives-reduces
 * its own, chunk by chunk, its sends two chunks ahead of its receives
 * (send 0, send 1, receive 0, send 2, receive 1, ...):
 *
 *   send            v[c] -> partner, c in the partner's half   v: in at level 0, else out
 *   recvReduceCopy  recv OP v[c] -> out[c], c in its own half  (lower ranks' part first)
 *
 * the last level's reductions FINAL.  Then, with bits 0 .. k-1 again, the
 * doubling gathers: send out[c] for the rank's range, receive the
 * partner's (recv -> out[c]).  A rank with an extra rank folded in first
 * receives-reduces every chunk from it, and at the end sends every chunk
 * back; the extra rank sends its input and receives the result.
 *
 * Two ahead, not one.  Sending one and receiving one in turn makes every
 * chunk a wait on the partner's latest send: about 2(n-1) waits in a row,
 * the ring's count, each a time slice where ranks outnumber cores.  With
 * two in flight the partner's next chunk is mostly there when a rank looks.
 * No deadlock: a pipe holds two chunks (a chunk is half its slots), so a
 * rank's send of chunk j waits at most for the partner to take chunk j-2
 * of that pipe; every step the partner makes before that receive needs
 * only sends this rank made before its own send j (its sends up to j-1
 * and, for them, this rank's receives up to j-3), so each wait is on a
 * step the other side can reach: the same holds from one level, phase or
 * round to the next on a pipe, whose chunks just continue in order.
 *
 * Each element is reduced once, by the rank whose range holds it, and
 * copied to the others: the same bits on every rank.
 */
#include "ring/doubling.h"
#include "ring/schedule.h"

#define MAX_LEVELS 31

typedef struct {
  kolo_program *p;
  int s; /* steps so far */
} builder;

static void add(builder *b, int op, int flags, int src_buf, int chunk, int peer) {
  kolo_program_set(b->p, b->s, op, flags, src_buf, chunk, KOLO_BUF_OUT, chunk);
  kolo_program_set_peers(b->p, b->s++, kolo_step_sends(op) ? peer : 0, kolo_step_recvs(op) ? peer : 0);
}

/* Sends chunks [slo, shi) and receives chunks [rlo, rhi) with `op`, with
 * one peer, the sends two ahead: send 0, send 1, receive 0, send 2,
 * receive 1, ... (the header says why that cannot deadlock). */
static void exchange(builder *b, int slo, int shi, int rlo, int rhi, int op, int flags, int src_buf, int peer) {
  int ns = shi - slo, nr = rhi - rlo;
  for (int i = 0; i < ns && i < 2; i++) add(b, KOLO_STEP_SEND, 0, src_buf, slo + i, peer);
  for (int i = 0; i < nr || i + 2 < ns; i++) {
    if (i < nr) add(b, op, flags, src_buf, rlo + i, peer);
    if (i + 2 < ns) add(b, KOLO_STEP_SEND, 0, src_buf, slo + i + 2, peer);
  }
}

/* The ranges of the halving: before level j, [lo[j], hi[j]); the rank
 * keeps [klo[j], khi[j]) and sends the rest. */
typedef struct {
  int lo[MAX_LEVELS], hi[MAX_LEVELS], klo[MAX_LEVELS], khi[MAX_LEVELS];
} halves;

static void plan_halves(int n, int q, int levels, halves *h) {
  int lo = 0, hi = n;
  for (int j = 0; j < levels; j++) {
    int mid = lo + (hi - lo) / 2, upper = (q >> (levels - 1 - j)) & 1;
    h->lo[j] = lo;
    h->hi[j] = hi;
    h->klo[j] = lo = upper ? mid : lo;
    h->khi[j] = hi = upper ? hi : mid;
  }
}

/* The other half of level j: [lo, klo) or [khi, hi). */
static void other_half(const halves *h, int j, int *olo, int *ohi) {
  *olo = h->klo[j] == h->lo[j] ? h->khi[j] : h->lo[j];
  *ohi = h->klo[j] == h->lo[j] ? h->hi[j] : h->klo[j];
}

static void halving(builder *b, const halves *h, int q, int levels, int v) {
  for (int j = 0; j < levels; j++) {
    int bit = levels - 1 - j, olo, ohi;
    int flags = (j == levels - 1 ? KOLO_STEP_FINAL : 0) | ((q >> bit) & 1 ? 0 : KOLO_STEP_SRC_FIRST);
    other_half(h, j, &olo, &ohi);
    exchange(b, olo, ohi, h->klo[j], h->khi[j], KOLO_STEP_RECV_REDUCE_COPY, flags, j == 0 ? v : KOLO_BUF_OUT, bit);
  }
}

static void doubling(builder *b, const halves *h, int levels) {
  for (int j = levels - 1; j >= 0; j--) {
    int olo, ohi;
    other_half(h, j, &olo, &ohi);
    exchange(b, h->klo[j], h->khi[j], olo, ohi, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, levels - 1 - j);
  }
}

/* A rank of the doubling; peer index b is the partner at bit b, the
 * folded rank comes last. */
static koloResult_t rab_program(int n, int rank, kolo_program *p) {
  const int q = kolo_rd_index(n, rank), levels = kolo_log2(kolo_pow2_floor(n));
  const int folded = kolo_rd_folded(n, rank);
  /* at most 2n steps per phase (the ranges halve) and 2n for the fold */
  if (kolo_program_alloc(p, 6 * n, KOLO_LAYOUT_RING) != koloSuccess ||
      kolo_program_alloc_peers(p, levels + (folded >= 0)) != koloSuccess)
    return koloSystemError;
  for (int bit = 0; bit < levels; bit++) p->peers[bit].rank = kolo_rd_rank(n, q ^ (1 << bit));
  builder b = {p, 0};
  halves h;
  plan_halves(n, q, levels, &h);
  if (folded >= 0) {
    p->peers[levels].rank = folded;
    exchange(&b, 0, 0, 0, n, KOLO_STEP_RECV_REDUCE_COPY, 0, KOLO_BUF_IN, levels); /* the extra's input first */
  }
  halving(&b, &h, q, levels, folded >= 0 ? KOLO_BUF_OUT : KOLO_BUF_IN);
  doubling(&b, &h, levels);
  if (folded >= 0) exchange(&b, 0, n, 0, 0, 0, 0, KOLO_BUF_OUT, levels);
  p->nsteps = b.s;
  return koloSuccess;
}

/* An extra rank: every chunk of its input to its partner, then the result. */
static koloResult_t extra_program(int n, int rank, kolo_program *p) {
  if (kolo_program_alloc(p, 2 * n, KOLO_LAYOUT_RING) != koloSuccess ||
      kolo_program_alloc_peers(p, 1) != koloSuccess)
    return koloSystemError;
  p->peers[0].rank = rank + 1;
  builder b = {p, 0};
  exchange(&b, 0, n, 0, 0, 0, 0, KOLO_BUF_IN, 0);
  exchange(&b, 0, 0, 0, n, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, 0);
  return koloSuccess;
}

static koloResult_t program_of(int n, int rank, kolo_program *p) {
  return kolo_rd_index(n, rank) < 0 ? extra_program(n, rank, p) : rab_program(n, rank, p);
}

koloResult_t kolo_sched_all_reduce_rab(int n, int rank, kolo_program *out) {
  return kolo_sched_peer_all_reduce(n, rank, KOLO_LAYOUT_RING, program_of, out);
}
