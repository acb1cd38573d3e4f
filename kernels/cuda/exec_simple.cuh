/* exec_simple.cuh - the CUDA executor's SIMPLE protocol (exec_kernel.cu).
 *
 * Per slice: thread 0 waits until the receive slot is full (tail,
 * ld.acquire.sys) and the send slot is free (head), the block moves the data
 * with kolo_cuda::reduce_block, __syncthreads, then thread 0 publishes:
 * __threadfence_system() and st.release.sys of the new tail / head.  The
 * block barrier carries the acquire of thread 0 to the other threads' slot
 * reads, and the other threads' slot writes to thread 0's release. */
#ifndef KOLO_KERNELS_CUDA_EXEC_SIMPLE_CUH_
#define KOLO_KERNELS_CUDA_EXEC_SIMPLE_CUH_

#include "kernels/cuda/exec_step.cuh"

namespace {

/* op -> reduce_block<T, OP> (the kernel is instantiated per dtype, which
 * keeps each instantiation's registers low); b == nullptr is a copy, or,
 * for a premul-sum, the scaling of a alone. */
template <typename T>
__device__ __forceinline__ void reduce_t(const kolo_dev_task &t, int op, void *o0, void *o1, const void *a,
                                         const void *b, size_t n, int div) {
  if (op == KOLO_DEV_OP_PREMUL) {
    const uint64_t s = premul_scalar<T>(t);
    if (b == nullptr) return reduce_block<T, kOpPreCopy>(o0, o1, a, b, n, 1, s);
    return reduce_block<T, kOpPreSum>(o0, o1, a, b, n, 1, s);
  }
  if (b == nullptr) return reduce_block<T, kOpCopy>(o0, o1, a, b, n, div);
  switch (op) {
  case koloProd: return reduce_block<T, kOpProd>(o0, o1, a, b, n, div);
  case koloMax: return reduce_block<T, kOpMax>(o0, o1, a, b, n, div);
  case koloMin: return reduce_block<T, kOpMin>(o0, o1, a, b, n, div);
  default: return reduce_block<T, kOpSum>(o0, o1, a, b, n, div); /* sum, avg */
  }
}

/* One SIMPLE slice: rs / ss are the receive / send slots (or nullptr);
 * div: step_div's; swap: the step reduces src OP recv.  The operands come
 * from the op's roles (ring/program.h). */
template <typename T>
__device__ __forceinline__ void simple_slice(const kolo_dev_task &t, int sop, bool swap, char *rs, char *ss,
                                             char *s_, char *d_, size_t cnt, int div) {
  const kolo_step_operands x = kolo_step_operands_of(sop, swap, rs, ss, s_, d_);
  if (x.o0 != nullptr) reduce_t<T>(t, step_rop(t, div), x.o0, x.o1, x.a, x.b, cnt, x.post ? div : 1);
}

}  // namespace

#endif
