/* doubling.h - who pairs with whom in recursive doubling and halving
 * (all_reduce_rd.c, all_reduce_rab.c).
 *
 * The doubling runs among p ranks, p the largest power of two <= n.  The
 * other n - p ranks are folded in first, the standard way: of the first
 * 2(n - p) ranks, each even rank 2i is an *extra* rank that hands its input
 * to rank 2i + 1 and gets the result back at the end; rank 2i + 1 takes
 * part as index i, and each rank r >= 2(n - p) as index r - (n - p).  At
 * level j a rank of index q pairs with index q ^ 2^j.
 *
 * The order of operands.  Every reduction in these programs combines the
 * values of two disjoint groups of ranks, and puts the group of lower ranks
 * first (KOLO_STEP_SRC_FIRST where that group is the rank's own), so that
 * every rank computes every element with the same operands in the same
 * order: the results are the same bits on every rank, whatever the op
 * (a float max of -0 and +0 and a sum of two NaNs depend on the order).
 * Index order is rank order, and an extra rank is just below its partner.
 */
#ifndef KOLO_RING_DOUBLING_H
#define KOLO_RING_DOUBLING_H

/* The largest power of two <= n (n >= 1). */
static inline int kolo_pow2_floor(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

/* log2 of a power of two. */
static inline int kolo_log2(int p) {
  int k = 0;
  while ((1 << k) < p) k++;
  return k;
}

/* rank's index in the doubling among the n ranks, -1 for an extra rank. */
static inline int kolo_rd_index(int n, int rank) {
  int extra = n - kolo_pow2_floor(n);
  if (rank >= 2 * extra) return rank - extra;
  return rank % 2 ? rank / 2 : -1;
}

/* The rank of index q in the doubling among n ranks. */
static inline int kolo_rd_rank(int n, int q) {
  int extra = n - kolo_pow2_floor(n);
  return q < extra ? 2 * q + 1 : q + extra;
}

/* The extra rank folded into rank (-1: none): rank - 1 for an odd rank
 * below 2(n - p). */
static inline int kolo_rd_folded(int n, int rank) {
  return rank < 2 * (n - kolo_pow2_floor(n)) && rank % 2 ? rank - 1 : -1;
}

#endif
