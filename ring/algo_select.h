/* algo_select.h - KOLO_ALGO in NCCL_ALGO's syntax: which algorithms the
 * cost model may choose among, per collective.
 *
 *   value   := entry (';' entry)*
 *   entry   := [coll ':'] ['^'] name (',' name)*
 *   coll    := allreduce | broadcast | reduce | allgather | reducescatter
 *   name    := ring | hier | rd | rabenseifner | direct   (any case)
 *
 * '^' excludes the names that follow instead of listing those allowed; a
 * later entry for the same collective replaces an earlier one.  Only the
 * all-reduce has more than one algorithm in kolo: an entry without a
 * collective is the all-reduce's (so "rd" still forces it, and the other
 * collectives keep the ring), and an entry for another collective must
 * leave the ring allowed (else kolo would have nothing to run it with, and
 * says so).  The single names of old
 * ("rd") are a one-name list.  Empty or unset: every algorithm, the model
 * chooses (algo.h's no_auto_peers still applies).
 */
#ifndef KOLO_RING_ALGO_SELECT_H
#define KOLO_RING_ALGO_SELECT_H

#include <stddef.h>

#include "ring/algo.h"

#define KOLO_ALGO_ALL ((1u << KOLO_ALGO_NUM) - 1)

/* The all-reduce's allowed set (bit 1 << KOLO_ALGO_*, 0: KOLO_ALGO unset)
 * of a KOLO_ALGO value, or -1 with what is wrong in why ("KOLO_ALGO
 * \"tree\": no algorithm \"tree\" (kolo has ring, hier, rd, rabenseifner, direct)"). */
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
