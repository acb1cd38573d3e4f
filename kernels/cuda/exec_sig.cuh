/* exec_sig.cuh - the CUDA executor's call signatures (exec_kernel.cu),
 * which find calls that do not match without a round trip, and the stall
 * slot that names the call a wait is stuck in.
 *
 * Call signatures (kernels/cuda_exec.h): thread 0 stamps its call's on the
 * first slice it sends through its send end, once the slot is free, and
 * checks the sender's on the first slice it receives, before waiting for
 * that slice (a count that differs may have put the two ranks on different
 * protocols), so the per-slice path is unchanged. */
#ifndef KOLO_KERNELS_CUDA_EXEC_SIG_CUH_
#define KOLO_KERNELS_CUDA_EXEC_SIG_CUH_

#include "kernels/cuda/exec_stop.cuh"

namespace {

/* The signature place of `step` on pipe c (kolo_dev_sig, see cuda_exec.h). */
__device__ __forceinline__ kolo_dev_sig *sig_at(const kolo_dev_conn *c, uint32_t step) {
  char *base = reinterpret_cast<char *>(c->tail) + KOLO_DEV_SIG_FROM_TAIL;
  return reinterpret_cast<kolo_dev_sig *>(base) + step % KOLO_DEV_FILLED_WORDS;
}

/* Task t's call, as its pipes carry it. */
__device__ __forceinline__ kolo_dev_sig my_sig(const kolo_dev_batch &b, const kolo_dev_task &t) {
  kolo_dev_sig s;
  s.count = t.geo.count;
  s.seq = t.seq_off == KOLO_DEV_SEQ_NONE ? 0u : b.seq_base + t.seq_off;
  s.root = b.root[blockIdx.x];
  s.coll = t.coll;
  s.type = (uint8_t)t.type;
  s.op = t.sig_op;
  s.set = 1;
  return s;
}

/* A send and a recv are the two halves of one call (call_sig.c's rule). */
__device__ __forceinline__ int coll_class(int coll) { return coll == KOLO_COLL_RECV ? KOLO_COLL_SEND : coll; }
__device__ __forceinline__ bool same_call(const kolo_dev_sig &a, const kolo_dev_sig &x) {
  return coll_class(a.coll) == coll_class(x.coll) && a.count == x.count && a.type == x.type && a.op == x.op &&
         a.root == x.root && a.seq == x.seq;
}

/* Thread 0, on the first slice of its call through send end S, once the
 * slot is free (so the receiver has read and cleared whatever the place
 * held 64 or more steps ago): the call's signature, `set` last.  First a
 * look at the stop word: a sender that never waits (its slices fit the
 * free slots) would not see that the receiver stopped, for instance on
 * finding that an earlier call of this pipe did not match; false then (the
 * block leaves, passing the word and its report on). */
__device__ KOLO_OUT_OF_LINE bool stamp_sig(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn *S,
                                           uint32_t sstep, int *s_stop) {
  const uint32_t word = S->stop != nullptr ? ld_relaxed(S->stop) : 0u;
  if (word != 0) {
    leave(b, t, KOLO_DEV_PEER_STOPPED, word, S->peer, report_slot(S));
    kolo_dev::hint_set(s_stop, 1);
    return false;
  }
  kolo_dev_sig *p = sig_at(S, sstep);
  const kolo_dev_sig s = my_sig(b, t);
  uint32_t *w = reinterpret_cast<uint32_t *>(p);
  st_relaxed(w, (uint32_t)s.count);
  st_relaxed(w + 1, (uint32_t)(s.count >> 32));
  st_relaxed(w + 2, s.seq);
  st_relaxed(w + 3, (uint32_t)s.root);
  kolo_dev::st_relaxed_u8(&p->coll, s.coll);
  kolo_dev::st_relaxed_u8(&p->type, s.type);
  kolo_dev::st_relaxed_u8(&p->op, s.op);
  kolo_dev::st_release_u8(&p->set, 1u);
  return true;
}

/* The signature at p, read once its `set` was seen (acquire). */
__device__ __forceinline__ kolo_dev_sig read_sig(kolo_dev_sig *p) {
  const uint32_t *w = reinterpret_cast<const uint32_t *>(p);
  kolo_dev_sig s;
  s.count = (uint64_t)ld_relaxed(w) | ((uint64_t)ld_relaxed(w + 1) << 32);
  s.seq = ld_relaxed(w + 2);
  s.root = (int32_t)ld_relaxed(w + 3);
  s.coll = (uint8_t)kolo_dev::ld_relaxed_u8(&p->coll);
  s.type = (uint8_t)kolo_dev::ld_relaxed_u8(&p->type);
  s.op = (uint8_t)kolo_dev::ld_relaxed_u8(&p->op);
  s.set = 1;
  return s;
}

/* A signature as the 6 words of a report (kolo_dev_sig's layout). */
__device__ __forceinline__ void put_sig(uint32_t *w, kolo_dev_sig s) {
  st_relaxed(w, (uint32_t)s.count);
  st_relaxed(w + 1, (uint32_t)(s.count >> 32));
  st_relaxed(w + 2, s.seq);
  st_relaxed(w + 3, (uint32_t)s.root);
  st_relaxed(w + 4, (uint32_t)s.coll | ((uint32_t)s.type << 8) | ((uint32_t)s.op << 16) | ((uint32_t)s.set << 24));
}

/* The stall slot (cuda_exec.h): the first block of this launch to get here
 * takes it (a CAS from whatever launch held it before) and fills it, the
 * launch last; later calls of this launch only read the claim. */
__device__ KOLO_OUT_OF_LINE void note_stall(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn &c,
                                            uint32_t what) {
  uint32_t *w = b.status + KOLO_DEV_STATUS_STALL;
  const uint32_t held = ld_relaxed(w + KOLO_DEV_STALL_CLAIM);
  if (held == b.launch || kolo_dev::cas(w + KOLO_DEV_STALL_CLAIM, held, b.launch) != held) return;
  kolo_dev::fence(); /* the claim before the words: a reader that saw them sees it */
  st_relaxed(w + KOLO_DEV_STALL_PEER, (uint32_t)c.peer);
  st_relaxed(w + KOLO_DEV_STALL_WHERE, (uint32_t)(uint16_t)t.channel | (what << 16));
  put_sig(w + KOLO_DEV_STALL_SIG, my_sig(b, t));
  kolo_dev::fence();
  st_release(w + KOLO_DEV_STALL_READY, b.launch);
}

/* This rank found, on receive end R, calls that differ: the report (the
 * higher rank first, as the host executor writes it) into R's report slot
 * (unless one is there), from where it goes into the status words and the
 * task's other pipes, with the stop word KOLO_STOP_MISMATCH.  (Built in
 * place, not in a local array: the kernels keep no stack frame.) */
__device__ KOLO_OUT_OF_LINE void found_mismatch(const kolo_dev_batch &b, const kolo_dev_task &t,
                                                const kolo_dev_conn *R, kolo_dev_sig mine, kolo_dev_sig theirs) {
  uint32_t *slot = report_slot(R);
  const bool me_first = b.rank > R->peer;
  if (ld_relaxed(slot) == 0) {
    st_relaxed(slot + 2, (uint32_t)(me_first ? b.rank : R->peer));
    st_relaxed(slot + 3, (uint32_t)(me_first ? R->peer : b.rank));
    put_sig(slot + 4, me_first ? mine : theirs);
    put_sig(slot + 10, me_first ? theirs : mine);
    st_release(slot, 2u);
  }
  leave(b, t, KOLO_DEV_MISMATCH, KOLO_DEV_STOP_WORD(kStopMismatch, b.rank), R->peer, slot);
}

/* Thread 0, before the first slice of its call through receive end R, and
 * before it waits for that slice (a sender whose count differs may have
 * chosen the other protocol, whose slices this one would never see): waits
 * for the sender's signature, clears it and compares it with this task's.
 * False to stop (a mismatch: reported). */
__device__ KOLO_OUT_OF_LINE bool check_sig(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn *R,
                                           uint32_t rstep, int *s_stop) {
  kolo_dev_sig *p = sig_at(R, rstep);
  wait_state w;
  for (unsigned spins = 1; kolo_dev::ld_relaxed_u8(&p->set) == 0; spins++) {
    if (spins % kPollSpins == 0) {
      if (must_leave(b, t, *R, w, s_stop, KOLO_DEV_STALL_FIRST)) return false;
      kolo_dev::pause();
    } else {
      kolo_dev::poll();
    }
  }
  (void)kolo_dev::ld_acquire_u8(&p->set);
  const kolo_dev_sig theirs = read_sig(p);
  kolo_dev::st_relaxed_u8(&p->set, 0u); /* before head moves past this step (release) */
  const kolo_dev_sig mine = my_sig(b, t);
  if (same_call(mine, theirs)) return true;
  found_mismatch(b, t, R, mine, theirs);
  kolo_dev::hint_set(s_stop, 1);
  return false;
}

}  // namespace

#endif
