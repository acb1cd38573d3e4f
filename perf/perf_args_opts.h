/* perf_args_opts.h - the getopt values of kolo-perf's flags that have no
 * letter; subcommands name the shared flags they take by these values
 * (perf_sub_flags). */
#ifndef KOLO_PERF_ARGS_OPTS_H
#define KOLO_PERF_ARGS_OPTS_H

#include "perf/perf_args.h"

/* getopt values of the flags that have no letter; kolo-mpi-ref refuses
 * those from OPT_PARAMS on. */
enum {
  OPT_JSON = 1000, OPT_LABEL, OPT_CEILING, OPT_INPLACE, OPT_OFFSET, OPT_PARAMS, OPT_GRAPH, OPT_LAUNCH, OPT_BLOCKS,
  OPT_BLOCK_THREADS, OPT_MEM, OPT_DEVICES, OPT_SCHEDULE, OPT_BIND, OPT_END
};

#endif
