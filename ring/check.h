/* check.h - the schedule checker: proves that the step programs of every
 * rank and channel of a collective compute it, for a stated rank count,
 * collective and root, or says in one sentence where they do not.
 *
 * How.  Symbolic execution over the programs with the round geometry
 * (ring/geometry.h, the layouts of program.h).  Every element of every
 * rank's buffers holds a symbolic value: the set of inputs it was made of
 * (which rank's input, at which position, how many terms) and how often
 * the post-op was applied; a step combines values the way its op's roles
 * say (kolo_step_recvs / sends / reads_src / writes_dst / reduces, never a
 * switch over ops, so that new ops are checked by their roles).  Programs
 * do not depend on the message size, so one round with KOLO_CHECK_ELEMS
 * elements per chunk stands for every size.  Connectors are FIFOs of
 * chunks holding KOLO_CHECK_CONN_CHUNKS chunks: a chunk is at most half a
 * connector's slots, so this is the executor at its fewest slots
 * (KOLO_NSLOTS = 2) and its largest chunks, and a program that runs to its
 * end here runs with any slots, any count, any number of rounds (a round
 * that ends leaves every pipe empty, and a pipe with more room or smaller
 * chunks only lets ranks move sooner).  Channels have pipes and elements
 * of their own: each is checked alone.  Collectives that have an in-place
 * form (NCCL's) are checked out of place, then in place.
 *
 * What it proves, or names the first failure of:
 *   - the programs are well formed: ops, buffers, chunk indices in range,
 *     peers that are ranks, one layout for all, and in the ring layout a
 *     step's src and dst chunks alike (they have one size in every round);
 *   - no rank waits for a send that never comes nor for room that never
 *     frees (deadlock: the blocked ranks and their steps are named);
 *   - the k-th chunk a sends to b and the k-th chunk b receives from a
 *     have one size in every round (in the ring layout: the same chunk
 *     position), and every chunk sent is received;
 *   - no step reads a buffer the collective does not give that rank (a
 *     non-root's broadcast input, ...) or writes an input;
 *   - every output element of every rank holds exactly what it must:
 *     all-reduce every rank's input at that position once, post-op once;
 *     reduce-scatter block r of every input; all-gather block q = rank q's
 *     input; broadcast the root's input; reduce (root) as all-reduce;
 *     all-to-all block j = rank j's input block r; gather (root) block j =
 *     rank j's input; scatter the root's input block r; send/recv the
 *     sender's input at the receiver.  Copies carry one term and no
 *     post-op.
 *
 * Cost: time O(ranks x steps) (steps summed over every rank and channel),
 * memory O(ranks^2 x KOLO_CHECK_ELEMS x ranks / 64 words).  Refused above
 * KOLO_CHECK_MAX_RANKS ranks or KOLO_CHECK_MAX_WORK ranks x steps (about a
 * second; a 256-rank ring all-reduce is a quarter of it).
 */
#ifndef KOLO_RING_CHECK_H
#define KOLO_RING_CHECK_H

#include <stddef.h>

#include "kolo.h"
#include "ring/program.h"

#define KOLO_CHECK_MAX_RANKS 256
#define KOLO_CHECK_MAX_CHANNELS 64
#define KOLO_CHECK_MAX_WORK (1L << 27)
#define KOLO_CHECK_ELEMS 2       /* symbolic elements per chunk */
#define KOLO_CHECK_CONN_CHUNKS 2 /* chunks a connector holds */

typedef struct {
  int coll;   /* kolo_coll (ring/schedule.h) */
  int nranks;
  int root;   /* broadcast, reduce, gather, scatter: the root; send / recv: the sender */
  int peer;   /* send / recv: the receiver (another rank); else ignored */
  int nchannels;
  /* [channel * nranks + rank]; a rank with nothing to do has no steps */
  const kolo_program *const *progs;
} kolo_check_spec;

/* koloSuccess when the programs compute the collective (why = "");
 * koloInvalidArgument with a sentence in why when they do not or the spec
 * is out of bounds; koloSystemError when out of memory.  Pure. */
koloResult_t kolo_schedule_check(const kolo_check_spec *spec, char *why, size_t len);

#endif
