/* connector.c - futex sleeps and stop words of connectors. */
#include "transport/connector.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void kolo_futex_wait(_Atomic uint32_t *word, uint32_t seen, int timeout_us) {
  struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000L};
  /* Not FUTEX_PRIVATE: the word may be in memory shared between processes.
   * EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again". */
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

void kolo_futex_wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void kolo_doorbell_ring(int fd) {
  uint64_t one = 1;
  ssize_t k;
  do k = write(fd, &one, sizeof one);
  while (k < 0 && errno == EINTR);
  /* EAGAIN (the count at its maximum) leaves it readable: rung all the
   * same.  Nothing else can fail on an open eventfd. */
  (void)k;
}

void kolo_conn_sleep(kolo_connector *c, int timeout_us) {
  _Atomic uint32_t *counter = c->is_send ? &c->ctrl->head : &c->ctrl->tail;
  _Atomic uint32_t *waiters = c->is_send ? &c->ctrl->head_waiters : &c->ctrl->tail_waiters;
  atomic_fetch_add_explicit(waiters, 1, memory_order_seq_cst);
  uint32_t seen = atomic_load_explicit(counter, memory_order_seq_cst);
  /* Re-check after registering: the writer checks waiters after its store,
   * so one of us sees the other (both sides use seq_cst). */
  if (!kolo_conn_ready(c) && kolo_conn_stopped(c) == 0) kolo_futex_wait(counter, seen, timeout_us);
  atomic_fetch_sub_explicit(waiters, 1, memory_order_seq_cst);
}

void kolo_conn_stop(kolo_connector *c, int reason, int rank) {
  if (c == NULL || c->ctrl == NULL) return;
  uint32_t expected = 0;
  uint32_t word = ((uint32_t)reason << 24) | (uint32_t)(rank + 1);
  atomic_compare_exchange_strong(&c->ctrl->abort, &expected, word);
  /* Wake whoever sleeps on either counter so it sees the stop word (a
   * net pipe's proxy too: it forwards the word to the peer). */
  kolo_futex_wake(&c->ctrl->tail);
  kolo_futex_wake(&c->ctrl->head);
  kolo_conn_ring(c->ctrl);
}

void kolo_ctrl_report_mismatch(kolo_conn_ctrl *ctrl, const kolo_call_mismatch *m) {
  uint32_t expected = 0;
  if (!atomic_compare_exchange_strong(&ctrl->mismatch_state, &expected, 1)) return;
  ctrl->mismatch = *m;
  atomic_store_explicit(&ctrl->mismatch_state, 2, memory_order_release);
}

void kolo_conn_report_mismatch(kolo_connector *c, const kolo_call_mismatch *m) {
  if (c != NULL && c->ctrl != NULL) kolo_ctrl_report_mismatch(c->ctrl, m);
}

int kolo_ctrl_read_mismatch(const kolo_conn_ctrl *ctrl, kolo_call_mismatch *m) {
  if (atomic_load_explicit(&ctrl->mismatch_state, memory_order_acquire) != 2) return 0;
  *m = ctrl->mismatch;
  return 1;
}

int kolo_conn_read_mismatch(const kolo_connector *c, kolo_call_mismatch *m) {
  return c != NULL && c->ctrl != NULL && kolo_ctrl_read_mismatch(c->ctrl, m);
}
