/* algo_log.c - see algo_log.h.  Beside the cost model, whose figures it
 * prints, so that the choice and its explanation read one model. */
#include "ring/algo_log.h"

#include <stdio.h>

#include "common/log.h"
#include "ring/algo_select.h"
#include "ring/schedule.h"
#include "ring/tuning.h"

static int bucket(size_t bytes) {
  int b = 0;
  while (b < 63 && (bytes >> (b + 1)) != 0) b++;
  return b;
}

/* " ring 12.1 us, rd 6.3 us" for every algorithm the model weighed. */
static void costs(const kolo_algo_topo *t, int hier_ready, size_t bytes, int channels, char *out, size_t len) {
  size_t at = 0;
  out[0] = '\0';
  for (int a = 0; a < KOLO_ALGO_NUM && at < len; a++) {
    if (!kolo_algo_may_run(t, a) || (a == KOLO_ALGO_HIER && !hier_ready)) continue;
    double us = kolo_algo_cost(a, t, bytes, channels) * 1e6;
    at += (size_t)snprintf(out + at, len - at, "%s%s %.1f us", at ? ", " : "", kolo_algo_name(a), us);
  }
}

/* Whether this shape's choice is still to be said: the first caller of a
 * bucket takes its bit. */
static int first_of(_Atomic uint64_t *logged, size_t bytes) {
  if (kolo_log_level() < KOLO_LOG_INFO) return 0;
  uint64_t bit = 1ull << bucket(bytes);
  return !(atomic_fetch_or(logged, bit) & bit);
}

void kolo_algo_log_choice(kolo_algo_logged *l, const kolo_algo_topo *t, int hier_ready, size_t bytes, int channels,
                          int algo) {
  if (!first_of(&l->all_reduce, bytes)) return;
  char why[256];
  costs(t, hier_ready, bytes, channels, why, sizeof why);
  const int over = t->tuned != NULL && kolo_tuned_override(t->tuned, KOLO_COLL_ALL_REDUCE, bytes, t->nranks) == algo;
  const char *how = t->forced != KOLO_ALGO_AUTO ? "; forced by KOLO_ALGO"
                    : over                       ? "; a KOLO_TUNING_FILE override"
                    : t->tuned                   ? "; KOLO_TUNING_FILE's constants"
                                                 : "";
  const char *ch_how = kolo_tuned_channels(t->tuned, KOLO_COLL_ALL_REDUCE, bytes, t->nranks) > 0
                           ? " (a KOLO_TUNING_FILE channels line)"
                           : "";
  KOLO_INFO("all-reduce of %zu B on %d ranks: %s (cost %s%s), %d channel%s%s", bytes, t->nranks, kolo_algo_name(algo),
            why, how, channels, channels == 1 ? "" : "s", ch_how);
}

/* A collective with the ring and one or two others: the broadcast, the
 * all-gather. */
typedef struct {
  int kind;                /* KOLO_COLL_BROADCAST, KOLO_COLL_ALL_GATHER, KOLO_COLL_REDUCE */
  const char *coll, *per;  /* "broadcast", and what its bytes are of */
  int nalgos;              /* 2 or 3 */
  int algos[3];            /* KOLO_ALGO_RING, the others */
  const char *names[3];    /* what the log calls them: "chain", "tree", "dbtree" */
  unsigned allowed;        /* KOLO_ALGO's set for the collective */
  int (*may_run)(const kolo_algo_topo *t, int algo);
  double (*cost)(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
} some_algos;

static void log_some(const kolo_algo_topo *t, _Atomic uint64_t *logged, const some_algos *w, size_t bytes,
                     int channels, int algo) {
  if (!first_of(logged, bytes)) return;
  char why[160] = "";
  size_t at = 0;
  int chosen = 0;
  for (int i = 0; i < w->nalgos; i++) {
    if (algo == w->algos[i]) chosen = i;
    if (!w->may_run(t, w->algos[i])) continue;
    double us = w->cost(w->algos[i], t, bytes, channels) * 1e6;
    at += (size_t)snprintf(why + at, sizeof why - at, "%s%s %.1f us", at ? ", " : "", w->names[i], us);
  }
  const int over = t->tuned != NULL && kolo_tuned_override(t->tuned, w->kind, bytes, t->nranks) == algo;
  const char *how = kolo_algo_allow_single(w->allowed) != KOLO_ALGO_AUTO ? "; forced by KOLO_ALGO"
                    : over                                                ? "; a KOLO_TUNING_FILE override"
                                                                          : "";
  KOLO_INFO("%s of %zu B%s on %d ranks: %s (cost %s%s)", w->coll, bytes, w->per, t->nranks, w->names[chosen], why,
            how);
}

/* The broadcast and the reduce: the chain and the two trees. */
static some_algos chain_and_trees(int kind, const char *coll, unsigned allowed,
                                  int (*may_run)(const kolo_algo_topo *t, int algo),
                                  double (*cost)(int algo, const kolo_algo_topo *t, size_t bytes, int channels)) {
  return (some_algos){kind, coll, "", 3, {KOLO_ALGO_RING, KOLO_ALGO_TREE, KOLO_ALGO_DBTREE},
                      {"chain", "tree", "dbtree"}, allowed, may_run, cost};
}

void kolo_algo_log_bcast_choice(kolo_algo_logged *l, const kolo_algo_topo *t, size_t bytes, int channels, int algo) {
  const some_algos w =
      chain_and_trees(KOLO_COLL_BROADCAST, "broadcast", t->bcast_allowed, kolo_bcast_may_run, kolo_bcast_cost);
  log_some(t, &l->bcast, &w, bytes, channels, algo);
}

void kolo_algo_log_ag_choice(kolo_algo_logged *l, const kolo_algo_topo *t, size_t bytes, int channels, int algo) {
  const some_algos w = {KOLO_COLL_ALL_GATHER, "all-gather",     " per rank", 2, {KOLO_ALGO_RING, KOLO_ALGO_BRUCK, 0},
                        {"ring", "bruck", ""}, t->ag_allowed, kolo_ag_may_run, kolo_ag_cost};
  log_some(t, &l->ag, &w, bytes, channels, algo);
}

void kolo_algo_log_reduce_choice(kolo_algo_logged *l, const kolo_algo_topo *t, size_t bytes, int channels, int algo) {
  const some_algos w =
      chain_and_trees(KOLO_COLL_REDUCE, "reduce", t->reduce_allowed, kolo_reduce_may_run, kolo_reduce_cost);
  log_some(t, &l->reduce, &w, bytes, channels, algo);
}
