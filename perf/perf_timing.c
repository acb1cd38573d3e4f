/* perf_timing.c - the timed calls of one row and how the ranks' times make
 * the row's, with nccl-tests' meanings: -m calls per iteration as one
 * group, -z's waits and barriers, -G's graph launches, -C's CPU time and
 * -a's combination over ranks. */
#define _GNU_SOURCE /* clock_gettime */
#include <stdlib.h>
#include <time.h>

#include "perf/perf_sweep_int.h"

double perf_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

void perf_sort_doubles(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

double perf_median_in_place(double *v, size_t n) {
  perf_sort_doubles(v, n);
  return v[n / 2];
}

static int wait_calls(sweep *s) { return s->be->wait ? s->be->wait(s->be->ctx) : 0; }

/* All ranks pass it together (a small all-reduce). */
static int perf_barrier(sweep *s) {
  double v[1] = {0};
  return s->be->allreduce_double(s->be->ctx, v, 1, 1);
}

/* Issues n calls (on a stream they may still be running). */
static int issue(sweep *s, const perf_call *c, int n) {
  for (int i = 0; i < n; i++)
    if (s->be->run(s->be->ctx, c) != 0) return -1;
  return 0;
}

int perf_run_n(sweep *s, const perf_call *c, int n) { return issue(s, c, n) != 0 ? -1 : wait_calls(s); }

/* One iteration: -m calls, as one group when there are several (a backend
 * without groups issues them back to back). */
static int issue_iteration(sweep *s, const perf_call *c) {
  const perf_backend *be = s->be;
  int group = s->a->agg_iters > 1 && be->group_start != NULL;
  if (group && be->group_start(be->ctx) != 0) return -1;
  int bad = issue(s, c, s->a->agg_iters);
  if (group && be->group_end(be->ctx) != 0) bad = -1;
  return bad;
}

/* -z 1 and 2: each iteration (a single call with -m 1) waited for, and
 * with 1 a barrier, inside the timed span. */
static int after_iteration(sweep *s) {
  int z = s->a->blocking;
  if (z != PERF_BLOCKING_BARRIER && z != PERF_BLOCKING_WAIT) return 0;
  if (wait_calls(s) != 0) return -1;
  return z == PERF_BLOCKING_BARRIER ? perf_barrier(s) : 0;
}

/* The -n iterations.  *coll_us: with -z 3, the time of the calls alone
 * (each iteration waited for, its barrier left out), as nccl-tests. */
static int iterations(sweep *s, const perf_call *c, double *coll_us) {
  *coll_us = 0;
  const int outer = s->a->blocking == PERF_BLOCKING_OUTER;
  for (int it = 0; it < s->a->iters; it++) {
    double t0 = outer ? perf_now_us() : 0; /* a clock read is 5% of an 8 B call's time */
    if (issue_iteration(s, c) != 0 || after_iteration(s) != 0) return -1;
    if (!outer) continue;
    if (wait_calls(s) != 0) return -1;
    *coll_us += perf_now_us() - t0;
    if (perf_barrier(s) != 0) return -1;
  }
  return 0;
}

/* -G: the timed iterations (each -m calls in a group, as nccl-tests
 * captures them) into the backend's graph; n_iters 0: one call alone. */
static int capture(sweep *s, const perf_call *c, int n_iters) {
  const perf_backend *be = s->be;
  if (be->capture_begin(be->ctx) != 0) return -1;
  int bad = n_iters == 0 ? issue(s, c, 1) : 0;
  for (int it = 0; it < n_iters && bad == 0; it++) bad = issue_iteration(s, c);
  if (be->capture_end(be->ctx, bad != 0) != 0) bad = -1;
  return bad;
}

int perf_run_once(sweep *s, const perf_call *c) {
  const perf_backend *be = s->be;
  if (s->a->graph_launches == 0) return perf_run_n(s, c, 1);
  int bad = capture(s, c, 0);
  if (bad == 0) bad = be->graph_launch(be->ctx);
  if (bad == 0) bad = be->wait(be->ctx);
  be->graph_free(be->ctx);
  return bad;
}

static int launch_graph(sweep *s) {
  for (int l = 0; l < s->a->graph_launches; l++)
    if (s->be->graph_launch(s->be->ctx) != 0) return -1;
  return 0;
}

/* Times of this rank (us, all calls): t[0] the latency (device time on a
 * stream, else the wall clock; -z 3: the calls alone), t[1] the host's
 * time to issue them, t[2] the wall clock to their end. */
static int measure_rank(sweep *s, const perf_call *c, double t[3]) {
  const perf_args *a = s->a;
  const perf_backend *be = s->be;
  double dev_us = 0, coll_us = 0;
  if (a->graph_launches > 0 && capture(s, c, a->iters) != 0) return -1;
  if (perf_barrier(s) != 0) return -1; /* the ranks start together */
  double t0 = perf_now_us();
  int bad = be->time_start ? be->time_start(be->ctx) : 0;
  if (bad == 0) bad = a->graph_launches > 0 ? launch_graph(s) : iterations(s, c, &coll_us);
  t[1] = a->blocking == PERF_BLOCKING_OUTER ? coll_us : perf_now_us() - t0;
  if (bad == 0) bad = be->time_stop ? be->time_stop(be->ctx, &dev_us) : wait_calls(s);
  t[2] = perf_now_us() - t0;
  t[0] = a->blocking == PERF_BLOCKING_OUTER ? coll_us : be->time_stop ? dev_us : t[2];
  if (a->graph_launches > 0) be->graph_free(be->ctx);
  return bad;
}

/* v[0..n) combined over the ranks as -a says, on every rank. */
static int combine(sweep *s, double *v, int n) {
  const perf_backend *be = s->be;
  int mode = s->a->average, zero = mode == PERF_AVERAGE_RANK0 && s->rank != 0;
  double sign = mode == PERF_AVERAGE_MIN ? -1 : 1; /* the minimum is the maximum of the negated times */
  for (int i = 0; i < n; i++) v[i] = zero ? 0 : sign * v[i];
  int max = mode == PERF_AVERAGE_MIN || mode == PERF_AVERAGE_MAX;
  if (be->allreduce_double(be->ctx, v, n, max) != 0) return -1;
  for (int i = 0; i < n; i++) v[i] = sign * v[i] / (mode == PERF_AVERAGE_MEAN ? s->nranks : 1);
  return 0;
}

int perf_time_calls(sweep *s, const perf_call *c, perf_result *res) {
  const perf_args *a = s->a;
  double t[3] = {0, 0, 0};
  if (measure_rank(s, c, t) != 0 || combine(s, t, 3) != 0) return -1;
  /* nccl-tests: a graph's time is shared by its launches; the CPU time is not */
  double calls = (double)a->iters * a->agg_iters;
  double launches = a->graph_launches > 0 ? a->graph_launches : 1;
  res->time_us = t[0] / calls / launches;
  res->cpu_us = t[1] / calls;
  res->wall_us = t[2] / calls / launches;
  res->has_wall = s->be->time_start != NULL;
  return 0;
}
