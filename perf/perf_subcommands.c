/* perf_subcommands.c - which subcommand argv[1] names (see perf_subcommands.h). */
#include "perf/perf_subcommands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/perf_models.h" /* perf_share_path */
#include "perf/perf_p2p.h"
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

int perf_subcommand_main(int argc, char **argv) {
  if (argc < 2) return -1;
  if (strcmp(argv[1], "plot") == 0) return plot_main(argc, argv);
  if (strcmp(argv[1], "topo") == 0) return perf_topo_main(argc, argv);
  if (strcmp(argv[1], "p2p") == 0) return perf_p2p_main(argc, argv);
  if (strcmp(argv[1], "tune") == 0) return perf_tune_main(argc, argv);
  return -1;
}
