/* perf_tune_algos.c - kolo-perf tune's search: which algorithm of the
 * all-reduce, the broadcast, the reduce and the all-gather on how many
 * channels is fastest at each size, within a host and then across hosts,
 * written as overrides and channels lines.  Why measure rather than trust
 * the cost model, and how the winners are picked: docs/tuning.md. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "perf/perf_sweep.h"
#include "perf/perf_tune_int.h"
#include "ring/algo.h"
#include "ring/schedule.h"

/* One collective's search: its algorithms, and KOLO_ALGO's entry prefix
 * that forces one ("" for the all-reduce, whose entry needs none). */
typedef struct {
  int coll;
  const char *what, *entry;
  int nalgos;
  int algos[5];
} tune_search;

static const tune_search searches[] = {
    {KOLO_COLL_ALL_REDUCE,
     "all-reduce",
     "",
     5,
     {KOLO_ALGO_RING, KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT, KOLO_ALGO_ONESHOT}},
    {KOLO_COLL_BROADCAST, "broadcast", "broadcast:", 3, {KOLO_ALGO_RING, KOLO_ALGO_TREE, KOLO_ALGO_DBTREE, 0, 0}},
    {KOLO_COLL_REDUCE, "reduce", "reduce:", 3, {KOLO_ALGO_RING, KOLO_ALGO_TREE, KOLO_ALGO_DBTREE, 0, 0}},
    {KOLO_COLL_ALL_GATHER, "all-gather", "allgather:", 2, {KOLO_ALGO_RING, KOLO_ALGO_BRUCK, 0, 0, 0}}};
#define NSEARCHES ((int)(sizeof searches / sizeof searches[0]))

static const int counts[] = {1, 2, 4, 8, 16};
#define MAX_COUNTS ((int)(sizeof counts / sizeof counts[0]))
#define MAX_PAIRS (5 * MAX_COUNTS)

/* Where a search runs: its link, and the file its jobs load (the lines
 * found within a host, when it runs across hosts; else NULL). */
typedef struct {
  const tune_args *a;
  const tune_search *s;
  int link, across;
  const kolo_tuning *base;
} tune_space;

/* The counts a tune tries: the first 3 on the host, all on a GPU, across
 * hosts none (0: the communicator's own, no channels line).  Pair p of a
 * search is algorithm algo_of(sp, p) on count_of(sp, p) channels. */
static int ncounts(const tune_space *sp) { return sp->across ? 1 : sp->a->cuda ? MAX_COUNTS : 3; }
/* Across hosts the all-reduce leaves out the direct and one-shot ones
 * (one host only) and the hierarchical one (each rank is a host here). */
static int npairs(const tune_space *sp) {
  return (sp->across && sp->s->coll == KOLO_COLL_ALL_REDUCE ? 3 : sp->s->nalgos) * ncounts(sp);
}
static int algo_of(const tune_space *sp, int p) { return sp->s->algos[p / ncounts(sp)]; }
static int count_of(const tune_space *sp, int p) { return sp->across ? 0 : counts[p % ncounts(sp)]; }
#define MAX_REPEATS 5
#define TIE 1.05 /* within 5% of the fastest counts as as fast */

/* Sizes 8 B, 16 B, ... by 2s (by 4s the ranges' ends fell between measured
 * sizes) up to 32 MiB (an all-gather's per rank: 32 MiB in all), each called
 * enough times for about 32 MiB of data (4..500 calls); quick: by 4s to 32 KiB,
 * 1 MiB of data (2..20 calls). */
static void plan_sizes(const tune_args *a, const tune_search *s, tune_job *j) {
  size_t top = (size_t)32 << 20, budget = a->quick ? (size_t)1 << 20 : (size_t)32 << 20;
  if (a->quick) top = (size_t)32 << 10;
  else if (s->coll == KOLO_COLL_ALL_GATHER) top /= (size_t)a->nranks;
  const size_t lo = a->quick ? 2 : 4, hi = a->quick ? 20 : 500;
  for (size_t b = 8; b <= top && j->nsizes < TUNE_MAX_SIZES; b *= a->quick ? 4 : 2) {
    j->sizes[j->nsizes] = b;
    j->iters[j->nsizes++] = (int)(budget / b < lo ? lo : budget / b > hi ? hi : budget / b);
  }
}

/* A new temporary tuning file for pair p's job, its path into path: within a
 * host one line giving every call count_of(p) channels; across hosts the lines
 * found within a host (the channels the communicator will have).  0 or -1. */
static int write_job_file(const tune_space *sp, int p, char path[64]) {
  static kolo_tuning g;
  if (sp->across) g = *sp->base;
  else
    g = (kolo_tuning){.nchannel_lines = 1,
                      .ch[0] = {sp->s->coll, count_of(sp, p), 0, (1ull << 62) - 1, sp->a->nranks, KOLO_TUNE_MEM_ANY,
                                KOLO_TUNE_LINK_ANY}};
  snprintf(path, 64, "/tmp/kolo-tune-job.XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  FILE *out = fdopen(fd, "w");
  if (out == NULL) close(fd);
  int bad = out == NULL || kolo_tuning_write(out, &g, "kolo-perf tune: one job of the search") != 0;
  bad |= out != NULL && fclose(out) != 0;
  if (bad) unlink(path);
  return bad ? -1 : 0;
}

/* One job: pair p at j's sizes, seconds per call into t. */
static int measure_pair(const tune_space *sp, tune_job *j, int p, double *t) {
  char path[64], algo[48];
  if (write_job_file(sp, p, path) != 0) {
    perror("kolo-perf tune: a temporary tuning file");
    return -1;
  }
  snprintf(algo, sizeof algo, "%s%s", sp->s->entry, kolo_algo_name(algo_of(sp, p)));
  j->algo = algo;
  j->tuning = path;
  int res = perf_tune_measure(sp->a, j, t);
  unlink(path);
  if (res != 0)
    fprintf(stderr, "kolo-perf tune: the %s %s over %s: the ranks failed (KOLO_DEBUG=WARN says why)\n",
            kolo_algo_name(algo_of(sp, p)), sp->s->what, kolo_link_name(sp->link));
  return res;
}

/* The winning pair at size i, and the table's row: of the pairs within TIE
 * of the fastest, the fastest on the fewest channels, then the ring on as
 * many where as fast (within the noise each flip of winner is one more line). */
static int winner(const tune_space *sp, const tune_job *j, int i, double med[][TUNE_MAX_SIZES]) {
  int best = 0, pick = -1;
  printf("%9zu", j->sizes[i]);
  for (int p = 0; p < npairs(sp); p++) {
    printf(" %8.2f", med[p][i] * 1e6);
    if (med[p][i] < med[best][i]) best = p;
  }
  for (int p = 0; p < npairs(sp); p++) {
    int as_fast = med[p][i] <= med[best][i] * TIE, fewer = pick < 0 || count_of(sp, p) < count_of(sp, pick);
    if (as_fast && (fewer || (count_of(sp, p) == count_of(sp, pick) && med[p][i] < med[pick][i]))) pick = p;
  }
  int ring = pick % ncounts(sp); /* the ring is each search's first algorithm */
  if (med[ring][i] <= med[best][i] * TIE) pick = ring;
  printf("  %s/%d\n", kolo_algo_name(algo_of(sp, pick)), count_of(sp, pick));
  return pick;
}

/* Size i's winner p into f: its override (within a host also its channels
 * line) from lo to hi, or size i - 1's line extended.  0, or -1: too many. */
static int add_lines(const tune_space *sp, int i, int p, int prev, uint64_t lo, uint64_t hi, kolo_tuning *f) {
  const int algo = algo_of(sp, p), ch = count_of(sp, p), link = sp->across ? sp->link : KOLO_TUNE_LINK_ANY;
  const int nranks = sp->a->nranks, mem = sp->a->cuda ? KOLO_TUNE_MEM_CUDA : KOLO_TUNE_MEM_HOST, coll = sp->s->coll;
  if (i > 0 && algo == algo_of(sp, prev)) f->ov[f->noverrides - 1].hi = hi;
  else if (f->noverrides == KOLO_TUNING_MAX_OVERRIDES) return -1;
  else f->ov[f->noverrides++] = (kolo_tune_override){coll, algo, lo, hi, nranks, mem, link};
  if (sp->across) return 0;
  if (i > 0 && ch == count_of(sp, prev)) f->ch[f->nchannel_lines - 1].hi = hi;
  else if (f->nchannel_lines == KOLO_TUNING_MAX_CHANNEL_LINES) return -1;
  else f->ch[f->nchannel_lines++] = (kolo_tune_channels){coll, ch, lo, hi, nranks, mem, link};
  return 0;
}

/* The winners' size ranges as lines: a size's range runs from the geometric
 * mean with the size below (0 for the first) to that with the one above. */
static int write_ranges(const tune_space *sp, const tune_job *j, double med[][TUNE_MAX_SIZES], kolo_tuning *f) {
  printf("%s on %s, %d ranks, us per call (medians), algorithm/channels (0: the communicator's):\n%9s", sp->s->what,
         kolo_link_name(j->link), sp->a->nranks, sp->s->coll == KOLO_COLL_ALL_GATHER ? "B/rank" : "bytes");
  for (int p = 0; p < npairs(sp); p++) printf(" %6.6s/%d", kolo_algo_name(algo_of(sp, p)), count_of(sp, p));
  printf("  chosen\n");
  uint64_t lo = 0;
  for (int i = 0, prev = 0; i < j->nsizes; i++) {
    const int p = winner(sp, j, i, med);
    const uint64_t hi =
        i + 1 < j->nsizes ? (uint64_t)sqrt((double)j->sizes[i] * (double)j->sizes[i + 1]) : (1ull << 62) - 1;
    if (add_lines(sp, i, p, prev, lo, hi, f) != 0) return -1;
    lo = hi + 1, prev = p;
  }
  return 0;
}

/* One collective's search into f: every pair at the same sizes, 5 times
 * (once quick), and each pair's median time per size. */
static int search(const tune_space *sp, kolo_tuning *f) {
  static double t[MAX_REPEATS][MAX_PAIRS][TUNE_MAX_SIZES];
  double med[MAX_PAIRS][TUNE_MAX_SIZES];
  tune_job j = {sp->link, NULL, 0, {0}, {0}, NULL, sp->s->coll, 0};
  plan_sizes(sp->a, sp->s, &j);
  const int repeats = sp->a->quick ? 1 : MAX_REPEATS;
  for (int r = 0; r < repeats; r++)
    for (int p = 0; p < npairs(sp); p++)
      if (measure_pair(sp, &j, p, t[r][p]) != 0) return -1;
  for (int p = 0; p < npairs(sp); p++)
    for (int i = 0; i < j.nsizes; i++) {
      double v[MAX_REPEATS];
      for (int r = 0; r < repeats; r++) v[r] = t[r][p][i];
      med[p][i] = perf_median_in_place(v, (size_t)repeats);
    }
  if (write_ranges(sp, &j, med, f) == 0) return 0;
  fprintf(stderr, "kolo-perf tune: more than %d size ranges in all\n", KOLO_TUNING_MAX_OVERRIDES);
  return -1;
}

int perf_tune_crossovers(const tune_args *a, kolo_tuning *f) {
  const int host = a->cuda ? KOLO_LINK_CUDA_P2P : KOLO_LINK_SHM;
  for (int k = 0; k < NSEARCHES; k++)
    if (search(&(tune_space){a, &searches[k], host, 0, NULL}, f) != 0) return -1;
  if (a->cuda || a->no_net) return 0;
  static kolo_tuning base;
  for (int i = 0; i < f->noverrides; i++) f->ov[i].link = host; /* the lines so far hold on host only */
  for (int i = 0; i < f->nchannel_lines; i++) f->ch[i].link = host;
  base = *f;
  const int net = f->link[KOLO_LINK_IB].set ? KOLO_LINK_IB : KOLO_LINK_SOCKET;
  for (int k = 0; k < NSEARCHES; k++)
    if (search(&(tune_space){a, &searches[k], net, 1, &base}, f) != 0) return -1;
  return 0;
}
