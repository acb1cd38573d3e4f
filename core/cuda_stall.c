/* cuda_stall.c - the stall warning of CUDA communicators (KOLO_STALL_WARN_S).
 *
 * A kernel whose wait on a peer passed the threshold notes, once per
 * launch, the peer, the call and what it waits for in the stall slot of
 * its communicator's status words (kernels/cuda_exec.h), and keeps
 * waiting.  Someone on the host must read the note while the kernel still
 * runs: the user may be blocked in cudaStreamSynchronize, and no kolo
 * thread serves a communicator whose pipes are all on the device (the
 * proxy serves net pipes only).  So one watcher thread per process polls
 * the slots of the communicators that launched with warnings on, every
 * WATCH_PERIOD_MS, and logs each note once in the host executor's sentence
 * (kernels/stall_text.h).  It starts with the first such communicator's
 * first launch and is joined when the last one is freed: no thread
 * outlives the communicators. */
#include "core/cuda_stall.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "kernels/call_sig.h"
#include "kernels/stall_text.h"

/* Well under a second: the warning is in seconds, and a kernel stopped by
 * its timeout is looked at once more by kolo_cuda_comm_status anyway. */
#define WATCH_PERIOD_MS 200

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;      /* the list and `stopping` */
static pthread_mutex_t life_mu = PTHREAD_MUTEX_INITIALIZER; /* the thread's start and join */
static pthread_cond_t wake;                                  /* monotonic clock; made at start */
static pthread_t thread;
static int running, stopping;
static struct koloComm *watched; /* linked by cuda->stall_next */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A child of fork() has no watcher and no CUDA of its parent's: it starts
 * from nothing. */
static void atfork_child(void) {
  pthread_mutex_init(&mu, NULL);
  pthread_mutex_init(&life_mu, NULL);
  running = stopping = 0;
  watched = NULL;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* ---- the note ------------------------------------------------------------ */

typedef struct {
  int peer, channel, what;
  kolo_call_sig sig;
} stall_note;

/* The kernels write a signature as 6 words of a report (cuda_mismatch.c
 * checks that kolo_dev_sig is kolo_call_sig). */
_Static_assert(sizeof(kolo_call_sig) == 6 * sizeof(uint32_t), "a signature is 6 words");

/* The note of launch `ready`, or 0 when a later launch is rewriting the
 * slot (it took the claim first: the words read may be its).  Every load
 * acquires, so that the claim is read after the words (a fence would do,
 * but ThreadSanitizer does not model fences). */
static int read_note(const uint32_t *w, uint32_t ready, stall_note *n) {
  uint32_t sig[6];
  n->peer = (int)__atomic_load_n(&w[KOLO_DEV_STALL_PEER], __ATOMIC_ACQUIRE);
  const uint32_t where = __atomic_load_n(&w[KOLO_DEV_STALL_WHERE], __ATOMIC_ACQUIRE);
  for (int i = 0; i < 6; i++) sig[i] = __atomic_load_n(&w[KOLO_DEV_STALL_SIG + i], __ATOMIC_ACQUIRE);
  if (__atomic_load_n(&w[KOLO_DEV_STALL_CLAIM], __ATOMIC_ACQUIRE) != ready) return 0;
  n->channel = (int)(where & 0xffffu);
  n->what = (int)(where >> 16);
  memcpy(&n->sig, sig, sizeof sig);
  return 1;
}

static void log_note(struct koloComm *c, const stall_note *n) {
  char call[KOLO_SIG_TEXT], peer[160];
  snprintf(peer, sizeof peer, "rank %d (channel %d: %s)", n->peer, n->channel,
           kolo_stall_reason(n->what == KOLO_DEV_STALL_SEND, n->what == KOLO_DEV_STALL_RECV));
  kolo_stall_log(c->rank, (int64_t)c->cuda->plan.stall_ms * 1000000LL,
                 kolo_call_sig_describe(&n->sig, call, sizeof call), peer, c->timeout_ms);
}

void kolo_cuda_stall_check(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc == NULL || cc->words == NULL || cc->plan.stall_ms == 0) return;
  const uint32_t *w = &cc->words[KOLO_CW_STATUS + KOLO_DEV_STATUS_STALL];
  const uint32_t ready = __atomic_load_n(&w[KOLO_DEV_STALL_READY], __ATOMIC_ACQUIRE);
  uint32_t logged = atomic_load(&cc->stall_logged);
  stall_note n;
  if (ready == 0 || ready == logged || !read_note(w, ready, &n)) return;
  /* the watcher and the comm's own thread may both look: one logs */
  if (atomic_compare_exchange_strong(&cc->stall_logged, &logged, ready)) log_note(c, &n);
}

/* ---- the watcher thread ---------------------------------------------------- */

static struct timespec period_from_now(void) {
  struct timespec t = {0, 0};
  if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) KOLO_WARN("clock_gettime(CLOCK_MONOTONIC): %s", strerror(errno));
  t.tv_nsec += WATCH_PERIOD_MS * 1000000L;
  t.tv_sec += t.tv_nsec / 1000000000L;
  t.tv_nsec %= 1000000000L;
  return t;
}

static void *watch_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  while (!stopping) {
    for (struct koloComm *c = watched; c != NULL; c = c->cuda->stall_next) kolo_cuda_stall_check(c);
    const struct timespec until = period_from_now();
    int err = pthread_cond_timedwait(&wake, &mu, &until);
    if (err != 0 && err != ETIMEDOUT) {
      KOLO_WARN("the CUDA stall watcher stops: pthread_cond_timedwait: %s (no more stall warnings)", strerror(err));
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* The condition variable on the monotonic clock (a wall-clock jump must
 * not stall the watcher), then the thread; life_mu held.  0 and why. */
static int start_thread(char *why, size_t len) {
  pthread_condattr_t attr;
  int err = pthread_condattr_init(&attr);
  if (err == 0) {
    err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (err == 0) err = pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
  }
  if (err != 0) {
    snprintf(why, len, "pthread_cond_init: %s", strerror(err));
    return err;
  }
  stopping = 0;
  err = pthread_create(&thread, NULL, watch_main, NULL);
  if (err != 0) {
    snprintf(why, len, "pthread_create: %s", strerror(err));
    pthread_cond_destroy(&wake);
    return err;
  }
  pthread_setname_np(thread, "kolo-stall"); /* a name is a help only: its failure is not an error */
  running = 1;
  return 0;
}

void kolo_cuda_stall_watch(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc->plan.stall_ms == 0 || cc->stall_watch != 0) return;
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&life_mu);
  char why[128] = "";
  cc->stall_watch = running || start_thread(why, sizeof why) == 0 ? 1 : -1;
  if (cc->stall_watch > 0) {
    pthread_mutex_lock(&mu);
    cc->stall_next = watched;
    watched = c;
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_unlock(&life_mu);
  if (cc->stall_watch < 0)
    KOLO_WARN("rank %d: cannot start the CUDA stall watcher (%s): no KOLO_STALL_WARN_S warnings for this "
              "communicator's kernels",
              c->rank, why);
}

/* Takes c off the list (mu held); 1 when the list is empty. */
static int unlink_comm(struct koloComm *c) {
  for (struct koloComm **p = &watched; *p != NULL; p = &(*p)->cuda->stall_next)
    if (*p == c) {
      *p = c->cuda->stall_next;
      break;
    }
  return watched == NULL;
}

void kolo_cuda_stall_unwatch(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc == NULL || cc->stall_watch <= 0) return;
  kolo_cuda_stall_check(c); /* a note the watcher has not come to yet */
  pthread_mutex_lock(&life_mu);
  pthread_mutex_lock(&mu);
  const int last = unlink_comm(c) && running;
  cc->stall_watch = 0;
  if (last) {
    stopping = 1;
    pthread_cond_signal(&wake);
  }
  pthread_mutex_unlock(&mu);
  if (last) {
    int err = pthread_join(thread, NULL);
    if (err != 0) KOLO_WARN("joining the CUDA stall watcher: %s", strerror(err));
    pthread_cond_destroy(&wake);
    running = 0;
  }
  pthread_mutex_unlock(&life_mu);
}
