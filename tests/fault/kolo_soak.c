/* kolo_soak.c - kolo-soak: many mixed collectives, every result checked,
 * while each rank samples its resident memory, fds and threads.
 *
 * N ranks are forked processes over shared memory (or TCP with --tcp).
 * Iteration i runs a random case (checked_coll.h: kind, dtype, op, count
 * from 0 to --max-bytes, in or out of place, root), the same on every rank.
 * Every --sample iterations each rank samples /proc/self (buffers freed;
 * glibc's mmap threshold is pinned so that freed large buffers go back to
 * the kernel), and the ranks agree by an all-reduce whether to stop (rank
 * 0's clock for --seconds).  The first --warmup samples set the baseline
 * (their maximum); a later sample above baseline + --rss-bound-kib, or with
 * more fds or threads than the baseline, fails the rank.  Exit 0 only if
 * every rank ran every call without error and with every element right.
 *
 *   kolo-soak [--ranks N] [--iters N | --seconds S] [--tcp] [--seed S]
 *             [--max-bytes B] [--sample K] [--warmup W] [--rss-bound-kib KIB]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checked_coll.h"
#include "fault_util.h"
#include "util/free_port.h"
#include "kolo.h"

typedef struct {
  int ranks, tcp, sample, warmup, port;
  long iters, seconds, rss_bound_kib;
  unsigned long long seed;
  size_t max_bytes;
} options;

typedef struct { /* one rank's view of its resources */
  long rss_kib;
  int fds, threads;
} sample;

typedef struct {
  sample base, last, peak;
  int nsamples;
  long calls[CC_NUM_KINDS], bad, failures;
} soak_state;

static sample take_sample(void) { return (sample){fu_rss_kib(), fu_count_fds(), fu_count_threads()}; }

static void max_into(sample *m, sample s) {
  if (s.rss_kib > m->rss_kib) m->rss_kib = s.rss_kib;
  if (s.fds > m->fds) m->fds = s.fds;
  if (s.threads > m->threads) m->threads = s.threads;
}

/* A sample: part of the baseline during warm-up, checked against it after. */
static int check_sample(const options *o, soak_state *st, int rank, long iter) {
  sample s = take_sample();
  st->last = s;
  if (st->nsamples++ == 0) st->base = st->peak = s;
  max_into(&st->peak, s);
  if (st->nsamples <= o->warmup) {
    max_into(&st->base, s);
    return 0;
  }
  if (s.rss_kib <= st->base.rss_kib + o->rss_bound_kib && s.fds <= st->base.fds && s.threads <= st->base.threads)
    return 0;
  printf("rank %d: growth at iteration %ld: rss %ld KiB (baseline %ld, bound +%ld), fds %d (%d), threads %d (%d)\n",
         rank, iter, s.rss_kib, st->base.rss_kib, o->rss_bound_kib, s.fds, st->base.fds, s.threads, st->base.threads);
  return -1;
}

/* Every rank gets rank 0's verdict: 1 when the run is over. */
static int agree_stop(koloComm_t comm, const options *o, int rank, long iter, int64_t t_end) {
  int32_t stop = rank == 0 && ((o->seconds > 0 && fu_now_ns() >= t_end) || (o->seconds == 0 && iter >= o->iters));
  koloResult_t r = koloAllReduce(&stop, &stop, 1, koloInt32, koloMax, comm, NULL);
  if (r != koloSuccess) {
    printf("rank %d: the stop vote failed: %s: %s\n", rank, koloGetErrorString(r), koloGetLastError(comm));
    return -1;
  }
  return stop != 0;
}

static int one_call(koloComm_t comm, const options *o, soak_state *st, int rank, uint64_t *rng, long iter) {
  cc_case c = cc_random_case(rng, o->ranks, o->max_bytes);
  cc_result r = cc_run(comm, rank, o->ranks, &c);
  st->calls[c.kind]++;
  if (r.res == koloSuccess && r.bad == 0) return 0;
  char what[160];
  cc_describe(&c, what, sizeof what);
  if (r.res != koloSuccess)
    printf("rank %d: iteration %ld (%s): %s: %s\n", rank, iter, what, koloGetErrorString(r.res), koloGetLastError(comm));
  else
    printf("rank %d: iteration %ld (%s): %zu wrong elements, first [%zu] = %g, want %g\n", rank, iter, what, r.bad,
           r.first_bad, r.got, r.want);
  st->bad += (long)r.bad;
  return -1;
}

static void print_rank(const soak_state *st, int rank, long iters, double secs) {
  long total = 0;
  for (int k = 0; k < CC_NUM_KINDS; k++) total += st->calls[k];
  printf("rank %d: %ld iterations (%ld calls checked) in %.0f s, %ld wrong elements; rss KiB %ld baseline / %ld peak "
         "/ %ld last, fds %d / %d / %d, threads %d / %d / %d\n",
         rank, iters, total, secs, st->bad, st->base.rss_kib, st->peak.rss_kib, st->last.rss_kib, st->base.fds,
         st->peak.fds, st->last.fds, st->base.threads, st->peak.threads, st->last.threads);
}

static void set_env(const options *o, int rank) {
  char v[64];
  snprintf(v, sizeof v, "127.0.0.1:%d", o->port);
  setenv("KOLO_ROOT", v, 1);
  snprintf(v, sizeof v, "%d", rank);
  setenv("KOLO_RANK", v, 1);
  snprintf(v, sizeof v, "%d", o->ranks);
  setenv("KOLO_WORLD_SIZE", v, 1);
  setenv("KOLO_SECRET", "0ddba11c0ffee5ca1ab1edeadbeef000", 1);
  if (getenv("KOLO_TIMEOUT_MS") == NULL) setenv("KOLO_TIMEOUT_MS", "60000", 1);
  if (o->tcp) {
    setenv("KOLO_NET_FORCE", "1", 1);
    setenv("KOLO_SHM_DISABLE", "1", 1);
    setenv("KOLO_NET", "socket", 1);
  }
}

/* The loop of one rank; returns its exit status. */
static int soak_rank(const options *o, int rank) {
  mallopt(M_MMAP_THRESHOLD, 64 * 1024); /* no dynamic threshold: freed buffers leave */
  set_env(o, rank);
  koloComm_t comm = NULL;
  koloResult_t res = koloCommInitFromEnv(&comm, NULL);
  if (res != koloSuccess) {
    printf("rank %d: init: %s: %s\n", rank, koloGetErrorString(res), koloGetLastError(NULL));
    return 2;
  }
  soak_state st;
  memset(&st, 0, sizeof st);
  uint64_t rng = o->seed;
  int64_t t0 = fu_now_ns(), t_end = t0 + (int64_t)o->seconds * 1000000000LL;
  long iter = 0;
  int bad = 0, stop = 0;
  while (!bad && !stop) {
    bad = one_call(comm, o, &st, rank, &rng, iter++) != 0;
    if (bad || iter % o->sample != 0) continue;
    bad = check_sample(o, &st, rank, iter) != 0;
    stop = agree_stop(comm, o, rank, iter, t_end);
    bad |= stop < 0;
    if (rank == 0 && iter % (o->sample * 50) == 0) print_rank(&st, rank, iter, (double)(fu_now_ns() - t0) / 1e9);
    fflush(stdout);
  }
  res = bad ? koloCommAbort(comm) : koloCommDestroy(comm);
  if (res != koloSuccess) printf("rank %d: teardown: %s\n", rank, koloGetErrorString(res));
  print_rank(&st, rank, iter, (double)(fu_now_ns() - t0) / 1e9);
  fflush(stdout);
  return bad || res != koloSuccess ? 1 : 0;
}

static int parse(options *o, int argc, char **argv) {
  *o = (options){3, 0, 50, 20, 0, 2000, 0, 16384, 1, 4u << 20};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (strcmp(a, "--tcp") == 0) o->tcp = 1;
    else if (has && strcmp(a, "--ranks") == 0) o->ranks = atoi(argv[++i]);
    else if (has && strcmp(a, "--iters") == 0) o->iters = atol(argv[++i]);
    else if (has && strcmp(a, "--seconds") == 0) o->seconds = atol(argv[++i]);
    else if (has && strcmp(a, "--seed") == 0) o->seed = strtoull(argv[++i], NULL, 0);
    else if (has && strcmp(a, "--max-bytes") == 0) o->max_bytes = (size_t)atol(argv[++i]);
    else if (has && strcmp(a, "--sample") == 0) o->sample = atoi(argv[++i]);
    else if (has && strcmp(a, "--warmup") == 0) o->warmup = atoi(argv[++i]);
    else if (has && strcmp(a, "--rss-bound-kib") == 0) o->rss_bound_kib = atol(argv[++i]);
    else return -1;
  }
  return o->ranks < 2 || o->ranks > 8 || o->sample < 1 || o->warmup < 1 || o->max_bytes < 64 ? -1 : 0;
}

/* Waits for every rank; a rank past the limit is killed (a hang). */
static int wait_ranks(const pid_t *pids, int n, double limit_s) {
  int code = 0, left = n;
  int64_t end = fu_now_ns() + (int64_t)(limit_s * 1e9);
  while (left > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      left--;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) code = 1;
      continue;
    }
    if (pid < 0) return 1;
    if (fu_now_ns() > end) {
      printf("kolo-soak: ranks still running after %.0f s: killing them\n", limit_s);
      for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
      end = INT64_MAX;
      code = 1;
    }
    fu_sleep_ms(50);
  }
  return code;
}

int main(int argc, char **argv) {
  options o;
  if (parse(&o, argc, argv) != 0) {
    fprintf(stderr, "usage: kolo-soak [--ranks N] [--iters N | --seconds S] [--tcp] [--seed S] [--max-bytes B]\n"
                    "                 [--sample K] [--warmup W] [--rss-bound-kib KIB]\n");
    return 2;
  }
  o.port = kt_free_port();
  printf("kolo-soak: %d ranks over %s, %s %ld, seed %llu, counts up to %zu bytes; sample every %d iterations, "
         "baseline of %d samples, bound rss +%ld KiB, fds +0, threads +0\n",
         o.ranks, o.tcp ? "tcp (loopback)" : "shm", o.seconds ? "seconds" : "iterations", o.seconds ? o.seconds : o.iters,
         o.seed, o.max_bytes, o.sample, o.warmup, o.rss_bound_kib);
  fflush(stdout);
  pid_t pids[8];
  for (int r = 0; r < o.ranks; r++) {
    pids[r] = fork();
    if (pids[r] < 0) return 2; /* the forked ones lose their peers and fail */
    if (pids[r] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      _exit(soak_rank(&o, r));
    }
  }
  double limit = o.seconds ? (double)o.seconds + 300 : 600 + (double)o.iters * 0.05;
  int code = wait_ranks(pids, o.ranks, limit);
  printf("kolo-soak: %s\n", code ? "FAILED" : "passed");
  return code;
}
