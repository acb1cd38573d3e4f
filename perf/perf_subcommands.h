/* perf_subcommands.h - kolo-perf's subcommands that do not run the sweep's
 * ranks: plot (perf/plot.py), topo (perf_topo.c), p2p (perf_p2p.c), tune
 * (perf_tune.c: forks its own). */
#ifndef KOLO_PERF_SUBCOMMANDS_H
#define KOLO_PERF_SUBCOMMANDS_H

/* argv[1] names one of them: its exit code (0 or more); else -1. */
int perf_subcommand_main(int argc, char **argv);

#endif
