/* proto_select.c - KOLO_PROTO's lists, exclusions and per-collective
 * entries (proto_select.h).  Pure string work: the fuzz target links it. */
#include "core/proto_select.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The names an entry may give, and the kolo collectives each stands for
 * (sendrecv: both ends of a transfer, which must agree). */
static const struct {
  const char *name;
  int colls[2]; /* the second -1 when one */
} coll_names[] = {
    {"allreduce", {KOLO_COLL_ALL_REDUCE, -1}},
    {"broadcast", {KOLO_COLL_BROADCAST, -1}},
    {"reduce", {KOLO_COLL_REDUCE, -1}},
    {"allgather", {KOLO_COLL_ALL_GATHER, -1}},
    {"reducescatter", {KOLO_COLL_REDUCE_SCATTER, -1}},
    {"sendrecv", {KOLO_COLL_SEND, KOLO_COLL_RECV}},
    {"alltoall", {KOLO_COLL_ALL_TO_ALL, -1}},
    {"gather", {KOLO_COLL_GATHER, -1}},
    {"scatter", {KOLO_COLL_SCATTER, -1}},
};
#define NNAMES (int)(sizeof coll_names / sizeof coll_names[0])
#define COLL_LIST "allreduce, broadcast, reduce, allgather, reducescatter, sendrecv, alltoall, gather, scatter"

enum { ALLOW_LL = 1, ALLOW_SIMPLE = 2, ALLOW_BOTH = 3 }; /* within one list, before it becomes "off" */

/* s..s+n without the blanks at either end. */
static void trim(const char **s, size_t *n) {
  while (*n > 0 && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
  while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

static int same_word(const char *s, size_t n, const char *word) {
  return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* ALLOW_* of one protocol name; 0 for LL128 (not in kolo); -1 unknown. */
static int proto_bits(const char *s, size_t n) {
  if (same_word(s, n, "LL")) return ALLOW_LL;
  if (same_word(s, n, "Simple")) return ALLOW_SIMPLE;
  if (same_word(s, n, "LL128")) return 0;
  return -1;
}

static int coll_name_of(const char *s, size_t n) {
  for (int k = 0; k < NNAMES; k++)
    if (same_word(s, n, coll_names[k].name)) return k;
  return -1;
}

/* What one parse reads and where it says what is wrong. */
typedef struct {
  const char *v; /* the whole value */
  int *ll128;
  char *why;
  size_t why_len;
} parse_ctx;

static int refuse(const parse_ctx *x, const char *what, const char *s, size_t n) {
  snprintf(x->why, x->why_len, "KOLO_PROTO / NCCL_PROTO \"%s\": %s \"%.*s\"", x->v, what, (int)(n > 64 ? 64 : n), s);
  return KOLO_PROTO_UNREADABLE;
}

/* The ALLOW_* set of the list s..s+n ("^LL" or "LL,Simple") of the entry
 * e..e+en, or KOLO_PROTO_UNREADABLE / _NONE_LEFT. */
static int list_set(const parse_ctx *x, const char *e, size_t en, const char *s, size_t n) {
  trim(&s, &n);
  int exclude = n > 0 && *s == '^', set = 0;
  for (const char *p = s + exclude, *end = s + n; p <= end;) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *name = p;
    size_t m = comma ? (size_t)(comma - p) : (size_t)(end - p);
    trim(&name, &m);
    if (m == 0) return refuse(x, "has an empty protocol list or name in the entry", e, en);
    int bits = proto_bits(name, m);
    if (bits < 0) return refuse(x, "no protocol (kolo has LL and Simple) named", name, m);
    *x->ll128 |= bits == 0;
    set |= bits;
    p = comma ? comma + 1 : end + 1;
  }
  set = exclude ? ALLOW_BOTH & ~set : set;
  if (set == 0) {
    refuse(x, "allows neither LL nor Simple (LL128 is not in kolo) in the entry", e, en);
    return KOLO_PROTO_NONE_LEFT;
  }
  return set;
}

static void set_coll(uint32_t *off, int coll, int allowed) {
  const unsigned shift = (unsigned)(KOLO_PROTO_OFF_BITS * coll);
  *off = (*off & ~(3u << shift)) | ((unsigned)(ALLOW_BOTH & ~allowed) << shift);
}

/* One entry e..e+en into *off: its collective's fields, or every one's. */
static int entry(const parse_ctx *x, const char *e, size_t en, uint32_t *off) {
  const char *colon = memchr(e, ':', en), *s = e;
  size_t n = en;
  int name = -1;
  if (colon) {
    size_t cn = (size_t)(colon - e);
    const char *c = e;
    trim(&c, &cn);
    if ((name = coll_name_of(c, cn)) < 0) return refuse(x, "no collective (" COLL_LIST ") named", c, cn);
    s = colon + 1;
    n = en - (size_t)(s - e);
  }
  int allowed = list_set(x, e, en, s, n);
  if (allowed < 0) return allowed;
  for (int k = 0; k < KOLO_COLL_NUM && name < 0; k++) set_coll(off, k, allowed);
  for (int i = 0; i < 2 && name >= 0; i++)
    if (coll_names[name].colls[i] >= 0) set_coll(off, coll_names[name].colls[i], allowed);
  return 0;
}

int kolo_proto_off_parse(const char *v, int *ll128, char *why, size_t why_len) {
  if (v == NULL || *v == '\0') return 0;
  const parse_ctx x = {v, ll128, why, why_len};
  uint32_t off = 0;
  for (const char *p = v, *end = v + strlen(v); p <= end;) {
    const char *semi = memchr(p, ';', (size_t)(end - p));
    size_t n = semi ? (size_t)(semi - p) : (size_t)(end - p);
    int res = entry(&x, p, n, &off);
    if (res < 0) return res;
    p = semi ? semi + 1 : end + 1;
  }
  return (int)off;
}

unsigned kolo_proto_off_of(uint32_t off, int coll) {
  return (off >> (unsigned)(KOLO_PROTO_OFF_BITS * coll)) & 3u;
}

const char *kolo_proto_off_wrong(uint32_t off) {
  if ((off & ~KOLO_PROTO_OFF_ALL) != 0) return "has bits beyond its collectives'";
  for (int k = 0; k < KOLO_COLL_NUM; k++)
    if (kolo_proto_off_of(off, k) == (KOLO_PROTO_OFF_LL | KOLO_PROTO_OFF_SIMPLE))
      return "leaves a collective neither LL nor Simple";
  if (kolo_proto_off_of(off, KOLO_COLL_SEND) != kolo_proto_off_of(off, KOLO_COLL_RECV))
    return "gives send and recv different protocols";
  return NULL;
}

size_t kolo_proto_ll_threshold(uint32_t off, int coll, size_t ll_threshold) {
  unsigned o = kolo_proto_off_of(off, coll);
  if (o & KOLO_PROTO_OFF_LL) return 0;
  if (o & KOLO_PROTO_OFF_SIMPLE) return KOLO_PROTO_LL_ALWAYS;
  return ll_threshold;
}

const char *kolo_proto_off_text(uint32_t off, char *out, size_t len) {
  static const char *const only[] = {"LL,Simple", "Simple", "LL", "none"}; /* by KOLO_PROTO_OFF_* */
  if (off == 0 || len == 0) return "LL and Simple";
  unsigned first = kolo_proto_off_of(off, 0);
  int k = 1;
  while (k < KOLO_COLL_NUM && kolo_proto_off_of(off, k) == first) k++;
  if (k == KOLO_COLL_NUM) return only[first]; /* one choice for every collective */
  size_t at = 0;
  out[0] = '\0';
  for (k = 0; k < NNAMES && at < len; k++) {
    unsigned o = kolo_proto_off_of(off, coll_names[k].colls[0]);
    if (o != 0)
      at += (size_t)snprintf(out + at, len - at, "%s%s:%s", at ? ";" : "", coll_names[k].name, only[o]);
  }
  return out;
}
