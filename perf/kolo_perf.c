/* kolo_perf.c - kolo-perf: nccl-tests-style sweeps of kolo's collectives.
 *
 * Ranks come from one of three places:
 *   -p PROCS  processes forked here, each with -t THREADS ranks as threads;
 *   -t alone  THREADS ranks as threads of this process (koloCommInitAll);
 *   a launcher's job (mpirun, srun, torchrun, or KOLO_* variables) when its
 *             world size is above 1 and -p is not given (koloCommInitFromEnv).
 *
 * Forking.  The parent forks every rank group *first*, while it has a single
 * thread, and only then calls koloGetUniqueId, which starts the rendezvous
 * root thread here; the 128-byte id reaches each child through a pipe.  So no
 * child inherits a copy of a running thread's state (locks held, the root's
 * listening socket), and the parent -- which runs no rank itself -- keeps the
 * root alive for as long as any rank may need it, reaps every child, says
 * which one failed or was killed by which signal, forwards SIGINT / SIGTERM
 * to them, and exits non-zero if any did.  Children die with the parent
 * (PR_SET_PDEATHSIG).  Rank r = proc * THREADS + thread; rank 0 prints.
 *
 * Exit gate.  No rank tears its communicator down before every rank of this
 * machine has finished its sweep: the threads of a process meet at a barrier
 * and, when forked, each process tells the parent "done" on a pipe and waits
 * for its "go" on the id pipe.  A rank that is still draining the last call
 * thus never sees a peer's connections close under it.  (A launcher's job
 * has no such channel: there each rank destroys its communicator at once.)
 *
 * CUDA (--mem cuda).  Rank r of this machine runs on device LIST[r mod n]
 * of -g LIST (default: every visible device), with its own non-blocking
 * stream and device buffers (kolo_backend.c).  Before anything else main
 * asks CUDA whether there is a device at all -- from a short-lived child
 * when ranks are forked, so that the parent makes no CUDA call before its
 * forks -- and says "no CUDA device: <CUDA's words>" when there is none.
 * `kolo-perf prims` (perf_prims.c) times the copy and reduce primitives;
 * `kolo-perf net` (perf_net.c) the net providers point to point;
 * `kolo-perf overlap` (perf_overlap.c) a simulated training step over the
 * fusion API, on the ranks set up here, in place of the sweep.
 */
#define _GNU_SOURCE /* prctl, strsignal, kill, nanosleep */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h" /* kolo_param_print */
#include "kolo.h"
#include "perf/kolo_backend.h"
#include "perf/perf_args.h"
#include "perf/perf_cuda.h"
#include "perf/perf_net.h"
#include "perf/perf_overlap.h"
#include "perf/perf_prims.h"
#include "perf/perf_sweep.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* After one process failed, the others get KOLO_TIMEOUT_MS plus this (ms)
 * to end on their own (kolo turns a dead or stopped peer into an error
 * within the timeout), at most FAIL_GRACE_MAX_MS; then they are killed. */
#define FAIL_GRACE_EXTRA_MS 2000
#define FAIL_GRACE_MAX_MS 10000
/* A child's exit status when the parent sent no id (and said why). */
#define CHILD_NO_ID 3
/* Milliseconds a process waits at the exit gate for the others. */
#define GATE_WAIT_MS 60000

/* The worse of two exit codes: 2 (a call failed) > 1 (wrong results) > 0. */
/* The memory line of the table's header: on kolo's CPU model of the GPU
 * (-DKOLO_CUDA=SIM) the figures are the model's, never a GPU's. */
#ifdef KOLO_CUDA_SIM
#define CUDA_MEMORY_NAME "cuda on kolo's CPU model of the GPU (MODEL FIGURES: CPU time, not a GPU's)"
#else
#define CUDA_MEMORY_NAME "cuda"
#endif

static int worse(int x, int y) { return x > y ? x : y; }

static char library_name[32];

static void set_library_name(void) {
  int v = 0;
  if (koloGetVersion(&v) != koloSuccess) v = KOLO_VERSION_CODE;
  snprintf(library_name, sizeof library_name, "kolo %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* ---- devices and config ------------------------------------------------ */

/* The CUDA device of a rank, made current on this thread: -g's list, or
 * every visible device, taken round-robin by the rank's local index.  -1
 * for host memory, or after a failure (reported). */
static int pick_device(const perf_args *a, int local_rank) {
#ifdef KOLO_HAVE_CUDA
  int n = 0, dev;
  cudaError_t err = cudaSuccess;
  if (!a->mem_cuda) return -1;
  if (a->ngpus > 0) {
    dev = a->gpus[local_rank % a->ngpus];
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
#else
  (void)dev;
#endif
  snprintf(where, len, "%s memory", a->mem_cuda ? "cuda" : "host");
}

/* Is there a CUDA device (and each -g one)?  Else says why: no device, or
 * no CUDA in this build.  fork_first: ask from a child process. */
static int cuda_ready(const perf_args *a, int fork_first) {
#ifdef KOLO_HAVE_CUDA
  char why[256];
  int n = 0;
  if (perf_cuda_probe(fork_first, &n, why, sizeof why) != 0) {
    fprintf(stderr, "kolo-perf: no CUDA device: %s\n", why);
    return -1;
  }
  for (int i = 0; i < a->ngpus; i++) {
    if (a->gpus[i] < n) continue;
    fprintf(stderr, "kolo-perf: -g: there is no device %d (%d visible)\n", a->gpus[i], n);
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

static koloConfig_t comm_config(const perf_args *a, int dev) {
  koloConfig_t c = KOLO_CONFIG_INITIALIZER;
  c.memory = a->mem_cuda ? koloMemCuda : koloMemHost;
  if (dev >= 0) c.cudaDev = dev;
  return c;
}

/* ---- exit gate ---------------------------------------------------------- */

typedef struct {
  int nthreads;
  pthread_barrier_t barrier; /* the threads of this process (nthreads > 1) */
  int done_fd, go_fd;        /* to and from the parent when forked, else -1 */
  _Atomic int failed;        /* a rank of this process failed: do not wait for "go" */
} exit_gate;

static int gate_init(exit_gate *g, int nthreads, int done_fd, int go_fd) {
  g->nthreads = nthreads;
  g->done_fd = done_fd;
  g->go_fd = go_fd;
  atomic_store(&g->failed, 0);
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

/* Every rank of this machine has finished its sweep when this returns
 * (or, failed != 0 on any rank of this process, every rank of it). */
static void gate_pass(exit_gate *g, int failed) {
  if (g == NULL) return;
  if (failed) atomic_store(&g->failed, 1);
  if (g->nthreads == 1) {
    gate_process(g);
    return;
  }
  if (pthread_barrier_wait(&g->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) gate_process(g);
  pthread_barrier_wait(&g->barrier);
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
  if (kolo_backend_init(&kb, &be, comm, a->mem_cuda) == 0) {
    describe(a, dev, where, sizeof where);
    code = a->overlap ? perf_overlap_run(a, &kb, &be, cfg, where, stdout) : perf_sweep_run(a, &be, cfg, where, stdout);
    kolo_backend_fini(&kb);
  }
  if (code == 2) { /* at once: the others stop waiting for this rank */
    koloResult_t res = koloCommAbort(comm);
    if (res != koloSuccess) kolo_backend_report(kb.rank, comm, res, "koloCommAbort");
    gate_pass(gate, 1);
    return code;
  }
  gate_pass(gate, 0);
  koloResult_t res = koloCommDestroy(comm);
  if (res != koloSuccess) {
    kolo_backend_report(kb.rank, NULL, res, "koloCommDestroy");
    code = 2;
  }
  return code;
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

static void *rank_thread(void *p) {
  rank_job *j = p;
  if (j->a->mem_cuda && j->dev < 0) { /* pick_device said why */
    j->code = 2;
    gate_pass(j->gate, 1);
    return NULL;
  }
#ifdef KOLO_HAVE_CUDA
  cudaError_t err = j->dev >= 0 ? cudaSetDevice(j->dev) : cudaSuccess;
  if (err != cudaSuccess) {
    fprintf(stderr, "rank %d: cudaSetDevice(%d) failed: %s\n", j->rank, j->dev, cudaGetErrorString(err));
    j->code = 2;
    gate_pass(j->gate, 1);
    return NULL;
  }
#endif
  if (j->comm == NULL) {
    koloConfig_t c = comm_config(j->a, j->dev);
    koloResult_t res = koloCommInitRankConfig(&j->comm, j->cfg->nranks, j->id, j->rank, &c);
    if (res != koloSuccess) {
      kolo_backend_report(j->rank, NULL, res, "koloCommInitRank");
      j->code = 2;
      gate_pass(j->gate, 1);
      return NULL;
    }
  }
  j->code = run_rank(j->a, j->cfg, j->comm, j->dev, j->gate);
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
    code = worse(code, jobs[i].code);
  }
  return code;
}

static rank_job *new_jobs(const perf_args *a, const perf_config *cfg, int n, exit_gate *gate) {
  rank_job *jobs = calloc((size_t)n, sizeof *jobs);
  if (jobs == NULL) {
    fprintf(stderr, "kolo-perf: out of memory\n");
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    jobs[i].a = a;
    jobs[i].cfg = cfg;
    jobs[i].dev = -1;
    jobs[i].gate = gate;
  }
  return jobs;
}

/* ---- ranks as threads of this process ----------------------------------- */

static int run_local(const perf_args *a, perf_config *cfg) {
  int n = a->threads, code;
  exit_gate gate;
  if (gate_init(&gate, n, -1, -1) != 0) return 2;
  koloComm_t *comms = calloc((size_t)n, sizeof *comms);
  int *devs = calloc((size_t)n, sizeof *devs);
  rank_job *jobs = new_jobs(a, cfg, n, &gate);
  if (comms == NULL || devs == NULL || jobs == NULL) {
    code = 2;
    goto out_free;
  }
  for (int r = 0; r < n; r++) {
    devs[r] = pick_device(a, r);
    if (a->mem_cuda && devs[r] < 0) {
      code = 2;
      goto out_free;
    }
  }
  koloConfig_t c = comm_config(a, -1);
  koloResult_t res = koloCommInitAllConfig(comms, n, a->mem_cuda ? devs : NULL, &c);
  if (res != koloSuccess) {
    kolo_backend_report(-1, NULL, res, "koloCommInitAll");
    code = 2;
    goto out_free;
  }
  for (int r = 0; r < n; r++) {
    jobs[r].comm = comms[r];
    jobs[r].rank = r;
    jobs[r].dev = devs[r];
  }
  code = run_jobs(jobs, n);
out_free:
  free(jobs);
  free(devs);
  free(comms);
  gate_fini(&gate);
  return code;
}

/* ---- a launcher's job --------------------------------------------------- */

/* The launcher whose world size is above 1, or NULL. */
static const char *launcher_size_var(int *size) {
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

static int run_launched(const perf_args *a, perf_config *cfg) {
  if (a->threads != 1) {
    fprintf(stderr, "kolo-perf: -t is for -p or a single process; a launcher starts one rank per process\n");
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

/* ---- forked processes --------------------------------------------------- */

static int read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* A forked rank group: waits for the id on fd, runs its THREADS ranks, and
 * at the exit gate writes "done" to done_fd and waits for "go" on fd. */
static int run_child(const perf_args *a, const perf_config *cfg, int proc, int fd, int done_fd, pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return 2;
  koloUniqueId id;
  if (read_all(fd, &id, sizeof id) != 0) return CHILD_NO_ID; /* the parent says why */
  exit_gate gate;
  if (gate_init(&gate, a->threads, done_fd, fd) != 0) return 2;
  rank_job *jobs = new_jobs(a, cfg, a->threads, &gate);
  if (jobs == NULL) return 2;
  for (int t = 0; t < a->threads; t++) {
    jobs[t].id = id;
    jobs[t].rank = proc * a->threads + t;
    jobs[t].dev = pick_device(a, jobs[t].rank);
  }
  int code = run_jobs(jobs, a->threads);
  free(jobs);
  gate_fini(&gate);
  return code;
}

static volatile sig_atomic_t pending_signal;
static void on_signal(int sig) { pending_signal = sig; }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A forked process, as the parent sees it. */
typedef struct {
  pid_t pid;   /* 0 once reaped */
  int id_fd;   /* write end: the id, later "go" (-1 when closed) */
  int done_fd; /* read end: "done" at the exit gate (-1 when closed) */
  int done;    /* said done, or exited */
} child;

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void kill_all(const child *ch, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (ch[i].pid > 0 && kill(ch[i].pid, sig) != 0 && errno != ESRCH) perror("kolo-perf: kill");
}

/* What a child's end means; reports anything but success and wrong results. */
static int child_status(const perf_args *a, int proc, pid_t pid, int status) {
  int first = proc * a->threads, last = first + a->threads - 1;
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "kolo-perf: process %d (pid %d, ranks %d..%d) was killed by signal %d (%s)\n", proc,
            (int)pid, first, last, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 2;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  if (code > 1 && code != CHILD_NO_ID)
    fprintf(stderr, "kolo-perf: process %d (pid %d, ranks %d..%d) failed (exit status %d)\n", proc, (int)pid,
            first, last, code);
  return code == 0 ? 0 : code == 1 ? 1 : 2;
}

/* The exit gate's parent side: notes "done" (or a closed pipe), and once
 * every process is done, says "go" to all. */
static void gate_serve(child *ch, int n) {
  int all = 1;
  for (int i = 0; i < n; i++) {
    char b;
    if (!ch[i].done && ch[i].done_fd >= 0) {
      ssize_t r = read(ch[i].done_fd, &b, 1);
      if (r == 1 || r == 0 || (errno != EAGAIN && errno != EINTR)) ch[i].done = 1;
    }
    all &= ch[i].done;
  }
  for (int i = 0; all && i < n; i++) {
    if (ch[i].id_fd >= 0 && write(ch[i].id_fd, "g", 1) < 0 && errno != EPIPE)
      perror("kolo-perf: exit gate");
    close_fd(&ch[i].id_fd);
    close_fd(&ch[i].done_fd);
  }
}

/* Waits up to 20 ms for a "done" on any pipe (or a signal). */
static void nap(const child *ch, int n) {
  struct pollfd fds[64];
  int k = 0;
  for (int i = 0; i < n && k < 64; i++)
    if (ch[i].done_fd >= 0 && !ch[i].done) fds[k++] = (struct pollfd){ch[i].done_fd, POLLIN, 0};
  if (k > 0) {
    poll(fds, (nfds_t)k, 20);
  } else {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Seconds the others get after the first failure (FAIL_GRACE_EXTRA_MS). */
static double fail_grace_s(void) {
  int64_t ms = kolo_param_int("KOLO_TIMEOUT_MS");
  ms = (ms <= 0 ? FAIL_GRACE_MAX_MS : ms) + FAIL_GRACE_EXTRA_MS;
  return (double)(ms < FAIL_GRACE_MAX_MS ? ms : FAIL_GRACE_MAX_MS) / 1000.0;
}

/* Reaps every child and serves the exit gate.  After the first failure the
 * others get fail_grace_s() to fail too, then are killed (a stopped one
 * too) and reaped. */
static int wait_children(const perf_args *a, child *ch, int n) {
  int left = n, code = 0;
  double deadline = 0, grace = fail_grace_s();
  while (left > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) {
      perror("kolo-perf: waitpid");
      kill_all(ch, n, SIGKILL);
      return 2;
    }
    for (int i = 0; pid > 0 && i < n; i++) {
      if (ch[i].pid != pid) continue;
      int c = child_status(a, i, pid, status);
      if (c == 2 && deadline == 0) deadline = now_s() + grace;
      code = worse(code, c);
      ch[i].pid = 0;
      ch[i].done = 1;
      close_fd(&ch[i].id_fd);
      close_fd(&ch[i].done_fd);
      left--;
    }
    gate_serve(ch, n);
    if (pid > 0) continue;
    if (pending_signal) {
      kill_all(ch, n, pending_signal);
      pending_signal = 0;
    }
    if (deadline > 0 && now_s() > deadline) {
      fprintf(stderr, "kolo-perf: %d process(es) still running %.1f s after a failure: killing them\n", left,
              grace);
      kill_all(ch, n, SIGKILL);
      deadline = 0;
    }
    nap(ch, n);
  }
  return code;
}

/* Forks one process: its pipes, and in the child the rank group itself. */
static int fork_child(const perf_args *a, const perf_config *cfg, child *ch, int proc, pid_t parent) {
  int idp[2], donep[2];
  if (pipe(idp) != 0) {
    perror("kolo-perf: pipe");
    return -1;
  }
  if (pipe(donep) != 0) {
    perror("kolo-perf: pipe");
    close(idp[0]);
    close(idp[1]);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("kolo-perf: fork");
    close(idp[0]);
    close(idp[1]);
    close(donep[0]);
    close(donep[1]);
    return -1;
  }
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    for (int i = 0; i < proc; i++) {
      close_fd(&ch[i].id_fd);
      close_fd(&ch[i].done_fd);
    }
    free(ch); /* the parent's table, copied */
    close(idp[1]);
    close(donep[0]);
    int c = run_child(a, cfg, proc, idp[0], donep[1], parent);
    fflush(NULL);
    exit(c);
  }
  close(idp[0]);
  close(donep[1]);
  fcntl(donep[0], F_SETFL, O_NONBLOCK);
  ch[proc] = (child){pid, idp[1], donep[0], 0};
  return 0;
}

/* Forks the rank groups, then starts the rendezvous and hands them its id. */
static int run_forked(const perf_args *a, perf_config *cfg) {
  int n = a->procs, code = 0, forked = 0;
  child *ch = calloc((size_t)n, sizeof *ch);
  if (ch == NULL) {
    fprintf(stderr, "kolo-perf: out of memory\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN); /* a child gone before its "go" */
  fflush(NULL);
  pid_t parent = getpid();
  for (; forked < n && code == 0; forked++)
    if (fork_child(a, cfg, ch, forked, parent) != 0) code = 2;
  if (code != 0) forked--;
  koloUniqueId id;
  koloResult_t res = code == 0 ? koloGetUniqueId(&id) : koloSuccess;
  if (res != koloSuccess) {
    kolo_backend_report(-1, NULL, res, "koloGetUniqueId");
    code = 2;
  }
  for (int i = 0; i < forked; i++) {
    if (code == 0 && write_all(ch[i].id_fd, &id, sizeof id) == 0) continue;
    if (code == 0) perror("kolo-perf: writing the unique id to a child");
    code = 2;
    close_fd(&ch[i].id_fd); /* closed empty: the child exits quietly */
  }
  code = worse(code, wait_children(a, ch, forked));
  free(ch);
  return code;
}

/* ---- main --------------------------------------------------------------- */

/* The header's word on how times were taken; NULL for host memory. */
static const char *timing_note(const perf_args *a) {
  if (!a->mem_cuda) return NULL;
  if (a->graph)
    return "per call within a CUDA graph: the -n calls of a size captured into one graph per rank after the "
           "warm-up, cudaEvents on the rank's stream around its launch; the slowest rank's";
  return "per call, cudaEvents on each rank's stream around the -n calls after the warm-up (ranks start "
         "together); the slowest rank's";
}

int main(int argc, char **argv) {
  /* `kolo-perf net` has a command line of its own (perf_net.h). */
  if (argc > 1 && strcmp(argv[1], "net") == 0) return perf_net_main(argc - 1, argv + 1);
  perf_args a;
  /* `kolo-perf overlap` too (perf_overlap.h), on the ranks set up below. */
  int overlap = argc > 1 && strcmp(argv[1], "overlap") == 0;
  int r = overlap ? perf_overlap_parse(&a, argc, argv) : perf_args_parse(&a, argc, argv, PERF_TOOL_KOLO);
  if (r != 0) return r > 0 ? 0 : 2;
  if (a.print_params) {
    kolo_param_print(stdout);
    if (a.coll == PERF_NUM_COLLS && !a.prims) return 0;
  }
  if (a.prims) return cuda_ready(&a, 0) == 0 ? perf_prims_run(&a) : 2;
  set_library_name();
  perf_config cfg = {"kolo-perf", library_name, "threads", a.mem_cuda ? CUDA_MEMORY_NAME : "host", 0, a.procs, a.threads,
                     timing_note(&a)};
  int world = 0;
  const char *var = a.procs_given ? NULL : launcher_size_var(&world);
  static char launch[64];
  if (a.mem_cuda && cuda_ready(&a, var == NULL && a.procs > 1) != 0) return 2;
  if (var != NULL) {
    snprintf(launch, sizeof launch, "launcher: %s", var);
    cfg.launch = launch;
    cfg.nranks = cfg.procs = world;
    cfg.threads = 1;
    return run_launched(&a, &cfg);
  }
  cfg.nranks = a.procs * a.threads;
  if (a.procs == 1) return run_local(&a, &cfg);
  cfg.launch = "forked";
  return run_forked(&a, &cfg);
}
