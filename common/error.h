/* error.h - result codes and "last error" sentences.
 *
 * An error is described once, where it is first seen, with kolo_error():
 * the sentence goes into an error buffer (the communicator's, so that
 * koloGetLastError(comm) reads back the failure of *that* communicator, or
 * the calling thread's when there is no communicator yet) and is logged at
 * WARN.  Callers that only pass a result code up stay silent.
 */
#ifndef KOLO_COMMON_ERROR_H
#define KOLO_COMMON_ERROR_H

#include <stddef.h>

#include "kolo.h"

#define KOLO_ERR_LEN 512

/* The result value kolo never returns (kolo.h): NCCL's ncclNumResults. */
#define KOLO_RESULT_RESERVED 8

/* 1 when r is a result code kolo returns (koloSuccess included). */
static inline int kolo_result_valid(int r) {
  return r >= koloSuccess && r < koloNumResults && r != KOLO_RESULT_RESERVED;
}

/* An error buffer.  Writers may be several threads (a communicator's caller,
 * its progress thread, the network proxy); every write and every read
 * (kolo_error_read, kolo_error_copy) holds a lock, so a sentence is never
 * torn.  Which sentence stays is the rule kolo.h states for
 * koloGetLastError:
 *  - a plain buffer (a thread's, a temporary): the last write;
 *  - a sticky buffer (a communicator's, kolo_errbuf_make_sticky): the first
 *    *failure* (koloRemoteError, koloTimeout, koloSystemError,
 *    koloInternalError, koloUnhandledCudaError) is kept for good, and every
 *    later failure shows it again, since the call reporting it returns that
 *    same failure; a call's own error (koloInvalidArgument,
 *    koloInvalidUsage) replaces what is shown, because the call returns it.
 * Buffers are zeroed before first use ({0}, calloc). */
typedef struct kolo_errbuf {
  char msg[KOLO_ERR_LEN];     /* the sentence shown */
  char failure[KOLO_ERR_LEN]; /* sticky: the first failure's sentence */
  unsigned long long sticky;  /* KOLO_ERRBUF_STICKY when sticky */
} kolo_errbuf;

#define KOLO_ERRBUF_STICKY 0x6b6f6c6f73746b79ull /* "kolostky" */

/* The calling thread's buffer, for failures outside any communicator. */
kolo_errbuf *kolo_thread_errbuf(void);

/* Makes eb a communicator's buffer (see above); eb is zeroed. */
void kolo_errbuf_make_sticky(kolo_errbuf *eb);

/* 1 when res is a failure (the first one sticks), 0 for a call's own error. */
int kolo_result_is_failure(koloResult_t res);

/* Formats the sentence into eb (NULL: the thread's buffer) by the rule
 * above, logs it at WARN and returns res, so that
 * `return kolo_error(eb, koloInvalidArgument, ...)` reads naturally. */
koloResult_t kolo_error(kolo_errbuf *eb, koloResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with strerror(err) appended: "...: <strerror>". */
koloResult_t kolo_syserror(kolo_errbuf *eb, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same as kolo_error without the log line: for sentences that the caller
 * decides whether to report (a peer that closed after finishing). */
koloResult_t kolo_error_quiet(kolo_errbuf *eb, koloResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies the sentence eb shows into out (len bytes, NUL-terminated);
 * returns out. */
char *kolo_error_read(const kolo_errbuf *eb, char *out, size_t len);

/* Copies src's shown sentence into dst (both non-NULL) as a plain write. */
void kolo_error_copy(kolo_errbuf *dst, const kolo_errbuf *src);
/* Forgets what eb shows and its failure. */
void kolo_error_clear(kolo_errbuf *eb);

#endif
