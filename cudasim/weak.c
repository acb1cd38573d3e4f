/* weak.c - KOLO_SIM_WEAK: stores that reach memory late and out of order.
 *
 * On x86-64 the host's relaxed stores become visible in program order, so
 * a kernel that writes data and then a flag without a fence passes on the
 * model and fails on a GPU.  In this mode the device primitives' relaxed
 * stores (st_relaxed*, st_line, hint_set) and the data primitives' plain
 * stores go into a store buffer of their CUDA thread (fiber) instead of
 * memory:
 *
 *   - a release store or fence of a thread drains, in order, its block's
 *     buffer and then its own before it acts (a release is cumulative: it
 *     orders what the barrier showed the thread too);
 *   - __syncthreads moves each arriving thread's buffer, in order, into the
 *     block's buffer, not into memory: a barrier orders the block's threads
 *     among themselves, but makes nothing visible to other blocks, devices
 *     or the host (only a fence or release after it does);
 *   - at a poll, a random number of entries of the thread's buffer and of
 *     the block's land, each picked at random: a later flag may land before
 *     an earlier datum.  A full buffer lands half of its entries that way;
 *     the block's end lands what is left, in a random order;
 *   - cas and add are relaxed: they drain nothing.
 *
 * A thread reads its own stores: before an access (a load, cas or add of
 * the primitives, the buffers a data primitive declares at its start) the
 * buffered stores it overlaps land, those of the block first.  Landing
 * them early is what a GPU may do anyway (visibility is bounded late,
 * never early), and it keeps a single location's stores in order without
 * forwarding in every plain load: no two buffered entries overlap.
 *
 * Choices come from KOLO_SIM_SEED's stream of the block (a fixed stream
 * when the seed is 0).  Everything here is state of the runner thread:
 * one block runs on a runner at a time. */
#include <stdlib.h>
#include <string.h>

#include "cudasim/sim.h"

#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
/* The buffers are the runner's, shared by its fibers, which TSan takes for
 * threads with no order between them: the model's own bookkeeping is not
 * a race of the kernel's. */
#define QUIET_BEGIN() (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define QUIET_END() (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#define SIM_TSAN 1
#else
#define QUIET_BEGIN() ((void)0)
#define QUIET_END() ((void)0)
#define SIM_TSAN 0
#endif

#define FIBER_CAP 32  /* stores a thread holds before half of them land */
#define BLOCK_CAP 512 /* stores a block holds past its barriers */

int kolo_sim_weak_mode;

typedef struct {
  void *p;
  uint8_t n, plain;
  int16_t fiber; /* who stored it */
  unsigned char v[16];
} entry;

typedef struct {
  entry e[FIBER_CAP];
  int count;
} fiber_buf;

static _Thread_local fiber_buf *fbufs;
static _Thread_local int nfbufs;
static _Thread_local entry blk[BLOCK_CAP];
static _Thread_local int blk_count;
static _Thread_local uint64_t rng;
static _Thread_local int weak_on; /* the runner's block started in this mode */

void kolo_sim_set_weak(int on) {
  sim_init();
  __atomic_store_n(&kolo_sim_weak_mode, on != 0, __ATOMIC_RELAXED);
}

/* ---- landing in memory --------------------------------------------------- */

static void land_atomic(const entry *e) {
  uint64_t w[2] = {0, 0};
  memcpy(w, e->v, e->n);
  switch (e->n) {
  case 1: __atomic_store_n((uint8_t *)e->p, (uint8_t)w[0], __ATOMIC_RELAXED); break;
  case 4: __atomic_store_n((uint32_t *)e->p, (uint32_t)w[0], __ATOMIC_RELAXED); break;
  case 8: __atomic_store_n((uint64_t *)e->p, w[0], __ATOMIC_RELAXED); break;
  default: /* an LL line: two single-copy-atomic halves */
    __atomic_store_n((uint64_t *)e->p, w[0], __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)e->p + 1, w[1], __ATOMIC_RELAXED);
  }
}

/* A plain store is the kernel's own write: TSan sees it where it lands when
 * the thread that made it lands it; landed by another thread of the block
 * (a poll, the block's end) it is the model's. */
static void land(const entry *e, int me) {
  if (!e->plain) {
    land_atomic(e);
    return;
  }
  unsigned char v[16];
  void *p = e->p;
  const unsigned n = e->n;
  memcpy(v, e->v, n);
  if (SIM_TSAN && e->fiber == me) QUIET_END();
  memcpy(p, v, n);
  if (SIM_TSAN && e->fiber == me) QUIET_BEGIN();
}

static void land_at(entry *a, int *count, int j, int me) {
  land(&a[j], me);
  memmove(&a[j], &a[j + 1], (size_t)(*count - j - 1) * sizeof *a);
  (*count)--;
}

static void land_all(entry *a, int *count, int me) {
  for (int j = 0; j < *count; j++) land(&a[j], me);
  *count = 0;
}

/* Lands k entries of a, each picked at random: out of order. */
static void land_random(entry *a, int *count, int k, int me) {
  for (; k > 0 && *count > 0; k--) land_at(a, count, (int)(sim_mix(&rng) % (uint64_t)*count), me);
}

/* Lands the entries of a that overlap [p, p + n), in order. */
static void land_overlap(entry *a, int *count, const char *p, size_t n, int me) {
  for (int j = 0; j < *count;) {
    const char *q = a[j].p;
    if (q < p + n && p < q + a[j].n) land_at(a, count, j, me);
    else j++;
  }
}

/* ---- the device side -------------------------------------------------------- */

/* The current thread's buffer; NULL outside a kernel (or a block started
 * before the mode was on): the store goes to memory at once. */
static fiber_buf *mine(int *me) {
  *me = sim_block_fiber();
  return weak_on && *me >= 0 && *me < nfbufs ? &fbufs[*me] : NULL;
}

void kolo_sim_weak_touch(const void *p, size_t n) {
  QUIET_BEGIN();
  int me;
  fiber_buf *f = mine(&me);
  if (f != NULL) {
    land_overlap(blk, &blk_count, p, n, me);
    land_overlap(f->e, &f->count, p, n, me);
  }
  QUIET_END();
}

void kolo_sim_weak_store(void *p, const void *v, unsigned n, int plain) {
  QUIET_BEGIN();
  int me;
  fiber_buf *f = mine(&me);
  if (f == NULL) {
    entry e = {p, (uint8_t)n, (uint8_t)plain, -1, {0}};
    memcpy(e.v, v, n);
    land(&e, -1);
  } else {
    if (!plain) { /* a data primitive declared its outputs at its start */
      land_overlap(blk, &blk_count, p, n, me);
      land_overlap(f->e, &f->count, p, n, me);
    }
    if (f->count == FIBER_CAP) land_random(f->e, &f->count, FIBER_CAP / 2, me);
    entry *e = &f->e[f->count++];
    e->p = p, e->n = (uint8_t)n, e->plain = (uint8_t)plain, e->fiber = (int16_t)me;
    memcpy(e->v, v, n);
  }
  QUIET_END();
}

void kolo_sim_weak_release(void) {
  QUIET_BEGIN();
  int me;
  fiber_buf *f = mine(&me);
  if (f != NULL) {
    land_all(blk, &blk_count, me);
    land_all(f->e, &f->count, me);
  }
  QUIET_END();
}

/* ---- the block's side (block.c) ---------------------------------------------- */

void sim_weak_block_begin(int nfibers, uint64_t seed) {
  QUIET_BEGIN();
  if (nfibers > nfbufs) {
    fiber_buf *b = realloc(fbufs, (size_t)nfibers * sizeof *b);
    if (b == NULL) abort(); /* a store with nowhere to go cannot be dropped */
    fbufs = b, nfbufs = nfibers;
  }
  for (int i = 0; i < nfbufs; i++) fbufs[i].count = 0;
  blk_count = 0;
  rng = seed;
  weak_on = 1;
  QUIET_END();
}

/* Thread i arrives at a barrier, or ends: its stores become the block's. */
void sim_weak_barrier(int i) {
  QUIET_BEGIN();
  fiber_buf *f = weak_on && i < nfbufs ? &fbufs[i] : NULL;
  if (f != NULL && f->count > 0) {
    if (blk_count + f->count > BLOCK_CAP) land_random(blk, &blk_count, blk_count - BLOCK_CAP / 2, i);
    memcpy(&blk[blk_count], f->e, (size_t)f->count * sizeof(entry));
    blk_count += f->count;
    f->count = 0;
  }
  QUIET_END();
}

/* Thread i polls: some of its stores and of the block's land, at random. */
void sim_weak_poll(int i) {
  QUIET_BEGIN();
  if (weak_on && i < nfbufs) {
    fiber_buf *f = &fbufs[i];
    land_random(f->e, &f->count, (int)(sim_mix(&rng) % (uint64_t)(f->count + 1)), i);
    land_random(blk, &blk_count, (int)(sim_mix(&rng) % (uint64_t)(blk_count + 1)), i);
  }
  QUIET_END();
}

/* The block ends: everything lands (the kernel's end orders its stores
 * before what the stream does next). */
void sim_weak_block_end(void) {
  if (!weak_on) return;
  QUIET_BEGIN();
  for (int i = 0; i < nfbufs; i++) sim_weak_barrier(i);
  land_random(blk, &blk_count, blk_count, -1);
  weak_on = 0;
  QUIET_END();
}
