/* checked_coll.c - a collective with seeded inputs and an exact check of
 * every output element (see checked_coll.h). */
#include "checked_coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_util.h"

static const char *const kind_names[CC_NUM_KINDS] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                                     "reduce",     "alltoall",   "sendrecv"};

const char *cc_kind_name(cc_kind k) { return k < CC_NUM_KINDS ? kind_names[k] : "?"; }

int cc_has_in_place(cc_kind k) { return k != CC_ALLTOALL && k != CC_SENDRECV; }

/* ---- element values ------------------------------------------------------ */

/* float -> IEEE half for the exact small integers used here. */
static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
  if (exp == 0) return (uint16_t)sign; /* zero */
  return (uint16_t)(sign | ((exp - 112u) << 10) | (man >> 13));
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t x = exp == 0 ? sign : exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112u) << 23) | (man << 13));
  if (exp == 0 && man != 0) return (h & 0x8000u ? -1.0f : 1.0f) * (float)man / 16777216.0f; /* subnormal */
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void put(koloDataType_t dt, void *p, size_t i, double v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, 4);
  switch (dt) {
  case koloInt8: ((int8_t *)p)[i] = (int8_t)v; break;
  case koloUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case koloInt32: ((int32_t *)p)[i] = (int32_t)v; break;
  case koloUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case koloInt64: ((int64_t *)p)[i] = (int64_t)v; break;
  case koloUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case koloFloat16: ((uint16_t *)p)[i] = to_half(f); break;
  case koloFloat32: ((float *)p)[i] = f; break;
  case koloFloat64: ((double *)p)[i] = v; break;
  case koloBfloat16: ((uint16_t *)p)[i] = (uint16_t)(bits >> 16); break;
  default: break;
  }
}

static double get(koloDataType_t dt, const void *p, size_t i) {
  uint32_t bits;
  float f;
  switch (dt) {
  case koloInt8: return ((const int8_t *)p)[i];
  case koloUint8: return ((const uint8_t *)p)[i];
  case koloInt32: return ((const int32_t *)p)[i];
  case koloUint32: return ((const uint32_t *)p)[i];
  case koloInt64: return (double)((const int64_t *)p)[i];
  case koloUint64: return (double)((const uint64_t *)p)[i];
  case koloFloat16: return from_half(((const uint16_t *)p)[i]);
  case koloFloat32: return ((const float *)p)[i];
  case koloFloat64: return ((const double *)p)[i];
  case koloBfloat16:
    bits = (uint32_t)((const uint16_t *)p)[i] << 16;
    memcpy(&f, &bits, 4);
    return f;
  default: return -1;
  }
}

/* Element j of rank r's input: 0..7, or 1..2 for products. */
static double val(const cc_case *c, int r, size_t j) {
  uint64_t s = c->seed ^ ((uint64_t)r * 0xd1b54a32d192ed03ULL) ^ ((uint64_t)j * 0x8cb92ba72f3d8dd7ULL);
  uint64_t h = fu_rand(&s);
  if (c->op == koloProd) return (h & 3) == 0 ? 2 : 1;
  return (double)(h & 7);
}

static double reduce_all(const cc_case *c, int nranks, size_t j) {
  double acc = val(c, 0, j);
  for (int r = 1; r < nranks; r++) {
    double v = val(c, r, j);
    switch (c->op) {
    case koloProd: acc *= v; break;
    case koloMax: acc = v > acc ? v : acc; break;
    case koloMin: acc = v < acc ? v : acc; break;
    default: acc += v; break;
    }
  }
  return acc;
}

/* The reference for output element k on `rank`. */
static double expected(const cc_case *c, int rank, int nranks, size_t k) {
  size_t n = c->count, s = n ? k / n : 0, i = n ? k % n : 0;
  switch (c->kind) {
  case CC_ALL_REDUCE:
  case CC_REDUCE: return reduce_all(c, nranks, k);
  case CC_BROADCAST: return val(c, c->root, k);
  case CC_ALL_GATHER: return val(c, (int)s, i);
  case CC_REDUCE_SCATTER: return reduce_all(c, nranks, (size_t)rank * n + k);
  case CC_ALLTOALL: return val(c, (int)s, (size_t)rank * n + i);
  case CC_SENDRECV: return val(c, (rank + nranks - 1) % nranks, k);
  default: return -1;
  }
}

/* ---- buffers and the call -------------------------------------------------- */

static cc_geometry geometry_of(const cc_case *c, int rank, int nranks) {
  size_t n = c->count, all = n * (size_t)nranks;
  switch (c->kind) {
  case CC_ALL_GATHER: return (cc_geometry){n, all, (size_t)rank * n};
  case CC_REDUCE_SCATTER: return (cc_geometry){all, n, 0};
  case CC_ALLTOALL: return (cc_geometry){all, all, 0};
  default: return (cc_geometry){n, n, 0};
  }
}

koloResult_t cc_issue(koloComm_t comm, int rank, int nranks, const cc_case *c, const void *in, void *out,
                      koloStream_t stream) {
  size_t n = c->count;
  switch (c->kind) {
  case CC_ALL_REDUCE: return koloAllReduce(in, out, n, c->dt, c->op, comm, stream);
  case CC_ALL_GATHER: return koloAllGather(in, out, n, c->dt, comm, stream);
  case CC_REDUCE_SCATTER: return koloReduceScatter(in, out, n, c->dt, c->op, comm, stream);
  case CC_BROADCAST: return koloBroadcast(in, out, n, c->dt, c->root, comm, stream);
  case CC_REDUCE: return koloReduce(in, out, n, c->dt, c->op, c->root, comm, stream);
  case CC_ALLTOALL: return koloAlltoAll(in, out, n, c->dt, comm, stream);
  case CC_SENDRECV: break;
  default: return koloInvalidArgument;
  }
  koloResult_t g = koloGroupStart();
  if (g != koloSuccess) return g;
  koloResult_t s = koloSend(in, n, c->dt, (rank + 1) % nranks, comm, stream);
  koloResult_t r = koloRecv(out, n, c->dt, (rank + nranks - 1) % nranks, comm, stream);
  koloResult_t e = koloGroupEnd();
  return s != koloSuccess ? s : r != koloSuccess ? r : e;
}

void cc_check(const cc_case *c, int rank, int nranks, const void *out, size_t out_elems, cc_result *res) {
  if (c->kind == CC_REDUCE && rank != c->root) return; /* nothing defined there */
  for (size_t k = 0; k < out_elems; k++) {
    double got = get(c->dt, out, k), want = expected(c, rank, nranks, k);
    if (got == want) continue;
    if (res->bad++ == 0) {
      res->first_bad = k;
      res->got = got;
      res->want = want;
    }
  }
}

void cc_bufs_free(cc_bufs *b) {
  free(b->out);
  free(b->in);
  b->out = b->in = NULL;
}

int cc_bufs_make(const cc_case *c, int rank, int nranks, cc_bufs *b) {
  size_t es = koloTypeSize(c->dt);
  b->g = geometry_of(c, rank, nranks);
  /* in place, the input's elements sit in the output buffer */
  size_t out_elems = c->in_place && b->g.in_elems > b->g.out_elems ? b->g.in_elems : b->g.out_elems;
  b->out = malloc(out_elems * es + 1);
  b->in = c->in_place ? NULL : malloc(b->g.in_elems * es + 1);
  if (b->out == NULL || (!c->in_place && b->in == NULL)) {
    cc_bufs_free(b);
    return -1;
  }
  b->out_bytes = out_elems * es;
  b->in_bytes = c->in_place ? 0 : b->g.in_elems * es;
  memset(b->out, 0xff, out_elems * es);
  b->src = c->in_place ? b->out + b->g.in_at * es : b->in;
  for (size_t j = 0; j < b->g.in_elems; j++) put(c->dt, b->src, j, val(c, rank, j));
  /* reduce-scatter in place: the output is the rank's block of the input */
  b->dst = c->in_place && c->kind == CC_REDUCE_SCATTER ? b->out + (size_t)rank * c->count * es : b->out;
  return 0;
}

cc_result cc_run(koloComm_t comm, int rank, int nranks, const cc_case *c) {
  return cc_run_group(comm, rank, nranks, c, 1, NULL, NULL);
}

cc_result cc_run_group(koloComm_t comm, int rank, int nranks, const cc_case *cases, int k,
                       void (*after_first)(void *), void *arg) {
  cc_result res = {koloSuccess, 0, 0, 0, 0, 0};
  cc_bufs b[CC_MAX_GROUP];
  int made = 0;
  for (; made < k && made < CC_MAX_GROUP; made++)
    if (cc_bufs_make(&cases[made], rank, nranks, &b[made]) != 0) res.res = koloSystemError;
  int64_t t0 = fu_now_ns();
  int grouped = 0;
  if (res.res == koloSuccess && k > 1) {
    res.res = koloGroupStart();
    grouped = res.res == koloSuccess;
  }
  for (int i = 0; i < made && res.res == koloSuccess; i++) {
    res.res = cc_issue(comm, rank, nranks, &cases[i], b[i].src, b[i].dst, NULL);
    if (i == 0 && after_first != NULL) after_first(arg);
  }
  if (grouped) { /* a group started is ended, also after a failed call in it */
    koloResult_t e = koloGroupEnd();
    if (res.res == koloSuccess) res.res = e;
  }
  res.call_ns = fu_now_ns() - t0;
  for (int i = 0; i < made; i++) {
    if (res.res == koloSuccess) cc_check(&cases[i], rank, nranks, b[i].dst, b[i].g.out_elems, &res);
    cc_bufs_free(&b[i]);
  }
  return res;
}

/* ---- random cases ---------------------------------------------------------- */

static const koloDataType_t kTypes[] = {koloInt8,    koloUint8,   koloInt32,   koloUint32, koloInt64,
                                        koloUint64, koloFloat16, koloFloat32, koloFloat64, koloBfloat16};
static const koloRedOp_t kOps[] = {koloSum, koloProd, koloMax, koloMin};

/* 0..max_elems, skewed to small and odd counts. */
static size_t random_count(uint64_t *st, size_t max_elems) {
  switch (fu_rand(st) % 8) {
  case 0: return 0;
  case 1: case 2: return (size_t)fu_rand_in(st, 1, 17);
  case 3: case 4: return (size_t)fu_rand_in(st, 18, 4099);
  case 5: case 6: return (size_t)fu_rand_in(st, 4100, max_elems > 70000 ? 70000 : max_elems);
  default: return (size_t)fu_rand_in(st, 1, max_elems) | 1;
  }
}

cc_case cc_random_case(uint64_t *st, int nranks, size_t max_bytes) {
  cc_case c;
  c.kind = (cc_kind)(fu_rand(st) % CC_NUM_KINDS);
  c.dt = kTypes[fu_rand(st) % (sizeof kTypes / sizeof kTypes[0])];
  c.op = kOps[fu_rand(st) % (sizeof kOps / sizeof kOps[0])];
  if (c.op == koloProd && (c.dt == koloInt8 || c.dt == koloUint8) && nranks > 6) c.op = koloSum;
  /* the largest buffer of a call holds nranks x count elements for some kinds */
  size_t per = (c.kind == CC_ALL_GATHER || c.kind == CC_REDUCE_SCATTER || c.kind == CC_ALLTOALL) ? (size_t)nranks : 1;
  size_t max_elems = max_bytes / koloTypeSize(c.dt) / per;
  c.count = random_count(st, max_elems > 20000 ? max_elems : 20000);
  c.in_place = cc_has_in_place(c.kind) && (fu_rand(st) & 1);
  c.root = (int)(fu_rand(st) % (uint64_t)nranks);
  c.seed = fu_rand(st);
  return c;
}

void cc_describe(const cc_case *c, char *buf, size_t len) {
  snprintf(buf, len, "%s dtype %d op %d count %zu %s root %d", cc_kind_name(c->kind), (int)c->dt, (int)c->op,
           c->count, c->in_place ? "in place" : "out of place", c->root);
}
