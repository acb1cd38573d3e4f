/* perf_subcommands.c - which subcommand argv[1] names (see perf_subcommands.h). */
#include "perf/perf_subcommands.h"

#include <string.h>

int perf_subcommand_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return -1;
}
