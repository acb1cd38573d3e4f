/* perf_plot.h - `kolo-perf plot A.json [B.json ...] -o out.png`: busbw and
 * time against size (log x) for several runs, each labelled by its
 * "label" field or its file name, with a run's measured ceiling as a line
 * where its JSON holds one; drawn by gnuplot from a script written here
 * (perf_plot_script.c) out of kolo-perf's JSON files (perf_plot_read.c,
 * docs/perf-json.md). */
#ifndef KOLO_PERF_PLOT_H
#define KOLO_PERF_PLOT_H

#include <stdio.h>

typedef struct {
  double size, busbw, time_us;
} plot_point;

/* One run's results of one placement: a line on each panel. */
typedef struct {
  char label[160];
  plot_point *pts; /* ascending size; one per size (the median over -N cycles) */
  int npts;
  double ceiling;  /* busbw ceiling (GB/s), 0 for none */
  char collective[32];
} plot_series;

/* Which placements are drawn (--placement). */
enum { PLOT_OUT = 1, PLOT_IN = 2 };

/* Reads one kolo-perf --json file: one series per placement asked for that
 * the file has.  Appends to *series (realloc'd); 0, or -1 with a sentence
 * naming the file and what is wrong (not JSON, not kolo-perf's, a newer
 * schema, no results). */
int perf_plot_read(const char *path, int placements, plot_series **series, int *nseries);
void perf_plot_free(plot_series *s, int n);

/* The gnuplot script that draws the series into `png`. */
int perf_plot_script(FILE *f, const plot_series *s, int n, const char *png, const char *title);

/* `kolo-perf plot ...`: its exit code. */
int perf_plot_main(int argc, char **argv);

#endif
