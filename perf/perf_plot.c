/* perf_plot.c - `kolo-perf plot` (see perf_plot.h): the command line, the
 * script's file, gnuplot's run and the check of what it drew. */
#define _GNU_SOURCE /* posix_spawnp's environ, mkstemps */
#include "perf/perf_plot.h"

#include <errno.h>
#include <getopt.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct {
  const char *out, *title, *script;
  int placements;
  char **files;
  int nfiles;
} plot_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: kolo-perf plot A.json [B.json ...] -o OUT.png [flags]\n"
          "  busbw (top) and time per call (bottom, log) against size (log2) for each run, from\n"
          "  kolo-perf --json files (docs/perf-json.md); a run is named by its \"label\" (--label),\n"
          "  else its file name; a run whose JSON holds a ceiling (--ceiling) gets it as a dashed line;\n"
          "  -N's cycles are drawn as their median per size.  Drawn by gnuplot (pngcairo, else png;\n"
          "  Debian: gnuplot-nox).\n"
          "  -o, --output FILE        the PNG to write (required)\n"
          "      --title TEXT         the figure's title (default: kolo-perf and the collectives)\n"
          "      --placement out|in|both  which results (default out: out of place)\n"
          "      --script FILE        keep the gnuplot script there (default: a temporary file)\n"
          "  -h, --help               this text\n");
}

static int parse_placement(const char *v) {
  if (strcmp(v, "out") == 0) return PLOT_OUT;
  if (strcmp(v, "in") == 0) return PLOT_IN;
  if (strcmp(v, "both") == 0) return PLOT_OUT | PLOT_IN;
  return -1;
}

/* 0 to go on, 1 after help, -1 on a bad command line (said why). */
static int parse(plot_opts *o, int argc, char **argv) {
  static const struct option longs[] = {{"output", required_argument, NULL, 'o'}, {"title", required_argument, NULL, 't'},
                                        {"placement", required_argument, NULL, 'p'},
                                        {"script", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  int c;
  *o = (plot_opts){NULL, NULL, NULL, PLOT_OUT, NULL, 0};
  opterr = 0;
  optind = 2; /* past "plot" */
  while ((c = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
    if (c == 'h') return usage(stdout), 1;
    if (c == 'o') o->out = optarg;
    else if (c == 't') o->title = optarg;
    else if (c == 's') o->script = optarg;
    else if (c == 'p' && (o->placements = parse_placement(optarg)) > 0) continue;
    else if (c == 'p') return fprintf(stderr, "kolo-perf plot: --placement %s: expected out, in or both\n", optarg), -1;
    else return fprintf(stderr, "kolo-perf plot: %s %s (see --help)\n", c == ':' ? "missing value for" : "unknown option", argv[optind - 1]), -1;
  }
  o->files = argv + optind;
  o->nfiles = argc - optind;
  if (o->nfiles < 1) return fprintf(stderr, "kolo-perf plot: no JSON file to draw (see --help)\n"), -1;
  if (o->out == NULL) return fprintf(stderr, "kolo-perf plot: no -o OUT.png\n"), -1;
  return 0;
}

/* "kolo-perf: all_reduce, all_gather" out of the series' collectives. */
static void default_title(const plot_series *s, int n, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "kolo-perf:");
  for (int i = 0; i < n && used < len; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= strcmp(s[i].collective, s[j].collective) == 0;
    if (!seen) used += (size_t)snprintf(buf + used, len - used, "%s %s", i ? "," : "", s[i].collective);
  }
}

/* The script in o->script, or a temporary file (path in buf). */
static FILE *open_script(const plot_opts *o, char *path, size_t len) {
  if (o->script) {
    snprintf(path, len, "%s", o->script);
    FILE *f = fopen(path, "w");
    if (f == NULL) fprintf(stderr, "kolo-perf plot: --script %s: %s\n", path, strerror(errno));
    return f;
  }
  const char *dir = getenv("TMPDIR");
  snprintf(path, len, "%s/kolo-perf-plot.XXXXXX.gp", dir && *dir ? dir : "/tmp");
  int fd = mkstemps(path, 3);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) fprintf(stderr, "kolo-perf plot: cannot create a script file %s: %s\n", path, strerror(errno));
  if (f == NULL && fd >= 0) close(fd);
  return f;
}

/* Runs `gnuplot script`; 0 when it exited 0. */
static int run_gnuplot(const char *script) {
  char *argv[] = {"gnuplot", (char *)script, NULL};
  pid_t pid;
  int err = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
  if (err == ENOENT) {
    fprintf(stderr, "kolo-perf plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox, which "
                    "scripts/setup.sh does)\n");
    return -1;
  }
  if (err != 0) return fprintf(stderr, "kolo-perf plot: cannot run gnuplot: %s\n", strerror(err)), -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return fprintf(stderr, "kolo-perf plot: waitpid: %s\n", strerror(errno)), -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  fprintf(stderr, "kolo-perf plot: gnuplot failed (%s %d) on %s\n", WIFEXITED(status) ? "exit status" : "signal",
          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), script);
  return -1;
}

/* gnuplot drew a PNG: the file is there, with PNG's signature. */
static int check_png(const char *png) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  unsigned char head[8];
  FILE *f = fopen(png, "rb");
  size_t got = f ? fread(head, 1, sizeof head, f) : 0;
  if (f) fclose(f);
  if (got == sizeof head && memcmp(head, sig, sizeof sig) == 0) return 0;
  fprintf(stderr, "kolo-perf plot: gnuplot wrote no PNG to %s%s%s\n", png, f ? "" : ": ", f ? "" : strerror(errno));
  return -1;
}

/* Writes the script and has gnuplot draw it; the temporary script goes
 * unless gnuplot failed (then it is kept and named). */
static int draw(const plot_opts *o, const plot_series *s, int n) {
  char path[4096], title[512];
  if (o->title == NULL) default_title(s, n, title, sizeof title);
  FILE *f = open_script(o, path, sizeof path);
  if (f == NULL) return -1;
  int bad = perf_plot_script(f, s, n, o->out, o->title ? o->title : title);
  if (fclose(f) != 0 || bad) return fprintf(stderr, "kolo-perf plot: writing %s: %s\n", path, strerror(errno)), -1;
  bad = run_gnuplot(path);
  if (bad == 0) bad = check_png(o->out);
  if (bad == 0 && o->script == NULL && unlink(path) != 0)
    fprintf(stderr, "kolo-perf plot: warning: cannot remove %s: %s\n", path, strerror(errno));
  return bad;
}

int perf_plot_main(int argc, char **argv) {
  plot_opts o;
  int r = parse(&o, argc, argv);
  if (r != 0) return r > 0 ? 0 : 2;
  plot_series *s = NULL;
  int n = 0;
  for (int i = 0; i < o.nfiles && r == 0; i++) r = perf_plot_read(o.files[i], o.placements, &s, &n);
  if (r == 0) r = draw(&o, s, n);
  if (r == 0) printf("kolo-perf plot: %d run%s of %d file%s drawn in %s\n", n, n == 1 ? "" : "s", o.nfiles,
                     o.nfiles == 1 ? "" : "s", o.out);
  perf_plot_free(s, n);
  return r == 0 ? 0 : 2;
}
