/* exec_kernel.cu - the CUDA executor: one thread block runs one task's step
 * program, the same programs the host executor runs (kernels/host_exec.c),
 * slice by slice through its connectors (see kernels/cuda_exec.h).
 *
 * One kernel per (dtype, protocol): kolo_exec_kernel<T, KOLO_PROTO_*>.
 * The op is a run-time choice per task; a premul-sum (KOLO_DEV_OP_PREMUL*)
 * is a sum whose steps that read this rank's input scale it first (see
 * step_div), the host executor's rule (kernels/host_exec.c).
 *
 * Slicing is the host executor's: a step's chunk of n elements is cut into
 * slices of slot_elems elements (SIMPLE: slot_bytes / elem_size; LL:
 * (ll_slot_bytes / 2) / elem_size), slot_elems taken from the send
 * connector when the task has one, else from the receive connector; a step
 * that moves nothing (COPY) is one slice of n.  Every slice of a step that
 * sends advances the send connector's step, every slice that receives the
 * receive connector's, on both protocols.
 *
 * The kernel's parts, one concept each, are headers of this one translation
 * unit (so that the device code is compiled as one, whatever the split):
 * exec_common.cuh (what they share), exec_stop.cuh (stopping),
 * exec_sig.cuh (call signatures, the stall slot), exec_ends.cuh (a
 * block's hold on its connector ends, the wait on their counters),
 * exec_step.cuh (a step's operands), exec_simple.cuh and exec_ll.cuh (the
 * two protocols), exec_slice.cuh (what is done around each slice), and
 * exec_launch.cuh (the launch). */
/* The parts in the order of the one file they were, so that the compiler
 * sees the same code in the same order (not sorted). */
/* clang-format off */
#include "kernels/cuda/exec_common.cuh"
#include "kernels/cuda/exec_stop.cuh"
#include "kernels/cuda/exec_sig.cuh"
#include "kernels/cuda/exec_ends.cuh"
#include "kernels/cuda/exec_step.cuh"
#include "kernels/cuda/exec_simple.cuh"
#include "kernels/cuda/exec_ll.cuh"
#include "kernels/cuda/exec_slice.cuh"
/* clang-format on */

namespace {

template <typename T, int PROTO>
__global__ void __launch_bounds__(KOLO_DEV_THREADS, 1) kolo_exec_kernel(const __grid_constant__ kolo_dev_batch b) {
  constexpr bool kLL = PROTO == KOLO_PROTO_LL;
  const kolo_dev_task &t = b.tasks[blockIdx.x];
  KOLO_BLOCK_SHARED int s_stop; /* sticky hint: some thread of the block stopped */
  int clash = 0;
  if (threadIdx.x == 0) {
    check_reach(t);
    kolo_dev::hint_set(&s_stop, 0);
    clash = !claim_ends(b, t);
  }
  if (kolo_dev::block_sync_or(clash)) return; /* another kernel holds an end: reported */
  Ends e = {t.has_send ? &t.send : nullptr, t.has_recv ? &t.recv : nullptr, 0, 0, -1, -1};
  if (e.S != nullptr) e.sstep = *e.S->step;
  if (e.R != nullptr) e.rstep = *e.R->step;
  const size_t esz = t.geo.elem_size;
  const size_t slot_elems = slice_elems<kLL>(t, esz);
  bool ok = true;
  for (size_t base = 0, rce; ok && (rce = kolo_geo_round_chunk(&t.geo, base)) != 0;
       base += rce * kolo_geo_parts(&t.geo)) {
    for (int s = 0; ok && s < t.nsteps; s++) {
      const kolo_step st = t.steps[s];
      const int sop = st.op;
      const bool rv = kolo_step_recvs(sop), sd = kolo_step_sends(sop);
      if (kolo_step_roles(sop) == 0) continue; /* not a step op */
      size_t soff, doff, ns, nd;
      kolo_geo_buf_range(&t.geo, base, rce, t.channel, st.src_buf, st.src_chunk, t.in_blocked, t.out_blocked, &soff,
                         &ns);
      kolo_geo_buf_range(&t.geo, base, rce, t.channel, st.dst_buf, st.dst_chunk, t.in_blocked, t.out_blocked, &doff,
                         &nd);
      const size_t n = ns < nd ? ns : nd;
      char *src = task_buf(b, t, st.src_buf) + soff * esz;
      char *dst = task_buf(b, t, st.dst_buf) + doff * esz;
      const int div = step_div(t, st);
      const bool swap = (st.flags & KOLO_STEP_SRC_FIRST) && div != 0; /* not where a premul-sum scales */
      /* a local copy onto itself: nothing to do */
      if (!rv && !sd && dst == src && div == 1 && !kolo_step_reduces(sop)) continue;
      if (t.npeers > 0 && n > 0) take_ends(t, st, sd, rv, e);
      const size_t per = (rv || sd) ? slot_elems : n;
      for (size_t off = 0; off < n; off += per) {
        const size_t cnt = n - off < per ? n - off : per;
        char *s_ = src + off * esz, *d_ = dst + off * esz;
        /* thread 0: the call's signature, the counters */
        int stop = 0;
        if (threadIdx.x == 0) stop = !slice_ready<kLL>(b, t, e, rv, sd, &s_stop);
        if (kolo_dev::block_sync_or(stop)) {
          ok = false;
          break;
        }
        if (kLL && !kolo_step_accumulates(sop)) { /* a local reduce has no lines: SIMPLE's code does it */
          stop = ll_slice<T>(b, t, e.S, e.R, sop, swap, s_, d_, cnt, div, e.rstep, e.sstep, &s_stop);
          /* every line of the slice is consumed before the credit returns */
          if (kolo_dev::block_sync_or(stop)) {
            ok = false;
            break;
          }
          if (rv) e.rstep++;
          if (sd) e.sstep++;
          if (rv && threadIdx.x == 0) st_release(e.R->head, e.rstep);
        } else {
          char *rs = rv ? e.R->slots + (size_t)(e.rstep % e.R->nslots) * e.R->slot_bytes : nullptr;
          char *ss = sd ? e.S->slots + (size_t)(e.sstep % e.S->nslots) * e.S->slot_bytes : nullptr;
          simple_slice<T>(t, sop, swap, rs, ss, s_, d_, cnt, div);
          kolo_dev::block_sync(); /* the whole slice is written (and read) before it is published */
          if (rv) e.rstep++;
          if (sd) e.sstep++;
          if (threadIdx.x == 0) simple_publish(e.S, e.R, rv, sd, e.rstep, e.sstep, static_cast<uint32_t>(cnt * esz));
        }
      }
    }
  }
  /* Every thread read the ends' steps at the start: a block that moved
   * nothing has met no barrier since. */
  kolo_dev::block_sync();
  if (threadIdx.x == 0) release_ends(t, e.S, e.R, e.sstep, e.rstep);
}

}  // namespace

#include "kernels/cuda/exec_launch.cuh"
