/* cuda_mismatch.h - calls that do not match, as CUDA kernels report
 * them (cuda_mismatch.c). */
#ifndef KOLO_CORE_CUDA_MISMATCH_H
#define KOLO_CORE_CUDA_MISMATCH_H

#include "core/cuda_state.h"
#include "core/cuda_status.h"

/* Calls that do not match (cuda_mismatch.c): when the kernels' status
 * (st, from kolo_cuda_status_read) is a mismatch found here or a peer's
 * stop word for one, fails the comm (koloInvalidUsage; *res: the comm's
 * failure) with the sentence naming both calls (the status words'
 * report), passes the report and the stop word on to every pipe, and
 * returns 1; else 0. */
int kolo_cuda_status_mismatch(struct koloComm *c, const kolo_cuda_stop *st, koloResult_t *res);
/* Stop_all's report: copies the status words' report to the copies'
 * source (1), or finds none (0); then kolo_cuda_mismatch_copy leaves it in
 * end d (on `stream`, a cudaStream_t), before its stop word. */
int kolo_cuda_mismatch_stage(kolo_cuda_comm *cc);
void kolo_cuda_mismatch_copy(kolo_cuda_comm *cc, const kolo_dev_conn *d, void *stream);

#endif
