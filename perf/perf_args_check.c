/* perf_args_check.c - which of kolo-perf's flags go together (after
 * perf_args.c has parsed them all): each refusal is one sentence naming
 * the flags. */
#include "perf/perf_args_opts.h"

/* The first flag of `list` (getopt values, 0-terminated) that was given, or 0. */
static int first_seen(perf_seen_opts *seen, const int *list) {
  for (; *list; list++)
    if (seen->opt[*list]) return *list;
  return 0;
}

static int refuse(const char *prog, const char *why, int c) {
  char name[64];
  fprintf(stderr, "%s: %s %s\n", prog, perf_flag_name(c, name, sizeof name), why);
  return -1;
}

/* prims runs on one device, without ranks. */
static int check_prims(perf_args *a, perf_seen_opts *seen, const char *prog) {
  static const int not_prims[] = {'P', 't', 'g', 'o', 'r', 'a', 'm', 'N', 'z', 'p', 'C', 'T', 'G', 'J',
                                  OPT_INPLACE, OPT_MEM, OPT_GRAPH, OPT_JSON, OPT_LABEL, OPT_CEILING, OPT_BIND, 0};
  static const int prims_only[] = {OPT_LAUNCH, OPT_BLOCKS, OPT_BLOCK_THREADS, 0};
  int c;
  if (a->prims && (c = first_seen(seen, not_prims)) != 0) return refuse(prog, "is not a flag of prims", c);
  if (!a->prims && (c = first_seen(seen, prims_only)) != 0) return refuse(prog, "is a flag of prims alone", c);
  return 0;
}

/* CUDA graphs and devices need device memory. */
static int check_cuda(perf_args *a, perf_seen_opts *seen, const char *prog) {
  if (a->prims || a->mem_cuda) return 0;
  if (a->graph_launches > 0)
    return refuse(prog, "needs --mem cuda: CUDA graphs hold device work, and host calls run on the host", 'G');
  if (a->ndevs > 0) return refuse(prog, "needs --mem cuda", OPT_DEVICES);
  if (a->ceiling_memcpy == 0 && seen->opt[OPT_CEILING] && a->ceiling_gbps <= 0)
    return refuse(prog, "needs a value", OPT_CEILING);
  return 0;
}

/* Graph capture's and -z 3's needs (nccl-tests refuses -z 3 with -G too). */
static int check_graph(perf_args *a, const char *prog) {
  if (a->graph_launches == 0) return 0;
  if (a->warmup < 1)
    return refuse(prog, "needs -w 1 or more: a rank's first call to a peer connects and allocates, which a graph "
                        "capture cannot hold", 'G');
  if (a->blocking != PERF_BLOCKING_NONE)
    return refuse(prog, "cannot go with -z 1, 2 or 3: a graph's calls cannot be waited for one by one", 'G');
  return 0;
}

static int check_sizes(perf_args *a, const char *prog) {
  if (a->min_bytes > a->max_bytes)
    return fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", prog, a->min_bytes, a->max_bytes), -1;
  if (a->step_factor == 1 && a->step_bytes == 0)
    return fprintf(stderr, "%s: -i 0 with -f 1 never reaches -e\n", prog), -1;
  return 0;
}

/* --bind pins the processes -P forks; a launcher's ranks are its to place. */
static int check_ceiling_bind(perf_args *a, const char *prog) {
  if (a->ceiling_memcpy && a->mem_cuda)
    return refuse(prog, "memcpy measures host memory: with --mem cuda give the ceiling in GB/s (kolo-perf prims "
                        "measures the device's copy rate)", OPT_CEILING);
  if (a->bind_core && !a->procs_given)
    return refuse(prog, "core needs -P: a launcher's ranks are placed by the launcher (mpirun --bind-to, "
                        "srun --cpu-bind, taskset)", OPT_BIND);
  return 0;
}

int perf_args_check(perf_args *a, perf_seen_opts *seen, const char *prog) {
  return (check_prims(a, seen, prog) || check_cuda(a, seen, prog) || check_graph(a, prog) || check_sizes(a, prog) ||
          check_ceiling_bind(a, prog)) ? -1 : 0;
}
