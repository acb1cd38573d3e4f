/* check_run.c - the checker's symbolic run of one channel (check.h): each
 * rank's program, a step at a time, over connectors that hold
 * KOLO_CHECK_CONN_CHUNKS chunks, until every rank is done or none can
 * move (a deadlock). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/check_impl.h"
#include "ring/step_names.h"

#define E KOLO_CHECK_ELEMS
#define CAP KOLO_CHECK_CONN_CHUNKS

/* A connector: chunks in flight, oldest at head, with the step that sent
 * each and its chunk position (ring layout; -1 in the flat one, where every
 * chunk of a round has one size). */
struct kc_fifo {
  int head, n;
  int step[CAP], key[CAP];
  kc_word vals[]; /* CAP chunks of E values */
};

static kc_fifo *fifo_of(kc_state *st, int from, int to) {
  kc_fifo **f = &st->fifos[(size_t)from * (size_t)st->n + (size_t)to];
  if (*f == NULL) *f = calloc(1, sizeof **f + (size_t)CAP * E * (size_t)st->W * sizeof(kc_word));
  return *f;
}

static kc_word *slot_vals(kc_fifo *f, int k, int W) { return f->vals + (size_t)((f->head + k) % CAP) * E * (size_t)W; }

void kc_fifos_free(kc_state *st) {
  for (size_t i = 0; st->fifos && i < (size_t)st->n * (size_t)st->n; i++) {
    free(st->fifos[i]);
    st->fifos[i] = NULL;
  }
}

static int step_key(const kc_state *st, const kolo_step *s) {
  if (st->layout != KOLO_LAYOUT_RING) return -1;
  return kolo_step_reads_src(s->op) ? s->src_chunk : s->dst_chunk;
}

/* A step's access that the collective does not allow. */
static int access_fail(kc_state *st, int r, const char *what, int buf, int chunk, size_t len) {
  const char *name = buf == KOLO_BUF_IN ? "IN" : buf == KOLO_BUF_OUT ? "OUT" : "SCRATCH";
  char step[160];
  kc_step_text(st, r, st->pc[r], step, sizeof step);
  if (len == 0) return kc_fail(st, "%s %s %s, which this collective does not give rank %d", step, what, name, r);
  return kc_fail(st, "%s %s %s[%d], beyond the %zu block(s) of %zu elements rank %d's %s holds", step, what, name,
                 chunk, len / st->count, st->count, r, name);
}

/* Scratch chunk `chunk` of rank r, after its arena: read only once this
 * round wrote it. */
static int locate_scratch(kc_state *st, int r, int chunk, int write, size_t *at) {
  *at = st->bufs[r].arena_len + (size_t)chunk * E;
  if (write) st->scratch_set[r] |= 1u << chunk;
  if (st->scratch_set[r] & (1u << chunk)) return 0;
  char step[160];
  kc_step_text(st, r, st->pc[r], step, sizeof step);
  return kc_fail(st, "%s reads SCRATCH[%d] before any step of the round wrote it (scratch keeps nothing from one "
                 "round to the next)", step, chunk);
}

/* Where chunk `chunk` of rank r's buffer `buf` starts in its arena; -1
 * when the step may not touch it there. */
static int locate(kc_state *st, int r, int buf, int chunk, int write, size_t *at) {
  if (buf == KOLO_BUF_SCRATCH) return locate_scratch(st, r, chunk, write, at);
  const kolo_program *p = kc_prog(st, r);
  const kc_bufs *b = &st->bufs[r];
  size_t off, m, len = buf == KOLO_BUF_IN ? b->in_len : b->out_len;
  kolo_geo_chunk_range(&st->geo, 0, E, 0, chunk, buf == KOLO_BUF_IN ? p->in_blocked : p->out_blocked, &off, &m);
  if (write && buf == KOLO_BUF_IN) {
    char step[160];
    kc_step_text(st, r, st->pc[r], step, sizeof step);
    return kc_fail(st, "%s writes IN, which no step may (inputs are read-only)", step);
  }
  if (len == 0 || off + m > len) return access_fail(st, r, write ? "writes" : "reads", buf, chunk, len);
  *at = (buf == KOLO_BUF_IN ? b->in_off : b->out_off) + off;
  return 0;
}

/* The received chunk must be the one the step expects, size for size. */
static int check_key(kc_state *st, int r, kc_fifo *f, int from, const kolo_step *s) {
  int key = step_key(st, s);
  if (f->key[f->head] == key) return 0;
  char mine[160], theirs[160];
  kc_step_text(st, r, st->pc[r], mine, sizeof mine);
  kc_step_text(st, from, f->step[f->head], theirs, sizeof theirs);
  return kc_fail(st, "%s takes as chunk %d what %s sent as chunk %d: in the ring layout they differ in size in "
                 "a round's last chunks, and the pipe's two ends fall out of step", mine, key, theirs, f->key[f->head]);
}

/* The values the step produces, in res (E values); rcv: what it received,
 * or what its dst held for a step that accumulates into it. */
static void compute(kc_state *st, const kolo_step *s, const kc_word *src, const kc_word *rcv, kc_word *res) {
  int W = st->W, op = s->op;
  for (int e = 0; e < E; e++) {
    kc_word *v = res + (size_t)e * (size_t)W;
    if ((kolo_step_recvs(op) || kolo_step_accumulates(op)) && kolo_step_reduces(op)) kc_val_combine(v, rcv + (size_t)e * W, src + (size_t)e * W, W);
    else memcpy(v, (kolo_step_recvs(op) ? rcv : src) + (size_t)e * W, (size_t)W * sizeof *v);
    if ((s->flags & KOLO_STEP_FINAL) && kolo_step_post_applies(op)) kc_val_post(v);
  }
}

/* The step's connectors (NULL where it does not use one); -2: out of memory. */
static int ends_of(kc_state *st, int r, const kolo_step *s, kc_fifo **in, kc_fifo **out) {
  const kolo_program *p = kc_prog(st, r);
  *in = kolo_step_recvs(s->op) ? fifo_of(st, kolo_step_recv_rank(p, s), r) : NULL;
  *out = kolo_step_sends(s->op) ? fifo_of(st, r, kolo_step_send_rank(p, s)) : NULL;
  return (kolo_step_recvs(s->op) && *in == NULL) || (kolo_step_sends(s->op) && *out == NULL) ? -2 : 0;
}

/* Moves the received chunk into rcv and the result into the send pipe. */
static void move(kc_state *st, int r, const kolo_step *s, kc_fifo *in, kc_fifo *out) {
  size_t bytes = (size_t)E * (size_t)st->W * sizeof(kc_word);
  kc_word *src = st->tmp, *rcv = src + (size_t)E * st->W, *res = rcv + (size_t)E * st->W;
  if (in) {
    memcpy(rcv, slot_vals(in, 0, st->W), bytes);
    in->head = (in->head + 1) % CAP;
    in->n--;
  }
  compute(st, s, src, rcv, res);
  if (out) {
    int k = (out->head + out->n) % CAP;
    memcpy(out->vals + (size_t)k * E * (size_t)st->W, res, bytes);
    out->step[k] = st->pc[r];
    out->key[k] = step_key(st, s);
    out->n++;
  }
}

/* Rank r's next step: 1 done, 0 blocked, -1 failed, -2 out of memory. */
static int exec_step(kc_state *st, int r) {
  const kolo_program *p = kc_prog(st, r);
  const kolo_step *s = &p->steps[st->pc[r]];
  kc_fifo *in, *out;
  size_t sat = 0, dat = 0;
  if (ends_of(st, r, s, &in, &out) < 0) return -2;
  if ((in && in->n == 0) || (out && out->n == CAP && out != in)) return 0;
  if (in && check_key(st, r, in, kolo_step_recv_rank(p, s), s) < 0) return -1;
  if (kolo_step_reads_src(s->op) && locate(st, r, s->src_buf, s->src_chunk, 0, &sat) < 0) return -1;
  int acc = kolo_step_accumulates(s->op);
  if (acc && locate(st, r, s->dst_buf, s->dst_chunk, 0, &dat) < 0) return -1;
  if (kolo_step_writes_dst(s->op) && locate(st, r, s->dst_buf, s->dst_chunk, 1, &dat) < 0) return -1;
  for (int e = 0; kolo_step_reads_src(s->op) && e < E; e++)
    kc_val_read(st->tmp + (size_t)e * st->W, st->arena[r] + (sat + (size_t)e) * (size_t)st->W, st->W);
  for (int e = 0; acc && e < E; e++)
    kc_val_read(st->tmp + (size_t)(E + e) * st->W, st->arena[r] + (dat + (size_t)e) * (size_t)st->W, st->W);
  move(st, r, s, in, out);
  kc_word *res = st->tmp + 2 * (size_t)E * st->W;
  if (kolo_step_writes_dst(s->op))
    memcpy(st->arena[r] + dat * (size_t)st->W, res, (size_t)E * (size_t)st->W * sizeof *res);
  st->pc[r]++;
  return 1;
}

/* What blocked rank r waits for, appended to out. */
static void waits_text(const kc_state *st, int r, char *out, size_t len) {
  const kolo_program *p = kc_prog(st, r);
  const kolo_step *s = &p->steps[st->pc[r]];
  size_t at = strlen(out);
  char step[160];
  kc_step_text(st, r, st->pc[r], step, sizeof step);
  int from = kolo_step_recvs(s->op) ? kolo_step_recv_rank(p, s) : -1;
  const kc_fifo *in = from >= 0 ? st->fifos[(size_t)from * (size_t)st->n + (size_t)r] : NULL;
  if (from >= 0 && (in == NULL || in->n == 0)) {
    int done = st->pc[from] == kc_prog(st, from)->nsteps;
    if (done) snprintf(out + at, len - at, "%s waits for a send from rank %d, which has finished", step, from);
    else snprintf(out + at, len - at, "%s waits for rank %d (at its step %d)", step, from, st->pc[from]);
  } else {
    snprintf(out + at, len - at, "%s waits for room: rank %d has not taken the %d chunks before", step,
             kolo_step_send_rank(p, s), CAP);
  }
}

static int deadlock(kc_state *st) {
  char text[1024] = "";
  int shown = 0, blocked = 0;
  for (int r = 0; r < st->n; r++) {
    if (st->pc[r] == kc_prog(st, r)->nsteps) continue;
    if (blocked++ >= 4) continue;
    if (shown++) strcat(text, "; ");
    waits_text(st, r, text, sizeof text - 64);
  }
  size_t at = strlen(text);
  if (blocked > shown) snprintf(text + at, sizeof text - at, "; and %d more rank(s)", blocked - shown);
  at = strlen(text);
  if (blocked < st->n) snprintf(text + at, sizeof text - at, "; every other rank has finished");
  return kc_fail(st, "deadlock: %s", text);
}

/* Chunks nobody received: more sent from a to b per round than received. */
static int leftovers(kc_state *st) {
  for (int a = 0; a < st->n; a++)
    for (int b = 0; b < st->n; b++) {
      kc_fifo *f = st->fifos[(size_t)a * (size_t)st->n + (size_t)b];
      if (f == NULL || f->n == 0) continue;
      char step[160];
      kc_step_text(st, a, f->step[f->head], step, sizeof step);
      return kc_fail(st, "%s sends a chunk rank %d never receives: rank %d sends rank %d more chunks per round "
                     "than rank %d receives from it", step, b, a, b, b);
    }
  return 0;
}

int kc_run(kc_state *st) {
  for (;;) {
    int moved = 0, left = 0;
    for (int r = 0; r < st->n; r++) {
      int x = 1;
      while (st->pc[r] < kc_prog(st, r)->nsteps && (x = exec_step(st, r)) > 0) moved = 1;
      if (x < 0) return x;
      left += st->pc[r] < kc_prog(st, r)->nsteps;
    }
    if (left == 0) return leftovers(st);
    if (!moved) return deadlock(st);
  }
}
