/* cuda_status.h - the kernels' status words (kernels/cuda_exec.h) as the
 * host reads them (cuda_status.c). */
#ifndef KOLO_CORE_CUDA_STATUS_H
#define KOLO_CORE_CUDA_STATUS_H

#include <stdint.h>

#include "transport/call_sig_types.h"

/* Why the kernels stopped (KOLO_DEV_*), and what the first block to stop
 * wrote beside it: its block, the peer it names, the stop word it sent its
 * peers (0 when none came: below). */
typedef struct {
  uint32_t why, task, word;
  int peer;
} kolo_cuda_stop;

/* The status words at `status` (a comm's mapped words from KOLO_CW_STATUS).
 * The block that stops first claims the status word, then writes block,
 * peer and, last, with release, its stop word: a reader that came in
 * between waits for the stop word (about 1 s at most; a context that died
 * between leaves it 0, and block and peer as read).  KOLO_DEV_OK: no kernel
 * stopped, and nothing else is read. */
kolo_cuda_stop kolo_cuda_status_read(const uint32_t *status);

/* The mismatch report beside the status words, into *m: the kernel that
 * stopped first writes it right after its stop word, so a reader that
 * came between waits for it: as long as for the stop word where that
 * kernel found the mismatch (KOLO_DEV_MISMATCH: a report always follows),
 * about 0.16 s otherwise (one comes only if a peer left one).  0: no
 * report came. */
int kolo_cuda_status_report(const uint32_t *status, kolo_call_mismatch *m);

#endif
