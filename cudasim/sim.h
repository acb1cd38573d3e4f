/* sim.h - the insides of kolo's CPU model of the CUDA runtime.
 *
 * One lock (sim_lock) guards every structure here; host threads that wait
 * for the device wait on sim_changed, which is broadcast whenever an
 * operation finishes or a block is placed.
 *
 * Work flows as on a GPU:
 *
 *   API call -> sim_op appended to its stream (stream order, legacy-stream
 *   rules, event waits and graph-launch order become the op's deps) and to
 *   the stream's hardware queue -> the queue's thread starts the op at the
 *   head of the queue once its deps are done (a queue is in order, so an op
 *   whose deps are not done holds up every op behind it, as a shared
 *   hardware queue does) -> a kernel's blocks join the device's dispatch
 *   list, placed in order on SMs with room (registers, shared memory,
 *   threads, blocks), each on a host runner thread until it exits; the queue
 *   goes on once every block of the kernel is placed; copies and sets run
 *   on the queue's thread.
 */
#ifndef KOLO_CUDASIM_SIM_H
#define KOLO_CUDASIM_SIM_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cudasim/kolo_sim.h"

#define SIM_MAX_DEVICES 16

/* Every thread of the model is named "ksim-<what>" (/proc's comm) by its
 * creator right after pthread_create (no window where it is unnamed), so
 * that a test counting a process's threads can tell kolo's from the
 * model's, which a GPU driver would hold: tests/fault/fault_cuda.c. */
#define SIM_THREAD_PREFIX "ksim-"
void sim_name_thread(pthread_t th, const char *what);
#define SIM_MAX_QUEUES 32

typedef struct sim_op sim_op;
typedef struct sim_stream sim_stream;
typedef struct sim_device sim_device;
typedef struct sim_kernel sim_kernel;
typedef struct sim_graph sim_graph;

extern pthread_mutex_t sim_lock;
extern pthread_cond_t sim_changed;

/* ---- settings (read once, at the first call) ---------------------------- */
typedef struct {
  int ndevices;        /* KOLO_SIM_GPUS (2) */
  int sms;             /* KOLO_SIM_SMS (132: an H100 SXM) */
  int queues;          /* CUDA_DEVICE_MAX_CONNECTIONS (8), 1..32 */
  int block_threads;   /* KOLO_SIM_BLOCK_THREADS (8) */
  int ub_abort;        /* KOLO_SIM_ON_UB: abort (1) or count (0) */
  size_t mem_bytes;    /* KOLO_SIM_MEM_BYTES: device memory per device (16 GiB) */
  int max_pending;     /* KOLO_SIM_MAX_PENDING (1024): kernels not done per device before a launch blocks */
  uint64_t seed;       /* KOLO_SIM_SEED (0: the model's fixed order) */
} sim_settings;
extern sim_settings sim_cfg;

/* Once per process; then every API call's first step.  cudaSuccess, or
 * cudaErrorInitializationError in a child forked after the model started
 * (CUDA's rule), or cudaErrorNoDevice with KOLO_SIM_GPUS=0. */
cudaError_t sim_init(void);

/* ---- errors ------------------------------------------------------------- */
/* Records e as the calling thread's last error (unless cudaSuccess) and
 * returns it: every API function returns through this. */
cudaError_t sim_ret(cudaError_t e);
/* A breach of a rule CUDA leaves undefined: printed, then abort or count. */
void sim_undefined(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- per thread ---------------------------------------------------------- */
typedef struct {
  int device;                /* current device */
  cudaError_t last_error;
  sim_stream *per_thread[SIM_MAX_DEVICES]; /* cudaStreamPerThread, made on use */
  int captures;              /* streams this thread is capturing (thread-local or global mode) */
} sim_thread_state;
sim_thread_state *sim_thread(void);

/* ---- operations ------------------------------------------------------------ */
enum { SIM_OP_KERNEL, SIM_OP_COPY, SIM_OP_SET, SIM_OP_MARK };
enum { SIM_QUEUED, SIM_STARTED, SIM_DONE };

/* Launch arguments, shared by a graph's node and every launch of it. */
typedef struct {
  int refs;
  const sim_kernel *kernel;
  void *packed;
} sim_args;

typedef struct {
  const sim_kernel *kernel;
  sim_args *args;
  uint3 grid;              /* blocks */
  int gpu_threads;         /* threads per block as launched */
  int charge;              /* SM units per block (SIM_SM_UNITS / blocks per SM) */
  int host_threads;        /* threads per block run on the host */
  size_t dyn_smem;
  unsigned nblocks, dispatched, finished;
  int fault;               /* KOLO_SIM_FAULT picked this launch: it faults when it starts */
  uint64_t launch_no;      /* the device's launch number (seeds KOLO_SIM_SEED's choices) */
  uint64_t order_stride, order_start; /* KOLO_SIM_SEED: block k placed is (start + k * stride) % nblocks */
  uint64_t rng;            /* KOLO_SIM_SEED: the SM each block's search starts at */
  sim_op *dispatch_next;   /* in the device's dispatch list */
} sim_kernel_op;

struct sim_op {
  int kind, state, refs;
  sim_device *dev;
  sim_stream *stream;
  sim_op *queue_next;           /* in its hardware queue */
  sim_op *live_prev, *live_next; /* the device's not-done ops, in issue order */
  uint64_t seq;                 /* issue order on the device */
  sim_op **deps;
  int ndeps, cap_deps;
  uint64_t done_ns;
  union {
    sim_kernel_op kern;
    struct { void *dst; const void *src; size_t bytes; } copy;
    struct { void *dst; int value; size_t bytes; } set;
  } u;
};

/* A new op of `kind` for stream s (refs: 1, the caller's). */
sim_op *sim_op_new(int kind, sim_stream *s);
void sim_op_ref(sim_op *op);
void sim_op_unref(sim_op *op);
/* Adds dep (if not done) to op's deps. */
int sim_op_add_dep(sim_op *op, sim_op *dep);
/* Appends op to its stream and queue with the stream-order and legacy deps,
 * and wakes the queue.  Takes over the caller's reference. */
void sim_op_submit(sim_op *op);
/* Marks op done: releases what waits on it (lock held). */
void sim_op_done(sim_op *op);
int sim_deps_done(const sim_op *op);

/* ---- streams -------------------------------------------------------------- */
struct sim_stream {
  uint32_t magic;
  sim_device *dev;
  int flags;                 /* cudaStreamNonBlocking or 0 */
  int legacy;                /* the device's NULL stream */
  int queue;                 /* hardware queue index */
  int priority;
  sim_op *tail;              /* last op issued (a reference), NULL when none */
  int destroyed;             /* cudaStreamDestroy called: freed once idle */
  sim_stream *dev_next;      /* in the device's stream list */
  /* Stream capture (graph.c). */
  sim_graph *capture;        /* the graph being captured, or NULL */
  int capture_mode;
  int capture_invalid;       /* a prohibited call broke it: EndCapture fails */
  pthread_t capture_thread;
  uint64_t capture_id;
};

/* The stream behind a handle (NULL, cudaStreamLegacy, cudaStreamPerThread or
 * a created one) on the current device; NULL for a bad handle. */
sim_stream *sim_stream_get(cudaStream_t h);
/* Waits until every op issued so far on s is done (lock not held). */
void sim_stream_wait(sim_stream *s);

/* ---- devices --------------------------------------------------------------- */
/* A block of a kernel of which N fit on one SM (the occupancy calculator's
 * answer for its registers, shared memory and threads) takes 1/N of an SM's
 * SIM_SM_UNITS, whatever else runs there.  Exact for one kernel at a time;
 * kernels of different shapes share an SM less well than on a GPU, which
 * only makes the model stricter about co-residency. */
#define SIM_SM_UNITS (1 << 20)
typedef struct {
  int units;
} sim_sm;

typedef struct sim_runner sim_runner;

struct sim_device {
  int ordinal;
  int ready;                  /* context made: queues running */
  sim_sm *sm;                 /* [sim_cfg.sms] resources in use */
  sim_op *dispatch_head, *dispatch_tail; /* kernels with blocks left to place */
  sim_op *queue_head[SIM_MAX_QUEUES], *queue_tail[SIM_MAX_QUEUES];
  pthread_cond_t queue_cv[SIM_MAX_QUEUES];
  int queue_busy[SIM_MAX_QUEUES];         /* an op of the queue is being started */
  pthread_t queue_thread[SIM_MAX_QUEUES];
  sim_op *live_head, *live_tail;
  uint64_t next_seq;
  int streams_made;           /* creation index: picks the hardware queue */
  sim_stream *legacy;
  sim_stream *streams;        /* every stream of the device */
  sim_runner *idle_runners;
  int peer_enabled[SIM_MAX_DEVICES];
  size_t mem_used;
  int kernels_pending;        /* kernel ops issued, not done (KOLO_SIM_MAX_PENDING) */
  uint64_t launches;          /* kernel launches made on the device */
  cudaError_t fault;          /* sticky error of the context (relaxed atomic): cudaSuccess until a fault */
};

sim_device *sim_device_get(int ordinal);
/* The current device of the thread, its context made (queues started). */
cudaError_t sim_current(sim_device **out);
/* Starts the device's queue threads (lock held). */
cudaError_t sim_device_start(sim_device *d);
/* Waits until every op issued on d so far is done (lock not held). */
void sim_device_wait(sim_device *d);

/* ---- processes sharing the machine's devices (share.c) -------------------- */
/* Maps the machine's page (KOLO_SIM_MACHINE) and joins it; reads
 * KOLO_SIM_SHARE.  Without a page the process is a machine alone. */
void sim_share_init(long slice_us);
/* Whether the machine runs MPS (KOLO_SIM_SHARE=mps). */
int sim_share_mps(void);
/* Timeslice: a block of this process starts or ends on device dev; a
 * runner's pass (up to every thread's next poll, barrier or end) starts,
 * waiting for the context's slice, or ends.  Lock not held. */
void sim_share_block_begin(int dev);
void sim_share_block_end(int dev);
void sim_share_pass_begin(int dev);
void sim_share_pass_end(int dev);
/* An SM's units in use; a block's charge taken (1) if it fits, or given
 * back: this process's SMs, or the machine's under mps (lock held). */
int sim_sm_used(const sim_device *d, int sm);
int sim_sm_take(sim_device *d, int sm, int charge);
void sim_sm_give(sim_device *d, int sm, int charge);
/* Blocks of d wait for room that another process may free (lock held). */
void sim_share_stuck(sim_device *d);
/* The device's UUID, alike in every process of the machine. */
void sim_share_uuid(int dev, char out[16]);
/* Whether pid runs (a zombie does not): memory.c. */
int sim_process_runs(int pid);

/* ---- faults (fault.c) ---------------------------------------------------- */
/* The context's sticky error (cudaSuccess when none); d may be NULL. */
cudaError_t sim_sticky(const sim_device *d);
/* The sticky error of the calling thread's current device, if it has one. */
cudaError_t sim_sticky_current(void);
/* Whether KOLO_SIM_FAULT picks this launch of k on d (lock held). */
int sim_fault_picks(const sim_kernel *k, const sim_device *d);
/* The context of d is lost: its sticky error is set, its kernels end at
 * their next poll or barrier, blocks not yet placed never run and queued
 * work completes without running (lock held). */
void sim_fault_device(sim_device *d, const sim_op *culprit);

/* ---- KOLO_SIM_SEED ------------------------------------------------------------ */
/* A step of splitmix64 (state.c): the seeded choices of block.c and kernel.c. */
uint64_t sim_mix(uint64_t *state);
/* The seed (0: the fixed order); tests change it between launches. */
static inline uint64_t sim_seed(void) { return __atomic_load_n(&sim_cfg.seed, __ATOMIC_RELAXED); }

/* ---- kernels and blocks -------------------------------------------------- */
struct sim_kernel {
  kolo_sim_kernel_desc desc;
  int regs, smem;              /* per thread, static bytes */
  int known;                   /* found in the ptxas report */
  sim_kernel *next;
};

const sim_kernel *sim_kernel_find(const void *func);
/* Blocks of `threads` threads of k with dyn_smem that one SM holds. */
int sim_blocks_per_sm(const sim_kernel *k, int threads, size_t dyn_smem);
/* Places what can be placed of the device's dispatch list (lock held). */
void sim_dispatch(sim_device *d);
/* Runs one block of op's kernel on the calling runner thread (lock not
 * held). */
void sim_run_block(sim_op *op, unsigned block);

/* ---- KOLO_SIM_WEAK (weak.c) ----------------------------------------------------
 * The store buffers of the runner's block: made at its start (rng: the
 * block's stream of choices), handed to the block at a thread's barrier or
 * end, partly landed at its polls, landed at the block's end. */
void sim_weak_block_begin(int nfibers, uint64_t rng);
void sim_weak_barrier(int fiber);
void sim_weak_poll(int fiber);
void sim_weak_block_end(void);
/* The current thread of the runner's block; -1 outside a kernel (block.c). */
int sim_block_fiber(void);

/* The ptxas table made at build time (ptxas_table.c). */
typedef struct {
  const char *name;
  int regs, smem;
} sim_ptxas_entry;
extern const sim_ptxas_entry sim_ptxas_table[];
extern const int sim_ptxas_count;

/* ---- memory ----------------------------------------------------------------- */
enum { SIM_MEM_DEVICE = 1, SIM_MEM_HOST = 2, SIM_MEM_IMPORTED = 3 };

/* What kind of memory p points into (0: none the model made) and, for
 * device memory, which device; *room: bytes from p to the allocation's end. */
int sim_mem_kind(const void *p, int *device, size_t *room);
/* The allocation whose mapping holds addr, as text, for a fault's report
 * (from a signal handler: the lock is not waited for). */
void sim_mem_describe(const void *addr, char *out, size_t n);

/* ---- host and device apart (apart.c) ---------------------------------------- */
/* Protection keys: device memory is tagged, and only runners, copies, sets
 * and kolo_sim_dma_begin may touch it.  All no-ops when the check is off. */
void sim_apart_init(void);
void sim_apart_tag(void *p, size_t bytes);
/* Grants the calling thread access to device memory; returns what
 * sim_apart_restore puts back. */
unsigned sim_apart_open(void);
void sim_apart_restore(unsigned was);

/* ---- graphs (graph.c) ----------------------------------------------------- */
/* Adds a copy of op's work as a node of the capture of its stream (lock
 * held); the op itself is freed by the caller. */
cudaError_t sim_capture_add(sim_stream *s, sim_op *op);
/* A call that capture prohibits was made on this thread (or, in global mode,
 * anywhere): invalidates the captures it touches. */
int sim_capture_forbids(sim_stream *s);

/* Clock. */
uint64_t sim_now_ns(void);

#endif
