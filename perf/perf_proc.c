/* perf_proc.c - descriptors and memory of this process (perf_proc.h). */
#define _GNU_SOURCE /* clock_gettime */
#include "perf/perf_proc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int perf_proc_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

int64_t perf_proc_rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (f == NULL) return -1;
  char line[256];
  long long kib = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %lld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Median and maximum of a field (0 fds, 1 rss_kib, 2 links, 3 init_us,
 * 4 pipe_kib) over the records that succeeded. */
static void med_max(const perf_rank_stat *s, int n, int field, int64_t *med, int64_t *max) {
  int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  int k = 0;
  for (int i = 0; v && i < n; i++)
    if (s[i].ok)
      v[k++] = field == 0 ? s[i].fds : field == 1 ? s[i].rss_kib : field == 2 ? s[i].links
             : field == 3 ? s[i].init_us : s[i].pipe_kib;
  *med = *max = -1;
  if (v && k > 0) {
    qsort(v, (size_t)k, sizeof *v, cmp64);
    *med = v[k / 2];
    *max = v[k - 1];
  }
  free(v);
}

void perf_proc_summary(const perf_rank_stat *s, int n, char *buf, int len, int *failed) {
  int64_t m[5], x[5];
  for (int f = 0; f < 5; f++) med_max(s, n, f, &m[f], &x[f]);
  *failed = 0;
  for (int i = 0; i < n; i++) *failed += !s[i].ok;
  int k = snprintf(buf, (size_t)len, "fds %lld/%lld rss_mib %.1f/%.1f links %lld/%lld init_ms %lld/%lld",
                   (long long)m[0], (long long)x[0], (double)m[1] / 1024, (double)x[1] / 1024, (long long)m[2],
                   (long long)x[2], (long long)m[3] / 1000, (long long)x[3] / 1000);
  if (m[4] >= 0 && k > 0 && k < len)
    snprintf(buf + k, (size_t)(len - k), " pipes_mib %.1f/%.1f", (double)m[4] / 1024, (double)x[4] / 1024);
}

int64_t perf_proc_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int32_t a2a_value(int from, int to, int n, size_t i) {
  return (int32_t)((((uint64_t)from * (uint64_t)n + (uint64_t)to) * 2654435761u + i) & 0x7fffffff);
}

static int a2a_right(const int32_t *out, int rank, int n, size_t count) {
  for (int from = 0; from < n; from++)
    for (size_t i = 0; i < count; i++)
      if (out[(size_t)from * count + i] != a2a_value(from, rank, n, i)) return 0;
  return 1;
}

int perf_a2a_checked(int rank, int n, size_t bytes_per_peer, perf_a2a_fn xchg, void *ctx) {
  size_t count = bytes_per_peer / sizeof(int32_t), total = count * (size_t)n;
  int32_t *in = calloc(total + 1, sizeof *in), *out = malloc(total * sizeof *out + 1);
  int ok = in != NULL && out != NULL;
  if (!ok) fprintf(stderr, "rank %d: out of memory for the all-to-all's two %zu-byte buffers\n", rank, total * sizeof *in);
  if (ok) {
    for (int to = 0; to < n; to++)
      for (size_t i = 0; i < count; i++) in[(size_t)to * count + i] = a2a_value(rank, to, n, i);
    memset(out, 0xa5, total * sizeof *out);
    ok = xchg(in, out, count, rank, ctx) == 0;
  }
  if (ok && !a2a_right(out, rank, n, count)) {
    fprintf(stderr, "rank %d: wrong all-to-all data\n", rank);
    ok = 0;
  }
  free(in);
  free(out);
  return ok;
}
