/* exec_ends.cuh - a block's hold on its task's connector ends in the CUDA
 * executor (exec_kernel.cu): claiming them for the kernel, giving them back
 * with their counts, and thread 0's wait on their counters before a
 * slice. */
#ifndef KOLO_KERNELS_CUDA_EXEC_ENDS_CUH_
#define KOLO_KERNELS_CUDA_EXEC_ENDS_CUH_

#include "kernels/cuda/exec_stop.cuh"

namespace {

/* Thread 0, at the start, on the model: what the block reads and writes of
 * its arguments with plain loads and stores, where no primitive checks it,
 * is device-reachable memory too (a GPU faults on pageable host memory):
 * the step program, a multi-peer task's table of ends and the ends it
 * points to, every end's step and owner words (the count is loaded and
 * stored plainly), and a premul-sum's scalar read at its address.  A GPU
 * checks by faulting: nothing to do there. */
__device__ __forceinline__ void check_reach(const kolo_dev_task &t) {
#if KOLO_DEV_HOST_BUILD
  kolo_dev::reachable(t.steps, (size_t)t.nsteps * sizeof(kolo_step), "the task's step program");
  kolo_dev::aligned(t.steps, alignof(kolo_step), "the task's step program");
  if (t.npeers > 0) kolo_dev::reachable(t.ends, 2 * (size_t)t.npeers * sizeof *t.ends, "the task's table of ends");
  for (int i = 0; i < nends(t); i++) {
    const kolo_dev_conn *c = end_at(t, i);
    if (c == nullptr) continue;
    if (t.npeers > 0) kolo_dev::reachable(c, sizeof *c, "a connector end in the task's table");
    kolo_dev::reachable(c->step, KOLO_DEV_END_WORDS * sizeof *c->step, "a connector end's step and owner words");
    kolo_dev::aligned(c->step, sizeof *c->step, "a connector end's step word");
  }
  if (t.op == KOLO_DEV_OP_PREMUL_PTR)
    kolo_dev::reachable(reinterpret_cast<const void *>(static_cast<uintptr_t>(t.scalar)), t.geo.elem_size,
                        "the premul-sum's scalar");
#else
  (void)t;
#endif
}

/* Thread 0, at the start: claims the task's ends (each end's owner word,
 * next to its step count).  The kernels of one communicator on one end
 * follow each other (stream order, the comm's order event), so an end that
 * is held means two kernels on it at once -- a CUDA graph of the comm's
 * calls replayed on one stream while calls of it run on another, unordered
 * -- which would start from one step count and mix their slices.  Then the
 * block gives back what it claimed, records KOLO_DEV_CONCURRENT, stops the
 * peers and returns false: it leaves without touching the counts. */
__device__ KOLO_OUT_OF_LINE bool claim_ends(const kolo_dev_batch &b, const kolo_dev_task &t) {
  int i = 0;
  for (; i < nends(t); i++) {
    const kolo_dev_conn *c = end_at(t, i);
    if (c != nullptr && kolo_dev::cas(c->step + KOLO_DEV_STEP_OWNER, 0u, 1u) != 0u) break;
  }
  if (i == nends(t)) return true;
  const int32_t held_by = end_at(t, i)->peer;
  while (i-- > 0) {
    const kolo_dev_conn *c = end_at(t, i);
    if (c != nullptr) st_release(c->step + KOLO_DEV_STEP_OWNER, 0u);
  }
  record_stop(b, KOLO_DEV_CONCURRENT, held_by, KOLO_DEV_STOP_WORD(1 /* KOLO_STOP_ERROR */, b.rank));
  stop_ends(t, KOLO_DEV_STOP_WORD(1 /* KOLO_STOP_ERROR */, b.rank), nullptr);
  return false;
}

/* Thread 0, at the end: the counts of the current ends (a multi-peer task
 * stored the others' when it left them), then every end for the next
 * kernel. */
__device__ KOLO_OUT_OF_LINE void release_ends(const kolo_dev_task &t, const kolo_dev_conn *S, const kolo_dev_conn *R,
                                              uint32_t sstep, uint32_t rstep) {
  if (S != nullptr) *S->step = sstep;
  if (R != nullptr) *R->step = rstep;
  for (int i = 0; i < nends(t); i++) {
    const kolo_dev_conn *c = end_at(t, i);
    if (c != nullptr) st_release(c->step + KOLO_DEV_STEP_OWNER, 0u);
  }
}

/* Thread 0: waits until the receive slot of R is full (need_recv: tail >
 * rstep) and the send slot of S is free (need_send: sstep - head < nslots);
 * false to stop.  Counters only grow, so a condition once met stays met:
 * the polls are relaxed (an acquire load on every poll would invalidate the
 * SM's L1 each time), and one acquire load of each counter once both are
 * met orders the slot accesses after the peer's. */
__device__ bool wait_ready(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn *S,
                           const kolo_dev_conn *R, bool need_recv, bool need_send, uint32_t rstep, uint32_t sstep,
                           int *s_stop) {
  bool rok = !need_recv, sok = !need_send;
  wait_state w;
  for (unsigned spins = 1;; spins++) {
    if (!rok) rok = (int32_t)(ld_relaxed(R->tail) - rstep) > 0;
    if (!sok) sok = (uint32_t)(sstep - ld_relaxed(S->head)) < S->nslots;
    if (rok && sok) break;
    if (spins % kPollSpins == 0) {
      if (must_leave(b, t, rok ? *S : *R, w, s_stop, rok ? KOLO_DEV_STALL_SEND : KOLO_DEV_STALL_RECV))
        return false;
      kolo_dev::pause();
    } else {
      kolo_dev::poll();
    }
  }
  if (need_recv) (void)ld_acquire(R->tail);
  if (need_send) (void)ld_acquire(S->head);
  return true;
}

}  // namespace

#endif
