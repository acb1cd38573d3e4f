/* perf_subcommands.c - which subcommand argv[1] names (see perf_subcommands.h). */
#include "perf/perf_subcommands.h"

#include <string.h>

#include "perf/perf_p2p.h"
#include "perf/perf_plot.h"
#include "perf/perf_topo.h"
#include "perf/perf_tune.h"

int perf_subcommand_main(int argc, char **argv) {
  if (argc < 2) return -1;
  if (strcmp(argv[1], "plot") == 0) return perf_plot_main(argc, argv);
  if (strcmp(argv[1], "topo") == 0) return perf_topo_main(argc, argv);
  if (strcmp(argv[1], "p2p") == 0) return perf_p2p_main(argc, argv);
  if (strcmp(argv[1], "tune") == 0) return perf_tune_main(argc, argv);
  return -1;
}
