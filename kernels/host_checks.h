/* host_checks.h - the host executor's slow-path checks on a call: calls that
 * do not match (host_mismatch.c) and the stall warning (host_stall.c).
 * Internal to kernels/: host_exec.c calls them off its hot path.
 */
#ifndef KOLO_KERNELS_HOST_CHECKS_H
#define KOLO_KERNELS_HOST_CHECKS_H

#include <stdint.h>

#include "kernels/host_exec.h"
#include "kernels/stall_text.h" /* kolo_exec_stall_warn_ns: read once per batch */

/* Task t found, on the first slice of its call from pipe c, that the
 * sender's call differs from its own: records the sentence naming both
 * calls in t's owner and keeps the report there (owner.mismatch), which
 * the owner's stop_all leaves in its pipes for the peers.  The caller then
 * fails the owner (KOLO_STOP_MISMATCH). */
void kolo_exec_mismatch_found(kolo_exec_task *t, const kolo_connector *c);

/* Task t, waiting on c, saw the stop word of a mismatch that rank `who`
 * found: records the sentence (the report's when c holds one) and keeps
 * the report to pass on, as above.  The caller then fails the owner. */
void kolo_exec_mismatch_seen(kolo_exec_task *t, const kolo_connector *c, int who);

/* Logs once per owner, at WARN, which peers its blocked tasks wait for
 * and in which call, after the batch made no progress for stall_ns. */
void kolo_exec_stall_warn(kolo_exec_task *tasks, int n, int64_t stall_ns);

#endif
