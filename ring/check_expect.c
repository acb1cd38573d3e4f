/* check_expect.c - what each collective gives a rank (its buffers, in and
 * out of place, as NCCL lays them out) and what it must end with (check.h
 * lists the rules). */
#include <stdio.h>

#include "ring/check_impl.h"
#include "ring/schedule.h"

size_t kc_count(int layout, int nranks) {
  return layout == KOLO_LAYOUT_RING ? (size_t)KOLO_CHECK_ELEMS * (size_t)nranks : KOLO_CHECK_ELEMS;
}

int kc_has_in_place(int coll) {
  return coll != KOLO_COLL_ALL_TO_ALL && coll != KOLO_COLL_SEND && coll != KOLO_COLL_RECV;
}

int kc_reduces(int coll) {
  return coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_REDUCE_SCATTER || coll == KOLO_COLL_REDUCE;
}

static int is_p2p(int coll) { return coll == KOLO_COLL_SEND || coll == KOLO_COLL_RECV; }

/* Blocks of rank r's IN and OUT (0: the collective gives it none). */
static void blocks_of(const kolo_check_spec *s, int r, int *in, int *out) {
  int n = s->nranks, root = r == s->root;
  *in = *out = 1;
  switch (s->coll) {
  case KOLO_COLL_REDUCE_SCATTER: *in = n; break;
  case KOLO_COLL_ALL_GATHER: *out = n; break;
  case KOLO_COLL_BROADCAST: *in = root; break;
  case KOLO_COLL_REDUCE: *out = root; break;
  case KOLO_COLL_ALL_TO_ALL: *in = *out = n; break;
  case KOLO_COLL_GATHER: *out = root ? n : 0; break;
  case KOLO_COLL_SCATTER: *in = root ? n : 0; break;
  case KOLO_COLL_SEND:
  case KOLO_COLL_RECV: *in = root, *out = r == s->peer; break;
  default: break;
  }
}

kc_bufs kc_bufs_of(const kolo_check_spec *s, int rank, size_t count, int in_place) {
  int bi, bo;
  blocks_of(s, rank, &bi, &bo);
  kc_bufs b = {0, (size_t)bi * count, 0, (size_t)bo * count, 0};
  if (!in_place || !kc_has_in_place(s->coll) || b.in_len == 0 || b.out_len == 0) {
    b.out_off = b.in_len; /* apart */
    b.arena_len = b.in_len + b.out_len;
  } else if (b.in_len == b.out_len) {
    b.arena_len = b.in_len; /* one buffer */
  } else if (b.in_len < b.out_len) {
    b.in_off = (size_t)rank * count; /* all-gather, gather: IN is block `rank` of OUT */
    b.arena_len = b.out_len;
  } else {
    b.out_off = (size_t)rank * count; /* reduce-scatter, scatter: OUT is block `rank` of IN */
    b.arena_len = b.in_len;
  }
  return b;
}

void kc_expected(const kolo_check_spec *s, int r, size_t count, size_t e, kc_word *v, int W) {
  int n = s->nranks, blk = (int)(e / count), i = (int)(e % count), at_r = r * (int)count;
  switch (s->coll) {
  case KOLO_COLL_ALL_REDUCE:
  case KOLO_COLL_REDUCE: kc_val_expect(v, W, n, -1, (int)e, 1); break;
  case KOLO_COLL_REDUCE_SCATTER: kc_val_expect(v, W, n, -1, at_r + (int)e, 1); break;
  case KOLO_COLL_ALL_GATHER:
  case KOLO_COLL_GATHER: kc_val_expect(v, W, n, blk, i, 0); break;
  case KOLO_COLL_ALL_TO_ALL: kc_val_expect(v, W, n, blk, at_r + i, 0); break;
  case KOLO_COLL_SCATTER: kc_val_expect(v, W, n, s->root, at_r + (int)e, 0); break;
  default: kc_val_expect(v, W, n, s->root, (int)e, 0); break; /* broadcast, send / recv */
  }
}

void kc_coll_text(const kolo_check_spec *s, char *out, size_t len) {
  const char *name = kolo_coll_name(s->coll);
  if (is_p2p(s->coll))
    snprintf(out, len, "Send/Recv from rank %d to rank %d on %d ranks", s->root, s->peer, s->nranks);
  else if (s->coll == KOLO_COLL_BROADCAST || s->coll == KOLO_COLL_REDUCE || s->coll == KOLO_COLL_GATHER ||
           s->coll == KOLO_COLL_SCATTER)
    snprintf(out, len, "%s (root %d) on %d ranks", name, s->root, s->nranks);
  else
    snprintf(out, len, "%s on %d ranks", name, s->nranks);
}
