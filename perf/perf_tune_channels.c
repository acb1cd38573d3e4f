/* perf_tune_channels.c - kolo-perf tune's channel search: how many channels
 * the all-reduce is fastest on at each size on this machine, for the -P
 * rank count, written as `channels allreduce C LO HI ranks N` lines.
 *
 * Why measure: a channel is a ring (or set of pipes) of its own.  On a GPU
 * each is a block, and more of them move more bytes at once; on the host
 * one thread runs every channel of a call in turn, so more channels only
 * put more slices in flight between waits, and each costs its own slices
 * and waits: the default rule (one channel per KOLO_MIN_CHANNEL_BYTES of a
 * rank's share) is a guess either way.
 *
 * Each job loads a tuning file that holds the crossover search's
 * overrides (the algorithm each size will run) and one line giving every
 * all-reduce C channels: the jobs time what the written file will run.
 * Counts 1, 2 and 4, in turn within each repeat, medians of 5 repeats;
 * the fewest channels within 5% of the fastest win (on this project's
 * 2-core VM single runs of 4 ranks at 8 B vary 2x with where the scheduler
 * puts them).  Sizes and ranges as the crossover search's
 * (perf_tune_ranges.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/perf_tune_int.h"
#include "ring/schedule.h"

static const int counts[] = {1, 2, 4};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))
#define MAX_REPEATS 5
#define TIE 1.05 /* a count within 5% of the fastest counts as as fast */

/* Writes f's links and overrides, and every all-reduce on `channels`
 * channels, to a new temporary file; its path into path.  0 or -1. */
static int write_job_file(const tune_args *a, const kolo_tuning *f, int channels, char path[64]) {
  kolo_tuning g = *f;
  g.nchannel_lines = 1;
  g.ch[0] = (kolo_tune_channels){KOLO_COLL_ALL_REDUCE, channels, 0, (1ull << 62) - 1, a->nranks};
  snprintf(path, 64, "/tmp/kolo-tune-channels.XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  FILE *out = fdopen(fd, "w");
  if (out == NULL) {
    close(fd);
    unlink(path);
    return -1;
  }
  int bad = kolo_tuning_write(out, &g, "kolo-perf tune: one job of the channel search") != 0;
  bad |= fclose(out) != 0;
  if (bad) unlink(path);
  return bad ? -1 : 0;
}

/* One job: the all-reduce at j's sizes on `channels` channels. */
static int measure_count(const tune_args *a, const kolo_tuning *f, tune_job *j, int channels, double *t) {
  char path[64];
  if (write_job_file(a, f, channels, path) != 0) {
    perror("kolo-perf tune: a temporary tuning file");
    return -1;
  }
  j->tuning = path;
  int res = perf_tune_measure(a, j, t);
  j->tuning = NULL;
  unlink(path);
  if (res != 0) fprintf(stderr, "kolo-perf tune: the all-reduce on %d channels: the ranks failed (KOLO_DEBUG=WARN says why)\n", channels);
  return res;
}

/* Appends [lo, hi] -> channels for a->nranks ranks, merged into the last
 * line when that has the same count. */
static int add_range(const tune_args *a, kolo_tuning *f, int channels, uint64_t lo, uint64_t hi) {
  kolo_tune_channels *last = f->nchannel_lines > 0 ? &f->ch[f->nchannel_lines - 1] : NULL;
  if (last != NULL && last->channels == channels && last->nranks == a->nranks && last->hi + 1 == lo) {
    last->hi = hi;
    return 0;
  }
  if (f->nchannel_lines == KOLO_TUNING_MAX_CHANNEL_LINES) return -1;
  f->ch[f->nchannel_lines++] = (kolo_tune_channels){KOLO_COLL_ALL_REDUCE, channels, lo, hi, a->nranks};
  return 0;
}

/* The fewest channels within TIE of the fastest count's median at size i
 * (counts ascend; more channels cost pipes and waits, so they must win
 * clearly), and the table's row. */
static int fastest(const tune_job *j, int i, double med[][TUNE_MAX_SIZES]) {
  int best = 0, pick = 0;
  printf("%10zu", j->sizes[i]);
  for (int k = 0; k < NCOUNTS; k++) {
    printf(" %12.2f", med[k][i] * 1e6);
    if (med[k][i] < med[best][i]) best = k;
  }
  while (med[pick][i] > med[best][i] * TIE) pick++;
  printf("  %d\n", counts[pick]);
  return pick;
}

static int write_ranges(const tune_args *a, const tune_job *j, double med[][TUNE_MAX_SIZES], kolo_tuning *f) {
  printf("all-reduce on shm, %d ranks, by channels:\n%10s", a->nranks, "bytes");
  for (int k = 0; k < NCOUNTS; k++) printf(" %6d ch. us", counts[k]);
  printf("  (medians; fastest)\n");
  for (int i = 0; i < j->nsizes; i++) {
    uint64_t lo, hi;
    tune_size_range(j, i, &lo, &hi);
    if (add_range(a, f, counts[fastest(j, i, med)], lo, hi) != 0) return -1;
  }
  return 0;
}

int perf_tune_channels(const tune_args *a, kolo_tuning *f) {
  static double t[MAX_REPEATS][NCOUNTS][TUNE_MAX_SIZES];
  double med[NCOUNTS][TUNE_MAX_SIZES];
  tune_job j = {KOLO_LINK_SHM, NULL, 0, {0}, {0}, NULL};
  if (a->quick) tune_plan_sizes(&j, (size_t)32 << 10, (size_t)1 << 20, 2, 20);
  else tune_plan_sizes(&j, (size_t)32 << 20, (size_t)64 << 20, 4, 500);
  const int repeats = a->quick ? 1 : MAX_REPEATS;
  for (int r = 0; r < repeats; r++)
    for (int k = 0; k < NCOUNTS; k++)
      if (measure_count(a, f, &j, counts[k], t[r][k]) != 0) return -1;
  for (int k = 0; k < NCOUNTS; k++)
    for (int i = 0; i < j.nsizes; i++) {
      double v[MAX_REPEATS];
      for (int r = 0; r < repeats; r++) v[r] = t[r][k][i];
      med[k][i] = tune_median(v, repeats);
    }
  if (write_ranges(a, &j, med, f) == 0) return 0;
  fprintf(stderr, "kolo-perf tune: more than %d channel ranges\n", KOLO_TUNING_MAX_CHANNEL_LINES);
  return -1;
}
