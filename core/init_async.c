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
#include "core/comm_state.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/init_async.h"
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

void kolo_init_join(struct koloComm *c) {
  kolo_group_forget_job(c); /* a communicator freed before its group ended is not run by it */
  if (c->init_job == NULL || !c->init_job->thread_live) return;
  int err = pthread_join(c->init_job->thread, NULL);
  if (err != 0) KOLO_WARN("rank %d: joining its init thread failed: %s", c->rank, strerror(err));
  c->init_job->thread_live = 0;
}

/* Starts every init, then joins them: the first failure. */
koloResult_t kolo_init_run_all(struct koloComm **comms, int n) {
  int first_bad = -1;
  for (int i = 0; i < n; i++)
    if (kolo_init_start(comms[i]) != koloSuccess && first_bad < 0) first_bad = i;
  for (int i = 0; i < n; i++) {
    kolo_init_join(comms[i]);
    if (atomic_load(&comms[i]->failed) != koloSuccess && first_bad < 0) first_bad = i;
  }
  if (first_bad < 0) return koloSuccess;
  kolo_error_copy(kolo_thread_errbuf(), &comms[first_bad]->err);
  return (koloResult_t)atomic_load(&comms[first_bad]->failed);
}

/* ---- the group's job of one init (group.h) ---- */

static koloResult_t job_start(void *arg) { return kolo_init_start(arg); }

static koloResult_t job_finish(void *arg, int wait) {
  struct koloComm *c = arg;
  if (wait) kolo_init_join(c);
  return wait ? (koloResult_t)atomic_load(&c->failed) : koloSuccess;
}

static void job_say(void *arg) {
  struct koloComm *c = arg;
  kolo_error_copy(kolo_thread_errbuf(), &c->err);
}

/* An init the group will not run: its communicator fails, saying why. */
static void job_refuse(void *arg, const char *why) {
  struct koloComm *c = arg;
  kolo_error(&c->err, koloInvalidUsage, "rank %d: its init was not run: %s", c->rank, why);
  atomic_store(&c->failed, (int)koloInvalidUsage);
  atomic_store(&c->init_busy, 0);
}

koloResult_t kolo_group_add_init(struct koloComm *c, koloComm_t *comm) {
  kolo_group_job job = {KOLO_JOB_INIT, c, c->blocking, job_start, job_finish, job_say, job_refuse, NULL};
  koloResult_t res = kolo_group_add_job(&job);
  if (res != koloSuccess) {
    kolo_comm_free(c);
    return res;
  }
  pin_device(c);
  atomic_store(&c->init_busy, 1); /* not usable before koloGroupEnd */
  *comm = c;
  return koloSuccess;
}
