/* comm_init.h - the steps of making a communicator, shared by the ways to
 * make one: koloCommInitRank[Config], koloCommInitAll and koloCommSplit
 * (comm.c), inits inside a group or with config.blocking = 0
 * (init_async.c), koloCommInitRankScalable (init_scalable.c) and
 * koloCommShrink (shrink.c).
 *
 * A communicator is first created (arguments and config checked, nothing
 * connected: errors come back at once), then connected (bootstrap, device,
 * rings, pipes), either by the caller or by a thread of its own. */
#ifndef KOLO_CORE_COMM_INIT_H
#define KOLO_CORE_COMM_INIT_H

#include <pthread.h>

#include "core/comm.h"

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
/* Allgathers one encoded record of `bytes` from every rank over the
 * bootstrap (tag): this rank's is `mine`; *all (freed by the caller) holds
 * rank r's at r * bytes.  Fails as the bootstrap does (c->err says why). */
koloResult_t kolo_comm_gather(struct koloComm *c, uint32_t tag, const uint8_t *mine, size_t bytes, uint8_t **all);
/* The config a split or shrink inherits from its parent. */
void kolo_comm_inherit(const struct koloComm *c, koloConfig_t *out);

/* ---- init_async.c ---------------------------------------------------------- */

/* Starts c's connect on a thread of its own; init_busy is 1 until it ends. */
koloResult_t kolo_init_start(struct koloComm *c);
/* Joins that thread (no-op without one). */
void kolo_init_join(struct koloComm *c);
/* Connects n communicators at once, each on its thread, and waits: the
 * first failure (its sentence in the thread's buffer). */
koloResult_t kolo_init_run_all(struct koloComm **comms, int n);

/* Groups (enqueue.c keeps the group depth and the recorded calls). */
int kolo_group_depth(void);
/* ---- split_group.c: koloCommSplit inside a group ---------------------- */
/* Records a split for the end of the group (*newcomm = NULL until then). */
koloResult_t kolo_group_add_split(struct koloComm *parent, int color, int key, koloComm_t *newcomm,
                                  const koloConfig_t *config);
int kolo_group_has_splits(void);
/* Runs the recorded splits together, one thread each, and waits (nops: the
 * other calls of the group, which cannot go with splits). */
koloResult_t kolo_group_end_splits(int nops);
/* Records c's init for the end of the current group; *comm = c. */
koloResult_t kolo_group_add_init(struct koloComm *c, koloComm_t *comm);
/* At the outermost group end: 1 when the group recorded inits. */
int kolo_group_has_inits(void);
/* Runs the group's inits (nops: the other calls it recorded, which cannot
 * go with inits: koloInvalidUsage, and the inits fail).  run = 0
 * (koloGroupSimulateEnd): fails them instead, as not simulated. */
koloResult_t kolo_group_end_inits(int nops, int run);

/* ---- registrations (register.c) ---------------------------------------------- */

/* Releases every registration and window of c (koloCommDestroy). */
void kolo_reg_release_comm(struct koloComm *c);
/* Registrations and windows of c not deregistered (tests). */
int kolo_reg_count(const struct koloComm *c);

/* ---- revoke.c ----------------------------------------------------------------- */

/* A revoked comm's asynchronous state: koloInProgress until the work that
 * was stopped has drained, then koloSuccess. */
koloResult_t kolo_revoke_status(struct koloComm *c);

#endif
