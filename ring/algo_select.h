/* algo_select.h - KOLO_ALGO in NCCL_ALGO's syntax: which algorithms the
 * cost model may choose among, per collective.
 *
 *   value   := entry (';' entry)*
 *   entry   := [coll ':'] ['^'] name (',' name)*
 *   coll    := allreduce | broadcast | reduce | allgather | reducescatter
 *   name    := ring | hier | rd | rabenseifner | direct | tree | dbtree | bruck   (any case)
 *
 * '^' excludes the names that follow instead of listing those allowed; a
 * later entry for the same collective replaces an earlier one.  The
 * all-reduce has ring, hier, rd, rabenseifner and direct; the broadcast
 * has ring (its pipelined chain), tree (the binomial tree,
 * ring/bcast_tree.c) and dbtree (the double binary tree,
 * ring/bcast_dbtree.c); the
 * all-gather has ring and bruck (ring/all_gather_bruck.c); every other
 * collective has the ring only.  An entry without a collective is the
 * all-reduce's (so "rd" still forces it, and the other collectives keep
 * their default); a list keeps the names of its collective's algorithms
 * and must leave one: so a bare "tree", "dbtree" or "bruck" is an error
 * (none is an all-reduce algorithm in kolo: write broadcast:tree,
 * allgather:bruck),
 * "allgather:^ring,bruck" leaves the all-gather nothing, and an entry for
 * reduce or reducescatter must leave the ring allowed (else kolo would
 * have nothing to run it with, and says so).  A one-name set forces that
 * algorithm ("broadcast:tree" runs every broadcast as a tree,
 * "allgather:bruck" every all-gather as Bruck's).  The single names of old
 * ("rd") are a one-name list.  Empty or unset: the model chooses among the
 * all-reduce's algorithms (algo.h's no_auto_peers still applies, and
 * direct needs naming), the broadcast keeps the chain (the trees need
 * naming) and the all-gather chooses between the ring and Bruck's (the
 * ring only on CUDA communicators): algo.h says why.
 */
#ifndef KOLO_RING_ALGO_SELECT_H
#define KOLO_RING_ALGO_SELECT_H

#include <stddef.h>

#include "ring/algo.h"

#define KOLO_ALGO_ALL ((1u << KOLO_ALGO_NUM) - 1)

/* The allowed sets of a KOLO_ALGO value (bit 1 << KOLO_ALGO_*, within
 * the collective's algorithms; 0: no entry for it, the model chooses). */
typedef struct {
  unsigned all_reduce; /* within KOLO_ALGO_ALL_REDUCE_SET */
  unsigned broadcast;  /* within KOLO_ALGO_BCAST_SET */
  unsigned all_gather; /* within KOLO_ALGO_AG_SET */
  unsigned reduce;     /* within KOLO_ALGO_REDUCE_SET */
} kolo_algo_sets;

/* Fills *out from KOLO_ALGO's value and returns 0, or returns -1 with what
 * is wrong in why ("KOLO_ALGO \"nvls\": no algorithm (kolo has ...) named
 * \"nvls\""; *out then says nothing). */
int kolo_algo_allow_parse_sets(const char *v, kolo_algo_sets *out, char *why, size_t why_len);
/* The all-reduce's set of kolo_algo_allow_parse_sets, or -1 as it. */
int kolo_algo_allow_parse(const char *v, char *why, size_t why_len);

/* KOLO_ALGO_AUTO, or the one algorithm of a one-algorithm set. */
int kolo_algo_allow_single(unsigned allowed);

/* 1 when the model may choose algo on t: allowed by KOLO_ALGO; when
 * KOLO_ALGO is unset, not a multi-peer one on a CUDA communicator
 * (no_auto_peers), and the direct all-reduce only where a tuning file's
 * override names it (algo.h says why). */
int kolo_algo_may_run(const kolo_algo_topo *t, int algo);

/* "ring,rd" for the set, "all" for 0 (messages). */
const char *kolo_algo_allow_text(unsigned allowed, char *out, size_t len);

#endif
