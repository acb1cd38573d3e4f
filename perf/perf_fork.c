/* perf_fork.c - kolo-perf -P: rank groups in forked processes.
 *
 * The parent forks every rank group *first*, while it has a single thread,
 * and only then calls koloGetUniqueId, which starts the rendezvous root
 * thread here; the 128-byte id reaches each child through a pipe.  So no
 * child inherits a copy of a running thread's state (locks held, the
 * root's listening socket), and the parent -- which runs no rank itself --
 * keeps the root alive for as long as any rank may need it, reaps every
 * child, says which one failed or was killed by which signal, forwards
 * SIGINT / SIGTERM to them, and exits non-zero if any did.  Children die
 * with the parent (PR_SET_PDEATHSIG).  The parent side of the exit gate
 * (perf_ranks.c) is here too. */
#define _GNU_SOURCE /* strsignal, kill */
#include "perf/perf_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h" /* kolo_param_int */
#include "kolo.h"
#include "perf/kolo_backend.h"
#include "perf/perf_pipe.h"
#include "perf/perf_sweep.h"

/* After one process failed, the others get KOLO_TIMEOUT_MS plus this (ms)
 * to end on their own (kolo turns a dead or stopped peer into an error
 * within the timeout), at most FAIL_GRACE_MAX_MS; then they are killed. */
#define FAIL_GRACE_EXTRA_MS 2000
#define FAIL_GRACE_MAX_MS 10000

static volatile sig_atomic_t pending_signal;
static void on_signal(int sig) { pending_signal = sig; }

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

static void close_pipes(child *c) {
  close_fd(&c->id_fd);
  close_fd(&c->done_fd);
}

static void kill_all(const child *ch, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (ch[i].pid > 0 && kill(ch[i].pid, sig) != 0 && errno != ESRCH) perror("kolo-perf: kill");
}

/* What a child's end means; reports anything but success and wrong results. */
static int child_status(const perf_args *a, int proc, pid_t pid, int status) {
  int first = proc * perf_local_ranks(a), last = first + perf_local_ranks(a) - 1;
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "kolo-perf: process %d (pid %d, ranks %d..%d) was killed by signal %d (%s)\n", proc,
            (int)pid, first, last, WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 2;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  if (code > 1 && code != PERF_CHILD_NO_ID)
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
    close_pipes(&ch[i]);
  }
}

/* Waits up to 20 ms for a "done" on any pipe (or a signal). */
static void nap(const child *ch, int n) {
  struct pollfd fds[64];
  int k = 0;
  for (int i = 0; i < n && k < 64; i++)
    if (ch[i].done_fd >= 0 && !ch[i].done) fds[k++] = (struct pollfd){ch[i].done_fd, POLLIN, 0};
  poll(fds, (nfds_t)k, 20); /* with no pipe left, a plain 20 ms sleep */
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
      if (c == 2 && deadline == 0) deadline = perf_now_us() * 1e-6 + grace;
      code = perf_worse_code(code, c);
      ch[i].pid = 0;
      ch[i].done = 1;
      close_pipes(&ch[i]);
      left--;
    }
    gate_serve(ch, n);
    if (pid > 0) continue;
    if (pending_signal) {
      kill_all(ch, n, pending_signal);
      pending_signal = 0;
    }
    if (deadline > 0 && perf_now_us() * 1e-6 > deadline) {
      fprintf(stderr, "kolo-perf: %d process(es) still running %.1f s after a failure: killing them\n", left,
              grace);
      kill_all(ch, n, SIGKILL);
      deadline = 0;
    }
    nap(ch, n);
  }
  return code;
}

/* --bind core, in child proc: onto the proc-th CPU it may use (modulo
 * their number), where mpirun --bind-to core --map-by core puts rank proc.
 * The threads kolo starts later inherit it.  0, or -1 having said why. */
static int bind_core(int proc) {
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    perror("kolo-perf: --bind core: sched_getaffinity");
    return -1;
  }
  int want = proc % CPU_COUNT(&allowed), cpu = -1;
  while (want >= 0) /* the want-th allowed CPU, counting from 0 */
    if (CPU_ISSET(++cpu, &allowed)) want--;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) return 0;
  fprintf(stderr, "kolo-perf: --bind core: process %d onto CPU %d: %s\n", proc, cpu, strerror(errno));
  return -1;
}

/* Forks one process: its pipes, and in the child the rank group itself. */
static int fork_child(const perf_args *a, const perf_config *cfg, child *ch, int proc, pid_t parent) {
  int idp[2] = {-1, -1}, donep[2] = {-1, -1};
  int piped = pipe(idp) == 0 && pipe(donep) == 0;
  pid_t pid = piped ? fork() : -1;
  if (pid < 0) {
    perror(piped ? "kolo-perf: fork" : "kolo-perf: pipe");
    for (int i = 0; i < 2; i++) {
      close_fd(&idp[i]);
      close_fd(&donep[i]);
    }
    return -1;
  }
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    for (int i = 0; i < proc; i++) close_pipes(&ch[i]);
    free(ch); /* the parent's table, copied */
    close(idp[1]);
    close(donep[0]);
    if (a->bind_core && bind_core(proc) != 0) exit(2);
    int c = perf_run_child(a, cfg, proc, idp[0], donep[1], parent);
    fflush(NULL);
    exit(c);
  }
  close(idp[0]);
  close(donep[1]);
  fcntl(donep[0], F_SETFL, O_NONBLOCK);
  ch[proc] = (child){pid, idp[1], donep[0], 0};
  return 0;
}

int perf_run_forked(const perf_args *a, perf_config *cfg) {
  int n = a->procs, forked = 0;
  child *ch = calloc((size_t)n, sizeof *ch);
  if (ch == NULL) {
    fprintf(stderr, "kolo-perf: out of memory\n");
    return 2;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN); /* a child gone before its "go" */
  fflush(NULL);
  pid_t parent = getpid();
  while (forked < n && fork_child(a, cfg, ch, forked, parent) == 0) forked++;
  int code = forked < n ? 2 : 0;
  koloUniqueId id;
  koloResult_t res = code == 0 ? koloGetUniqueId(&id) : koloSuccess;
  if (res != koloSuccess) {
    kolo_backend_report(-1, NULL, res, "koloGetUniqueId");
    code = 2;
  }
  for (int i = 0; i < forked; i++) {
    if (code == 0 && perf_write_full(ch[i].id_fd, &id, sizeof id) == 0) continue;
    if (code == 0) perror("kolo-perf: writing the unique id to a child");
    code = 2;
    close_fd(&ch[i].id_fd); /* closed empty: the child exits quietly */
  }
  code = perf_worse_code(code, wait_children(a, ch, forked));
  free(ch);
  return code;
}
