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

/* An error buffer.  Writers may be several threads (a comm's caller and its
 * progress thread): the first error since the last clear wins. */
typedef struct kolo_errbuf {
  char msg[KOLO_ERR_LEN];
} kolo_errbuf;

/* The calling thread's buffer, for failures outside any communicator. */
kolo_errbuf *kolo_thread_errbuf(void);

/* Formats the sentence into eb (NULL: the thread's buffer), logs it at WARN
 * and returns res, so that `return kolo_error(eb, koloInvalidArgument, ...)`
 * reads naturally. */
koloResult_t kolo_error(kolo_errbuf *eb, koloResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with strerror(err) appended: "...: <strerror>". */
koloResult_t kolo_syserror(kolo_errbuf *eb, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies src's sentence into dst (both non-NULL). */
void kolo_error_copy(kolo_errbuf *dst, const kolo_errbuf *src);
void kolo_error_clear(kolo_errbuf *eb);

#endif
