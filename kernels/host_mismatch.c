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

void kolo_exec_mismatch_found(kolo_exec_task *t, const kolo_connector *c) {
  kolo_exec_owner *o = t->owner;
  const kolo_call_sig *theirs = kolo_conn_sig_place(c);
  int mine_first = o->rank > c->peer;
  kolo_call_mismatch m = {{mine_first ? o->rank : c->peer, mine_first ? c->peer : o->rank},
                          {mine_first ? t->sig : *theirs, mine_first ? *theirs : t->sig}};
  char text[KOLO_MISMATCH_TEXT];
  kolo_call_mismatch_describe(&m, text, sizeof text);
  kolo_error(o->eb, koloInvalidUsage, "rank %d: calls do not match: %s", o->rank, text);
  keep(o, &m);
}

void kolo_exec_mismatch_seen(kolo_exec_task *t, const kolo_connector *c, int who) {
  kolo_exec_owner *o = t->owner;
  kolo_call_mismatch m;
  if (kolo_conn_read_mismatch(c, &m)) {
    char text[KOLO_MISMATCH_TEXT];
    kolo_call_mismatch_describe(&m, text, sizeof text);
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
