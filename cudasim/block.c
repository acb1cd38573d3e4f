/* block.c - running blocks: one host "runner" thread per resident block,
 * the block's CUDA threads as fibers of that runner.
 *
 * A fiber runs until it reaches __syncthreads (kolo_sim_block_sync*_at), polls
 * (kolo_sim_poll: the hook of every spin loop) or ends; the runner then
 * resumes the next runnable fiber, round robin.  So a block runs on one
 * core, its threads interleave only at those points, and threadIdx is set
 * at each switch.  When a whole pass finds every fiber polling, the runner
 * yields the core, then sleeps a little longer each idle pass (up to
 * MAX_IDLE_SLEEP_NS): spinning blocks of other ranks need the cores.
 *
 * __syncthreads: every live thread arrives before any leaves; a thread that
 * ended counts as arrived (sm_70 and later).  ThreadSanitizer: switches
 * between fibers carry no ordering (TSan is told "no sync"), only the
 * barrier does (release on arrival, acquire on leaving), so a missing
 * __syncthreads shows as a race, as it would be one on a GPU; the block's
 * scheduling words are relaxed atomics so that the model itself is not
 * reported. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include "cudasim/sim.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define SIM_TSAN 1
#else
#define SIM_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SIM_ASAN 1
#else
#define SIM_ASAN 0
#endif

#if SIM_TSAN || SIM_ASAN
#define STACK_BYTES (512u * 1024u)
#else
#define STACK_BYTES (128u * 1024u)
#endif
#define GUARD_BYTES 4096u
#define MAX_IDLE_SLEEP_NS 200000L

KOLO_SIM_TLS uint3 threadIdx, blockIdx, blockDim, gridDim;

enum { F_RUN, F_BARRIER, F_DONE };

/* ---- contexts ---------------------------------------------------------------
 * On x86-64 a switch saves the callee-saved registers on the old stack and
 * takes the new one (a few nanoseconds); glibc's swapcontext also saves
 * the signal mask, a system call per switch, which dominated the model's
 * time.  Elsewhere, ucontext. */
#if defined(__x86_64__)
typedef struct {
  void *sp;
} sim_ctx;
void kolo_sim_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl kolo_sim_switch\n"
        ".hidden kolo_sim_switch\n"
        ".type kolo_sim_switch,@function\n"
        "kolo_sim_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size kolo_sim_switch, .-kolo_sim_switch\n");
static void ctx_switch(sim_ctx *from, sim_ctx *to) { kolo_sim_switch(&from->sp, to->sp); }
/* A context that starts in entry() on the stack [base, base + bytes). */
static void ctx_make(sim_ctx *c, char *base, size_t bytes, void (*entry)(void)) {
  uintptr_t top = ((uintptr_t)(base + bytes)) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = NULL;           /* entry's return address: it never returns */
  *--sp = (void *)entry;  /* where the first switch's ret goes */
  for (int i = 0; i < 6; i++) *--sp = NULL; /* rbp rbx r12 r13 r14 r15 */
  c->sp = sp;
}
#else
typedef ucontext_t sim_ctx;
static void ctx_switch(sim_ctx *from, sim_ctx *to) { swapcontext(from, to); }
static void ctx_make(sim_ctx *c, char *base, size_t bytes, void (*entry)(void)) {
  getcontext(c);
  c->uc_stack.ss_sp = base;
  c->uc_stack.ss_size = bytes;
  c->uc_link = NULL;
  makecontext(c, entry, 0);
}
#endif

typedef struct {
  sim_ctx ctx;
  char *mem;        /* mapping: guard page, then the stack */
  int state;        /* F_*, relaxed atomic */
  int polled;       /* its last switch was a poll (relaxed atomic) */
  int started;
  void *tsan;
  void *asan_fake;
  /* The warp_leader() call it made last: where, in which barrier interval
   * (the block's gen), and how many times there in that interval. */
  const char *lead_file;
  int lead_line;
  unsigned lead_gen, lead_calls;
} fiber;

typedef struct {
  sim_ctx main;
  fiber *f;
  int n;
  int cur, live, arrived, or_acc, or_result; /* relaxed atomics: fibers and the runner share them */
  const char *site_file; /* the barrier the first arriving thread waits at */
  int site_line, site_or;
  unsigned gen;
  const sim_op *op;
  void *tsan_main;
  char sync_obj;    /* the barrier's address for TSan */
  void *asan_main_fake;
  const void *main_bottom;
  size_t main_size;
  uint64_t rng;     /* KOLO_SIM_SEED's choices for this block (0: fixed order) */
} sim_block;

struct sim_runner {
  pthread_cond_t cv;
  sim_device *dev;
  sim_op *op;
  unsigned block;
  int sm;
  sim_runner *next_idle;
};

static _Thread_local sim_block *cur;
static _Thread_local fiber *fibers; /* this runner's fibers and stacks */
static _Thread_local int nfibers;

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define WEAK() __builtin_expect(LD(kolo_sim_weak_mode), 0)

int sim_block_fiber(void) { return cur ? LD(cur->cur) : -1; }

/* ---- switching ------------------------------------------------------------ */

static void set_thread_idx(unsigned i) {
#if SIM_TSAN
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  threadIdx = (uint3){i, 0, 0};
#if SIM_TSAN
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
}

static void enter_fiber(sim_block *b, int i) {
  fiber *f = &b->f[i];
  ST(b->cur, i);
  set_thread_idx((unsigned)i);
  int first = !f->started;
  f->started = 1; /* before TSan's switch: the runner's write, not the fiber's */
#if SIM_TSAN
  /* The first entry is ordered after the launch, later ones after nothing. */
  __tsan_switch_to_fiber(f->tsan, first ? 0 : __tsan_switch_to_fiber_no_sync);
#else
  (void)first;
#endif
#if SIM_ASAN
  __sanitizer_start_switch_fiber(&b->asan_main_fake, f->mem + GUARD_BYTES, STACK_BYTES);
#endif
  ctx_switch(&b->main, &f->ctx);
#if SIM_ASAN
  __sanitizer_finish_switch_fiber(b->asan_main_fake, NULL, NULL);
#endif
}

/* From the current fiber back to the runner; sync: order what the fiber did
 * before what the runner does next (at the fiber's end only). */
static void leave_fiber(sim_block *b, int sync) {
  fiber *f = &b->f[LD(b->cur)];
#if SIM_TSAN
  __tsan_switch_to_fiber(b->tsan_main, sync ? 0 : __tsan_switch_to_fiber_no_sync);
#else
  (void)sync;
#endif
#if SIM_ASAN
  __sanitizer_start_switch_fiber(LD(f->state) == F_DONE ? NULL : &f->asan_fake, b->main_bottom, b->main_size);
#endif
  ctx_switch(&f->ctx, &b->main);
#if SIM_ASAN
  __sanitizer_finish_switch_fiber(f->asan_fake, NULL, NULL);
#endif
}

/* ---- the barrier ------------------------------------------------------------ */

/* Opens the barrier when every live thread has arrived. */
static void barrier_check(sim_block *b) {
  int arrived = LD(b->arrived);
  if (arrived == 0 || arrived < LD(b->live)) return;
  ST(b->or_result, LD(b->or_acc));
  ST(b->or_acc, 0);
  ST(b->arrived, 0);
  ST(b->gen, LD(b->gen) + 1);
  for (int i = 0; i < b->n; i++)
    if (LD(b->f[i].state) == F_BARRIER) ST(b->f[i].state, F_RUN);
}

/* The current thread ends: a barrier no longer waits for it, and its fiber
 * is left for good (never resumed; its stack is dropped, never unwound). */
static _Noreturn void end_fiber(sim_block *b) {
  fiber *f = &b->f[LD(b->cur)];
  if (WEAK()) sim_weak_barrier(LD(b->cur)); /* its stores stay buffered, the block's */
  ST(f->state, F_DONE);
  ST(b->live, LD(b->live) - 1);
  barrier_check(b);
  leave_fiber(b, 1);
  abort();
}

/* A lost context (KOLO_SIM_FAULT) kills its kernels: the thread ends where
 * it stands, as a GPU's do. */
static void die_if_lost(sim_block *b) {
  if (sim_sticky(b->op->dev) != cudaSuccess) end_fiber(b);
}

static const char *sync_name(int is_or) { return is_or ? "__syncthreads_or" : "__syncthreads"; }

/* The first thread to arrive names the barrier; every later one must be at
 * the same call site and kind. */
static void check_site(sim_block *b, int is_or, const char *file, int line) {
  if (LD(b->arrived) == 0) {
    ST(b->site_file, file), ST(b->site_line, line), ST(b->site_or, is_or);
    return;
  }
  const char *first = LD(b->site_file);
  int first_line = LD(b->site_line), first_or = LD(b->site_or);
  if (line == first_line && strcmp(file, first) == 0 && is_or == first_or) return;
  sim_undefined("thread %d of block %u waits at %s (%s:%d) while thread(s) of its block wait at %s (%s:%d): "
                "every live thread of a block must reach the same barrier", LD(b->cur), blockIdx.x,
                sync_name(is_or), file, line, sync_name(first_or), first, first_line);
}

static int block_sync(int is_or, int pred, const char *file, int line) {
  sim_block *b = cur;
  if (b == NULL) return pred; /* not in a kernel */
  die_if_lost(b);
  fiber *f = &b->f[LD(b->cur)];
  if (WEAK()) sim_weak_barrier(LD(b->cur));
#if SIM_TSAN
  __tsan_release(&b->sync_obj);
#endif
  check_site(b, is_or, file, line);
  ST(b->or_acc, LD(b->or_acc) | (pred != 0));
  ST(b->arrived, LD(b->arrived) + 1);
  unsigned gen = LD(b->gen);
  ST(f->state, F_BARRIER);
  ST(f->polled, 0);
  barrier_check(b);
  while (LD(b->gen) == gen) leave_fiber(b, 0);
  int r = LD(b->or_result);
#if SIM_TSAN
  __tsan_acquire(&b->sync_obj);
#endif
  return r;
}

int kolo_sim_block_sync_or_at(int pred, const char *file, int line) { return block_sync(1, pred, file, line); }
void kolo_sim_block_sync_at(const char *file, int line) { (void)block_sync(0, 0, file, line); }

/* Counts the caller's call at (file, line) in this barrier interval. */
static unsigned count_lead_call(sim_block *b, fiber *f, const char *file, int line) {
  unsigned gen = LD(b->gen);
  if (LD(f->lead_file) == file && LD(f->lead_line) == line && LD(f->lead_gen) == gen) {
    ST(f->lead_calls, LD(f->lead_calls) + 1);
  } else {
    ST(f->lead_file, file), ST(f->lead_line, line), ST(f->lead_gen, gen), ST(f->lead_calls, 1u);
  }
  return LD(f->lead_calls);
}

/* A warp's lanes run one after another here, lowest first, so a lower lane
 * ran this line with the caller (converged, as a GPU runs a warp) exactly
 * when it already made this call as often in this barrier interval, even
 * if it ended since.  A lane that ended before, waits elsewhere or left the
 * loop first is not active. */
int kolo_sim_warp_leader_at(const char *file, int line) {
  sim_block *b = cur;
  if (b == NULL) return 1;
  int me = LD(b->cur);
  unsigned calls = count_lead_call(b, &b->f[me], file, line), gen = LD(b->gen);
  for (int lane = me & ~31; lane < me; lane++) {
    fiber *f = &b->f[lane];
    if (LD(f->lead_file) == file && LD(f->lead_line) == line && LD(f->lead_gen) == gen &&
        LD(f->lead_calls) >= calls)
      return 0;
  }
  return 1;
}

void kolo_sim_poll(void) {
  sim_block *b = cur;
  if (b == NULL) {
    sched_yield();
    return;
  }
  die_if_lost(b);
  if (WEAK()) sim_weak_poll(LD(b->cur));
  ST(b->f[LD(b->cur)].polled, 1);
  leave_fiber(b, 0);
}

uint64_t kolo_sim_globaltimer_ns(void) { return sim_now_ns(); }

/* A GPU traps a misaligned access: the kernel's context is lost.  The model
 * names it and aborts (nothing after it is worth running). */
void kolo_sim_misaligned(const void *p, unsigned n, const char *what, const char *file, int line) {
  sim_block *b = cur;
  fprintf(stderr,
          "kolo cuda model: MISALIGNED ADDRESS: %s of %u bytes at %p (not a multiple of %u) at %s:%d, "
          "thread %d of block %u%s; a GPU traps (cudaErrorMisalignedAddress)\n",
          what, n, p, n, file, line, b ? LD(b->cur) : -1, b ? blockIdx.x : 0u, b ? "" : " (outside a kernel)");
  abort();
}

/* ---- fibers -------------------------------------------------------------------- */

static void fiber_main(void) {
  sim_block *b = cur;
#if SIM_ASAN
  __sanitizer_finish_switch_fiber(NULL, &b->main_bottom, &b->main_size);
#endif
  const sim_kernel_op *k = &b->op->u.kern;
  k->kernel->desc.run(k->kernel->desc.func, k->args->packed);
  end_fiber(b);
}

/* This runner's fibers: at least n, stacks with a guard page below. */
static int ensure_fibers(int n) {
  if (n <= nfibers) return 0;
  fiber *f = realloc(fibers, (size_t)n * sizeof *f);
  if (f == NULL) return -1;
  fibers = f;
  for (; nfibers < n; nfibers++) {
    fiber *x = &fibers[nfibers];
    memset(x, 0, sizeof *x);
    x->mem = mmap(NULL, GUARD_BYTES + STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (x->mem == MAP_FAILED) return -1;
    mprotect(x->mem, GUARD_BYTES, PROT_NONE);
  }
  return 0;
}

static void start_fiber(sim_block *b, int i) {
  fiber *f = &b->f[i];
  ctx_make(&f->ctx, f->mem + GUARD_BYTES, STACK_BYTES, fiber_main);
  ST(f->state, F_RUN);
  ST(f->polled, 0);
  ST(f->lead_file, NULL), ST(f->lead_line, 0), ST(f->lead_gen, 0u), ST(f->lead_calls, 0u);
  f->started = 0;
#if SIM_TSAN
  f->tsan = __tsan_create_fiber(0);
#endif
}

/* When a pass found every fiber polling: give the core away, longer each
 * idle pass in a row. */
static void idle(int passes) {
  if (passes < 16) {
    sched_yield();
    return;
  }
  long ns = 1000L << (passes - 16 < 8 ? passes - 16 : 8);
  struct timespec ts = {0, ns < MAX_IDLE_SLEEP_NS ? ns : MAX_IDLE_SLEEP_NS};
  nanosleep(&ts, NULL);
}

/* KOLO_SIM_SEED: now and then the runner gives its core away between two
 * threads (a yield; rarely a sleep of up to 50 us), so that blocks and
 * ranks interleave in other ways than the fixed order's. */
static void seeded_pause(sim_block *b) {
  uint64_t r = sim_mix(&b->rng);
  if ((r & 31) != 0) return;
  if ((r & 0x1f00) != 0) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 1000L + (long)((r >> 16) % 49000)};
  nanosleep(&ts, NULL);
}

/* The pass's k-th thread: in order, or (KOLO_SIM_SEED) from a random start
 * with a random stride prime to n, a new one each pass. */
typedef struct {
  int start, stride;
} pass_order;

static int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }

static pass_order next_order(sim_block *b) {
  pass_order o = {0, 1};
  if (b->rng == 0 || b->n < 2) return o;
  uint64_t r = sim_mix(&b->rng);
  o.start = (int)(r % (uint64_t)b->n);
  o.stride = 1 + (int)((r >> 32) % (uint64_t)(b->n - 1));
  while (gcd(o.stride, b->n) != 1) o.stride--;
  return o;
}

static void schedule(sim_block *b) {
  int idle_passes = 0;
  while (LD(b->live) > 0) {
    int moved = 0;
    pass_order o = next_order(b);
    sim_share_pass_begin(b->op->dev->ordinal); /* timeslice: only while the context holds the device */
    for (int k = 0; k < b->n; k++) {
      int i = (int)(((long)o.start + (long)k * o.stride) % b->n);
      if (LD(b->f[i].state) != F_RUN) continue;
      enter_fiber(b, i);
      if (!LD(b->f[i].polled)) moved = 1;
      if (b->rng) seeded_pause(b);
    }
    sim_share_pass_end(b->op->dev->ordinal);
    idle_passes = moved ? 0 : idle_passes + 1;
    if (idle_passes > 0) idle(idle_passes);
  }
}

/* Block `block` (linear) of a grid: its index in x, y, z. */
static uint3 block_index(uint3 grid, unsigned block) {
  return (uint3){block % grid.x, (block / grid.x) % grid.y, block / (grid.x * grid.y)};
}

void sim_run_block(sim_op *op, unsigned block) {
  const sim_kernel_op *k = &op->u.kern;
  int n = k->host_threads;
  if (ensure_fibers(n) != 0) abort(); /* no memory for stacks: nothing sane to report to */
  sim_block b;
  memset(&b, 0, sizeof b);
  b.f = fibers;
  b.n = n;
  b.live = n;
  b.op = op;
  uint64_t seed = sim_seed();
  if (seed) { /* one stream of choices per block of each launch */
    b.rng = seed ^ (k->launch_no * 0x100000001b3ull) ^ ((uint64_t)block << 40) ^ (uint64_t)op->dev->ordinal;
    b.rng |= 1; /* never 0: 0 means the fixed order */
  }
#if SIM_TSAN
  b.tsan_main = __tsan_get_current_fiber();
#endif
  blockIdx = block_index(k->grid, block);
  gridDim = k->grid;
  blockDim = (uint3){(unsigned)n, 1, 1};
  for (int i = 0; i < n; i++) start_fiber(&b, i);
  if (WEAK()) /* its own stream of choices when the order is fixed */
    sim_weak_block_begin(n, b.rng ? b.rng : (k->launch_no << 20) ^ ((uint64_t)block << 4) ^ 0x5eedull);
  cur = &b;
  sim_share_block_begin(op->dev->ordinal);
  schedule(&b);
  sim_share_block_end(op->dev->ordinal);
  cur = NULL;
  sim_weak_block_end();
#if SIM_TSAN
  for (int i = 0; i < n; i++) __tsan_destroy_fiber(b.f[i].tsan);
#endif
}

/* ---- runners -------------------------------------------------------------------- */

void sim_block_finished(sim_device *d, sim_op *op, int sm); /* kernel.c */

static void *runner_main(void *arg) {
  sim_runner *r = arg;
  (void)sim_apart_open(); /* an SM: device memory is its own */
  pthread_mutex_lock(&sim_lock);
  for (;;) {
    while (r->op == NULL) pthread_cond_wait(&r->cv, &sim_lock);
    sim_op *op = r->op;
    pthread_mutex_unlock(&sim_lock);
    sim_run_block(op, r->block);
    pthread_mutex_lock(&sim_lock);
    r->op = NULL;
    r->next_idle = r->dev->idle_runners;
    r->dev->idle_runners = r;
    sim_block_finished(r->dev, op, r->sm);
  }
  return NULL;
}

void sim_runner_give(sim_device *d, sim_op *op, unsigned block, int sm) {
  sim_runner *r = d->idle_runners;
  if (r) {
    d->idle_runners = r->next_idle;
  } else {
    r = calloc(1, sizeof *r);
    if (r == NULL) abort(); /* a block that cannot run would hang its stream */
    pthread_cond_init(&r->cv, NULL);
    r->dev = d;
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, runner_main, r) != 0) abort();
    sim_name_thread(th, "block");
    pthread_attr_destroy(&attr);
  }
  r->op = op;
  r->block = block;
  r->sm = sm;
  pthread_cond_signal(&r->cv);
}
