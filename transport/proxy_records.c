/* proxy_records.c - signatures and mismatch reports over a net pipe's
 * control channel (see proxy_records.h). */
#include "transport/proxy_records.h"

#include <string.h>

#include "common/log.h"

#define SIG_WORDS (sizeof(kolo_call_sig) / sizeof(uint32_t))
#define REPORT_WORDS (sizeof(kolo_call_mismatch) / sizeof(uint32_t))
_Static_assert(REPORT_WORDS + 1 <= KOLO_PROXY_RECORD_MSGS, "a report and its stop word fit the queue");
_Static_assert(sizeof(kolo_call_sig) % sizeof(uint32_t) == 0, "a signature is whole words");

/* Queues the words of `bytes` and the message (kind, value) after them;
 * 0 when the queue is still busy with an earlier record. */
static int queue_record(kolo_net_pipe *p, const void *bytes, size_t nwords, uint32_t kind, uint32_t value) {
  if (kolo_proxy_records_pending(p)) return 0;
  p->outq_n = p->outq_at = 0;
  for (size_t i = 0; i < nwords; i++) {
    uint32_t w;
    memcpy(&w, (const char *)bytes + i * sizeof w, sizeof w);
    p->outq[p->outq_n][0] = KOLO_NET_CTRL_WORD;
    p->outq[p->outq_n++][1] = w;
  }
  p->outq[p->outq_n][0] = kind;
  p->outq[p->outq_n++][1] = value;
  return 1;
}

int kolo_proxy_queue_sig(kolo_net_pipe *p, uint32_t step) {
  kolo_call_sig *sig = &p->ctrl->sig[step % KOLO_CONN_MAX_SLOTS];
  if (!sig->set) return 1; /* not the first slice of a call */
  if (!queue_record(p, sig, SIG_WORDS, KOLO_NET_CTRL_SIG, step)) return 0;
  /* The executor may stamp this place again only for step + 64, after the
   * receiver drained this slice: after this store. */
  sig->set = 0;
  return 1;
}

int kolo_proxy_queue_stop(kolo_net_pipe *p, uint32_t word) {
  kolo_call_mismatch m;
  if ((word >> 24) == KOLO_STOP_MISMATCH && kolo_ctrl_read_mismatch(p->ctrl, &m))
    return queue_record(p, &m, REPORT_WORDS, KOLO_NET_CTRL_STOP, word);
  return queue_record(p, NULL, 0, KOLO_NET_CTRL_STOP, word);
}

koloResult_t kolo_proxy_flush_records(kolo_net_pipe *p, int *moved) {
  koloResult_t res = koloSuccess;
  while (res == koloSuccess && kolo_proxy_records_pending(p)) {
    int queued = 0;
    const uint32_t *m = p->outq[p->outq_at];
    res = p->net->ctrl_send(p->comm, m[0], m[1], &queued, &p->err);
    if (!queued) break;
    if (m[0] == KOLO_NET_CTRL_STOP) p->stop_sent = 1;
    p->outq_at++;
    *moved = 1;
  }
  return res;
}

/* The signature of step `step` came in: where the receiving executor looks
 * for it, `set` last (it polls that). */
static void take_sig(kolo_net_pipe *p, uint32_t step) {
  if ((size_t)p->in_n != SIG_WORDS) {
    KOLO_WARN("rank %d: a call signature from %s came with %d words, not %zu: ignored", p->self, p->who,
              p->in_n, SIG_WORDS);
    return;
  }
  kolo_call_sig sig;
  memcpy(&sig, p->in_words, sizeof sig);
  kolo_call_sig *dst = &p->ctrl->sig[step % KOLO_CONN_MAX_SLOTS];
  /* Field by field: the executor may be polling `set` right now. */
  dst->count = sig.count;
  dst->seq = sig.seq;
  dst->root = sig.root;
  dst->coll = sig.coll;
  dst->type = sig.type;
  dst->op = sig.op;
  __atomic_store_n(&dst->set, sig.set, __ATOMIC_RELEASE);
  kolo_futex_wake(&p->ctrl->tail); /* an executor may sleep on tail, which had moved already */
}

int kolo_proxy_take_record(kolo_net_pipe *p, uint32_t kind, uint32_t value) {
  if (kind == KOLO_NET_CTRL_WORD) {
    if (p->in_n < KOLO_PROXY_RECORD_MSGS) p->in_words[p->in_n] = value;
    p->in_n++;
    return 1;
  }
  if (kind != KOLO_NET_CTRL_SIG) return 0;
  take_sig(p, value);
  p->in_n = 0;
  return 1;
}

void kolo_proxy_take_stop(kolo_net_pipe *p, uint32_t word) {
  if ((word >> 24) == KOLO_STOP_MISMATCH && (size_t)p->in_n == REPORT_WORDS) {
    kolo_call_mismatch m;
    memcpy(&m, p->in_words, sizeof m);
    kolo_ctrl_report_mismatch(p->ctrl, &m);
  }
  p->in_n = 0;
}
