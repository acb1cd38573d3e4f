/* perf_tune_chunk.c - kolo-perf tune's chunk line: the ring all-reduce
 * across hosts (host memory, over the network's transport) with each
 * candidate chunk in turn, in alternating rounds; the chunk with the least
 * median time over the rounds is written as "chunk LINK BYTES ranks N".
 * Measured rather than derived: which chunk wins moves with the machine
 * and its hour, caches and the fixed cost of a round alike
 * (core/comm_topology.c, docs/tuning.md). */
#include <stdio.h>

#include "perf/perf_sweep.h"
#include "perf/perf_tune_int.h"
#include "ring/schedule.h"

/* Half the default slots (2 MiB) is the largest: a larger chunk is no cap. */
static const size_t candidates[] = {(size_t)64 << 10, (size_t)128 << 10, (size_t)256 << 10,
                                    (size_t)512 << 10, (size_t)1 << 20,  (size_t)2 << 20};
#define NCANDIDATES ((int)(sizeof candidates / sizeof candidates[0]))
/* --quick: two of them, one round, for tests. */
static const int quick_picks[] = {2, 5};
#define ROUNDS 3

static size_t candidate(const tune_args *a, int k) { return candidates[a->quick ? quick_picks[k] : k]; }

/* Seconds of one call at each of the job's sizes, summed, with `chunk`. */
static int time_chunk(const tune_args *a, int link, size_t chunk, double *sum) {
  tune_job j = {link, "ring", 2, {(size_t)4 << 20, (size_t)16 << 20}, {a->iters, a->iters / 4 + 1}, NULL,
                KOLO_COLL_ALL_REDUCE, chunk};
  if (a->quick) j.nsizes = 1, j.sizes[0] = (size_t)1 << 20;
  double t[TUNE_MAX_SIZES];
  if (perf_tune_measure(a, &j, t) != 0) {
    fprintf(stderr, "kolo-perf tune: the ring all-reduce over %s in %zu-byte chunks: the ranks failed "
                    "(KOLO_DEBUG=WARN says why)\n", kolo_link_name(link), chunk);
    return -1;
  }
  *sum = 0;
  for (int i = 0; i < j.nsizes; i++) *sum += t[i];
  return 0;
}

/* Each candidate's median over `rounds` into med; the index of the least. */
static int fastest(double t[][NCANDIDATES], int rounds, int n, double med[NCANDIDATES]) {
  int win = 0;
  for (int k = 0; k < n; k++) {
    double v[ROUNDS];
    for (int r = 0; r < rounds; r++) v[r] = t[r][k];
    med[k] = perf_median_in_place(v, (size_t)rounds);
    if (med[k] < med[win]) win = k;
  }
  return win;
}

int perf_tune_chunk(const tune_args *a, kolo_tuning *f) {
  if (a->cuda || a->no_net) return 0;
  const int link = f->link[KOLO_LINK_IB].set ? KOLO_LINK_IB : KOLO_LINK_SOCKET;
  const int n = a->quick ? 2 : NCANDIDATES, rounds = a->quick ? 1 : ROUNDS;
  double t[ROUNDS][NCANDIDATES], med[NCANDIDATES];
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < n; k++)
      if (time_chunk(a, link, candidate(a, k), &t[r][k]) != 0) return -1;
  const int win = fastest(t, rounds, n, med);
  printf("%-8s ring all-reduce at %s MiB, us (median of %d) by chunk:", kolo_link_name(link), a->quick ? "1" : "4 + 16",
         rounds);
  for (int k = 0; k < n; k++) printf(" %zu KiB %.0f,", candidate(a, k) >> 10, med[k] * 1e6);
  printf(" chosen %zu KiB\n", candidate(a, win) >> 10);
  f->chunk[f->nchunk_lines++] = (kolo_tune_chunk){link, candidate(a, win), a->nranks};
  return 0;
}
