/* cuda_mismatch.c - calls that do not match on CUDA communicators: the
 * sentence a rank fails with when its kernels found, or heard of, two calls
 * that differ (kernels/cuda/exec_kernel.cu leaves the report in the status
 * words), and the report that kolo_cuda_comm_stop_all leaves in every pipe
 * before its stop word.  The layouts the kernels write must be the host's
 * (transport/connector.h): checked here. */
#include "core/cuda_mismatch.h"

#include <stddef.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common/log.h"
#include "core/cuda_comm.h"
#include "kernels/call_sig.h"

_Static_assert(sizeof(kolo_dev_sig) == sizeof(kolo_call_sig), "kolo_dev_sig is connector.h's kolo_call_sig");
_Static_assert(offsetof(kolo_dev_sig, seq) == offsetof(kolo_call_sig, seq) &&
                   offsetof(kolo_dev_sig, root) == offsetof(kolo_call_sig, root) &&
                   offsetof(kolo_dev_sig, coll) == offsetof(kolo_call_sig, coll) &&
                   offsetof(kolo_dev_sig, type) == offsetof(kolo_call_sig, type) &&
                   offsetof(kolo_dev_sig, op) == offsetof(kolo_call_sig, op) &&
                   offsetof(kolo_dev_sig, set) == offsetof(kolo_call_sig, set),
               "kolo_dev_sig's fields lie as kolo_call_sig's");
_Static_assert(sizeof(kolo_dev_report) == sizeof(kolo_call_mismatch) &&
                   sizeof(kolo_dev_report) == KOLO_DEV_REPORT_WORDS * sizeof(uint32_t) &&
                   offsetof(kolo_dev_report, sig) == offsetof(kolo_call_mismatch, sig),
               "kolo_dev_report is connector.h's kolo_call_mismatch");
_Static_assert(offsetof(kolo_conn_ctrl, sig) - offsetof(kolo_conn_ctrl, tail) == KOLO_DEV_SIG_FROM_TAIL,
               "kernels/cuda_exec.h's KOLO_DEV_SIG_FROM_TAIL must match connector.h");
_Static_assert(offsetof(kolo_conn_ctrl, mismatch_state) - offsetof(kolo_conn_ctrl, tail) ==
                       KOLO_DEV_REPORT_FROM_TAIL &&
                   offsetof(kolo_conn_ctrl, mismatch) - offsetof(kolo_conn_ctrl, mismatch_state) == 8,
               "kernels/cuda_exec.h's report slot must match connector.h");
_Static_assert(KOLO_DEV_SIG_FROM_TAIL > KOLO_DEV_CTRL_STOP && KOLO_DEV_REPORT_FROM_TAIL + 64 <= 4096,
               "device pipes (transport_p2p.c) keep signatures and reports in their control page, past the stop word");

static koloResult_t kolo_cuda_mismatch_error(struct koloComm *c, int found_here, uint32_t word) {
  kolo_call_mismatch m;
  char text[KOLO_MISMATCH_TEXT];
  const int who = (int)(word & 0xffffffu) - 1;
  if (!kolo_cuda_status_report(&c->cuda->words[KOLO_CW_STATUS], &m))
    return kolo_error(&c->err, koloInvalidUsage,
                      "rank %d: calls do not match: rank %d found that two ranks' calls differ", c->rank, who);
  kolo_call_mismatch_describe(&m, text, sizeof text);
  if (found_here) return kolo_error(&c->err, koloInvalidUsage, "rank %d: calls do not match: %s", c->rank, text);
  return kolo_error(&c->err, koloInvalidUsage, "rank %d: calls do not match: %s (found by rank %d)", c->rank, text,
                    who);
}

int kolo_cuda_status_mismatch(struct koloComm *c, const kolo_cuda_stop *st, koloResult_t *res) {
  if (st->why != KOLO_DEV_MISMATCH && st->why != KOLO_DEV_PEER_STOPPED) return 0;
  const uint32_t word = st->word;
  if (st->why == KOLO_DEV_PEER_STOPPED && (word >> 24) != KOLO_STOP_MISMATCH) return 0;
  int expected = koloSuccess;
  if (!atomic_compare_exchange_strong(&c->failed, &expected, (int)koloInvalidUsage)) {
    *res = (koloResult_t)expected;
    return 1;
  }
  kolo_cuda_mismatch_error(c, (int)(word & 0xffffffu) - 1 == c->rank, word);
  kolo_cuda_comm_stop_all(c, KOLO_STOP_MISMATCH); /* the report, then the stop words */
  *res = koloInvalidUsage;
  return 1;
}

int kolo_cuda_mismatch_stage(kolo_cuda_comm *cc) {
  kolo_call_mismatch m;
  if (!kolo_cuda_status_report(&cc->words[KOLO_CW_STATUS], &m)) return 0;
  memcpy(&cc->words[KOLO_CW_REPORT_SRC + 2], &m, sizeof m);
  cc->words[KOLO_CW_REPORT_SRC] = 2u;
  return 1;
}

void kolo_cuda_mismatch_copy(kolo_cuda_comm *cc, const kolo_dev_conn *d, void *stream) {
  if (d->step == NULL || d->tail == NULL) return;
  char *slot = (char *)d->tail + KOLO_DEV_REPORT_FROM_TAIL;
  const uint32_t *src = &cc->words[KOLO_CW_REPORT_SRC];
  cudaStream_t st = (cudaStream_t)stream;
  /* the report, then its state: one copy each, in stream order */
  cudaError_t e = cudaMemcpyAsync(slot + 8, src + 2, sizeof(kolo_call_mismatch), cudaMemcpyDefault, st);
  if (e == cudaSuccess) e = cudaMemcpyAsync(slot, src, sizeof *src, cudaMemcpyDefault, st);
  if (e != cudaSuccess)
    KOLO_WARN("writing a mismatch report for rank %d failed: %s", d->peer, cudaGetErrorString(e));
}
