/* error.c - result strings and last-error sentences (see error.h). */
#include "error.h"

#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* One list gives each result its name and its meaning. */
#define KOLO_RESULT_LIST(X)                                                  \
  X(koloSuccess, "no error")                                                 \
  X(koloUnhandledCudaError, "unhandled CUDA error")                          \
  X(koloSystemError, "system call failed")                                   \
  X(koloInternalError, "internal error (a kolo bug)")                        \
  X(koloInvalidArgument, "invalid argument")                                 \
  X(koloInvalidUsage, "invalid usage")                                       \
  X(koloRemoteError, "remote process exited or failed")                      \
  X(koloInProgress, "operation in progress")                                 \
  X(koloTimeout, "timed out waiting for a peer")

const char *koloGetErrorString(koloResult_t result) {
  if ((int)result == KOLO_RESULT_RESERVED)
    return "result code 8: reserved (NCCL's ncclNumResults), never returned by kolo";
  switch (result) {
#define KOLO_RESULT_CASE(code, text)                                         \
  case code:                                                                 \
    return #code ": " text;
    KOLO_RESULT_LIST(KOLO_RESULT_CASE)
#undef KOLO_RESULT_CASE
  case koloNumResults:
    break;
  }
  return "unknown kolo result code";
}

static _Thread_local kolo_errbuf thread_errbuf;

kolo_errbuf *kolo_thread_errbuf(void) { return &thread_errbuf; }

/* ---- locking: a few spin locks striped by the buffer's address, so that a
 * buffer needs no lock of its own to set up (temporaries are plain {0}).
 * A lock is held for a memcpy of a sentence, nothing more. */
#define KOLO_ERR_LOCKS 64
static _Atomic int err_locks[KOLO_ERR_LOCKS];

static _Atomic int *lock_of(const kolo_errbuf *eb) {
  return &err_locks[((uintptr_t)eb / sizeof(kolo_errbuf)) % KOLO_ERR_LOCKS];
}

static void lock(const kolo_errbuf *eb) {
  _Atomic int *l = lock_of(eb);
  int expected = 0;
  while (!atomic_compare_exchange_weak_explicit(l, &expected, 1, memory_order_acquire, memory_order_relaxed)) {
    expected = 0;
    sched_yield();
  }
}

static void unlock(const kolo_errbuf *eb) { atomic_store_explicit(lock_of(eb), 0, memory_order_release); }

int kolo_result_is_failure(koloResult_t res) {
  return res == koloRemoteError || res == koloTimeout || res == koloSystemError ||
         res == koloInternalError || res == koloUnhandledCudaError;
}

void kolo_errbuf_make_sticky(kolo_errbuf *eb) {
  lock(eb);
  eb->sticky = KOLO_ERRBUF_STICKY;
  unlock(eb);
}

/* Stores msg in eb by error.h's rule; 0 when a sticky buffer kept its
 * first failure instead. */
static int store(kolo_errbuf *eb, koloResult_t res, const char *msg) {
  int kept = 1;
  lock(eb);
  if (eb->sticky != KOLO_ERRBUF_STICKY || !kolo_result_is_failure(res)) {
    memcpy(eb->msg, msg, KOLO_ERR_LEN);
  } else if (eb->failure[0] == '\0') {
    memcpy(eb->failure, msg, KOLO_ERR_LEN);
    memcpy(eb->msg, msg, KOLO_ERR_LEN);
  } else {
    memcpy(eb->msg, eb->failure, KOLO_ERR_LEN);
    kept = 0;
  }
  unlock(eb);
  return kept;
}

static koloResult_t verror(kolo_errbuf *eb, koloResult_t res, int err, int quiet, const char *fmt,
                           va_list ap) {
  if (eb == NULL) eb = &thread_errbuf;
  char msg[KOLO_ERR_LEN];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  if (err != 0 && n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, ": %s", strerror(err));
  int kept = store(eb, res, msg);
  if (quiet) return res;
  if (kept) KOLO_WARN("%s (%s)", msg, koloGetErrorString(res));
  else KOLO_WARN("%s (%s; the communicator had failed before: that first failure is its error)", msg,
                 koloGetErrorString(res));
  return res;
}

koloResult_t kolo_error(kolo_errbuf *eb, koloResult_t res, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(eb, res, 0, 0, fmt, ap);
  va_end(ap);
  return res;
}

koloResult_t kolo_syserror(kolo_errbuf *eb, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(eb, koloSystemError, err, 0, fmt, ap);
  va_end(ap);
  return koloSystemError;
}

koloResult_t kolo_error_quiet(kolo_errbuf *eb, koloResult_t res, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(eb, res, 0, 1, fmt, ap);
  va_end(ap);
  return res;
}

char *kolo_error_read(const kolo_errbuf *eb, char *out, size_t len) {
  if (len == 0) return out;
  lock(eb);
  snprintf(out, len, "%s", eb->msg);
  unlock(eb);
  return out;
}

void kolo_error_copy(kolo_errbuf *dst, const kolo_errbuf *src) {
  if (dst == src) return;
  char msg[KOLO_ERR_LEN];
  kolo_error_read(src, msg, sizeof msg);
  lock(dst);
  memcpy(dst->msg, msg, sizeof msg);
  unlock(dst);
}

void kolo_error_clear(kolo_errbuf *eb) {
  lock(eb);
  eb->msg[0] = '\0';
  eb->failure[0] = '\0';
  unlock(eb);
}
