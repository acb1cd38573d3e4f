/* exec_ll.cuh - the CUDA executor's LL (low-latency) protocol
 * (exec_kernel.cu).
 *
 * Per slice: thread 0 waits for send credit only (head, as SIMPLE); then
 * every thread takes lines threadIdx.x, + blockDim.x, ... of the slice, four
 * at a time: it loads its receive lines (ld.volatile v2.u64) and its source
 * payloads, polls each line until both flags are rstep + 1, combines, writes
 * the destination bytes of the line (never past the chunk) and the send line
 * {data0, flag, data1, flag} with flag sstep + 1 as one 16-byte volatile
 * store.  No fence and no tail: data and flag travel together.  After
 * __syncthreads (every line of the slice consumed) thread 0 returns the
 * credit: st.release.sys of head.  Line format: kernels/cuda/ll_format.h. */
#ifndef KOLO_KERNELS_CUDA_EXEC_LL_CUH_
#define KOLO_KERNELS_CUDA_EXEC_LL_CUH_

#include "kernels/cuda/exec_stop.cuh"
#include "kernels/cuda/exec_step.cuh"

namespace {

/* 8 payload bytes: OP applied element by element (8 / sizeof(T) elements;
 * a padded tail is computed too and never stored to a user buffer). */
template <typename T, int OP>
__device__ __forceinline__ uint64_t reduce_line(uint64_t a, uint64_t b, bool has_div, int d, ValOf<T> s) {
  constexpr int kN = 8 / sizeof(T);
  T x[kN], y[kN];
  memcpy(static_cast<void *>(x), &a, 8); /* void *: __half is a class */
  memcpy(static_cast<void *>(y), &b, 8);
#pragma unroll
  for (int j = 0; j < kN; j++) x[j] = reduce_elem<T, OP>(x[j], y[j], has_div, d, s);
  uint64_t r;
  memcpy(&r, static_cast<const void *>(x), 8);
  return r;
}

/* nb (<= 8) bytes of a user buffer at p (any alignment) as a payload. */
__device__ __forceinline__ uint64_t load_payload(const char *p, unsigned nb) {
  const uintptr_t a = (uintptr_t)p;
  if (nb == 8) {
    if ((a & 7) == 0) return *reinterpret_cast<const uint64_t *>(p);
    if ((a & 3) == 0) {
      const uint32_t *q = reinterpret_cast<const uint32_t *>(p);
      return (uint64_t)q[0] | ((uint64_t)q[1] << 32);
    }
    if ((a & 1) == 0) {
      const uint16_t *q = reinterpret_cast<const uint16_t *>(p);
      return (uint64_t)q[0] | ((uint64_t)q[1] << 16) | ((uint64_t)q[2] << 32) | ((uint64_t)q[3] << 48);
    }
  }
  return kolo_ll_pack_bytes(reinterpret_cast<const unsigned char *>(p), nb);
}

/* The first nb (<= 8) bytes of a payload to a user buffer at p. */
__device__ __forceinline__ void store_payload(char *p, uint64_t v, unsigned nb) {
  const uintptr_t a = (uintptr_t)p;
  if (nb == 8) {
    if ((a & 7) == 0) {
      *reinterpret_cast<uint64_t *>(p) = v;
      return;
    }
    if ((a & 3) == 0) {
      uint32_t *q = reinterpret_cast<uint32_t *>(p);
      q[0] = (uint32_t)v;
      q[1] = (uint32_t)(v >> 32);
      return;
    }
    if ((a & 1) == 0) {
      uint16_t *q = reinterpret_cast<uint16_t *>(p);
      q[0] = (uint16_t)v;
      q[1] = (uint16_t)(v >> 16);
      q[2] = (uint16_t)(v >> 32);
      q[3] = (uint16_t)(v >> 48);
      return;
    }
  }
  kolo_ll_unpack_bytes(v, reinterpret_cast<unsigned char *>(p), nb);
}

/* Polls one LL line of receive end R until both flags are `flag`; false to
 * stop. */
__device__ __forceinline__ bool ll_wait(const char *p, uint32_t flag, uint64_t &lo, uint64_t &hi,
                                        const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn *R,
                                        int *s_stop) {
  wait_state w;
  for (unsigned spins = 1; !kolo_ll_ready(lo, hi, flag); spins++) {
    if (spins % kPollSpins == 0 && must_leave(b, t, *R, w, s_stop)) return false;
    kolo_dev::poll();
    ld_line(p, lo, hi);
  }
  return true;
}

/* Where one LL slice comes from and goes to.  rl / sl: the receive / send
 * slot's lines (nullptr: none); s / d: the source / destination bytes in
 * the user buffers (nullptr: none); nbytes payload bytes. */
struct LLSlice {
  const kolo_dev_conn *R; /* the receive end (when rl) */
  const char *rl;
  char *sl;
  const char *s;
  char *d;
  size_t nbytes;
  uint32_t rflag, sflag;
  int div;
  bool swap; /* reduce s OP received (KOLO_STEP_SRC_FIRST) */
};

/* The block's lines of one slice.  Value of a line: the receive line
 * (OP'ed with the source when OP is a reduction), or the source when
 * nothing is received (kOpPreCopy: scaled); divided by div when div > 1.
 * scalar: the premul-sum's.  Returns true to stop. */
template <typename T, int OP>
__device__ __forceinline__ bool ll_lines(const LLSlice &x, const kolo_dev_batch &b,
                                         const kolo_dev_task &t, int *s_stop, uint64_t scalar) {
  /* the premul-sum's product and scalar: fewer lines in flight, which keeps
   * the LL kernels' registers where they were */
  constexpr int U = OP == kOpPreSum || OP == kOpPreCopy ? kLLUnroll / 2 : kLLUnroll;
  const bool has_div = x.div > 1;
  const ValOf<T> s = scalar_value<T>(scalar);
  const size_t nlines = kolo_ll_lines(x.nbytes), nt = blockDim.x;
  kolo_dev::reachable(x.s, x.nbytes, "an LL slice's source");
  kolo_dev::reachable(x.d, x.nbytes, "an LL slice's output");
  for (size_t i0 = threadIdx.x; i0 < nlines; i0 += U * nt) {
    uint64_t lo[U], hi[U], sv[U];
#pragma unroll
    for (int u = 0; u < U; u++) { /* receive lines first: the longest wait */
      const size_t i = i0 + u * nt;
      lo[u] = hi[u] = 0;
      if (x.rl && i < nlines) ld_line(x.rl + i * KOLO_LL_LINE_BYTES, lo[u], hi[u]);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + u * nt;
      sv[u] = 0;
      if (x.s && i < nlines)
        sv[u] = load_payload(x.s + i * KOLO_LL_LINE_PAYLOAD, kolo_ll_line_bytes(x.nbytes, i));
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const size_t i = i0 + u * nt;
      if (i >= nlines) break;
      uint64_t v = sv[u];
      if (x.rl) {
        if (!ll_wait(x.rl + i * KOLO_LL_LINE_BYTES, x.rflag, lo[u], hi[u], b, t, x.R, s_stop)) return true;
        v = kolo_ll_payload(lo[u], hi[u]);
        if (reads_b(OP))
          v = x.swap ? reduce_line<T, OP>(sv[u], v, has_div, x.div, s) : reduce_line<T, OP>(v, sv[u], has_div, x.div, s);
      }
      if (OP == kOpPreCopy) v = reduce_line<T, kOpPreCopy>(v, 0, false, 1, s);
      if (OP == kOpCopy && has_div) v = reduce_line<T, kOpCopy>(v, 0, true, x.div, s);
      if (x.d) store_payload(x.d + i * KOLO_LL_LINE_PAYLOAD, v, kolo_ll_line_bytes(x.nbytes, i));
      if (x.sl) st_line(x.sl + i * KOLO_LL_LINE_BYTES, kolo_ll_lo(v, x.sflag), kolo_ll_hi(v, x.sflag));
    }
  }
  return false;
}

/* ll_lines with the slice's reduction (pre: it scales, see step_div).
 * Returns true to stop. */
template <typename T>
__device__ __forceinline__ bool ll_op_lines(const LLSlice &x, int sop, bool pre, const kolo_dev_batch &b,
                                            const kolo_dev_task &t, int *s_stop) {
  if (pre) {
    const uint64_t sc = premul_scalar<T>(t);
    if (kolo_step_reduces(sop)) return ll_lines<T, kOpPreSum>(x, b, t, s_stop, sc);
    return ll_lines<T, kOpPreCopy>(x, b, t, s_stop, sc);
  }
  if (!kolo_step_reduces(sop)) return ll_lines<T, kOpCopy>(x, b, t, s_stop, 0);
  switch (t.op) {
  case koloProd: return ll_lines<T, kOpProd>(x, b, t, s_stop, 0);
  case koloMax: return ll_lines<T, kOpMax>(x, b, t, s_stop, 0);
  case koloMin: return ll_lines<T, kOpMin>(x, b, t, s_stop, 0);
  default: return ll_lines<T, kOpSum>(x, b, t, s_stop, 0); /* sum, avg, a premul-sum's other steps */
  }
}

/* The sender's cleaning (ll_format.h): the lines of the send slot past this
 * slice get the slice's flag, so that none keeps a flag 2^32 steps old that
 * a later, longer slice would take for its own.  The slot is this sender's
 * until the receiver returns the credit. */
__device__ __forceinline__ void ll_clean(const LLSlice &x, uint32_t ll_slot_bytes) {
  const size_t nlines = ll_slot_bytes / KOLO_LL_LINE_BYTES;
  for (size_t i = kolo_ll_lines(x.nbytes) + threadIdx.x; i < nlines; i += blockDim.x)
    st_line(x.sl + i * KOLO_LL_LINE_BYTES, kolo_ll_lo(0, x.sflag), kolo_ll_hi(0, x.sflag));
}

/* One LL slice of step op `sop` over ends S and R (div: step_div's, the
 * post-op divisor as SIMPLE applies it; swap: src OP recv).  Returns true
 * to stop. */
template <typename T>
__device__ __forceinline__ bool ll_slice(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn *S,
                                         const kolo_dev_conn *R, int sop, bool swap, char *s_, char *d_, size_t cnt,
                                         int div, uint32_t rstep, uint32_t sstep, int *s_stop) {
  const bool pre = div == 0;
  const unsigned roles = kolo_step_roles(sop);
  const kolo_step_operands o = kolo_step_operands_of(sop, 0, nullptr, nullptr, s_, d_);
  LLSlice x;
  x.R = R;
  x.rl = (roles & KOLO_ROLE_RECV) ? R->ll_slots + (size_t)(rstep % R->nslots) * R->ll_slot_bytes : nullptr;
  x.sl = (roles & KOLO_ROLE_SEND) ? S->ll_slots + (size_t)(sstep % S->nslots) * S->ll_slot_bytes : nullptr;
  x.s = (roles & KOLO_ROLE_SRC) ? s_ : nullptr;
  /* the slots are lines here, not operands: o0 is dst where the op writes
   * it (not a copy-and-send whose dst holds its src already) */
  x.d = o.o0 == d_ ? d_ : nullptr;
  x.nbytes = cnt * t.geo.elem_size;
  x.rflag = kolo_ll_flag(rstep);
  x.sflag = kolo_ll_flag(sstep);
  x.div = o.post && !pre ? div : 1;
  x.swap = swap;
  if (ll_op_lines<T>(x, sop, pre, b, t, s_stop)) return true;
  if (x.sl != nullptr && kolo_ll_clean_step(sstep)) ll_clean(x, S->ll_slot_bytes);
  return false;
}

}  // namespace

#endif
