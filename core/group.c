/* group.c - koloGroupStart / koloGroupEnd on this thread: the calls a group
 * records, run together at its outermost end (or only estimated:
 * koloGroupSimulateEnd), and the jobs it records (communicator inits,
 * splits), which its end starts together and waits for. */
#include "core/group.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/enqueue.h"
#include "core/plan.h"
#include "core/simulate.h"

typedef struct {
  int depth;
  int nops, cap;
  kolo_op *ops;
  koloResult_t first_error;
  kolo_group_job *jobs;
  int njobs, jobs_cap;
} group_state;

static _Thread_local group_state group;

static const char *const job_names[KOLO_JOB_KINDS] = {"communicator inits", "communicator splits"};

koloResult_t koloGroupStart(void) {
  group.depth++;
  return koloSuccess;
}

int kolo_group_depth(void) { return group.depth; }

/* Grows *v (of *cap elements of size bytes) to hold one more than n. */
static int grow(void **v, int *cap, int n, size_t size) {
  if (n < *cap) return 1;
  int c = *cap ? 2 * *cap : 16;
  void *p = realloc(*v, (size_t)c * size);
  if (p == NULL) return 0;
  *v = p;
  *cap = c;
  return 1;
}

koloResult_t kolo_group_add_job(const kolo_group_job *job) {
  if (!grow((void **)&group.jobs, &group.jobs_cap, group.njobs, sizeof *group.jobs))
    return kolo_error(NULL, koloSystemError, "out of memory recording %s in a group", job_names[job->kind]);
  group.jobs[group.njobs++] = *job;
  return koloSuccess;
}

void kolo_group_forget_job(const void *arg) {
  for (int i = 0; i < group.njobs; i++)
    if (group.jobs[i].arg == arg) group.jobs[i--] = group.jobs[--group.njobs];
}

koloResult_t kolo_enqueue(const kolo_op *op) {
  if (group.depth == 0) {
    kolo_op one = kolo_plan_op(op);
    return kolo_run_ops(&one, 1);
  }
  if (!grow((void **)&group.ops, &group.cap, group.nops, sizeof *group.ops)) {
    group.first_error = koloSystemError;
    return kolo_error(&op->comm->err, koloSystemError, "out of memory recording a group call");
  }
  group.ops[group.nops++] = kolo_plan_op(op);
  return koloSuccess;
}

/* Why the group's jobs cannot run (NULL: they can): a group holds one
 * kind of job and no calls, and a simulation simulates calls only. */
static const char *jobs_refused(const kolo_group_job *jobs, int n, int nops, int run, char *buf, size_t len) {
  int mixed = 0;
  for (int i = 1; i < n; i++) mixed |= jobs[i].kind != jobs[0].kind;
  const char *kind = job_names[jobs[0].kind];
  if (!run) snprintf(buf, len, "koloGroupSimulateEnd simulates calls, not %s", kind);
  else if (nops > 0 || mixed) snprintf(buf, len, "a group holds either %s or other calls, not both (as in NCCL)", kind);
  else return NULL;
  return buf;
}

/* Starts every job, then waits for them (when one asks to): the first
 * failure, its sentence in the thread's buffer; koloInProgress when the
 * jobs go on after the group. */
static koloResult_t run_jobs(kolo_group_job *jobs, int n) {
  int wait = 0, first_bad = -1;
  koloResult_t res = koloSuccess;
  for (int i = 0; i < n; i++) wait |= jobs[i].wait;
  for (int i = 0; i < n; i++) {
    koloResult_t r = jobs[i].start(jobs[i].arg);
    if (r != koloSuccess && first_bad < 0) first_bad = i, res = r;
  }
  for (int i = 0; i < n; i++) {
    koloResult_t r = jobs[i].finish(jobs[i].arg, wait);
    if (r != koloSuccess && first_bad < 0) first_bad = i, res = r;
  }
  if (first_bad >= 0) jobs[first_bad].say(jobs[first_bad].arg);
  return res == koloSuccess && !wait ? koloInProgress : res;
}

static koloResult_t end_jobs(kolo_group_job *jobs, int n, int nops, int run) {
  char why[160];
  koloResult_t res;
  if (jobs_refused(jobs, n, nops, run, why, sizeof why) == NULL) {
    res = run_jobs(jobs, n);
  } else {
    for (int i = 0; i < n; i++) jobs[i].refuse(jobs[i].arg, why);
    res = kolo_error(NULL, koloInvalidUsage, "%s: %s", run ? "koloGroupEnd" : "koloGroupSimulateEnd", why);
  }
  for (int i = 0; i < n; i++)
    if (jobs[i].release) jobs[i].release(jobs[i].arg);
  return res;
}

/* Ends the outermost group: runs its jobs or its calls (run), or only
 * estimates the calls (koloGroupSimulateEnd). */
static koloResult_t group_finish(int run, koloSimInfo_t *sim) {
  group_state g = group;
  group = (group_state){0};
  koloResult_t res = g.first_error;
  if (g.njobs > 0) res = end_jobs(g.jobs, g.njobs, g.nops, run);
  else if (res == koloSuccess && !run) res = kolo_sim_estimate(g.ops, g.nops, sim);
  else if (res == koloSuccess && g.nops > 0) res = kolo_run_ops(g.ops, g.nops);
  free(g.ops);
  free(g.jobs);
  return res;
}

koloResult_t koloGroupEnd(void) {
  if (group.depth == 0)
    return kolo_error(NULL, koloInvalidUsage, "koloGroupEnd without a matching koloGroupStart");
  if (--group.depth > 0) return koloSuccess;
  return group_finish(1, NULL);
}

/* As koloGroupEnd, issuing nothing: an inner level only closes itself. */
koloResult_t koloGroupSimulateEnd(koloSimInfo_t *simInfo) {
  koloResult_t res = kolo_sim_check_info(simInfo);
  if (res != koloSuccess) return res;
  if (group.depth == 0)
    return kolo_error(NULL, koloInvalidUsage, "koloGroupSimulateEnd without a matching koloGroupStart");
  if (--group.depth > 0) return koloSuccess;
  return group_finish(0, simInfo);
}
