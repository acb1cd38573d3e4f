/* algo_memo.h - the algorithm a communicator chose for a collective of a
 * given size, remembered.  Choosing prices every algorithm the cost model
 * knows (ring/algo.h): about a third of the host's work in a one-rank
 * 8-byte all-reduce, and a program calls the same few sizes again and
 * again.  The choice depends only on the size and on what init fixed (the
 * topology, KOLO_ALGO, the tuning file), so a remembered answer is the
 * answer, alike on every rank.
 *
 * Each collective has a few entries, picked by the size's hash; an entry
 * is one word (the size, and the algorithm + 1), so a reader on another
 * thread sees an old entry or a new one, never half of each. */
#ifndef KOLO_CORE_ALGO_MEMO_H
#define KOLO_CORE_ALGO_MEMO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum { KOLO_MEMO_ALL_REDUCE, KOLO_MEMO_BCAST, KOLO_MEMO_AG, KOLO_MEMO_REDUCE, KOLO_MEMO_KINDS };
#define KOLO_MEMO_WAYS 8
#define KOLO_MEMO_MAX_BYTES ((size_t)1 << 55) /* larger sizes are chosen afresh each time */

typedef struct {
  _Atomic uint64_t entry[KOLO_MEMO_KINDS][KOLO_MEMO_WAYS]; /* bytes << 8 | (algo + 1); 0: empty */
} kolo_algo_memo;

static inline unsigned kolo_memo_way(size_t bytes) {
  return (unsigned)(((uint64_t)bytes * 0x9E3779B97F4A7C15ull) >> 61); /* 3 bits: KOLO_MEMO_WAYS */
}

/* The algorithm remembered for kind at bytes, or -1. */
static inline int kolo_memo_get(kolo_algo_memo *m, int kind, size_t bytes) {
  if (bytes >= KOLO_MEMO_MAX_BYTES) return -1;
  uint64_t e = atomic_load_explicit(&m->entry[kind][kolo_memo_way(bytes)], memory_order_relaxed);
  return e != 0 && e >> 8 == (uint64_t)bytes ? (int)(e & 0xff) - 1 : -1;
}

/* Remembers algo (0 .. 254) for kind at bytes, in place of what its entry held. */
static inline void kolo_memo_put(kolo_algo_memo *m, int kind, size_t bytes, int algo) {
  if (bytes >= KOLO_MEMO_MAX_BYTES || algo < 0 || algo > 254) return;
  uint64_t e = (uint64_t)bytes << 8 | (uint64_t)(algo + 1);
  atomic_store_explicit(&m->entry[kind][kolo_memo_way(bytes)], e, memory_order_relaxed);
}

#endif
