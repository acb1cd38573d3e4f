/* perf_args_opts.h - between perf_args.c (the getopt loop) and
 * perf_args_check.c (which flags go together): the flags' getopt values
 * and which were given; subcommands name the shared flags they take by
 * these values (perf_sub_flags). */
#ifndef KOLO_PERF_ARGS_OPTS_H
#define KOLO_PERF_ARGS_OPTS_H

#include "perf/perf_args.h"

/* getopt values of the flags that have no letter; kolo-mpi-ref refuses
 * those from OPT_PARAMS on. */
enum {
  OPT_JSON = 1000, OPT_LABEL, OPT_CEILING, OPT_INPLACE, OPT_PARAMS, OPT_GRAPH, OPT_LAUNCH, OPT_BLOCKS,
  OPT_BLOCK_THREADS, OPT_MEM, OPT_DEVICES, OPT_SCHEDULE, OPT_BIND, OPT_END
};

/* Options seen on the command line, by getopt value. */
typedef struct { unsigned char opt[OPT_END]; } perf_seen_opts;

/* "-a (--average)" or "--mem": how sentences name the flag of getopt value c. */
const char *perf_flag_name(int c, char *buf, size_t len);

/* The rules between flags, once all are parsed: 0, or -1 with a sentence. */
int perf_args_check(perf_args *a, perf_seen_opts *seen, const char *prog);

#endif
