/* algo_select.c - KOLO_ALGO's lists, exclusions and per-collective entries
 * (algo_select.h).  Pure string work: the fuzz target links it. */
#include "ring/algo_select.h"
#include "ring/schedule.h"
#include "ring/tuning.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* NCCL_ALGO's collective names; index 0 is the all-reduce. */
static const char *const colls[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter"};
#define NCOLLS (int)(sizeof colls / sizeof colls[0])
#define AG 3 /* colls[AG]: the all-gather */
#define RED 2 /* colls[RED]: the reduce */

/* s..s+n without the blanks at either end. */
static void trim(const char **s, size_t *n) {
  while (*n > 0 && (**s == ' ' || **s == '\t')) (*s)++, (*n)--;
  while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t')) (*n)--;
}

static int algo_of(const char *s, size_t n) {
  for (int a = 0; a < KOLO_ALGO_NUM; a++)
    if (strlen(kolo_algo_name(a)) == n && strncasecmp(s, kolo_algo_name(a), n) == 0) return a;
  return -1;
}

static int coll_of(const char *s, size_t n) {
  for (int k = 0; k < NCOLLS; k++)
    if (strlen(colls[k]) == n && strncasecmp(s, colls[k], n) == 0) return k;
  return -1;
}

static int refuse(const char *v, char *why, size_t why_len, const char *what, const char *s, size_t n) {
  snprintf(why, why_len, "KOLO_ALGO \"%s\": %s \"%.*s\"", v, what, (int)(n > 64 ? 64 : n), s);
  return -1;
}

/* The set one list gives ("^rd" or "ring,rd"), or -1. */
static int list_set(const char *v, const char *s, size_t n, char *why, size_t why_len) {
  trim(&s, &n);
  int exclude = n > 0 && *s == '^';
  unsigned set = 0;
  for (const char *p = s + exclude, *end = s + n; p <= end;) {
    size_t k = (size_t)(end - p), m = k;
    const char *comma = memchr(p, ',', k);
    if (comma) m = (size_t)(comma - p);
    const char *name = p;
    trim(&name, &m);
    int a = algo_of(name, m);
    if (a < 0)
      return refuse(v, why, why_len, "no algorithm (kolo has ring, hier, rd, rabenseifner, tree, direct, bruck, dbtree, oneshot) named",
                    name, m);
    set |= 1u << a;
    p = comma ? comma + 1 : end + 1;
  }
  return (int)(exclude ? KOLO_ALGO_ALL & ~set : set);
}

/* -1 with a sentence when a list without a collective (the all-reduce's)
 * names only other collectives' algorithms: "tree" alone, "bruck" alone. */
static int bare_other(const char *v, int set, char *why, size_t why_len) {
  if (set == 0 || (set & (int)KOLO_ALGO_ALL_REDUCE_SET) != 0) return 0;
  int a = 0;
  while (!((set >> a) & 1)) a++;
  const int bcast = (KOLO_ALGO_BCAST_SET >> a) & 1u;
  const char *name = kolo_algo_name(a);
  char what[200];
  snprintf(what, sizeof what,
           "kolo's %s is %s algorithm, and an entry without a collective is the all-reduce's: write %s:%s, not",
           name, bcast ? "a broadcast" : "an all-gather", bcast ? "broadcast" : "allgather", name);
  return refuse(v, why, why_len, what, name, strlen(name));
}

/* One entry into masks[] (the all-reduce's when it names no collective). */
static int entry(const char *v, const char *s, size_t n, int masks[], char *why, size_t why_len) {
  const char *colon = memchr(s, ':', n);
  int k = -1;
  if (colon) {
    size_t cn = (size_t)(colon - s), head = cn + 1;
    const char *c = s;
    trim(&c, &cn);
    if ((k = coll_of(c, cn)) < 0)
      return refuse(v, why, why_len, "no collective (allreduce, broadcast, reduce, allgather, reducescatter) named", c,
                    cn);
    s += head;
    n -= head;
  }
  int set = list_set(v, s, n, why, why_len);
  if (set < 0) return -1;
  trim(&s, &n);
  if (k <= 0 && *s != '^' && bare_other(v, set, why, why_len) < 0) return -1;
  masks[k < 0 ? 0 : k] = set; /* no collective: the all-reduce's, the only choice */
  return 0;
}

/* The all-reduce's set keeps its own algorithms; the broadcast has the
 * chain ("ring") and the two trees, the reduce the chain and the binomial
 * tree, the all-gather the ring and Bruck's; every other collective runs
 * the ring only. */
static int check_masks(const char *v, const int masks[], char *why, size_t why_len) {
  if (masks[0] >= 0 && (masks[0] & (int)KOLO_ALGO_ALL_REDUCE_SET) == 0)
    return refuse(v, why, why_len, "leaves no algorithm for", colls[0], strlen(colls[0]));
  if (masks[1] >= 0 && (masks[1] & (int)KOLO_ALGO_BCAST_SET) == 0)
    return refuse(v, why, why_len, "leaves neither the ring (chain) nor a tree for", colls[1], strlen(colls[1]));
  if (masks[AG] >= 0 && (masks[AG] & (int)KOLO_ALGO_AG_SET) == 0)
    return refuse(v, why, why_len, "leaves neither the ring nor bruck for", colls[AG], strlen(colls[AG]));
  if (masks[RED] >= 0 && (masks[RED] & (int)KOLO_ALGO_REDUCE_SET) == 0)
    return refuse(v, why, why_len, "leaves neither the ring (chain) nor a tree for", colls[RED], strlen(colls[RED]));
  for (int k = 2; k < NCOLLS; k++)
    if (k != AG && k != RED && masks[k] >= 0 && !(masks[k] & (1 << KOLO_ALGO_RING)))
      return refuse(v, why, why_len, "leaves out the ring, the only algorithm kolo has for", colls[k],
                    strlen(colls[k]));
  return 0;
}

int kolo_algo_allow_parse_sets(const char *v, kolo_algo_sets *out, char *why, size_t why_len) {
  out->all_reduce = out->broadcast = out->all_gather = out->reduce = 0;
  if (v == NULL || *v == '\0') return 0;
  int masks[NCOLLS] = {-1, -1, -1, -1, -1}; /* -1: no entry */
  for (const char *p = v, *end = v + strlen(v); p <= end;) {
    const char *semi = memchr(p, ';', (size_t)(end - p));
    size_t n = semi ? (size_t)(semi - p) : (size_t)(end - p);
    if (entry(v, p, n, masks, why, why_len) < 0) return -1;
    p = semi ? semi + 1 : end + 1;
  }
  if (check_masks(v, masks, why, why_len) < 0) return -1;
  out->all_reduce = masks[0] < 0 ? 0 : (unsigned)masks[0] & KOLO_ALGO_ALL_REDUCE_SET;
  out->broadcast = masks[1] < 0 ? 0 : (unsigned)masks[1] & KOLO_ALGO_BCAST_SET;
  out->all_gather = masks[AG] < 0 ? 0 : (unsigned)masks[AG] & KOLO_ALGO_AG_SET;
  out->reduce = masks[RED] < 0 ? 0 : (unsigned)masks[RED] & KOLO_ALGO_REDUCE_SET;
  return 0;
}

int kolo_algo_allow_parse(const char *v, char *why, size_t why_len) {
  kolo_algo_sets sets;
  if (kolo_algo_allow_parse_sets(v, &sets, why, why_len) < 0) return -1;
  return (int)sets.all_reduce;
}

int kolo_algo_allow_single(unsigned allowed) {
  for (int a = 0; a < KOLO_ALGO_NUM; a++)
    if (allowed == 1u << a) return a;
  return KOLO_ALGO_AUTO;
}

int kolo_algo_may_run(const kolo_algo_topo *t, int algo) {
  if (algo < 0 || algo >= KOLO_ALGO_NUM || !((KOLO_ALGO_ALL_REDUCE_SET >> algo) & 1u)) return 0;
  if (t->allowed != 0) return (t->allowed >> algo) & 1u;
  /* a tuning file's override names it (on a CUDA communicator, one that
   * says its memory kind: measured on a GPU) */
  const int measured =
      t->tuned != NULL && kolo_tuned_names(t->tuned, KOLO_COLL_ALL_REDUCE, algo, t->nranks, t->no_auto_peers);
  if (algo == KOLO_ALGO_DIRECT || algo == KOLO_ALGO_ONESHOT) return measured; /* by name only: algo.h */
  return !(t->no_auto_peers && kolo_algo_is_multi_peer(algo)) || measured;
}

const char *kolo_algo_allow_text(unsigned allowed, char *out, size_t len) {
  if (allowed == 0 || len == 0) return "all";
  size_t at = 0;
  out[0] = '\0';
  for (int a = 0; a < KOLO_ALGO_NUM && at < len; a++)
    if ((allowed >> a) & 1u) at += (size_t)snprintf(out + at, len - at, "%s%s", at ? "," : "", kolo_algo_name(a));
  return out;
}
