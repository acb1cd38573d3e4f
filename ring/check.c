/* check.c - the schedule checker's entry point (check.h): bounds, shape,
 * then each channel out of place and in place, and the comparison of
 * every output element with what it must hold. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/check_impl.h"
#include "ring/schedule.h"
#include "ring/step_names.h"

int kc_fail(kc_state *st, const char *fmt, ...) {
  char coll[96];
  kc_coll_text(st->spec, coll, sizeof coll);
  int k = snprintf(st->why, st->len, "%s", coll);
  if (k >= 0 && (size_t)k < st->len && st->spec->nchannels > 1)
    k += snprintf(st->why + k, st->len - (size_t)k, ", channel %d", st->ch);
  if (k >= 0 && (size_t)k < st->len && st->in_place) k += snprintf(st->why + k, st->len - (size_t)k, ", in place");
  if (k >= 0 && (size_t)k + 2 < st->len) {
    strcpy(st->why + k, ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->why + k + 2, st->len - (size_t)k - 2, fmt, ap);
    va_end(ap);
  }
  return -1;
}

void kc_step_text(const kc_state *st, int r, int i, char *out, size_t len) {
  const kolo_program *p = kc_prog(st, r);
  const kolo_step *s = &p->steps[i];
  const char *name = kolo_step_op_name(s->op);
  int k = snprintf(out, len, "rank %d step %d (%s", r, i, name ? name : "?");
  if (k >= 0 && (size_t)k < len && kolo_step_recvs(s->op))
    k += snprintf(out + k, len - (size_t)k, " from rank %d", kolo_step_recv_rank(p, s));
  if (k >= 0 && (size_t)k < len && kolo_step_sends(s->op))
    k += snprintf(out + k, len - (size_t)k, " to rank %d", kolo_step_send_rank(p, s));
  if (k >= 0 && (size_t)k < len) snprintf(out + k, len - (size_t)k, ")");
}

static koloResult_t refuse(const kolo_check_spec *s, char *why, size_t len, const char *what, long a, long b) {
  char coll[96];
  kc_coll_text(s, coll, sizeof coll);
  int k = snprintf(why, len, "%s: ", coll);
  if (k >= 0 && (size_t)k < len) snprintf(why + k, len - (size_t)k, what, a, b);
  return koloInvalidArgument;
}

static int rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER || coll == KOLO_COLL_SEND || coll == KOLO_COLL_RECV;
}

/* The spec's numbers are in bounds, and so is the work. */
static koloResult_t check_bounds(const kolo_check_spec *s, char *why, size_t len) {
  if (s->coll < 0 || s->coll >= KOLO_COLL_NUM) return refuse(s, why, len, "collective %ld is no collective", s->coll, 0);
  if (s->nranks < 1 || s->nranks > KOLO_CHECK_MAX_RANKS)
    return refuse(s, why, len, "%ld ranks is outside the checker's 1..%ld", s->nranks, KOLO_CHECK_MAX_RANKS);
  if (s->nchannels < 1 || s->nchannels > KOLO_CHECK_MAX_CHANNELS)
    return refuse(s, why, len, "%ld channels is outside the checker's 1..%ld", s->nchannels, KOLO_CHECK_MAX_CHANNELS);
  if (rooted(s->coll) && (s->root < 0 || s->root >= s->nranks))
    return refuse(s, why, len, "the root (or sender) %ld is no rank of %ld", s->root, s->nranks);
  if ((s->coll == KOLO_COLL_SEND || s->coll == KOLO_COLL_RECV) && (s->peer < 0 || s->peer >= s->nranks || s->peer == s->root))
    return refuse(s, why, len, "the receiver %ld is no rank of %ld other than the sender", s->peer, s->nranks);
  if (s->progs == NULL) return refuse(s, why, len, "no programs", 0, 0);
  long steps = 0;
  for (int i = 0; i < s->nchannels * s->nranks; i++)
    if (s->progs[i] != NULL && s->progs[i]->nsteps > 0) steps += s->progs[i]->nsteps;
  if (steps > KOLO_CHECK_MAX_WORK / s->nranks)
    return refuse(s, why, len, "%ld steps in all on %ld ranks is more than the checker's bound of 2^27 ranks x steps",
                  steps, s->nranks);
  return koloSuccess;
}

/* Every rank's buffers, inputs in IN and nothing in the rest of OUT. */
static void fill_arenas(kc_state *st) {
  for (int r = 0; r < st->n; r++) {
    const kc_bufs *b = &st->bufs[r];
    for (size_t e = 0; e < b->arena_len; e++) kc_val_unset(st->arena[r] + e * (size_t)st->W, st->W);
    for (size_t e = 0; e < b->in_len; e++) kc_val_input(st->arena[r] + (b->in_off + e) * (size_t)st->W, st->W, r, (int)e);
  }
}

/* The first output element that does not hold what it must. */
static int compare(kc_state *st) {
  kc_word *want = st->tmp;
  kc_where in = {st->layout, st->count, 1};
  for (int r = 0; r < st->n; r++)
    if (st->bufs[r].in_len / st->count > in.blocks) in.blocks = st->bufs[r].in_len / st->count;
  for (int r = 0; r < st->n; r++) {
    const kc_bufs *b = &st->bufs[r];
    for (size_t e = 0; e < b->out_len; e++) {
      const kc_word *got = st->arena[r] + (b->out_off + e) * (size_t)st->W;
      kc_expected(st->spec, r, st->count, e, want, st->W);
      if (kc_val_equal(got, want, st->W)) continue;
      char pos[64], g[256], w[256];
      kc_where out = {st->layout, st->count, b->out_len / st->count};
      kc_pos_text(&out, e, pos, sizeof pos);
      kc_val_describe(got, st->n, &in, kc_reduces(st->spec->coll), g, sizeof g);
      kc_val_describe(want, st->n, &in, kc_reduces(st->spec->coll), w, sizeof w);
      return kc_fail(st, "rank %d OUT %s got %s, should have %s", r, pos, g, w);
    }
  }
  return 0;
}

static int alloc_state(kc_state *st) {
  size_t n = (size_t)st->n;
  st->bufs = calloc(n, sizeof *st->bufs);
  st->arena = calloc(n, sizeof *st->arena);
  st->fifos = calloc(n * n, sizeof *st->fifos);
  st->pc = calloc(n, sizeof *st->pc);
  st->scratch_set = calloc(n, sizeof *st->scratch_set);
  st->tmp = malloc(3 * (size_t)KOLO_CHECK_ELEMS * (size_t)st->W * sizeof *st->tmp);
  if (!st->bufs || !st->arena || !st->fifos || !st->pc || !st->scratch_set || !st->tmp) return -2;
  for (int r = 0; r < st->n; r++) {
    st->bufs[r] = kc_bufs_of(st->spec, r, st->count, st->in_place);
    size_t vals = st->bufs[r].arena_len + (size_t)KOLO_SCRATCH_CHUNKS * KOLO_CHECK_ELEMS;
    st->arena[r] = malloc(vals * (size_t)st->W * sizeof(kc_word));
    if (st->arena[r] == NULL) return -2;
  }
  return 0;
}

static void free_state(kc_state *st) {
  kc_fifos_free(st);
  for (int r = 0; st->arena && r < st->n; r++) free(st->arena[r]);
  free(st->bufs);
  free(st->arena);
  free(st->fifos);
  free(st->pc);
  free(st->scratch_set);
  free(st->tmp);
}

/* One channel, out of place or in place: 0, -1 (why set), -2 out of memory. */
static int check_channel(const kolo_check_spec *s, int ch, int in_place, char *why, size_t len) {
  kc_state st;
  memset(&st, 0, sizeof st);
  st.spec = s;
  st.n = s->nranks;
  st.W = kc_words(s->nranks);
  st.ch = ch;
  st.in_place = in_place;
  st.layout = kc_layout(s);
  st.count = kc_count(st.layout, st.n);
  st.geo = (kolo_geometry){st.count, KOLO_CHUNK_ALIGN_BYTES, st.n, 1, KOLO_CHECK_ELEMS, st.layout};
  st.why = why;
  st.len = len;
  int res = alloc_state(&st);
  if (res == 0) {
    fill_arenas(&st);
    res = kc_run(&st);
  }
  if (res == 0) res = compare(&st);
  free_state(&st);
  return res;
}

koloResult_t kolo_schedule_check(const kolo_check_spec *s, char *why, size_t len) {
  if (len) why[0] = '\0';
  if (s == NULL) {
    snprintf(why, len, "no schedule to check (spec is NULL)");
    return koloInvalidArgument;
  }
  koloResult_t res = check_bounds(s, why, len);
  if (res != koloSuccess) return res;
  if (kc_check_shape(s, why, len) < 0) return koloInvalidArgument;
  for (int ch = 0; ch < s->nchannels; ch++)
    for (int ip = 0; ip <= kc_has_in_place(s->coll); ip++) {
      int r = check_channel(s, ch, ip, why, len);
      if (r == -2) {
        snprintf(why, len, "out of memory checking a schedule of %d ranks", s->nranks);
        return koloSystemError;
      }
      if (r < 0) return koloInvalidArgument;
    }
  return koloSuccess;
}
