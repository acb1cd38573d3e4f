/* fault_util.c - clocks, RNG, /proc counts, socket cuts, shm segments
 * (see fault_util.h). */
#define _GNU_SOURCE
#include "fault_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t fu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void fu_sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

uint64_t fu_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t fu_rand_in(uint64_t *state, uint64_t lo, uint64_t hi) {
  return lo + fu_rand(state) % (hi - lo + 1);
}

/* Entries of a directory other than . and ..; the DIR's own fd excluded. */
static int count_entries(const char *path, int skip_own_fd) {
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  int n = 0, own = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (skip_own_fd && atoi(e->d_name) == own) continue;
    n++;
  }
  closedir(d);
  return n;
}

int fu_count_fds(void) { return count_entries("/proc/self/fd", 1); }
int fu_count_threads(void) { return count_entries("/proc/self/task", 0); }

long fu_rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  long size = 0, resident = -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int fu_cut_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0, own = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    struct stat st;
    if (e->d_name[0] == '.' || fd == own || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (shutdown(fd, SHUT_RDWR) == 0) n++; /* ENOTCONN for listeners: nothing to cut */
  }
  closedir(d);
  return n;
}

/* The creator pid of "kolo-<job>-<pid>-...", or -1. */
static long shm_creator(const char *name) {
  if (strncmp(name, "kolo-", 5) != 0) return -1;
  const char *dash = strchr(name + 5, '-');
  return dash == NULL ? -1 : strtol(dash + 1, NULL, 10);
}

int fu_shm_segments_of(const pid_t *pids, int n, int *per_rank) {
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return -1;
  int count = 0;
  struct dirent *e;
  for (int i = 0; per_rank != NULL && i < n; i++) per_rank[i] = 0;
  while ((e = readdir(d)) != NULL) {
    long pid = shm_creator(e->d_name);
    for (int i = 0; pid > 0 && i < n; i++) {
      if (pids[i] != pid) continue;
      count++;
      if (per_rank != NULL) per_rank[i]++;
    }
  }
  closedir(d);
  return count;
}

void fu_line(int fd, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (len < 0) return;
  if (len > (int)sizeof buf - 2) len = (int)sizeof buf - 2;
  if (buf[len - 1] != '\n') buf[len++] = '\n';
  for (int off = 0; off < len;) {
    ssize_t w = write(fd, buf + off, (size_t)(len - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* the reader is gone: nobody to tell */
    off += (int)w;
  }
}
