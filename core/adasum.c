/* adasum.c - Adasum, Horovod's adaptive summation, on host communicators.
 *
 * For two vectors a and b (Horovod's combine rule):
 *   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b,
 * where a squared norm below 1e-8 counts as zero and its coefficient is 1
 * (so a zero vector leaves the other one as it is).  Over n ranks the tree
 * is Horovod's vector halving, distance doubling: at level L = 1, 2, 4, ...
 * rank r and r ^ L hold the same segment; the lower rank keeps its first
 * half (floor(len / 2) elements), the upper one the rest; each sends the
 * other half to its partner, and combines what it kept with what it got,
 * with the dot product and the two norms summed over the 2L ranks that
 * share the level (their segments tile the vector).  So level L combines
 * the results of ranks [b, b + L) and [b + L, b + 2L), the lower group as
 * a.  Then recursive doubling gathers the segments back, in reverse.
 *
 * Rank counts that are not a power of two (Horovod refuses them): with p
 * the largest power of two <= n, rank p + i (i < n - p) first hands its
 * vector to rank i, which replaces its own with adasum(own, received);
 * ranks 0 .. p-1 run the tree, and rank i hands the result back.
 *
 * Every exchange is a send and a receive of kolo's own point-to-point
 * pipes, run here as one batch (neither end waits for the other), on the
 * caller's thread or the progress thread of a non-blocking communicator.
 * Each element of the result is computed by one rank and copied to the
 * others, and the summed dot products and norms are the same bits on every
 * rank of a level, so every rank gets the same result. */
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "core/adasum.h"
#include "core/comm_state.h"
#include "core/group.h"
#include "core/enqueue.h"
#include "core/progress.h"
#include "kernels/host_reduce.h"

/* Horovod's bound: a squared norm below it is a zero vector's. */
#define ADASUM_ZERO_NORMSQ 1e-8

/* One call: the vector being reduced (in recvbuff), its scratch (the
 * partner's half, or a folded-in rank's vector). */
typedef struct {
  struct koloComm *c;
  koloDataType_t type;
  size_t esz, count;
  char *buf, *tmp;
} ada_call;

/* A segment of the vector, in elements. */
typedef struct {
  size_t off, len;
} seg;

/* Elements by memcpy: the user's buffers need not be aligned. */
static double load(koloDataType_t t, const char *p) {
  if (t == koloFloat64) {
    double v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  if (t == koloFloat32) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  uint16_t h;
  memcpy(&h, p, sizeof h);
  return t == koloFloat16 ? kolo_half_to_float(h) : kolo_bf16_to_float(h);
}

static void store(koloDataType_t t, char *p, double x) {
  if (t == koloFloat64) {
    memcpy(p, &x, sizeof x);
  } else if (t == koloFloat32) {
    float v = (float)x;
    memcpy(p, &v, sizeof v);
  } else {
    uint16_t h = t == koloFloat16 ? kolo_float_to_half((float)x) : kolo_float_to_bf16((float)x);
    memcpy(p, &h, sizeof h);
  }
}

/* s = {a.b, a.a, b.b} over n elements, accumulated in double. */
static void dot_norms(const ada_call *x, const char *a, const char *b, size_t n, double s[3]) {
  s[0] = s[1] = s[2] = 0.0;
  for (size_t i = 0; i < n; i++) {
    double u = load(x->type, a + i * x->esz), v = load(x->type, b + i * x->esz);
    s[0] += u * v;
    s[1] += u * u;
    s[2] += v * v;
  }
}

static double coefficient(double dot, double normsq) {
  return normsq >= ADASUM_ZERO_NORMSQ ? 1.0 - dot / normsq * 0.5 : 1.0;
}

/* a = ca * a + cb * b over n elements, in double, rounded once to the type. */
static void scaled_add(const ada_call *x, char *a, double ca, const char *b, double cb, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t k = i * x->esz;
    store(x->type, a + k, ca * load(x->type, a + k) + cb * load(x->type, b + k));
  }
}

/* Sends n elements at out to peer while receiving m from it into in.  A
 * count of 0 moves nothing (both ends know the counts, so both skip it). */
static koloResult_t exchange(struct koloComm *c, koloDataType_t t, int peer, const void *out, size_t n, void *in,
                             size_t m) {
  kolo_op ops[2];
  int k = 0;
  if (n > 0) ops[k++] = (kolo_op){KOLO_COLL_SEND, out, NULL, n, t, koloSum, peer, c, NULL, KOLO_PREMUL_NONE, 0, 0};
  if (m > 0) ops[k++] = (kolo_op){KOLO_COLL_RECV, NULL, in, m, t, koloSum, peer, c, NULL, KOLO_PREMUL_NONE, 0, 0};
  return k > 0 ? kolo_run_ops_here(ops, k) : koloSuccess;
}

/* Sums s over the 2 * level ranks that share rank's bits above `level`, by
 * recursive doubling: at each step both partners add the same two numbers
 * (in either order: the same bits), so all of them end with the same sums. */
static koloResult_t level_sum(struct koloComm *c, int level, double s[3]) {
  for (int d = 1; d <= level; d <<= 1) {
    double got[3];
    koloResult_t res = exchange(c, koloFloat64, c->rank ^ d, s, 3, got, 3);
    if (res != koloSuccess) return res;
    for (int k = 0; k < 3; k++) s[k] += got[k];
  }
  return koloSuccess;
}

/* mine (n elements) = adasum of the lower and the upper group's vectors on
 * these elements, theirs being the other group's.  level 0: the whole
 * vectors are here (a folded-in rank's), nothing to sum. */
static koloResult_t combine(const ada_call *x, int level, int lower, char *mine, const char *theirs, size_t n) {
  double own[3];
  dot_norms(x, mine, theirs, n, own);
  /* {dot, the lower group's norm^2, the upper group's}: the same order on both sides */
  double s[3] = {own[0], lower ? own[1] : own[2], lower ? own[2] : own[1]};
  koloResult_t res = level > 0 ? level_sum(x->c, level, s) : koloSuccess;
  if (res != koloSuccess) return res;
  double lo = coefficient(s[0], s[1]), hi = coefficient(s[0], s[2]);
  scaled_add(x, mine, lower ? lo : hi, theirs, lower ? hi : lo, n);
  return koloSuccess;
}

/* One halving level: keeps half of *s (the lower rank the first
 * floor(len / 2) elements), trades the other half with the partner and
 * combines. */
static koloResult_t halve(const ada_call *x, int level, seg *s) {
  size_t lo = s->len / 2, hi = s->len - lo;
  int lower = (x->c->rank & level) == 0;
  seg keep = lower ? (seg){s->off, lo} : (seg){s->off + lo, hi};
  seg give = lower ? (seg){s->off + lo, hi} : (seg){s->off, lo};
  koloResult_t res = exchange(x->c, x->type, x->c->rank ^ level, x->buf + give.off * x->esz, give.len, x->tmp,
                              keep.len);
  if (res == koloSuccess) res = combine(x, level, lower, x->buf + keep.off * x->esz, x->tmp, keep.len);
  *s = keep;
  return res;
}

/* One doubling level: trades *s for the partner's part of `whole`. */
static koloResult_t double_back(const ada_call *x, int level, seg *s, seg whole) {
  seg mine = *s;
  int lower = (x->c->rank & level) == 0;
  seg other = lower ? (seg){whole.off + mine.len, whole.len - mine.len} : (seg){whole.off, whole.len - mine.len};
  *s = whole;
  return exchange(x->c, x->type, x->c->rank ^ level, x->buf + mine.off * x->esz, mine.len,
                  x->buf + other.off * x->esz, other.len);
}

/* Ranks 0 .. p-1: halving down to one segment each, then doubling back. */
static koloResult_t tree(const ada_call *x, int p) {
  seg path[32], s = {0, x->count};
  int depth = 0;
  koloResult_t res = koloSuccess;
  for (int level = 1; level < p && res == koloSuccess; level <<= 1) {
    path[depth++] = s;
    res = halve(x, level, &s);
  }
  for (int i = depth - 1; i >= 0 && res == koloSuccess; i--) res = double_back(x, 1 << i, &s, path[i]);
  return res;
}

static int pow2_floor(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

static koloResult_t run_tree(const ada_call *x) {
  struct koloComm *c = x->c;
  int p = pow2_floor(c->nranks), extra = c->rank + p;
  if (c->rank >= p) { /* folded into rank - p: hand over, then take back the result */
    koloResult_t res = exchange(c, x->type, c->rank - p, x->buf, x->count, NULL, 0);
    return res == koloSuccess ? exchange(c, x->type, c->rank - p, NULL, 0, x->buf, x->count) : res;
  }
  koloResult_t res = koloSuccess;
  if (extra < c->nranks) res = exchange(c, x->type, extra, NULL, 0, x->tmp, x->count);
  if (res == koloSuccess && extra < c->nranks) res = combine(x, 0, 1, x->buf, x->tmp, x->count);
  if (res == koloSuccess) res = tree(x, p);
  if (res == koloSuccess && extra < c->nranks) res = exchange(c, x->type, extra, x->buf, x->count, NULL, 0);
  return res;
}

/* The whole call, on the thread that runs the communicator's calls. */
static koloResult_t adasum_run(struct koloComm *c, const void *sendbuff, void *recvbuff, size_t count,
                               koloDataType_t type) {
  size_t esz = koloTypeSize(type);
  if (count > 0 && sendbuff != recvbuff) memcpy(recvbuff, sendbuff, count * esz);
  if (count == 0 || c->nranks == 1) return koloSuccess;
  char *tmp = malloc(count * esz);
  if (tmp == NULL)
    return kolo_error(&c->err, koloSystemError, "koloAdasum: rank %d: out of memory: %zu bytes of scratch",
                      c->rank, count * esz);
  ada_call x = {c, type, esz, count, recvbuff, tmp};
  koloResult_t res = run_tree(&x);
  free(tmp);
  return res;
}

/* ---- non-blocking communicators: the call on the progress thread ------- */

typedef struct {
  struct koloComm *c;
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  koloDataType_t type;
} queued_call;

/* kolo_nb_fn: runs the queued call unless the communicator failed before;
 * a failure of its own (out of memory) becomes the communicator's, which
 * koloCommGetAsyncError reports (a peer's already is). */
static void run_queued(void *arg, int run) {
  queued_call *q = arg;
  if (run) {
    koloResult_t res = adasum_run(q->c, q->sendbuff, q->recvbuff, q->count, q->type);
    if (res != koloSuccess && q->c->failed == koloSuccess) q->c->failed = res;
  }
  free(q);
}

static koloResult_t queue(struct koloComm *c, const void *sendbuff, void *recvbuff, size_t count,
                          koloDataType_t type) {
  queued_call *q = malloc(sizeof *q);
  if (q == NULL)
    return kolo_error(&c->err, koloSystemError, "koloAdasum: rank %d: out of memory queueing the call", c->rank);
  *q = (queued_call){c, sendbuff, recvbuff, count, type};
  koloResult_t res = kolo_nb_submit_fn(c, run_queued, q);
  if (res != koloInProgress) free(q);
  return res;
}

/* ---- the API's checks ---------------------------------------------------- */

static koloResult_t check_adasum(const char *fn, struct koloComm *c, koloDataType_t type) {
  if (type != koloFloat32 && type != koloFloat64 && type != koloFloat16 && type != koloBfloat16)
    return kolo_error(&c->err, koloInvalidArgument,
                      "%s: datatype %s: Adasum combines floating-point vectors: float16, bfloat16, float32 or "
                      "float64", fn, kolo_type_name(type));
  if (c->kind != NULL)
    return kolo_error(&c->err, koloInvalidUsage,
                      "%s: rank %d: the communicator moves CUDA memory, and Adasum runs on host communicators "
                      "only (it computes dot products on the host between its exchanges): copy the buffer to "
                      "host memory and call it on a host communicator", fn, c->rank);
  if (kolo_group_depth() > 0)
    return kolo_error(&c->err, koloInvalidUsage,
                      "%s: rank %d: called between koloGroupStart and koloGroupEnd: Adasum computes between its "
                      "exchanges, so it cannot wait for the group's end; call it outside the group", fn, c->rank);
  return koloSuccess;
}

koloResult_t kolo_adasum(const char *fn, struct koloComm *c, const void *sendbuff, void *recvbuff, size_t count,
                         koloDataType_t type) {
  koloResult_t res = check_adasum(fn, c, type);
  if (res != koloSuccess) return res;
  if (count == 0) return koloSuccess; /* nothing to do on any communicator, as for the other calls */
  if (!c->blocking) return queue(c, sendbuff, recvbuff, count, type);
  return adasum_run(c, sendbuff, recvbuff, count, type);
}
