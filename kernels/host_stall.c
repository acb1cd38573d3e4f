/* host_stall.c - the stall warning of the host executor: when a batch made
 * no progress for KOLO_STALL_WARN_S, each waiting owner logs once, at WARN,
 * the call it is in and the peers it waits for, before KOLO_TIMEOUT_MS
 * makes the wait an error.  What a rank knows of a peer is what its pipes
 * show: whether any slice of this call came from it yet.  The sentence
 * (stall_text.h) is CUDA communicators' too (core/cuda_stall.c). */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "kernels/host_checks.h"
#include "kernels/stall_text.h"

int64_t kolo_exec_stall_warn_ns(void) {
  int64_t s = kolo_param_int("KOLO_STALL_WARN_S");
  return s > 0 ? s * 1000000000LL : 0;
}

const char *kolo_stall_reason(int is_send, int sent_some) {
  if (is_send) return "it takes no more data: its receive slots are full";
  return sent_some ? "it stopped sending in the middle of this call" : "it has sent nothing of this call";
}

/* Why task t waits on its blocker, as seen from this end. */
static const char *wait_reason(const kolo_exec_task *t) {
  const kolo_connector *c = t->blocker;
  return kolo_stall_reason(c->is_send, c->sig_call == t->call);
}

/* 1 when an earlier blocked task of the same owner waits on the same peer. */
static int peer_listed(const kolo_exec_task *tasks, int upto, const kolo_exec_task *t) {
  for (int i = 0; i < upto; i++)
    if (tasks[i].owner == t->owner && !tasks[i].done && tasks[i].blocker &&
        tasks[i].blocker->peer == t->blocker->peer)
      return 1;
  return 0;
}

/* Appends "rank P (channel c: why)" for each peer owner o's tasks wait on. */
static void list_peers(const kolo_exec_task *tasks, int n, const kolo_exec_owner *o, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used + 1 < len; i++) {
    const kolo_exec_task *t = &tasks[i];
    if (t->owner != o || t->done || t->blocker == NULL || peer_listed(tasks, i, t)) continue;
    int w = snprintf(buf + used, len - used, "%srank %d (channel %d: %s)", used ? ", " : "", t->blocker->peer,
                     t->channel, wait_reason(t));
    if (w < 0) break;
    used += (size_t)w;
  }
}

void kolo_stall_log(int rank, int64_t stall_ns, const char *call, const char *peers, int timeout_ms) {
  KOLO_WARN("rank %d: stalled for %lld s in %s, waiting for %s; the ranks missing have not reached this "
            "call or are stuck before it (an error after KOLO_TIMEOUT_MS = %d ms)",
            rank, (long long)(stall_ns / 1000000000LL), call, peers, timeout_ms);
}

static void warn_owner(const kolo_exec_task *tasks, int n, const kolo_exec_task *t, int64_t stall_ns) {
  const kolo_exec_owner *o = t->owner;
  char call[KOLO_SIG_TEXT], peers[384];
  list_peers(tasks, n, o, peers, sizeof peers);
  kolo_stall_log(o->rank, stall_ns, kolo_call_sig_describe(&t->sig, call, sizeof call), peers, o->timeout_ms);
}

void kolo_exec_stall_warn(kolo_exec_task *tasks, int n, int64_t stall_ns) {
  for (int i = 0; i < n; i++) {
    kolo_exec_task *t = &tasks[i];
    kolo_exec_owner *o = t->owner;
    if (o->stall_warned || o->failed != koloSuccess || t->done || t->blocker == NULL) continue;
    o->stall_warned = 1;
    warn_owner(tasks, n, t, stall_ns);
  }
}
