/* kolo_sim.h - what kolo's CPU model of the GPU offers beyond the CUDA
 * runtime API it implements (docs/dev/cuda-model.md): the calls that device code
 * compiled for the host makes (kernels/cuda/device_prims.cuh), the kernel
 * registry behind cudaLaunchKernel, and a few questions and settings for
 * tests.  Plain C.
 *
 * The model is a test double.  It runs kolo's kernels on CPU threads with
 * CUDA's rules for streams, events, graphs, residency and errors; nothing it
 * measures is a GPU figure.  Where it cannot be faithful (the full list is in
 * docs/dev/cuda-model.md): memory scopes and the PTX memory model (its atomics
 * are C++'s on the host, stronger than a GPU's), L1 coherence, timing,
 * device-side faults other than writing past an allocation and those
 * KOLO_SIM_FAULT injects (below), host code touching device memory,
 * GPUDirect RDMA, the driver API, captures across streams, and the
 * Programming Guide's implicit synchronization of
 * allocations and memsets (only the legacy stream's and cudaFree's).
 */
#ifndef KOLO_CUDASIM_KOLO_SIM_H
#define KOLO_CUDASIM_KOLO_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <vector_types.h> /* uint3 (CUDA's, plain C) */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the device side: what a kernel compiled for the host calls ------------
 * A block runs on one host thread; its CUDA threads are fibers of that
 * thread that switch only inside the calls below, so each fiber sees its own
 * threadIdx (set at every switch) and the block's shared storage is
 * thread-local storage of the block's host thread.  blockDim and gridDim
 * are uint3 here (CUDA's dim3 has the same layout). */
#ifdef __cplusplus
#define KOLO_SIM_TLS thread_local
#else
#define KOLO_SIM_TLS _Thread_local
#endif
extern KOLO_SIM_TLS uint3 threadIdx, blockIdx, blockDim, gridDim;

/* __syncthreads() called at (file, line): every live thread of the block
 * arrives before any leaves; it orders the block's memory accesses (for
 * ThreadSanitizer too).  CUDA requires every live thread of a block to reach
 * the same __syncthreads, and the model checks it by the call site (a breach
 * is undefined behaviour, below). */
void kolo_sim_block_sync_at(const char *file, int line);
/* __syncthreads_or(pred): the same barrier (another kind: threads at both
 * breach the rule); non-zero when any thread's pred was non-zero. */
int kolo_sim_block_sync_or_at(int pred, const char *file, int line);
/* 1 when the calling thread is the lowest active lane of its 32-lane warp
 * at this call site (file, line): __ffs(__activemask()) as the model sees a
 * warp, whose active lanes are those that made this call as often since
 * the block's last barrier (block.c).  Outside a kernel: 1. */
int kolo_sim_warp_leader_at(const char *file, int line);
/* The poll hook of spin loops: lets the other threads of the block run, and,
 * once every thread of the block is polling, the other host threads. */
void kolo_sim_poll(void);
/* An access of n bytes at p, not a multiple of n, made by `what` at (file,
 * line): a GPU traps (cudaErrorMisalignedAddress).  Reported, then abort. */
void kolo_sim_misaligned(const void *p, unsigned n, const char *what, const char *file, int line);
/* A kernel's access to [p, p + bytes) by `what` at (file, line): unless it
 * lies in one allocation a GPU's kernel may reach (device memory, IPC-opened
 * or pinned host memory), reported, then abort (pageable host memory: a
 * GPU faults). */
void kolo_sim_global_span(const void *p, size_t bytes, const char *what, const char *file, int line);
/* kolo_sim_global_span for a word that may also be block-shared storage
 * (KOLO_BLOCK_SHARED: the calling runner's thread-local storage). */
void kolo_sim_block_span(const void *p, size_t bytes, const char *what, const char *file, int line);
/* KOLO_SIM_WEAK (cudasim/weak.c): non-zero while the weak-memory mode is
 * on.  The device primitives then buffer relaxed stores (plain: 0) and the
 * data primitives' stores (plain: 1) of n bytes (1, 4, 8 or 16) per thread,
 * landing late and out of order; weak_touch lands the calling thread's
 * buffered stores that overlap an access; weak_release lands the block's
 * and the thread's, in order (a release store, a fence). */
extern int kolo_sim_weak_mode;
void kolo_sim_weak_store(void *p, const void *v, unsigned n, int plain);
void kolo_sim_weak_touch(const void *p, size_t n);
void kolo_sim_weak_release(void);
/* %globaltimer: nanoseconds of a monotonic clock. */
uint64_t kolo_sim_globaltimer_ns(void);

/* ---- kernels ------------------------------------------------------------
 * A kernel is known to the model by its host function: kernels/cuda/
 * device_prims.cuh registers each one it launches or asks about, with the
 * name nvcc's ptxas report gives it (kernel name and template arguments,
 * no namespace), so that residency is computed from the registers and
 * shared memory the GPU build really uses.  pack copies the parameters of
 * a launch (argv as cudaLaunchKernel takes it) to the heap, run calls the
 * kernel with them on the current fiber, destroy frees the copy. */
typedef struct {
  const void *func;
  const char *name;
  void *(*pack)(void **argv);
  void (*run)(const void *func, const void *packed);
  void (*destroy)(void *packed);
} kolo_sim_kernel_desc;

/* Registers a kernel (idempotent; thread-safe).  Returns 0. */
int kolo_sim_register_kernel(const kolo_sim_kernel_desc *k);

/* ---- questions and settings for tests ---------------------------------- */

/* The resources the model charges a block of the kernel named `name`
 * (registers per thread, static shared memory bytes): from the build's
 * ptxas report, overridden by kolo_sim_set_kernel_resources.  Returns 0, or
 * -1 when the kernel is unknown (then the defaults of docs/dev/cuda-model.md). */
int kolo_sim_kernel_resources(const char *name, int *regs, int *smem);
/* Overrides them for every kernel whose name starts with `prefix` (regs <
 * 0: back to the report).  For tests of residency. */
void kolo_sim_set_kernel_resources(const char *prefix, int regs, int smem);

/* Threads the model runs per block on the host (KOLO_SIM_BLOCK_THREADS):
 * a launch of more gets this many, blockDim reports it. */
int kolo_sim_block_threads(void);
void kolo_sim_set_block_threads(int n);

/* Breaches of CUDA's rules the model saw that CUDA leaves undefined (for
 * example cudaFree of memory another process still has open through IPC):
 * each is printed to stderr as it happens; with KOLO_SIM_ON_UB=abort (the
 * default) the process then aborts, with =count it goes on and they are
 * counted here. */
int kolo_sim_undefined_count(void);

/* KOLO_SIM_SHARE=timeslice: how often device dev's slice has passed from
 * one process of the machine (KOLO_SIM_MACHINE) to another. */
unsigned kolo_sim_slice_switches(int dev);
/* How often this process's block runners waited for device dev's slice. */
unsigned kolo_sim_slice_waits(int dev);

/* Prints every device's hardware queues, the op at each head and what it
 * waits for, and the kernels running: what a hang is stuck on.  Also
 * printed by the watchdog (KOLO_SIM_WATCHDOG_S=N: after N seconds without
 * any op finishing while some are pending). */
void kolo_sim_dump(void);

/* KOLO_SIM_FAULT's setting from a test: "<name>:<n>[:<device>]" arms a
 * fault of the n-th launch (from now) of a kernel whose name contains
 * <name> (no ':' in it), on any device or on <device> only; NULL or ""
 * disarms it.  The launch faults when it starts: its device's context
 * then has the sticky cudaErrorIllegalAddress.  Returns 0, or -1 for a
 * malformed spec. */
int kolo_sim_set_fault(const char *spec);
/* Clears every device's sticky error and the armed fault.  Not CUDA's (a
 * process must end after a sticky error): for tests that go on in the
 * same process once every communicator and stream of the lost context is
 * gone. */
void kolo_sim_clear_faults(void);

/* KOLO_SIM_MAX_PENDING from a test: cudaLaunchKernel blocks the host
 * while n kernels of the device are not done (n >= 1). */
void kolo_sim_set_max_pending(int n);

/* KOLO_SIM_SEED from a test (0: the fixed order); launches made after the
 * call use it. */
void kolo_sim_set_seed(uint64_t seed);

/* KOLO_SIM_WEAK from a test (0: off); blocks started after the call use it. */
void kolo_sim_set_weak(int on);

/* Host code that stands for a DMA engine (a NIC's GPUDirect RDMA, a copy
 * the GPU would make) may touch device memory between these two calls on
 * its thread; any other host access to device memory aborts with a report
 * (KOLO_SIM_APART, docs/dev/cuda-model.md).  begin returns what end puts
 * back, so that the calls nest. */
unsigned kolo_sim_dma_begin(void);
void kolo_sim_dma_end(unsigned saved);

/* 1: this process runs on the model (always, in a build linked to it). */
int kolo_sim_active(void);

#ifdef __cplusplus
}
#endif

#endif
