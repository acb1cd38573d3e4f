/* perf_p2p.c - `kolo-perf p2p` (see perf_p2p.h): its command line, the GPU
 * part in a child process, then the host ranks. */
#define _GNU_SOURCE /* fork */
#include "perf/perf_p2p.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf/perf_launch.h"

static perf_p2p_opts opts; /* what a->p2p points at */

static void usage(FILE *f) {
  fprintf(f,
          "usage: kolo-perf p2p [flags]\n"
          "  copy bandwidth and latency between every pair, as matrices (row: source):\n"
          "  GPUs: cudaMemcpyAsync device to device for each pair with peer access (nvbandwidth's\n"
          "  copies; on kolo's CPU model, model figures); host ranks: koloSend -> koloRecv over\n"
          "  shared memory between -P processes, each ordered pair in turn\n"
          "  -b, --bytes N         bytes per bandwidth copy or message (default 32M; K, M, G)\n"
          "  -n, --iters N         timed copies or messages per pair (default 20)\n"
          "  -w, --warmup_iters N  untimed ones first (default 5)\n"
          "      --lat-bytes N     bytes per latency copy or ping (default 8)\n"
          "      --lat-iters N     timed latency copies or round trips per pair (default 1000)\n"
          "  -P, --procs N         host ranks' processes (default 2)\n"
          "  -t, --nthreads N      host ranks per process, as threads (default 1)\n"
          "      --only gpu|host   one part alone (default both)\n"
          "  -h, --help            this text\n");
}

/* One option into o / a; 0, or -1 for a bad value. */
static int apply(perf_args *a, int c, const char *v) {
  int only = 0;
  switch (c) {
    case 'b': return perf_parse_size(v, &opts.bytes) == 0 && opts.bytes > 0 ? 0 : -1;
    case 'L': return perf_parse_size(v, &opts.lat_bytes) == 0 && opts.lat_bytes > 0 ? 0 : -1;
    case 'n': return perf_parse_int(v, 1, 1 << 24, &opts.iters);
    case 'l': return perf_parse_int(v, 1, 1 << 24, &opts.lat_iters);
    case 'w': return perf_parse_int(v, 0, 1 << 24, &opts.warmup);
    case 'P': a->procs_given = 1; return perf_parse_int(v, 1, 4096, &a->procs);
    case 't': return perf_parse_int(v, 1, 4096, &a->threads);
    case 'o':
      only = strcmp(v, "gpu") == 0 ? 1 : strcmp(v, "host") == 0 ? 2 : 0;
      opts.gpu = only == 1;
      opts.host = only == 2;
      return only ? 0 : -1;
    default: return -1;
  }
}

static void set_defaults(perf_args *a) {
  memset(a, 0, sizeof *a);
  a->coll = PERF_NUM_COLLS;
  a->procs = 2;
  a->procs_given = 1; /* p2p runs its own processes, never a launcher's */
  a->threads = a->gpus_per_thread = a->agg_iters = a->run_cycles = 1;
  opts = (perf_p2p_opts){32u << 20, 8, 20, 1000, 5, 1, 1};
  a->p2p = &opts;
}

static int parse(perf_args *a, int argc, char **argv) {
  static const struct option longs[] = {
      {"bytes", required_argument, NULL, 'b'},     {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'}, {"lat-bytes", required_argument, NULL, 'L'},
      {"lat-iters", required_argument, NULL, 'l'}, {"procs", required_argument, NULL, 'P'},
      {"nthreads", required_argument, NULL, 't'},  {"only", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
  int c;
  set_defaults(a);
  opterr = 0;
  optind = 2; /* past "p2p" */
  while ((c = getopt_long(argc, argv, ":b:n:w:P:t:h", longs, NULL)) != -1) {
    if (c == 'h') return usage(stdout), 1;
    if (c == ':' || c == '?')
      return fprintf(stderr, "kolo-perf p2p: %s %s (see --help)\n", c == ':' ? "missing value for" : "unknown option",
                     argv[optind - 1]), -1;
    if (apply(a, c, optarg) == 0) continue;
    const char *name = "?";
    for (const struct option *o = longs; o->name; o++)
      if (o->val == c) name = o->name;
    return fprintf(stderr, "kolo-perf p2p: bad value '%s' for --%s (see --help)\n", optarg, name), -1;
  }
  if (optind != argc) return fprintf(stderr, "kolo-perf p2p: unexpected argument '%s'\n", argv[optind]), -1;
  if (a->procs * a->threads < 2 && opts.host)
    return fprintf(stderr, "kolo-perf p2p: the host matrix needs 2 ranks or more (-P, -t)\n"), -1;
  return 0;
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
  int r = parse(&a, argc, argv);
  if (r != 0) return r > 0 ? 0 : 2;
  int code = opts.gpu ? gpu_in_child() : 0;
  if (opts.host) {
    int host = perf_run_ranks(&a);
    code = host > code ? host : code;
  }
  return code;
}
