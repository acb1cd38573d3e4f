/* device_prims.cuh - everything GPU-specific that kolo's kernels use, in one
 * place, with two definitions: the GPU's (nvcc: PTX and CUDA intrinsics)
 * and the host's (KOLO_CUDA_SIM: the kernels compiled by the host compiler
 * and run by kolo's CPU model of the GPU, cudasim/).  Kernels include this
 * header and use nothing device-specific beyond it (plus __global__ /
 * __device__ qualifiers, which the host compiler reads as nothing), so one
 * source serves both.
 *
 * Memory order.  Words shared with peers (counters, stop words, abort,
 * status) are only touched through these accessors.  On the GPU they are
 * PTX loads and stores at system scope (other GPUs, the host proxy); on
 * the host C++ atomics with the same order: relaxed, acquire, release.  The
 * host build's atomics are what ThreadSanitizer reasons with; the GPU's
 * scopes (cta / gpu / sys), L1 coherence and the PTX memory model's details
 * are not modelled (docs/dev/cuda-model.md).  x86 keeps stores in order,
 * a GPU does not: with KOLO_SIM_WEAK=1 the host half buffers relaxed stores
 * and the data primitives' stores (st_data) per thread, to land late and
 * out of order unless a release store or fence orders them
 * (cudasim/weak.c).
 *
 * Spinning.  Every spin loop calls poll() once per turn: nothing on the GPU;
 * on the host it lets the block's other threads (fibers) and other blocks
 * run, so a block waiting for a peer never starves the peer.
 *
 * Block-shared storage: KOLO_BLOCK_SHARED (CUDA's __shared__; on the host,
 * storage of the block's host thread).
 *
 * Launch and occupancy: kolo_dev::launch<kernel>(grid, block, smem, stream,
 * args...) returns the launch's own cudaError_t (cudaLaunchKernel's result,
 * never an earlier error of the thread that cudaGetLastError would also
 * return), and kolo_dev::occupancy<kernel>(...) asks how many blocks fit on
 * an SM.  The kernel is a template argument so that the host build can name
 * it to the model, which charges its blocks the registers and shared memory
 * of the GPU build's ptxas report. */
#ifndef KOLO_KERNELS_CUDA_DEVICE_PRIMS_CUH
#define KOLO_KERNELS_CUDA_DEVICE_PRIMS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include <tuple>
#include <type_traits>
#include <utility>

#if defined(KOLO_CUDA_SIM)
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cudasim/kolo_sim.h"
#define KOLO_DEV_HOST_BUILD 1
/* A hint to nvcc's register allocator: nothing on the host. */
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#else
#define KOLO_DEV_HOST_BUILD 0
#endif

#define KOLO_DEVFN static __device__ __forceinline__

namespace kolo_dev {

#if !KOLO_DEV_HOST_BUILD /* ================= the GPU ================== */

#define KOLO_BLOCK_SHARED __shared__

KOLO_DEVFN uint32_t ld_acquire(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/* A poll: no ordering, and no L1 invalidation as ld.acquire has. */
KOLO_DEVFN uint32_t ld_relaxed(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
KOLO_DEVFN void st_release(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
KOLO_DEVFN void st_relaxed(uint32_t *p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* Bytes (a call signature's `set`, which host code reads and writes as a
 * byte): the register is wider than the access, as PTX allows. */
KOLO_DEVFN uint32_t ld_acquire_u8(const uint8_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
KOLO_DEVFN uint32_t ld_relaxed_u8(const uint8_t *p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
KOLO_DEVFN void st_release_u8(uint8_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u8 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
KOLO_DEVFN void st_relaxed_u8(uint8_t *p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u8 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* Device scope: every contender for a word (the status and stall claims,
 * a connector end's owner) is a block of this GPU.  A system-scope atomic
 * on mapped host memory needs hostNativeAtomicSupported, which a GPU on
 * PCIe lacks: compute-sanitizer's memcheck refused kolo's on an H200. */
KOLO_DEVFN uint32_t cas(uint32_t *p, uint32_t expected, uint32_t v) { return atomicCAS(p, expected, v); }
KOLO_DEVFN unsigned long long add(unsigned long long *p, unsigned long long v) { return atomicAdd(p, v); }
/* Orders this thread's earlier writes before its later ones for every
 * observer (peers, the host). */
KOLO_DEVFN void fence() { __threadfence_system(); }
KOLO_DEVFN uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* An LL line as two 64-bit halves, each single-copy atomic, in one 16-byte
 * access. */
KOLO_DEVFN void ld_line(const char *p, uint64_t &lo, uint64_t &hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(lo), "=l"(hi) : "l"(p) : "memory");
}
KOLO_DEVFN void st_line(char *p, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
KOLO_DEVFN void block_sync() { __syncthreads(); }
KOLO_DEVFN int block_sync_or(int pred) { return __syncthreads_or(pred); }
/* Backs off a waiting thread between checks. */
KOLO_DEVFN void pause() { __nanosleep(64); }
KOLO_DEVFN void poll() {}
/* Whether this thread is the lowest of its warp's threads that run this
 * line now: one thread per warp does what every waiting thread would
 * otherwise do (read a host-mapped word across PCIe). */
KOLO_DEVFN bool warp_leader() { return (__ffs(__activemask()) - 1) == (int)(threadIdx.x & 31); }
KOLO_DEVFN int popc64(uint64_t x) { return __popcll(x); }
/* A product rounded on its own: nvcc never fuses __fmul_rn / __dmul_rn
 * into a multiply-add (a premul-sum rounds its product before the sum). */
KOLO_DEVFN float mul_rn(float a, float b) { return __fmul_rn(a, b); }
KOLO_DEVFN double mul_rn(double a, double b) { return __dmul_rn(a, b); }
/* A block-shared flag that threads read and write without a barrier. */
KOLO_DEVFN int hint_get(const int *p) { return *(const volatile int *)p; }
KOLO_DEVFN void hint_set(int *p, int v) { *(volatile int *)p = v; }
/* The SM clock (cycles), as clock64(). */
KOLO_DEVFN long long clock_cycles() { return clock64(); }
/* A data primitive's plain store (a slice into a peer's buffer). */
template <typename T>
KOLO_DEVFN void st_data(T *p, const T &v) { *p = v; }
KOLO_DEVFN void st_data_bytes(char *p, const void *v, unsigned n) { memcpy(p, v, n); }
/* Hides where a word's bits came from.  ptxas 13.0 compiled the byte stores
 * of a float16 / bfloat16 result (cvt.rn.f16.f32, then st.u8 of its bytes)
 * into a conversion of the value to an integer (F2I.U8.F16.TRUNC): the low
 * byte stored was the value truncated, 0 for most, not its bits (seen on an
 * H200; the SASS shows it). */
KOLO_DEVFN void opaque_word(uint32_t &w) { asm("" : "+r"(w)); }
/* The host build's checks (the GPU itself traps or faults). */
KOLO_DEVFN void aligned(const void *, unsigned, const char *) {}
KOLO_DEVFN void reachable(const void *, size_t, const char *) {}

#else /* ==================== the host: kolo's CPU model ==================== */

#define KOLO_BLOCK_SHARED static thread_local

/* KOLO_SIM_WEAK (cudasim/weak.c): stores wait in a store buffer of their
 * thread; one predictable branch per primitive when the mode is off. */
KOLO_DEVFN bool weak() { return __builtin_expect(__atomic_load_n(&kolo_sim_weak_mode, __ATOMIC_RELAXED), 0); }
/* A relaxed store of n bytes: buffered (true) or for the caller to make. */
KOLO_DEVFN bool weak_store(void *p, const void *v, unsigned n) {
  if (!weak()) return false;
  kolo_sim_weak_store(p, v, n, 0);
  return true;
}
/* An access of the thread: its own buffered stores there land first. */
KOLO_DEVFN void weak_touch(const void *p, size_t n) {
  if (weak()) kolo_sim_weak_touch(p, n);
}
/* A release store or fence: the thread's (and its block's) buffered stores
 * land, in order, first. */
KOLO_DEVFN void weak_release() {
  if (weak()) kolo_sim_weak_release();
}

/* A GPU traps an access of n bytes at an address that is not a multiple of
 * n (cudaErrorMisalignedAddress); x86 does not, so the host build checks
 * every access of the primitives and every vector of the kernels. */
KOLO_DEVFN void aligned(const void *p, unsigned n, const char *what, const char *file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
  if ((uintptr_t)p % n != 0) kolo_sim_misaligned(p, n, what, file, line);
}

/* Pageable host memory is out of a kernel's reach (a GPU faults): the data
 * primitives check their buffers, the word primitives below their words and
 * the kernels what they read of their arguments against the model's
 * allocations. */
KOLO_DEVFN void reachable(const void *p, size_t bytes, const char *what, const char *file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
  kolo_sim_global_span(p, bytes, what, file, line);
  weak_touch(p, bytes);
}

/* A data primitive's plain store: buffered in KOLO_SIM_WEAK, so that a
 * slice may land after the flag that publishes it (the data primitives
 * declare their outputs with reachable() first). */
template <typename T>
KOLO_DEVFN void st_data(T *p, const T &v) {
  if (weak()) kolo_sim_weak_store(p, &v, sizeof(T), 1);
  else *p = v;
}
KOLO_DEVFN void st_data_bytes(char *p, const void *v, unsigned n) {
  if (weak()) kolo_sim_weak_store(p, v, n, 1);
  else memcpy(p, v, n);
}
KOLO_DEVFN void opaque_word(uint32_t &) {}
/* hint_get / hint_set's word: block-shared storage (KOLO_BLOCK_SHARED, here
 * the runner's thread-local storage) or, as for the other primitives,
 * device-reachable memory. */
KOLO_DEVFN void shared_or_reachable(const void *p, size_t bytes, const char *what,
                                    const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  kolo_sim_block_span(p, bytes, what, file, line);
}

KOLO_DEVFN uint32_t ld_acquire(const uint32_t *p) {
  reachable(p, 4, "ld_acquire");
  aligned(p, 4, "ld_acquire");
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
KOLO_DEVFN uint32_t ld_relaxed(const uint32_t *p) {
  reachable(p, 4, "ld_relaxed");
  aligned(p, 4, "ld_relaxed");
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
KOLO_DEVFN void st_release(uint32_t *p, uint32_t v) {
  reachable(p, 4, "st_release");
  aligned(p, 4, "st_release");
  weak_release();
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
KOLO_DEVFN void st_relaxed(uint32_t *p, uint32_t v) {
  reachable(p, 4, "st_relaxed");
  aligned(p, 4, "st_relaxed");
  if (!weak_store(p, &v, 4)) __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
KOLO_DEVFN uint32_t ld_acquire_u8(const uint8_t *p) {
  reachable(p, 1, "ld_acquire_u8");
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
KOLO_DEVFN uint32_t ld_relaxed_u8(const uint8_t *p) {
  reachable(p, 1, "ld_relaxed_u8");
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
KOLO_DEVFN void st_release_u8(uint8_t *p, uint32_t v) {
  reachable(p, 1, "st_release_u8");
  weak_release();
  __atomic_store_n(p, (uint8_t)v, __ATOMIC_RELEASE);
}
KOLO_DEVFN void st_relaxed_u8(uint8_t *p, uint32_t v) {
  reachable(p, 1, "st_relaxed_u8");
  const uint8_t b = (uint8_t)v;
  if (!weak_store(p, &b, 1)) __atomic_store_n(p, b, __ATOMIC_RELAXED);
}
KOLO_DEVFN uint32_t cas(uint32_t *p, uint32_t expected, uint32_t v) {
  reachable(p, 4, "cas");
  aligned(p, 4, "cas"); /* relaxed, as atomicCAS: reachable() drains only stores to p */
  __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
KOLO_DEVFN unsigned long long add(unsigned long long *p, unsigned long long v) {
  reachable(p, 8, "add");
  aligned(p, 8, "add");
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
/* Every fence of the kernels precedes a release store that already orders
 * what came before it (C++'s model), or a stop word a peer polls: TSan
 * models no standalone fences, so its build leaves them out. */
#if defined(__SANITIZE_THREAD__)
KOLO_DEVFN void fence() { weak_release(); }
#else
KOLO_DEVFN void fence() {
  weak_release();
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif
KOLO_DEVFN uint64_t global_ns() { return kolo_sim_globaltimer_ns(); }
KOLO_DEVFN void ld_line(const char *p, uint64_t &lo, uint64_t &hi) {
  reachable(p, 16, "ld_line");
  aligned(p, 16, "ld_line");
  const uint64_t *q = reinterpret_cast<const uint64_t *>(p);
  lo = __atomic_load_n(q, __ATOMIC_RELAXED);
  hi = __atomic_load_n(q + 1, __ATOMIC_RELAXED);
}
KOLO_DEVFN void st_line(char *p, uint64_t lo, uint64_t hi) {
  reachable(p, 16, "st_line");
  aligned(p, 16, "st_line");
  const uint64_t line[2] = {lo, hi};
  if (weak_store(p, line, 16)) return;
  uint64_t *q = reinterpret_cast<uint64_t *>(p);
  __atomic_store_n(q, lo, __ATOMIC_RELAXED);
  __atomic_store_n(q + 1, hi, __ATOMIC_RELAXED);
}
/* Each barrier names its call site: the model checks that a block's
 * threads meet at one. */
KOLO_DEVFN void block_sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  kolo_sim_block_sync_at(file, line);
}
KOLO_DEVFN int block_sync_or(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return kolo_sim_block_sync_or_at(pred, file, line);
}
KOLO_DEVFN void pause() { kolo_sim_poll(); }
KOLO_DEVFN void poll() { kolo_sim_poll(); }
KOLO_DEVFN bool warp_leader(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return kolo_sim_warp_leader_at(file, line) != 0;
}
KOLO_DEVFN int popc64(uint64_t x) { return __builtin_popcountll(x); }
/* The host build is compiled with -ffp-contract=off (CMakeLists.txt). */
KOLO_DEVFN float mul_rn(float a, float b) { return a * b; }
KOLO_DEVFN double mul_rn(double a, double b) { return a * b; }
KOLO_DEVFN int hint_get(const int *p) {
  shared_or_reachable(p, sizeof *p, "hint_get");
  weak_touch(p, sizeof *p);
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
KOLO_DEVFN void hint_set(int *p, int v) {
  shared_or_reachable(p, sizeof *p, "hint_set");
  if (!weak_store(p, &v, sizeof v)) __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
/* Cycles of the model's clock: cudaDevAttrClockRate (1.98 GHz) times the
 * nanoseconds of the host's. */
KOLO_DEVFN long long clock_cycles() { return (long long)(kolo_sim_globaltimer_ns() * 198 / 100); }
using std::isnan;

#endif

/* ---- launch and occupancy (both builds) ------------------------------------ */

namespace detail {

template <typename F>
struct signature;
template <typename... P>
struct signature<void (*)(P...)> {
  using args = std::tuple<std::decay_t<P>...>;
};

template <typename Tuple, size_t... I>
void **argv_of(Tuple &t, void **argv, std::index_sequence<I...>) {
  ((argv[I] = static_cast<void *>(&std::get<I>(t))), ...);
  return argv;
}

#if KOLO_DEV_HOST_BUILD
template <auto K>
const char *kernel_name() {
  return __PRETTY_FUNCTION__; /* "... [with auto K = <the kernel>]": the model reads it */
}

template <typename Args, size_t... I>
void *pack_args(void **argv, std::index_sequence<I...>) {
  return new (std::nothrow) Args(*static_cast<std::tuple_element_t<I, Args> *>(argv[I])...);
}

template <auto K>
struct host_kernel {
  using Args = typename signature<decltype(K)>::args;
  static constexpr size_t N = std::tuple_size<Args>::value;
  static void *pack(void **argv) { return pack_args<Args>(argv, std::make_index_sequence<N>()); }
  static void run(const void *, const void *packed) { std::apply(K, *static_cast<const Args *>(packed)); }
  static void destroy(void *packed) { delete static_cast<Args *>(packed); }
  /* Registered once, at the first launch or question. */
  static int registered() {
    static const int once = [] {
      kolo_sim_kernel_desc d = {reinterpret_cast<const void *>(K), kernel_name<K>(), &pack, &run, &destroy};
      return kolo_sim_register_kernel(&d);
    }();
    return once;
  }
};
#endif

}  // namespace detail

template <auto K, typename... A>
inline cudaError_t launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A &&...a) {
  using Args = typename detail::signature<decltype(K)>::args;
  constexpr size_t n = std::tuple_size<Args>::value;
  static_assert(n == sizeof...(A), "kolo_dev::launch: wrong number of kernel arguments");
#if KOLO_DEV_HOST_BUILD
  detail::host_kernel<K>::registered();
#endif
  Args args(std::forward<A>(a)...);
  void *argv[n > 0 ? n : 1];
  detail::argv_of(args, argv, std::make_index_sequence<n>());
  return cudaLaunchKernel(reinterpret_cast<const void *>(K), grid, block, argv, smem, stream);
}

template <auto K>
inline cudaError_t occupancy(int *blocks_per_sm, int threads, size_t smem) {
#if KOLO_DEV_HOST_BUILD
  detail::host_kernel<K>::registered();
#endif
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, reinterpret_cast<const void *>(K), threads,
                                                       smem);
}

}  // namespace kolo_dev

#endif
