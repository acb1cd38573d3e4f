/* perf_tune.c - kolo-perf tune [-P N] [-o FILE] [--quick].
 *
 * Per transport, N forked ranks (default 2) time an 8-byte all-reduce
 * (latency) and a large one (bandwidth) on the flat ring (KOLO_ALGO=ring,
 * so that the fit reads the ring's formula of ring/algo.h):
 *   T(S) = 2(n-1) a + 2(n-1)/n S / b
 * and solve it for a (from the 8-byte time) and b (from the large one).
 * shm: the ranks as one host; socket: each rank its own KOLO_HOSTID, so
 * they meet over TCP as tests/ do.  ib is not measured yet (the file then
 * leaves it out, and kolo keeps the compiled constant).  --quick: few
 * iterations and 1 MiB, for tests. */
#define _GNU_SOURCE
#include "perf/perf_tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kolo.h"
#include "ring/tuning.h"

typedef struct {
  int nranks, iters;
  size_t big;
  const char *out;
} tune_args;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds per all-reduce of `bytes`, after one warm-up call. */
static double time_all_reduce(koloComm_t comm, char *buf, size_t bytes, int iters) {
  if (koloAllReduce(buf, buf, bytes, koloUint8, koloSum, comm, NULL) != koloSuccess) return -1;
  double t0 = now_s();
  for (int i = 0; i < iters; i++)
    if (koloAllReduce(buf, buf, bytes, koloUint8, koloSum, comm, NULL) != koloSuccess) return -1;
  return (now_s() - t0) / iters;
}

/* One forked rank: its two times go to fd (rank 0 only). */
static int rank_main(const tune_args *a, int link, koloUniqueId id, int rank, int fd) {
  char host[32];
  snprintf(host, sizeof host, "tune-%d", link == KOLO_LINK_SOCKET ? rank : 0);
  setenv("KOLO_HOSTID", host, 1);
  setenv("KOLO_ALGO", "ring", 1);
  koloComm_t comm;
  if (koloCommInitRank(&comm, a->nranks, id, rank) != koloSuccess) return 1;
  char *buf = calloc(1, a->big);
  double t[2] = {time_all_reduce(comm, buf, 8, a->iters * 10), time_all_reduce(comm, buf, a->big, a->iters)};
  if (rank == 0 && write(fd, t, sizeof t) != (ssize_t)sizeof t) t[0] = -1;
  koloCommDestroy(comm);
  free(buf);
  return t[0] < 0 || t[1] < 0;
}

/* Reads exactly n bytes; -1 on EOF or error. */
static int read_full(int fd, void *p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* The job's id in rank `rank`: rank 0 makes it -- its rendezvous root
 * thread starts in its own process, after every fork -- and hands it to
 * the others through idp; a rank 0 that fails closes the pipe, and they
 * read EOF.  (Forking after koloGetUniqueId forked a copy of the root
 * thread's state: under ASan the children hung in malloc on a lock that
 * thread held.) */
static int rank_id(int rank, int nranks, const int idp[2], koloUniqueId *id) {
  if (rank != 0) {
    close(idp[1]);
    return read_full(idp[0], id, sizeof *id);
  }
  close(idp[0]);
  int ok = koloGetUniqueId(id) == koloSuccess;
  for (int r = 1; ok && r < nranks; r++) ok = write(idp[1], id, sizeof *id) == (ssize_t)sizeof *id;
  close(idp[1]);
  return ok ? 0 : -1;
}

/* A forked rank: its id, then its two times to fd (rank 0 only). */
static int rank_start(const tune_args *a, int link, int rank, const int idp[2], int fd) {
  koloUniqueId id;
  if (rank_id(rank, a->nranks, idp, &id) != 0) return 1;
  return rank_main(a, link, id, rank, fd);
}

/* The 8-byte and large all-reduce times of `link`, or -1.  This process
 * only forks and waits: it never starts a thread, so every fork is of a
 * single-threaded process. */
static int measure(const tune_args *a, int link, double t[2]) {
  int fds[2], idp[2], ok = 1;
  if (pipe(fds) != 0) return -1;
  if (pipe(idp) != 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  for (int r = 0; r < a->nranks; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      _exit(rank_start(a, link, r, idp, fds[1]));
    }
    ok &= pid > 0;
  }
  close(idp[0]);
  close(idp[1]);
  close(fds[1]);
  ok &= read(fds[0], t, 2 * sizeof t[0]) == (ssize_t)(2 * sizeof t[0]);
  close(fds[0]);
  for (int status, r = 0; r < a->nranks; r++) ok &= wait(&status) > 0 && WIFEXITED(status) && !WEXITSTATUS(status);
  return ok ? 0 : -1;
}

/* Solves the ring's T(S) for alpha (us) and beta (GB/s). */
static void fit(const tune_args *a, const double t[2], kolo_tune_link *l) {
  double n = a->nranks, steps = 2 * (n - 1), a_s = t[0] / steps;
  double wire = t[1] - steps * a_s;
  if (wire <= 0) wire = t[1]; /* the large call no slower than its latency: bound b by it */
  l->alpha_us = a_s * 1e6 > 1e-3 ? a_s * 1e6 : 1e-3;
  l->beta_gbs = steps / n * (double)a->big / wire / 1e9;
  l->set = 1;
}

static int parse(int argc, char **argv, tune_args *a) {
  *a = (tune_args){2, 50, (size_t)64 << 20, "kolo-tuning.txt"};
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "-P") == 0 && i + 1 < argc) a->nranks = atoi(argv[++i]);
    else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) a->out = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0) a->iters = 3, a->big = (size_t)1 << 20;
    else {
      fprintf(stderr, "usage: kolo-perf tune [-P RANKS (2..64)] [-o FILE] [--quick]\n");
      return strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0 ? 1 : -1;
    }
  }
  if (a->nranks >= 2 && a->nranks <= 64) return 0;
  fprintf(stderr, "kolo-perf tune: -P %d: ranks are 2..64\n", a->nranks);
  return -1;
}

int perf_tune_main(int argc, char **argv) {
  tune_args a;
  int r = parse(argc, argv, &a);
  if (r != 0) return r > 0 ? 0 : 2;
  kolo_tuning f;
  memset(&f, 0, sizeof f);
  static const int links[] = {KOLO_LINK_SHM, KOLO_LINK_SOCKET};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    double t[2];
    if (measure(&a, links[i], t) != 0) {
      fprintf(stderr, "kolo-perf tune: %s: the ranks failed (KOLO_DEBUG=WARN says why)\n", kolo_link_name(links[i]));
      return 1;
    }
    fit(&a, t, &f.link[links[i]]);
    printf("%-8s 8 B all-reduce %9.2f us, %zu B %9.2f us -> alpha %.3g us, beta %.3g GB/s\n", kolo_link_name(links[i]),
           t[0] * 1e6, a.big, t[1] * 1e6, f.link[links[i]].alpha_us, f.link[links[i]].beta_gbs);
  }
  FILE *out = fopen(a.out, "w");
  char note[96];
  snprintf(note, sizeof note, "kolo-perf tune -P %d: ring all-reduce fits; ib not measured", a.nranks);
  if (out == NULL || kolo_tuning_write(out, &f, note) != 0 || fclose(out) != 0) {
    perror(a.out);
    return 1;
  }
  printf("wrote %s (KOLO_TUNING_FILE=%s loads it)\n", a.out, a.out);
  return 0;
}
