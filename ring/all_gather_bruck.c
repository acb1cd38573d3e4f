/* all_gather_bruck.c - Bruck's all-gather: ceil(log2 n) dependent levels
 * instead of the ring's n - 1 hops, for small messages, where the hops'
 * latency costs more than the bytes (ring/algo.h chooses).  Any rank count,
 * not only powers of two.
 *
 * A multi-peer program (ring/program.h), FLAT layout, IN one block, OUT n
 * blocks (out_blocked): chunk index b is block b of the output.  At level
 * k = 0 .. ceil(log2 n) - 1, with d = 2^k and m = min(d, n - d) (ranks and
 * blocks mod n), rank r
 *
 *   sends     out[r + j]      to rank r - d     j = 0 .. m-1
 *   receives  out[r + d + j]  from rank r + d   j = 0 .. m-1
 *
 * What r receives from r + d are that rank's first m blocks; so after
 * level k rank r holds blocks r .. r + 2d - 1 (all n once 2d >= n), and
 * every block it sends at level k (j < m <= d) it received at an earlier
 * level, before the send in program order.  Blocks land where they belong:
 * no final rotation, as Bruck's original needs.  Level 0's first send is a
 * copySend in -> out[r] (the own block is copied once, on its way out; in
 * place, where in is out[r], it writes the slot only); the later sends read
 * out.
 *
 * Order within a level, "two sends ahead":
 *
 *   S0 S1 R0 S2 R1 S3 R2 ... S(m-1) R(m-2) R(m-1)       (m = 1: S0 R0)
 *
 * A pipe holds two chunks (a chunk is half a connector's slots, core/op.h),
 * so a level of m > 2 that sent all m before receiving would deadlock:
 * every rank blocked on its third send to r - d, all around the cycle.
 *
 * No rank waits in a cycle.  Number each rank's steps by global position
 * (round t, step i: t L + i, L the program's length); every rank's program
 * has the same length per level (m depends on n and k only), so a position
 * is the same moment of the schedule on every rank.  Within a level S0 is
 * at 0, S_j (j >= 1) at 2j - 1, R_j (j <= m-2) at 2j + 2, R_(m-1) at
 * 2m - 1.  A step waits only for
 *   S_j, j >= 2:  rank r - d to take chunk j - 2 of the pipe, its R_(j-2),
 *                 at 2j - 2, below S_j's 2j - 1 (S0 and S1 find the pipe
 *                 empty of this round's chunks);
 *   R_j:          rank r + d's S_j, at 0 or 2j - 1, below R_j's;
 *   across rounds: a pipe carries the chunks of one level only (d is the
 *                 sender's distance to the receiver), in sequence, so a
 *                 send waits at most for the receiver to take the chunk
 *                 two before it on the pipe: this round's R_(j-2), or for
 *                 S0 and S1 a receive of an earlier round, at a lower
 *                 position.
 * Every wait is for a step at a strictly lower position.  Were ranks stuck,
 * the stuck step of lowest position would wait for a step lower still,
 * which nothing holds up: no deadlock.
 *
 * Peers: r - d and r + d of every level, each rank once (r - d = r + d
 * where d = n/2, r - d = r + d' where d + d' = n: one entry serves both
 * directions).  Steps: 2 (n - 1); with one rank, one copy.
 */
#include "ring/schedule.h"

/* Most levels: int rank counts stay below 2^31. */
#define MAX_LEVELS 31

/* (a + b) mod n, for 0 <= a, b < n, without overflow. */
static int mod_add(int a, int b, int n) { return (int)(((long long)a + b) % n); }

/* The index of rank among ranks[0 .. *np), appended when new. */
static int peer_of(int ranks[], int *np, int rank) {
  for (int i = 0; i < *np; i++)
    if (ranks[i] == rank) return i;
  ranks[*np] = rank;
  return (*np)++;
}

/* The next level's distance after d, or n when d was the last (no
 * overflow near INT_MAX). */
static int next_distance(int d, int n) { return d > (n - 1) / 2 ? n : 2 * d; }

/* Every peer of rank r: r - d and r + d of each level, each once. */
static int collect_peers(int n, int r, int ranks[2 * MAX_LEVELS]) {
  int np = 0;
  for (int d = 1; d < n; d = next_distance(d, n)) {
    peer_of(ranks, &np, (r - d + n) % n);
    peer_of(ranks, &np, mod_add(r, d, n));
  }
  return np;
}

/* Step *s: a send of block b to peer index `to`; the first of all copies
 * the own block in -> out on its way. */
static void add_send(kolo_program *p, int *s, int b, int to, int first) {
  if (first) kolo_program_set(p, *s, KOLO_STEP_COPY_SEND, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, b);
  else kolo_program_set(p, *s, KOLO_STEP_SEND, 0, KOLO_BUF_OUT, b, KOLO_BUF_OUT, b);
  kolo_program_set_peers(p, (*s)++, to, 0);
}

/* Step *s: a receive of block b from peer index `from` into out. */
static void add_recv(kolo_program *p, int *s, int b, int from) {
  kolo_program_set(p, *s, KOLO_STEP_RECV, 0, KOLO_BUF_OUT, b, KOLO_BUF_OUT, b);
  kolo_program_set_peers(p, (*s)++, 0, from);
}

/* Level d's 2m steps, two sends ahead of the receives (see above). */
static void add_level(kolo_program *p, int *s, int n, int r, int d, int ranks[], int *np) {
  const int m = d < n - d ? d : n - d;
  const int up = mod_add(r, d, n); /* rank r + d, and the first block it sends r */
  const int to = peer_of(ranks, np, (r - d + n) % n), from = peer_of(ranks, np, up);
  for (int j = 0; j < m; j++) {
    add_send(p, s, mod_add(r, j, n), to, d == 1 && j == 0);
    if (j >= 1) add_recv(p, s, mod_add(up, j - 1, n), from);
  }
  add_recv(p, s, mod_add(up, m - 1, n), from);
}

/* Rank r's levels, n >= 2. */
static koloResult_t bruck_program(int n, int r, kolo_program *p) {
  int ranks[2 * MAX_LEVELS];
  int np = collect_peers(n, r, ranks);
  if (kolo_program_alloc(p, 2 * (n - 1), KOLO_LAYOUT_FLAT) != koloSuccess || kolo_program_alloc_peers(p, np) != koloSuccess)
    return koloSystemError;
  for (int i = 0; i < np; i++) p->peers[i].rank = ranks[i];
  int s = 0;
  for (int d = 1; d < n; d = next_distance(d, n)) add_level(p, &s, n, r, d, ranks, &np);
  return koloSuccess;
}

/* One rank: its block, copied in -> out. */
static koloResult_t one_copy(int r, kolo_program *p) {
  if (kolo_program_alloc(p, 1, KOLO_LAYOUT_FLAT) != koloSuccess) return koloSystemError;
  kolo_program_set(p, 0, KOLO_STEP_COPY, 0, KOLO_BUF_IN, 0, KOLO_BUF_OUT, r);
  return koloSuccess;
}

koloResult_t kolo_sched_all_gather_bruck(int n, int rank, kolo_program *out) {
  kolo_program p = {0};
  koloResult_t res = n == 1 ? one_copy(rank, &p) : bruck_program(n, rank, &p);
  if (res != koloSuccess) {
    kolo_program_free(&p);
    return res;
  }
  p.out_blocked = 1;
  kolo_program_index_peers(&p);
  *out = p;
  return koloSuccess;
}
