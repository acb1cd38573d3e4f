/* perf_ranks.c - kolo-perf's ranks: the device and communicator of each,
 * its sweep (or overlap, or p2p run) and its teardown, on threads of this
 * process (perf_run_local), as one rank of a launcher's job
 * (perf_run_launched) or as the rank group of a forked process
 * (perf_run_child, see perf_fork.c).  Rank r = proc * (t x g) + thread;
 * rank 0 prints. */
#define _GNU_SOURCE /* prctl */
#include "perf/perf_ranks.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "perf/kolo_backend.h"
#include "perf/perf_cuda.h"
#include "perf/perf_gate.h"
#include "perf/perf_overlap.h"
#include "perf/perf_p2p.h"
#include "perf/perf_pipe.h"
#include "perf/perf_sweep.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

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
  if (j->a->mem_cuda && j->dev < 0) return -1; /* pick_device said why */
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

static rank_job *new_jobs(const perf_args *a, const perf_config *cfg, int n, exit_gate *gate) {
  rank_job *jobs = calloc((size_t)n, sizeof *jobs);
  if (jobs == NULL) {
    fprintf(stderr, "kolo-perf: out of memory\n");
    return NULL;
  }
  for (int i = 0; i < n; i++) jobs[i] = (rank_job){.a = a, .cfg = cfg, .dev = -1, .gate = gate};
  return jobs;
}

/* ---- ranks as threads of this process ----------------------------------- */

/* The communicators of the process's n ranks: one koloCommInitAll, or
 * with -p 1 none here (each rank's thread inits its own, jobs[r].id). */
static int init_local(const perf_args *a, rank_job *jobs, koloComm_t *comms, int *devs, int n) {
  koloResult_t res;
  for (int r = 0; r < n; r++) {
    jobs[r].rank = r;
    jobs[r].dev = devs[r] = pick_device(a, r);
    if (a->mem_cuda && devs[r] < 0) return -1; /* pick_device said why */
  }
  if (a->parallel_init) {
    koloUniqueId id;
    if ((res = koloGetUniqueId(&id)) != koloSuccess) return kolo_backend_report(-1, NULL, res, "koloGetUniqueId");
    for (int r = 0; r < n; r++) jobs[r].id = id;
    return 0;
  }
  koloConfig_t c = comm_config(a, -1);
  if ((res = koloCommInitAllConfig(comms, n, a->mem_cuda ? devs : NULL, &c)) != koloSuccess)
    return kolo_backend_report(-1, NULL, res, "koloCommInitAll");
  for (int r = 0; r < n; r++) jobs[r].comm = comms[r];
  return 0;
}

int perf_run_local(const perf_args *a, perf_config *cfg) {
  int n = perf_local_ranks(a), code = 2;
  exit_gate gate;
  if (gate_init(&gate, n, -1, -1) != 0) return 2;
  koloComm_t *comms = calloc((size_t)n, sizeof *comms);
  int *devs = calloc((size_t)n, sizeof *devs);
  rank_job *jobs = new_jobs(a, cfg, n, &gate);
  if (comms != NULL && devs != NULL && jobs != NULL && init_local(a, jobs, comms, devs, n) == 0)
    code = run_jobs(jobs, n);
  else if (comms == NULL || devs == NULL)
    fprintf(stderr, "kolo-perf: out of memory\n");
  free(jobs);
  free(devs);
  free(comms);
  gate_fini(&gate);
  return code;
}

/* ---- a launcher's job --------------------------------------------------- */

const char *perf_launcher_size_var(int *size) {
  static const char *const vars[] = {"KOLO_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v != NULL && atoi(v) > 1) {
      *size = atoi(v);
      return vars[i];
    }
  }
  return NULL;
}

static int local_rank_from_env(void) {
  static const char *const vars[] = {"KOLO_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                     "LOCAL_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return atoi(getenv(vars[i]));
  return 0;
}

int perf_run_launched(const perf_args *a, perf_config *cfg) {
  if (perf_local_ranks(a) != 1) {
    fprintf(stderr, "kolo-perf: -t and -g are for -P or a single process; a launcher starts one rank per process\n");
    return 2;
  }
  int dev = pick_device(a, local_rank_from_env());
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
  exit_gate gate;
  int n = perf_local_ranks(a);
  if (gate_init(&gate, n, done_fd, fd) != 0) return 2;
  rank_job *jobs = new_jobs(a, cfg, n, &gate);
  if (jobs == NULL) return 2;
  for (int t = 0; t < n; t++) {
    jobs[t].id = id;
    jobs[t].rank = proc * n + t;
    jobs[t].dev = pick_device(a, jobs[t].rank);
  }
  int code = run_jobs(jobs, n);
  free(jobs);
  gate_fini(&gate);
  return code;
}
