/* host_mismatch.c - calls that do not match, on the host executor: the
 * sentence every rank fails with, and the report that carries both calls
 * from the rank that found them to the others (transport/connector.h; the
 * owner's stop_all writes it into every pipe). */
#include <stdio.h>

#include "kernels/host_checks.h"

/* Keeps m in the owner: its stop_all leaves it in every pipe before the
 * stop word. */
static void keep(kolo_exec_owner *o, const kolo_call_mismatch *m) {
  o->mismatch = *m;
  o->has_mismatch = 1;
}

/* "rank 1 called X but rank 0 called Y": the higher rank is the one that
 * differs from the lower one's call. */
static void describe(const kolo_call_mismatch *m, char *buf, size_t len) {
  char a[KOLO_SIG_TEXT], b[KOLO_SIG_TEXT];
  snprintf(buf, len, "rank %d called %s but rank %d called %s", (int)m->rank[0],
           kolo_call_sig_describe(&m->sig[0], a, sizeof a), (int)m->rank[1],
           kolo_call_sig_describe(&m->sig[1], b, sizeof b));
}

void kolo_exec_mismatch_found(kolo_exec_task *t, const kolo_connector *c) {
  kolo_exec_owner *o = t->owner;
  const kolo_call_sig *theirs = &c->ctrl->sig[c->step % KOLO_CONN_MAX_SLOTS];
  int mine_first = o->rank > c->peer;
  kolo_call_mismatch m = {{mine_first ? o->rank : c->peer, mine_first ? c->peer : o->rank},
                          {mine_first ? t->sig : *theirs, mine_first ? *theirs : t->sig}};
  char text[2 * KOLO_SIG_TEXT + 64];
  describe(&m, text, sizeof text);
  kolo_error(o->eb, koloInvalidUsage, "rank %d: calls do not match: %s", o->rank, text);
  keep(o, &m);
}

void kolo_exec_mismatch_seen(kolo_exec_task *t, const kolo_connector *c, int who) {
  kolo_exec_owner *o = t->owner;
  kolo_call_mismatch m;
  if (kolo_conn_read_mismatch(c, &m)) {
    char text[2 * KOLO_SIG_TEXT + 64];
    describe(&m, text, sizeof text);
    kolo_error(o->eb, koloInvalidUsage, "rank %d: calls do not match: %s (found by rank %d)", o->rank, text,
               who);
    keep(o, &m);
    return;
  }
  char mine[KOLO_SIG_TEXT];
  kolo_error(o->eb, koloInvalidUsage,
             "rank %d: calls do not match: rank %d found that two ranks' calls differ while rank %d was in %s",
             o->rank, who, o->rank, kolo_call_sig_describe(&t->sig, mine, sizeof mine));
}
