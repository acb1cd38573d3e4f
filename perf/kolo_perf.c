/* kolo_perf.c - kolo-perf: nccl-tests-style sweeps of kolo's collectives
 * (ranks: perf_ranks.c), and the dispatch of its subcommands.  The user
 * guide is docs/benchmarking.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h" /* kolo_param_print */
#include "perf/perf_args.h"
#include "perf/perf_models.h" /* perf_share_path */
#include "perf/perf_net.h"
#include "perf/perf_overlap.h"
#include "perf/perf_p2p.h"
#include "perf/perf_prims.h"
#include "perf/perf_ranks.h"
#include "perf/perf_topo.h"
#include "perf/perf_tune.h"

/* `kolo-perf plot ...` is perf/plot.py (python3, gnuplot): python3 runs it
 * (the installed copy, else the source tree's) with the arguments after "plot". */
static int plot_main(int argc, char **argv) {
  static char installed[4200];
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (args == NULL) return fprintf(stderr, "kolo-perf plot: out of memory\n"), 2;
  args[0] = "python3";
  args[1] = perf_share_path("plot.py", installed, sizeof installed) ? installed : KOLO_PERF_PLOT_PY;
  for (int i = 2; i < argc; i++) args[i] = argv[i];
  execvp(args[0], args);
  fprintf(stderr, "kolo-perf plot: cannot run python3 %s: %s\n", args[1], strerror(errno));
  free(args);
  return 2;
}

/* The subcommands with a command line of their own: their exit code, or
 * -1 when argv[1] names none of them. */
static int subcommand_main(int argc, char **argv) {
  if (argc < 2) return -1;
  if (strcmp(argv[1], "net") == 0) return perf_net_main(argc - 1, argv + 1);
  if (strcmp(argv[1], "plot") == 0) return plot_main(argc, argv);
  if (strcmp(argv[1], "topo") == 0) return perf_topo_main(argc, argv);
  if (strcmp(argv[1], "p2p") == 0) return perf_p2p_main(argc, argv);
  if (strcmp(argv[1], "tune") == 0) return perf_tune_main(argc, argv);
  return -1;
}

int main(int argc, char **argv) {
  int sub = subcommand_main(argc, argv);
  if (sub >= 0) return sub;
  perf_args a;
  /* `kolo-perf overlap` runs on the ranks set up below (perf_overlap.h). */
  int overlap = argc > 1 && strcmp(argv[1], "overlap") == 0;
  int r = overlap ? perf_args_parse_sub(&a, argc, argv, &perf_overlap_flags)
                  : perf_args_parse(&a, argc, argv, PERF_TOOL_KOLO);
  if (r != 0) return r > 0 ? 0 : 2;
  if (a.print_params) {
    kolo_param_print(stdout);
    if (a.coll == PERF_NUM_COLLS && !a.prims) return 0;
  }
  if (a.prims) return perf_cuda_ready(&a, 0) == 0 ? perf_prims_run(&a) : 2;
  return perf_run_ranks(&a);
}
