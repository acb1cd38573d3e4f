/* fault_rank.c - a rank of a fault trial: checked collectives with the
 * victim's fault at its moment (see fault_rank.h). */
#define _GNU_SOURCE
#include "fault_rank.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checked_coll.h"
#include "fault_util.h"
#include "kolo.h"

/* The calls of a trial: MID_CALL is large (the victim fails inside it),
 * GROUP_CALL is a group of three. */
#define NCALLS 7
#define MID_CALL 3
#define GROUP_CALL 4
#define MID_COUNT ((size_t)(1u << 21) + 5) /* int32: 8 MiB */
#define CALL_COUNT ((size_t)10007)

static const char *const at_names[AT_NUM] = {"init", "first_call", "mid", "group", "destroy"};

const char *fault_at_name(fault_at at) { return at < AT_NUM ? at_names[at] : "?"; }

/* ---- the victim's fault ------------------------------------------------------ */

typedef struct {
  const rank_plan *p;
  pthread_t thread;
  int started;
} injector;

/* The parent's fault (its link down) is in place before the victim goes
 * on: else the victim may finish its calls before the parent acts. */
static void wait_for_parent(const rank_plan *p) {
  char go;
  if (p->go_fd < 0) return;
  while (read(p->go_fd, &go, 1) < 0 && errno == EINTR) {
  }
  /* left open: the rank's fds are counted against those before init */
}

static void inject_now(const rank_plan *p) {
  fu_line(p->report_fd, "F %lld", (long long)fu_now_ns());
  switch (p->act) {
  case ACT_KILL: raise(SIGKILL); break;
  case ACT_STOP: raise(SIGSTOP); break;
  case ACT_CUT: fu_cut_sockets(); break;
  default: wait_for_parent(p); break; /* ACT_TELL: the parent acts */
  }
}

static void *inject_later(void *arg) {
  const rank_plan *p = arg;
  fu_sleep_ms(p->delay_ms);
  inject_now(p);
  return NULL;
}

/* At `moment`: the victim's fault, now or from a thread after its delay. */
static void maybe_inject(injector *inj, fault_at moment) {
  const rank_plan *p = inj->p;
  if (!p->victim || p->at != moment) return;
  if (moment == AT_FIRST_CALL || moment == AT_GROUP) {
    inject_now(p);
    return;
  }
  inj->started = pthread_create(&inj->thread, NULL, inject_later, (void *)p) == 0;
  if (!inj->started) inject_now(p); /* no thread: at once */
}

static void injector_join(injector *inj) {
  if (inj->started) pthread_join(inj->thread, NULL);
  inj->started = 0;
}

static void inject_in_group(void *arg) { maybe_inject(arg, AT_GROUP); }

/* ---- the calls ------------------------------------------------------------------ */

static cc_case call_case(int i, unsigned long long seed) {
  static const cc_kind kinds[] = {CC_ALL_REDUCE, CC_ALL_GATHER, CC_REDUCE_SCATTER, CC_BROADCAST};
  cc_case c = {kinds[i % 4], koloInt32, koloSum, CALL_COUNT, i & 1, i % 2, seed + (unsigned long long)i};
  if (i == MID_CALL) {
    c.kind = CC_ALL_REDUCE;
    c.count = MID_COUNT;
  }
  return c;
}

/* The memory a rank's calls use, and its state. */
typedef struct {
  const rank_mem *m;
  void *ctx;
} mem_of_rank;

static cc_result run_call(koloComm_t comm, const rank_plan *p, const mem_of_rank *mem, injector *inj, int i) {
  cc_case c = call_case(i, p->seed);
  if (i == 0) maybe_inject(inj, AT_FIRST_CALL);
  if (i == MID_CALL) maybe_inject(inj, AT_MID);
  if (i != GROUP_CALL) return mem->m->run(mem->ctx, comm, p->rank, p->nranks, &c, 1, NULL, NULL);
  cc_case g[3] = {call_case(0, p->seed + 100), call_case(1, p->seed + 101), call_case(3, p->seed + 102)};
  return mem->m->run(mem->ctx, comm, p->rank, p->nranks, g, 3, inject_in_group, inj);
}

/* ---- host memory ------------------------------------------------------------------ */

static int host_setup(void *ctx, koloConfig_t *cfg, char *why, size_t len) {
  (void)ctx, (void)cfg, (void)why, (void)len;
  return 0;
}

static cc_result host_run(void *ctx, koloComm_t comm, int rank, int nranks, const cc_case *cases, int k,
                          void (*after_first)(void *), void *arg) {
  (void)ctx;
  return k == 1 ? cc_run(comm, rank, nranks, cases) : cc_run_group(comm, rank, nranks, cases, k, after_first, arg);
}

static int host_count_threads(void *ctx) {
  (void)ctx;
  return fu_count_threads();
}

static void host_teardown(void *ctx) { (void)ctx; }

static const rank_mem host_mem = {host_setup, host_run, host_count_threads, host_teardown};

/* ---- the rank ------------------------------------------------------------------- */

typedef struct {
  koloResult_t rc;
  long long t_ns;
  size_t bad;
  int calls;
  const char *where;
  char text[1024];
} outcome;

static void failed(outcome *o, koloResult_t rc, const char *where, koloComm_t comm) {
  if (o->rc != koloSuccess) return; /* the first failure counts */
  o->rc = rc;
  o->t_ns = fu_now_ns();
  o->where = where;
  snprintf(o->text, sizeof o->text, "%s", koloGetLastError(comm));
  for (char *s = o->text; *s; s++)
    if (*s == '\n') *s = ' ';
}

static void run_calls(koloComm_t comm, const rank_plan *p, const mem_of_rank *mem, injector *inj, outcome *o) {
  for (int i = 0; i < NCALLS; i++) {
    fu_line(p->report_fd, "S call %d", i);
    cc_result r = run_call(comm, p, mem, inj, i);
    if (r.res != koloSuccess) {
      failed(o, r.res, i == GROUP_CALL ? "group" : i == MID_CALL ? "mid" : "call", comm);
      return;
    }
    o->bad += r.bad;
    o->calls++;
  }
}

/* The rank's memory, set up; 0, or -1 with its reason on report_fd. */
static int mem_setup(const rank_plan *p, mem_of_rank *mem, koloConfig_t *cfg) {
  mem->m = &host_mem;
  mem->ctx = NULL;
  char why[512] = "this build has no CUDA";
  if (p->cuda) mem->m = fault_cuda_mem(&mem->ctx);
  if (mem->m != NULL && mem->m->setup(mem->ctx, cfg, why, sizeof why) == 0) return 0;
  fu_line(p->report_fd, "R %d %d %lld 0 0 0 0 0 0 setup|%s", p->rank, (int)koloSystemError, (long long)fu_now_ns(),
          why);
  return -1;
}

/* Counting a process's threads and fds races with threads that are not
 * kolo's: a thread joined at teardown is still listed in /proc/self/task
 * until the kernel reaps it (pthread_join returns once its tid is
 * cleared: in an emulated guest that took long enough to be counted), and
 * the CUDA model's own threads open and close files (/proc/PID/stat) as
 * they work.  So the count before init is the least of a few samples, and
 * the count after teardown is taken again until it matches, for up to
 * SETTLE_MS: a leak, or an fd kolo closed that was not its own, stays. */
#define SETTLE_MS 2000
typedef int (*count_fn)(const mem_of_rank *mem);
static int count_fds(const mem_of_rank *mem) { return (void)mem, fu_count_fds(); }
static int count_threads(const mem_of_rank *mem) { return mem->m->count_threads(mem->ctx); }

static int least_of_samples(count_fn count, const mem_of_rank *mem) {
  int least = count(mem);
  for (int i = 0; i < 4; i++) {
    fu_sleep_ms(2);
    int n = count(mem);
    least = n < least ? n : least;
  }
  return least;
}

static int settled(count_fn count, const mem_of_rank *mem, int before) {
  int now = count(mem);
  for (int waited = 0; now != before && waited < SETTLE_MS; waited += 10) {
    fu_sleep_ms(10);
    now = count(mem);
  }
  return now;
}

int fault_rank_main(const rank_plan *p) {
  mem_of_rank mem;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  if (mem_setup(p, &mem, &cfg) != 0) return 3;
  int fd0 = least_of_samples(count_fds, &mem), thr0 = least_of_samples(count_threads, &mem);
  injector inj = {p, 0, 0};
  outcome o = {koloSuccess, 0, 0, 0, "", ""};
  koloComm_t comm = NULL;
  maybe_inject(&inj, AT_INIT);
  koloResult_t rc = koloCommInitFromEnv(&comm, &cfg);
  if (rc != koloSuccess) failed(&o, rc, "init", NULL);
  if (rc == koloSuccess) run_calls(comm, p, &mem, &inj, &o);
  if (rc == koloSuccess && o.rc == koloSuccess) {
    fu_line(p->report_fd, "S destroy");
    maybe_inject(&inj, AT_DESTROY);
    rc = koloCommDestroy(comm);
    if (rc != koloSuccess) failed(&o, rc, "destroy", NULL);
  } else if (rc == koloSuccess) {
    fu_line(p->report_fd, "S abort after %s: %s", o.where, o.text);
    rc = koloCommAbort(comm);
    if (rc != koloSuccess && o.rc == koloSuccess) failed(&o, rc, "abort", NULL);
  }
  injector_join(&inj);
  int fd1 = settled(count_fds, &mem, fd0), thr1 = settled(count_threads, &mem, thr0);
  mem.m->teardown(mem.ctx);
  fu_line(p->report_fd, "R %d %d %lld %zu %d %d %d %d %d %s|%s", p->rank, (int)o.rc, o.t_ns, o.bad, o.calls, fd0,
          fd1, thr0, thr1, o.where, o.text);
  return 0;
}
