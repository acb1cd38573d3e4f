/* algo.c - the all-reduce algorithm choice (see algo.h). */
#include "ring/algo.h"

#include <string.h>

#include "ring/schedule.h"

/* Modelled links: shared memory within a host, a 25 Gb/s-class network
 * between hosts.  Only their ratios matter to the choice. */
#define A_HOST 1e-6
#define B_HOST 20e9
#define A_NET 10e-6
#define B_NET 3e9

int kolo_algo_parse(const char *s) {
  if (s == NULL || *s == '\0') return KOLO_ALGO_AUTO;
  if (strcmp(s, "ring") == 0) return KOLO_ALGO_RING;
  if (strcmp(s, "hier") == 0) return KOLO_ALGO_HIER;
  return -2;
}

const char *kolo_algo_name(int algo) {
  return algo == KOLO_ALGO_RING ? "ring" : algo == KOLO_ALGO_HIER ? "hier" : "auto";
}

int kolo_algo_hier_possible(const kolo_algo_topo *t) {
  return t->nhosts >= 2 && t->local >= 2 && t->nhosts * t->local == t->nranks;
}

double kolo_algo_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels) {
  double S = (double)bytes, n = t->nranks;
  if (algo == KOLO_ALGO_HIER) {
    double H = t->nhosts, L = t->local;
    return 2 * H * (L - 1) * A_HOST + 2 * (H - 1) * A_NET + 2 * (L - 1) / L * S / B_HOST +
           2 * (H - 1) / H * (S / L) / B_NET;
  }
  if (t->nranks <= 1) return 0;
  int multi = t->nhosts > 1;
  double a = multi ? A_NET : A_HOST, b = multi ? B_NET : B_HOST;
  /* off-host senders per host: channels rotate over the ranks of a host */
  int spread = t->local > 0 && channels > t->local ? t->local : channels;
  if (!multi || spread < 1) spread = 1;
  return 2 * (n - 1) * a + 2 * (n - 1) / n * S / (b * spread);
}

/* Latency and bandwidth of the ring's slowest hop, and how many of a
 * host's ranks share the off-host traffic (kolo_algo_cost's ring). */
static void ring_links(const kolo_algo_topo *t, int channels, double *a, double *b) {
  int multi = t->nhosts > 1;
  int spread = t->local > 0 && channels > t->local ? t->local : channels;
  if (!multi || spread < 1) spread = 1;
  *a = multi ? A_NET : A_HOST;
  *b = (multi ? B_NET : B_HOST) * spread;
}

double kolo_coll_cost(int coll, const kolo_algo_topo *t, size_t bytes, int channels) {
  if (t->nranks <= 1) return 0;
  if (coll == KOLO_COLL_ALL_REDUCE)
    return kolo_algo_cost(kolo_algo_choose(t, bytes, channels), t, bytes, channels);
  double S = (double)bytes, n = t->nranks, a, b;
  ring_links(t, channels, &a, &b);
  switch (coll) {
  case KOLO_COLL_BROADCAST:
  case KOLO_COLL_REDUCE: return (n - 1) * a + S / b;
  case KOLO_COLL_SEND:
  case KOLO_COLL_RECV: return t->nhosts > 1 ? A_NET + S / B_NET : A_HOST + S / B_HOST;
  default: return (n - 1) * a + (n - 1) * S / b; /* reduce-scatter, all-gather, all-to-all, gather, scatter */
  }
}

int kolo_algo_choose(const kolo_algo_topo *t, size_t bytes, int channels) {
  if (!kolo_algo_hier_possible(t) || t->forced == KOLO_ALGO_RING) return KOLO_ALGO_RING;
  if (t->forced == KOLO_ALGO_HIER) return KOLO_ALGO_HIER;
  return kolo_algo_cost(KOLO_ALGO_HIER, t, bytes, channels) <
                 kolo_algo_cost(KOLO_ALGO_RING, t, bytes, channels)
             ? KOLO_ALGO_HIER
             : KOLO_ALGO_RING;
}
