/* log.c - leveled logging (see log.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static _Atomic int log_level_value = KOLO_LOG_NONE;
static _Atomic int log_silenced; /* KOLO_DEBUG=NONE, said explicitly */
static FILE *log_out;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static int parse_level(const char *s) {
  if (s == NULL || *s == '\0') return KOLO_LOG_NONE;
  if (strcasecmp(s, "WARN") == 0) return KOLO_LOG_WARN;
  if (strcasecmp(s, "INFO") == 0) return KOLO_LOG_INFO;
  if (strcasecmp(s, "TRACE") == 0) return KOLO_LOG_TRACE;
  if (strcasecmp(s, "NONE") == 0 || strcasecmp(s, "VERSION") == 0)
    return KOLO_LOG_NONE;
  fprintf(stderr, "kolo: KOLO_DEBUG=%s is not one of WARN, INFO, TRACE; using WARN\n", s);
  return KOLO_LOG_WARN;
}

/* KOLO_DEBUG_FILE may contain %h (host name) and %p (pid), as NCCL's does,
 * so that each rank of a job writes its own file. */
static FILE *open_log_file(const char *pattern) {
  char path[1024];
  size_t n = 0;
  for (const char *p = pattern; *p && n + 64 < sizeof path; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      n += (size_t)snprintf(path + n, sizeof path - n, "%d", (int)getpid());
      p++;
    } else if (p[0] == '%' && p[1] == 'h') {
      char host[64] = "host";
      gethostname(host, sizeof host - 1);
      n += (size_t)snprintf(path + n, sizeof path - n, "%s", host);
      p++;
    } else {
      path[n++] = *p;
    }
  }
  path[n] = '\0';
  FILE *f = fopen(path, "a");
  if (f == NULL) {
    fprintf(stderr, "kolo: cannot open KOLO_DEBUG_FILE %s; logging to stderr\n", path);
    return stderr;
  }
  setvbuf(f, NULL, _IOLBF, 0);
  return f;
}

static void log_read_settings(void) {
  const char *level = kolo_param_str("KOLO_DEBUG");
  log_level_value = parse_level(level);
  log_silenced = level != NULL && (strcasecmp(level, "NONE") == 0 || strcasecmp(level, "VERSION") == 0);
  const char *file = kolo_param_str("KOLO_DEBUG_FILE");
  log_out = (file && *file) ? open_log_file(file) : stderr;
}

/* A forked child is a new process: it reads KOLO_DEBUG again (a launcher may
 * set it per worker) and opens its own KOLO_DEBUG_FILE, so %p names the
 * child and not the parent whose file it would otherwise append to.  The
 * child is single-threaded here, so plain stores are enough. */
static _Atomic int log_stale;
static void log_mark_stale_in_child(void) {
  pthread_mutex_init(&log_lock, NULL); /* the parent may have held it at fork */
  log_stale = 1;
}

static void log_init(void) {
  log_read_settings();
  pthread_atfork(NULL, NULL, log_mark_stale_in_child);
}

/* For koloResetDebugInit (NCCL's ncclResetDebugInit): the next log call reads
 * KOLO_DEBUG and KOLO_DEBUG_FILE again, as after a fork.  A line being
 * written meanwhile still goes to the old file (under log_lock). */
void kolo_log_reset(void) {
  pthread_once(&log_once, log_init);
  log_stale = 1;
}

int kolo_log_level(void) {
  pthread_once(&log_once, log_init);
  if (log_stale) {
    pthread_mutex_lock(&log_lock);
    if (log_stale) {
      if (log_out != NULL && log_out != stderr) fclose(log_out);
      log_read_settings();
      log_stale = 0;
    }
    pthread_mutex_unlock(&log_lock);
  }
  return log_level_value;
}

int kolo_log_notices(void) { return kolo_log_level() >= KOLO_LOG_WARN || !log_silenced; }

void kolo_log_write(int level, const char *file, int line, const char *fmt, ...) {
  static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;

  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  pthread_mutex_lock(&log_lock);
  fprintf(log_out, "%s:%d:%ld [%ld.%06ld] kolo %s %s:%d %s\n", host, (int)getpid(),
          (long)syscall(SYS_gettid), (long)ts.tv_sec, ts.tv_nsec / 1000L,
          names[level], base, line, msg);
  fflush(log_out);
  pthread_mutex_unlock(&log_lock);
}
