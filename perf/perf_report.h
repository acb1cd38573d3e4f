/* perf_report.h - nccl-tests' table and the JSON twin of it, printed the same
 * way by kolo-perf and kolo-mpi-ref.  Only the rank that reports (rank 0)
 * calls these. */
#ifndef KOLO_PERF_REPORT_H
#define KOLO_PERF_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "perf/perf_args.h"

/* What ran: printed in the header and written in the JSON "config". */
typedef struct {
  const char *tool;     /* "kolo-perf" */
  const char *library;  /* "kolo 0.1.0", "Open MPI v4.1.4" */
  const char *launch;   /* "forked", "threads", "mpirun", ... */
  const char *memory;   /* "host", "cuda" */
  int nranks, procs, threads;
  const char *timing;   /* how times were taken, printed in the header; NULL: say nothing (host) */
} perf_config;

/* One placement of one row. */
typedef struct {
  int done;       /* 0: not run (-a, or in-place sendrecv) */
  double time_us; /* per call, the ranks' times combined as -a says (the slowest's by default) */
  double algbw, busbw;
  uint64_t wrong; /* over all ranks */
  double cpu_us;  /* per call, the host's time to issue the calls (-C prints it; JSON always) */
  int has_wall;   /* time_us is a device time and wall_us the wall clock beside it */
  double wall_us; /* per call, host clock to the calls' end (JSON only) */
} perf_result;

typedef struct {
  perf_sizes sizes;
  int cycle; /* which of -N's sweeps, from 0 */
  int root; /* -1 for collectives without one */
  perf_result res[2]; /* [0] out-of-place, [1] in-place */
} perf_row;

typedef struct {
  FILE *out;
  FILE *json;
  const perf_args *args;
  int rows;
  double bw_sum;
  int bw_count;
  uint64_t wrong;
  double ceiling_gbps;     /* --ceiling: written at the JSON's end; 0 for none */
  char ceiling_source[160];
} perf_report;

/* Opens the JSON file (if asked) and prints the header lines of the table.
 * Returns 0, or -1 when the JSON file cannot be opened (message printed). */
int perf_report_open(perf_report *rep, FILE *out, const perf_args *args, const perf_config *cfg);
void perf_report_table_header(perf_report *rep);
void perf_report_row(perf_report *rep, const perf_row *row);
/* Closing lines and the JSON's end; after a failure, only closes the JSON
 * file as it stands. */
void perf_report_close(perf_report *rep, int failed);

/* The busbw ceiling the JSON records (docs/perf-json.md); before close. */
void perf_report_ceiling(perf_report *rep, double gbps, const char *source);

/* The JSON twin's schema (docs/perf-json.md) changes with this version. */
#define PERF_JSON_SCHEMA_VERSION 1

/* nccl-tests' "# minBytes ... validation: N" line of the sweep a. */
void perf_report_sweep_line(FILE *out, const perf_args *a);

/* algbw and busbw of a result, in GB/s (1e9). */
void perf_result_bw(perf_result *r, const perf_args *a, size_t bytes, int nranks);

#endif
