/* call_sig.c - comparing and describing call signatures (see call_sig.h). */
#include "kernels/call_sig.h"

#include <stdio.h>

#include "common/dtype.h"
#include "ring/schedule.h"

/* A send and a recv are the two halves of one point-to-point call. */
static int coll_class(int coll) { return coll == KOLO_COLL_RECV ? KOLO_COLL_SEND : coll; }

int kolo_call_sig_match(const kolo_call_sig *a, const kolo_call_sig *b) {
  return coll_class(a->coll) == coll_class(b->coll) && a->count == b->count && a->type == b->type &&
         a->op == b->op && a->root == b->root && a->seq == b->seq;
}

static const char *op_name(int op) {
  static const char *names[koloNumOps] = {"sum", "prod", "max", "min", "avg"};
  if (op == KOLO_SIG_OP_PREMUL) return "premul_sum";
  return op >= 0 && op < koloNumOps ? names[op] : "invalid op";
}

static int is_rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER;
}

const char *kolo_call_sig_describe(const kolo_call_sig *s, char *buf, size_t n) {
  char op[32] = "", root[24] = "", seq[16] = "";
  if (s->op != KOLO_SIG_OP_NONE) snprintf(op, sizeof op, ", %s", op_name(s->op));
  if (is_rooted(s->coll)) snprintf(root, sizeof root, ", root=%d", (int)s->root);
  if (coll_class(s->coll) != KOLO_COLL_SEND) snprintf(seq, sizeof seq, " #%u", (unsigned)s->seq);
  snprintf(buf, n, "%s(count=%llu, %s%s%s)%s", kolo_coll_name(s->coll), (unsigned long long)s->count,
           kolo_type_name(s->type), op, root, seq);
  return buf;
}

void kolo_call_mismatch_describe(const kolo_call_mismatch *m, char *buf, size_t len) {
  char a[KOLO_SIG_TEXT], b[KOLO_SIG_TEXT];
  snprintf(buf, len, "rank %d called %s but rank %d called %s", (int)m->rank[0],
           kolo_call_sig_describe(&m->sig[0], a, sizeof a), (int)m->rank[1],
           kolo_call_sig_describe(&m->sig[1], b, sizeof b));
}
