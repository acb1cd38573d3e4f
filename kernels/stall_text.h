/* stall_text.h - the stall warning's sentence (KOLO_STALL_WARN_S), one for
 * both executors: the host executor's (host_stall.c) and the CUDA
 * communicators' (core/cuda_stall.c, from what their kernels note). */
#ifndef KOLO_KERNELS_STALL_TEXT_H
#define KOLO_KERNELS_STALL_TEXT_H

#include <stdint.h>

/* KOLO_STALL_WARN_S in ns (0: never). */
int64_t kolo_exec_stall_warn_ns(void);

/* Why a rank waits on a peer, as seen from its end of their pipe: is_send
 * (the peer's receive slots are full), else whether anything of this call
 * came from the peer yet (sent_some). */
const char *kolo_stall_reason(int is_send, int sent_some);

/* Logs, at WARN, that `rank` stalled for stall_ns in call `call` (the
 * words of kolo_call_sig_describe) waiting for `peers` ("rank P (channel
 * c: reason)", comma-separated), before the timeout makes it an error. */
void kolo_stall_log(int rank, int64_t stall_ns, const char *call, const char *peers, int timeout_ms);

#endif
