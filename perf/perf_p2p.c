/* perf_p2p.c - `kolo-perf p2p` (see perf_p2p.h): its command line, the GPU
 * part in a child process, then the host ranks; the matrices they print. */
#define _GNU_SOURCE /* fork */
#include "perf/perf_p2p.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf/perf_args_opts.h"
#include "perf/perf_ranks.h"

static perf_p2p_opts opts; /* what a->p2p points at */

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s p2p [flags]\n"
          "  copy bandwidth and latency between every pair, as matrices (row: source): GPUs'\n"
          "  cudaMemcpyAsync, host ranks' koloSend -> koloRecv (docs/benchmarking.md)\n"
          "  -b, --bytes N         bytes per bandwidth copy or message (default 32M; K, M, G)\n"
          "  -n, --iters N         timed copies or messages per pair (default 20)\n"
          "  -w, --warmup_iters N  untimed ones first (default 5)\n"
          "      --lat-bytes N     bytes per latency copy or ping (default 8)\n"
          "      --lat-iters N     timed latency copies or round trips per pair (default 1000)\n"
          "  -P, --procs N         host ranks' processes (default 2)\n"
          "  -t, --nthreads N      host ranks per process, as threads (default 1)\n"
          "      --only gpu|host   one part alone (default both)\n"
          "  -h, --help            this text\n",
          prog);
}

enum { O_LAT_BYTES = PERF_SUB_OPT, O_LAT_ITERS, O_ONLY };

/* p2p's own flags; -b -n -w -P -t are the shared parser's. */
static int apply(perf_args *a, int c, const char *v) {
  (void)a;
  int only = 0;
  switch (c) {
    case O_LAT_BYTES: return perf_parse_size(v, &opts.lat_bytes) == 0 && opts.lat_bytes > 0 ? 0 : -1;
    case O_LAT_ITERS: return perf_parse_int(v, 1, 1 << 24, &opts.lat_iters);
    default: /* O_ONLY */
      only = strcmp(v, "gpu") == 0 ? 1 : strcmp(v, "host") == 0 ? 2 : 0;
      opts.gpu = only == 1;
      opts.host = only == 2;
      return only ? 0 : -1;
  }
}

static void defaults(perf_args *a) {
  a->procs = 2;
  a->procs_given = 1; /* p2p runs its own processes, never a launcher's */
  opts = (perf_p2p_opts){32u << 20, 8, 20, 1000, 5, 1, 1};
  a->p2p = &opts;
}

static int check(perf_args *a, const char *prog) {
  opts.bytes = a->max_bytes = a->min_bytes;
  opts.iters = a->iters;
  opts.warmup = a->warmup;
  if (opts.bytes == 0) return fprintf(stderr, "%s p2p: -b takes 1 byte or more\n", prog), -1;
  if (a->procs * a->threads < 2 && opts.host)
    return fprintf(stderr, "%s p2p: the host matrix needs 2 ranks or more (-P, -t)\n", prog), -1;
  return 0;
}

static const struct option longs[] = {
    {"bytes", required_argument, NULL, 'b'}, {"lat-bytes", required_argument, NULL, O_LAT_BYTES},
    {"lat-iters", required_argument, NULL, O_LAT_ITERS}, {"only", required_argument, NULL, O_ONLY},
    {NULL, 0, NULL, 0}};
static const int shared[] = {'b', 'n', 'w', 'P', 't', 0};
static const perf_sub_flags p2p_flags = {"p2p", shared, longs, defaults, apply, check, usage};

/* nvbandwidth's layout: row the source, column the destination. */
void perf_p2p_matrix(FILE *out, const char *title, const char *name, const double *v, int n, const char *diag) {
  char label[32];
  fprintf(out, "# %s\n#%9s", title, "src\\dst");
  for (int j = 0; j < n; j++) {
    snprintf(label, sizeof label, "%s%d", name, j);
    fprintf(out, " %9s", label);
  }
  fprintf(out, "\n");
  for (int i = 0; i < n; i++) {
    snprintf(label, sizeof label, "%s%d", name, i);
    fprintf(out, " %9s", label);
    for (int j = 0; j < n; j++) {
      double x = v[i * n + j];
      if (i == j && diag) fprintf(out, " %9s", diag);
      else if (isnan(x)) fprintf(out, " %9s", "n/a");
      else fprintf(out, " %9.2f", x);
    }
    fprintf(out, "\n");
  }
  fflush(out);
}

/* The GPU part in a child: this process makes no CUDA call, since it
 * forks the host ranks after. */
static int gpu_in_child(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return fprintf(stderr, "kolo-perf p2p: fork: %s\n", strerror(errno)), 2;
  if (pid == 0) {
    int code = perf_p2p_gpu_run(&opts, stdout);
    fflush(NULL);
    _exit(code);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return fprintf(stderr, "kolo-perf p2p: waitpid: %s\n", strerror(errno)), 2;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  fprintf(stderr, "kolo-perf p2p: the GPU part was killed by signal %d\n", WTERMSIG(status));
  return 2;
}

int perf_p2p_main(int argc, char **argv) {
  perf_args a;
  int r = perf_args_parse_sub(&a, argc, argv, &p2p_flags);
  if (r != 0) return r > 0 ? 0 : 2;
  int code = opts.gpu ? gpu_in_child() : 0;
  if (opts.host) {
    int host = perf_run_ranks(&a);
    code = host > code ? host : code;
  }
  return code;
}
