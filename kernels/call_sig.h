/* call_sig.h - a call's signature (transport/connector.h's kolo_call_sig):
 * what the ranks of a call must agree on, compared once per call and pipe by
 * the receiving end, and the words that describe it in error sentences and
 * stall warnings.
 *
 * The core fills it (core/enqueue.c): fields a call's ranks may legitimately
 * differ in are left 0 so that a plain comparison is the right one.
 */
#ifndef KOLO_KERNELS_CALL_SIG_H
#define KOLO_KERNELS_CALL_SIG_H

#include <stddef.h>

#include "transport/connector.h"

/* kolo_call_sig.op of calls that do not reduce, and of premul-sums (whose
 * op handles are each rank's own). */
#define KOLO_SIG_OP_NONE 0xff
#define KOLO_SIG_OP_PREMUL 0xfe

/* 1 when the two ends of a pipe run matching calls (a send matches a recv). */
int kolo_call_sig_match(const kolo_call_sig *a, const kolo_call_sig *b);

/* "AllReduce(count=100, float32, sum) #7" into buf; returns buf. */
const char *kolo_call_sig_describe(const kolo_call_sig *s, char *buf, size_t n);

/* Bytes kolo_call_sig_describe may need. */
#define KOLO_SIG_TEXT 96

/* "rank 1 called X but rank 0 called Y" into buf (the report's higher
 * rank is the one that differs from the lower one's call); the sentence
 * both executors fail every rank with. */
void kolo_call_mismatch_describe(const kolo_call_mismatch *m, char *buf, size_t len);

/* Bytes kolo_call_mismatch_describe may need. */
#define KOLO_MISMATCH_TEXT (2 * KOLO_SIG_TEXT + 64)

#endif
