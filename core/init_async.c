/* init_async.c - inits that run after their API call returned.
 *
 * NCCL lets one thread make every rank of a job: koloGroupStart, then
 * koloCommInitRank for each rank, then koloGroupEnd.  Each init blocks until
 * all ranks meet at the rendezvous, so inside a group an init only creates
 * its communicator (the handle is returned at once) and koloGroupEnd runs
 * them all together, one thread each, as koloCommInitAll always has.  With
 * config.blocking = 0 an init runs on a thread of its own and the call
 * returns koloInProgress; koloCommGetAsyncError says koloInProgress while
 * init_busy is set.  A thread is joined by koloGroupEnd (blocking inits) or
 * by koloCommDestroy / koloCommAbort. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "core/comm_init.h"
#include "core/mem_kind.h"

static void *init_main(void *arg) {
  struct koloComm *c = arg;
  kolo_comm_connect(c);
  atomic_store(&c->init_busy, 0);
  return NULL;
}

/* cudaDev -1 means the caller's current device when it made the call (as
 * NCCL's loop of cudaSetDevice + InitRank in a group), not the init
 * thread's. */
static void pin_device(struct koloComm *c) {
  if (c->kind && c->cuda_dev < 0) c->cuda_dev = c->kind->current_device();
}

koloResult_t kolo_init_start(struct koloComm *c) {
  pin_device(c);
  atomic_store(&c->init_busy, 1);
  int err = pthread_create(&c->init_job->thread, NULL, init_main, c);
  if (err != 0) {
    koloResult_t res = kolo_syserror(&c->err, err, "rank %d: cannot start a thread for its init", c->rank);
    atomic_store(&c->failed, (int)res);
    atomic_store(&c->init_busy, 0);
    return res;
  }
  c->init_job->thread_live = 1;
  return koloSuccess;
}

/* ---- inits recorded by a group (this thread's) ------------------------------- */

typedef struct {
  struct koloComm **comms;
  int n, cap;
} group_inits;

static _Thread_local group_inits pending;

/* A communicator freed before its group ended must not be run by it. */
static void forget_pending(struct koloComm *c) {
  for (int i = 0; i < pending.n; i++)
    if (pending.comms[i] == c) pending.comms[i--] = pending.comms[--pending.n];
}

void kolo_init_join(struct koloComm *c) {
  forget_pending(c);
  if (c->init_job == NULL || !c->init_job->thread_live) return;
  int err = pthread_join(c->init_job->thread, NULL);
  if (err != 0) KOLO_WARN("rank %d: joining its init thread failed: %s", c->rank, strerror(err));
  c->init_job->thread_live = 0;
}

/* Starts every init, then (wait) joins them: the first failure. */
static koloResult_t run_inits(struct koloComm **comms, int n, int wait) {
  koloResult_t res = koloSuccess;
  int first_bad = -1;
  for (int i = 0; i < n; i++)
    if (kolo_init_start(comms[i]) != koloSuccess && first_bad < 0) first_bad = i;
  for (int i = 0; i < n && wait; i++) {
    kolo_init_join(comms[i]);
    if (atomic_load(&comms[i]->failed) != koloSuccess && first_bad < 0) first_bad = i;
  }
  if (first_bad >= 0) {
    res = (koloResult_t)atomic_load(&comms[first_bad]->failed);
    kolo_error_copy(kolo_thread_errbuf(), &comms[first_bad]->err);
  }
  return res;
}

koloResult_t kolo_init_run_all(struct koloComm **comms, int n) { return run_inits(comms, n, 1); }

koloResult_t kolo_group_add_init(struct koloComm *c, koloComm_t *comm) {
  if (pending.n == pending.cap) {
    int cap = pending.cap ? 2 * pending.cap : 8;
    struct koloComm **p = realloc(pending.comms, (size_t)cap * sizeof *p);
    if (p == NULL) {
      kolo_comm_free(c);
      return kolo_error(NULL, koloSystemError, "koloCommInitRank: out of memory recording an init in a group");
    }
    pending.comms = p;
    pending.cap = cap;
  }
  pin_device(c);
  pending.comms[pending.n++] = c;
  atomic_store(&c->init_busy, 1); /* not usable before koloGroupEnd */
  *comm = c;
  return koloSuccess;
}

int kolo_group_has_inits(void) { return pending.n > 0; }

/* An init the group will not run: its communicator fails, saying why. */
static void refuse_init(struct koloComm *c, const char *why) {
  kolo_error(&c->err, koloInvalidUsage, "rank %d: its init was not run: %s", c->rank, why);
  atomic_store(&c->failed, (int)koloInvalidUsage);
  atomic_store(&c->init_busy, 0);
}

koloResult_t kolo_group_end_inits(int nops, int run) {
  group_inits g = pending;
  pending = (group_inits){NULL, 0, 0};
  koloResult_t res = koloSuccess;
  if (nops > 0 || !run) {
    const char *why = nops > 0 ? "a group holds either communicator inits or other calls, not both (as in NCCL)"
                               : "koloGroupSimulateEnd simulates calls, not communicator inits";
    for (int i = 0; i < g.n; i++) refuse_init(g.comms[i], why);
    res = kolo_error(NULL, koloInvalidUsage, "%s: %s", run ? "koloGroupEnd" : "koloGroupSimulateEnd", why);
  } else {
    int wait = 0; /* any blocking init: the group ends when all are done */
    for (int i = 0; i < g.n; i++) wait |= g.comms[i]->blocking;
    res = run_inits(g.comms, g.n, wait);
    if (res == koloSuccess && !wait) res = koloInProgress;
  }
  free(g.comms);
  return res;
}
