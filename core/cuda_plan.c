/* cuda_plan.c - ops of one CUDA communicator into kernel launches (see
 * cuda_plan.h for the order and the cuts, and why). */
#include "core/cuda_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/op_sig.h"
#include "kernels/cuda/ll_format.h"
#include "ring/geometry.h"

enum { KEY_COLLECTIVE = 0, KEY_P2P = 1 };

int kolo_cuda_plan_protocol(const kolo_op *op, const kolo_cuda_plan_comm *pc) {
  size_t bytes = op->count * koloTypeSize(op->type), ll_threshold = pc->ll_threshold[op->coll];
  return (ll_threshold > 0 && bytes <= ll_threshold) ? KOLO_PROTO_LL : KOLO_PROTO_SIMPLE;
}

static int op_channels(const kolo_op *op, const kolo_cuda_plan_comm *pc) {
  if (op->count == 0) return 0; /* nothing moves: no task (every rank agrees) */
  return kolo_op_channels(op, pc->nranks, pc->nchannels, pc->min_channel_bytes, pc->tuned);
}

int kolo_cuda_plan_is_hier(const kolo_op *op, const kolo_cuda_plan_comm *pc) {
  return op->coll == KOLO_COLL_ALL_REDUCE && op->arg == KOLO_ALGO_HIER && pc->hier_programs != NULL &&
         op->count > 0;
}

/* Programs an op runs per channel: three phases, or its one program. */
static int op_phases(const kolo_op *op, const kolo_cuda_plan_comm *pc) {
  return kolo_cuda_plan_is_hier(op, pc) ? KOLO_HIER_PHASES : 1;
}

int kolo_cuda_plan_count(const kolo_op *ops, int nops, const kolo_cuda_plan_comm *pc) {
  int n = 0;
  for (int i = 0; i < nops; i++) n += op_channels(&ops[i], pc) * op_phases(&ops[i], pc);
  return n;
}

static int cmp_items(const void *a, const void *b) {
  const kolo_cuda_plan_item *x = a, *y = b;
  for (int k = 0; k < 8; k++)
    if (x->key[k] != y->key[k]) return x->key[k] < y->key[k] ? -1 : 1;
  return (x->op > y->op) - (x->op < y->op);
}

void kolo_cuda_plan_items(const kolo_op *ops, int nops, const kolo_cuda_plan_comm *pc,
                          kolo_cuda_plan_item *items) {
  int n = 0, colls = 0;
  for (int i = 0; i < nops; i++) {
    const kolo_op *op = &ops[i];
    int nch = op_channels(op, pc);
    int32_t key[8] = {0};
    if (kolo_coll_is_p2p(op->coll)) {
      int send = op->coll == KOLO_COLL_SEND;
      int j = 0; /* earlier ops of this call in the same direction with the same peer */
      for (int k = 0; k < i; k++) j += ops[k].coll == op->coll && ops[k].arg == op->arg && ops[k].count > 0;
      key[0] = KEY_P2P;
      key[1] = (int32_t)op->type;
      key[2] = kolo_cuda_plan_protocol(op, pc);
      key[3] = send ? pc->rank : op->arg; /* sender */
      key[4] = send ? op->arg : pc->rank; /* receiver */
      key[5] = j;
      key[7] = send ? 0 : 1;
    } else {
      key[0] = KEY_COLLECTIVE;
      key[1] = nch > 0 ? colls++ : colls;
    }
    int hier = kolo_cuda_plan_is_hier(op, pc);
    for (int ph = 0; ph < (hier ? KOLO_HIER_PHASES : 1); ph++)
      for (int ch = 0; ch < nch; ch++) {
        kolo_cuda_plan_item *it = &items[n++];
        memcpy(it->key, key, sizeof key);
        if (hier) {
          it->key[2] = ph;
          it->key[3] = ch;
        } else {
          it->key[kolo_coll_is_p2p(op->coll) ? 6 : 2] = ch;
        }
        it->op = i;
        it->channel = ch;
        it->nch = nch;
        it->phase = hier ? ph : -1;
      }
  }
  qsort(items, (size_t)n, sizeof *items, cmp_items);
}

/* The program of an item and the device copy of its steps (NULL when the
 * comm has none). */
static const kolo_program *program_for(const kolo_op *op, const kolo_cuda_plan_item *it,
                                       const kolo_cuda_plan_comm *pc, const kolo_step **steps) {
  *steps = NULL;
  if (it->phase >= 0) {
    if (pc->hier_programs == NULL || it->phase >= KOLO_HIER_PHASES) return NULL;
    *steps = pc->hier_steps[it->phase];
    return &pc->hier_programs[it->phase];
  }
  if (pc->programs[op->coll] == NULL || pc->dev_steps[op->coll] == NULL) return NULL;
  int slot = kolo_program_index(op->coll, op->arg, it->channel, pc->nrings);
  *steps = pc->dev_steps[op->coll][slot];
  return &pc->programs[op->coll][slot];
}

/* The end a program's peer maps to on this channel, or NULL (no peer). */
static const kolo_dev_conn *end_for(const kolo_cuda_plan_comm *pc, int coll, int phase, int peer, int ch,
                                    int send) {
  if (peer < 0) return NULL;
  if (phase >= 0) {
    int pipe = phase == KOLO_HIER_INTER_AR; /* 0: intra-host pipes, 1: inter-host ones */
    return send ? &pc->hier_send[pipe][ch] : &pc->hier_recv[pipe][ch];
  }
  if (kolo_coll_is_p2p(coll)) {
    size_t k = (size_t)peer * (size_t)pc->nchannels + (size_t)ch;
    return send ? &pc->p2p_send[k] : &pc->p2p_recv[k];
  }
  return send ? &pc->ring_send[ch] : &pc->ring_recv[ch];
}

/* The host copy of point-to-point end e (2 * peer index, + 1 to receive)
 * of multi-peer program p on channel ch; NULL when p does not use it. */
static const kolo_dev_conn *peer_end(const kolo_cuda_plan_comm *pc, const kolo_program *p, int ch, int e) {
  const kolo_peer *q = &p->peers[e / 2];
  if (!(e % 2 ? q->recvs : q->sends)) return NULL;
  size_t k = (size_t)q->rank * (size_t)pc->nchannels + (size_t)ch;
  return e % 2 ? &pc->p2p_recv[k] : &pc->p2p_send[k];
}

const kolo_dev_conn *kolo_cuda_plan_peer_end(const kolo_op *op, const kolo_cuda_plan_comm *pc, int ch, int e) {
  if (pc->programs[op->coll] == NULL) return NULL;
  const kolo_program *p = &pc->programs[op->coll][kolo_program_index(op->coll, op->arg, ch, pc->nrings)];
  return e >= 0 && e < 2 * p->npeers ? peer_end(pc, p, ch, e) : NULL;
}

/* 1 when ends a and b cut slices of one size under `protocol` (device and
 * net pipes of one comm have equal SIMPLE slots; net pipes have no LL
 * region, and comms with net pipes never use LL). */
static int slice_alike(const kolo_dev_conn *a, const kolo_dev_conn *b, int protocol) {
  return protocol == KOLO_PROTO_LL ? a->ll_slot_bytes == b->ll_slot_bytes : a->slot_bytes == b->slot_bytes;
}

/* A multi-peer task's ends: its table, after checking on the host copies
 * that every end it uses exists, leads to its peer and slices as the first
 * (which the kernel takes its slice size from); *first: that end.  -1 when
 * not. */
static int fill_peer_ends(const kolo_op *op, const kolo_cuda_plan_item *it, const kolo_cuda_plan_comm *pc,
                          const kolo_program *prog, kolo_dev_task *t, const kolo_dev_conn **first) {
  const int protocol = kolo_cuda_plan_protocol(op, pc);
  const kolo_dev_ends *tables = pc->end_tables[op->coll];
  *first = NULL;
  for (int e = 0; e < 2 * prog->npeers; e++) {
    const kolo_dev_conn *c = peer_end(pc, prog, it->channel, e);
    if (c == NULL) continue;
    if (c->step == NULL || c->peer != prog->peers[e / 2].rank) return -1;
    if (*first == NULL) *first = c;
    if (!slice_alike(c, *first, protocol)) return -1;
  }
  if (tables == NULL || *first == NULL) return -1;
  t->npeers = prog->npeers;
  t->ends = tables[(size_t)kolo_program_slot(op->coll, op->arg) * (size_t)pc->nchannels + (size_t)it->channel];
  return t->ends != NULL ? 0 : -1;
}

/* The signature words a task carries itself (kolo_dev_task: coll, sig_op;
 * count is geo.count; root and seq go into the batch, seq_fits). */
static void sign_task(const kolo_op *op, kolo_dev_task *t) {
  const kolo_call_sig sig = kolo_op_sig(op, op->seq);
  t->coll = sig.coll;
  t->sig_op = sig.op;
  t->seq_off = KOLO_DEV_SEQ_NONE;
}

/* Task t of op takes slot i of batch b: its root, and its collective
 * number as an offset from the batch's first (0 when it does not fit in
 * 16 bits: it starts a launch of its own). */
static int seq_fits(kolo_dev_batch *b, int i, const kolo_op *op, kolo_dev_task *t) {
  const kolo_call_sig sig = kolo_op_sig(op, op->seq);
  if (sig.seq == 0) return 1; /* send / recv: no collective number (KOLO_DEV_SEQ_NONE) */
  if (b->seq_base == 0) b->seq_base = sig.seq;
  const uint32_t off = sig.seq - b->seq_base;
  if (off >= KOLO_DEV_SEQ_NONE) return 0;
  b->root[i] = sig.root;
  t->seq_off = (uint16_t)off;
  return 1;
}

/* Task t, in its launch b, gets the part of the scratch of its block; -1
 * when the comm has none or a part is too small. */
static int place_scratch(const kolo_cuda_plan_comm *pc, kolo_dev_batch *b, const kolo_dev_task *t) {
  if (pc->scratch == NULL || kolo_geo_scratch_bytes(&t->geo) > pc->scratch_task_bytes) return -1;
  b->scratch = pc->scratch;
  b->scratch_task_bytes = pc->scratch_task_bytes;
  return 0;
}

/* Fills one task (*prog: its program); -1 when a program or connector end
 * is missing. */
static int fill_task(const kolo_op *op, const kolo_cuda_plan_item *it, const kolo_cuda_plan_comm *pc,
                     kolo_dev_task *t, const kolo_program **progp) {
  const kolo_step *steps;
  const kolo_program *prog = program_for(op, it, pc, &steps);
  *progp = prog;
  if (prog == NULL || steps == NULL || prog->nsteps <= 0) return -1;
  memset(t, 0, sizeof *t);
  t->steps = steps;
  t->nsteps = prog->nsteps;
  t->in_blocked = prog->in_blocked;
  t->out_blocked = prog->out_blocked;
  size_t slot_bytes = kolo_on_p2p_pipes(op->coll, prog) ? pc->p2p_slot_bytes : pc->slot_bytes;
  t->geo = kolo_op_geometry(op, prog, pc->nranks, it->nch, slot_bytes, pc->nslots, 0);
  t->in = (char *)(uintptr_t)op->sendbuff;
  t->out = (char *)op->recvbuff;
  t->type = (int16_t)op->type;
  t->op = (int16_t)(op->premul == KOLO_PREMUL_VALUE     ? KOLO_DEV_OP_PREMUL
                    : op->premul == KOLO_PREMUL_POINTER ? KOLO_DEV_OP_PREMUL_PTR
                                                        : (int)op->op);
  t->scalar = op->scalar;
  t->div = op->op == koloAvg ? pc->nranks : 1;
  t->channel = (int16_t)it->channel;
  sign_task(op, t);
  const kolo_dev_conn *s = end_for(pc, op->coll, it->phase, prog->send_peer, it->channel, 1);
  const kolo_dev_conn *r = end_for(pc, op->coll, it->phase, prog->recv_peer, it->channel, 0);
  if ((s && (s->step == NULL || s->peer != prog->send_peer)) ||
      (r && (r->step == NULL || r->peer != prog->recv_peer)))
    return -1;
  t->has_send = s != NULL;
  t->has_recv = r != NULL;
  if (s) t->send = *s;
  if (r) t->recv = *r;
  const kolo_dev_conn *first = NULL;
  if (prog->npeers > 0 && fill_peer_ends(op, it, pc, prog, t, &first) != 0) return -1;
  /* An LL slice carries half an LL slot, not a SIMPLE slot: its chunks are
   * cut from that (half the slots' worth, as SIMPLE's).  Cut from SIMPLE's
   * slots, a step of LL slices outnumbered the slots, and a ring then hangs:
   * every rank waits for send credit before it receives (found on the CUDA
   * model: reduce-scatter of 3 ranks, 64 KiB per rank). */
  const kolo_dev_conn *e = s ? s : r ? r : first;
  if (e && kolo_cuda_plan_protocol(op, pc) == KOLO_PROTO_LL)
    t->geo = kolo_op_geometry(op, prog, pc->nranks, it->nch, kolo_ll_slice_bytes(e->ll_slot_bytes), pc->nslots,
                              0);
  return 0;
}

static int same_key_but_dir(const kolo_cuda_plan_item *a, const kolo_cuda_plan_item *b) {
  return memcmp(a->key, b->key, 7 * sizeof a->key[0]) == 0;
}

/* 1 when single-peer task u uses end `step`. */
static int has_end(const kolo_dev_task *u, const uint32_t *step) {
  return step != NULL && ((u->has_send && u->send.step == step) || (u->has_recv && u->recv.step == step));
}

/* 1 when single-peer task u uses one of the ends of multi-peer task t
 * (program p). */
static int touches(const kolo_cuda_plan_comm *pc, const kolo_dev_task *u, const kolo_dev_task *t,
                   const kolo_program *p) {
  for (int e = 0; e < 2 * p->npeers; e++) {
    const kolo_dev_conn *c = peer_end(pc, p, t->channel, e);
    if (c != NULL && has_end(u, c->step)) return 1;
  }
  return 0;
}

/* 1 when tasks t and u (programs tp, up) may use one connector end: the
 * same end of single-peer tasks; for a multi-peer task, any other
 * multi-peer task of its channel, or a single-peer one with an end of its. */
static int may_share(const kolo_cuda_plan_comm *pc, const kolo_dev_task *t, const kolo_program *tp,
                     const kolo_dev_task *u, const kolo_program *up) {
  if (t->npeers == 0 && u->npeers == 0)
    return has_end(u, t->has_send ? t->send.step : NULL) || has_end(u, t->has_recv ? t->recv.step : NULL);
  if (t->channel != u->channel) return 0; /* point-to-point ends are per channel */
  if (t->npeers > 0 && u->npeers > 0) return 1;
  return t->npeers > 0 ? touches(pc, u, t, tp) : touches(pc, t, u, up);
}

/* 1 when task t (program tp) may join batch b, whose tasks' programs are
 * progs (type, protocol, ends). */
static int fits(const kolo_cuda_plan_comm *pc, const kolo_dev_batch *b, const kolo_program *const *progs,
                const kolo_dev_task *t, const kolo_program *tp, int protocol) {
  if (b->ntasks == 0) return 1;
  if (t->type != b->tasks[0].type || protocol != b->protocol) return 0;
  for (int i = 0; i < b->ntasks; i++)
    if (may_share(pc, t, tp, &b->tasks[i], progs[i])) return 0;
  return 1;
}

int kolo_cuda_plan_next(const kolo_op *ops, const kolo_cuda_plan_comm *pc,
                        const kolo_cuda_plan_item *items, int nitems, int *next,
                        kolo_dev_batch *batch) {
  int i = *next, start = *next;
  if (i >= nitems) return 0;
  const int cap = pc->max_tasks > 0 && pc->max_tasks < KOLO_DEV_MAX_TASKS ? pc->max_tasks : KOLO_DEV_MAX_TASKS;
  batch->ntasks = 0;
  batch->protocol = KOLO_PROTO_SIMPLE;
  batch->timeout_ns = pc->timeout_ns;
  batch->stall_ms = pc->stall_ms;
  batch->launch = 0; /* the launcher numbers it */
  batch->abort = pc->abort;
  batch->status = pc->status;
  batch->rank = pc->rank;
  batch->seq_base = 0;
  batch->scratch = NULL;
  batch->scratch_task_bytes = 0;
  memset(batch->root, 0, sizeof batch->root);
  const kolo_program *progs[KOLO_DEV_MAX_TASKS]; /* of the batch's tasks */
  while (i < nitems) {
    /* a send to oneself and its recv (equal keys but the direction) go
     * together: split apart, the first launch would wait for the second */
    int unit = (i + 1 < nitems && same_key_but_dir(&items[i], &items[i + 1])) ? 2 : 1;
    if (batch->ntasks > 0 && batch->ntasks + unit > cap) break; /* (a pair goes whole into an empty launch) */
    /* the next phase of a hierarchical all-reduce reads what the one before
     * wrote: it starts a launch (the op's items are consecutive, by key) */
    if (i > start && items[i].phase > 0 && items[i - 1].op == items[i].op && items[i - 1].phase != items[i].phase)
      break;
    kolo_dev_task t[2];
    const kolo_program *tp[2];
    int proto = 0, ok = 1;
    for (int u = 0; u < unit; u++) {
      const kolo_op *op = &ops[items[i + u].op];
      if (fill_task(op, &items[i + u], pc, &t[u], &tp[u]) != 0) {
        *next = i;
        return -1;
      }
      proto = kolo_cuda_plan_protocol(op, pc);
      if (batch->ntasks == 0 && u == 0) batch->protocol = proto;
      ok = ok && fits(pc, batch, progs, &t[u], tp[u], proto);
    }
    if (unit == 2) /* the pair itself: same type and protocol, two different ends */
      ok = ok && t[1].type == t[0].type;
    if (!ok && batch->ntasks > 0) break; /* (an empty batch takes any unit) */
    for (int u = 0; u < unit; u++)
      if (!seq_fits(batch, batch->ntasks + u, &ops[items[i + u].op], &t[u])) {
        *next = i; /* a collective numbered 64 Ki calls after the launch's first: the next launch */
        return 1;
      }
    for (int u = 0; u < unit; u++) {
      if (kolo_program_uses_scratch(tp[u]) && place_scratch(pc, batch, &t[u]) != 0) {
        *next = i;
        return -1;
      }
      progs[batch->ntasks] = tp[u];
      batch->tasks[batch->ntasks++] = t[u];
    }
    i += unit;
  }
  *next = i;
  return 1;
}

/* The kernel's loop over rounds and steps, counted on the host: slices
 * through each end into counts (single-peer: [0] send, [1] receive;
 * multi-peer: [2 * to] and [2 * from + 1]), sliced as `sizer`. */
static void count_slices(const kolo_program *prog, const kolo_dev_task *t, const kolo_dev_conn *sizer, int protocol,
                         uint64_t *counts) {
  const kolo_geometry *g = &t->geo;
  const size_t esz = g->elem_size;
  const size_t slot_elems = protocol == KOLO_PROTO_LL ? kolo_ll_slice_elems(sizer->ll_slot_bytes, esz)
                                                      : sizer->slot_bytes / esz;
  if (slot_elems == 0) return; /* the launcher refuses such a batch */
  const int multi = prog->npeers > 0;
  for (size_t base = 0, rce; (rce = kolo_geo_round_chunk(g, base)) != 0; base += rce * kolo_geo_parts(g)) {
    for (int s = 0; s < prog->nsteps; s++) {
      const kolo_step *st = &prog->steps[s];
      const int rv = kolo_step_recvs(st->op), sd = kolo_step_sends(st->op);
      if (!rv && !sd) continue; /* moves nothing through a connector */
      size_t soff, doff, ns, nd;
      kolo_geo_buf_range(g, base, rce, t->channel, st->src_buf, st->src_chunk, t->in_blocked, t->out_blocked, &soff,
                         &ns);
      kolo_geo_buf_range(g, base, rce, t->channel, st->dst_buf, st->dst_chunk, t->in_blocked, t->out_blocked, &doff,
                         &nd);
      const size_t n = ns < nd ? ns : nd;
      const uint64_t slices = (n + slot_elems - 1) / slot_elems;
      if (sd) counts[multi ? 2 * (size_t)st->to : 0] += slices;
      if (rv) counts[multi ? 2 * (size_t)st->from + 1 : 1] += slices;
    }
  }
}

void kolo_cuda_plan_slices(const kolo_op *op, const kolo_cuda_plan_comm *pc, const kolo_cuda_plan_item *it,
                           const kolo_dev_task *t, int protocol, uint64_t *sends, uint64_t *recvs) {
  uint64_t counts[2] = {0, 0};
  const kolo_dev_conn *sizer = t->has_send ? &t->send : t->has_recv ? &t->recv : NULL;
  const kolo_step *steps;
  const kolo_program *prog = program_for(op, it, pc, &steps);
  if (sizer != NULL && prog != NULL && prog->npeers == 0) count_slices(prog, t, sizer, protocol, counts);
  *sends = counts[0];
  *recvs = counts[1];
}

void kolo_cuda_plan_peer_slices(const kolo_op *op, const kolo_cuda_plan_comm *pc, const kolo_cuda_plan_item *it,
                                const kolo_dev_task *t, int protocol, uint64_t *counts) {
  const kolo_step *steps;
  const kolo_program *prog = program_for(op, it, pc, &steps);
  if (prog == NULL || prog->npeers == 0) return;
  for (int e = 0; e < 2 * prog->npeers; e++) counts[e] = 0;
  const kolo_dev_conn *sizer = NULL;
  for (int e = 0; e < 2 * prog->npeers && sizer == NULL; e++) sizer = peer_end(pc, prog, it->channel, e);
  if (sizer != NULL) count_slices(prog, t, sizer, protocol, counts);
}
