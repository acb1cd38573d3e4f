/* exec_step.cuh - a step's operands in the CUDA executor (exec_kernel.cu),
 * for both protocols: where its buffers start, its divisor (the post-op's,
 * or a premul-sum's scaling) and the reduction it runs. */
#ifndef KOLO_KERNELS_CUDA_EXEC_STEP_CUH_
#define KOLO_KERNELS_CUDA_EXEC_STEP_CUH_

#include "kernels/cuda/exec_common.cuh"

namespace {

/* The premul-sum's scalar bits: as bound to the call, or (_PTR) read now,
 * when the kernel runs, at its device address. */
template <typename T>
__device__ __forceinline__ uint64_t premul_scalar(const kolo_dev_task &t) {
  if (t.op != KOLO_DEV_OP_PREMUL_PTR) return t.scalar;
  uint64_t bits = 0;
  memcpy(&bits, reinterpret_cast<const void *>(static_cast<uintptr_t>(t.scalar)), sizeof(T));
  return bits;
}

/* Where buffer `buf` (kolo_buf_id) of the task of this block starts. */
__device__ __forceinline__ char *task_buf(const kolo_dev_batch &b, const kolo_dev_task &t, int buf) {
  if (buf == KOLO_BUF_IN) return t.in;
  if (buf == KOLO_BUF_OUT) return t.out;
  return b.scratch + (size_t)blockIdx.x * b.scratch_task_bytes;
}

/* A step's divisor: its post-op's (1: none), or 0 where a premul-sum's
 * step reads this rank's input (src in IN: where the schedules of ring/ read
 * each input element, once), which it scales.  (One variable for both: a
 * flag of its own, live through the slice loop, cost the kernels two
 * registers.) */
__device__ __forceinline__ int step_div(const kolo_dev_task &t, const kolo_step &st) {
  if (t.op >= KOLO_DEV_OP_PREMUL && kolo_step_reads_src(st.op) && st.src_buf == KOLO_BUF_IN) return 0;
  return (st.flags & KOLO_STEP_FINAL) ? t.div : 1;
}

/* The op a step runs: KOLO_DEV_OP_PREMUL where it scales (div 0), a sum at
 * a premul-sum's other steps, else the task's op. */
__device__ __forceinline__ int step_rop(const kolo_dev_task &t, int div) {
  if (div == 0) return KOLO_DEV_OP_PREMUL;
  return t.op >= KOLO_DEV_OP_PREMUL ? (int)koloSum : t.op;
}

}  // namespace

#endif
