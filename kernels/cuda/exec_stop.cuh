/* exec_stop.cuh - how the CUDA executor stops (exec_kernel.cu).
 *
 * A waiting thread (thread 0 for counters, every thread for its LL lines)
 * looks every kPollSpins spins at the block's stop hint (shared), the abort
 * word, the peer's stop word and its own stall time against timeout_ns (the
 * deadline counts from the start of that wait, like the host executor's
 * stall time: a long collective that keeps moving never times out).  The
 * first to stop records why in status (device-scope CAS) and writes a stop
 * word into the connector ends of its task, so that the peers stop too
 * (KOLO_DEV_STOP_WORD(abort 2 / timeout 4, batch.rank), or the stopped
 * peer's word passed on); the block leaves at the next barrier
 * (__syncthreads_or of every thread's verdict, so every thread takes the
 * same way out).  A waiting block also leaves once another block of its
 * launch stopped (the status word): a peer with fewer channels in this call
 * has no block to stop it.  A wait past batch.stall_ms, before the timeout,
 * is noted once per launch in the status words' stall slot (the peer, the
 * call, what for: note_stall) for the host's warning, and goes on. */
#ifndef KOLO_KERNELS_CUDA_EXEC_STOP_CUH_
#define KOLO_KERNELS_CUDA_EXEC_STOP_CUH_

#include "kernels/cuda/exec_common.cuh"

namespace {

/* The stop word's reason for calls that do not match (connector.h). */
constexpr uint32_t kStopMismatch = 7;

/* Records why the kernel stops: the first stopping thread of the launch
 * wins, and true is returned to it.  word: the stop word it sends its peers
 * (never 0), which the launch's other blocks pass on when they leave for
 * this one; it goes last, with release, so that a reader who sees it sees
 * block and peer too (the host, core/cuda_status.c). */
__device__ __forceinline__ bool record_stop(const kolo_dev_batch &b, uint32_t why, int32_t peer, uint32_t word) {
  if (kolo_dev::cas(b.status, 0u, why) != 0u) return false;
  st_relaxed(b.status + 1, blockIdx.x);
  st_relaxed(b.status + 2, (uint32_t)peer);
  st_release(b.status + KOLO_DEV_STATUS_WORD, word);
  kolo_dev::fence();
  return true;
}

/* The number of connector ends of task t (its own two, or two per peer)
 * and end i of them (nullptr: not used). */
__device__ __forceinline__ int nends(const kolo_dev_task &t) { return t.npeers > 0 ? 2 * t.npeers : 2; }
__device__ __forceinline__ const kolo_dev_conn *end_at(const kolo_dev_task &t, int i) {
  if (t.npeers > 0) return t.ends[i];
  return i == 0 ? (t.has_send ? &t.send : nullptr) : (t.has_recv ? &t.recv : nullptr);
}

/* A pipe's mismatch report slot: a state word, the report 2 words on. */
__device__ __forceinline__ uint32_t *report_slot(const kolo_dev_conn *c) {
  return reinterpret_cast<uint32_t *>(reinterpret_cast<char *>(c->tail) + KOLO_DEV_REPORT_FROM_TAIL);
}

/* Leaves report words r (another slot's: device or mapped memory, which a
 * host copy may be writing too) in report slot `slot` when it has none yet
 * (system-scope relaxed words, state 2 last with release; the stop word
 * follows). */
__device__ void put_report(uint32_t *slot, const uint32_t *r) {
  if (ld_relaxed(slot) != 0) return;
  for (int i = 0; i < KOLO_DEV_REPORT_WORDS; i++) st_relaxed(slot + 2 + i, ld_relaxed(r + i));
  st_release(slot, 2u);
}

/* Tells the peers of task t that this rank stopped: `word` into the stop
 * word of each of its connector ends (the first word written stays; plain
 * system-scope stores, as words in host memory may not take atomics), after
 * the mismatch report r where there is one. */
__device__ KOLO_OUT_OF_LINE void stop_ends(const kolo_dev_task &t, uint32_t word, const uint32_t *r) {
  for (int i = 0; i < nends(t); i++) {
    const kolo_dev_conn *c = end_at(t, i);
    uint32_t *x = c != nullptr ? c->stop : nullptr;
    if (x == nullptr || ld_relaxed(x) != 0) continue;
    if (r != nullptr && c->tail != nullptr) {
      put_report(report_slot(c), r);
      kolo_dev::fence();
    }
    st_relaxed(x, word);
  }
  kolo_dev::fence();
}

/* The block leaves for `why`: records it (the first to stop keeps the
 * mismatch report r, when there is one, in the status words) and tells the
 * peers. */
__device__ KOLO_OUT_OF_LINE void leave_with(const kolo_dev_batch &b, const kolo_dev_task &t, uint32_t why,
                                            uint32_t word, int32_t peer, const uint32_t *r) {
  if (record_stop(b, why, peer, word) && r != nullptr) put_report(b.status + KOLO_DEV_STATUS_REPORT_STATE, r);
  stop_ends(t, word, r);
}

/* leave_with, passing on the report in `slot` (a pipe's or the status
 * words') when the word says calls did not match and one is there. */
__device__ KOLO_OUT_OF_LINE void leave(const kolo_dev_batch &b, const kolo_dev_task &t, uint32_t why, uint32_t word,
                                       int32_t peer, uint32_t *slot) {
  const bool has = slot != nullptr && (word >> 24) == kStopMismatch && ld_acquire(slot) == 2u;
  leave_with(b, t, why, word, peer, has ? slot + 2 : nullptr);
}

/* Another block of this launch stopped (status set): the word it sent its
 * peers, to pass on.  Its stopper writes it right after the status word, so
 * a short wait sees it (else a plain error word). */
__device__ KOLO_OUT_OF_LINE uint32_t status_word(const kolo_dev_batch &b) {
  uint32_t word = 0;
  for (unsigned spins = 0; spins < (1u << 16) && (word = ld_relaxed(b.status + KOLO_DEV_STATUS_WORD)) == 0; spins++)
    kolo_dev::poll();
  if (word == 0) return KOLO_DEV_STOP_WORD(1 /* KOLO_STOP_ERROR */, b.rank);
  for (unsigned spins = 0; spins < (1u << 16) && (word >> 24) == kStopMismatch &&
                           ld_relaxed(b.status + KOLO_DEV_STATUS_REPORT_STATE) != 2u;
       spins++)
    kolo_dev::poll();
  return word;
}

/* The stall slot (exec_sig.cuh, with the call signature it records). */
__device__ KOLO_OUT_OF_LINE void note_stall(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn &c,
                                            uint32_t what);

/* One wait's state for must_leave: when it was first polled (0: not yet),
 * and the stop word it saw set once already (nullptr: none). */
struct wait_state {
  uint64_t since = 0;
  const uint32_t *stop_seen = nullptr;
};

/* Called by a waiting thread every kPollSpins spins on connector c of task
 * t: true when it must give up.  The first thread of the block to give up
 * records why in status, tells the peers (stop words: KOLO_DEV_STOP_WORD
 * with connector.h's reasons 2 abort and 4 timeout for this rank; a peer's
 * stop word is passed on as it is, as the host executor does, with its
 * mismatch report) and sets the block's hint.  A block also leaves when
 * another block of the launch stopped (status set): its peer may have no
 * task in this launch to stop it (a count that differs: fewer channels).
 * w: the wait's state (wait_state).  A wait past stall_ms (and not yet
 * past the timeout) is noted for the host's warning (note_stall; what:
 * KOLO_DEV_STALL_*, what the wait is for) by warp leaders, and goes on.
 *
 * A peer's stop word is a reason to leave the second time this wait sees
 * it, not the first: a net pipe's proxy stops a receive end when its
 * sender's connection closes, after publishing every slice sent before the
 * close (the sender may have finished its call and left), so the caller
 * looks at its end once more, after the stop word's acquire load, and
 * finds the slice it waited for if it came. */
__device__ __forceinline__ bool must_leave(const kolo_dev_batch &b, const kolo_dev_task &t,
                                           const kolo_dev_conn &c, wait_state &w, int *s_stop,
                                           uint32_t what = KOLO_DEV_STALL_RECV) {
  if (kolo_dev::hint_get(s_stop)) return true; /* another thread of the block already stopped */
  uint32_t why = KOLO_DEV_OK, word = 0;
  uint32_t *slot = nullptr; /* where a mismatch report may be */
  /* The abort and status words are host memory: one waiting thread per warp reads them. */
  const bool leader = kolo_dev::warp_leader();
  if (b.abort && leader && ld_relaxed(b.abort)) {
    why = KOLO_DEV_ABORTED;
    word = KOLO_DEV_STOP_WORD(2 /* KOLO_STOP_ABORT */, b.rank);
  } else if (c.stop && (word = ld_relaxed(c.stop)) != 0) {
    if (w.stop_seen != c.stop) { /* the first sight: look at the end once more (above) */
      (void)ld_acquire(c.stop);
      w.stop_seen = c.stop;
      return false;
    }
    why = KOLO_DEV_PEER_STOPPED;
    slot = c.tail != nullptr ? report_slot(&c) : nullptr;
  } else if (b.status && leader && (why = ld_relaxed(b.status)) != KOLO_DEV_OK) {
    word = status_word(b);
    slot = b.status + KOLO_DEV_STATUS_REPORT_STATE;
  } else {
    /* waited >= limit, where a limit of 0 (none) wraps to never: fewer
     * registers in the LL kernels than testing each limit for 0 */
    const uint64_t now = kolo_dev::global_ns();
    if (w.since == 0) w.since = now;
    else if (now - w.since > b.timeout_ns - 1) {
      why = KOLO_DEV_TIMEOUT;
      word = KOLO_DEV_STOP_WORD(4 /* KOLO_STOP_TIMEOUT */, b.rank);
    } else if (now - w.since > b.stall_ms * 1000000ull - 1 && leader) {
      note_stall(b, t, c, what);
    }
  }
  if (why == KOLO_DEV_OK) return false;
  leave(b, t, why, word, c.peer, slot);
  kolo_dev::hint_set(s_stop, 1);
  return true;
}

}  // namespace

#endif
