/* exec_launch.cuh - launching the CUDA executor: the checks a batch must
 * pass, one kolo_exec_kernel<T, protocol> per dtype, and the occupancy the
 * planner caps its channels by (kernels/cuda_exec.h's entry points).
 *
 * Included by exec_kernel.cu after the kernel it launches: the kernel's
 * instantiations are made where it is defined. */
#ifndef KOLO_KERNELS_CUDA_EXEC_LAUNCH_CUH_
#define KOLO_KERNELS_CUDA_EXEC_LAUNCH_CUH_

namespace {

/* A connector end the kernel can slice with: nslots > 0, a slice of at least
 * one element, and for LL a 16-byte aligned region of whole lines. */
bool conn_ok(const kolo_dev_conn &c, int protocol, size_t esz) {
  if (c.nslots == 0 || c.head == nullptr || c.step == nullptr) return false;
  if (protocol == KOLO_PROTO_LL)
    return c.ll_slots != nullptr && ((uintptr_t)c.ll_slots & 15) == 0 &&
           c.ll_slot_bytes % KOLO_LL_LINE_BYTES == 0 && kolo_ll_slice_elems(c.ll_slot_bytes, esz) > 0;
  return c.slots != nullptr && c.tail != nullptr && c.slot_bytes / esz > 0;
}

/* Checks what the kernel relies on: one dtype of the right size for every
 * task, usable connectors, both connectors of a task slicing alike (the
 * slice size comes from one of them), and no connector end used by two
 * tasks: blocks run concurrently, so two tasks on one end would both start
 * from the same step (the host executor orders them with dep[]; a batch
 * must put them in separate launches). */
/* The batch is the kernel's parameter: CUDA's classic limit is 4 KiB. */
static_assert(sizeof(kolo_dev_batch) <= 4096, "kolo_dev_batch outgrew 4 KiB of kernel parameters");

bool batch_ok(const kolo_dev_batch &b, size_t esz) {
  if (b.protocol != KOLO_PROTO_SIMPLE && b.protocol != KOLO_PROTO_LL) return false;
  for (int i = 0; i < b.ntasks; i++) {
    const kolo_dev_task &t = b.tasks[i];
    if (t.type != b.tasks[0].type || t.geo.elem_size != esz || t.nsteps < 0 ||
        (t.nsteps > 0 && t.steps == nullptr))
      return false;
    /* a multi-peer task: its own ends are in device memory (the planner's) */
    if (t.npeers < 0 || (t.npeers > 0 && (t.ends == nullptr || t.has_send || t.has_recv))) return false;
    if (t.has_send && !conn_ok(t.send, b.protocol, esz)) return false;
    if (t.has_recv && !conn_ok(t.recv, b.protocol, esz)) return false;
    if (t.has_send && t.has_recv &&
        (b.protocol == KOLO_PROTO_LL ? t.send.ll_slot_bytes != t.recv.ll_slot_bytes
                                     : t.send.slot_bytes != t.recv.slot_bytes))
      return false;
    for (int j = 0; j < i; j++) {
      const kolo_dev_task &u = b.tasks[j];
      const uint32_t *ends_t[2] = {t.has_send ? t.send.step : nullptr, t.has_recv ? t.recv.step : nullptr};
      const uint32_t *ends_u[2] = {u.has_send ? u.send.step : nullptr, u.has_recv ? u.recv.step : nullptr};
      for (const uint32_t *x : ends_t)
        for (const uint32_t *y : ends_u)
          if (x != nullptr && x == y) return false;
    }
  }
  return true;
}

template <typename T>
cudaError_t launch(const kolo_dev_batch &b, cudaStream_t s) {
  if (!batch_ok(b, sizeof(T))) return cudaErrorInvalidValue;
  dim3 grid(b.ntasks), block(KOLO_DEV_THREADS);
  if (b.protocol == KOLO_PROTO_LL) return kolo_dev::launch<kolo_exec_kernel<T, KOLO_PROTO_LL>>(grid, block, 0, s, b);
  return kolo_dev::launch<kolo_exec_kernel<T, KOLO_PROTO_SIMPLE>>(grid, block, 0, s, b);
}

/* Lowers *worst to the blocks of kolo_exec_kernel<T, *> that one SM holds. */
template <typename T>
cudaError_t fewest_blocks(int *worst) {
  int simple = 0, ll = 0;
  cudaError_t e = kolo_dev::occupancy<kolo_exec_kernel<T, KOLO_PROTO_SIMPLE>>(&simple, KOLO_DEV_THREADS, 0);
  if (e == cudaSuccess) e = kolo_dev::occupancy<kolo_exec_kernel<T, KOLO_PROTO_LL>>(&ll, KOLO_DEV_THREADS, 0);
  if (e != cudaSuccess) return e;
  if (simple < *worst) *worst = simple;
  if (ll < *worst) *worst = ll;
  return cudaSuccess;
}

}  // namespace

/* Any launch may be of any dtype and protocol: the worst of them all. */
extern "C" int kolo_cuda_exec_blocks_per_sm(int *blocks) {
  int worst = 1 << 30;
  cudaError_t e = cudaSuccess;
#define KOLO_EXEC_FEWEST(T) \
  if (e == cudaSuccess) e = fewest_blocks<T>(&worst);
  KOLO_EXEC_FEWEST(int8_t) KOLO_EXEC_FEWEST(uint8_t) KOLO_EXEC_FEWEST(int32_t) KOLO_EXEC_FEWEST(uint32_t)
  KOLO_EXEC_FEWEST(int64_t) KOLO_EXEC_FEWEST(uint64_t) KOLO_EXEC_FEWEST(__half) KOLO_EXEC_FEWEST(float)
  KOLO_EXEC_FEWEST(double) KOLO_EXEC_FEWEST(__nv_bfloat16) KOLO_EXEC_FEWEST(__nv_fp8_e4m3)
  KOLO_EXEC_FEWEST(__nv_fp8_e5m2)
#undef KOLO_EXEC_FEWEST
  *blocks = e == cudaSuccess ? worst : 0;
  return (int)e;
}

extern "C" int kolo_cuda_exec_launch(const kolo_dev_batch *batch, void *stream) {
  if (batch->ntasks <= 0) return (int)cudaSuccess;
  if (batch->ntasks > KOLO_DEV_MAX_TASKS) return (int)cudaErrorInvalidValue;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (batch->tasks[0].type) {
#define KOLO_EXEC_CASE(dtype, T) \
  case dtype: return (int)launch<T>(*batch, s);
    KOLO_EXEC_CASE(koloInt8, int8_t) KOLO_EXEC_CASE(koloUint8, uint8_t)
    KOLO_EXEC_CASE(koloInt32, int32_t) KOLO_EXEC_CASE(koloUint32, uint32_t)
    KOLO_EXEC_CASE(koloInt64, int64_t) KOLO_EXEC_CASE(koloUint64, uint64_t)
    KOLO_EXEC_CASE(koloFloat16, __half) KOLO_EXEC_CASE(koloFloat32, float)
    KOLO_EXEC_CASE(koloFloat64, double) KOLO_EXEC_CASE(koloBfloat16, __nv_bfloat16)
    KOLO_EXEC_CASE(koloFloat8e4m3, __nv_fp8_e4m3) KOLO_EXEC_CASE(koloFloat8e5m2, __nv_fp8_e5m2)
#undef KOLO_EXEC_CASE
  default: return (int)cudaErrorInvalidValue;
  }
}

#endif
