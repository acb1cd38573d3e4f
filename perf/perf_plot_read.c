/* perf_plot_read.c - kolo-perf's JSON as plot series (see perf_plot.h), read
 * with json-c (Debian's libjson-c-dev). */
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_plot.h"
#include "perf/perf_report.h" /* PERF_JSON_SCHEMA_VERSION */

#ifdef KOLO_HAVE_JSONC
#include <json-c/json.h>

static struct json_object *field(struct json_object *o, const char *key, json_type type) {
  struct json_object *v = NULL;
  if (!json_object_object_get_ex(o, key, &v)) return NULL;
  if (type == json_type_double && json_object_is_type(v, json_type_int)) return v;
  return json_object_is_type(v, type) ? v : NULL;
}

/* The file is kolo-perf's, of a schema this reader knows. */
static int check_schema(const char *path, struct json_object *root) {
  struct json_object *schema = field(root, "schema", json_type_string);
  struct json_object *version = field(root, "schema_version", json_type_int);
  if (schema == NULL || strcmp(json_object_get_string(schema), "kolo-perf") != 0 || version == NULL) {
    fprintf(stderr, "kolo-perf plot: %s: not a kolo-perf --json file of a known schema (no \"schema\": "
                    "\"kolo-perf\" with a \"schema_version\"; docs/perf-json.md)\n", path);
    return -1;
  }
  if (json_object_get_int(version) > PERF_JSON_SCHEMA_VERSION) {
    fprintf(stderr, "kolo-perf plot: %s: schema_version %d is newer than this kolo-perf reads (%d)\n", path,
            json_object_get_int(version), PERF_JSON_SCHEMA_VERSION);
    return -1;
  }
  return 0;
}

static int cmp_point(const void *a, const void *b) {
  const plot_point *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return (x->busbw > y->busbw) - (x->busbw < y->busbw);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median time of pts[0..n), in t[] (room for n). */
static double median_time(const plot_point *pts, int n, double *t) {
  for (int i = 0; i < n; i++) t[i] = pts[i].time_us;
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2];
}

/* Sorts by size and keeps one point per size: the medians of -N's cycles
 * (busbw and time each); t[] has room for n. */
static int median_per_size(plot_point *pts, int n, double *t) {
  qsort(pts, (size_t)n, sizeof *pts, cmp_point);
  int out = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && pts[j].size == pts[i].size) j++;
    plot_point m = pts[i + (j - i) / 2];
    m.time_us = median_time(pts + i, j - i, t);
    pts[out++] = m;
    i = j;
  }
  return out;
}

/* The results of one placement; -1 (said why) when an entry is malformed.
 * t[] has room for every result. */
static int collect(const char *path, struct json_object *results, int in_place, plot_point *pts, double *t, int *n) {
  size_t len = json_object_array_length(results);
  *n = 0;
  for (size_t i = 0; i < len; i++) {
    struct json_object *r = json_object_array_get_idx(results, i);
    struct json_object *size = field(r, "size", json_type_int), *busbw = field(r, "busbw", json_type_double);
    struct json_object *time = field(r, "time_us", json_type_double), *ip = field(r, "in_place", json_type_boolean);
    if (size == NULL || busbw == NULL || time == NULL || ip == NULL) {
      fprintf(stderr, "kolo-perf plot: %s: results[%zu] lacks size, busbw, time_us or in_place "
                      "(docs/perf-json.md)\n", path, i);
      return -1;
    }
    if (json_object_get_boolean(ip) != in_place) continue;
    pts[(*n)++] = (plot_point){(double)json_object_get_int64(size), json_object_get_double(busbw),
                               json_object_get_double(time)};
  }
  *n = median_per_size(pts, *n, t);
  return 0;
}

/* The series' name: the file's label, else its name; with both placements, which. */
static void name_series(plot_series *s, struct json_object *root, const char *path, int in_place, int both) {
  struct json_object *label = field(root, "label", json_type_string);
  char copy[256];
  snprintf(copy, sizeof copy, "%s", path);
  const char *name = label ? json_object_get_string(label) : basename(copy);
  snprintf(s->label, sizeof s->label, "%s%s", name, !both ? "" : in_place ? " (in place)" : " (out of place)");
}

static void series_facts(plot_series *s, struct json_object *root) {
  struct json_object *ceiling = field(root, "ceiling", json_type_object), *config = field(root, "config", json_type_object);
  struct json_object *busbw = ceiling ? field(ceiling, "busbw", json_type_double) : NULL;
  struct json_object *coll = config ? field(config, "collective", json_type_string) : NULL;
  s->ceiling = busbw ? json_object_get_double(busbw) : 0;
  snprintf(s->collective, sizeof s->collective, "%s", coll ? json_object_get_string(coll) : "?");
}

/* Appends the series of one placement; 0 also when the file has none of it. */
static int add_series(const char *path, struct json_object *root, struct json_object *results, int in_place,
                      int both, plot_series **series, int *nseries) {
  size_t len = json_object_array_length(results);
  plot_point *pts = malloc(len * sizeof *pts);
  double *t = malloc(len * sizeof *t);
  plot_series *grown = realloc(*series, (size_t)(*nseries + 1) * sizeof *grown);
  if (grown) *series = grown;
  if (pts == NULL || t == NULL || grown == NULL) {
    fprintf(stderr, "kolo-perf plot: out of memory\n");
    free(pts);
    free(t);
    return -1;
  }
  plot_series *s = &grown[*nseries];
  memset(s, 0, sizeof *s);
  s->pts = pts;
  int bad = collect(path, results, in_place, pts, t, &s->npts);
  free(t);
  if (bad != 0 || s->npts == 0) { /* malformed, or none of this placement */
    free(pts);
    return bad;
  }
  name_series(s, root, path, in_place, both);
  series_facts(s, root);
  (*nseries)++;
  return 0;
}

static int read_root(const char *path, int placements, struct json_object *root, plot_series **series, int *nseries) {
  if (check_schema(path, root) != 0) return -1;
  struct json_object *results = field(root, "results", json_type_array);
  if (results == NULL || json_object_array_length(results) == 0) {
    fprintf(stderr, "kolo-perf plot: %s: no results (an empty run: nothing to draw)\n", path);
    return -1;
  }
  int before = *nseries, both = placements == (PLOT_OUT | PLOT_IN);
  for (int p = 0; p < 2; p++)
    if ((placements & (p ? PLOT_IN : PLOT_OUT)) &&
        add_series(path, root, results, p, both, series, nseries) != 0)
      return -1;
  if (*nseries > before) return 0;
  fprintf(stderr, "kolo-perf plot: %s: no %s results (--placement %s picks them)\n", path,
          placements == PLOT_IN ? "in-place" : "out-of-place", placements == PLOT_IN ? "out" : "in");
  return -1;
}

int perf_plot_read(const char *path, int placements, plot_series **series, int *nseries) {
  FILE *f = fopen(path, "r"); /* json-c's own error would not say "no such file" */
  if (f == NULL) {
    fprintf(stderr, "kolo-perf plot: %s: %s\n", path, strerror(errno));
    return -1;
  }
  fclose(f);
  struct json_object *root = json_object_from_file(path);
  if (root == NULL) {
    fprintf(stderr, "kolo-perf plot: %s: not valid JSON (%s); a run that failed leaves its file unfinished\n",
            path, json_util_get_last_err());
    return -1;
  }
  int r = read_root(path, placements, root, series, nseries);
  json_object_put(root);
  return r;
}

#else /* no json-c */

int perf_plot_read(const char *path, int placements, plot_series **series, int *nseries) {
  (void)placements;
  (void)series;
  (void)nseries;
  fprintf(stderr, "kolo-perf plot: cannot read %s: this kolo-perf was built without json-c (install "
                  "libjson-c-dev, as scripts/setup.sh does, and configure again)\n", path);
  return -1;
}

#endif

void perf_plot_free(plot_series *s, int n) {
  for (int i = 0; i < n; i++) free(s[i].pts);
  free(s);
}
