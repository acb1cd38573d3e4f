/* comm.h - the steps of making a communicator, shared by the ways to
 * make one: koloCommInitRank[Config], koloCommInitAll and koloCommSplit
 * (comm.c), inits inside a group or with config.blocking = 0
 * (init_async.c), koloCommInitRankScalable (init_scalable.c) and
 * koloCommShrink (shrink.c).
 *
 * A communicator is first created (arguments and config checked, nothing
 * connected: errors come back at once), then connected (bootstrap, device,
 * rings, pipes), either by the caller or by a thread of its own. */
#ifndef KOLO_CORE_COMM_H
#define KOLO_CORE_COMM_H

#include <pthread.h>

#include "core/comm_state.h"

/* What an init rendezvouses with, and the thread that runs it when it runs
 * after the API call returned. */
typedef struct kolo_init_job {
  kolo_uid *uids; /* nids ids (koloCommInitRankScalable), else one */
  int nids;
  pthread_t thread;
  int thread_live; /* started and not yet joined */
} kolo_init_job;

/* Checks nranks and rank, resolves config and allocates; errors (with a
 * sentence naming fn, the API call) go to the thread's buffer. */
koloResult_t kolo_comm_create(const char *fn, int nranks, int rank, const kolo_uid *uids, int nids,
                              koloConfig_t *config, struct koloComm **out);
/* Bootstrap, device, rings, pipes.  On failure c->failed and c->err say
 * why; on success c->ready is set. */
koloResult_t kolo_comm_connect(struct koloComm *c);
/* Connects c now, or defers it: inside a group to koloGroupEnd, with
 * config.blocking = 0 to a thread (koloInProgress).  Sets *comm unless a
 * blocking init failed (then c is freed). */
koloResult_t kolo_comm_init_or_defer(struct koloComm *c, koloComm_t *comm);
/* koloCommInitRankConfig for a rank that started the job's root itself
 * (koloCommSplit's and koloCommShrink's leaders, rank 0 under PMIx): the
 * communicator owns `root` (NULL: none) and stops it when its init ends or
 * fails, so that a failed init leaves no root thread or socket behind; it
 * is stopped here when no communicator comes to be. */
koloResult_t kolo_comm_init_owning(koloComm_t *comm, int nranks, koloUniqueId commId, int rank,
                                   koloConfig_t *config, kolo_root *root);
/* Frees c and everything it holds (an init thread is joined first). */
void kolo_comm_free(struct koloComm *c);
/* The config a split or shrink inherits from its parent. */
void kolo_comm_inherit(const struct koloComm *c, koloConfig_t *out);

#endif
