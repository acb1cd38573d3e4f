/* net_credit.h - when a net pipe's receive end credits its drained slots.
 * Kept apart from net_pipe.h (no atomics here) so that the C++ tests can
 * reach it. */
#ifndef KOLO_TRANSPORT_NET_CREDIT_H
#define KOLO_TRANSPORT_NET_CREDIT_H

#include <stdint.h>

/* Whether a receive end that drained `owed` slots past its last credit
 * sends a credit now (else it is owed lazily: proxy.h).  Each credit costs
 * a frame, and over TCP the segment that acknowledges it, so a credit waits
 * until the sender has a quarter of its window left (two slots where a
 * quarter is fewer), but never past half the window: with 8 slots one
 * credit per 6 slices, which cuts the TCP segments of a stream of small
 * calls, while a bulk sender still has two slices ahead of the credit. */
static inline int kolo_net_pipe_credit_due(uint32_t owed, uint32_t nslots) {
  uint32_t keep = nslots / 4 > 2 ? nslots / 4 : 2; /* slots the sender keeps */
  uint32_t due = nslots > 2 * keep ? nslots - keep : nslots / 2;
  return owed >= (due > 0 ? due : 1);
}

#endif
