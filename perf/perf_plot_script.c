/* perf_plot_script.c - the gnuplot script of `kolo-perf plot` (see
 * perf_plot.h): two panels over a log2 size axis, busbw (with each run's
 * ceiling as a dashed line of its colour) and time per call (log), the
 * data inline as datablocks so that the script stands alone. */
#include <string.h>

#include "perf/perf_plot.h"

/* A gnuplot single-quoted string: only ' needs escaping (doubled). */
static void quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* pngcairo where this gnuplot has it (Debian's gnuplot-nox does), else png. */
static void terminal(FILE *f, const char *png) {
  fprintf(f,
          "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
          "  set terminal pngcairo size 1100,1000 noenhanced font ',10'\n"
          "} else {\n"
          "  set terminal png size 1100,1000 noenhanced\n"
          "}\n"
          "set output ");
  quoted(f, png);
  fprintf(f, "\n");
}

static void datablocks(FILE *f, const plot_series *s, int n) {
  for (int i = 0; i < n; i++) {
    fprintf(f, "# %s\n$s%d << EOD\n", s[i].label, i);
    for (int k = 0; k < s[i].npts; k++)
      fprintf(f, "%.0f %.6g %.6g\n", s[i].pts[k].size, s[i].pts[k].busbw, s[i].pts[k].time_us);
    fprintf(f, "EOD\n");
  }
}

/* One panel's plot command: column `col` of every series, and the ceilings. */
static void plot_panel(FILE *f, const plot_series *s, int n, int col, int ceilings) {
  fprintf(f, "plot ");
  for (int i = 0; i < n; i++) {
    fprintf(f, "%s$s%d using 1:%d with linespoints lt %d pt 7 ps 0.8 title ", i ? ", \\\n     " : "", i, col, i + 1);
    quoted(f, s[i].label);
  }
  for (int i = 0; ceilings && i < n; i++) {
    if (s[i].ceiling <= 0) continue;
    char t[256];
    snprintf(t, sizeof t, "ceiling of %s: %.2f GB/s", s[i].label, s[i].ceiling);
    fprintf(f, ", \\\n     %.6g with lines lt %d dt 2 lw 2 title ", s[i].ceiling, i + 1);
    quoted(f, t);
  }
  fprintf(f, "\n");
}

int perf_plot_script(FILE *f, const plot_series *s, int n, const char *png, const char *title) {
  fprintf(f, "# kolo-perf plot: busbw and time per call against size (docs/perf-json.md)\n");
  terminal(f, png);
  datablocks(f, s, n);
  fprintf(f, "set multiplot layout 2,1 title ");
  quoted(f, title);
  fprintf(f,
          "\nset logscale x 2\nset format x '%%.0b%%B'\nset xlabel 'size (bytes)'\nset grid\n"
          "set key below\nset ylabel 'busbw (GB/s, 1e9 B/s)'\nset yrange [0:*]\n");
  plot_panel(f, s, n, 2, 1);
  fprintf(f, "set ylabel 'time per call (us)'\nset logscale y 10\nset yrange [*:*]\n");
  plot_panel(f, s, n, 3, 0);
  fprintf(f, "unset multiplot\nset output\n");
  return ferror(f) ? -1 : 0;
}
