/* exec_turns.h - the host executor (kernels/host_exec.c) on one receive end
 * of a stand-in transport whose slices arrive only in a turn of its own
 * (progress), as a net pipe's do: what the executor does with what a turn
 * brought before it sleeps (wait). */
#ifndef KOLO_TESTS_UTIL_EXEC_TURNS_H
#define KOLO_TESTS_UTIL_EXEC_TURNS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int result;            /* the executor's koloResult_t */
  int sleeps;            /* calls of the transport's wait */
  int sleeps_with_slice; /* of them, calls while a slice had landed unread */
  int bytes_wrong;       /* received bytes that differ from those sent */
} kt_exec_turns;

typedef struct {
  int count;                /* int32 in the slice, 1 .. 16 */
  int turns_before_landing; /* empty turns before the one that lands it */
  /* the executor's waits (kolo_exec_owner): polls, yields, a yield time
   * and the yields of a wait on a transport with a wait of its own */
  int spin, yields;
  long long yield_ns;
  int wake_yields;
} kt_exec_turns_cfg;

/* Receives cfg->count int32 in one slice that lands in the first turn
 * taken after cfg->turns_before_landing turns brought nothing.  Returns 0,
 * or -1 with err filled where the set-up failed. */
int kt_exec_turns_run(const kt_exec_turns_cfg *cfg, kt_exec_turns *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
