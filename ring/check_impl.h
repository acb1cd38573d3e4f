/* check_impl.h - the parts of the schedule checker (check.h), shared by
 * its files: values (check_value.c), what each collective gives and wants
 * (check_expect.c), well-formedness (check_shape.c), the symbolic run
 * (check_run.c) and the entry point (check.c). */
#ifndef KOLO_RING_CHECK_IMPL_H
#define KOLO_RING_CHECK_IMPL_H

#include <stdint.h>

#include "ring/check.h"
#include "ring/geometry.h"

/* ---- symbolic values (check_value.c) ----------------------------------
 *
 * A value is kc_words(nranks) words: [0] the lowest and highest input
 * position it holds (-1: none), [1] terms (16 bits), post-ops applied (8)
 * and flags (8), then a bitmask of the ranks whose input it holds. */
typedef uint64_t kc_word;

enum {
  KC_UNSET = 1, /* an output element nobody wrote */
  KC_JUNK = 2,  /* made of what an output held before the call */
  KC_LATE = 4   /* reduced after the post-op was applied */
};

static inline int kc_words(int nranks) { return 2 + (nranks + 63) / 64; }

void kc_val_unset(kc_word *v, int W);
void kc_val_input(kc_word *v, int W, int rank, int pos);
/* The value of a rank's input block `pos` sums of every rank (reduce) or
 * the one rank `from`'s (from >= 0). */
void kc_val_expect(kc_word *v, int W, int nranks, int from, int pos, int post);
/* What a step gets when it reads v (an unset output reads as junk). */
void kc_val_read(kc_word *dst, const kc_word *v, int W);
/* dst = a OP b. */
void kc_val_combine(kc_word *dst, const kc_word *a, const kc_word *b, int W);
void kc_val_post(kc_word *v);
int kc_val_equal(const kc_word *a, const kc_word *b, int W);
/* How positions of a buffer are named: by chunk (ring layout), by block
 * (a buffer of `blocks` blocks of `count`), or plain. */
typedef struct {
  int layout;
  size_t count, blocks;
} kc_where;
/* "chunk 2 element 1", "block 1 element 0", "element 1" */
void kc_pos_text(const kc_where *w, size_t pos, char *out, size_t len);
/* What v holds, in words ("ranks 0 and 2's IN element 1 once, ..."); in:
 * how IN's positions are named. */
void kc_val_describe(const kc_word *v, int nranks, const kc_where *in, int reducing, char *out, size_t len);

/* ---- the collective's buffers (check_expect.c) ------------------------ */

/* One rank's buffers: IN and OUT as windows of one arena (they overlap in
 * place); len 0: the collective gives this rank no such buffer. */
typedef struct {
  size_t in_off, in_len, out_off, out_len, arena_len;
} kc_bufs;

/* Elements of a block: KOLO_CHECK_ELEMS per chunk of a round. */
size_t kc_count(int layout, int nranks);
/* 1 when the collective has an in-place form (NCCL's). */
int kc_has_in_place(int coll);
/* 1 when it reduces (its outputs are sums, post-op once). */
int kc_reduces(int coll);
kc_bufs kc_bufs_of(const kolo_check_spec *s, int rank, size_t count, int in_place);
/* The value element e of rank's OUT must end with. */
void kc_expected(const kolo_check_spec *s, int rank, size_t count, size_t e, kc_word *v, int W);
/* "AllReduce on 4 ranks", "Broadcast (root 2) on 4 ranks", ... */
void kc_coll_text(const kolo_check_spec *s, char *out, size_t len);

/* ---- shared state ------------------------------------------------------- */

typedef struct kc_fifo kc_fifo;

typedef struct {
  const kolo_check_spec *spec;
  int n, W, ch, in_place, layout;
  kolo_geometry geo;
  size_t count;
  kc_bufs *bufs;     /* [n] */
  kc_word **arena;   /* [n]: arena_len values each */
  kc_fifo **fifos;   /* [from * n + to], made on first use */
  int *pc;           /* [n]: each rank's next step */
  unsigned *scratch_set; /* [n]: bit k: rank wrote its scratch chunk k (values after its arena) */
  kc_word *tmp;      /* 3 chunks of values: src, received, result */
  char *why;
  size_t len;
} kc_state;

/* The program of rank r on the state's channel. */
static inline const kolo_program *kc_prog(const kc_state *st, int r) {
  return st->spec->progs[(size_t)st->ch * (size_t)st->n + (size_t)r];
}

/* Writes "<collective>[ (channel c)][ in place]: <what>" to st->why;
 * returns -1. */
int kc_fail(kc_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "rank 1 step 3 (recvReduceSend from rank 0 to rank 2)" */
void kc_step_text(const kc_state *st, int r, int i, char *out, size_t len);

/* check_shape.c: 0 when every program is well formed (any channel), else
 * -1 with the sentence in why. */
int kc_check_shape(const kolo_check_spec *s, char *why, size_t len);
/* The layout the programs share (KOLO_LAYOUT_FLAT when none has steps). */
int kc_layout(const kolo_check_spec *s);

/* check_run.c: runs st's channel to its end; 0, or -1 with the sentence
 * (deadlock, chunks that differ, a bad access, chunks left over); -2 out
 * of memory. */
int kc_run(kc_state *st);
void kc_fifos_free(kc_state *st);

#endif
