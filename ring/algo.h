/* algo.h - choosing the all-reduce algorithm: the flat ring or the
 * hierarchical one (all_reduce_hier.c).
 *
 * The choice must be the same on every rank, so it is a pure function of
 * what every rank agrees on: the call's bytes and channels, the number of
 * ranks and hosts, the ranks per host, and KOLO_ALGO (checked alike on all
 * ranks at init).
 *
 * Cost model (alpha-beta, per call; alpha a hop's latency, beta a link's
 * bandwidth, with intra-host links faster than the network):
 *
 *   ring: 2(n-1) steps, each as slow as the slowest hop on the ring (the
 *     network once there are several hosts); every rank sends 2(n-1)/n of
 *     the bytes over its ring link, the off-host links spread over
 *     min(channels, L) ranks of a host by the rotated channel rings:
 *       T = 2(n-1) a_net + 2(n-1)/n S / (b_net min(ch, L))
 *   hier: the intra phases are H ring passes of L-1 steps each way, the
 *     inter phase 2(H-1) steps over S/L bytes, on all L ranks' links at once:
 *       T = 2H(L-1) a_host + 2(H-1) a_net
 *           + 2(L-1)/L S / b_host + 2(H-1)/H (S/L) / b_net
 *
 * Hierarchical needs H >= 2 hosts, each with the same L >= 2 ranks; the
 * model picks it where it is cheaper.  KOLO_ALGO=ring|hier forces one; a
 * forced hier where the hosts do not allow it runs the ring (the
 * communicator says so once, at INFO, at init).
 */
#ifndef KOLO_RING_ALGO_H
#define KOLO_RING_ALGO_H

#include <stddef.h>

enum { KOLO_ALGO_AUTO = -1, KOLO_ALGO_RING = 0, KOLO_ALGO_HIER = 1 };

/* What the choice depends on, equal on every rank. */
typedef struct {
  int nranks;
  int nhosts;
  int local;  /* ranks on every host, or 0 when hosts differ */
  int forced; /* KOLO_ALGO_AUTO, _RING or _HIER */
} kolo_algo_topo;

/* KOLO_ALGO's value: NULL or "" -> AUTO, "ring", "hier"; -2 for anything else. */
int kolo_algo_parse(const char *s);
const char *kolo_algo_name(int algo);
/* 1 when the hierarchical all-reduce can run on this topology. */
int kolo_algo_hier_possible(const kolo_algo_topo *t);
/* Modelled seconds of an all-reduce of `bytes` on `channels` channels. */
double kolo_algo_cost(int algo, const kolo_algo_topo *t, size_t bytes, int channels);
/* The algorithm of an all-reduce of `bytes` on `channels` channels. */
int kolo_algo_choose(const kolo_algo_topo *t, size_t bytes, int channels);

/* Modelled seconds of one call of collective `coll` (ring/schedule.h's
 * KOLO_COLL_*; koloGroupSimulateEnd), `bytes` being the count times the
 * type size as the API takes it (per rank for reduce-scatter and
 * all-gather), with the links of the ring above:
 *   all-reduce: kolo_algo_cost of kolo_algo_choose's algorithm;
 *   reduce-scatter, all-gather, all-to-all, gather, scatter: (n-1) steps of
 *     a rank's (a block's) bytes each, one after another:
 *     T = (n-1) a + (n-1) S_rank / (b min(ch, L))  (half an all-reduce of n S_rank);
 *   broadcast, reduce: a pipelined chain: T = (n-1) a + S / (b min(ch, L));
 *   send, recv: one hop: T = a + S / b;
 * 0 on one rank (nothing moves between ranks). */
double kolo_coll_cost(int coll, const kolo_algo_topo *t, size_t bytes, int channels);

#endif
