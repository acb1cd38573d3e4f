/* check_shape.c - is every program well formed, before anything runs:
 * ops, buffers, chunk indices, peers and one layout for all (check.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ring/check_impl.h"
#include "ring/step_names.h"

typedef struct {
  const kolo_check_spec *s;
  int rank, ch, step; /* step -1: the program as a whole */
  char *why;
  size_t len;
} shape_ctx;

static int bad(const shape_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const shape_ctx *c, const char *fmt, ...) {
  char coll[96];
  kc_coll_text(c->s, coll, sizeof coll);
  int k = snprintf(c->why, c->len, "%s: rank %d channel %d", coll, c->rank, c->ch);
  if (c->step >= 0 && k >= 0 && (size_t)k < c->len) {
    const kolo_program *p = c->s->progs[(size_t)c->ch * (size_t)c->s->nranks + (size_t)c->rank];
    const char *name = kolo_step_op_name(p->steps[c->step].op);
    k += snprintf(c->why + k, c->len - (size_t)k, " step %d (%s)", c->step, name ? name : "no op");
  }
  if (k >= 0 && (size_t)k + 2 < c->len) {
    strcpy(c->why + k, ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + k + 2, c->len - (size_t)k - 2, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static const char *buf_name(int b) { return b == KOLO_BUF_IN ? "IN" : b == KOLO_BUF_OUT ? "OUT" : "SCRATCH"; }

/* A buffer and chunk a step uses: a buffer id, a chunk index in 0..n-1
 * (scratch: 0..KOLO_SCRATCH_CHUNKS-1). */
static int check_side(const shape_ctx *c, const char *role, int buf, int chunk) {
  if (buf < 0 || buf >= KOLO_BUF_NUM)
    return bad(c, "its %s buffer is %d, none of IN (0), OUT (1) and SCRATCH (2)", role, buf);
  int nchunks = buf == KOLO_BUF_SCRATCH ? KOLO_SCRATCH_CHUNKS : c->s->nranks;
  if (chunk < 0 || chunk >= nchunks)
    return bad(c, "its %s chunk %s[%d] is outside 0..%d", role, buf_name(buf), chunk, nchunks - 1);
  return 0;
}

/* Its peer in direction `send` is a rank (0..n-1). */
static int check_peer(const shape_ctx *c, const kolo_program *p, const kolo_step *st, int send) {
  int peer = send ? kolo_step_send_rank(p, st) : kolo_step_recv_rank(p, st);
  if (peer >= 0 && peer < c->s->nranks) return 0;
  if (p->npeers > 0 && (send ? st->to : st->from) >= p->npeers)
    return bad(c, "it %s peer %d of a program with %d peers", send ? "sends to" : "receives from",
               send ? st->to : st->from, p->npeers);
  return bad(c, "it %s rank %d, which is no rank of %d", send ? "sends to" : "receives from", peer, c->s->nranks);
}

static int check_step(const shape_ctx *c, const kolo_program *p, const kolo_step *st) {
  int op = st->op;
  if (kolo_step_op_name(op) == NULL) return bad(c, "op %d is no step op", op);
  int rs = kolo_step_reads_src(op), wd = kolo_step_writes_dst(op);
  if (!rs && !wd) return bad(c, "it neither reads nor writes a buffer");
  if (rs && check_side(c, "src", st->src_buf, st->src_chunk) < 0) return -1;
  if (wd && check_side(c, "dst", st->dst_buf, st->dst_chunk) < 0) return -1;
  /* the executor moves min(src size, dst size) elements, whatever the op */
  if (p->layout == KOLO_LAYOUT_RING && st->src_chunk != st->dst_chunk)
    return bad(c, "in the ring layout its src chunk %d and dst chunk %d differ in size in a round's last "
               "chunks: give both one index", st->src_chunk, st->dst_chunk);
  if (kolo_step_sends(op) && check_peer(c, p, st, 1) < 0) return -1;
  if (kolo_step_recvs(op) && check_peer(c, p, st, 0) < 0) return -1;
  return 0;
}

static int check_header(const shape_ctx *c, const kolo_program *p) {
  if (p == NULL) return bad(c, "no program");
  if (p->nsteps < 0 || (p->nsteps > 0 && p->steps == NULL)) return bad(c, "%d steps and no step list", p->nsteps);
  if (p->layout != KOLO_LAYOUT_RING && p->layout != KOLO_LAYOUT_FLAT) return bad(c, "layout %d is neither ring nor flat", p->layout);
  if (p->npeers < 0 || p->npeers > KOLO_PROGRAM_MAX_PEERS || (p->npeers > 0 && p->peers == NULL))
    return bad(c, "%d peers and no peer list", p->npeers);
  for (int i = 0; i < p->npeers; i++)
    if (p->peers[i].rank < 0 || p->peers[i].rank >= c->s->nranks)
      return bad(c, "its peer %d is rank %d, which is no rank of %d", i, p->peers[i].rank, c->s->nranks);
  return 0;
}

/* The first program with steps, in channel-major order; -1: none. */
static int first_with_steps(const kolo_check_spec *s) {
  for (int i = 0; i < s->nchannels * s->nranks; i++)
    if (s->progs[i] != NULL && s->progs[i]->nsteps > 0) return i;
  return -1;
}

int kc_layout(const kolo_check_spec *s) {
  int i = first_with_steps(s);
  return i < 0 ? KOLO_LAYOUT_FLAT : s->progs[i]->layout;
}

static const char *layout_name(int layout) { return layout == KOLO_LAYOUT_RING ? "ring" : "flat"; }

static int check_program(shape_ctx *c, int first) {
  int layout = first < 0 ? KOLO_LAYOUT_FLAT : c->s->progs[first]->layout;
  const kolo_program *p = c->s->progs[(size_t)c->ch * (size_t)c->s->nranks + (size_t)c->rank];
  c->step = -1;
  if (check_header(c, p) < 0) return -1;
  if (p->nsteps > 0 && p->layout != layout)
    return bad(c, "its layout is %s, rank %d's (channel %d) %s: a round's chunks would not line up",
               layout_name(p->layout), first % c->s->nranks, first / c->s->nranks, layout_name(layout));
  for (c->step = 0; c->step < p->nsteps; c->step++)
    if (check_step(c, p, &p->steps[c->step]) < 0) return -1;
  return 0;
}

int kc_check_shape(const kolo_check_spec *s, char *why, size_t len) {
  shape_ctx c = {s, 0, 0, -1, why, len};
  int first = first_with_steps(s);
  for (c.ch = 0; c.ch < s->nchannels; c.ch++)
    for (c.rank = 0; c.rank < s->nranks; c.rank++)
      if (check_program(&c, first) < 0) return -1;
  return 0;
}
