/* exec_kernel.cu - the CUDA executor: one thread block runs one task's step
 * program, the same programs the host executor runs (kernels/host_exec.c),
 * slice by slice through its connectors (see kernels/cuda_exec.h).
 *
 * Connector ends: a single-peer task's two ends are in the kernel's
 * parameters; a multi-peer task's are in its table in device memory, and a
 * step uses the ends of its peers (step.to, step.from).  The block keeps one
 * current send end and one current receive end with their step counts in
 * registers; when a step moves to another peer's end, thread 0 stores the
 * count of the end it leaves in that end's step word (the block holds every
 * end of its task for the whole kernel) and, after a barrier, every thread
 * loads the new end's count.
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
 * SIMPLE, per slice: thread 0 waits until the receive slot is full (tail,
 * ld.acquire.sys) and the send slot is free (head), the block moves the data
 * with kolo_cuda::reduce_block, __syncthreads, then thread 0 publishes:
 * __threadfence_system() and st.release.sys of the new tail / head.  The
 * block barrier carries the acquire of thread 0 to the other threads' slot
 * reads, and the other threads' slot writes to thread 0's release.
 *
 * LL, per slice: thread 0 waits for send credit only (head, as SIMPLE); then
 * every thread takes lines threadIdx.x, + blockDim.x, ... of the slice, four
 * at a time: it loads its receive lines (ld.volatile v2.u64) and its source
 * payloads, polls each line until both flags are rstep + 1, combines, writes
 * the destination bytes of the line (never past the chunk) and the send line
 * {data0, flag, data1, flag} with flag sstep + 1 as one 16-byte volatile
 * store.  No fence and no tail: data and flag travel together.  After
 * __syncthreads (every line of the slice consumed) thread 0 returns the
 * credit: st.release.sys of head.  Line format: kernels/cuda/ll_format.h.
 *
 * Stopping: a waiting thread (thread 0 for counters, every thread for its
 * LL lines) looks every kPollSpins spins at the block's stop hint (shared),
 * the abort word, the peer's stop word and its own stall time against
 * timeout_ns (the deadline counts from the start of that wait, like the host
 * executor's stall time: a long collective that keeps moving never times
 * out).  The first to stop records why in status (system-scope CAS) and
 * writes a stop word into the connector ends of its task, so that the peers
 * stop too (KOLO_DEV_STOP_WORD(abort 2 / timeout 4, batch.rank), or the
 * stopped peer's word passed on); the block leaves at the next barrier
 * (__syncthreads_or of every thread's verdict, so every thread takes the
 * same way out).  A waiting block also leaves once another block of its
 * launch stopped (the status word): a peer with fewer channels in this
 * call has no block to stop it.  A wait past batch.stall_ms, before the
 * timeout, is noted once per launch in the status words' stall slot (the
 * peer, the call, what for: note_stall) for the host's warning, and goes on.
 *
 * Call signatures (single-peer tasks; see kernels/cuda_exec.h): thread 0
 * stamps its call's on the first slice it sends through its send end, once
 * the slot is free, and checks the sender's on the first slice it receives,
 * before waiting for that slice (a count that differs may have put the two
 * ranks on different protocols), so the per-slice path is unchanged. */
#ifndef KOLO_HAVE_CUDA
#define KOLO_HAVE_CUDA 1
#endif

#include "kernels/cuda/device_prims.cuh"
#include "kernels/cuda/ll_format.h"
#include "kernels/cuda/reduce_prims.cuh"
#include "kernels/cuda_exec.h"
#include "kolo.h"
#include "ring/geometry.h"
#include "ring/schedule.h"

namespace {

using namespace kolo_cuda;
using kolo_dev::ld_acquire;
using kolo_dev::ld_line;
using kolo_dev::ld_relaxed;
using kolo_dev::st_line;
using kolo_dev::st_relaxed;
using kolo_dev::st_release;

/* Code run once per block, kept out of the kernel's body on the GPU so that
 * it does not raise the registers the body's loops are allocated. */
#if KOLO_DEV_HOST_BUILD
#define KOLO_OUT_OF_LINE
#else
#define KOLO_OUT_OF_LINE __noinline__
#endif

/* A waiting thread checks abort / stop / deadline every kPollSpins spins. */
constexpr unsigned kPollSpins = 256;
/* LL lines a thread has in flight (loads issued before the first poll). */
constexpr int kLLUnroll = 4;

/* ---- stopping ------------------------------------------------------------ */

/* The stop word's reason for calls that do not match (connector.h). */
constexpr uint32_t kStopMismatch = 7;

/* Records why the kernel stops: the first stopping thread of the launch
 * wins, and true is returned to it.  word: the stop word it sends its peers,
 * which the launch's other blocks pass on when they leave for this one. */
__device__ __forceinline__ bool record_stop(const kolo_dev_batch &b, uint32_t why, int32_t peer, uint32_t word) {
  if (kolo_dev::cas(b.status, 0u, why) != 0u) return false;
  st_relaxed(b.status + 1, blockIdx.x);
  st_relaxed(b.status + 2, (uint32_t)peer);
  st_relaxed(b.status + KOLO_DEV_STATUS_WORD, word);
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

/* The stall slot (below, with the call signatures it records). */
__device__ KOLO_OUT_OF_LINE void note_stall(const kolo_dev_batch &b, const kolo_dev_task &t, const kolo_dev_conn &c,
                                            uint32_t what);

/* Called by a waiting thread every kPollSpins spins on connector c of task
 * t: true when it must give up.  The first thread of the block to give up
 * records why in status, tells the peers (stop words: KOLO_DEV_STOP_WORD
 * with connector.h's reasons 2 abort and 4 timeout for this rank; a peer's
 * stop word is passed on as it is, as the host executor does, with its
 * mismatch report) and sets the block's hint.  A block also leaves when
 * another block of the launch stopped (status set): its peer may have no
 * task in this launch to stop it (a count that differs: fewer channels).
 * since: when this wait was first polled (0: not yet).  A wait past
 * stall_ms (and not yet past the timeout) is noted for the host's warning
 * (note_stall; what: KOLO_DEV_STALL_*, what the wait is for) by warp
 * leaders, and goes on. */
__device__ __forceinline__ bool must_leave(const kolo_dev_batch &b, const kolo_dev_task &t,
                                           const kolo_dev_conn &c, uint64_t &since, int *s_stop,
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
    why = KOLO_DEV_PEER_STOPPED;
    slot = c.tail != nullptr ? report_slot(&c) : nullptr;
  } else if (b.status && leader && (why = ld_relaxed(b.status)) != KOLO_DEV_OK) {
    word = status_word(b);
    slot = b.status + KOLO_DEV_STATUS_REPORT_STATE;
  } else {
    /* waited >= limit, where a limit of 0 (none) wraps to never: fewer
     * registers in the LL kernels than testing each limit for 0 */
    const uint64_t now = kolo_dev::global_ns();
    if (since == 0) since = now;
    else if (now - since > b.timeout_ns - 1) {
      why = KOLO_DEV_TIMEOUT;
      word = KOLO_DEV_STOP_WORD(4 /* KOLO_STOP_TIMEOUT */, b.rank);
    } else if (now - since > b.stall_ms * 1000000ull - 1 && leader) {
      note_stall(b, t, c, what);
    }
  }
  if (why == KOLO_DEV_OK) return false;
  leave(b, t, why, word, c.peer, slot);
  kolo_dev::hint_set(s_stop, 1);
  return true;
}

/* ---- call signatures ------------------------------------------------------ */

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
  uint64_t since = 0;
  for (unsigned spins = 1; kolo_dev::ld_relaxed_u8(&p->set) == 0; spins++) {
    if (spins % kPollSpins == 0) {
      if (must_leave(b, t, *R, since, s_stop, KOLO_DEV_STALL_FIRST)) return false;
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
  uint64_t since = 0;
  for (unsigned spins = 1;; spins++) {
    if (!rok) rok = (int32_t)(ld_relaxed(R->tail) - rstep) > 0;
    if (!sok) sok = (uint32_t)(sstep - ld_relaxed(S->head)) < S->nslots;
    if (rok && sok) break;
    if (spins % kPollSpins == 0) {
      if (must_leave(b, t, rok ? *S : *R, since, s_stop, rok ? KOLO_DEV_STALL_SEND : KOLO_DEV_STALL_RECV))
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

/* ---- SIMPLE -------------------------------------------------------------- */

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

/* ---- LL ------------------------------------------------------------------ */

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
  uint64_t since = 0;
  for (unsigned spins = 1; !kolo_ll_ready(lo, hi, flag); spins++) {
    if (spins % kPollSpins == 0 && must_leave(b, t, *R, since, s_stop)) return false;
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

/* The ends a block works with and their counts (see the header). */
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

/* ---- the kernel ------------------------------------------------------------ */

template <typename T, int PROTO>
__global__ void __launch_bounds__(KOLO_DEV_THREADS, 1) kolo_exec_kernel(const __grid_constant__ kolo_dev_batch b) {
  constexpr bool kLL = PROTO == KOLO_PROTO_LL;
  const kolo_dev_task &t = b.tasks[blockIdx.x];
  KOLO_BLOCK_SHARED int s_stop; /* sticky hint: some thread of the block stopped */
  int clash = 0;
  if (threadIdx.x == 0) {
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

/* ---- launch -------------------------------------------------------------- */

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
