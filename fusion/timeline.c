/* timeline.c - Chrome trace JSON (see timeline.h). */
#include "fusion/timeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kf_timeline {
  FILE *out;
  int rank;
  int nevents;
  struct timespec t0;
  pthread_mutex_t lock;
};

static void expand_path(const char *pattern, int rank, char *path, size_t len) {
  size_t n = 0;
  int had_rank = 0;
  for (const char *p = pattern; *p && n + 24 < len; p++) {
    if (p[0] == '%' && p[1] == 'r') {
      n += (size_t)snprintf(path + n, len - n, "%d", rank);
      had_rank = 1;
      p++;
    } else {
      path[n++] = *p;
    }
  }
  path[n] = '\0';
  if (!had_rank) snprintf(path + n, len - n, ".rank%d", rank);
}

koloResult_t kf_timeline_open(const char *pattern, int rank, kf_timeline **out, kolo_errbuf *eb) {
  char path[1024];
  expand_path(pattern, rank, path, sizeof path);
  kf_timeline *tl = calloc(1, sizeof *tl);
  if (tl == NULL) return kolo_error(eb, koloSystemError, "fusion timeline: out of memory");
  tl->out = fopen(path, "w");
  if (tl->out == NULL) {
    int err = errno;
    free(tl);
    return kolo_syserror(eb, err, "fusion timeline: cannot create %s (KOLO_TIMELINE / config.timeline)", path);
  }
  int e = pthread_mutex_init(&tl->lock, NULL);
  if (e != 0) {
    fclose(tl->out);
    free(tl);
    return kolo_syserror(eb, e, "fusion timeline: pthread_mutex_init");
  }
  tl->rank = rank;
  clock_gettime(CLOCK_MONOTONIC, &tl->t0);
  fprintf(tl->out, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"name\":\"kolo fusion rank %d\"}}", rank, rank);
  tl->nevents = 1;
  *out = tl;
  return koloSuccess;
}

static double now_us(const kf_timeline *tl) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - tl->t0.tv_sec) * 1e6 + (double)(t.tv_nsec - tl->t0.tv_nsec) / 1e3;
}

/* Starts an event object: ",\n{" name, ph, pid, tid, ts (caller adds the
 * rest and the closing brace, under the lock). */
static void begin_event(kf_timeline *tl, const char *name, const char *ph, int tid) {
  fprintf(tl->out, ",\n{\"name\":\"%s\",\"ph\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f", name, ph, tl->rank,
          tid, now_us(tl));
  tl->nevents++;
}

void kf_timeline_ready(kf_timeline *tl, int tid, int tensor, uint64_t step) {
  if (tl == NULL) return;
  pthread_mutex_lock(&tl->lock);
  begin_event(tl, "ready", "i", tid);
  fprintf(tl->out, ",\"s\":\"t\",\"args\":{\"tensor\":%d,\"step\":%llu}}", tensor, (unsigned long long)step);
  pthread_mutex_unlock(&tl->lock);
}

void kf_timeline_launch(kf_timeline *tl, int tid, const char *what, int ntensors, size_t bytes, uint64_t step) {
  if (tl == NULL) return;
  pthread_mutex_lock(&tl->lock);
  begin_event(tl, "launch", "B", tid);
  fprintf(tl->out, ",\"args\":{\"what\":\"%s\",\"tensors\":%d,\"bytes\":%zu,\"step\":%llu}}", what, ntensors, bytes,
          (unsigned long long)step);
  pthread_mutex_unlock(&tl->lock);
}

void kf_timeline_done(kf_timeline *tl, int tid) {
  if (tl == NULL) return;
  pthread_mutex_lock(&tl->lock);
  begin_event(tl, "done", "E", tid);
  fputc('}', tl->out);
  pthread_mutex_unlock(&tl->lock);
}

void kf_timeline_round(kf_timeline *tl, int64_t begin_us, int64_t end_us, uint64_t step, int launches) {
  if (tl == NULL) return;
  double t0 = (double)tl->t0.tv_sec * 1e6 + (double)tl->t0.tv_nsec / 1e3;
  pthread_mutex_lock(&tl->lock);
  fprintf(tl->out,
          ",\n{\"name\":\"round\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
          "\"args\":{\"step\":%llu,\"launches\":%d}}",
          tl->rank, KF_TL_ROUND_TID, (double)begin_us - t0, (double)(end_us - begin_us), (unsigned long long)step,
          launches);
  tl->nevents++;
  pthread_mutex_unlock(&tl->lock);
}

void kf_timeline_error(kf_timeline *tl, const char *sentence) {
  if (tl == NULL) return;
  pthread_mutex_lock(&tl->lock);
  begin_event(tl, "error", "i", 0);
  fputs(",\"s\":\"p\",\"args\":{\"error\":\"", tl->out);
  for (const char *p = sentence; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\\') fprintf(tl->out, "\\%c", c);
    else if (c < 0x20) fprintf(tl->out, "\\u%04x", c);
    else fputc(c, tl->out);
  }
  fputs("\"}}", tl->out);
  pthread_mutex_unlock(&tl->lock);
}

void kf_timeline_flush(kf_timeline *tl) {
  if (tl == NULL) return;
  pthread_mutex_lock(&tl->lock);
  fflush(tl->out);
  pthread_mutex_unlock(&tl->lock);
}

void kf_timeline_close(kf_timeline *tl) {
  if (tl == NULL) return;
  fputs("\n]}\n", tl->out);
  fclose(tl->out);
  pthread_mutex_destroy(&tl->lock);
  free(tl);
}
