/* fault_trial.c - one fault trial from the parent's side (see fault_trial.h). */
#define _GNU_SOURCE
#include "fault_trial.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_util.h"
#include "kolo.h"

#define MAX_RANKS 8
/* A trial that never reaches its fault still ends (ms). */
#define TRIAL_LIMIT_MS 120000
/* A rank that reported has this long to exit (ms). */
#define EXIT_LIMIT_MS 10000
/* stop+cont-late resumes the victim this long after the timeout: clearly
 * past every grace kolo adds to it (the root's reply: timeout + 1 s), so
 * that which comes first is never a matter of a few ms. */
#define LATE_RESUME_MS 2500

static const char *const kind_names[FK_NUM] = {"kill", "stop", "stop+cont-early", "stop+cont-late", "cut", "link-down"};

const char *fault_kind_name(fault_kind k) { return k < FK_NUM ? kind_names[k] : "?"; }

/* A rank as the parent sees it. */
typedef struct {
  pid_t pid;
  int fd;        /* read end of its report pipe; -1 at EOF */
  char buf[4096];
  size_t len;
  int reported;  /* its R line came */
  char stage[256]; /* its last S line */
  int rc, calls, fd0, fd1, thr0, thr1;
  int status;    /* waitpid's, once reaped */
  long long t_ns;
  size_t bad;
  char text[2048]; /* "<where>|<koloGetLastError>" */
} rank_state;

typedef struct {
  const trial_spec *s;
  rank_state r[MAX_RANKS];
  int64_t t_start, t_fault, t_cont; /* 0: not yet */
  int link_down;
  int go_fd; /* link-down: written once the link is down; the victim waits to read it (-1: none) */
  trial_result res;
  char notes[8192]; /* the violations' lines, printed after the trial's */
} trial;

static void violation(trial *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(trial *t, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t used = strlen(t->notes);
  snprintf(t->notes + used, sizeof t->notes - used, "  VIOLATION: %s\n", msg);
  t->res.violations++;
}

/* ---- the ranks ------------------------------------------------------------------ */

static void set_env(const trial_spec *s, int rank) {
  char v[128];
  if (s->netns) snprintf(v, sizeof v, "10.78.0.1:%d", s->port);
  else snprintf(v, sizeof v, "127.0.0.1:%d", s->port);
  setenv("KOLO_ROOT", v, 1);
  snprintf(v, sizeof v, "%d", rank);
  setenv("KOLO_RANK", v, 1);
  snprintf(v, sizeof v, "%d", s->nranks);
  setenv("KOLO_WORLD_SIZE", v, 1);
  snprintf(v, sizeof v, "%d", s->timeout_ms);
  setenv("KOLO_TIMEOUT_MS", v, 1);
  setenv("KOLO_SECRET", "5ca1ab1e0ddba11c0ffee00ddeadbeef", 1);
  if (s->tcp) {
    setenv("KOLO_NET_FORCE", "1", 1);
    setenv("KOLO_SHM_DISABLE", "1", 1);
    setenv("KOLO_NET", "socket", 1);
  }
  if (s->netns) setenv("KOLO_SOCKET_IFNAME", "=eth0", 1);
}

/* Entry i (modulo their number) of "DEV:IFNAME:ADDR,...", each field
 * under 64 chars; 0, or -1 when malformed. */
static int ib_entry(const char *list, int i, char dev[64], char ifname[64], char addr[64]) {
  int n = 1;
  for (const char *p = list; (p = strchr(p, ',')) != NULL; p++) n++;
  const char *e = list;
  for (int k = 0; k < i % n; k++) e = strchr(e, ',') + 1;
  return sscanf(e, "%63[^:,]:%63[^:,]:%63[^:,]", dev, ifname, addr) == 3 ? 0 : -1;
}

/* --ib: rank's "host" is an entry of s->ib; KOLO_HOSTID apart, so every
 * pipe between hosts is an ib pipe. */
static int set_env_ib(const trial_spec *s, int rank) {
  char dev[64], ifname[64], addr[64], root[64], v[128];
  if (ib_entry(s->ib, 0, dev, ifname, root) != 0 || ib_entry(s->ib, rank, dev, ifname, addr) != 0) return -1;
  snprintf(v, sizeof v, "%s:%d", root, s->port);
  setenv("KOLO_ROOT", v, 1);
  snprintf(v, sizeof v, "=%s", dev);
  setenv("KOLO_IB_HCA", v, 1);
  snprintf(v, sizeof v, "=%s", ifname);
  setenv("KOLO_SOCKET_IFNAME", v, 1);
  snprintf(v, sizeof v, "fault-host-%s", addr);
  setenv("KOLO_HOSTID", v, 1);
  setenv("KOLO_NET", "ib", 1);
  return 0;
}

/* Moves this process into rank's namespace <netns>r<rank>. */
static int enter_netns(const trial_spec *s, int rank) {
  char path[256];
  snprintf(path, sizeof path, "/var/run/netns/%sr%d", s->netns, rank);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "rank %d: entering %s: %s\n", rank, path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

static void rank_child(trial *t, int rank, int wfd, int go_fd) {
  const trial_spec *s = t->s;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int i = 0; i < rank; i++) close(t->r[i].fd);
  if (!s->verbose) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0 && dup2(null, 2) >= 0) close(null);
  }
  if (s->netns && enter_netns(s, rank) != 0) _exit(3);
  set_env(s, rank);
  if (s->ib && set_env_ib(s, rank) != 0) _exit(3);
  rank_plan p = {rank, s->nranks, rank == s->victim, s->at, ACT_TELL, s->delay_ms, wfd, s->seed, s->cuda, go_fd};
  if (s->kind == FK_KILL) p.act = ACT_KILL;
  if (s->kind == FK_STOP || s->kind == FK_STOP_EARLY || s->kind == FK_STOP_LATE) p.act = ACT_STOP;
  if (s->kind == FK_CUT) p.act = ACT_CUT;
  _exit(fault_rank_main(&p));
}

/* The pipe on which the parent tells a link-down victim its link is down:
 * [0] for the victim, [1] for the parent; -1, -1 for other faults. */
static int go_pipe(const trial_spec *s, int go[2]) {
  go[0] = go[1] = -1;
  return s->kind == FK_LINK_DOWN ? pipe2(go, O_CLOEXEC) : 0;
}

static int fork_ranks(trial *t) {
  fflush(NULL);
  int go[2];
  if (go_pipe(t->s, go) != 0) return -1;
  t->go_fd = go[1];
  for (int i = 0; i < t->s->nranks; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      return -1;
    }
    if (pid == 0) {
      close(p[0]);
      if (go[1] >= 0) close(go[1]);
      rank_child(t, i, p[1], i == t->s->victim ? go[0] : -1);
    }
    close(p[1]);
    if (fcntl(p[0], F_SETFL, O_NONBLOCK) != 0) perror("kolo-fault: fcntl");
    t->r[i].pid = pid;
    t->r[i].fd = p[0];
  }
  if (go[0] >= 0) close(go[0]);
  return 0;
}

/* ---- the parent's loop ------------------------------------------------------------ */

/* `ip -n <netns>hub link set v<victim> up|down`. */
static int set_link(const trial_spec *s, const char *state) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ip -n %shub link set v%d %s", s->netns, s->victim, state);
  int rc = system(cmd);
  if (rc != 0) printf("  (%s: status %d)\n", cmd, rc);
  return rc;
}

/* The victim's F line: the fault happened now; the parent's part of it. */
static void on_fault(trial *t, long long t_ns) {
  const trial_spec *s = t->s;
  t->t_fault = t_ns;
  if (s->kind == FK_STOP_EARLY) t->t_cont = t_ns + (int64_t)s->timeout_ms * 200000LL;
  if (s->kind == FK_STOP_LATE) t->t_cont = t_ns + ((int64_t)s->timeout_ms + LATE_RESUME_MS) * 1000000LL;
  if (s->kind == FK_LINK_DOWN && set_link(s, "down") == 0) t->link_down = 1;
  /* the victim waits until its link is down (or could not be taken down) */
  if (t->go_fd >= 0 && write(t->go_fd, "g", 1) != 1) perror("kolo-fault: telling the victim to go on");
}

/* line lies in the trial's own buffers: memmove, as snprintf's restrict
 * would not allow it (GCC says so at -O1). */
static void copy_line(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memmove(dst, src, n);
  dst[n] = '\0';
}

static void on_line(trial *t, rank_state *r, const char *line) {
  long long t_ns = 0;
  if (sscanf(line, "F %lld", &t_ns) == 1) {
    on_fault(t, t_ns);
    return;
  }
  if (strncmp(line, "S ", 2) == 0) {
    copy_line(r->stage, sizeof r->stage, line + 2);
    return;
  }
  int n = 0;
  if (sscanf(line, "R %*d %d %lld %zu %d %d %d %d %d %n", &r->rc, &r->t_ns, &r->bad, &r->calls, &r->fd0, &r->fd1,
             &r->thr0, &r->thr1, &n) >= 8 && n > 0) {
    copy_line(r->text, sizeof r->text, line + n);
    r->reported = 1;
  }
}

/* Reads what the rank wrote; lines are handled as they complete. */
static void drain(trial *t, rank_state *r) {
  for (;;) {
    ssize_t got = read(r->fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return; /* EAGAIN */
    if (got == 0) {
      close(r->fd);
      r->fd = -1;
      return;
    }
    r->len += (size_t)got;
    char *nl;
    while ((nl = memchr(r->buf, '\n', r->len)) != NULL) {
      *nl = 0;
      on_line(t, r, r->buf);
      r->len -= (size_t)(nl + 1 - r->buf);
      memmove(r->buf, nl + 1, r->len);
    }
    if (r->len == sizeof r->buf - 1) r->len = 0; /* a runaway line: dropped */
  }
}

/* Whether the parent still waits for rank i's report. */
static int awaited(const trial *t, int i) {
  const rank_state *r = &t->r[i];
  if (r->reported || r->fd < 0) return 0;
  int silent_victim = i == t->s->victim && (t->s->kind == FK_KILL || t->s->kind == FK_STOP);
  return !silent_victim || t->t_fault == 0;
}

/* When the wait for reports must be over (ns). */
static int64_t deadline(const trial *t) {
  const trial_spec *s = t->s;
  if (t->t_fault == 0) return t->t_start + TRIAL_LIMIT_MS * 1000000LL;
  int64_t d = t->t_fault + ((int64_t)s->timeout_ms + s->bound_ms) * 1000000LL;
  /* the job may go on (a cut shm job keeps its data path): no error bound */
  if (s->kind == FK_STOP_EARLY || s->kind == FK_CUT) d += 60000 * 1000000LL;
  if (s->kind == FK_STOP_LATE) d += ((int64_t)s->timeout_ms + LATE_RESUME_MS) * 1000000LL;
  /* a CUDA rank's teardown after its error waits up to a timeout more for
   * peers to close its pipe memory (core/cuda_teardown.c): the report comes
   * after it; the error's own time is judged apart */
  if (s->cuda) d += (int64_t)s->timeout_ms * 1000000LL;
  return d;
}

/* With -v, the stacks of a rank that hangs (if gdb is there). */
static void dump_stacks(pid_t pid) {
  char cmd[256];
  snprintf(cmd, sizeof cmd,
           "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^#|^Thread' | "
           "sed 's/^/    /' | head -60",
           (int)pid);
  fflush(stdout);
  if (system(cmd) == -1) perror("kolo-fault: system");
}

/* Polls the ranks' pipes until every awaited report came or the deadline. */
static void collect(trial *t) {
  const trial_spec *s = t->s;
  for (;;) {
    struct pollfd pf[MAX_RANKS];
    int n = 0, waiting = 0;
    for (int i = 0; i < s->nranks; i++) {
      waiting |= awaited(t, i);
      if (t->r[i].fd >= 0) pf[n++] = (struct pollfd){t->r[i].fd, POLLIN, 0};
    }
    if (!waiting) return;
    if (t->t_cont != 0 && fu_now_ns() >= t->t_cont) {
      if (kill(t->r[s->victim].pid, SIGCONT) != 0) perror("kolo-fault: SIGCONT");
      t->t_cont = 0;
    }
    if (fu_now_ns() > deadline(t)) {
      for (int i = 0; i < s->nranks; i++)
        if (awaited(t, i))
          violation(t, "hang: rank %d did not report within %.0f ms of the %s; it was at: %s", i,
                    (double)(fu_now_ns() - (t->t_fault ? t->t_fault : t->t_start)) / 1e6,
                    t->t_fault ? "fault" : "start (the fault never came)", t->r[i].stage);
      for (int i = 0; s->verbose && i < s->nranks; i++)
        if (awaited(t, i)) dump_stacks(t->r[i].pid);
      return;
    }
    if (poll(pf, (nfds_t)n, 20) < 0 && errno != EINTR) perror("kolo-fault: poll");
    for (int i = 0; i < s->nranks; i++)
      if (t->r[i].fd >= 0) drain(t, &t->r[i]);
  }
}

/* ---- the end of a trial --------------------------------------------------------------- */

/* Kills what is left (a victim stopped for good, ranks past the deadline)
 * and reaps every rank, each within EXIT_LIMIT_MS. */
static void reap(trial *t) {
  const trial_spec *s = t->s;
  for (int i = 0; i < s->nranks; i++) {
    rank_state *r = &t->r[i];
    if (r->pid <= 0) continue;
    if (!r->reported && kill(r->pid, SIGKILL) != 0 && errno != ESRCH) perror("kolo-fault: kill");
    int64_t limit = fu_now_ns() + EXIT_LIMIT_MS * 1000000LL;
    int status;
    pid_t got;
    while ((got = waitpid(r->pid, &status, WNOHANG)) == 0 && fu_now_ns() < limit) fu_sleep_ms(5);
    if (got == 0) {
      violation(t, "rank %d (pid %d) did not exit %d ms after its report: killed", i, (int)r->pid, EXIT_LIMIT_MS);
      kill(r->pid, SIGKILL);
      waitpid(r->pid, &status, 0);
    }
    r->status = status;
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
  }
}

/* No rank segment in /dev/shm, no child process left. */
static void check_leftovers(trial *t) {
  pid_t pids[MAX_RANKS];
  for (int i = 0; i < t->s->nranks; i++) pids[i] = t->r[i].pid;
  int per_rank[MAX_RANKS];
  int segs = fu_shm_segments_of(pids, t->s->nranks, per_rank);
  if (segs != 0) {
    violation(t, "%d /dev/shm/kolo-* segment(s) of the ranks left, %d of them the victim's", segs,
              per_rank[t->s->victim]);
    t->res.leak_shm += segs;
  }
  /* the CUDA model's device memory: a rank that never reported was
   * killed; a survivor keeps (by design: core/cuda_teardown.c) the pipe
   * memory a stopped peer, or one it has no connection to, may still map */
  const rank_state *v = &t->r[t->s->victim];
  segs = t->s->cuda ? fault_cuda_segments_of(pids, t->s->nranks, v->reported ? 0 : v->pid) : 0;
  fault_kind k = t->s->kind;
  if (segs > 0 && (k == FK_STOP || k == FK_STOP_LATE || k == FK_CUT)) {
    t->res.dev_abandoned += segs;
  } else if (segs != 0) {
    violation(t, "%d /dev/shm/cudasim-* segment(s) (device memory) of the ranks left", segs);
    t->res.leak_shm += segs;
  }
  int status;
  pid_t extra = waitpid(-1, &status, WNOHANG);
  if (extra != -1 || errno != ECHILD) {
    violation(t, "a child process is left (waitpid: %d)", (int)extra);
    t->res.leak_child++;
  }
}

/* "rank V" with no digit after it. */
static int names_rank(const char *text, int v) {
  char pat[32];
  int len = snprintf(pat, sizeof pat, "rank %d", v);
  for (const char *p = strstr(text, pat); p != NULL; p = strstr(p + 1, pat))
    if (p[len] < '0' || p[len] > '9') return 1;
  return 0;
}

/* Leaks and wrong data of a rank that reported. */
static void judge_leaks(trial *t, int i) {
  const rank_state *r = &t->r[i];
  if (r->bad > 0) violation(t, "rank %d: %zu wrong element(s) in calls that succeeded", i, r->bad);
  if (r->fd1 != r->fd0) {
    violation(t, "rank %d: %d fds before init, %d after teardown", i, r->fd0, r->fd1);
    t->res.leak_fd++;
  }
  if (r->thr1 != r->thr0) {
    violation(t, "rank %d: %d threads before init, %d after teardown", i, r->thr0, r->thr1);
    t->res.leak_thread++;
  }
}

/* Whether rank i may have succeeded despite the fault. */
static int may_succeed(const trial *t, int i) {
  const trial_spec *s = t->s;
  return s->kind == FK_STOP_EARLY || s->kind == FK_CUT || s->at == AT_DESTROY || (i == s->victim && s->kind == FK_LINK_DOWN);
}

/* A stopped rank, or one behind a link that is down, is alive to every
 * check but the timeout. */
static int is_silent(fault_kind k) { return k == FK_STOP || k == FK_STOP_EARLY || k == FK_STOP_LATE || k == FK_LINK_DOWN; }

/* Whether a survivor's error names the victim: "rank V", or for rank 0
 * (which serves the rendezvous at init) "root". */
static int names_victim(const trial_spec *s, const char *text) {
  return names_rank(text, s->victim) || (s->victim == 0 && strstr(text, "root") != NULL);
}

/* A survivor's error must name the victim; after a silent fault it may name
 * instead the rank it waited on (every rank of a ring stalls at once, and
 * each knows only its own neighbour), but a rank. */
static void judge_error(trial *t, int i) {
  const trial_spec *s = t->s;
  const rank_state *r = &t->r[i];
  double tte = t->t_fault ? (double)(r->t_ns - t->t_fault) / 1e6 : -1;
  double bound = s->timeout_ms + s->bound_ms + (i == s->victim && s->kind == FK_STOP_LATE ? s->timeout_ms + LATE_RESUME_MS : 0);
  if (s->kind == FK_STOP_EARLY) violation(t, "rank %d failed though the victim was resumed in time: %s", i, r->text);
  else if (t->t_fault == 0) violation(t, "rank %d failed with no fault: %s", i, r->text);
  else if (tte > bound) violation(t, "rank %d: error %.0f ms after the fault (bound %.0f): %s", i, tte, bound, r->text);
  if (i != s->victim && names_victim(s, r->text)) t->res.named_victim++;
  else if (i != s->victim && (!is_silent(s->kind) || strstr(r->text, "rank ") == NULL))
    violation(t, "rank %d: its error does not name rank %d: %s", i, s->victim, r->text);
  const char *bar = strchr(r->text, '|');
  if (bar == NULL || bar[1] == 0) violation(t, "rank %d: %s with an empty error text", i, koloGetErrorString(r->rc));
  if (i != s->victim && tte > t->res.max_tte_ms) t->res.max_tte_ms = tte;
}

static void judge(trial *t) {
  const trial_spec *s = t->s;
  for (int i = 0; i < s->nranks; i++) {
    const rank_state *r = &t->r[i];
    int silent_victim = i == s->victim && (s->kind == FK_KILL || s->kind == FK_STOP);
    if (!r->reported) {
      if (!silent_victim)
        violation(t, "rank %d ended without a report (%s %d)", i, WIFSIGNALED(r->status) ? "signal" : "exit status",
                  WIFSIGNALED(r->status) ? WTERMSIG(r->status) : WEXITSTATUS(r->status));
      continue;
    }
    judge_leaks(t, i);
    if (r->rc == 0) {
      t->res.ok_ranks++;
      if (!may_succeed(t, i)) violation(t, "rank %d succeeded though rank %d had its fault", i, s->victim);
      continue;
    }
    t->res.err_ranks++;
    judge_error(t, i);
  }
}

static void print_trial(const trial *t, int index) {
  const trial_spec *s = t->s;
  printf("trial %d: %s n=%d victim %d at %s (+%.0f ms) %s: %d ok, %d failed, max time to error %.0f ms%s\n", index,
         s->ib ? "ib" : s->cuda ? (s->tcp ? "cuda/tcp" : "cuda") : s->netns ? "tcp/netns" : s->tcp ? "tcp" : "shm", s->nranks, s->victim, fault_at_name(s->at), s->delay_ms,
         fault_kind_name(s->kind), t->res.ok_ranks, t->res.err_ranks, t->res.max_tte_ms,
         t->res.violations ? " -- VIOLATED" : "");
  fputs(t->notes, stdout);
  for (int i = 0; s->verbose && i < s->nranks; i++)
    if (t->r[i].reported && t->r[i].rc != 0)
      printf("  rank %d: %s after %.0f ms: %s\n", i, koloGetErrorString(t->r[i].rc),
             t->t_fault ? (double)(t->r[i].t_ns - t->t_fault) / 1e6 : -1.0, t->r[i].text);
}

trial_result fault_trial_run(const trial_spec *s, int index) {
  static trial t; /* large; one at a time */
  memset(&t, 0, sizeof t);
  t.s = s;
  for (int i = 0; i < MAX_RANKS; i++) t.r[i].fd = -1;
  t.go_fd = -1;
  t.t_start = fu_now_ns();
  if (s->nranks > MAX_RANKS || fork_ranks(&t) != 0) {
    violation(&t, "could not start %d ranks: %s", s->nranks, strerror(errno));
  } else {
    collect(&t);
  }
  reap(&t);
  if (t.go_fd >= 0) close(t.go_fd);
  if (t.link_down) set_link(s, "up");
  check_leftovers(&t);
  judge(&t);
  print_trial(&t, index);
  fflush(stdout);
  return t.res;
}
