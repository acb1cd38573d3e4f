/* kernel.c - kernels in the model: the registry behind cudaLaunchKernel,
 * the resources each block is charged (from the GPU build's ptxas report),
 * and residency: a kernel's blocks are placed on SMs in launch order, each
 * holding its share of an SM until it exits; a block that finds no SM with
 * room waits, and so does every block launched after it (the stricter
 * reading of CUDA, which promises no order among concurrent kernels). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudasim/sim.h"

/* A kernel the ptxas report does not know (a build without the report):
 * each block is charged a whole SM, the stricter guess. */
#define UNKNOWN_REGS 0

static sim_kernel *kernels;

typedef struct override {
  char prefix[128];
  int regs, smem;
  struct override *next;
} override;
static override *overrides;

/* ---- names ---------------------------------------------------------------- */

static void drop_all(char *s, const char *what) {
  size_t n = strlen(what);
  for (char *p; (p = strstr(s, what)) != NULL;) memmove(p, p + n, strlen(p + n) + 1);
}

/* One spelling for a kernel's name, from c++filt's form of the ptxas report
 * ("void (anonymous namespace)::kolo_exec_kernel<__nv_bfloat16, 0>(kolo_dev_batch)")
 * and from g++'s __PRETTY_FUNCTION__ of device_prims.cuh's kernel_name<K>
 * ("... [with auto K = {anonymous}::kolo_exec_kernel<__nv_bfloat16, 0>]"):
 * the unqualified name with its template arguments, without spaces. */
static void normalize(const char *in, char *out, size_t n) {
  const char *with = strstr(in, "K = ");
  snprintf(out, n, "%s", with ? with + 4 : in);
  if (with && strlen(out) > 0 && out[strlen(out) - 1] == ']') out[strlen(out) - 1] = '\0';
  drop_all(out, "(anonymous namespace)::");
  drop_all(out, "{anonymous}::");
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; out[i]; i++) {
    char c = out[i];
    if (c == '<') depth++;
    else if (c == '>') depth--;
    else if (depth == 0 && c == '(') {
      out[i] = '\0';
      break;
    } else if (depth == 0 && (c == ' ' || (c == ':' && out[i + 1] == ':'))) {
      start = c == ' ' ? i + 1 : i + 2;
    }
  }
  memmove(out, out + start, strlen(out + start) + 1);
  drop_all(out, " ");
  /* g++ spells int64_t "long int", c++filt "long" */
  static const char *const spellings[][2] = {
      {"longlongunsignedint", "unsignedlonglong"}, {"longlongint", "longlong"}, {"longunsignedint", "unsignedlong"},
      {"longint", "long"}, {"shortunsignedint", "unsignedshort"}, {"shortint", "short"}};
  for (size_t k = 0; k < sizeof spellings / sizeof spellings[0]; k++) {
    size_t from = strlen(spellings[k][0]), to = strlen(spellings[k][1]);
    for (char *p; (p = strstr(out, spellings[k][0])) != NULL;) {
      memcpy(p, spellings[k][1], to);
      memmove(p + to, p + from, strlen(p + from) + 1);
    }
  }
}

/* ---- resources ------------------------------------------------------------ */

static const sim_ptxas_entry *ptxas_find(const char *name) {
  char want[512], have[512];
  normalize(name, want, sizeof want);
  for (int i = 0; i < sim_ptxas_count; i++) {
    normalize(sim_ptxas_table[i].name, have, sizeof have);
    if (strcmp(have, want) == 0) return &sim_ptxas_table[i];
  }
  return NULL;
}

/* k's charge: the report, then the longest matching override (lock held). */
static void resources(sim_kernel *k) {
  const sim_ptxas_entry *p = ptxas_find(k->desc.name);
  k->known = p != NULL;
  k->regs = p ? p->regs : UNKNOWN_REGS;
  k->smem = p ? p->smem : 0;
  char name[512];
  normalize(k->desc.name, name, sizeof name);
  /* The longest matching prefix wins, the newest among equals (the list
   * is newest first); one with regs < 0 means the report. */
  const override *win = NULL;
  for (const override *o = overrides; o; o = o->next) {
    size_t n = strlen(o->prefix);
    if ((win == NULL || n > strlen(win->prefix)) && strncmp(name, o->prefix, n) == 0) win = o;
  }
  if (win && win->regs >= 0) {
    k->regs = win->regs;
    k->smem = win->smem;
  }
}

int kolo_sim_kernel_resources(const char *name, int *regs, int *smem) {
  pthread_mutex_lock(&sim_lock);
  sim_kernel tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.desc.name = name;
  resources(&tmp);
  pthread_mutex_unlock(&sim_lock);
  if (regs) *regs = tmp.regs;
  if (smem) *smem = tmp.smem;
  return tmp.known ? 0 : -1;
}

void kolo_sim_set_kernel_resources(const char *prefix, int regs, int smem) {
  pthread_mutex_lock(&sim_lock);
  override *o = calloc(1, sizeof *o);
  if (o) {
    strncpy(o->prefix, prefix, sizeof o->prefix - 1);
    o->regs = regs;
    o->smem = smem;
    o->next = overrides;
    overrides = o;
  }
  for (sim_kernel *k = kernels; k; k = k->next) resources(k);
  pthread_mutex_unlock(&sim_lock);
}

int kolo_sim_block_threads(void) {
  sim_init();
  return __atomic_load_n(&sim_cfg.block_threads, __ATOMIC_RELAXED);
}

void kolo_sim_set_block_threads(int n) {
  sim_init();
  if (n >= 1 && n <= 1024) __atomic_store_n(&sim_cfg.block_threads, n, __ATOMIC_RELAXED);
}

/* ---- registry ---------------------------------------------------------------- */

static sim_kernel *find_locked(const void *func) {
  for (sim_kernel *k = kernels; k; k = k->next)
    if (k->desc.func == func) return k;
  return NULL;
}

const sim_kernel *sim_kernel_find(const void *func) {
  pthread_mutex_lock(&sim_lock);
  sim_kernel *k = find_locked(func);
  pthread_mutex_unlock(&sim_lock);
  return k;
}

int kolo_sim_register_kernel(const kolo_sim_kernel_desc *desc) {
  pthread_mutex_lock(&sim_lock);
  if (find_locked(desc->func) == NULL) {
    sim_kernel *k = calloc(1, sizeof *k);
    if (k) {
      k->desc = *desc;
      resources(k);
      k->next = kernels;
      kernels = k;
      if (!k->known && k->regs == UNKNOWN_REGS)
        fprintf(stderr, "kolo cuda model: kernel %s is not in the build's ptxas report: each of its blocks takes a "
                        "whole SM\n", desc->name);
    }
  }
  pthread_mutex_unlock(&sim_lock);
  return 0;
}

/* ---- arguments ------------------------------------------------------------------ */

void sim_args_ref(sim_args *a) { a->refs++; }

void sim_args_unref(sim_args *a) {
  if (--a->refs > 0) return;
  a->kernel->desc.destroy(a->packed);
  free(a);
}

/* ---- launch ---------------------------------------------------------------------- */

static int config_ok(dim3 g, dim3 b) {
  if (g.x < 1 || g.y < 1 || g.z < 1 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) return 0;
  if (b.x < 1 || b.y < 1 || b.z < 1 || b.x > 1024 || b.y > 1024 || b.z > 64) return 0;
  return (size_t)b.x * b.y * b.z <= 1024;
}

cudaError_t sim_enqueue(sim_stream *s, sim_op *op); /* stream.c */

static sim_op *kernel_op(sim_stream *s, const sim_kernel *k, dim3 grid, dim3 block, size_t smem, void **args,
                         int per_sm) {
  sim_op *op = sim_op_new(SIM_OP_KERNEL, s);
  sim_args *a = calloc(1, sizeof *a);
  void *packed = (op && a) ? k->desc.pack(args) : NULL;
  if (packed == NULL) {
    free(a);
    if (op) sim_op_unref(op);
    return NULL;
  }
  *a = (sim_args){1, k, packed};
  sim_kernel_op *ko = &op->u.kern;
  ko->kernel = k;
  ko->args = a;
  ko->grid = (uint3){grid.x, grid.y, grid.z};
  ko->nblocks = grid.x * grid.y * grid.z;
  ko->gpu_threads = (int)block.x;
  int host = kolo_sim_block_threads();
  ko->host_threads = (int)block.x < host ? (int)block.x : host;
  ko->dyn_smem = smem;
  ko->charge = SIM_SM_UNITS / per_sm;
  return op;
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t h) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  const sim_kernel *k = sim_kernel_find(func);
  if (k == NULL) return sim_ret(cudaErrorInvalidDeviceFunction);
  if (!config_ok(grid, block)) return sim_ret(cudaErrorInvalidConfiguration);
  /* The host runs one-dimensional blocks only (all kolo launches). */
  if (block.y != 1 || block.z != 1) return sim_ret(cudaErrorNotSupported);
  int per_sm = sim_blocks_per_sm(k, (int)block.x, smem);
  if (per_sm <= 0) return sim_ret(cudaErrorLaunchOutOfResources); /* one block does not fit an SM */
  sim_stream *s = sim_stream_get(h);
  if (s == NULL) return sim_ret(cudaErrorInvalidResourceHandle);
  sim_op *op = kernel_op(s, k, grid, block, smem, args, per_sm);
  if (op == NULL) return sim_ret(cudaErrorMemoryAllocation);
  e = sim_enqueue(s, op);
  /* a fault of this very launch, when it started at once, is its result */
  return sim_ret(e != cudaSuccess ? e : sim_sticky(s->dev));
}

/* ---- residency --------------------------------------------------------------------- */

static uint64_t gcd64(uint64_t a, uint64_t b) { return b == 0 ? a : gcd64(b, a % b); }

/* KOLO_SIM_SEED: the kernel's blocks are placed in a shuffled order (a
 * stride prime to their count from a random start), each on a random SM
 * with room, not the first one: CUDA promises neither. */
static void seed_order(sim_kernel_op *k) {
  k->order_stride = 1;
  k->order_start = 0;
  uint64_t seed = sim_seed();
  if (seed == 0) return;
  k->rng = seed ^ (k->launch_no * 0x9e3779b97f4a7c15ull);
  uint64_t r = sim_mix(&k->rng);
  k->order_start = r % k->nblocks;
  k->order_stride = k->nblocks > 1 ? 1 + (r >> 32) % (k->nblocks - 1) : 1;
  while (gcd64(k->order_stride, k->nblocks) != 1) k->order_stride--;
}

void sim_kernel_start(sim_op *op) {
  sim_device *d = op->dev;
  seed_order(&op->u.kern);
  op->u.kern.dispatch_next = NULL;
  if (d->dispatch_tail) d->dispatch_tail->u.kern.dispatch_next = op;
  else d->dispatch_head = op;
  d->dispatch_tail = op;
  sim_dispatch(d);
}

/* An SM with room for a block of k, its charge taken (-1: none). */
static int take_sm_with_room(sim_device *d, sim_kernel_op *k) {
  int start = sim_seed() ? (int)(sim_mix(&k->rng) % (uint64_t)sim_cfg.sms) : 0;
  for (int j = 0; j < sim_cfg.sms; j++) {
    int i = (start + j) % sim_cfg.sms;
    if (sim_sm_take(d, i, k->charge)) return i;
  }
  return -1;
}

/* Whether every block of op would be placed at once (lock held). */
int sim_kernel_fits_now(const sim_op *op) {
  const sim_device *d = op->dev;
  if (d->dispatch_head != NULL) return 0;
  const sim_kernel_op *k = &op->u.kern;
  unsigned room = 0;
  for (int i = 0; i < sim_cfg.sms && room < k->nblocks; i++)
    room += (unsigned)((SIM_SM_UNITS - sim_sm_used(d, i)) / k->charge);
  return room >= k->nblocks;
}

void sim_runner_give(sim_device *d, sim_op *op, unsigned block, int sm); /* block.c */

/* A lost context places no more blocks: a kernel ends with those that
 * run (lock held). */
static void drop_unplaced(sim_device *d) {
  sim_op *op;
  while ((op = d->dispatch_head) != NULL) {
    sim_kernel_op *k = &op->u.kern;
    k->nblocks = k->dispatched;
    d->dispatch_head = k->dispatch_next;
    if (d->dispatch_head == NULL) d->dispatch_tail = NULL;
    k->dispatch_next = NULL;
    if (k->finished == k->nblocks) sim_op_done(op);
    pthread_cond_signal(&d->queue_cv[op->stream->queue]); /* its queue may go on */
    sim_op_unref(op); /* the dispatch list's */
  }
}

void sim_dispatch(sim_device *d) {
  if (sim_sticky(d) != cudaSuccess) {
    drop_unplaced(d);
    return;
  }
  sim_op *op;
  while ((op = d->dispatch_head) != NULL) {
    sim_kernel_op *k = &op->u.kern;
    while (k->dispatched < k->nblocks) {
      int sm = take_sm_with_room(d, k);
      if (sm < 0) { /* in order: nothing behind it goes first */
        sim_share_stuck(d);
        return;
      }
      sim_op_ref(op); /* the block's */
      unsigned block = (unsigned)((k->order_start + k->dispatched++ * k->order_stride) % k->nblocks);
      sim_runner_give(d, op, block, sm);
    }
    d->dispatch_head = k->dispatch_next;
    if (d->dispatch_head == NULL) d->dispatch_tail = NULL;
    k->dispatch_next = NULL;
    pthread_cond_signal(&d->queue_cv[op->stream->queue]); /* its queue may go on */
    sim_op_unref(op); /* the dispatch list's */
  }
}

/* A block of op ended on SM sm (lock held). */
void sim_block_finished(sim_device *d, sim_op *op, int sm) {
  sim_sm_give(d, sm, op->u.kern.charge);
  if (++op->u.kern.finished == op->u.kern.nblocks) sim_op_done(op);
  sim_op_unref(op);
  sim_dispatch(d);
}
