/* polled_pipe.h - drives a pair of net pipes (transport/proxy.h) over a real
 * provider, in one process, in one of two ways:
 *
 * polled (caller = 0): the way a CUDA kernel does, with no GPU: two "kernel"
 * threads move the counters in the pipes' memory with plain atomic stores
 * (no futex wake, no doorbell), and a "launcher" posts each launch's slices
 * to the proxy, then waits for the launch and pauses, so that the proxy
 * falls asleep between launches and only the post can wake it.
 *
 * caller (caller = 1): the way the host executor does: the sending thread
 * kicks each slice it fills (kolo_net_pipe_kick: slices up to caller_bytes
 * from that thread, larger ones handed to the proxy) and pulls while it
 * waits for credit; the receiving thread pulls while it waits for a slice
 * (and sleeps on the pipe's fds, kolo_net_pipe_wait, every so often) and
 * kicks after draining each one (a credit, when kolo_net_pipe_credit_due
 * says so; the rest owed lazily).  The proxy thread runs beside them on the
 * same pipes: run under TSan, this is the test of the pipes' locking.
 *
 * Checked: every slice arrives with the bytes the sender wrote (a pattern of
 * seed, step and offset), exactly the bytes the sender declared in filled[]
 * land (the rest of the receiver's slot keeps the poison the receiver wrote
 * before returning it), and no wait stalls for longer than stall_ms. */
#ifndef KOLO_TESTS_POLLED_PIPE_H
#define KOLO_TESTS_POLLED_PIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char *provider; /* "socket" or "ib" */
  size_t slot_bytes;
  uint32_t nslots;
  int launches;
  int max_slices;       /* per launch, drawn in 1 .. max_slices */
  int pause_us;         /* between launches */
  int stall_ms;         /* longest wait of a "kernel" for one counter */
  unsigned seed;
  int caller;           /* 1: executor-style threads (see above) */
  size_t caller_bytes;  /* caller = 1: the largest slice the sending thread sends itself */
} kt_polled_cfg;

/* 0 on success; else nonzero with a sentence in err. */
int kt_polled_pipe_run(const kt_polled_cfg *cfg, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
