/* exec_slice.cuh - what the CUDA executor (exec_kernel.cu) does around
 * each slice: the ends it slices through and how many elements a slice
 * holds; thread 0's work before a slice (the call's signature on each
 * end's first slice, then the counters) and after a SIMPLE one (the new
 * tail and head).
 *
 * A single-peer task's two ends are in the kernel's parameters; a multi-peer
 * task's are in its table in device memory, and a step uses the ends of its
 * peers (step.to, step.from).  The block keeps one current send end and one
 * current receive end with their step counts in registers; when a step moves
 * to another peer's end, thread 0 stores the count of the end it leaves in
 * that end's step word (the block holds every end of its task for the whole
 * kernel) and, after a barrier, every thread loads the new end's count. */
#ifndef KOLO_KERNELS_CUDA_EXEC_SLICE_CUH_
#define KOLO_KERNELS_CUDA_EXEC_SLICE_CUH_

#include "kernels/cuda/exec_ends.cuh"
#include "kernels/cuda/exec_sig.cuh"

namespace {

/* Thread 0, after a SIMPLE slice (rstep / sstep already counted it): for a
 * proxy, the bytes the slice filled; then the new tail of S and head of R. */
__device__ __forceinline__ void simple_publish(const kolo_dev_conn *S, const kolo_dev_conn *R, bool rv, bool sd,
                                               uint32_t rstep, uint32_t sstep, uint32_t bytes) {
  if (sd && (S->flags & KOLO_DEV_CONN_FILLED))
    st_relaxed(reinterpret_cast<uint32_t *>(reinterpret_cast<char *>(S->tail) + KOLO_DEV_FILLED_FROM_TAIL) +
                   (sstep - 1) % KOLO_DEV_FILLED_WORDS,
               bytes);
  kolo_dev::fence();
  if (sd) st_release(S->tail, sstep);
  if (rv) st_release(R->head, rstep);
}

/* The ends a block works with and their counts (see this file's head). */
struct Ends {
  const kolo_dev_conn *S, *R; /* current send / receive end, nullptr: none yet */
  uint32_t sstep, rstep;
  int to, from;               /* multi-peer tasks: the peer index of S / R */
};

/* Multi-peer tasks: makes the ends of step st current (every thread alike:
 * the step is the same for all). */
__device__ __forceinline__ void take_ends(const kolo_dev_task &t, const kolo_step &st, bool sd, bool rv, Ends &e) {
  const bool ns = sd && st.to != e.to, nr = rv && st.from != e.from;
  if (!ns && !nr) return;
  if (threadIdx.x == 0) {
    if (ns && e.S != nullptr) *e.S->step = e.sstep;
    if (nr && e.R != nullptr) *e.R->step = e.rstep;
  }
  kolo_dev::block_sync(); /* the stores before anyone loads (an end may come back) */
  if (ns) {
    e.S = t.ends[2 * st.to];
    e.to = st.to;
    e.sstep = *e.S->step;
  }
  if (nr) {
    e.R = t.ends[2 * st.from + 1];
    e.from = st.from;
    e.rstep = *e.R->step;
  }
}

/* Elements of one slice: a slot of the task's ends (a single-peer task's
 * send end when it has one; a multi-peer task's first end: every end of a
 * communicator slices alike); 0 when it has none. */
template <bool kLL>
__device__ __forceinline__ size_t slice_elems(const kolo_dev_task &t, size_t esz) {
  const kolo_dev_conn *c = t.npeers > 0 ? (t.ends[0] != nullptr ? t.ends[0] : t.ends[1])
                           : t.has_send  ? &t.send
                           : t.has_recv  ? &t.recv
                                         : nullptr;
  if (c == nullptr) return 0;
  return kLL ? kolo_ll_slice_elems(c->ll_slot_bytes, esz) : c->slot_bytes / esz;
}

/* Thread 0: whether the call's signature has yet to go through end c, and
 * marking that it has (the owner word the block holds, cuda_exec.h): the
 * first slice of a call through each of its ends, whichever peer that end
 * leads to (single- and multi-peer tasks alike). */
__device__ __forceinline__ bool unsigned_end(const kolo_dev_conn *c) {
  return (c->step[KOLO_DEV_STEP_OWNER] & KOLO_DEV_OWNER_SIGNED) == 0;
}
__device__ __forceinline__ void mark_signed(const kolo_dev_conn *c) {
  c->step[KOLO_DEV_STEP_OWNER] |= KOLO_DEV_OWNER_SIGNED;
}

/* Thread 0, before a slice: on the first slice of the call through each
 * end, the signature (checked before waiting on the receive end, stamped
 * once the send slot is free), then the counters (LL: the send credit
 * only).  False to stop. */
template <bool kLL>
__device__ __forceinline__ bool slice_ready(const kolo_dev_batch &b, const kolo_dev_task &t, const Ends &e, bool rv,
                                            bool sd, int *s_stop) {
  if (rv && unsigned_end(e.R)) {
    mark_signed(e.R);
    if (!check_sig(b, t, e.R, e.rstep, s_stop)) return false;
  }
  if ((kLL ? sd : (rv || sd)) && !wait_ready(b, t, e.S, e.R, !kLL && rv, sd, e.rstep, e.sstep, s_stop)) return false;
  if (sd && unsigned_end(e.S)) {
    mark_signed(e.S);
    if (!stamp_sig(b, t, e.S, e.sstep, s_stop)) return false;
  }
  return true;
}

}  // namespace

#endif
