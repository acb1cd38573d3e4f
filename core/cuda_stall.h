/* cuda_stall.h - the stall warning of CUDA communicators
 * (cuda_stall.c). */
#ifndef KOLO_CORE_CUDA_STALL_H
#define KOLO_CORE_CUDA_STALL_H

#include "core/cuda_state.h"

/* The stall warning (KOLO_STALL_WARN_S, cuda_stall.c).  watch: after a
 * launch of a comm with warnings on, makes sure the process's watcher
 * thread polls it (started with the first such comm).  check: logs the
 * note the comm's kernels left in the stall slot (cuda_exec.h), once per
 * launch, whoever looks first (the watcher, or kolo_cuda_comm_status
 * before a timeout's error, so that the warning comes first).  unwatch:
 * before the mapped words are freed; the last comm's joins the thread. */
void kolo_cuda_stall_watch(struct koloComm *c);
void kolo_cuda_stall_check(struct koloComm *c);
void kolo_cuda_stall_unwatch(struct koloComm *c);

#endif
