/* perf_watchdog.c - kolo-perf -T (see perf_watchdog.h). */
#define _GNU_SOURCE /* nanosleep */
#include "perf/perf_watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "perf/perf_sweep.h" /* perf_now_us */

#define WATCH_SLOTS 4096
#define WATCH_PERIOD_NS (50 * 1000 * 1000)

struct perf_watch {
  koloComm_t comm; /* NULL: a free slot */
  int rank;
  _Atomic size_t bytes;     /* the row running, 0 for none */
  _Atomic int64_t since_ms; /* when it started */
  int fired;                /* revoked already */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct perf_watch slots[WATCH_SLOTS];
static int timeout_ms;  /* 0 until the thread runs */

/* Under the lock: revokes the communicator of a slot past its time. */
static void check_slot(struct perf_watch *w, int64_t now) {
  size_t bytes = atomic_load(&w->bytes);
  if (w->comm == NULL || w->fired || bytes == 0 || now - atomic_load(&w->since_ms) <= timeout_ms) return;
  w->fired = 1;
  fprintf(stderr,
          "rank %d: test timeout: the %zu-byte row has run for more than %d s (-T %d); revoking the "
          "communicator\n", w->rank, bytes, timeout_ms / 1000, timeout_ms / 1000);
  koloResult_t res = koloCommRevoke(w->comm, KOLO_REVOKE_DEFAULT);
  if (res != koloSuccess)
    fprintf(stderr, "rank %d: koloCommRevoke failed: %s: %s\n", w->rank, koloGetErrorString(res),
            koloGetLastError(w->comm));
}

static void *watch_thread(void *arg) {
  (void)arg;
  struct timespec period = {0, WATCH_PERIOD_NS};
  for (;;) {
    nanosleep(&period, NULL);
    pthread_mutex_lock(&lock);
    int64_t now = (int64_t)(perf_now_us() / 1000);
    for (int i = 0; i < WATCH_SLOTS; i++) check_slot(&slots[i], now);
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

/* Under the lock: the thread, once per process (a forked rank starts its own). */
static int start_thread(int timeout_s) {
  if (timeout_ms > 0) return 0;
  pthread_t th;
  int err = pthread_create(&th, NULL, watch_thread, NULL);
  if (err == 0) err = pthread_detach(th);
  if (err != 0) {
    fprintf(stderr, "kolo-perf: -T: cannot start the watchdog thread: %s (running without a timeout)\n",
            strerror(err));
    return -1;
  }
  timeout_ms = timeout_s * 1000;
  return 0;
}

perf_watch *perf_watch_add(koloComm_t comm, int rank, int timeout_s) {
  if (timeout_s <= 0) return NULL;
  perf_watch *w = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < WATCH_SLOTS && w == NULL; i++)
    if (slots[i].comm == NULL) w = &slots[i];
  if (w == NULL)
    fprintf(stderr, "rank %d: -T: more than %d ranks in one process: this one is not watched\n", rank, WATCH_SLOTS);
  else if (start_thread(timeout_s) != 0)
    w = NULL;
  else
    *w = (struct perf_watch){.comm = comm, .rank = rank};
  pthread_mutex_unlock(&lock);
  return w;
}

void perf_watch_remove(perf_watch *w) {
  if (w == NULL) return;
  pthread_mutex_lock(&lock);
  w->comm = NULL;
  atomic_store(&w->bytes, 0);
  pthread_mutex_unlock(&lock);
}

void perf_watch_row(perf_watch *w, size_t bytes) {
  if (w == NULL) return;
  atomic_store(&w->since_ms, (int64_t)(perf_now_us() / 1000));
  atomic_store(&w->bytes, bytes);
}
