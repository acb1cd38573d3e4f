/* perf_models.c - the model files' loader (see perf_models.h). */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "perf/perf_models.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KOLO_PERF_MODELS_DIR
#define KOLO_PERF_MODELS_DIR "perf/models"
#endif

int perf_share_path(const char *name, char *out, size_t size) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash == NULL) return 0;
  *slash = '\0'; /* PREFIX/bin */
  int len = snprintf(out, size, "%s/../share/kolo/%s", exe, name);
  struct stat st;
  return len > 0 && (size_t)len < size && stat(out, &st) == 0;
}

const char *perf_models_dir(void) {
  static char installed[4200];
  const char *env = getenv("KOLO_PERF_MODELS");
  if (env != NULL && *env != '\0') return env;
  return perf_share_path("models", installed, sizeof installed) ? installed : KOLO_PERF_MODELS_DIR;
}

void perf_model_free(perf_model *m) {
  free(m->count);
  m->count = NULL;
  m->ntensors = 0;
}

/* "# key: N" -> *out; 1 when the line is that directive, -1 when it is but N is bad. */
static int directive(const char *line, const char *key, size_t *out) {
  size_t klen = strlen(key);
  const char *p = line + 1 + strspn(line + 1, " \t");
  if (strncmp(p, key, klen) != 0 || p[klen] != ':') return 0;
  char *end;
  errno = 0;
  *out = (size_t)strtoull(p + klen + 1, &end, 10);
  end += strspn(end, " \t\n\r");
  return errno == 0 && *end == '\0' && end != p + klen + 1 ? 1 : -1;
}

/* One tensor line "name d0 d1 ..." (at most 8 dims, a name under 96
 * characters): its elements in *count; 0 or -1 (with `why`). */
static int parse_tensor(char *line, size_t *count, const char **why) {
  char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
  int ndims = 0;
  *count = 1;
  if (strlen(tok) >= 96) *why = "name too long";
  while (*why == NULL && (tok = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
    char *end;
    errno = 0;
    unsigned long long d = strtoull(tok, &end, 10);
    if (errno != 0 || *end != '\0' || tok[0] == '-' || d == 0) *why = "a dimension is not a positive integer";
    else if (ndims++ == 8) *why = "more than 8 dimensions";
    else if (*count > SIZE_MAX / d) *why = "too many elements";
    else *count *= (size_t)d;
  }
  if (*why == NULL && ndims == 0) *why = "no dimensions";
  return *why ? -1 : 0;
}

static void set_name(perf_model *m) {
  const char *base = strrchr(m->path, '/');
  snprintf(m->name, sizeof m->name, "%.*s", (int)sizeof m->name - 1, base ? base + 1 : m->path);
  char *dot = strstr(m->name, ".txt");
  if (dot != NULL && dot[4] == '\0') *dot = '\0';
}

/* Reads every line of f; 0 or -1 (message printed). */
static int read_lines(perf_model *m, FILE *f, size_t *want_total, size_t *want_tensors) {
  char line[1024];
  int lineno = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    lineno++;
    const char *why = NULL;
    if (strchr(line, '\n') == NULL && !feof(f)) why = "line too long";
    char *p = line + strspn(line, " \t");
    if (why == NULL && *p == '#') {
      int d = directive(p, "total_params", want_total);
      if (d == 0) d = directive(p, "tensors", want_tensors);
      if (d >= 0) continue;
      why = "bad number in a directive";
    }
    if (why == NULL && (*p == '\n' || *p == '\r' || *p == '\0')) continue;
    size_t *grown = why == NULL ? realloc(m->count, (size_t)(m->ntensors + 1) * sizeof *grown) : NULL;
    if (grown != NULL) m->count = grown;
    else if (why == NULL) why = "out of memory";
    if (why == NULL && parse_tensor(p, &m->count[m->ntensors], &why) == 0) {
      m->total += m->count[m->ntensors++];
      continue;
    }
    fprintf(stderr, "kolo-perf: %s:%d: %s\n", m->path, lineno, why);
    return -1;
  }
  if (ferror(f)) {
    fprintf(stderr, "kolo-perf: %s: read error: %s\n", m->path, strerror(errno));
    return -1;
  }
  return 0;
}

static int check_totals(const perf_model *m, size_t want_total, size_t want_tensors) {
  if (want_total == 0 || want_tensors == 0) {
    fprintf(stderr, "kolo-perf: %s: needs the directives '# tensors: N' and '# total_params: P'\n", m->path);
    return -1;
  }
  if (m->total != want_total || (size_t)m->ntensors != want_tensors) {
    fprintf(stderr,
            "kolo-perf: %s: the file says %zu tensors and %zu parameters, its lines add up to %d tensors and "
            "%zu parameters (a typo in a shape?)\n",
            m->path, want_tensors, want_total, m->ntensors, m->total);
    return -1;
  }
  return 0;
}

int perf_model_load(perf_model *m, const char *spec, const char *dir) {
  memset(m, 0, sizeof *m);
  size_t n = strlen(spec);
  int is_path = strchr(spec, '/') != NULL || (n > 4 && strcmp(spec + n - 4, ".txt") == 0);
  int len = is_path ? snprintf(m->path, sizeof m->path, "%s", spec)
                    : snprintf(m->path, sizeof m->path, "%s/%s.txt", dir, spec);
  if (len < 0 || (size_t)len >= sizeof m->path) {
    fprintf(stderr, "kolo-perf: model path too long: %s\n", spec);
    return -1;
  }
  set_name(m);
  FILE *f = fopen(m->path, "r");
  if (f == NULL) {
    fprintf(stderr, "kolo-perf: cannot open model file %s: %s%s\n", m->path, strerror(errno),
            is_path ? "" : " (--models DIR or KOLO_PERF_MODELS name the directory)");
    return -1;
  }
  size_t want_total = 0, want_tensors = 0;
  int rc = read_lines(m, f, &want_total, &want_tensors);
  fclose(f);
  if (rc == 0) rc = check_totals(m, want_total, want_tensors);
  if (rc != 0) perf_model_free(m);
  return rc;
}
