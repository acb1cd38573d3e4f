/* boot_scale.c - kolo-boot-scale N [BYTES]: what the bootstrap costs each
 * rank (`perf/compare.sh boot`; perf/compare/boot.sh says what it measures).
 *
 * Forks N processes (first, while this process has one thread, as
 * kolo-perf does), then starts the root here (koloGetUniqueId) and hands
 * them its id.  Each rank inits a host communicator, runs one checked 8-byte
 * all-reduce (and with BYTES one checked all-to-all of BYTES per peer),
 * measures itself, reports, and waits until every rank has measured before
 * it destroys its communicator.  This process samples its own descriptors
 * meanwhile (the root's peak) and reads from its log what the root sent.
 * Prints one line (M/X: median/max over the ranks; pipes_mib with BYTES):
 *
 *   kolo N ranks wall_ms W fds M/X rss_mib M/X links M/X init_ms M/X [pipes_mib M/X] root_fds P root_bytes B failed F
 */
#define _GNU_SOURCE
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/comm_usage.h"
#include "kolo.h"
#include "perf/perf_args.h"
#include "perf/perf_pipe.h"
#include "perf/perf_proc.h"

#define WAIT_MS 600000

static size_t a2a_bytes; /* per peer; 0: no all-to-all */

/* ---- a rank ------------------------------------------------------------------- */

static int kolo_a2a(const int32_t *in, int32_t *out, size_t count, int rank, void *comm) {
  koloResult_t res = koloAlltoAll(in, out, count, koloInt32, comm, NULL);
  if (res != koloSuccess) fprintf(stderr, "rank %d: koloAlltoAll: %s\n", rank, koloGetLastError(comm));
  return res != koloSuccess;
}

/* Init, one checked all-reduce (and all-to-all), the measurements. */
static perf_rank_stat rank_run(int rank, int n, const koloUniqueId *id, koloComm_t *comm) {
  perf_rank_stat s = {rank, 0, -1, -1, -1, 0, -1};
  int64_t t0 = perf_proc_now_us();
  koloResult_t res = koloCommInitRank(comm, n, *id, rank);
  s.init_us = perf_proc_now_us() - t0;
  if (res != koloSuccess) {
    fprintf(stderr, "rank %d: koloCommInitRank: %s\n", rank, koloGetLastError(NULL));
    return s;
  }
  float v[2] = {(float)(rank + 1), 1.0f};
  res = koloAllReduce(v, v, 2, koloFloat32, koloSum, *comm, NULL);
  if (res != koloSuccess) fprintf(stderr, "rank %d: koloAllReduce: %s\n", rank, koloGetLastError(*comm));
  s.ok = res == koloSuccess && v[0] == (float)n * (float)(n + 1) / 2 && v[1] == (float)n;
  if (res == koloSuccess && !s.ok) fprintf(stderr, "rank %d: wrong sum %g, %g\n", rank, v[0], v[1]);
  if (s.ok && a2a_bytes > 0) s.ok = perf_a2a_checked(rank, n, a2a_bytes, kolo_a2a, *comm);
  kolo_comm_usage u;
  if (kolo_comm_usage_of(*comm, &u) != koloSuccess) {
    fprintf(stderr, "rank %d: kolo_comm_usage_of failed\n", rank);
    s.ok = 0;
    return s;
  }
  s.pipe_kib = a2a_bytes > 0 ? u.pipe_bytes / 1024 : -1;
  s.fds = perf_proc_fds();
  s.rss_kib = perf_proc_rss_kib();
  s.links = u.bootstrap_links;
  return s;
}

static int child_main(int rank, int n, int id_fd, int res_fd, int go_fd) {
  koloUniqueId id;
  if (perf_read_full(id_fd, &id, sizeof id) != 0) return 3; /* the parent could not start the root */
  koloComm_t comm = NULL;
  perf_rank_stat s = rank_run(rank, n, &id, &comm);
  if (write(res_fd, &s, sizeof s) != (ssize_t)sizeof s) return 2;
  char go;
  struct pollfd p = {go_fd, POLLIN, 0};
  if (poll(&p, 1, WAIT_MS) > 0 && read(go_fd, &go, 1) < 0) go = 0; /* every rank has measured */
  if (comm) koloCommDestroy(comm);
  return s.ok ? 0 : 2;
}

/* ---- the parent ------------------------------------------------------------------ */

typedef struct {
  int id[2], res[2], go[2];
} pipes;

static pid_t fork_rank(int rank, int n, const pipes *p) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  close(p->id[1]);
  close(p->res[0]);
  close(p->go[1]);
  _exit(child_main(rank, n, p->id[0], p->res[1], p->go[0]));
}

/* The records of n ranks, sampling this process's descriptors meanwhile. */
static int collect(int fd, perf_rank_stat *s, int n, int *peak_fds) {
  size_t want = (size_t)n * sizeof *s, got = 0;
  int64_t end = perf_proc_now_us() + (int64_t)WAIT_MS * 1000;
  while (got < want && perf_proc_now_us() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 5);
    int fds = perf_proc_fds();
    if (fds > *peak_fds) *peak_fds = fds;
    if (r <= 0) continue;
    ssize_t k = read(fd, (char *)s + got, want - got);
    if (k <= 0) break; /* every rank closed its end */
    got += (size_t)k;
  }
  return (int)(got / sizeof *s);
}

/* What the root said it sent ("answered N connection(s) with B bytes"). */
static long long root_bytes(const char *log) {
  FILE *f = fopen(log, "re");
  if (f == NULL) return -1;
  char line[1024];
  long long bytes = -1, conns;
  while (fgets(line, sizeof line, f) != NULL) {
    const char *at = strstr(line, "answered ");
    if (at && sscanf(at, "answered %lld connection(s) with %lld bytes", &conns, &bytes) == 2) break;
  }
  fclose(f);
  return bytes;
}

static int run(int n) {
  pipes p;
  if (pipe(p.id) != 0 || pipe(p.res) != 0 || pipe(p.go) != 0) return perror("kolo-boot-scale: pipe"), 2;
  int64_t t0 = perf_proc_now_us();
  int forked = 0;
  for (; forked < n; forked++)
    if (fork_rank(forked, n, &p) < 0) break;
  close(p.id[0]);
  close(p.res[1]);
  close(p.go[0]);
  char log[64];
  snprintf(log, sizeof log, "/tmp/kolo-boot-scale-%d.log", (int)getpid());
  setenv("KOLO_DEBUG", "INFO", 1); /* this process only: the root says what it sent */
  setenv("KOLO_DEBUG_FILE", log, 1);
  koloUniqueId id;
  int ok = forked == n && koloGetUniqueId(&id) == koloSuccess;
  for (int i = 0; ok && i < n; i++) ok = write(p.id[1], &id, sizeof id) == (ssize_t)sizeof id;
  close(p.id[1]);
  perf_rank_stat *s = calloc((size_t)n, sizeof *s);
  int peak = perf_proc_fds(), got = s && ok ? collect(p.res[0], s, n, &peak) : 0;
  int64_t wall = perf_proc_now_us() - t0;
  for (int i = 0; i < n; i++)
    if (write(p.go[1], "g", 1) != 1) break;
  close(p.go[1]);
  close(p.res[0]);
  int failed_exit = 0, status;
  while (wait(&status) > 0) failed_exit += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  char sum[256];
  int failed;
  perf_proc_summary(s, got, sum, sizeof sum, &failed);
  failed += n - got;
  printf("kolo %d ranks wall_ms %lld %s root_fds %d root_bytes %lld failed %d\n", n, (long long)(wall / 1000), sum,
         peak, root_bytes(log), failed > failed_exit ? failed : failed_exit);
  unlink(log);
  free(s);
  return failed || failed_exit ? 2 : 0;
}

/* What is wrong with the command line, or NULL (n and a2a_bytes set). */
static const char *parse_args(int argc, char **argv, int *n) {
  static char why[256];
  if (argc < 2 || argc > 3) return "one or two arguments";
  if (perf_parse_int(argv[1], 1, INT_MAX, n) != 0)
    return snprintf(why, sizeof why, "NRANKS '%.64s' is not a whole number from 1", argv[1]), why;
  if (argc == 3 && (perf_parse_size(argv[2], &a2a_bytes) != 0 || a2a_bytes % 4 != 0 || a2a_bytes > (1u << 30)))
    return snprintf(why, sizeof why,
                    "ALLTOALL_BYTES_PER_PEER '%.64s' is not a multiple of 4 up to 1 GiB (K, M, G: powers of 1024)",
                    argv[2]), why;
  return NULL;
}

int main(int argc, char **argv) {
  int n = 0;
  const char *wrong = parse_args(argc, argv, &n);
  if (wrong != NULL) {
    fprintf(stderr, "kolo-boot-scale: %s\nusage: kolo-boot-scale NRANKS [ALLTOALL_BYTES_PER_PEER]\n", wrong);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  fflush(NULL);
  return run(n);
}
