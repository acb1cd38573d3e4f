/* check_value.c - the checker's symbolic values (check_impl.h). */
#include <stdio.h>
#include <string.h>

#include "ring/check_impl.h"

static int32_t lo_of(const kc_word *v) { return (int32_t)(uint32_t)v[0]; }
static int32_t hi_of(const kc_word *v) { return (int32_t)(uint32_t)(v[0] >> 32); }
static unsigned terms_of(const kc_word *v) { return (unsigned)(v[1] & 0xffff); }
static unsigned post_of(const kc_word *v) { return (unsigned)(v[1] >> 16 & 0xff); }
static unsigned flags_of(const kc_word *v) { return (unsigned)(v[1] >> 24 & 0xff); }

static void set_head(kc_word *v, int32_t lo, int32_t hi, unsigned terms, unsigned post, unsigned flags) {
  v[0] = (kc_word)(uint32_t)lo | (kc_word)(uint32_t)hi << 32;
  v[1] = (kc_word)(terms > 0xffff ? 0xffff : terms) | (kc_word)(post > 0xff ? 0xff : post) << 16 |
         (kc_word)flags << 24;
}

static int has_rank(const kc_word *v, int r) { return (int)(v[2 + r / 64] >> (r % 64) & 1); }

void kc_val_unset(kc_word *v, int W) {
  memset(v, 0, (size_t)W * sizeof *v);
  set_head(v, -1, -1, 0, 0, KC_UNSET);
}

void kc_val_input(kc_word *v, int W, int rank, int pos) {
  memset(v, 0, (size_t)W * sizeof *v);
  set_head(v, pos, pos, 1, 0, 0);
  v[2 + rank / 64] |= (kc_word)1 << (rank % 64);
}

void kc_val_expect(kc_word *v, int W, int nranks, int from, int pos, int post) {
  if (from >= 0) {
    kc_val_input(v, W, from, pos);
  } else {
    memset(v, 0, (size_t)W * sizeof *v);
    set_head(v, pos, pos, (unsigned)nranks, 0, 0);
    for (int r = 0; r < nranks; r++) v[2 + r / 64] |= (kc_word)1 << (r % 64);
  }
  if (post) kc_val_post(v);
}

void kc_val_read(kc_word *dst, const kc_word *v, int W) {
  memcpy(dst, v, (size_t)W * sizeof *v);
  if (flags_of(v) & KC_UNSET)
    set_head(dst, lo_of(v), hi_of(v), terms_of(v), post_of(v), (flags_of(v) & ~(unsigned)KC_UNSET) | KC_JUNK);
}

/* The lower / higher of two positions, -1 (none) giving way. */
static int32_t pos_min(int32_t a, int32_t b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }
static int32_t pos_max(int32_t a, int32_t b) { return a > b ? a : b; }

void kc_val_combine(kc_word *dst, const kc_word *a, const kc_word *b, int W) {
  unsigned flags = (flags_of(a) | flags_of(b)) & ~(unsigned)KC_UNSET;
  if (post_of(a) || post_of(b)) flags |= KC_LATE;
  if ((flags_of(a) | flags_of(b)) & KC_UNSET) flags |= KC_JUNK;
  for (int w = 2; w < W; w++) dst[w] = a[w] | b[w];
  unsigned post = post_of(a) > post_of(b) ? post_of(a) : post_of(b);
  set_head(dst, pos_min(lo_of(a), lo_of(b)), pos_max(hi_of(a), hi_of(b)), terms_of(a) + terms_of(b), post,
           flags);
}

void kc_val_post(kc_word *v) {
  set_head(v, lo_of(v), hi_of(v), terms_of(v), post_of(v) + 1, flags_of(v));
}

int kc_val_equal(const kc_word *a, const kc_word *b, int W) {
  return memcmp(a, b, (size_t)W * sizeof *a) == 0;
}

/* Appends to out (always terminated). */
static void put(char *out, size_t len, const char *fmt, int a, int b) {
  size_t at = strlen(out);
  if (at + 1 < len) snprintf(out + at, len - at, fmt, a, b);
}

/* "every rank's", "rank 2's", "ranks 0, 1 and 3's", "13 ranks' (not rank 4, ...)" */
static void describe_ranks(const kc_word *v, int nranks, char *out, size_t len) {
  int k = 0, shown = 0;
  for (int r = 0; r < nranks; r++) k += has_rank(v, r);
  if (k == nranks && nranks > 1) {
    put(out, len, "every rank's", 0, 0);
  } else if (k > 4) {
    put(out, len, "%d ranks' (not rank", k, 0);
    for (int r = 0; r < nranks && shown < 3; r++)
      if (!has_rank(v, r)) put(out, len, shown++ ? ", %d" : " %d", r, 0);
    put(out, len, nranks - k > 3 ? ", ...)" : ")", 0, 0);
  } else {
    put(out, len, k > 1 ? "ranks" : "rank", 0, 0);
    for (int r = 0; r < nranks; r++)
      if (has_rank(v, r)) put(out, len, shown++ == 0 ? " %d" : shown == k ? " and %d" : ", %d", r, 0);
    put(out, len, "'s", 0, 0);
  }
}

void kc_pos_text(const kc_where *w, size_t pos, char *out, size_t len) {
  out[0] = '\0';
  if (w->layout == KOLO_LAYOUT_RING)
    put(out, len, "chunk %d element %d", (int)(pos / KOLO_CHECK_ELEMS), (int)(pos % KOLO_CHECK_ELEMS));
  else if (w->blocks > 1)
    put(out, len, "block %d element %d", (int)(pos / w->count), (int)(pos % w->count));
  else
    put(out, len, "element %d", (int)pos, 0);
}

static void describe_terms(const kc_word *v, int nranks, const kc_where *in, char *out, size_t len) {
  char a[64], b[64];
  describe_ranks(v, nranks, out, len);
  kc_pos_text(in, (size_t)lo_of(v), a, sizeof a);
  kc_pos_text(in, (size_t)hi_of(v), b, sizeof b);
  size_t at = strlen(out);
  if (at + 1 < len && lo_of(v) == hi_of(v)) snprintf(out + at, len - at, " IN %s", a);
  else if (at + 1 < len) snprintf(out + at, len - at, " IN %s mixed with %s", a, b);
  int k = 0;
  for (int r = 0; r < nranks; r++) k += has_rank(v, r);
  if ((int)terms_of(v) > k) put(out, len, ", %d terms (some counted more than once)", (int)terms_of(v), 0);
  else if (k > 1 || terms_of(v) > 1) put(out, len, " once", 0, 0);
}

void kc_val_describe(const kc_word *v, int nranks, const kc_where *in, int reducing, char *out, size_t len) {
  out[0] = '\0';
  if (flags_of(v) & KC_UNSET) {
    put(out, len, "nothing (it was never written)", 0, 0);
    return;
  }
  if (flags_of(v) & KC_JUNK) {
    put(out, len, "what OUT held before the call (read before it was written)", 0, 0);
    return;
  }
  describe_terms(v, nranks, in, out, len);
  if (reducing || post_of(v)) put(out, len, post_of(v) == 1 ? ", post-op applied once" : ", post-op applied %d times", (int)post_of(v), 0);
  if (flags_of(v) & KC_LATE) put(out, len, ", reduced after its post-op", 0, 0);
}
