/* algo_log.c - KOLO_DEBUG=INFO: each all-reduce choice (algorithm and
 * channels), broadcast and all-gather choice, once per shape.
 *
 * A communicator's rank count is fixed, so a shape is the size bucket
 * (the power of two at or below the call's bytes): one bit of
 * c->algo_logged (bcast_logged, ag_logged) each.  Rank 0 says it: every
 * rank chooses alike. */
#include <stdatomic.h>
#include <stdio.h>

#include "common/log.h"
#include "core/comm.h"
#include "ring/algo_select.h"
#include "ring/tuning.h"

static int bucket(size_t bytes) {
  int b = 0;
  while (b < 63 && (bytes >> (b + 1)) != 0) b++;
  return b;
}

/* " ring 12.1 us, rd 6.3 us" for every algorithm the model weighed. */
static void costs(const struct koloComm *c, size_t bytes, int channels, char *out, size_t len) {
  size_t at = 0;
  out[0] = '\0';
  for (int a = 0; a < KOLO_ALGO_NUM && at < len; a++) {
    if (!kolo_algo_may_run(&c->algo, a) || (a == KOLO_ALGO_HIER && !c->hier_ready)) continue;
    double us = kolo_algo_cost(a, &c->algo, bytes, channels) * 1e6;
    at += (size_t)snprintf(out + at, len - at, "%s%s %.1f us", at ? ", " : "", kolo_algo_name(a), us);
  }
}

void kolo_comm_log_choice(struct koloComm *c, size_t bytes, int channels, int algo) {
  if (c->rank != 0 || kolo_log_level() < KOLO_LOG_INFO) return;
  uint64_t bit = 1ull << bucket(bytes);
  if (atomic_fetch_or(&c->algo_logged, bit) & bit) return;
  char why[256];
  costs(c, bytes, channels, why, sizeof why);
  const int over = c->algo.tuned != NULL && kolo_tuned_override(c->algo.tuned, KOLO_COLL_ALL_REDUCE, bytes, c->nranks) == algo;
  const char *how = c->algo.forced != KOLO_ALGO_AUTO ? "; forced by KOLO_ALGO"
                    : over                            ? "; a KOLO_TUNING_FILE override"
                    : c->algo.tuned                   ? "; KOLO_TUNING_FILE's constants"
                                                      : "";
  const char *ch_how = kolo_tuned_channels(c->algo.tuned, KOLO_COLL_ALL_REDUCE, bytes, c->nranks) > 0
                           ? " (a KOLO_TUNING_FILE channels line)"
                           : "";
  KOLO_INFO("all-reduce of %zu B on %d ranks: %s (cost %s%s), %d channel%s%s", bytes, c->nranks, kolo_algo_name(algo),
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

static void log_some(struct koloComm *c, _Atomic uint64_t *logged, const some_algos *w, size_t bytes, int channels,
                     int algo) {
  if (c->rank != 0 || kolo_log_level() < KOLO_LOG_INFO) return;
  uint64_t bit = 1ull << bucket(bytes);
  if (atomic_fetch_or(logged, bit) & bit) return;
  char why[160] = "";
  size_t at = 0;
  int chosen = 0;
  for (int i = 0; i < w->nalgos; i++) {
    if (algo == w->algos[i]) chosen = i;
    if (!w->may_run(&c->algo, w->algos[i])) continue;
    double us = w->cost(w->algos[i], &c->algo, bytes, channels) * 1e6;
    at += (size_t)snprintf(why + at, sizeof why - at, "%s%s %.1f us", at ? ", " : "", w->names[i], us);
  }
  const int over = c->algo.tuned != NULL && kolo_tuned_override(c->algo.tuned, w->kind, bytes, c->nranks) == algo;
  const char *how = kolo_algo_allow_single(w->allowed) != KOLO_ALGO_AUTO ? "; forced by KOLO_ALGO"
                    : over                                                ? "; a KOLO_TUNING_FILE override"
                                                                          : "";
  KOLO_INFO("%s of %zu B%s on %d ranks: %s (cost %s%s)", w->coll, bytes, w->per, c->nranks, w->names[chosen], why,
            how);
}

/* The broadcast and the reduce: the chain and the two trees. */
static some_algos chain_and_trees(int kind, const char *coll, unsigned allowed,
                                  int (*may_run)(const kolo_algo_topo *t, int algo),
                                  double (*cost)(int algo, const kolo_algo_topo *t, size_t bytes, int channels)) {
  return (some_algos){kind, coll, "", 3, {KOLO_ALGO_RING, KOLO_ALGO_TREE, KOLO_ALGO_DBTREE},
                      {"chain", "tree", "dbtree"}, allowed, may_run, cost};
}

void kolo_comm_log_bcast_choice(struct koloComm *c, size_t bytes, int channels, int algo) {
  const some_algos w =
      chain_and_trees(KOLO_COLL_BROADCAST, "broadcast", c->algo.bcast_allowed, kolo_bcast_may_run, kolo_bcast_cost);
  log_some(c, &c->bcast_logged, &w, bytes, channels, algo);
}

void kolo_comm_log_ag_choice(struct koloComm *c, size_t bytes, int channels, int algo) {
  const some_algos w = {KOLO_COLL_ALL_GATHER, "all-gather",     " per rank", 2, {KOLO_ALGO_RING, KOLO_ALGO_BRUCK, 0},
                        {"ring", "bruck", ""}, c->algo.ag_allowed, kolo_ag_may_run, kolo_ag_cost};
  log_some(c, &c->ag_logged, &w, bytes, channels, algo);
}

void kolo_comm_log_reduce_choice(struct koloComm *c, size_t bytes, int channels, int algo) {
  const some_algos w =
      chain_and_trees(KOLO_COLL_REDUCE, "reduce", c->algo.reduce_allowed, kolo_reduce_may_run, kolo_reduce_cost);
  log_some(c, &c->reduce_logged, &w, bytes, channels, algo);
}
