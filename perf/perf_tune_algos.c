/* perf_tune_algos.c - kolo-perf tune's crossover search: which all-reduce
 * algorithm is fastest at each size on this machine, for the -P rank
 * count, written as overrides ("override allreduce ALGO LO HI ranks N").
 *
 * Why measure rather than trust the model: the model is alpha-beta with
 * memory passes (ring/algo.h), and where ranks outnumber cores the waits
 * of an algorithm cost far more than its alpha: on this project's 2-core
 * VM the ring ran 1.7x slower than the direct all-reduce at 1 MiB with 4
 * processes (waits polling 64 times) though it makes fewer passes over
 * memory.  A measured choice
 * per size is what NCCL's tuner plugins give its users.
 *
 * Every algorithm runs the same sizes, REPEATS times, the algorithms in
 * turn within each repeat (a noisy second spreads over all); the median
 * per (algorithm, size) decides.  A size's range runs from the geometric
 * mean with the size below to that with the size above, the first from 0
 * and the last to 2^62-1; neighbours with the same winner merge.  Only shm
 * (one host): the algorithms that need one host (direct) would not run
 * across hosts, and the others' crossovers there come from the network. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_tune_int.h"
#include "ring/algo.h"

static const int algos[] = {KOLO_ALGO_RING, KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT};
#define NALGOS ((int)(sizeof algos / sizeof algos[0]))
#define MAX_REPEATS 5

/* Sizes 8 B, 32 B, ... by 4s up to 8 MiB (32 KiB when quick), each called
 * enough times to take about 64 MiB of data (1 MiB when quick). */
static void plan_sizes(const tune_args *a, tune_job *j) {
  if (a->quick) tune_plan_sizes(j, (size_t)32 << 10, (size_t)1 << 20, 2, 20);
  else tune_plan_sizes(j, (size_t)8 << 20, (size_t)64 << 20, 8, 500);
}

/* t[repeat][algo][size] -> med[algo][size]. */
static void medians(int repeats, int nsizes, double t[][NALGOS][TUNE_MAX_SIZES], double med[][TUNE_MAX_SIZES]) {
  for (int k = 0; k < NALGOS; k++)
    for (int i = 0; i < nsizes; i++) {
      double v[MAX_REPEATS];
      for (int r = 0; r < repeats; r++) v[r] = t[r][k][i];
      med[k][i] = tune_median(v, repeats);
    }
}

/* The index into algos of the fastest at size i, and the table's row. */
static int winner(const tune_job *j, int i, double med[][TUNE_MAX_SIZES]) {
  int best = 0;
  printf("%10zu", j->sizes[i]);
  for (int k = 0; k < NALGOS; k++) {
    printf(" %12.2f", med[k][i] * 1e6);
    if (med[k][i] < med[best][i]) best = k;
  }
  printf("  %s\n", kolo_algo_name(algos[best]));
  return best;
}

/* Appends override [lo, hi] -> algo for a->nranks ranks, merging it into
 * the last one when that has the same algorithm. */
static int add_range(const tune_args *a, kolo_tuning *f, int algo, uint64_t lo, uint64_t hi) {
  kolo_tune_override *last = f->noverrides > 0 ? &f->ov[f->noverrides - 1] : NULL;
  if (last != NULL && last->algo == algo && last->nranks == a->nranks && last->hi + 1 == lo) {
    last->hi = hi;
    return 0;
  }
  if (f->noverrides == KOLO_TUNING_MAX_OVERRIDES) return -1;
  f->ov[f->noverrides++] = (kolo_tune_override){algo, lo, hi, a->nranks};
  return 0;
}

/* The winners' size ranges, as overrides. */
static int write_ranges(const tune_args *a, const tune_job *j, double med[][TUNE_MAX_SIZES], kolo_tuning *f) {
  printf("%10s", "bytes");
  for (int k = 0; k < NALGOS; k++) printf(" %9s us", kolo_algo_name(algos[k]));
  printf("  (medians; fastest)\n");
  for (int i = 0; i < j->nsizes; i++) {
    int k = winner(j, i, med);
    uint64_t lo, hi;
    tune_size_range(j, i, &lo, &hi);
    if (add_range(a, f, algos[k], lo, hi) != 0) return -1;
  }
  return 0;
}

int perf_tune_crossovers(const tune_args *a, kolo_tuning *f) {
  static double t[MAX_REPEATS][NALGOS][TUNE_MAX_SIZES];
  double med[NALGOS][TUNE_MAX_SIZES];
  tune_job j = {KOLO_LINK_SHM, NULL, 0, {0}, {0}, NULL};
  plan_sizes(a, &j);
  const int repeats = a->quick ? 1 : MAX_REPEATS;
  for (int r = 0; r < repeats; r++)
    for (int k = 0; k < NALGOS; k++) {
      j.algo = kolo_algo_name(algos[k]);
      if (perf_tune_measure(a, &j, t[r][k]) != 0) {
        fprintf(stderr, "kolo-perf tune: the %s all-reduce: the ranks failed (KOLO_DEBUG=WARN says why)\n", j.algo);
        return -1;
      }
    }
  medians(repeats, j.nsizes, t, med);
  printf("all-reduce on shm, %d ranks:\n", a->nranks);
  if (write_ranges(a, &j, med, f) == 0) return 0;
  fprintf(stderr, "kolo-perf tune: more than %d size ranges\n", KOLO_TUNING_MAX_OVERRIDES);
  return -1;
}
