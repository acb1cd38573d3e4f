/* cuda_status.c - the kernels' status words as the host reads them (see
 * cuda_status.h). */
#include "core/cuda_status.h"

#include <time.h>

#include "kernels/cuda_exec.h"

/* 10000 naps of 0.1 ms: the stopping block's stores come within
 * nanoseconds on a GPU, but on the CPU model its thread can be off its core
 * for a scheduler's time slice or more on a loaded host. */
#define STATUS_WORD_NAPS 10000

static void nap(void) {
  struct timespec ts = {0, 100 * 1000};
  nanosleep(&ts, NULL);
}

kolo_cuda_stop kolo_cuda_status_read(const uint32_t *s) {
  kolo_cuda_stop st = {__atomic_load_n(s, __ATOMIC_ACQUIRE), 0, 0, 0};
  if (st.why == KOLO_DEV_OK) return st;
  for (int i = 0; i < STATUS_WORD_NAPS && (st.word = __atomic_load_n(s + KOLO_DEV_STATUS_WORD, __ATOMIC_ACQUIRE)) == 0;
       i++)
    nap();
  st.task = __atomic_load_n(s + 1, __ATOMIC_ACQUIRE);
  st.peer = (int)__atomic_load_n(s + 2, __ATOMIC_ACQUIRE);
  return st;
}
