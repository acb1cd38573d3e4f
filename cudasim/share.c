/* share.c - processes of one "model machine" sharing its devices.
 *
 * A GPU is one device for every process on its host.  The processes that
 * use the model with the same KOLO_SIM_MACHINE (set by the first process
 * that loads the model, inherited by its forked and exec'd children, so
 * that unrelated test runs on one host never share), KOLO_SIM_SHARE and
 * KOLO_SIM_SMS map one POSIX shared-memory object,
 * /dev/shm/cudasim-machine-<id>-<mode>-<sms>, which holds per device what
 * must be seen by all of them:
 *
 *   KOLO_SIM_SHARE=timeslice (the default, a GPU without MPS): one context
 *   (process) at a time runs kernels on a device.  The context that holds
 *   the slice keeps it while no other has blocks on the device; else, after
 *   KOLO_SIM_TIMESLICE_US, the device passes to the next context with blocks,
 *   once every runner of the last one has left its pass (a GPU saves the
 *   whole context at once).  Runners of a context without the slice wait
 *   on a futex, at the start of each pass (so at a poll, a barrier or a
 *   block's start), without using a core.
 *
 *   KOLO_SIM_SHARE=mps: the SMs' units are counted here, across processes;
 *   a block waits for room another process's blocks hold, and a thread of
 *   each waiting process ("ksim-share") places it once room frees.
 *
 * Crash safety: the page's lock is a robust mutex; a process that died is
 * reaped (its blocks' units given back, the slice taken from it) by the
 * next one that waits on it, at most a wait (1 ms) later, and the object
 * of a machine whose processes all died is unlinked by the next process
 * that starts the model.  A process that exits normally reaps itself and,
 * the last one, unlinks the object. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cudasim/sim.h"

#define SHARE_PREFIX "cudasim-machine-"
#define SHARE_MAGIC 0x45524853u /* "SHRE" */
#define MAX_PROCS 32
#define MAX_SMS 1024
#define WAIT_NS 1000000L /* a waiter looks again for a dead holder this often */

enum { MODE_TIMESLICE = 1, MODE_MPS = 2 };

typedef struct {
  int32_t pid;                      /* 0: a free slot (CAS'd) */
  int32_t active[SIM_MAX_DEVICES];  /* its blocks placed on each device */
  int32_t in_pass[SIM_MAX_DEVICES]; /* its runners in a pass on each device */
} share_proc;

typedef struct {
  int32_t holder;     /* slot + 1 of the context holding the slice, 0: none */
  int32_t prev;       /* slot + 1 of the last holder while its runners drain */
  uint64_t slice_end; /* CLOCK_MONOTONIC ns */
  uint32_t gen;       /* futex: bumped when the slice moves or a pass drains */
  uint32_t switches;  /* slices passed from a context to another */
  int32_t units[MAX_SMS];
} share_dev;

typedef struct {
  uint32_t magic; /* stored last by the creator */
  int32_t mode, sms;
  int64_t slice_ns;
  pthread_mutex_t lock; /* robust, process-shared */
  uint32_t room_gen;    /* futex (mps): bumped when units are given back */
  int32_t room_waiters; /* processes with blocks waiting for room */
  share_proc procs[MAX_PROCS];
  share_dev dev[SIM_MAX_DEVICES];
  int32_t held[MAX_PROCS][SIM_MAX_DEVICES][MAX_SMS]; /* each process's units (to reap the dead's) */
} share_page;

static share_page *page;
static int me = -1;     /* my slot */
static int my_pid;
static int my_mode;     /* the page's mode, 0 without a page */
static char object[160];

#define LD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_SEQ_CST)

int sim_process_runs(int pid); /* memory.c */

/* ---- the machine's name ------------------------------------------------------ */

/* At load, before main: a process started outside any machine makes one of
 * its own, which its children inherit through the environment. */
__attribute__((constructor)) static void name_machine(void) {
  if (getenv("KOLO_SIM_MACHINE") != NULL) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char id[64];
  snprintf(id, sizeof id, "%d-%llx", (int)getpid(), (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec);
  setenv("KOLO_SIM_MACHINE", id, 0); /* a name is all it is: without it, the process is a machine alone */
}

static int mode_from_env(void) {
  const char *v = getenv("KOLO_SIM_SHARE");
  if (v == NULL || *v == '\0' || strcmp(v, "timeslice") == 0) return MODE_TIMESLICE;
  if (strcmp(v, "mps") == 0) return MODE_MPS;
  fprintf(stderr, "kolo cuda model: KOLO_SIM_SHARE=%s is neither timeslice nor mps; using timeslice\n", v);
  return MODE_TIMESLICE;
}

/* The machine's processes that model the same device (KOLO_SIM_SHARE and
 * KOLO_SIM_SMS alike) share it: a test's parent that runs the model with
 * its defaults does not draw the children it starts with other settings
 * into its own. */
static void object_name(char *out, size_t n, int mode) {
  const char *id = getenv("KOLO_SIM_MACHINE");
  char safe[96];
  size_t k = 0;
  for (; id && id[k] && k + 1 < sizeof safe; k++) {
    char c = id[k];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    safe[k] = ok ? c : '_';
  }
  safe[k] = '\0';
  snprintf(out, n, "/" SHARE_PREFIX "%s-%s-%d", safe, mode == MODE_MPS ? "mps" : "ts", sim_cfg.sms);
}

/* ---- futex and the lock ---------------------------------------------------------- */

static void futex_wait(uint32_t *w, uint32_t seen, long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  syscall(SYS_futex, w, FUTEX_WAIT, seen, &ts, NULL, 0); /* woken, timed out or changed: all look again */
}

static void futex_wake(uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0); }

static void bump(uint32_t *w) {
  ADD(*w, 1u);
  futex_wake(w);
}

static void reap(int slot);

/* The page's lock; a holder that died leaves it to us, consistent again
 * once the dead process is reaped (every field it could have left half
 * written is one it owns, or a counter reap rewrites). */
static void page_lock(void) {
  if (pthread_mutex_lock(&page->lock) != EOWNERDEAD) return;
  for (int s = 0; s < MAX_PROCS; s++) {
    int pid = LD(page->procs[s].pid);
    if (pid > 0 && !sim_process_runs(pid)) reap(s);
  }
  pthread_mutex_consistent(&page->lock);
}

static void page_unlock(void) { pthread_mutex_unlock(&page->lock); }

/* ---- members ----------------------------------------------------------------------- */

/* Frees a slot whose process is gone (lock held): its units back to the
 * SMs, the slice taken from it, its counts cleared. */
static void reap(int slot) {
  share_proc *p = &page->procs[slot];
  for (int d = 0; d < SIM_MAX_DEVICES; d++) {
    for (int sm = 0; sm < page->sms; sm++) {
      int32_t h = __atomic_exchange_n(&page->held[slot][d][sm], 0, __ATOMIC_SEQ_CST);
      if (h) ADD(page->dev[d].units[sm], -h);
    }
    ST(p->active[d], 0);
    ST(p->in_pass[d], 0);
    if (LD(page->dev[d].holder) == slot + 1) ST(page->dev[d].holder, 0);
    if (LD(page->dev[d].prev) == slot + 1) ST(page->dev[d].prev, 0);
    bump(&page->dev[d].gen);
  }
  ST(p->pid, 0);
  bump(&page->room_gen);
}

static int alive(int slot) {
  int pid = LD(page->procs[slot].pid);
  return pid > 0 && (pid == my_pid || sim_process_runs(pid));
}

/* Reaps every member that died (lock held). */
static void reap_dead(void) {
  for (int s = 0; s < MAX_PROCS; s++)
    if (LD(page->procs[s].pid) > 0 && !alive(s)) reap(s);
}

static int join(void) {
  page_lock();
  reap_dead();
  int slot = -1;
  for (int s = 0; s < MAX_PROCS && slot < 0; s++)
    if (LD(page->procs[s].pid) == my_pid) slot = s; /* its maker */
  for (int s = 0; s < MAX_PROCS && slot < 0; s++) {
    int32_t zero = 0;
    if (__atomic_compare_exchange_n(&page->procs[s].pid, &zero, my_pid, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      slot = s;
  }
  page_unlock();
  return slot;
}

static int members(void) {
  int n = 0;
  for (int s = 0; s < MAX_PROCS; s++) n += LD(page->procs[s].pid) > 0;
  return n;
}

/* At exit: the process's slot is freed; the last one removes the machine. */
static void leave_machine(void) {
  if (page == NULL || getpid() != my_pid) return; /* a forked child inherits the handler, not the slot */
  page_lock();
  reap(me);
  reap_dead();
  int last = members() == 0;
  page_unlock();
  if (last) shm_unlink(object);
}

/* ---- the page ---------------------------------------------------------------------- */


static void init_page(share_page *p, int mode, long slice_us) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&p->lock, &a);
  pthread_mutexattr_destroy(&a);
  p->mode = mode;
  p->sms = sim_cfg.sms;
  p->slice_ns = slice_us * 1000L;
  p->procs[0].pid = getpid(); /* a member before it is ready: no sweep takes it for a dead machine's */
  __atomic_store_n(&p->magic, SHARE_MAGIC, __ATOMIC_RELEASE);
}

/* Maps the machine's object, making it if it is not there; NULL (said on
 * stderr) when neither works: the process is then a machine alone. */
static share_page *map_page(int mode, long slice_us) {
  int fd = shm_open(object, O_RDWR | O_CREAT | O_EXCL, 0600);
  int made = fd >= 0;
  if (!made && errno == EEXIST) fd = shm_open(object, O_RDWR, 0600);
  if (fd < 0 || (made && ftruncate(fd, sizeof(share_page)) != 0)) {
    fprintf(stderr, "kolo cuda model: the machine's shared page %s: %s; this process shares no device\n", object,
            strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  struct stat st;
  for (int i = 0; i < 2000 && fstat(fd, &st) == 0 && st.st_size < (off_t)sizeof(share_page); i++) usleep(1000);
  void *m = mmap(NULL, sizeof(share_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    fprintf(stderr, "kolo cuda model: mapping %s: %s; this process shares no device\n", object, strerror(errno));
    return NULL;
  }
  share_page *p = m;
  if (made) init_page(p, mode, slice_us);
  for (int i = 0; i < 2000 && __atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) != SHARE_MAGIC; i++) usleep(1000);
  if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) == SHARE_MAGIC) return p;
  fprintf(stderr, "kolo cuda model: %s was never made ready (its maker died?); this process shares no device\n",
          object);
  munmap(m, sizeof(share_page));
  return NULL;
}

void sim_share_sweep(void); /* below */

void sim_share_init(long slice_us) {
  my_pid = getpid();
  int mode = mode_from_env();
  object_name(object, sizeof object, mode);
  sim_share_sweep();
  share_page *p = map_page(mode, slice_us);
  if (p == NULL) return;
  page = p;
  me = join();
  if (me < 0) {
    fprintf(stderr, "kolo cuda model: more than %d processes on machine %s; this one shares no device\n", MAX_PROCS,
            object);
    munmap(p, sizeof *p);
    page = NULL;
    return;
  }
  my_mode = p->mode;
  atexit(leave_machine);
}

int sim_share_mps(void) { return my_mode == MODE_MPS; }

/* ---- timeslice -------------------------------------------------------------------- */

static int ts_on(void) { return my_mode == MODE_TIMESLICE; }

void sim_share_block_begin(int dev) {
  if (ts_on()) ADD(page->procs[me].active[dev], 1);
}

void sim_share_block_end(int dev) {
  if (!ts_on() || ADD(page->procs[me].active[dev], -1) != 0) return;
  share_dev *d = &page->dev[dev];
  if (LD(d->holder) != me + 1) return;
  page_lock(); /* nothing left to run: the slice goes to whoever waits */
  if (LD(d->holder) == me + 1 && LD(page->procs[me].active[dev]) == 0) ST(d->holder, 0);
  page_unlock();
  bump(&d->gen);
}

/* A runner's pass ends; the last runner of a context that lost the slice
 * lets the next one in (only then: a wake-up on every failed try of the
 * waiters would wake each other round and round). */
void sim_share_pass_end(int dev) {
  if (!ts_on()) return;
  if (ADD(page->procs[me].in_pass[dev], -1) == 0 && LD(page->dev[dev].prev) == me + 1) bump(&page->dev[dev].gen);
}

/* The next context after `from` with blocks on dev, -1: none (lock held). */
static int next_wanting(int dev, int from) {
  for (int k = 1; k < MAX_PROCS; k++) {
    int s = (from + k) % MAX_PROCS;
    if (LD(page->procs[s].pid) > 0 && LD(page->procs[s].active[dev]) > 0 && alive(s)) return s;
  }
  return -1;
}

/* Whether the holder h (slot + 1) has given the device up: gone, dead or
 * without blocks on it (lock held). */
static int holder_idle(int dev, int h) {
  if (h == 0) return 1;
  if (!alive(h - 1)) {
    reap(h - 1);
    return 1;
  }
  return LD(page->procs[h - 1].active[dev]) == 0;
}

/* As holder: the last holder's runners drained, and the slice renewed or
 * passed on at its end (lock held).  Returns whether to wait. */
static int hold(int dev, share_dev *d, uint64_t now) {
  int prev = LD(d->prev);
  if (prev != 0 && alive(prev - 1) && LD(page->procs[prev - 1].in_pass[dev]) > 0) return 1;
  ST(d->prev, 0);
  if (now < LD(d->slice_end)) return 0;
  int next = next_wanting(dev, me);
  ST(d->slice_end, now + (uint64_t)page->slice_ns);
  if (next < 0) return 0;
  ST(d->holder, next + 1);
  ST(d->prev, me + 1);
  ADD(d->switches, 1u);
  bump(&d->gen);
  return 0; /* the caller's next try fails and waits */
}

static unsigned slice_waits[SIM_MAX_DEVICES]; /* this process's runners' waits for a slice */

/* The slow path: takes, keeps, passes on or waits for the slice. */
static void take_turn(int dev) {
  share_dev *d = &page->dev[dev];
  uint32_t seen = LD(d->gen);
  page_lock();
  int h = LD(d->holder), wait = 1;
  uint64_t now = sim_now_ns();
  if (h != me + 1 && holder_idle(dev, h)) {
    ST(d->prev, h != 0 && LD(page->procs[h - 1].pid) > 0 ? h : 0);
    ST(d->holder, me + 1);
    ST(d->slice_end, now + (uint64_t)page->slice_ns);
    if (h != 0) ADD(d->switches, 1u);
    h = me + 1;
  }
  if (h == me + 1) wait = hold(dev, d, now);
  page_unlock();
  if (!wait) return;
  __atomic_add_fetch(&slice_waits[dev], 1u, __ATOMIC_RELAXED);
  futex_wait(&d->gen, seen, WAIT_NS);
}

/* A runner's pass starts only while its context holds the device's slice. */
void sim_share_pass_begin(int dev) {
  if (!ts_on()) return;
  share_dev *d = &page->dev[dev];
  int32_t *in = &page->procs[me].in_pass[dev];
  for (;;) {
    ADD(*in, 1);
    if (LD(d->holder) == me + 1 && LD(d->prev) == 0 && sim_now_ns() < LD(d->slice_end)) return;
    sim_share_pass_end(dev);
    take_turn(dev);
  }
}

unsigned kolo_sim_slice_waits(int dev) {
  if (dev < 0 || dev >= SIM_MAX_DEVICES) return 0;
  return __atomic_load_n(&slice_waits[dev], __ATOMIC_RELAXED);
}

unsigned kolo_sim_slice_switches(int dev) {
  if (page == NULL || dev < 0 || dev >= SIM_MAX_DEVICES) return 0;
  return LD(page->dev[dev].switches);
}

/* ---- mps: the SMs' units, across processes ------------------------------------------ */

int sim_sm_used(const sim_device *d, int sm) {
  return sim_share_mps() ? LD(page->dev[d->ordinal].units[sm]) : d->sm[sm].units;
}

int sim_sm_take(sim_device *d, int sm, int charge) {
  if (!sim_share_mps()) {
    if (d->sm[sm].units + charge > SIM_SM_UNITS) return 0;
    d->sm[sm].units += charge;
    return 1;
  }
  int32_t *u = &page->dev[d->ordinal].units[sm];
  int32_t v = LD(*u);
  do {
    if (v + charge > SIM_SM_UNITS) return 0;
  } while (!__atomic_compare_exchange_n(u, &v, v + charge, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  ADD(page->held[me][d->ordinal][sm], charge);
  return 1;
}

void sim_sm_give(sim_device *d, int sm, int charge) {
  if (!sim_share_mps()) {
    d->sm[sm].units -= charge;
    return;
  }
  ADD(page->held[me][d->ordinal][sm], -charge);
  ADD(page->dev[d->ordinal].units[sm], -charge);
  if (LD(page->room_waiters) > 0) bump(&page->room_gen);
}

/* The placer: while a device of this process has blocks waiting for room,
 * waits for other processes to give units back (or die), then places. */
static pthread_cond_t stuck_cv = PTHREAD_COND_INITIALIZER;
static int stuck, placer_started;

static int any_stuck(void) {
  for (int i = 0; i < sim_cfg.ndevices; i++)
    if (sim_device_get(i)->dispatch_head != NULL) return 1;
  return 0;
}

static void *placer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&sim_lock);
  for (;;) {
    while (!stuck) pthread_cond_wait(&stuck_cv, &sim_lock);
    ADD(page->room_waiters, 1);
    uint32_t seen = LD(page->room_gen);
    for (int i = 0; i < sim_cfg.ndevices; i++) sim_dispatch(sim_device_get(i));
    stuck = any_stuck();
    pthread_mutex_unlock(&sim_lock);
    if (stuck) futex_wait(&page->room_gen, seen, WAIT_NS);
    ADD(page->room_waiters, -1);
    if (stuck && LD(page->room_gen) == seen) { /* nothing given back: a member may have died holding units */
      page_lock();
      reap_dead();
      page_unlock();
    }
    pthread_mutex_lock(&sim_lock);
  }
  return NULL;
}

/* Blocks of d wait for room (lock held): under mps, other processes may
 * free it, which this process would not otherwise hear of. */
void sim_share_stuck(sim_device *d) {
  (void)d;
  if (!sim_share_mps() || stuck) return;
  stuck = 1;
  if (!placer_started) {
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    placer_started = pthread_create(&th, &a, placer_main, NULL) == 0;
    pthread_attr_destroy(&a);
    if (placer_started) sim_name_thread(th, "share");
    else fprintf(stderr, "kolo cuda model: no thread to place blocks that wait for other processes' room\n");
  }
  pthread_cond_signal(&stuck_cv);
}

/* ---- identity -------------------------------------------------------------------- */

/* A device's UUID: the same for every process of the machine, another on
 * another machine. */
void sim_share_uuid(int dev, char out[16]) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *s = object; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  uint64_t st = h ^ (uint64_t)dev;
  uint64_t a = sim_mix(&st), b = sim_mix(&st);
  memcpy(out, &a, 8);
  memcpy(out + 8, &b, 8);
}

/* ---- machines of dead processes ---------------------------------------------------- */

static int page_has_live_member(const share_page *p) {
  if (__atomic_load_n(&p->magic, __ATOMIC_ACQUIRE) != SHARE_MAGIC) return 1; /* being made */
  for (int s = 0; s < MAX_PROCS; s++) {
    int pid = __atomic_load_n(&p->procs[s].pid, __ATOMIC_SEQ_CST);
    if (pid > 0 && sim_process_runs(pid)) return 1;
  }
  return 0;
}

static void sweep_one(const char *name) {
  char path[300];
  snprintf(path, sizeof path, "/%s", name);
  if (strcmp(path, object) == 0) return; /* ours: joining it reaps its dead */
  int fd = shm_open(path, O_RDWR, 0600);
  if (fd < 0) return;
  struct stat st;
  void *m = fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(share_page)
                ? mmap(NULL, sizeof(share_page), PROT_READ, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  close(fd);
  if (m == MAP_FAILED) return;
  if (!page_has_live_member(m)) shm_unlink(path);
  munmap(m, sizeof(share_page));
}

/* Machines whose every process died (killed: none could unlink) go. */
void sim_share_sweep(void) {
  DIR *dir = opendir("/dev/shm");
  if (dir == NULL) return;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL)
    if (strncmp(e->d_name, SHARE_PREFIX, strlen(SHARE_PREFIX)) == 0) sweep_one(e->d_name);
  closedir(dir);
}
