/* algo.c - the all-reduce algorithm choice (see algo.h). */
#include "ring/algo.h"

#include <string.h>

#include "ring/algo_select.h"
#include "ring/doubling.h"
#include "ring/schedule.h"
#include "ring/tuning.h"

/* Modelled links: shared memory within a host, a 25 Gb/s-class network
 * between hosts.  Only their ratios matter to the choice. */
#define A_HOST 1e-6
#define B_HOST 20e9
#define A_NET 10e-6
#define B_NET 3e9
/* The direct all-reduce's exchanges beyond the first of each phase, in
 * units of a dependent step: its sends and receives do not wait on one
 * another, but each costs the work of handing a slot over. */
#define DIRECT_STEP 0.5

/* The link constants the model reads: a tuning file's (ring/tuning.h)
 * where the communicator loaded one with them, else the compiled ones
 * above (tuning hook). */
typedef struct {
  double a_host, b_host, a_net, b_net;
} links;

static double tuned_or(double v, double def) { return v > 0 ? v : def; }

static links links_of(const kolo_algo_topo *t) {
  links l = {A_HOST, B_HOST, A_NET, B_NET};
  if (t->tuned == NULL) return l;
  return (links){tuned_or(t->tuned->a_host, l.a_host), tuned_or(t->tuned->b_host, l.b_host),
                 tuned_or(t->tuned->a_net, l.a_net), tuned_or(t->tuned->b_net, l.b_net)};
}

static const char *const names[KOLO_ALGO_NUM] = {"ring",   "hier",  "rd",     "rabenseifner", "tree",
                                                 "direct", "bruck", "dbtree", "oneshot"};

int kolo_algo_parse(const char *s) {
  if (s == NULL || *s == '\0') return KOLO_ALGO_AUTO;
  for (int a = 0; a < KOLO_ALGO_NUM; a++)
    if (strcmp(s, names[a]) == 0) return a;
  return -2;
}

const char *kolo_algo_name(int algo) { return algo >= 0 && algo < KOLO_ALGO_NUM ? names[algo] : "auto"; }

const char *kolo_algo_names(void) { return "ring, hier, rd, rabenseifner, tree, direct, bruck, dbtree or oneshot"; }

int kolo_algo_is_multi_peer(int algo) {
  return algo == KOLO_ALGO_RD || algo == KOLO_ALGO_RABENSEIFNER || algo == KOLO_ALGO_TREE || algo == KOLO_ALGO_DIRECT ||
         algo == KOLO_ALGO_BRUCK || algo == KOLO_ALGO_DBTREE || algo == KOLO_ALGO_ONESHOT;
}

int kolo_algo_hier_possible(const kolo_algo_topo *t) {
  return t->nhosts >= 2 && t->local >= 2 && t->nhosts * t->local == t->nranks;
}

/* The flat algorithms: steps of latency a, memory passes (bytes read and
 * written per rank, in units of S) at the host's rate, and, across hosts,
 * the bytes a rank sends over the network (algo.h). */
typedef struct {
  double steps, passes, sent;
} flat_shape;

static flat_shape ring_shape(double n) {
  return (flat_shape){2 * (n - 1), (6 * n - 4) / n, 2 * (n - 1) / n};
}

/* p the largest power of two <= n, k = log2 p, f = 1 when ranks fold. */
static flat_shape doubling_shape(int algo, int n) {
  const int p = kolo_pow2_floor(n), k = kolo_log2(p), f = p < n;
  if (algo == KOLO_ALGO_DIRECT) return (flat_shape){2 + DIRECT_STEP * (n - 2), 9.0 * (n - 1) / n, 2.0 * (n - 1) / n};
  /* one exchange; every rank reads its input n times (n - 1 sends and its
   * fold), and folds n - 1 received chunks into scratch (3 passes each) */
  if (algo == KOLO_ALGO_ONESHOT) return (flat_shape){1 + DIRECT_STEP * (n - 2), 5.0 * n - 3, n - 1.0};
  if (algo == KOLO_ALGO_RD) return (flat_shape){k + 2.0 * f, 5.0 * (k + f), k + (double)f};
  return (flat_shape){2.0 * k + 2 * f, 9.0 * (p - 1) / p + 5 * f, 2.0 * (p - 1) / p + f};
}

static double flat_cost(const kolo_algo_topo *t, flat_shape x, double S, int spread) {
  const links l = links_of(t);
  if (t->nhosts <= 1) return x.steps * l.a_host + x.passes * S / l.b_host;
  return x.steps * l.a_net + x.passes * S / l.b_host + x.sent * S / (l.b_net * spread);
}

static double hier_cost(const kolo_algo_topo *t, double S) {
  const links l = links_of(t);
  double H = t->nhosts, L = t->local;
  return 2 * H * (L - 1) * l.a_host + 2 * (H - 1) * l.a_net + 2 * (L - 1) / L * S / l.b_host +
         2 * (H - 1) / H * (S / L) / l.b_net;
}

double kolo_algo_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels) {
  if (algo == KOLO_ALGO_HIER) return hier_cost(t, (double)bytes);
  if (t->nranks <= 1) return 0;
  if (kolo_algo_is_multi_peer(algo)) return flat_cost(t, doubling_shape(algo, t->nranks), (double)bytes, 1);
  /* off-host senders per host: channels rotate over the ranks of a host */
  int spread = t->local > 0 && channels > t->local ? t->local : channels;
  return flat_cost(t, ring_shape(t->nranks), (double)bytes, spread < 1 ? 1 : spread);
}

/* Latency and bandwidth of the ring's slowest hop, and how many of a
 * host's ranks share the off-host traffic (kolo_algo_cost's ring). */
static void ring_links(const kolo_algo_topo *t, int channels, double *a, double *b) {
  int multi = t->nhosts > 1;
  int spread = t->local > 0 && channels > t->local ? t->local : channels;
  if (!multi || spread < 1) spread = 1;
  const links l = links_of(t);
  *a = multi ? l.a_net : l.a_host;
  *b = (multi ? l.b_net : l.b_host) * spread;
}

/* One hop of S bytes: send, recv. */
static double one_hop(const kolo_algo_topo *t, double S) {
  const links l = links_of(t);
  return t->nhosts > 1 ? l.a_net + S / l.b_net : l.a_host + S / l.b_host;
}

double kolo_coll_cost(int coll, const kolo_algo_topo *t, size_t bytes, int channels) {
  if (t->nranks <= 1) return 0;
  if (coll == KOLO_COLL_ALL_REDUCE)
    return kolo_algo_cost(kolo_algo_choose(t, bytes, channels), t, bytes, channels);
  double S = (double)bytes, n = t->nranks, a, b;
  ring_links(t, channels, &a, &b);
  switch (coll) {
  case KOLO_COLL_BROADCAST: return kolo_bcast_cost(kolo_bcast_choose(t, bytes, channels), t, bytes, channels);
  case KOLO_COLL_ALL_GATHER: return kolo_ag_cost(kolo_ag_choose(t, bytes, channels), t, bytes, channels);
  case KOLO_COLL_REDUCE: return kolo_reduce_cost(kolo_reduce_choose(t, bytes, channels), t, bytes, channels);
  case KOLO_COLL_SEND:
  case KOLO_COLL_RECV: return one_hop(t, S);
  default: return (n - 1) * a + (n - 1) * S / b; /* reduce-scatter, all-to-all, gather, scatter */
  }
}

/* 1 when all-reduce algorithm a can run on t: hier on hosts alike, direct
 * and one-shot within one host (it needs a pipe between every two ranks: on a network,
 * n-1 queue pairs per rank and channel). */
int kolo_algo_possible(const kolo_algo_topo *t, int a) {
  if (a == KOLO_ALGO_HIER) return kolo_algo_hier_possible(t);
  if (a == KOLO_ALGO_DIRECT || a == KOLO_ALGO_ONESHOT) return t->nhosts <= 1;
  return a >= 0 && a < KOLO_ALGO_NUM && ((KOLO_ALGO_ALL_REDUCE_SET >> a) & 1u);
}

int kolo_algo_choose(const kolo_algo_topo *t, size_t bytes, int channels) {
  if (t->forced != KOLO_ALGO_AUTO) return kolo_algo_possible(t, t->forced) ? t->forced : KOLO_ALGO_RING;
  int o = t->tuned ? kolo_tuned_override(t->tuned, KOLO_COLL_ALL_REDUCE, bytes, t->nranks) : -1; /* tuning hook */
  if (o >= 0 && kolo_algo_possible(t, o) && kolo_algo_may_run(t, o)) return o;
  int best = KOLO_ALGO_RING; /* also when KOLO_ALGO's set leaves nothing possible */
  double best_cost = -1;
  for (int a = KOLO_ALGO_RING; a < KOLO_ALGO_NUM; a++) {
    if (!kolo_algo_possible(t, a) || !kolo_algo_may_run(t, a)) continue; /* tuning hook: KOLO_ALGO's set */
    double c = kolo_algo_cost(a, t, bytes, channels);
    if (best_cost < 0 || c < best_cost) {
      best = a;
      best_cost = c;
    }
  }
  return best;
}

/* ---- broadcast: the chain, the binomial tree or the double binary tree
 * (algo.h).  The tree's k = ceil(log2 n) hops each cost a step's latency,
 * and a rank with k children sends every byte k times (the root does);
 * its hops reach ranks 2^j away, on other hosts as often as not, so with
 * several hosts they are network hops, and only the sender's link carries
 * them.  The double binary tree takes one hop more (the root hands each
 * tree to its top), and a rank sends every byte of its inner tree twice:
 * half the bytes when the channels carry both trees. */

/* ceil(log2 n), n >= 1. */
static int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

double kolo_bcast_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels) {
  if (t->nranks <= 1) return 0;
  double S = (double)bytes, n = t->nranks, a, b;
  if (algo != KOLO_ALGO_TREE && algo != KOLO_ALGO_DBTREE) {
    ring_links(t, channels, &a, &b);
    return (n - 1) * a + S / b;
  }
  double k = ceil_log2(t->nranks);
  const links l = links_of(t);
  a = t->nhosts > 1 ? l.a_net : l.a_host;
  b = t->nhosts > 1 ? l.b_net : l.b_host;
  if (algo == KOLO_ALGO_DBTREE) return (k + 1) * a + (channels >= 2 ? 1 : 2) * S / b;
  return k * a + k * S / b;
}

/* 1 when a tuning file's override of coll names algo for t (on a CUDA
 * communicator, a line that says its memory kind: measured there). */
static int measured(const kolo_algo_topo *t, int coll, int algo) {
  return t->tuned != NULL && kolo_tuned_names(t->tuned, coll, algo, t->nranks, t->no_auto_peers);
}

/* The trees only where KOLO_ALGO's broadcast entry allows them, or where
 * it has none and a tuning file's override names them (algo.h: the
 * binomial tree lost to the chain wherever it was measured here). */
int kolo_bcast_may_run(const kolo_algo_topo *t, int algo) {
  if (algo < 0 || algo >= KOLO_ALGO_NUM || !((KOLO_ALGO_BCAST_SET >> algo) & 1u)) return 0;
  if (t->bcast_allowed == 0) return algo == KOLO_ALGO_RING || measured(t, KOLO_COLL_BROADCAST, algo);
  return (t->bcast_allowed >> algo) & 1u;
}

/* A collective with the ring and one other algorithm `other` (the
 * broadcast's tree, the all-gather's Bruck's): `other` where the ring may
 * not run (forced), the ring on 2 ranks (the same hop) or where `other`
 * may not run, else the cheaper. */
typedef int (*may_run_fn)(const kolo_algo_topo *t, int algo);
typedef double (*cost_fn)(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
static int ring_or(int other, may_run_fn may, cost_fn cost, const kolo_algo_topo *t, size_t bytes, int channels) {
  if (!may(t, KOLO_ALGO_RING)) return other;
  if (t->nranks <= 2 || !may(t, other)) return KOLO_ALGO_RING;
  return cost(other, t, bytes, channels) < cost(KOLO_ALGO_RING, t, bytes, channels) ? other : KOLO_ALGO_RING;
}

/* The algorithm a tuning file's override gives a call of coll where it
 * may run, else -1. */
static int overridden(const kolo_algo_topo *t, int coll, may_run_fn may, size_t bytes) {
  int o = t->tuned != NULL ? kolo_tuned_override(t->tuned, coll, bytes, t->nranks) : -1;
  return o >= 0 && may(t, o) ? o : -1;
}

/* The cheaper tree the entry allows (the binomial one where it allows
 * neither: ring_or then keeps the chain). */
static int cheaper_tree(const kolo_algo_topo *t, may_run_fn may, cost_fn cost, size_t bytes, int channels) {
  if (may(t, KOLO_ALGO_DBTREE) &&
      (!may(t, KOLO_ALGO_TREE) || cost(KOLO_ALGO_DBTREE, t, bytes, channels) < cost(KOLO_ALGO_TREE, t, bytes, channels)))
    return KOLO_ALGO_DBTREE;
  return KOLO_ALGO_TREE;
}

/* An override's algorithm where it may run; else ring_or's choice between
 * the chain and the cheaper tree. */
int kolo_bcast_choose(const kolo_algo_topo *t, size_t bytes, int channels) {
  int o = overridden(t, KOLO_COLL_BROADCAST, kolo_bcast_may_run, bytes);
  if (o >= 0) return o;
  return ring_or(cheaper_tree(t, kolo_bcast_may_run, kolo_bcast_cost, bytes, channels), kolo_bcast_may_run,
                 kolo_bcast_cost, t, bytes, channels);
}

/* ---- reduce: the chain or the binomial tree, the broadcast's shapes
 * walked the other way (the tree's rank adds what it receives; the
 * modelled bytes are the same). */

double kolo_reduce_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels) {
  return kolo_bcast_cost(algo == KOLO_ALGO_TREE || algo == KOLO_ALGO_DBTREE ? algo : KOLO_ALGO_RING, t, bytes,
                         channels);
}

/* The trees only where KOLO_ALGO's reduce entry allows them, or where it
 * has none and a tuning file's override names them (as the broadcast's). */
int kolo_reduce_may_run(const kolo_algo_topo *t, int algo) {
  if (algo < 0 || algo >= KOLO_ALGO_NUM || !((KOLO_ALGO_REDUCE_SET >> algo) & 1u)) return 0;
  if (t->reduce_allowed == 0) return algo == KOLO_ALGO_RING || measured(t, KOLO_COLL_REDUCE, algo);
  return (t->reduce_allowed >> algo) & 1u;
}

int kolo_reduce_choose(const kolo_algo_topo *t, size_t bytes, int channels) {
  int o = overridden(t, KOLO_COLL_REDUCE, kolo_reduce_may_run, bytes);
  if (o >= 0) return o;
  return ring_or(cheaper_tree(t, kolo_reduce_may_run, kolo_reduce_cost, bytes, channels), kolo_reduce_may_run,
                 kolo_reduce_cost, t, bytes, channels);
}

/* ---- all-gather: the ring or Bruck's (algo.h).  Bruck's k = ceil(log2 n)
 * levels each cost a step's latency; its peers lie 2^j away, on other
 * hosts as often as not (network links, as the tree's), and each of the
 * n-2 blocks it forwards costs one more pass over memory than the ring's
 * recvCopySend (received into out, read back to send). */

double kolo_ag_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels) {
  if (t->nranks <= 1) return 0;
  double S = (double)bytes, n = t->nranks, a, b;
  if (algo != KOLO_ALGO_BRUCK) {
    ring_links(t, channels, &a, &b);
    return (n - 1) * a + (n - 1) * S / b;
  }
  const links l = links_of(t);
  a = t->nhosts > 1 ? l.a_net : l.a_host;
  b = t->nhosts > 1 ? l.b_net : l.b_host;
  return ceil_log2(t->nranks) * a + (n - 1) * S / b + (n - 2) * S / l.b_host;
}

/* Bruck's where KOLO_ALGO's allgather entry allows it, or, without one,
 * on host communicators (algo.h: measured faster at small sizes from 4
 * ranks up). */
int kolo_ag_may_run(const kolo_algo_topo *t, int algo) {
  if (algo != KOLO_ALGO_RING && algo != KOLO_ALGO_BRUCK) return 0;
  if (t->ag_allowed == 0)
    return algo == KOLO_ALGO_RING || !t->no_auto_peers || measured(t, KOLO_COLL_ALL_GATHER, algo);
  return (t->ag_allowed >> algo) & 1u;
}

int kolo_ag_choose(const kolo_algo_topo *t, size_t bytes, int channels) {
  int o = overridden(t, KOLO_COLL_ALL_GATHER, kolo_ag_may_run, bytes);
  return o >= 0 ? o : ring_or(KOLO_ALGO_BRUCK, kolo_ag_may_run, kolo_ag_cost, t, bytes, channels);
}
