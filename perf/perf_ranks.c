/* perf_ranks.c - kolo-perf's ranks: where they come from (a launcher's
 * job, -P forked processes (perf_fork.c) or threads of this process), the
 * device and communicator of each, its sweep (or overlap, or p2p run), the
 * exit gate and its teardown.  Rank r = proc * (t x g) + thread; rank 0
 * prints. */
#define _GNU_SOURCE /* prctl, pthread barriers */
#include "perf/perf_ranks.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "perf/kolo_backend.h"
#include "perf/perf_cuda.h"
#include "perf/perf_overlap.h"
#include "perf/perf_p2p.h"
#include "perf/perf_pipe.h"
#include "perf/perf_sweep.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* ---- the exit gate -------------------------------------------------------
 * No rank tears its communicator down before every rank of this machine has
 * finished its sweep: the threads of a process meet at a barrier and, when
 * forked, each process tells the parent "done" on a pipe and waits for its
 * "go" on the id pipe (perf_fork.c serves it).  A rank still draining the
 * last call thus never sees a peer's connections close under it.  A
 * launcher's job has no such channel: there each rank destroys its
 * communicator at once (no gate). */

/* Milliseconds a process waits at the exit gate for the others. */
#define GATE_WAIT_MS 60000

typedef struct {
  int nthreads;
  pthread_barrier_t barrier; /* the threads of this process (nthreads > 1) */
  int done_fd, go_fd;        /* to and from the parent when forked, else -1 */
  _Atomic int failed;        /* a rank of this process failed: do not wait for "go" */
} exit_gate;

static int gate_init(exit_gate *g, int nthreads, int done_fd, int go_fd) {
  *g = (exit_gate){.nthreads = nthreads, .done_fd = done_fd, .go_fd = go_fd};
  int err = nthreads > 1 ? pthread_barrier_init(&g->barrier, NULL, (unsigned)nthreads) : 0;
  if (err != 0) fprintf(stderr, "kolo-perf: pthread_barrier_init: %s\n", strerror(err));
  return err != 0 ? -1 : 0;
}

static void gate_fini(exit_gate *g) {
  if (g->nthreads > 1) pthread_barrier_destroy(&g->barrier);
}

/* One thread of the process tells the parent and waits for all processes,
 * unless a rank here failed: it aborted its communicator, so nobody waits
 * for it, and a peer that never finishes (stopped, say) must not hold it. */
static void gate_process(exit_gate *g) {
  if (g->done_fd < 0) return;
  char b = 'd';
  if (write(g->done_fd, &b, 1) != 1) return; /* the parent is gone: go on */
  if (atomic_load(&g->failed)) return;
  struct pollfd p = {g->go_fd, POLLIN, 0};
  int r;
  do r = poll(&p, 1, GATE_WAIT_MS);
  while (r < 0 && errno == EINTR);
  if (r > 0 && read(g->go_fd, &b, 1) < 0) b = 0; /* "go", or EOF: either way on */
}

/* Every rank of this machine has finished its sweep when this returns (or,
 * failed != 0 on any rank of this process, every rank of it).  g NULL: no
 * gate. */
static void gate_pass(exit_gate *g, int failed) {
  if (g == NULL) return;
  if (failed) atomic_store(&g->failed, 1);
  if (g->nthreads == 1 || pthread_barrier_wait(&g->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) gate_process(g);
  if (g->nthreads > 1) pthread_barrier_wait(&g->barrier);
}

/* ---- devices and config ------------------------------------------------ */

/* The CUDA device of a rank, made current on this thread: --devices' list, or
 * every visible device, taken round-robin by the rank's local index.  -1
 * for host memory, or after a failure (reported). */
static int pick_device(const perf_args *a, int local_rank) {
#ifdef KOLO_HAVE_CUDA
  int n = 0, dev;
  cudaError_t err = cudaSuccess;
  if (!a->mem_cuda) return -1;
  if (a->ndevs > 0) {
    dev = a->devs[local_rank % a->ndevs];
  } else {
    err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess && n < 1) err = cudaErrorNoDevice;
    dev = n > 0 ? local_rank % n : 0;
  }
  if (err == cudaSuccess) err = cudaSetDevice(dev);
  if (err == cudaSuccess) return dev;
  fprintf(stderr, "kolo-perf: rank %d: no device: %s\n", local_rank, cudaGetErrorString(err));
#else
  (void)a;
  (void)local_rank;
#endif
  return -1;
}

/* The rank's line under "# Using devices". */
static void describe(const perf_args *a, int dev, char *where, size_t len) {
#ifdef KOLO_HAVE_CUDA
  if (dev >= 0) {
    perf_cuda_describe(dev, where, len);
    return;
  }
#endif
  (void)dev;
  snprintf(where, len, "%s memory", a->mem_cuda ? "cuda" : "host");
}

static koloConfig_t comm_config(const perf_args *a, int dev) {
  koloConfig_t c = KOLO_CONFIG_INITIALIZER;
  c.memory = a->mem_cuda ? koloMemCuda : koloMemHost;
  if (dev >= 0) c.cudaDev = dev;
  return c;
}
/* ---- one rank ----------------------------------------------------------- */

/* Runs the sweep on an initialized communicator, passes the exit gate and
 * tears the communicator down: destroyed after success, aborted after a
 * failure (so peers stop waiting). */
static int run_rank(const perf_args *a, const perf_config *cfg, koloComm_t comm, int dev, exit_gate *gate) {
  kolo_backend kb;
  perf_backend be;
  char where[64];
  int code = 2;
  if (kolo_backend_init(&kb, &be, comm, a->mem_cuda, a->timeout_s) == 0) {
    describe(a, dev, where, sizeof where);
    if (a->overlap) code = perf_overlap_run(a, &kb, &be, cfg, where, stdout);
    else if (a->p2p) code = perf_p2p_host_run(a, &kb, &be, cfg, stdout);
    else code = perf_sweep_run(a, &be, cfg, where, stdout);
    kolo_backend_fini(&kb);
  }
  /* a failed rank aborts at once: the others stop waiting for it */
  koloResult_t res = code == 2 ? koloCommAbort(comm) : koloSuccess;
  if (res != koloSuccess) kolo_backend_report(kb.rank, comm, res, "koloCommAbort");
  gate_pass(gate, code == 2);
  if (code == 2 || (res = koloCommDestroy(comm)) == koloSuccess) return code;
  kolo_backend_report(kb.rank, NULL, res, "koloCommDestroy");
  return 2;
}

typedef struct {
  const perf_args *a;
  const perf_config *cfg;
  koloComm_t comm;  /* made by koloCommInitAll, or NULL: init here */
  koloUniqueId id;
  int rank;
  int dev;
  int code;
  exit_gate *gate;
  pthread_t thread;
} rank_job;

/* The rank's device current on this thread, and its communicator; 0, or
 * -1 having said why. */
static int rank_setup(rank_job *j) {
#ifdef KOLO_HAVE_CUDA
  cudaError_t err = j->dev >= 0 ? cudaSetDevice(j->dev) : cudaSuccess;
  if (err != cudaSuccess) {
    fprintf(stderr, "rank %d: cudaSetDevice(%d) failed: %s\n", j->rank, j->dev, cudaGetErrorString(err));
    return -1;
  }
#endif
  if (j->comm != NULL) return 0;
  koloConfig_t c = comm_config(j->a, j->dev);
  koloResult_t res = koloCommInitRankConfig(&j->comm, j->cfg->nranks, j->id, j->rank, &c);
  return res == koloSuccess ? 0 : kolo_backend_report(j->rank, NULL, res, "koloCommInitRank");
}

static void *rank_thread(void *p) {
  rank_job *j = p;
  j->code = 2;
  if (rank_setup(j) == 0) j->code = run_rank(j->a, j->cfg, j->comm, j->dev, j->gate);
  else gate_pass(j->gate, 1);
  return NULL;
}

/* Runs n rank jobs, one thread each (on this thread when n == 1). */
static int run_jobs(rank_job *jobs, int n) {
  if (n == 1) {
    rank_thread(&jobs[0]);
    return jobs[0].code;
  }
  for (int i = 0; i < n; i++) {
    int err = pthread_create(&jobs[i].thread, NULL, rank_thread, &jobs[i]);
    if (err != 0) { /* the started ranks would wait for it: end the process */
      fprintf(stderr, "kolo-perf: cannot start the thread of rank %d: %s\n", jobs[i].rank, strerror(err));
      fflush(NULL);
      _exit(2);
    }
  }
  int code = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(jobs[i].thread, NULL);
    code = perf_worse_code(code, jobs[i].code);
  }
  return code;
}

/* One koloCommInitAll for the n jobs, on devs (their devices). */
static int init_all(const perf_args *a, rank_job *jobs, koloComm_t *comms, int *devs, int n) {
  koloConfig_t c = comm_config(a, -1);
  koloResult_t res = koloCommInitAllConfig(comms, n, a->mem_cuda ? devs : NULL, &c);
  if (res != koloSuccess) return kolo_backend_report(-1, NULL, res, "koloCommInitAll");
  for (int r = 0; r < n; r++) jobs[r].comm = comms[r];
  return 0;
}

/* The t x g ranks of this process, `first` and on, as threads: with an id
 * (forked, or -p 1) a koloCommInitRank on each rank's own thread, else one
 * koloCommInitAll here.  Forked, the exit gate speaks on done_fd and go_fd. */
static int run_group(const perf_args *a, const perf_config *cfg, int first, const koloUniqueId *id, int done_fd,
                     int go_fd) {
  int n = perf_local_ranks(a), code = 2, bad = 0;
  exit_gate gate;
  if (gate_init(&gate, n, done_fd, go_fd) != 0) return 2;
  rank_job *jobs = calloc((size_t)n, sizeof *jobs);
  koloComm_t *comms = calloc((size_t)n, sizeof *comms);
  int *devs = calloc((size_t)n, sizeof *devs);
  if (jobs == NULL || comms == NULL || devs == NULL) {
    fprintf(stderr, "kolo-perf: out of memory\n");
    bad = 1;
  }
  for (int i = 0; !bad && i < n; i++) {
    devs[i] = pick_device(a, first + i);
    jobs[i] = (rank_job){.a = a, .cfg = cfg, .rank = first + i, .dev = devs[i], .gate = &gate};
    if (id != NULL) jobs[i].id = *id;
    bad = a->mem_cuda && devs[i] < 0; /* pick_device said why */
  }
  if (!bad && (id != NULL || init_all(a, jobs, comms, devs, n) == 0)) code = run_jobs(jobs, n);
  free(devs);
  free(comms);
  free(jobs);
  gate_fini(&gate);
  return code;
}

static int run_local(const perf_args *a, perf_config *cfg) {
  koloUniqueId id;
  koloResult_t res = a->parallel_init ? koloGetUniqueId(&id) : koloSuccess;
  if (res == koloSuccess) return run_group(a, cfg, 0, a->parallel_init ? &id : NULL, -1, -1);
  kolo_backend_report(-1, NULL, res, "koloGetUniqueId");
  return 2;
}

/* ---- a launcher's job --------------------------------------------------- */

/* The first of four launchers' variables whose value is above `above`
 * (*value set), or NULL. */
static const char *launcher_var(const char *const vars[4], int above, int *value) {
  for (int i = 0; i < 4; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && atoi(v) > above) {
      *value = atoi(v);
      return vars[i];
    }
  }
  return NULL;
}

static const char *const size_vars[4] = {"KOLO_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE"};
static const char *const local_rank_vars[4] = {"KOLO_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                               "LOCAL_RANK"};

/* This process as one rank of a launcher's job (koloCommInitFromEnv). */
static int run_launched(const perf_args *a, perf_config *cfg) {
  if (perf_local_ranks(a) != 1) {
    fprintf(stderr, "kolo-perf: -t and -g are for -P or a single process; a launcher starts one rank per process\n");
    return 2;
  }
  int local = 0;
  launcher_var(local_rank_vars, INT_MIN, &local);
  int dev = pick_device(a, local);
  if (a->mem_cuda && dev < 0) return 2; /* pick_device said why */
  koloConfig_t c = comm_config(a, dev);
  koloComm_t comm;
  koloResult_t res = koloCommInitFromEnv(&comm, &c);
  if (res != koloSuccess) {
    kolo_backend_report(-1, NULL, res, "koloCommInitFromEnv");
    return 2;
  }
  return run_rank(a, cfg, comm, dev, NULL);
}

/* ---- a forked process's ranks -------------------------------------------- */

int perf_run_child(const perf_args *a, const perf_config *cfg, int proc, int fd, int done_fd, pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return 2;
  koloUniqueId id;
  if (perf_read_full(fd, &id, sizeof id) != 0) return PERF_CHILD_NO_ID; /* the parent says why */
  return run_group(a, cfg, proc * perf_local_ranks(a), &id, done_fd, fd);
}

/* ---- where the ranks come from ------------------------------------------ */

/* The memory line of the table's header: on kolo's CPU model of the GPU
 * (-DKOLO_CUDA=SIM) the figures are the model's, never a GPU's. */
#ifdef KOLO_CUDA_SIM
#define CUDA_MEMORY_NAME "cuda on kolo's CPU model of the GPU (MODEL FIGURES: CPU time, not a GPU's)"
#else
#define CUDA_MEMORY_NAME "cuda"
#endif

static const char *library_name(void) {
  static char name[32];
  int v = 0;
  if (koloGetVersion(&v) != koloSuccess) v = KOLO_VERSION_CODE;
  snprintf(name, sizeof name, "kolo %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  return name;
}

int perf_cuda_ready(const perf_args *a, int fork_first) {
#ifdef KOLO_HAVE_CUDA
  char why[256];
  int n = 0;
  if (perf_cuda_probe(fork_first, &n, why, sizeof why) != 0) {
    fprintf(stderr, "kolo-perf: no CUDA device: %s\n", why);
    return -1;
  }
  for (int i = 0; i < a->ndevs; i++) {
    if (a->devs[i] < n) continue;
    fprintf(stderr, "kolo-perf: --devices: there is no device %d (%d visible)\n", a->devs[i], n);
    return -1;
  }
  return 0;
#else
  (void)fork_first;
  fprintf(stderr,
          "kolo-perf: %s: this build has no CUDA (nvcc was not found when it was configured, or "
          "KOLO_CUDA=OFF)\n",
          a->prims ? "prims" : "--mem cuda");
  return -1;
#endif
}

/* The header's word on how times were taken; NULL for host memory with
 * the defaults (the wall clock around the calls, the slowest rank's). */
static const char *timing_note(const perf_args *a) {
  static char note[400];
  static const char *const average_words[] = {"rank 0's", "the ranks' mean", "the fastest rank's",
                                              "the slowest rank's"};
  const char *how = "per call, the wall clock around the -n iterations (ranks start together)";
  if (a->mem_cuda && a->graph_launches > 0)
    how = "per call within a CUDA graph: the -n x -m calls of a size captured into one graph per rank after the "
          "warm-up, launched -G times, cudaEvents on the rank's stream around the launches";
  else if (a->mem_cuda)
    how = "per call, cudaEvents on each rank's stream around the -n iterations after the warm-up (ranks start "
          "together)";
  if (!a->mem_cuda && a->average == PERF_AVERAGE_MAX && a->agg_iters == 1 && a->blocking == 0 &&
      !a->report_cputime)
    return NULL;
  snprintf(note, sizeof note, "%s%s%s; %s", how, a->agg_iters > 1 ? ", -m calls per iteration as one group" : "",
           a->blocking == PERF_BLOCKING_OUTER ? ", the calls alone (-z 3: barriers left out)" : "",
           average_words[a->average & 3]);
  return note;
}

/* The ranks of the sweep (or of overlap): a launcher's, forked, or threads here. */
int perf_run_ranks(perf_args *a) {
  perf_config cfg = {"kolo-perf", library_name(), "threads", a->mem_cuda ? CUDA_MEMORY_NAME : "host", 0, a->procs,
                     perf_local_ranks(a), timing_note(a)};
  int world = 0;
  const char *var = a->procs_given ? NULL : launcher_var(size_vars, 1, &world);
  static char launch[64];
  if (a->mem_cuda && perf_cuda_ready(a, var == NULL && a->procs > 1) != 0) return 2;
  if (var != NULL) {
    snprintf(launch, sizeof launch, "launcher: %s", var);
    cfg.launch = launch;
    cfg.nranks = cfg.procs = world;
    cfg.threads = 1;
    return run_launched(a, &cfg);
  }
  cfg.nranks = a->procs * perf_local_ranks(a);
  if (a->procs == 1) return run_local(a, &cfg);
  cfg.launch = "forked";
  return perf_run_forked(a, &cfg);
}
