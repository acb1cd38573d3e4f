/* error.c - result strings and last-error sentences (see error.h). */
#include "error.h"

#include <stdarg.h>
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

static koloResult_t verror(kolo_errbuf *eb, koloResult_t res, int err,
                           const char *fmt, va_list ap) {
  if (eb == NULL) eb = &thread_errbuf;
  char msg[KOLO_ERR_LEN];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  if (err != 0 && n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, ": %s", strerror(err));
  memcpy(eb->msg, msg, sizeof msg);
  KOLO_WARN("%s (%s)", msg, koloGetErrorString(res));
  return res;
}

koloResult_t kolo_error(kolo_errbuf *eb, koloResult_t res, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(eb, res, 0, fmt, ap);
  va_end(ap);
  return res;
}

koloResult_t kolo_syserror(kolo_errbuf *eb, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(eb, koloSystemError, err, fmt, ap);
  va_end(ap);
  return koloSystemError;
}

void kolo_error_copy(kolo_errbuf *dst, const kolo_errbuf *src) {
  if (dst != src) memcpy(dst->msg, src->msg, sizeof dst->msg);
}

void kolo_error_clear(kolo_errbuf *eb) { eb->msg[0] = '\0'; }
