/* sched_step.c - the step lines of a schedule file and the programs they
 * make (sched_impl.h; the format is docs/schedule-format.md). */
#include <stdlib.h>
#include <string.h>

#include "ring/sched_impl.h"
#include "ring/schedule.h"
#include "ring/step_names.h"

#define WORD(w) (int)((w)->n > 64 ? 64 : (w)->n), (w)->p

/* "in", "out", "scratch", "in[3]", "out[12]", "scratch[1]": the buffer
 * and chunk (0 when not said). */
static int parse_buffer(sp_state *s, const sp_word *w, int *buf, int *chunk) {
  size_t k = 0;
  if (w->n >= 2 && memcmp(w->p, "in", 2) == 0) k = 2, *buf = KOLO_BUF_IN;
  else if (w->n >= 3 && memcmp(w->p, "out", 3) == 0) k = 3, *buf = KOLO_BUF_OUT;
  else if (w->n >= 7 && memcmp(w->p, "scratch", 7) == 0) k = 7, *buf = KOLO_BUF_SCRATCH;
  *chunk = 0;
  if (k > 0 && w->n == k) return 0;
  if (k == 0 || w->n < k + 3 || w->p[k] != '[' || w->p[w->n - 1] != ']')
    return sp_fail(s, "\"%.*s\" is no buffer: in, out, scratch, or one of them with [CHUNK]", WORD(w));
  sp_word idx = {w->p + k + 1, w->n - k - 2};
  int last = *buf == KOLO_BUF_SCRATCH ? KOLO_SCRATCH_CHUNKS - 1 : s->f->nranks - 1;
  return sp_number(s, &idx, *buf == KOLO_BUF_SCRATCH ? "the scratch chunk" : "the chunk", 0, last, chunk);
}

/* The index of rank among the program's peers, added when new; -1 when
 * out of memory. */
static int peer_index(sp_state *s, int rank) {
  for (int i = 0; i < s->npeers; i++)
    if (s->peers[i] == rank) return i;
  if (s->npeers == s->peers_cap) {
    int cap = s->peers_cap ? 2 * s->peers_cap : 8;
    int32_t *p = realloc(s->peers, (size_t)cap * sizeof *p);
    if (p == NULL) return -1;
    s->peers = p;
    s->peers_cap = cap;
  }
  s->peers[s->npeers] = rank;
  return s->npeers++;
}

typedef struct {
  int from, to, final, src_first;
} step_extras;

/* `from R`, `to R`, `final` and `srcFirst` after the buffers, each at most
 * once. */
static int parse_extras(sp_state *s, const sp_word *w, int n, step_extras *x) {
  *x = (step_extras){-1, -1, 0, 0};
  for (int i = 0; i < n; i++) {
    int is_from = sp_is(&w[i], "from", 0), is_to = sp_is(&w[i], "to", 0);
    if (sp_is(&w[i], "final", 0) && !x->final) {
      x->final = 1;
    } else if (sp_is(&w[i], "srcFirst", 0) && !x->src_first) {
      x->src_first = 1;
    } else if ((is_from && x->from < 0) || (is_to && x->to < 0)) {
      if (i + 1 == n) return sp_fail(s, "\"%.*s\" without a rank after it", WORD(&w[i]));
      if (sp_number(s, &w[i + 1], "the peer", 0, s->f->nranks - 1, is_from ? &x->from : &x->to) < 0) return -1;
      i++;
    } else {
      return sp_fail(s, "\"%.*s\" is not one of from RANK, to RANK, final and srcFirst (each once), which may "
                     "follow the buffers", WORD(&w[i]));
    }
  }
  return 0;
}

/* The op's roles agree with what the line says. */
static int check_roles(sp_state *s, int op, const step_extras *x) {
  const char *name = kolo_step_op_name(op);
  if (kolo_step_recvs(op) != (x->from >= 0))
    return sp_fail(s, x->from < 0 ? "%s receives: say from which rank (from RANK)" : "%s does not receive: no `from`", name);
  if (kolo_step_sends(op) != (x->to >= 0))
    return sp_fail(s, x->to < 0 ? "%s sends: say to which rank (to RANK)" : "%s does not send: no `to`", name);
  if (x->final && !kolo_step_post_applies(op))
    return sp_fail(s, "`final` does nothing on %s: the post-op is applied by copy, reduce, recvReduceCopy and "
                   "recvReduceCopySend", name);
  if (x->src_first && !kolo_step_reduces(op))
    return sp_fail(s, "`srcFirst` does nothing on %s: it orders the two operands of a step that reduces", name);
  return 0;
}

static int append(sp_state *s, const kolo_step *st) {
  if (s->nsteps == KOLO_SCHED_MAX_STEPS) return sp_fail(s, "more than %d steps in one program", KOLO_SCHED_MAX_STEPS);
  if (s->nsteps == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    kolo_step *p = realloc(s->steps, (size_t)cap * sizeof *p);
    if (p == NULL) return -2;
    s->steps = p;
    s->cap = cap;
  }
  s->steps[s->nsteps++] = *st;
  return 0;
}

int sp_step(sp_state *s, const sp_word *w, int n) {
  int op = kolo_step_op_parse(w[0].p, w[0].n);
  if (op < 0) return sp_fail(s, "\"%.*s\" is neither a directive nor a step op (send, recv, copy, copySend, ...)", WORD(&w[0]));
  if (s->rank < 0) return sp_fail(s, "a step before any `rank` line: whose program is it?");
  int rs = kolo_step_reads_src(op), wd = kolo_step_writes_dst(op), nbuf = rs + wd, b[2] = {0, 0}, c[2] = {0, 0};
  if (nbuf == 0) return sp_fail(s, "%s touches no buffer, which a schedule file cannot say", kolo_step_op_name(op));
  for (int i = 0; i < nbuf; i++) {
    const sp_word *bw = &w[1 + i];
    if (i + 1 >= n || sp_is(bw, "from", 0) || sp_is(bw, "to", 0) || sp_is(bw, "final", 0) || sp_is(bw, "srcFirst", 0))
      return sp_fail(s, "%s takes %s", kolo_step_op_name(op),
                     nbuf == 2 ? "2 buffers: src then dst" : rs ? "1 buffer: src" : "1 buffer: dst");
    if (parse_buffer(s, bw, &b[i], &c[i]) < 0) return -1;
  }
  step_extras x;
  if (parse_extras(s, w + 1 + nbuf, n - 1 - nbuf, &x) < 0 || check_roles(s, op, &x) < 0) return -1;
  /* one side used: the other names the same chunk (the executor sizes a
   * step by both) */
  const int flags = (x.final ? KOLO_STEP_FINAL : 0) | (x.src_first ? KOLO_STEP_SRC_FIRST : 0);
  kolo_step st = {(uint8_t)op, (uint8_t)flags, (uint8_t)b[0], (uint8_t)b[nbuf - 1], c[0], c[nbuf - 1], 0, 0};
  int to = x.to >= 0 ? peer_index(s, x.to) : 0, from = x.from >= 0 ? peer_index(s, x.from) : 0;
  if (to < 0 || from < 0) return -2;
  st.to = (uint16_t)to;
  st.from = (uint16_t)from;
  return append(s, &st);
}

/* Which buffers of rank's program hold one block per rank (program.h),
 * after the collective: never something the file says. */
static void set_blocked(kolo_program *p, int coll, int is_root) {
  p->in_blocked = coll == KOLO_COLL_REDUCE_SCATTER || coll == KOLO_COLL_ALL_TO_ALL ||
                  (coll == KOLO_COLL_SCATTER && is_root);
  p->out_blocked = coll == KOLO_COLL_ALL_GATHER || coll == KOLO_COLL_ALL_TO_ALL ||
                   (coll == KOLO_COLL_GATHER && is_root);
}

void sp_free_program(sp_state *s) {
  free(s->steps);
  free(s->peers);
  s->steps = NULL;
  s->peers = NULL;
  s->nsteps = s->cap = s->npeers = s->peers_cap = 0;
  s->rank = -1;
}

int sp_end_program(sp_state *s) {
  if (s->rank < 0) return 0;
  kolo_sched_section *sec = s->sec;
  kolo_program *p = &sec->progs[(size_t)s->ch * (size_t)s->f->nranks + (size_t)s->rank];
  if (kolo_program_alloc(p, s->nsteps > 0 ? s->nsteps : 1, sec->layout) != koloSuccess) return -2;
  p->nsteps = s->nsteps;
  if (s->nsteps > 0) memcpy(p->steps, s->steps, (size_t)s->nsteps * sizeof *s->steps);
  if (s->npeers > 0 && kolo_program_alloc_peers(p, s->npeers) != koloSuccess) return -2;
  for (int i = 0; i < s->npeers; i++) p->peers[i].rank = s->peers[i];
  kolo_program_index_peers(p);
  set_blocked(p, sec->coll, s->rank == sec->root);
  s->nsteps = s->npeers = 0;
  s->rank = -1;
  return 0;
}
