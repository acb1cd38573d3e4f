/* exec_kernel.cu - the CUDA executor: one thread block runs one task's step
 * program, the same programs the host executor runs (kernels/host_exec.c),
 * slice by slice through its connectors (see kernels/cuda_exec.h).
 *
 * Per slice: thread 0 waits until the receive slot is full and the send
 * slot is free (acquire loads, polling the abort word and the deadline),
 * the block moves the data with kolo_cuda::reduce_block, then thread 0
 * publishes: fence (system scope) and a release store of the new count. */
#ifndef KOLO_HAVE_CUDA
#define KOLO_HAVE_CUDA 1
#endif

#include <cuda_runtime.h>

#include "kernels/cuda/reduce_prims.cuh"
#include "kernels/cuda_exec.h"
#include "kolo.h"
#include "ring/geometry.h"

namespace {

using namespace kolo_cuda;

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* op -> reduce_block<T, OP> (the kernel is instantiated per dtype, which
 * keeps each instantiation's registers low); b == nullptr is a copy. */
template <typename T>
__device__ __forceinline__ void reduce_t(int op, void *o0, void *o1, const void *a, const void *b, size_t n, int div) {
  if (b == nullptr) return reduce_block<T, kOpCopy>(o0, o1, a, b, n, div);
  switch (op) {
  case koloProd: return reduce_block<T, kOpProd>(o0, o1, a, b, n, div);
  case koloMax: return reduce_block<T, kOpMax>(o0, o1, a, b, n, div);
  case koloMin: return reduce_block<T, kOpMin>(o0, o1, a, b, n, div);
  default: return reduce_block<T, kOpSum>(o0, o1, a, b, n, div); /* sum, avg */
  }
}

/* Thread 0: waits until the step's connectors are ready; false to stop. */
__device__ bool wait_ready(const kolo_dev_batch &b, const kolo_dev_task &t, int op, uint32_t rstep,
                           uint32_t sstep, uint64_t deadline) {
  bool need_recv = kolo_step_recvs(op), need_send = kolo_step_sends(op);
  for (unsigned spins = 0;; spins++) {
    bool rok = !need_recv || (int32_t)(ld_acquire_sys(t.recv.tail) - rstep) > 0;
    bool sok = !need_send || (uint32_t)(sstep - ld_acquire_sys(t.send.head)) < t.send.nslots;
    if (rok && sok) return true;
    if ((spins & 255) == 255) {
      const kolo_dev_conn &c = rok ? t.send : t.recv;
      uint32_t why = *b.abort ? KOLO_DEV_ABORTED
                     : *(volatile uint32_t *)c.stop ? KOLO_DEV_PEER_STOPPED
                     : (deadline && global_ns() > deadline) ? KOLO_DEV_TIMEOUT
                                                            : KOLO_DEV_OK;
      if (why != KOLO_DEV_OK) {
        if (atomicCAS(&b.status[0], 0u, why) == 0u) {
          b.status[1] = blockIdx.x;
          b.status[2] = (uint32_t)c.peer;
        }
        return false;
      }
      __nanosleep(64);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(KOLO_DEV_THREADS, 1) kolo_exec_kernel(const __grid_constant__ kolo_dev_batch b) {
  const kolo_dev_task &t = b.tasks[blockIdx.x];
  __shared__ int go;
  uint32_t rstep = t.has_recv ? *t.recv.step : 0, sstep = t.has_send ? *t.send.step : 0;
  uint64_t deadline = b.timeout_ns ? global_ns() + b.timeout_ns : 0;
  size_t esz = t.geo.elem_size;
  size_t slot_elems = (t.has_send ? t.send.slot_bytes : t.has_recv ? t.recv.slot_bytes : 0) / esz;
  bool ok = true;
  for (size_t base = 0, rce; ok && (rce = kolo_geo_round_chunk(&t.geo, base)) != 0;
       base += rce * kolo_geo_parts(&t.geo)) {
    for (int s = 0; ok && s < t.nsteps; s++) {
      const kolo_step st = t.steps[s];
      size_t soff, doff, ns, nd;
      kolo_geo_chunk_range(&t.geo, base, rce, t.channel, st.src_chunk,
                           st.src_buf == KOLO_BUF_IN ? t.in_blocked : t.out_blocked, &soff, &ns);
      kolo_geo_chunk_range(&t.geo, base, rce, t.channel, st.dst_chunk,
                           st.dst_buf == KOLO_BUF_IN ? t.in_blocked : t.out_blocked, &doff, &nd);
      size_t n = ns < nd ? ns : nd;
      bool moves = kolo_step_sends(st.op) || kolo_step_recvs(st.op);
      size_t per = moves ? slot_elems : n;
      char *src = (st.src_buf == KOLO_BUF_IN ? t.in : t.out) + soff * esz;
      char *dst = (st.dst_buf == KOLO_BUF_IN ? t.in : t.out) + doff * esz;
      int div = (st.flags & KOLO_STEP_FINAL) ? t.div : 1;
      for (size_t off = 0; ok && off < n; off += per) {
        size_t cnt = n - off < per ? n - off : per;
        if (threadIdx.x == 0) go = moves ? wait_ready(b, t, st.op, rstep, sstep, deadline) : 1;
        __syncthreads();
        if (!go) {
          ok = false;
          break;
        }
        char *rs = kolo_step_recvs(st.op) ? t.recv.slots + (size_t)(rstep % t.recv.nslots) * t.recv.slot_bytes : nullptr;
        char *ss = kolo_step_sends(st.op) ? t.send.slots + (size_t)(sstep % t.send.nslots) * t.send.slot_bytes : nullptr;
        char *s_ = src + off * esz, *d_ = dst + off * esz;
        switch (st.op) {
        case KOLO_STEP_SEND: reduce_t<T>(t.op, ss, nullptr, s_, nullptr, cnt, 1); break;
        case KOLO_STEP_RECV: reduce_t<T>(t.op, d_, nullptr, rs, nullptr, cnt, 1); break;
        case KOLO_STEP_COPY:
          if (d_ != s_ || div > 1) reduce_t<T>(t.op, d_, nullptr, s_, nullptr, cnt, div);
          break;
        case KOLO_STEP_COPY_SEND: reduce_t<T>(t.op, ss, d_ == s_ ? nullptr : d_, s_, nullptr, cnt, 1); break;
        case KOLO_STEP_RECV_COPY_SEND: reduce_t<T>(t.op, d_, ss, rs, nullptr, cnt, 1); break;
        case KOLO_STEP_RECV_REDUCE_SEND: reduce_t<T>(t.op, ss, nullptr, rs, s_, cnt, 1); break;
        case KOLO_STEP_RECV_REDUCE_COPY: reduce_t<T>(t.op, d_, nullptr, rs, s_, cnt, div); break;
        case KOLO_STEP_RECV_REDUCE_COPY_SEND: reduce_t<T>(t.op, d_, ss, rs, s_, cnt, div); break;
        default: break;
        }
        __syncthreads(); /* the whole slice is written before it is published */
        if (ss) sstep++;
        if (rs) rstep++;
        if (threadIdx.x == 0) {
          __threadfence_system();
          if (ss) st_release_sys(t.send.tail, sstep);
          if (rs) st_release_sys(t.recv.head, rstep);
        }
      }
    }
  }
  if (threadIdx.x == 0) {
    if (t.has_send) *t.send.step = sstep;
    if (t.has_recv) *t.recv.step = rstep;
  }
}

}  // namespace

extern "C" int kolo_cuda_exec_launch(const kolo_dev_batch *batch, void *stream) {
  if (batch->ntasks <= 0) return (int)cudaSuccess;
  if (batch->ntasks > KOLO_DEV_MAX_TASKS) return (int)cudaErrorInvalidValue;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  dim3 grid(batch->ntasks), block(KOLO_DEV_THREADS);
  switch (batch->tasks[0].type) {
#define KOLO_EXEC_CASE(dtype, T) \
  case dtype: kolo_exec_kernel<T><<<grid, block, 0, s>>>(*batch); break;
    KOLO_EXEC_CASE(koloInt8, int8_t) KOLO_EXEC_CASE(koloUint8, uint8_t)
    KOLO_EXEC_CASE(koloInt32, int32_t) KOLO_EXEC_CASE(koloUint32, uint32_t)
    KOLO_EXEC_CASE(koloInt64, int64_t) KOLO_EXEC_CASE(koloUint64, uint64_t)
    KOLO_EXEC_CASE(koloFloat16, __half) KOLO_EXEC_CASE(koloFloat32, float)
    KOLO_EXEC_CASE(koloFloat64, double) KOLO_EXEC_CASE(koloBfloat16, __nv_bfloat16)
#undef KOLO_EXEC_CASE
  default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}
