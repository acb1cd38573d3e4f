/* cuda_status.c - the kernels' status words as the host reads them (see
 * cuda_status.h). */
#include "core/cuda_status.h"

#include <string.h>

#include "common/clock.h"
#include "kernels/cuda_exec.h"

/* 10000 naps of 0.1 ms: the stopping block's stores come within
 * nanoseconds on a GPU, but on the CPU model its thread can be off its core
 * for a scheduler's time slice or more on a loaded host. */
#define STATUS_WORD_NAPS 10000
/* A report that may not come (below): about 0.16 s (1000 naps). */
#define STATUS_REPORT_NAPS 1000

/* Reads *w until it is `want` (0: anything but 0), napping 0.1 ms between
 * reads, `naps` times at most; the last value read. */
static uint32_t wait_word(const uint32_t *w, uint32_t want, int naps) {
  uint32_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
  for (int i = 0; i < naps && (want == 0 ? v == 0 : v != want); i++) {
    kolo_nap_us(100);
    v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
  }
  return v;
}

kolo_cuda_stop kolo_cuda_status_read(const uint32_t *s) {
  kolo_cuda_stop st = {__atomic_load_n(s, __ATOMIC_ACQUIRE), 0, 0, 0};
  if (st.why == KOLO_DEV_OK) return st;
  st.word = wait_word(s + KOLO_DEV_STATUS_WORD, 0, STATUS_WORD_NAPS);
  st.task = __atomic_load_n(s + 1, __ATOMIC_ACQUIRE);
  st.peer = (int)__atomic_load_n(s + 2, __ATOMIC_ACQUIRE);
  return st;
}

/* The block that stops first writes the report after its stop word.  One
 * that found the mismatch itself (KOLO_DEV_MISMATCH) always writes one, so
 * the read waits as long as for the stop word: its thread can be off its
 * core as long.  One that passes on a peer's stop word writes one only if
 * the peer left it in the pipe, and a stop without one must not be held
 * up: a short wait. */
int kolo_cuda_status_report(const uint32_t *s, kolo_call_mismatch *m) {
  const uint32_t *slot = s + KOLO_DEV_STATUS_REPORT_STATE;
  const int certain = __atomic_load_n(s, __ATOMIC_ACQUIRE) == KOLO_DEV_MISMATCH;
  if (wait_word(slot, 2u, certain ? STATUS_WORD_NAPS : STATUS_REPORT_NAPS) != 2u) return 0;
  memcpy(m, s + KOLO_DEV_STATUS_REPORT, sizeof *m);
  return 1;
}
