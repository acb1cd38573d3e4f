/* algo_log.h - KOLO_DEBUG=INFO: each all-reduce choice (algorithm and
 * channels), broadcast, all-gather and reduce choice, with the cost model's
 * figures, once per shape.
 *
 * A communicator's rank count is fixed, so a shape is the size bucket
 * (the power of two at or below the call's bytes): one bit of the
 * collective's word in kolo_algo_logged.  The caller says it on one rank
 * only: every rank chooses alike. */
#ifndef KOLO_RING_ALGO_LOG_H
#define KOLO_RING_ALGO_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ring/algo.h"

/* The shapes said so far, per collective; zero at first. */
typedef struct {
  _Atomic uint64_t all_reduce, bcast, ag, reduce;
} kolo_algo_logged;

/* An all-reduce's choice `algo` for `bytes` on `channels`; hier_ready: the
 * hierarchical all-reduce could run (its programs exist). */
void kolo_algo_log_choice(kolo_algo_logged *l, const kolo_algo_topo *t, int hier_ready, size_t bytes, int channels,
                          int algo);
/* The same for a broadcast's choice of chain or tree. */
void kolo_algo_log_bcast_choice(kolo_algo_logged *l, const kolo_algo_topo *t, size_t bytes, int channels, int algo);
/* The same for an all-gather's choice of ring or Bruck's. */
void kolo_algo_log_ag_choice(kolo_algo_logged *l, const kolo_algo_topo *t, size_t bytes, int channels, int algo);
/* The same for a reduce's choice of chain or tree. */
void kolo_algo_log_reduce_choice(kolo_algo_logged *l, const kolo_algo_topo *t, size_t bytes, int channels, int algo);

#endif
