// test_schedule.cc - the schedules (ring/) checked by running them.
//
// A pure-software model, written here from ring/program.h's contract and
// independent of the host executor (kernels/host_exec.c is not called), runs
// the step programs of all ranks and channels of a collective:
//
//   - a connector is a FIFO of slices per (sender, receiver, channel),
//     unbounded or bounded to the slots a real connector has (chunk_elems =
//     nslots/2 slots, so nslots = 2 * chunk_elems / slot_elems);
//   - tasks (one per rank, program and channel) take turns, a few slices at a
//     time; a step that receives waits for a slice, a step that sends into a
//     full bounded FIFO waits; a pass in which no task moves while some are
//     not done is a deadlock and fails the case;
//   - where a chunk lies comes from kolo_round_chunk / kolo_round_span /
//     kolo_chunk_range; a chunk of n elements is ceil(n / slot_elems) slices
//     (0 elements: no slice); each slice carries (round base, chunk index,
//     slice index, data) and the receiver checks that it refers to the chunk
//     it expects (program.h: "both ends of a connector always refer to the
//     same chunk at the same step");
//   - buffers are arenas of int64 (exact sums, max) or double (avg: the FINAL
//     flag divides by nranks); in-place calls alias the same arena; each task
//     sees its IN and OUT through views that are bounds-checked and say
//     whether the task may read or write them (a non-root broadcast never
//     reads its input, a non-root reduce never writes its output, nothing
//     writes an input);
//   - after the run every element of every arena is compared with the
//     reference computed directly from the inputs: outputs start poisoned and
//     every element a rank must write is checked, every element it must not
//     write (non-root outputs of reduce, blocks of recvbuff nobody sent to,
//     inputs, the other blocks of an in-place reduce-scatter input) must keep
//     its value; every FIFO ends empty with sent == received slices.
//
// Beside the model: the structure of every program (peers are ring
// neighbours, steps' ops, buffers, chunk indices and FINAL flags make sense,
// the programs do not depend on the message size, both ends of each
// connector agree step by step), the round geometry alone, and rings from
// host grouping (each host's ranks contiguous; more in test_topology.cc).
//
// Multi-peer programs (all-to-all, gather, scatter): each step names its
// peer; the model sends its slices into that peer's FIFO.  Their structure
// (peers distinct and used, blocks read and written once, both ends of
// every pipe agreeing), the model over N = 1..16 x counts x geometry with
// every root, in place where NCCL has it, FIFOs bounded to the fewest
// slots, and broken programs it must catch (receiving before sending in
// every phase deadlocks; a wrong block or peer is wrong data).
//
// The C checker (ring/check.h, ScheduleChecker): this model is its
// independent oracle.  Both judge every built-in schedule at N = 1..16
// (every root; send/recv pairs), and the built-ins broken at random (a
// dropped step, a changed chunk or peer, a receive turned into a reduction,
// a FINAL toggled) at N in {2, 3, 4, 5, 8, 16}: the verdicts must agree.
//
// Hierarchical all-reduce (ScheduleHier): its three programs per rank on H
// hosts of L ranks (H, L = 2..4, hosts in blocks or interleaved), run in the
// model as the core runs them (per channel, each phase after the one
// before), over every count, channels, slot size, element size, op,
// in-place and FIFO bound, plus the fewest slots; and their structure.
//
// Bruck's all-gather: its structure at N = 1..16 (ceil(log2 N) levels,
// peers 2^k away, every block received once, sent only once held, two
// sends ahead of the receives), the model over N x counts x geometry and
// with the fewest slots, and a level's sends all put before its receives
// caught as a deadlock by the model and the C checker (pipes of two chunks).
//
// The grids: N = 1..16 x counts {0, 1, 2, 7, 63, 64, 65, 1000, 4097} x
// channels {1, 2, 3} x slot_elems {16, 64, 1024} x elem_size {4, 8}
// (chunk_elems = 4 slots) in full for all-reduce; reduce-scatter,
// all-gather, broadcast and reduce take the full product at N in {1, 2, 3,
// 5, 8, 16} and elem_size 4 only at the other N; ring kind (identity,
// shuffled, 2 or 3 interleaved hosts through kolo_ring_build, one shuffled
// ring per channel, 3 uneven hosts on the core's rotated ring per channel),
// in-place, op (sum, max, avg), root and FIFO bound
// rotate from case to case, and smaller grids take their full products.
// About 7 s in a release build; under sanitizers see kSanitized.
#include <gtest/gtest.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

extern "C" {
#include "ring/check.h"
#include "ring/program.h"
#include "ring/schedule.h"
#include "ring/step_names.h"
#include "ring/algo.h"
#include "ring/doubling.h"
#include "ring/topology.h"
}

namespace {

// ---- rings -----------------------------------------------------------------

// A kolo_ring that owns its arrays.
struct Ring {
  std::vector<int> order, pos;
  kolo_ring r{};
  Ring() = default;
  explicit Ring(std::vector<int> ord) : order(std::move(ord)), pos(order.size()) {
    for (size_t i = 0; i < order.size(); i++) pos[(size_t)order[i]] = (int)i;
    fix();
  }
  Ring(const Ring &o) : order(o.order), pos(o.pos) { fix(); }
  Ring &operator=(const Ring &o) {
    order = o.order;
    pos = o.pos;
    fix();
    return *this;
  }
  void fix() {
    r.nranks = (int)order.size();
    r.order = order.data();
    r.pos = pos.data();
  }
  int next(int rank) const { return kolo_ring_next(&r, rank); }
  int prev(int rank) const { return kolo_ring_prev(&r, rank); }
};

enum RingKind { kIdentity, kShuffled, kHosts2, kHosts3, kPerChannel, kHostsRotated, kNumRingKinds };
const char *ring_kind_name(int k) {
  static const char *names[] = {"identity", "shuffled", "hosts2", "hosts3", "per-channel",
                                "hosts-rotated"};
  return names[k];
}

Ring identity_ring(int n) {
  std::vector<int> o((size_t)n);
  std::iota(o.begin(), o.end(), 0);
  return Ring(o);
}

Ring shuffled_ring(int n, uint64_t seed) {
  std::vector<int> o((size_t)n);
  std::iota(o.begin(), o.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(o.begin(), o.end(), rng);
  return Ring(o);
}

// Ranks on `hosts` hosts in interleaved rank order (host of r = r % hosts,
// with arbitrary 64-bit host ids), ring from kolo_ring_build.
Ring host_ring(int n, int hosts) {
  std::vector<uint64_t> host_of((size_t)n);
  for (int r = 0; r < n; r++)
    host_of[(size_t)r] = 0x9e3779b97f4a7c15ull * (uint64_t)(r % hosts + 1);
  kolo_ring kr;
  if (kolo_ring_build(n, host_of.data(), &kr) != koloSuccess) abort();
  std::vector<int> o(kr.order, kr.order + n);
  kolo_ring_free(&kr);
  return Ring(o);
}

// Ranks on 3 hosts, uneven (host of r = r % 4, hosts 2 and 3 merged), ring
// of `channel` from kolo_ring_build_channel: each host's run starts at a
// different local index per channel, as the core builds its rings.
Ring rotated_host_ring(int n, int channel) {
  std::vector<uint64_t> host_of((size_t)n);
  for (int r = 0; r < n; r++) host_of[(size_t)r] = 0x51ed27ull * (uint64_t)(r % 4 == 3 ? 2 : r % 4);
  kolo_hosts h;
  if (kolo_hosts_build(n, host_of.data(), &h) != koloSuccess) abort();
  kolo_ring kr;
  if (kolo_ring_build_channel(&h, channel, &kr) != koloSuccess) abort();
  std::vector<int> o(kr.order, kr.order + n);
  kolo_ring_free(&kr);
  kolo_hosts_free(&h);
  return Ring(o);
}

// One ring per channel for a ring kind.
std::vector<Ring> make_rings(int kind, int n, int nch, uint64_t seed) {
  std::vector<Ring> rings;
  for (int c = 0; c < nch; c++) {
    switch (kind) {
    case kIdentity: rings.push_back(identity_ring(n)); break;
    case kShuffled: rings.push_back(shuffled_ring(n, seed)); break;
    case kHosts2: rings.push_back(host_ring(n, 2)); break;
    case kHosts3: rings.push_back(host_ring(n, 3)); break;
    case kHostsRotated: rings.push_back(rotated_host_ring(n, c)); break;
    default: rings.push_back(shuffled_ring(n, seed * 31 + (uint64_t)c)); break;
    }
  }
  return rings;
}

// A program that frees itself.
struct Prog {
  kolo_program p{};
  Prog() = default;
  Prog(const Prog &) = delete;
  Prog &operator=(const Prog &) = delete;
  ~Prog() { kolo_program_free(&p); }
};

// arg: the root or peer, or (all-reduce) the algorithm; algo: the broadcast's;
// channel: the double binary tree's (its odd channels run its second tree).
std::unique_ptr<Prog> build(int coll, const Ring &ring, int rank, int arg, int algo = KOLO_ALGO_RING, int channel = 0) {
  auto pr = std::make_unique<Prog>();
  if (coll == KOLO_COLL_ALL_REDUCE) algo = arg;
  koloResult_t res = kolo_schedule_build_on(coll, &ring.r, rank, arg, algo, channel, &pr->p);
  if (res != koloSuccess) {
    ADD_FAILURE() << "kolo_schedule_build(" << kolo_coll_name(coll) << ", rank " << rank << ", arg "
                  << arg << ") = " << res;
    return nullptr;
  }
  return pr;
}

const char *op_name(int op) {
  static const char *names[] = {
      "send",         "recv",           "copy",           "copySend",
      "recvCopySend", "recvReduceSend", "recvReduceCopy", "recvReduceCopySend"};
  return op >= 0 && op < KOLO_STEP_NUM_OPS ? names[op] : "?";
}

// ---- the model ---------------------------------------------------------------

// kOrdered combines a and b as 3a + b (wrapping): neither commutative nor
// associative, so a rank that takes its operands in another order or
// bracketing than another rank gets another value.  Its check is that every
// rank gets the same values (no reference: each algorithm has its own tree).
enum class ROp { kSum, kMax, kAvg, kOrdered };
const char *rop_name(ROp op) {
  return op == ROp::kSum ? "sum" : op == ROp::kMax ? "max" : op == ROp::kAvg ? "avg" : "ordered";
}

// A task's window on an arena.
struct View {
  int arena = -1;
  size_t off = 0, len = 0;
  bool can_read = false, can_write = false;
};

struct ModelParams {
  int nranks = 1;
  int nchannels = 1;
  size_t count = 0;
  size_t elem_size = 4;
  size_t slot_elems = 16;
  size_t chunk_elems = 64;
  size_t capacity = 0;  // slices per FIFO, 0: unbounded
  ROp op = ROp::kSum;
  int div = 1;          // post-op divisor of FINAL steps
  int turn_slices = 3;  // slices a task may move per turn
  // The receiver checks that a slice comes from the chunk (block) it
  // expects.  All-to-all has no common block index for the two ends (the
  // sender's block is the receiver's rank and the other way round): there
  // only the round, slice and size are checked (and every element after).
  bool check_chunk_tags = true;
};

template <typename T>
T poison() {
  // Positive and large: it dominates a max and spoils a sum if it leaks in.
  if constexpr (std::is_floating_point<T>::value)
    return (T)1e300;
  else
    return (T)0x5eadbeef5eadbeefll;
}

template <typename T>
class Model {
 public:
  explicit Model(const ModelParams &mp)
      : mp_(mp), fifos_((size_t)mp.nranks * (size_t)mp.nranks * (size_t)mp.nchannels) {}

  std::vector<std::vector<T>> arenas;

  int add_arena(std::vector<T> data) {
    arenas.push_back(std::move(data));
    return (int)arenas.size() - 1;
  }

  // Tasks run concurrently, except that a task waits for the earlier tasks
  // of its rank that use the same end of a connector (as the core orders
  // programs that share a connector).  A step's connector is the one to or
  // from the rank kolo_step_send_rank / kolo_step_recv_rank name: the
  // program's send_peer / recv_peer, or (multi-peer programs) the peer its
  // step indexes.
  // `after`: tasks (add_task's return values) whose output this one reads.
  int add_task(int rank, int channel, const kolo_program *prog, View in, View out,
               const std::vector<int> &after = {}) {
    Task t;
    t.rank = rank;
    t.channel = channel;
    t.prog = prog;
    t.in = in;
    t.out = out;
    t.geo = kolo_geometry{mp_.count,     mp_.elem_size,   mp_.nranks,
                          mp_.nchannels, mp_.chunk_elems, (int)prog->layout};
    for (int i = 0; i < prog->nsteps; i++) {
      int to = kolo_step_send_rank(prog, &prog->steps[i]);
      int from = kolo_step_recv_rank(prog, &prog->steps[i]);
      if (to >= 0 && to < mp_.nranks) t.send_fifos.push_back(fifo_index(rank, to, channel));
      if (from >= 0 && from < mp_.nranks) t.recv_fifos.push_back(fifo_index(from, rank, channel));
    }
    for (std::vector<int> *v : {&t.send_fifos, &t.recv_fifos}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    for (size_t i = tasks_.size(); i-- > 0;) {
      const Task &o = tasks_[i];
      if (o.rank != rank) continue;
      if (shares(t.send_fifos, o.send_fifos) || shares(t.recv_fifos, o.recv_fifos))
        t.deps.push_back((int)i);
    }
    for (int a : after) t.deps.push_back(a);
    t.scratch.assign((size_t)KOLO_SCRATCH_CHUNKS * mp_.chunk_elems, poison<T>());
    tasks_.push_back(t);
    return (int)tasks_.size() - 1;
  }

  // Runs every task to its end; "" on success, else what went wrong.
  std::string run() {
    for (Task &t : tasks_) {
      t.base = 0;
      t.rce = kolo_round_chunk(&t.geo, 0);
      t.done = t.rce == 0 || t.prog->nsteps == 0;  // a program with no steps has nothing to do
    }
    for (long pass = 0;; pass++) {
      bool all_done = true, moved = false;
      for (Task &t : tasks_) {
        if (t.done) continue;
        all_done = false;
        bool ready = true;
        for (int d : t.deps) ready = ready && tasks_[(size_t)d].done;
        if (!ready) continue;
        int r = advance(t);
        if (r < 0) return err_;
        moved = moved || r > 0;
      }
      if (all_done) break;
      if (!moved) return "deadlock: " + describe_blocked();
      if (pass > 100000000L) return "no end after 1e8 passes";
    }
    for (size_t i = 0; i < fifos_.size(); i++) {
      const Fifo &f = fifos_[i];
      if (!f.q.empty() || f.sent != f.received) {
        std::ostringstream os;
        os << "connector " << fifo_name((int)i) << ": " << f.sent << " slices sent, " << f.received
           << " received, " << f.q.size() << " left over";
        return os.str();
      }
    }
    return "";
  }

  uint64_t total_slices() const {
    uint64_t s = 0;
    for (const Fifo &f : fifos_) s += f.sent;
    return s;
  }

 private:
  struct Slice {
    size_t base;
    int chunk;  // -1: the chunk index means nothing for this buffer
    size_t index;
    std::vector<T> data;
  };
  struct Fifo {
    std::deque<Slice> q;
    uint64_t sent = 0, received = 0;
  };
  struct Task {
    int rank = 0, channel = 0;
    const kolo_program *prog = nullptr;
    View in, out;
    std::vector<T> scratch;  // KOLO_BUF_SCRATCH: poisoned at the start of every round
    kolo_geometry geo{};
    std::vector<int> send_fifos, recv_fifos;  // every connector end it uses, sorted
    std::vector<int> deps;
    // state
    size_t base = 0, rce = 0;
    int step = 0;
    bool chunk_ready = false;
    size_t slice = 0, nslices = 0, n = 0, src_off = 0, dst_off = 0;
    int chunk = -1;
    bool done = false;
  };

  ModelParams mp_;
  std::vector<Fifo> fifos_;
  std::vector<Task> tasks_;
  std::string err_;
  std::vector<T> a_, r_, v_;          // one slice: src, received, result
  std::vector<std::vector<T>> pool_;  // slice buffers for reuse

  int fifo_index(int from, int to, int ch) const {
    return (from * mp_.nranks + to) * mp_.nchannels + ch;
  }
  static bool shares(const std::vector<int> &a, const std::vector<int> &b) {
    for (int x : a)
      if (std::binary_search(b.begin(), b.end(), x)) return true;
    return false;
  }
  // The FIFO step s of task t sends into / receives from; -1: none, -2: a
  // peer that is no rank.
  int step_fifo(const Task &t, const kolo_step &s, bool send) const {
    int peer = send ? kolo_step_send_rank(t.prog, &s) : kolo_step_recv_rank(t.prog, &s);
    if (peer == -1) return -1;
    if (peer < 0 || peer >= mp_.nranks) return -2;
    return send ? fifo_index(t.rank, peer, t.channel) : fifo_index(peer, t.rank, t.channel);
  }
  std::string fifo_name(int i) const {
    int ch = i % mp_.nchannels, to = i / mp_.nchannels % mp_.nranks,
        from = i / mp_.nchannels / mp_.nranks;
    std::ostringstream os;
    os << from << "->" << to << " (channel " << ch << ")";
    return os.str();
  }

  std::string where(const Task &t) const {
    std::ostringstream os;
    os << "rank " << t.rank << " channel " << t.channel << " round base " << t.base << " step "
       << t.step;
    if (t.step < t.prog->nsteps) {
      const kolo_step &s = t.prog->steps[t.step];
      os << " (" << op_name(s.op) << " src " << (s.src_buf ? "OUT" : "IN") << "[" << s.src_chunk
         << "] dst " << (s.dst_buf ? "OUT" : "IN") << "[" << s.dst_chunk << "])";
    }
    if (t.step < t.prog->nsteps && t.prog->npeers > 0) {
      const kolo_step &s = t.prog->steps[t.step];
      if (kolo_step_sends(s.op)) os << " to rank " << kolo_step_send_rank(t.prog, &s);
      if (kolo_step_recvs(s.op)) os << " from rank " << kolo_step_recv_rank(t.prog, &s);
    }
    os << " slice " << t.slice;
    return os.str();
  }

  int fail(const Task &t, const std::string &what) {
    err_ = where(t) + ": " + what;
    return -1;
  }

  std::string describe_blocked() const {
    std::ostringstream os;
    int shown = 0;
    for (const Task &t : tasks_) {
      if (t.done) continue;
      if (shown++ == 4) {
        os << "; ...";
        break;
      }
      os << (shown > 1 ? "; " : "") << where(t);
    }
    return os.str();
  }

  const View &view(const Task &t, int buf) const { return buf == KOLO_BUF_IN ? t.in : t.out; }
  bool blocked(const Task &t, int buf) const {
    return buf == KOLO_BUF_IN ? t.prog->in_blocked : t.prog->out_blocked;
  }
  // The chunk index as a data coordinate: meaningful for the RING layout and
  // blocked buffers, ignored (-1) otherwise.
  int chunk_tag(const Task &t, int buf, int chunk) const {
    return (t.prog->layout == KOLO_LAYOUT_RING || blocked(t, buf)) ? chunk : -1;
  }

  // Where chunk `chunk` of buffer `buf` lies this round (program.h): a
  // scratch chunk has the size of the channel's chunk k of an unblocked
  // buffer and sits at k chunk_elems in the task's scratch.
  void locate(const Task &t, int buf, int chunk, size_t *off, size_t *n) const {
    bool scratch = buf == KOLO_BUF_SCRATCH;
    kolo_chunk_range(&t.geo, t.base, t.rce, t.channel, chunk, !scratch && blocked(t, buf), off, n);
    if (scratch) *off = (size_t)chunk * mp_.chunk_elems;
  }

  // Locates the current step's chunk.
  int prepare(Task &t, const kolo_step &s) {
    bool rs = kolo_step_reads_src(s.op), wd = kolo_step_writes_dst(s.op);
    if (!rs && !wd) return fail(t, "step neither reads nor writes a buffer");
    size_t n_src = 0, n_dst = 0;
    if (rs) locate(t, s.src_buf, s.src_chunk, &t.src_off, &n_src);
    if (wd) locate(t, s.dst_buf, s.dst_chunk, &t.dst_off, &n_dst);
    if (rs && wd && n_src != n_dst) {
      std::ostringstream os;
      os << "src chunk has " << n_src << " elements, dst chunk " << n_dst;
      return fail(t, os.str());
    }
    t.n = rs ? n_src : n_dst;
    bool comm = kolo_step_sends(s.op) || kolo_step_recvs(s.op);
    t.nslices = comm ? (t.n + mp_.slot_elems - 1) / mp_.slot_elems : (t.n ? 1 : 0);
    t.slice = 0;
    int ts = rs ? chunk_tag(t, s.src_buf, s.src_chunk) : -1;
    int td = wd ? chunk_tag(t, s.dst_buf, s.dst_chunk) : -1;
    t.chunk = ts >= 0 ? ts : td;
    t.chunk_ready = true;
    return 0;
  }

  // The task's scratch: its own, KOLO_SCRATCH_CHUNKS chunks of chunk_elems.
  int scratch_io(Task &t, size_t off, size_t n, std::vector<T> &v, bool write) {
    if (off + n > t.scratch.size()) {
      std::ostringstream os;
      os << (write ? "writes" : "reads") << " [" << off << ", " << off + n << ") of SCRATCH of " << t.scratch.size()
         << " elements";
      return fail(t, os.str());
    }
    if (write) std::copy(v.begin(), v.begin() + (ptrdiff_t)n, t.scratch.begin() + (ptrdiff_t)off);
    else v.assign(t.scratch.begin() + (ptrdiff_t)off, t.scratch.begin() + (ptrdiff_t)(off + n));
    return 0;
  }

  int read(Task &t, int buf, size_t off, size_t n, std::vector<T> &v) {
    if (buf == KOLO_BUF_SCRATCH) return scratch_io(t, off, n, v, false);
    const View &w = view(t, buf);
    if (!w.can_read)
      return fail(t, std::string("reads ") + (buf ? "OUT" : "IN") + ", which it must not");
    if (w.arena < 0 || off + n > w.len) {
      std::ostringstream os;
      os << "reads [" << off << ", " << off + n << ") of " << (buf ? "OUT" : "IN") << " of "
         << w.len << " elements";
      return fail(t, os.str());
    }
    const std::vector<T> &a = arenas[(size_t)w.arena];
    v.assign(a.begin() + (ptrdiff_t)(w.off + off), a.begin() + (ptrdiff_t)(w.off + off + n));
    return 0;
  }

  int write(Task &t, int buf, size_t off, std::vector<T> &v) {
    if (buf == KOLO_BUF_SCRATCH) return scratch_io(t, off, v.size(), v, true);
    const View &w = view(t, buf);
    if (!w.can_write)
      return fail(t, std::string("writes ") + (buf ? "OUT" : "IN") + ", which it must not");
    if (w.arena < 0 || off + v.size() > w.len) {
      std::ostringstream os;
      os << "writes [" << off << ", " << off + v.size() << ") of " << (buf ? "OUT" : "IN") << " of "
         << w.len << " elements";
      return fail(t, os.str());
    }
    std::copy(v.begin(), v.end(), arenas[(size_t)w.arena].begin() + (ptrdiff_t)(w.off + off));
    return 0;
  }

  T combine(T a, T b) const {
    if (mp_.op == ROp::kOrdered) {
      if constexpr (std::is_integral<T>::value) return (T)((uint64_t)a * 3 + (uint64_t)b);
      return a * 3 + b;
    }
    return mp_.op == ROp::kMax ? std::max(a, b) : a + b;
  }

  // Moves up to turn_slices slices; >0 moved, 0 blocked, <0 failed.
  int advance(Task &t) {
    const kolo_program *p = t.prog;
    int moved = 0;
    std::vector<T> &a = a_, &r = r_, &v = v_;
    for (int budget = mp_.turn_slices; budget > 0;) {
      if (t.step == p->nsteps) {
        size_t span = kolo_round_span(&t.geo, t.rce);
        if (span == 0) return fail(t, "round of 0 elements");
        t.base += span;
        t.rce = kolo_round_chunk(&t.geo, t.base);
        t.step = 0;
        std::fill(t.scratch.begin(), t.scratch.end(), poison<T>());  // scratch keeps nothing between rounds
        if (t.rce == 0) {
          t.done = true;
          return 1;
        }
      }
      const kolo_step &s = p->steps[t.step];
      if (s.op >= KOLO_STEP_NUM_OPS) return fail(t, "bad op");
      if (!t.chunk_ready) {
        if (prepare(t, s) < 0) return -1;
        if (t.nslices == 0) {
          t.step++;
          t.chunk_ready = false;
          continue;
        }
      }
      bool recvs = kolo_step_recvs(s.op), sends = kolo_step_sends(s.op);
      const int recv_fifo = step_fifo(t, s, false), send_fifo = step_fifo(t, s, true);
      if (recvs && recv_fifo < 0) return fail(t, "receives without a peer to receive from");
      if (sends && send_fifo < 0) return fail(t, "sends without a peer to send to");
      if (recvs && fifos_[(size_t)recv_fifo].q.empty()) return moved;
      if (sends && mp_.capacity && fifos_[(size_t)send_fifo].q.size() >= mp_.capacity)
        return moved;
      size_t per = (recvs || sends) ? mp_.slot_elems : t.n;
      size_t off = t.slice * per;
      size_t n = std::min(per, t.n - off);
      if (recvs) {
        Fifo &f = fifos_[(size_t)recv_fifo];
        Slice &sl = f.q.front();
        if (sl.base != t.base || sl.index != t.slice || sl.data.size() != n ||
            (mp_.check_chunk_tags && sl.chunk >= 0 && t.chunk >= 0 && sl.chunk != t.chunk)) {
          std::ostringstream os;
          os << "received slice " << sl.index << " of chunk " << sl.chunk << " (round base "
             << sl.base << ", " << sl.data.size() << " elements), expected slice " << t.slice
             << " of chunk " << t.chunk << " (" << n << " elements)";
          return fail(t, os.str());
        }
        r.swap(sl.data);  // the old buffer goes back to the pool
        pool_.push_back(std::move(sl.data));
        f.q.pop_front();
        f.received++;
      }
      if (kolo_step_reads_src(s.op) && read(t, s.src_buf, t.src_off + off, n, a) < 0) return -1;
      bool fin = (s.flags & KOLO_STEP_FINAL) != 0 && mp_.div > 1;
      switch (s.op) {
      case KOLO_STEP_SEND: v.assign(a.begin(), a.end()); break;
      case KOLO_STEP_RECV: v.assign(r.begin(), r.end()); break;
      case KOLO_STEP_COPY:
        v.assign(a.begin(), a.end());
        if (fin)
          for (T &x : v) x /= (T)mp_.div;
        break;
      case KOLO_STEP_COPY_SEND: v.assign(a.begin(), a.end()); break;
      case KOLO_STEP_RECV_COPY_SEND: v.assign(r.begin(), r.end()); break;
      case KOLO_STEP_REDUCE:  // dst OP src: the other operand is what dst holds
        if (read(t, s.dst_buf, t.dst_off + off, n, r) < 0) return -1;
        [[fallthrough]];
      case KOLO_STEP_RECV_REDUCE_SEND:
      case KOLO_STEP_RECV_REDUCE_COPY:
      case KOLO_STEP_RECV_REDUCE_COPY_SEND:
        v.resize(n);
        if (s.flags & KOLO_STEP_SRC_FIRST)
          for (size_t i = 0; i < n; i++) v[i] = combine(a[i], r[i]);
        else
          for (size_t i = 0; i < n; i++) v[i] = combine(r[i], a[i]);
        if (fin && s.op != KOLO_STEP_RECV_REDUCE_SEND)
          for (T &x : v) x /= (T)mp_.div;
        break;
      default: return fail(t, "bad op");
      }
      if (kolo_step_writes_dst(s.op) && write(t, s.dst_buf, t.dst_off + off, v) < 0) return -1;
      if (sends) {
        Fifo &f = fifos_[(size_t)send_fifo];
        std::vector<T> data;
        if (!pool_.empty()) {
          data = std::move(pool_.back());
          pool_.pop_back();
        }
        data.assign(v.begin(), v.end());
        f.q.push_back(Slice{t.base, t.chunk, t.slice, std::move(data)});
        f.sent++;
      }
      moved = 1;
      budget--;
      if (++t.slice == t.nslices) {
        t.step++;
        t.chunk_ready = false;
      }
    }
    return moved;
  }
};

// ---- collectives in the model ---------------------------------------------


struct Case {
  int coll = KOLO_COLL_ALL_REDUCE;
  int nranks = 1;
  size_t count = 0;
  int nchannels = 1;
  size_t slot_elems = 16;
  size_t elem_size = 4;
  int ring_kind = kIdentity;
  bool in_place = false;
  ROp op = ROp::kSum;
  int root = 0;
  size_t capacity = 0;
  int nslots = 8;  // chunk_elems = nslots / 2 slots, as the core sizes it
  uint64_t seed = 1;
  int algo = KOLO_ALGO_RING;  // all-reduce, broadcast, all-gather: the program's algorithm (ring/algo.h)

  std::string str() const {
    std::ostringstream os;
    os << kolo_coll_name(coll) << " n=" << nranks << " count=" << count << " nch=" << nchannels
       << " slot=" << slot_elems << " esz=" << elem_size << " ring=" << ring_kind_name(ring_kind)
       << (in_place ? " in-place" : "") << " op=" << rop_name(op);
    if (coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_ALL_GATHER)
      os << " algo=" << kolo_algo_name(algo);
    if (coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE) os << " root=" << root;
    os << " nslots=" << nslots << " cap=" << capacity << " seed=" << seed;
    return os.str();
  }
};

ModelParams params_of(const Case &c) {
  ModelParams mp;
  mp.nranks = c.nranks;
  mp.nchannels = c.nchannels;
  mp.count = c.count;
  mp.elem_size = c.elem_size;
  mp.slot_elems = c.slot_elems;
  mp.chunk_elems = c.slot_elems * (size_t)(c.nslots / 2);
  mp.capacity = c.capacity;
  mp.op = c.op;
  mp.div = c.op == ROp::kAvg ? c.nranks : 1;
  mp.turn_slices = 1 + (int)(c.seed % 4);
  return mp;
}

// splitmix64: cheap, good enough for test data.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t operator()() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// Integers in [-2^20, 2^20): sums of 16 of them are exact in int64 and in
// double, and an average is one rounding of an exact sum.
template <typename T>
std::vector<T> random_values(Rng &rng, size_t n) {
  std::vector<T> v(n);
  for (T &x : v) x = (T)((int64_t)(rng() >> 43) - (1 << 20));
  return v;
}

// Compares every arena with its expected contents; "" when equal.
template <typename T>
std::string compare(const std::vector<std::vector<T>> &got, const std::vector<std::vector<T>> &want,
                    const std::vector<std::string> &names) {
  std::ostringstream os;
  size_t bad = 0;
  for (size_t a = 0; a < want.size(); a++) {
    if (got[a].size() != want[a].size()) return "arena " + names[a] + " changed size";
    for (size_t i = 0; i < want[a].size(); i++) {
      // Exact: sums of integers are exact; an average is one division of an
      // exact sum, as in the reference.
      if (got[a][i] == want[a][i]) continue;
      if (bad++ < 4)
        os << names[a] << "[" << i << "] = " << got[a][i] << ", expected " << want[a][i]
           << (want[a][i] == poison<T>() ? " (poison: must not be written)" : "")
           << (got[a][i] == poison<T>() ? " (poison: never written)" : "") << "; ";
    }
  }
  if (bad) os << bad << " wrong elements";
  return os.str();
}

// Changes the programs of channel ch after they are built (the cross-check
// with the C checker breaks them on purpose).
using Mutator = std::function<void(int ch, std::vector<std::unique_ptr<Prog>> &progs)>;

// Runs one ring collective (all-reduce, reduce-scatter, all-gather,
// broadcast, reduce) in the model and checks every element.
template <typename T>
std::string run_collective(const Case &c, const Mutator &mutate = nullptr) {
  const int n = c.nranks;
  const size_t cnt = c.count;
  Rng rng(c.seed);
  std::vector<Ring> rings = make_rings(c.ring_kind, n, c.nchannels, c.seed);
  std::vector<std::vector<std::unique_ptr<Prog>>> progs((size_t)c.nchannels);
  const int arg = c.coll == KOLO_COLL_ALL_REDUCE ? c.algo : c.root;
  for (int ch = 0; ch < c.nchannels; ch++)
    for (int r = 0; r < n; r++) {
      progs[(size_t)ch].push_back(build(c.coll, rings[(size_t)ch], r, arg, c.algo, ch));
      if (!progs[(size_t)ch].back()) return "build failed";
    }
  for (int ch = 0; mutate && ch < c.nchannels; ch++) mutate(ch, progs[(size_t)ch]);

  Model<T> m(params_of(c));
  std::vector<std::string> names;
  std::vector<int> in_arena((size_t)n), out_arena((size_t)n);
  std::vector<View> in_view((size_t)n), out_view((size_t)n);
  std::vector<std::vector<T>> inputs((size_t)n);  // each rank's contribution
  const bool blocked_in = c.coll == KOLO_COLL_REDUCE_SCATTER;
  const bool blocked_out = c.coll == KOLO_COLL_ALL_GATHER;
  const size_t in_len = blocked_in ? cnt * (size_t)n : cnt;
  const size_t out_len = blocked_out ? cnt * (size_t)n : cnt;
  const bool rooted = c.coll == KOLO_COLL_BROADCAST || c.coll == KOLO_COLL_REDUCE;

  for (int r = 0; r < n; r++) {
    inputs[(size_t)r] = random_values<T>(rng, in_len);
    bool inplace = c.in_place && (!rooted || r == c.root);
    std::string rs = "rank" + std::to_string(r);
    if (!inplace) {
      in_arena[(size_t)r] = m.add_arena(inputs[(size_t)r]);
      names.push_back(rs + ".in");
      out_arena[(size_t)r] = m.add_arena(std::vector<T>(out_len, poison<T>()));
      names.push_back(rs + ".out");
      in_view[(size_t)r] = View{in_arena[(size_t)r], 0, in_len, true, false};
      out_view[(size_t)r] = View{out_arena[(size_t)r], 0, out_len, false, true};
    } else if (c.coll == KOLO_COLL_REDUCE_SCATTER) {
      // out = block `rank` of the input
      int a = m.add_arena(inputs[(size_t)r]);
      names.push_back(rs + ".inout");
      in_arena[(size_t)r] = out_arena[(size_t)r] = a;
      in_view[(size_t)r] = View{a, 0, in_len, true, false};
      out_view[(size_t)r] = View{a, (size_t)r * cnt, cnt, false, true};
    } else if (c.coll == KOLO_COLL_ALL_GATHER) {
      // in = block `rank` of the output
      std::vector<T> buf(out_len, poison<T>());
      std::copy(inputs[(size_t)r].begin(), inputs[(size_t)r].end(),
                buf.begin() + (ptrdiff_t)((size_t)r * cnt));
      int a = m.add_arena(buf);
      names.push_back(rs + ".inout");
      in_arena[(size_t)r] = out_arena[(size_t)r] = a;
      in_view[(size_t)r] = View{a, (size_t)r * cnt, cnt, true, false};
      out_view[(size_t)r] = View{a, 0, out_len, false, true};
    } else {
      int a = m.add_arena(inputs[(size_t)r]);
      names.push_back(rs + ".inout");
      in_arena[(size_t)r] = out_arena[(size_t)r] = a;
      in_view[(size_t)r] = View{a, 0, in_len, true, false};
      out_view[(size_t)r] = View{a, 0, out_len, false, true};
    }
    if (c.coll == KOLO_COLL_BROADCAST && r != c.root) in_view[(size_t)r].can_read = false;
    if (c.coll == KOLO_COLL_REDUCE && r != c.root) out_view[(size_t)r].can_write = false;
    // recursive doubling and Rabenseifner go on from what they wrote
    if (c.coll == KOLO_COLL_ALL_REDUCE && kolo_algo_is_multi_peer(c.algo)) out_view[(size_t)r].can_read = true;
    // a tree's inner ranks send their children what they received into out
    if (c.coll == KOLO_COLL_BROADCAST && (c.algo == KOLO_ALGO_TREE || c.algo == KOLO_ALGO_DBTREE))
      out_view[(size_t)r].can_read = true;
    // Bruck's sends the blocks it received into out at earlier levels
    if (c.coll == KOLO_COLL_ALL_GATHER && c.algo == KOLO_ALGO_BRUCK) out_view[(size_t)r].can_read = true;
  }

  // Expected contents of every arena: start from the initial state.
  std::vector<std::vector<T>> want = m.arenas;
  auto reduce_at = [&](size_t idx) {
    T acc = inputs[0][idx];
    for (int q = 1; q < n; q++) {
      T x = inputs[(size_t)q][idx];
      acc = c.op == ROp::kMax ? std::max(acc, x) : acc + x;
    }
    if (c.op == ROp::kAvg) acc /= (T)n;
    return acc;
  };
  for (int r = 0; r < n; r++) {
    std::vector<T> &out = want[(size_t)out_arena[(size_t)r]];
    size_t ob = out_view[(size_t)r].off;
    switch (c.coll) {
    case KOLO_COLL_ALL_REDUCE:
      for (size_t i = 0; i < cnt; i++) out[ob + i] = reduce_at(i);
      break;
    case KOLO_COLL_REDUCE_SCATTER:
      for (size_t i = 0; i < cnt; i++) out[ob + i] = reduce_at((size_t)r * cnt + i);
      break;
    case KOLO_COLL_ALL_GATHER:
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < cnt; i++) out[ob + (size_t)q * cnt + i] = inputs[(size_t)q][i];
      break;
    case KOLO_COLL_BROADCAST:
      for (size_t i = 0; i < cnt; i++) out[ob + i] = inputs[(size_t)c.root][i];
      break;
    case KOLO_COLL_REDUCE:
      if (r == c.root)
        for (size_t i = 0; i < cnt; i++) out[ob + i] = reduce_at(i);
      break;
    }
  }

  for (int ch = 0; ch < c.nchannels; ch++)
    for (int r = 0; r < n; r++)
      m.add_task(r, ch, &progs[(size_t)ch][(size_t)r]->p, in_view[(size_t)r], out_view[(size_t)r]);
  std::string err = m.run();
  if (!err.empty()) return err;
  if (c.op == ROp::kOrdered) {  // every rank's output as rank 0's, which is all written
    const std::vector<T> &got0 = m.arenas[(size_t)out_arena[0]];
    for (size_t i = 0; i < out_len; i++) {
      const T x = got0[out_view[0].off + i];
      if (x == poison<T>()) return "rank0.out[" + std::to_string(i) + "] never written";
      for (int r = 0; r < n; r++) want[(size_t)out_arena[(size_t)r]][out_view[(size_t)r].off + i] = x;
    }
  }
  return compare(m.arenas, want, names);
}

// Point-to-point: a list of messages (from, to), issued by each rank in list
// order as one group.  Rank r's i-th send goes from block i of its send
// buffer, its j-th receive into block j of its receive buffer; the receive
// buffer has one more block that nobody sends to (it must stay poisoned, as
// must the whole buffer of a rank that receives nothing).
template <typename T>
std::string run_p2p(const Case &c, const std::vector<std::pair<int, int>> &msgs) {
  const int n = c.nranks;
  const size_t cnt = c.count;
  Rng rng(c.seed);
  Ring ring = identity_ring(n);  // p2p programs ignore the ring
  Model<T> m(params_of(c));
  std::vector<std::string> names;
  std::vector<size_t> nsend((size_t)n, 0), nrecv((size_t)n, 0);
  for (auto [s, d] : msgs) nsend[(size_t)s]++, nrecv[(size_t)d]++;
  std::vector<int> sendb((size_t)n), recvb((size_t)n);
  for (int r = 0; r < n; r++) {
    sendb[(size_t)r] = m.add_arena(random_values<T>(rng, nsend[(size_t)r] * cnt));
    names.push_back("rank" + std::to_string(r) + ".send");
    recvb[(size_t)r] = m.add_arena(std::vector<T>((nrecv[(size_t)r] + 1) * cnt, poison<T>()));
    names.push_back("rank" + std::to_string(r) + ".recv");
  }
  // Message i: block sblk[i] of its sender, block rblk[i] of its receiver.
  std::vector<size_t> sblk(msgs.size()), rblk(msgs.size());
  std::fill(nsend.begin(), nsend.end(), 0);
  std::fill(nrecv.begin(), nrecv.end(), 0);
  for (size_t i = 0; i < msgs.size(); i++) {
    sblk[i] = nsend[(size_t)msgs[i].first]++;
    rblk[i] = nrecv[(size_t)msgs[i].second]++;
  }
  std::vector<std::vector<T>> want = m.arenas;
  // The k-th message from s to d is received by d's k-th receive from s
  // (connectors are FIFOs, programs on one connector run in issue order).
  for (size_t i = 0; i < msgs.size(); i++) {
    const auto &src = want[(size_t)sendb[(size_t)msgs[i].first]];
    std::copy(src.begin() + (ptrdiff_t)(sblk[i] * cnt),
              src.begin() + (ptrdiff_t)((sblk[i] + 1) * cnt),
              want[(size_t)recvb[(size_t)msgs[i].second]].begin() + (ptrdiff_t)(rblk[i] * cnt));
  }
  std::vector<std::unique_ptr<Prog>> progs;
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < msgs.size(); i++) {
      auto [s, d] = msgs[i];
      if (s == r) {
        progs.push_back(build(KOLO_COLL_SEND, ring, r, d));
        if (!progs.back()) return "build failed";
        View in{sendb[(size_t)r], sblk[i] * cnt, cnt, true, false};
        View out{};  // a send has no receive buffer
        for (int ch = 0; ch < c.nchannels; ch++) m.add_task(r, ch, &progs.back()->p, in, out);
      }
      if (d == r) {
        progs.push_back(build(KOLO_COLL_RECV, ring, r, s));
        if (!progs.back()) return "build failed";
        View in{};  // a receive has no send buffer
        View out{recvb[(size_t)r], rblk[i] * cnt, cnt, false, true};
        for (int ch = 0; ch < c.nchannels; ch++) m.add_task(r, ch, &progs.back()->p, in, out);
      }
    }
  }
  std::string err = m.run();
  if (!err.empty()) return err;
  return compare(m.arenas, want, names);
}

enum P2pPattern { kShift1, kShiftBack, kAllToAll, kTwiceToNext, kScatter, kNumPatterns };
const char *pattern_name(int p) {
  static const char *names[] = {"shift+1", "shift-1", "all-to-all", "twice-to-next", "scatter"};
  return names[p];
}

std::vector<std::pair<int, int>> pattern(int p, int n) {
  std::vector<std::pair<int, int>> m;
  switch (p) {
  case kShift1:
    for (int r = 0; r < n; r++) m.push_back({r, (r + 1) % n});
    break;
  case kShiftBack:
    for (int r = 0; r < n; r++) m.push_back({r, (r + n - 1) % n});
    break;
  case kAllToAll:  // NCCL-style: step j sends to r+j, receives from r-j; self included
    for (int j = 0; j < n; j++)
      for (int r = 0; r < n; r++) m.push_back({r, (r + j) % n});
    break;
  case kTwiceToNext:  // two messages on one connector, in issue order
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < n; r++) m.push_back({r, (r + 1) % n});
    break;
  case kScatter:  // only rank 0 sends: other blocks stay poisoned
    for (int r = 1; r < n; r++) m.push_back({0, r});
    break;
  }
  return m;
}

// Runs a grid of cases, stops reporting after a few failures.
struct Grid {
  int failures = 0;
  long cases = 0;
  bool go() const { return failures < 10; }
  void check(const Case &c, const std::string &err, const char *extra = "") {
    cases++;
    if (err.empty()) return;
    failures++;
    ADD_FAILURE() << c.str() << extra << ": " << err;
  }
};

const size_t kCounts[] = {0, 1, 2, 7, 63, 64, 65, 1000, 4097};

// Under sanitizers (about 10x slower) the model grids run one case in four
// above 7 elements; the structural and geometry tests run whole.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
bool sampled(const Case &c) {
  return !kSanitized || c.count <= 7 || (c.seed >> 40) % 4 == 0;
}
const int kChannels[] = {1, 2, 3};
const size_t kSlots[] = {16, 64, 1024};
const size_t kElemSizes[] = {4, 8};

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

// ---- structural checks -----------------------------------------------------------

TEST(ScheduleRing, BuildFromHosts) {
  for (int n = 1; n <= 16; n++) {
    for (int hosts = 1; hosts <= std::min(n, 4); hosts++) {
      SCOPED_TRACE("n=" + std::to_string(n) + " hosts=" + std::to_string(hosts));
      std::vector<uint64_t> host_of((size_t)n);
      // Interleaved rank order, arbitrary ids (not 0..hosts-1, not sorted).
      for (int r = 0; r < n; r++) host_of[(size_t)r] = 1000003ull * (uint64_t)(hosts - r % hosts);
      EXPECT_EQ(kolo_count_hosts(n, host_of.data()), hosts);
      kolo_ring kr;
      ASSERT_EQ(kolo_ring_build(n, host_of.data(), &kr), koloSuccess);
      ASSERT_EQ(kr.nranks, n);
      std::vector<int> seen((size_t)n, 0);
      for (int i = 0; i < n; i++) {
        ASSERT_GE(kr.order[i], 0);
        ASSERT_LT(kr.order[i], n);
        seen[(size_t)kr.order[i]]++;
        EXPECT_EQ(kr.pos[kr.order[i]], i);
      }
      for (int r = 0; r < n; r++) EXPECT_EQ(seen[(size_t)r], 1) << "rank " << r;
      // Each host's ranks contiguous, hosts in the order of their lowest
      // rank, ranks of a host ascending: here host h = r % hosts.
      int i = 0;
      for (int h = 0; h < hosts; h++)
        for (int r = h; r < n; r += hosts, i++) EXPECT_EQ(kr.order[i], r) << "position " << i;
      // Host changes along the ring (cyclically): one per host (or none).
      int changes = 0;
      for (int k = 0; k < n; k++)
        changes += host_of[(size_t)kr.order[k]] != host_of[(size_t)kr.order[(k + 1) % n]];
      EXPECT_EQ(changes, hosts == 1 ? 0 : hosts);
      kolo_ring_free(&kr);
      EXPECT_EQ(kr.order, nullptr);
    }
  }
  // Hosts in blocks but listed out of order: 0 0 1 1 0 2 1
  std::vector<uint64_t> h = {7, 7, 3, 3, 7, 9, 3};
  EXPECT_EQ(kolo_count_hosts(7, h.data()), 3);
  kolo_ring kr;
  ASSERT_EQ(kolo_ring_build(7, h.data(), &kr), koloSuccess);
  std::vector<int> got(kr.order, kr.order + 7), want = {0, 1, 4, 2, 3, 6, 5};
  EXPECT_EQ(got, want);
  kolo_ring_free(&kr);
}

TEST(ScheduleGeometry, RoundsCoverEveryElementOnce) {
  const size_t counts[] = {0, 1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 255, 1000, 4097, 12345};
  for (int layout : {KOLO_LAYOUT_RING, KOLO_LAYOUT_FLAT})
    for (size_t esz : {1, 2, 4, 8})
      for (int n : {1, 2, 3, 7, 16})
        for (int nch : {1, 2, 3, 4})
          for (size_t chunk_bytes : {64, 256, 4096})
            for (size_t count : counts) {
              const size_t align = std::max<size_t>(1, 64 / esz);
              kolo_geometry g{count, esz, n, nch, chunk_bytes / esz, layout};
              SCOPED_TRACE(::testing::Message()
                           << "layout " << layout << " esz " << esz << " n " << n << " nch " << nch
                           << " chunk " << g.chunk_elems << " count " << count);
              const size_t parts =
                  layout == KOLO_LAYOUT_RING ? (size_t)nch * (size_t)n : (size_t)nch;
              const int nchunks = layout == KOLO_LAYOUT_RING ? n : 1;
              std::vector<uint8_t> hit(count, 0);
              size_t base = 0, rounds = 0;
              for (size_t rce; (rce = kolo_round_chunk(&g, base)) != 0; rounds++) {
                ASSERT_LE(rce, g.chunk_elems);
                ASSERT_EQ(rce % align, 0u) << "chunk not a multiple of 64 bytes";
                size_t span = kolo_round_span(&g, rce);
                ASSERT_EQ(span, rce * parts);
                if (rce < g.chunk_elems) {
                  // only the last round is short, and it spreads the rest
                  // over all parts as evenly as alignment allows
                  size_t rem = count - base;
                  ASSERT_GE(span, rem);
                  ASSERT_LT(span - rem, parts * align);
                }
                for (int ch = 0; ch < nch; ch++)
                  for (int k = 0; k < nchunks; k++) {
                    size_t off, m;
                    kolo_chunk_range(&g, base, rce, ch, k, 0, &off, &m);
                    ASSERT_LE(m, rce);
                    for (size_t i = off; i < off + m; i++) {
                      ASSERT_LT(i, count);
                      ASSERT_EQ(hit[i]++, 0) << "element " << i << " in two chunks";
                    }
                    if (layout == KOLO_LAYOUT_FLAT) {
                      // blocked: same range shifted by chunk * count; the
                      // chunk index is ignored when not blocked
                      for (int b : {0, 1, n - 1}) {
                        size_t boff, bm, uoff, um;
                        kolo_chunk_range(&g, base, rce, ch, b, 1, &boff, &bm);
                        kolo_chunk_range(&g, base, rce, ch, b, 0, &uoff, &um);
                        ASSERT_EQ(bm, m);
                        ASSERT_EQ(um, m);
                        ASSERT_EQ(uoff, off);
                        if (m) {
                          ASSERT_EQ(boff, off + (size_t)b * count);
                        }
                      }
                    }
                  }
                base += span;
                ASSERT_LT(rounds, count + 1) << "rounds do not end";
              }
              for (size_t i = 0; i < count; i++) ASSERT_EQ(hit[i], 1) << "element " << i;
              const size_t per_round = parts * g.chunk_elems;
              EXPECT_EQ(rounds, (count + per_round - 1) / per_round);
              EXPECT_EQ(kolo_round_chunk(&g, count), 0u);
              EXPECT_EQ(kolo_round_chunk(&g, count + 7), 0u);
            }
}

// Chunk tag of a buffer in a program (see Model::chunk_tag).
int tag_of(const kolo_program &p, int buf, int chunk) {
  bool meaningful =
      p.layout == KOLO_LAYOUT_RING || (buf == KOLO_BUF_IN ? p.in_blocked : p.out_blocked);
  return meaningful ? chunk : -1;
}
int step_tag(const kolo_program &p, const kolo_step &s) {
  int t = kolo_step_reads_src(s.op) ? tag_of(p, s.src_buf, s.src_chunk) : -1;
  if (t < 0 && kolo_step_writes_dst(s.op)) t = tag_of(p, s.dst_buf, s.dst_chunk);
  return t;
}

// Checks one rank's program of a ring collective (n ranks, ring, root).
void check_program(int coll, const Ring &ring, int rank, int root, const kolo_program &p) {
  const int n = ring.r.nranks;
  SCOPED_TRACE(::testing::Message()
               << kolo_coll_name(coll) << " n=" << n << " rank=" << rank << " root=" << root);
  // size: a function of n only (the builder never sees the message size)
  int want_steps = coll == KOLO_COLL_ALL_REDUCE ? (n == 1 ? 1 : 2 * n - 1)
                   : (coll == KOLO_COLL_REDUCE_SCATTER || coll == KOLO_COLL_ALL_GATHER) ? n
                                                                                        : 1;
  ASSERT_EQ(p.nsteps, want_steps);
  ASSERT_NE(p.steps, nullptr);
  EXPECT_EQ(p.layout, coll == KOLO_COLL_ALL_REDUCE ? KOLO_LAYOUT_RING : KOLO_LAYOUT_FLAT);
  EXPECT_EQ(p.in_blocked, coll == KOLO_COLL_REDUCE_SCATTER ? 1 : 0);
  EXPECT_EQ(p.out_blocked, coll == KOLO_COLL_ALL_GATHER ? 1 : 0);
  // peers
  int want_send = n == 1 ? -1 : ring.next(rank), want_recv = n == 1 ? -1 : ring.prev(rank);
  if (n > 1 && coll == KOLO_COLL_BROADCAST) {
    if (rank == root) want_recv = -1;
    if (ring.next(rank) == root) want_send = -1;
  }
  if (n > 1 && coll == KOLO_COLL_REDUCE) {
    if (rank == root) want_send = -1;
    if (ring.prev(rank) == root) want_recv = -1;
  }
  EXPECT_EQ(p.send_peer, want_send);
  EXPECT_EQ(p.recv_peer, want_recv);
  // steps
  int sends = 0, recvs = 0, finals = 0;
  std::vector<int> reads((size_t)n, 0),
      writes((size_t)n, 0);  // per chunk (blocked / ring), else [0]
  for (int i = 0; i < p.nsteps; i++) {
    const kolo_step &s = p.steps[i];
    SCOPED_TRACE(::testing::Message() << "step " << i << " " << op_name(s.op));
    ASSERT_LT(s.op, KOLO_STEP_NUM_OPS);
    EXPECT_EQ(s.flags & ~KOLO_STEP_FINAL, 0u);
    EXPECT_LE(s.src_buf, 1);
    EXPECT_LE(s.dst_buf, 1);
    sends += kolo_step_sends(s.op);
    recvs += kolo_step_recvs(s.op);
    if (kolo_step_sends(s.op)) {
      EXPECT_GE(p.send_peer, 0);
    }
    if (kolo_step_recvs(s.op)) {
      EXPECT_GE(p.recv_peer, 0);
    }
    EXPECT_TRUE(kolo_step_reads_src(s.op) || kolo_step_writes_dst(s.op));
    if (kolo_step_reduces(s.op)) {
      EXPECT_TRUE(kolo_step_recvs(s.op));
      EXPECT_TRUE(kolo_step_reads_src(s.op));
    }
    if (kolo_step_reads_src(s.op)) {
      EXPECT_EQ(s.src_buf, KOLO_BUF_IN) << "reads OUT (not yet written)";
      int t = tag_of(p, s.src_buf, s.src_chunk);
      if (t >= 0) {
        ASSERT_LT(t, n);
        ASSERT_GE(t, 0);
      }
      reads[(size_t)std::max(t, 0)]++;
    }
    if (kolo_step_writes_dst(s.op)) {
      EXPECT_EQ(s.dst_buf, KOLO_BUF_OUT) << "writes IN";
      int t = tag_of(p, s.dst_buf, s.dst_chunk);
      if (t >= 0) {
        ASSERT_LT(t, n);
        ASSERT_GE(t, 0);
      }
      writes[(size_t)std::max(t, 0)]++;
    }
    if (s.flags & KOLO_STEP_FINAL) {
      finals++;
      EXPECT_TRUE(kolo_step_writes_dst(s.op)) << "FINAL on a step that writes nothing";
      EXPECT_TRUE(kolo_step_reduces(s.op) || s.op == KOLO_STEP_COPY)
          << "FINAL on a step that only copies received data";
    }
    if (kolo_step_reads_src(s.op) && kolo_step_writes_dst(s.op) &&
        tag_of(p, s.src_buf, s.src_chunk) >= 0 && tag_of(p, s.dst_buf, s.dst_chunk) >= 0) {
      EXPECT_EQ(s.src_chunk, s.dst_chunk);
    }
  }
  if (p.send_peer >= 0) {
    EXPECT_GT(sends, 0) << "a send connector nothing uses";
  }
  if (p.recv_peer >= 0) {
    EXPECT_GT(recvs, 0) << "a receive connector nothing uses";
  }
  // What each collective reads and writes, per round.
  const bool reducing =
      coll == KOLO_COLL_ALL_REDUCE || coll == KOLO_COLL_REDUCE_SCATTER || coll == KOLO_COLL_REDUCE;
  if (coll == KOLO_COLL_REDUCE && rank != root)
    EXPECT_EQ(finals, 0);
  else
    EXPECT_EQ(finals, reducing ? 1 : 0);
  for (int k = 0; k < n; k++) {
    int want_r = 0, want_w = 0;
    switch (coll) {
    case KOLO_COLL_ALL_REDUCE:
    case KOLO_COLL_REDUCE_SCATTER:  // every input chunk / block once
      want_r = 1;
      want_w = coll == KOLO_COLL_ALL_REDUCE ? 1 : k == 0;
      break;
    case KOLO_COLL_ALL_GATHER:  // every output block once
      want_r = k == 0;
      want_w = 1;
      break;
    case KOLO_COLL_BROADCAST:
      want_r = k == 0 && rank == root;
      want_w = k == 0;
      break;
    case KOLO_COLL_REDUCE:
      want_r = k == 0;
      want_w = k == 0 && rank == root;
      break;
    }
    EXPECT_EQ(reads[(size_t)k], want_r) << "reads of chunk " << k;
    EXPECT_EQ(writes[(size_t)k], want_w) << "writes of chunk " << k;
  }
  for (int i = 0; i < p.nsteps; i++) {
    const kolo_step &s = p.steps[i];
    if (!(s.flags & KOLO_STEP_FINAL)) continue;
    if (coll == KOLO_COLL_ALL_REDUCE) {
      EXPECT_EQ(s.dst_chunk, rank) << "FINAL on another chunk";
    }
    if (coll == KOLO_COLL_REDUCE_SCATTER) {
      EXPECT_EQ(s.src_chunk, rank) << "FINAL on another block";
    }
    EXPECT_EQ(i, p.nsteps - 1 - (coll == KOLO_COLL_ALL_REDUCE && n > 1 ? n - 1 : 0))
        << "FINAL before the last addend";
  }
}

TEST(ScheduleStructure, ProgramsOfRingCollectives) {
  const int colls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER,
                       KOLO_COLL_BROADCAST, KOLO_COLL_REDUCE};
  for (int n = 1; n <= 16; n++)
    for (int kind : {kIdentity, kShuffled, kHosts2, kHosts3, kPerChannel, kHostsRotated}) {
      Ring ring = make_rings(kind, n, 1, 77 + (uint64_t)n)[0];
      for (int coll : colls) {
        int nroots = (coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE) ? n : 1;
        for (int root = 0; root < nroots; root++) {
          std::vector<std::unique_ptr<Prog>> progs;
          for (int r = 0; r < n; r++) {
            progs.push_back(build(coll, ring, r, root));
            ASSERT_TRUE(progs.back());
            check_program(coll, ring, r, root, progs.back()->p);
            // deterministic: the same program when built again
            auto again = build(coll, ring, r, root);
            ASSERT_TRUE(again);
            ASSERT_EQ(again->p.nsteps, progs.back()->p.nsteps);
            EXPECT_EQ(0, memcmp(again->p.steps, progs.back()->p.steps,
                                sizeof(kolo_step) * (size_t)again->p.nsteps));
          }
          // Both ends of every connector agree step by step: the k-th send
          // of a and the k-th receive of b (b = a's send_peer) name the same
          // chunk, so they cut the same number of slices for any count.
          for (int a = 0; a < n; a++) {
            const kolo_program &pa = progs[(size_t)a]->p;
            if (pa.send_peer < 0) continue;
            const kolo_program &pb = progs[(size_t)pa.send_peer]->p;
            ASSERT_EQ(pb.recv_peer, a) << "rank " << pa.send_peer << " does not receive from " << a;
            std::vector<int> st, rt;
            for (int i = 0; i < pa.nsteps; i++)
              if (kolo_step_sends(pa.steps[i].op)) st.push_back(step_tag(pa, pa.steps[i]));
            for (int i = 0; i < pb.nsteps; i++)
              if (kolo_step_recvs(pb.steps[i].op)) rt.push_back(step_tag(pb, pb.steps[i]));
            EXPECT_EQ(st, rt) << kolo_coll_name(coll) << " connector " << a << "->" << pa.send_peer;
          }
          for (int b = 0; b < n; b++)
            if (progs[(size_t)b]->p.recv_peer >= 0) {
              EXPECT_EQ(progs[(size_t)progs[(size_t)b]->p.recv_peer]->p.send_peer, b);
            }
        }
      }
    }
}

TEST(ScheduleStructure, PointToPointPrograms) {
  for (int n = 1; n <= 16; n++) {
    Ring ring = identity_ring(n);
    for (int r = 0; r < n; r++)
      for (int peer = 0; peer < n; peer++) {
        auto s = build(KOLO_COLL_SEND, ring, r, peer);
        auto v = build(KOLO_COLL_RECV, ring, r, peer);
        ASSERT_TRUE(s && v);
        EXPECT_EQ(s->p.send_peer, peer);
        EXPECT_EQ(s->p.recv_peer, -1);
        EXPECT_EQ(v->p.send_peer, -1);
        EXPECT_EQ(v->p.recv_peer, peer);
        ASSERT_EQ(s->p.nsteps, 1);
        ASSERT_EQ(v->p.nsteps, 1);
        EXPECT_EQ(s->p.steps[0].op, KOLO_STEP_SEND);
        EXPECT_EQ(s->p.steps[0].src_buf, KOLO_BUF_IN);
        EXPECT_EQ(v->p.steps[0].op, KOLO_STEP_RECV);
        EXPECT_EQ(v->p.steps[0].dst_buf, KOLO_BUF_OUT);
        EXPECT_EQ(s->p.steps[0].flags, 0);
        EXPECT_EQ(v->p.steps[0].flags, 0);
        for (const auto *p : {&s->p, &v->p}) {
          EXPECT_EQ(p->layout, KOLO_LAYOUT_FLAT);
          EXPECT_EQ(p->in_blocked, 0);
          EXPECT_EQ(p->out_blocked, 0);
        }
      }
  }
}

TEST(ScheduleStructure, NamesAndBadCollective) {
  EXPECT_STREQ(kolo_coll_name(KOLO_COLL_ALL_REDUCE), "AllReduce");
  EXPECT_STREQ(kolo_coll_name(KOLO_COLL_RECV), "Recv");
  EXPECT_STREQ(kolo_coll_name(-1), "?");
  EXPECT_STREQ(kolo_coll_name(KOLO_COLL_NUM), "?");
  Ring ring = identity_ring(4);
  kolo_program p{};
  p.nsteps = 123;
  EXPECT_EQ(kolo_schedule_build(KOLO_COLL_NUM, &ring.r, 0, 0, KOLO_ALGO_RING, &p), koloInternalError);
  EXPECT_EQ(p.nsteps, 123) << "*out touched on failure";
}

// ---- the model over the grid ---------------------------------------------------------

// The model's own checks: it must catch a broken program.
TEST(ScheduleModel, CatchesBrokenPrograms) {
  const int n = 4;
  Ring ring = identity_ring(n);
  Case c;
  c.nranks = n;
  c.count = 1000;
  // The FINAL flag divides (avg = 1.0); without it the sum comes out.
  for (bool strip : {false, true}) {
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) progs.push_back(build(KOLO_COLL_ALL_REDUCE, ring, r, 0));
    ModelParams mp = params_of(c);
    mp.op = ROp::kAvg;
    mp.div = n;
    Model<double> m(mp);
    for (int r = 0; r < n; r++) {
      if (strip)
        for (int i = 0; i < progs[(size_t)r]->p.nsteps; i++) progs[(size_t)r]->p.steps[i].flags = 0;
      int in = m.add_arena(std::vector<double>(c.count, 1.0));
      int out = m.add_arena(std::vector<double>(c.count, 0.0));
      m.add_task(r, 0, &progs[(size_t)r]->p, View{in, 0, c.count, true, false},
                 View{out, 0, c.count, false, true});
    }
    ASSERT_EQ(m.run(), "");
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < c.count; i++)
        ASSERT_EQ(m.arenas[(size_t)(2 * r + 1)][i], strip ? (double)n : 1.0);
  }
  // Two ranks swapping step order deadlock or mismatch.
  {
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) progs.push_back(build(KOLO_COLL_ALL_GATHER, ring, r, 0));
    std::swap(progs[1]->p.steps[0], progs[1]->p.steps[n - 1]);  // recv first: waits forever?
    Model<int64_t> m(params_of(c));
    for (int r = 0; r < n; r++) {
      int in = m.add_arena(std::vector<int64_t>(c.count, r));
      int out = m.add_arena(std::vector<int64_t>(c.count * n, -1));
      m.add_task(r, 0, &progs[(size_t)r]->p, View{in, 0, c.count, true, false},
                 View{out, 0, c.count * n, false, true});
    }
    EXPECT_NE(m.run(), "");
  }
  // A cyclic wait: every rank receives first.
  {
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) {
      progs.push_back(build(KOLO_COLL_ALL_REDUCE, ring, r, 0));
      std::rotate(progs[(size_t)r]->p.steps, progs[(size_t)r]->p.steps + 1,
                  progs[(size_t)r]->p.steps + progs[(size_t)r]->p.nsteps);
    }
    Model<int64_t> m(params_of(c));
    for (int r = 0; r < n; r++) {
      int in = m.add_arena(std::vector<int64_t>(c.count, r));
      int out = m.add_arena(std::vector<int64_t>(c.count, -1));
      m.add_task(r, 0, &progs[(size_t)r]->p, View{in, 0, c.count, true, false},
                 View{out, 0, c.count, false, true});
    }
    std::string err = m.run();
    EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  }
  // Bounded slots: a chain where everyone sends a whole chunk before
  // receiving deadlocks with fewer slots than a chunk needs.
  {
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) progs.push_back(build(KOLO_COLL_ALL_GATHER, ring, r, 0));
    ModelParams mp = params_of(c);
    mp.capacity = 1;
    mp.turn_slices = 100;
    Model<int64_t> m(mp);
    for (int r = 0; r < n; r++) {
      int in = m.add_arena(std::vector<int64_t>(c.count, r));
      int out = m.add_arena(std::vector<int64_t>(c.count * n, -1));
      m.add_task(r, 0, &progs[(size_t)r]->p, View{in, 0, c.count, true, false},
                 View{out, 0, c.count * n, false, true});
    }
    std::string err = m.run();
    EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  }
}

// Capacity for a case: unbounded, or the slots of a real connector (8:
// chunk_elems = nslots/2 slots), alternating.
size_t capacity_for(uint64_t h) {
  return (h & 1) ? 8 : 0;
}

// A case's geometry drawn from bits of its seed: channels, slot and element
// sizes, FIFO bound.
void draw_geometry(Case &c) {
  c.nchannels = kChannels[c.seed % 3];
  c.slot_elems = kSlots[(c.seed >> 4) % 3];
  c.elem_size = kElemSizes[(c.seed >> 8) % 2];
  c.capacity = capacity_for(c.seed >> 12);
}

// The same, with the ring kind and in-place from the seed too.
void draw_geometry_ring_in_place(Case &c) {
  draw_geometry(c);
  c.ring_kind = (int)((c.seed >> 12) % kNumRingKinds);
  c.in_place = (c.seed >> 16) & 1;
  c.capacity = capacity_for(c.seed >> 20);
}

TEST(ScheduleModel, AllReduceFullGrid) {
  // N = 1..16 x every count x channels x slot sizes x elem sizes, sum on
  // int64, rings rotating through the kinds, in-place every other case.
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  for (int n = 1; n <= 16 && g.go(); n++)
    for (size_t count : kCounts)
      for (int nch : kChannels)
        for (size_t slot : kSlots)
          for (size_t esz : kElemSizes) {
            Case c;
            c.coll = KOLO_COLL_ALL_REDUCE;
            c.nranks = n;
            c.count = count;
            c.nchannels = nch;
            c.slot_elems = slot;
            c.elem_size = esz;
            c.seed = mix(mix((uint64_t)n, count), mix((uint64_t)nch * 7 + esz, slot));
            c.ring_kind = (int)(c.seed % kNumRingKinds);
            c.in_place = (c.seed >> 8) & 1;
            c.capacity = capacity_for(c.seed >> 16);
            if (sampled(c)) g.check(c, run_collective<int64_t>(c));
          }
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  printf("[          ] %ld all-reduce cases in %lld ms\n", g.cases, (long long)ms);
}

TEST(ScheduleModel, AllReduceEveryRingOpAndPlacement) {
  // Every ring kind x in-place x op (sum, max, avg) for N = 1..16, at a few
  // counts, one geometry per case.
  Grid g;
  const size_t counts[] = {1, 65, 1000, 4097};
  for (int n = 1; n <= 16 && g.go(); n++)
    for (size_t count : counts)
      for (int kind = 0; kind < kNumRingKinds; kind++)
        for (bool inplace : {false, true})
          for (ROp op : {ROp::kSum, ROp::kMax, ROp::kAvg}) {
            Case c;
            c.coll = KOLO_COLL_ALL_REDUCE;
            c.nranks = n;
            c.count = count;
            c.ring_kind = kind;
            c.in_place = inplace;
            c.op = op;
            c.seed = mix(mix((uint64_t)n, count), mix((uint64_t)kind, (uint64_t)op * 2 + inplace));
            draw_geometry(c);
            if (sampled(c))
              g.check(c, op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
          }
}

// Reduce-scatter, all-gather, broadcast and reduce: N = 1..16 x every count,
// geometry (channels, slot, elem size), ring kind, in-place, op and root
// rotating from case to case, plus the full geometry product at a few N.
void other_collectives(int coll) {
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  const bool rooted = coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE;
  const bool reducing = coll != KOLO_COLL_ALL_GATHER && coll != KOLO_COLL_BROADCAST;
  for (int n = 1; n <= 16 && g.go(); n++)
    for (size_t count : kCounts)
      for (int nch : kChannels)
        for (size_t slot : kSlots) {
          const bool full = n == 1 || n == 2 || n == 3 || n == 5 || n == 8 || n == 16;
          for (size_t esz : kElemSizes) {
            Case c;
            c.coll = coll;
            c.nranks = n;
            c.count = count;
            c.nchannels = nch;
            c.slot_elems = slot;
            c.elem_size = esz;
            c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)coll, count),
                         mix((uint64_t)nch * 7 + esz, slot));
            if (!full && esz == 8) continue;
            c.ring_kind = (int)(c.seed % kNumRingKinds);
            c.in_place = (c.seed >> 8) & 1;
            c.capacity = capacity_for(c.seed >> 16);
            // every root at every n, over the counts
            c.root = rooted ? (int)((c.seed >> 20) % (uint64_t)n) : 0;
            int opk = (int)((c.seed >> 24) % 3);
            // copying collectives also run with avg's divisor: no FINAL
            // step may divide data it only copies
            c.op = opk == 0 ? ROp::kSum : opk == 1 ? ROp::kMax : ROp::kAvg;
            if (!sampled(c)) continue;
            std::string err =
                c.op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c);
            g.check(c, err);
          }
        }
  // Every root at every N with the largest counts.
  if (rooted)
    for (int n = 1; n <= 16 && g.go(); n++)
      for (int root = 0; root < n; root++)
        for (size_t count : {(size_t)65, (size_t)4097}) {
          Case c;
          c.coll = coll;
          c.nranks = n;
          c.count = count;
          c.root = root;
          c.seed = mix(mix((uint64_t)n, (uint64_t)root), count + (uint64_t)coll);
          draw_geometry_ring_in_place(c);
          c.op = reducing && ((c.seed >> 24) & 1) ? ROp::kAvg : ROp::kSum;
          g.check(c, c.op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
        }
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  printf("[          ] %ld %s cases in %lld ms\n", g.cases, kolo_coll_name(coll), (long long)ms);
}

TEST(ScheduleModel, ReduceScatterGrid) {
  other_collectives(KOLO_COLL_REDUCE_SCATTER);
}
TEST(ScheduleModel, AllGatherGrid) {
  other_collectives(KOLO_COLL_ALL_GATHER);
}
TEST(ScheduleModel, BroadcastGrid) {
  other_collectives(KOLO_COLL_BROADCAST);
}
TEST(ScheduleModel, ReduceGrid) {
  other_collectives(KOLO_COLL_REDUCE);
}

TEST(ScheduleModel, InPlaceAndOpsEveryCollective) {
  // Each collective x ring kind x in-place x op at a few N and counts.
  Grid g;
  const int colls[] = {KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER, KOLO_COLL_BROADCAST,
                       KOLO_COLL_REDUCE};
  for (int coll : colls)
    for (int n : {1, 2, 3, 4, 7, 16})
      for (size_t count : {(size_t)1, (size_t)64, (size_t)1000})
        for (int kind = 0; kind < kNumRingKinds && g.go(); kind++)
          for (bool inplace : {false, true})
            for (ROp op : {ROp::kSum, ROp::kMax, ROp::kAvg}) {
              Case c;
              c.coll = coll;
              c.nranks = n;
              c.count = count;
              c.ring_kind = kind;
              c.in_place = inplace;
              c.op = op;
              c.seed = mix(mix((uint64_t)coll * 32 + (uint64_t)n, count),
                           mix((uint64_t)kind, (uint64_t)op * 2 + inplace));
              c.root = (int)(c.seed % (uint64_t)n);
              c.nchannels = kChannels[(c.seed >> 4) % 3];
              c.slot_elems = kSlots[(c.seed >> 8) % 3];
              c.elem_size = kElemSizes[(c.seed >> 12) % 2];
              c.capacity = capacity_for(c.seed >> 16);
              if (sampled(c))
                g.check(c,
                        op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
            }
}

TEST(ScheduleModel, FewestSlots) {
  // Connectors with 2 or 4 slots (chunk = 1 or 2 slots), FIFOs bounded to
  // them: every collective must still make progress (no deadlock) and be
  // right.
  Grid g;
  const int colls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER,
                       KOLO_COLL_BROADCAST, KOLO_COLL_REDUCE};
  for (int coll : colls)
    for (int n : {2, 3, 5, 16})
      for (size_t count : {(size_t)65, (size_t)1000, (size_t)4097})
        for (int nslots : {2, 4}) {
          Case c;
          c.coll = coll;
          c.nranks = n;
          c.count = count;
          c.nslots = nslots;
          c.capacity = (size_t)nslots;
          c.seed = mix(mix((uint64_t)coll * 32 + (uint64_t)n, count), (uint64_t)nslots);
          c.root = (int)(c.seed % (uint64_t)n);
          c.nchannels = kChannels[(c.seed >> 4) % 3];
          c.slot_elems = 16;
          c.elem_size = 4;
          c.ring_kind = (int)((c.seed >> 8) % kNumRingKinds);
          c.in_place = (c.seed >> 12) & 1;
          if (sampled(c)) g.check(c, run_collective<int64_t>(c));
        }
  for (int pat = 0; pat < kNumPatterns; pat++)
    for (int n : {1, 2, 5, 8}) {
      Case c;
      c.coll = KOLO_COLL_SEND;
      c.nranks = n;
      c.count = 1000;
      c.nslots = 2;
      c.capacity = 2;
      c.nchannels = 2;
      c.seed = mix((uint64_t)pat, (uint64_t)n);
      g.check(c, run_p2p<int64_t>(c, pattern(pat, n)), pattern_name(pat));
    }
}

TEST(ScheduleModel, SendRecvPatterns) {
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  for (int pat = 0; pat < kNumPatterns; pat++)
    for (int n = 1; n <= 16 && g.go(); n++)
      for (size_t count : kCounts)
        for (int nch : kChannels) {
          if (pat == kAllToAll && n > 8 && count > 1000) continue;  // n^2 messages
          Case c;
          c.coll = KOLO_COLL_SEND;
          c.nranks = n;
          c.count = count;
          c.nchannels = nch;
          c.seed = mix(mix((uint64_t)pat * 32 + (uint64_t)n, count), (uint64_t)nch);
          c.slot_elems = kSlots[(c.seed >> 4) % 3];
          c.elem_size = kElemSizes[(c.seed >> 8) % 2];
          c.capacity = capacity_for(c.seed >> 12);
          // avg's divisor in doubles: a copy must never divide
          c.op = (c.seed >> 16) & 1 ? ROp::kAvg : ROp::kSum;
          auto msgs = pattern(pat, n);
          if (!sampled(c)) continue;
          std::string err =
              c.op == ROp::kAvg ? run_p2p<double>(c, msgs) : run_p2p<int64_t>(c, msgs);
          std::string extra = std::string(" pattern=") + pattern_name(pat);
          g.check(c, err, extra.c_str());
        }
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  printf("[          ] %ld send/recv cases in %lld ms\n", g.cases, (long long)ms);
}

// ---- multi-peer collectives: all-to-all, gather, scatter --------------------------------
//
// Their programs name a peer per step (ring/program.h); the model sends each
// step's slices into the FIFO of that peer.  Buffers (n ranks, count c):
//   all-to-all  in n*c, out n*c: out[r] block j = in[j] block r (never in place:
//               the API refuses it)
//   gather      in c; the root's out n*c: block j = in[j]; a non-root's out is
//               neither read nor written (poisoned, write-protected); in place
//               the root's input is its block of out
//   scatter     the root's in n*c; out c = in[root] block r; a non-root's in is
//               neither read nor written; in place the root's out is its block
//               of in

// Rank r's views and the expected arenas of a multi-peer case, built in m.
template <typename T>
struct MultiPeerBufs {
  std::vector<View> in, out;
  std::vector<std::string> names;
  std::vector<std::vector<T>> want;
};

template <typename T>
MultiPeerBufs<T> multi_peer_bufs(const Case &c, Model<T> &m) {
  const int n = c.nranks;
  const size_t cnt = c.count, all = cnt * (size_t)n;
  Rng rng(c.seed);
  MultiPeerBufs<T> b;
  b.in.resize((size_t)n);
  b.out.resize((size_t)n);
  std::vector<std::vector<T>> inputs((size_t)n);
  std::vector<int> out_arena((size_t)n);
  for (int r = 0; r < n; r++) {
    const bool root = r == c.root, a2a = c.coll == KOLO_COLL_ALL_TO_ALL;
    const size_t in_len = a2a || (c.coll == KOLO_COLL_SCATTER && root) ? all : cnt;
    const size_t out_len = a2a || (c.coll == KOLO_COLL_GATHER && root) ? all : cnt;
    inputs[(size_t)r] = random_values<T>(rng, in_len);
    const std::string rs = "rank" + std::to_string(r);
    if (c.in_place && root && c.coll == KOLO_COLL_GATHER) {
      std::vector<T> buf(all, poison<T>());
      std::copy(inputs[(size_t)r].begin(), inputs[(size_t)r].end(), buf.begin() + (ptrdiff_t)((size_t)r * cnt));
      int a = m.add_arena(buf);
      b.names.push_back(rs + ".inout");
      out_arena[(size_t)r] = a;
      b.in[(size_t)r] = View{a, (size_t)r * cnt, cnt, true, false};
      b.out[(size_t)r] = View{a, 0, all, false, true};
    } else if (c.in_place && root && c.coll == KOLO_COLL_SCATTER) {
      int a = m.add_arena(inputs[(size_t)r]);
      b.names.push_back(rs + ".inout");
      out_arena[(size_t)r] = a;
      b.in[(size_t)r] = View{a, 0, all, true, false};
      b.out[(size_t)r] = View{a, (size_t)r * cnt, cnt, false, true};
    } else {
      int ia = m.add_arena(inputs[(size_t)r]);
      b.names.push_back(rs + ".in");
      int oa = m.add_arena(std::vector<T>(out_len, poison<T>()));
      b.names.push_back(rs + ".out");
      out_arena[(size_t)r] = oa;
      b.in[(size_t)r] = View{ia, 0, in_len, c.coll != KOLO_COLL_SCATTER || root, false};
      b.out[(size_t)r] = View{oa, 0, out_len, false, c.coll != KOLO_COLL_GATHER || root};
    }
  }
  b.want = m.arenas;
  for (int r = 0; r < n; r++) {
    std::vector<T> &out = b.want[(size_t)out_arena[(size_t)r]];
    const size_t ob = b.out[(size_t)r].off;
    for (int j = 0; j < n; j++)
      for (size_t i = 0; i < cnt; i++) {
        if (c.coll == KOLO_COLL_ALL_TO_ALL)
          out[ob + (size_t)j * cnt + i] = inputs[(size_t)j][(size_t)r * cnt + i];
        else if (c.coll == KOLO_COLL_GATHER && r == c.root)
          out[ob + (size_t)j * cnt + i] = inputs[(size_t)j][i];
        else if (c.coll == KOLO_COLL_SCATTER && j == 0)
          out[ob + i] = inputs[(size_t)c.root][(size_t)r * cnt + i];
      }
  }
  return b;
}

// Runs one multi-peer collective in the model and checks every element.
template <typename T>
std::string run_multi_peer(const Case &c, const Mutator &mutate = nullptr) {
  const int n = c.nranks;
  std::vector<Ring> rings = make_rings(c.ring_kind, n, c.nchannels, c.seed);
  std::vector<std::vector<std::unique_ptr<Prog>>> progs((size_t)c.nchannels);
  for (int ch = 0; ch < c.nchannels; ch++)
    for (int r = 0; r < n; r++) {
      progs[(size_t)ch].push_back(build(c.coll, rings[(size_t)ch], r, c.root));
      if (!progs[(size_t)ch].back()) return "build failed";
    }
  for (int ch = 0; mutate && ch < c.nchannels; ch++) mutate(ch, progs[(size_t)ch]);
  ModelParams mp = params_of(c);
  mp.check_chunk_tags = c.coll != KOLO_COLL_ALL_TO_ALL;
  Model<T> m(mp);
  MultiPeerBufs<T> b = multi_peer_bufs<T>(c, m);
  for (int ch = 0; ch < c.nchannels; ch++)
    for (int r = 0; r < n; r++) m.add_task(r, ch, &progs[(size_t)ch][(size_t)r]->p, b.in[(size_t)r], b.out[(size_t)r]);
  std::string err = m.run();
  if (!err.empty()) return err;
  return compare(m.arenas, b.want, b.names);
}

const int kMultiPeerColls[] = {KOLO_COLL_ALL_TO_ALL, KOLO_COLL_GATHER, KOLO_COLL_SCATTER};

// The structure of rank's program of a multi-peer collective.
void check_multi_peer_program(int coll, int n, int rank, int root, const kolo_program &p) {
  SCOPED_TRACE(::testing::Message() << kolo_coll_name(coll) << " n=" << n << " rank=" << rank << " root=" << root);
  const bool a2a = coll == KOLO_COLL_ALL_TO_ALL, is_root = rank == root;
  const int want_peers = n == 1 ? 0 : (a2a || is_root) ? n - 1 : 1;
  ASSERT_EQ(p.npeers, want_peers);
  ASSERT_EQ(p.nsteps, a2a ? 2 * n - 1 : is_root ? n : 1);
  EXPECT_EQ(p.send_peer, -1);
  EXPECT_EQ(p.recv_peer, -1);
  EXPECT_EQ(p.layout, KOLO_LAYOUT_FLAT);
  EXPECT_EQ(p.in_blocked, a2a || (coll == KOLO_COLL_SCATTER && is_root) ? 1 : 0);
  EXPECT_EQ(p.out_blocked, a2a || (coll == KOLO_COLL_GATHER && is_root) ? 1 : 0);
  std::vector<int> seen((size_t)n, 0), sends((size_t)p.npeers, 0), recvs((size_t)p.npeers, 0);
  for (int i = 0; i < p.npeers; i++) {
    const int q = p.peers[i].rank;
    ASSERT_TRUE(q >= 0 && q < n && q != rank) << "peer " << i << " is rank " << q;
    EXPECT_EQ(seen[(size_t)q]++, 0) << "rank " << q << " listed twice";
    if (!a2a && !is_root) {
      EXPECT_EQ(q, root);
    }
  }
  // Per buffer block: how often it is read and written (the input of a
  // non-root gather and the output of a non-root scatter are one block).
  std::vector<int> reads((size_t)n, 0), writes((size_t)n, 0);
  for (int i = 0; i < p.nsteps; i++) {
    const kolo_step &s = p.steps[i];
    SCOPED_TRACE(::testing::Message() << "step " << i << " " << op_name(s.op));
    EXPECT_TRUE(s.op == KOLO_STEP_SEND || s.op == KOLO_STEP_RECV || s.op == KOLO_STEP_COPY);
    EXPECT_EQ(s.flags, 0) << "nothing is reduced: no FINAL step";
    if (kolo_step_sends(s.op)) {
      ASSERT_LT(s.to, p.npeers);
      sends[s.to]++;
      EXPECT_EQ(s.src_chunk, p.in_blocked ? p.peers[s.to].rank : 0) << "sends another block than the peer's";
    }
    if (kolo_step_recvs(s.op)) {
      ASSERT_LT(s.from, p.npeers);
      recvs[s.from]++;
      EXPECT_EQ(s.dst_chunk, p.out_blocked ? p.peers[s.from].rank : 0) << "receives into another block";
    }
    if (kolo_step_reads_src(s.op)) {
      EXPECT_EQ(s.src_buf, KOLO_BUF_IN);
      reads[(size_t)(p.in_blocked ? s.src_chunk : 0)]++;
    }
    if (kolo_step_writes_dst(s.op)) {
      EXPECT_EQ(s.dst_buf, KOLO_BUF_OUT);
      writes[(size_t)(p.out_blocked ? s.dst_chunk : 0)]++;
    }
    if (s.op == KOLO_STEP_COPY) {
      EXPECT_EQ(s.src_chunk, p.in_blocked ? rank : s.src_chunk);
      EXPECT_EQ(s.dst_chunk, p.out_blocked ? rank : s.dst_chunk);
    }
  }
  for (int i = 0; i < p.npeers; i++) {
    EXPECT_EQ(p.peers[i].sends, sends[(size_t)i] > 0 ? 1 : 0) << "peer " << i;
    EXPECT_EQ(p.peers[i].recvs, recvs[(size_t)i] > 0 ? 1 : 0) << "peer " << i;
    EXPECT_GT(sends[(size_t)i] + recvs[(size_t)i], 0) << "peer " << i << " is never used";
    EXPECT_LE(sends[(size_t)i], 1);
    EXPECT_LE(recvs[(size_t)i], 1);
  }
  // Every block of a blocked buffer once, the one block of the others once
  // (the root's; a non-root gather writes nothing, a non-root scatter reads
  // nothing).
  for (int k = 0; k < n; k++) {
    int want_r = p.in_blocked ? 1 : k == 0 && !(coll == KOLO_COLL_SCATTER && !is_root);
    int want_w = p.out_blocked ? 1 : k == 0 && !(coll == KOLO_COLL_GATHER && !is_root);
    EXPECT_EQ(reads[(size_t)k], want_r) << "reads of block " << k;
    EXPECT_EQ(writes[(size_t)k], want_w) << "writes of block " << k;
  }
}

TEST(ScheduleStructure, ProgramsOfMultiPeerCollectives) {
  for (int n = 1; n <= 16; n++)
    for (int coll : kMultiPeerColls)
      for (int root = 0; root < (coll == KOLO_COLL_ALL_TO_ALL ? 1 : n); root++) {
        Ring ring = shuffled_ring(n, 5 + (uint64_t)n);  // the programs ignore the ring order
        std::vector<std::unique_ptr<Prog>> progs;
        for (int r = 0; r < n; r++) {
          progs.push_back(build(coll, ring, r, root));
          ASSERT_TRUE(progs.back());
          check_multi_peer_program(coll, n, r, root, progs.back()->p);
        }
        // Both ends of every connector agree: a's sends to b and b's
        // receives from a are equally many and, in the FLAT layout, every
        // chunk of a round has the same size whatever its block.
        for (int a = 0; a < n; a++)
          for (int b = 0; b < n; b++) {
            int sent = 0, received = 0;
            const kolo_program &pa = progs[(size_t)a]->p, &pb = progs[(size_t)b]->p;
            for (int i = 0; i < pa.nsteps; i++) sent += kolo_step_send_rank(&pa, &pa.steps[i]) == b;
            for (int i = 0; i < pb.nsteps; i++) received += kolo_step_recv_rank(&pb, &pb.steps[i]) == a;
            EXPECT_EQ(sent, received) << kolo_coll_name(coll) << " n=" << n << " root=" << root << " pipe " << a
                                      << "->" << b;
            EXPECT_LE(sent, 1);
          }
      }
}

TEST(ScheduleModel, CatchesBrokenMultiPeerPrograms) {
  const int n = 5;
  Ring ring = identity_ring(n);
  Case c;
  c.nranks = n;
  c.count = 1000;
  c.coll = KOLO_COLL_ALL_TO_ALL;
  auto run = [&](const std::function<void(std::vector<std::unique_ptr<Prog>> &)> &breakit) {
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) progs.push_back(build(KOLO_COLL_ALL_TO_ALL, ring, r, 0));
    breakit(progs);
    ModelParams mp = params_of(c);
    mp.check_chunk_tags = false;
    mp.capacity = 8;
    Model<int64_t> m(mp);
    MultiPeerBufs<int64_t> b = multi_peer_bufs<int64_t>(c, m);
    for (int r = 0; r < n; r++) m.add_task(r, 0, &progs[(size_t)r]->p, b.in[(size_t)r], b.out[(size_t)r]);
    std::string err = m.run();
    return err.empty() ? compare(m.arenas, b.want, b.names) : err;
  };
  EXPECT_EQ(run([](std::vector<std::unique_ptr<Prog>> &) {}), "");
  // Every rank receives before it sends, in every phase: a cycle of waits.
  std::string err = run([](std::vector<std::unique_ptr<Prog>> &progs) {
    for (auto &pr : progs)
      for (int i = 0; i + 1 < pr->p.nsteps; i += 2) std::swap(pr->p.steps[i], pr->p.steps[i + 1]);
  });
  EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  // One rank sends block 1 where block 2 belongs: wrong data at rank 2.
  err = run([](std::vector<std::unique_ptr<Prog>> &progs) {
    for (int i = 0; i < progs[0]->p.nsteps; i++)
      if (progs[0]->p.steps[i].op == KOLO_STEP_SEND && progs[0]->p.steps[i].src_chunk == 2)
        progs[0]->p.steps[i].src_chunk = 1;
  });
  EXPECT_NE(err.find("rank2.out"), std::string::npos) << err;
  // One rank's step names the wrong peer: slices reach a rank that does not
  // expect them (a mismatch, a deadlock or data left over).
  err = run([](std::vector<std::unique_ptr<Prog>> &progs) { progs[3]->p.steps[0].to = 1; });
  EXPECT_NE(err, "");
}

// N = 1..16 x every count x geometry, ring kind, root, in place (gather,
// scatter) and FIFO bound rotating; the full geometry product at a few N.
void multi_peer_collectives(int coll) {
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  for (int n = 1; n <= 16 && g.go(); n++)
    for (size_t count : kCounts)
      for (int nch : kChannels)
        for (size_t slot : kSlots)
          for (size_t esz : kElemSizes) {
            const bool full = n == 1 || n == 2 || n == 3 || n == 5 || n == 8 || n == 16;
            if (!full && (esz == 8 || slot == 64)) continue;
            Case c;
            c.coll = coll;
            c.nranks = n;
            c.count = count;
            c.nchannels = nch;
            c.slot_elems = slot;
            c.elem_size = esz;
            c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)coll, count), mix((uint64_t)nch * 7 + esz, slot));
            c.ring_kind = (int)(c.seed % kNumRingKinds);
            c.in_place = coll != KOLO_COLL_ALL_TO_ALL && ((c.seed >> 8) & 1);
            c.capacity = capacity_for(c.seed >> 16);
            c.root = (int)((c.seed >> 20) % (uint64_t)n);
            if (!sampled(c)) continue;
            g.check(c, (c.seed >> 24) & 1 ? run_multi_peer<double>(c) : run_multi_peer<int64_t>(c));
          }
  // Every root at every N, in and out of place.
  for (int n = 1; n <= 16 && g.go() && coll != KOLO_COLL_ALL_TO_ALL; n++)
    for (int root = 0; root < n; root++)
      for (bool inplace : {false, true}) {
        Case c;
        c.coll = coll;
        c.nranks = n;
        c.count = 1000;
        c.root = root;
        c.in_place = inplace;
        c.seed = mix(mix((uint64_t)n, (uint64_t)root), (uint64_t)coll * 2 + inplace);
        draw_geometry(c);
        g.check(c, run_multi_peer<int64_t>(c));
      }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %ld %s cases in %lld ms\n", g.cases, kolo_coll_name(coll), (long long)ms);
}

TEST(ScheduleModel, AllToAllGrid) { multi_peer_collectives(KOLO_COLL_ALL_TO_ALL); }
TEST(ScheduleModel, GatherGrid) { multi_peer_collectives(KOLO_COLL_GATHER); }
TEST(ScheduleModel, ScatterGrid) { multi_peer_collectives(KOLO_COLL_SCATTER); }

TEST(ScheduleModel, MultiPeerFewestSlots) {
  // Connectors of 2 or 4 slots (a chunk is 1 or 2 of them), FIFOs bounded
  // to them, a slice per turn and many: still no deadlock, still right.
  Grid g;
  for (int coll : kMultiPeerColls)
    for (int n : {2, 3, 5, 16})
      for (size_t count : {(size_t)65, (size_t)1000, (size_t)4097})
        for (int nslots : {2, 4}) {
          Case c;
          c.coll = coll;
          c.nranks = n;
          c.count = count;
          c.nslots = nslots;
          c.capacity = (size_t)nslots;
          c.seed = mix(mix((uint64_t)coll * 32 + (uint64_t)n, count), (uint64_t)nslots);
          c.root = (int)(c.seed % (uint64_t)n);
          c.nchannels = kChannels[(c.seed >> 4) % 3];
          c.in_place = coll != KOLO_COLL_ALL_TO_ALL && ((c.seed >> 12) & 1);
          if (sampled(c)) g.check(c, run_multi_peer<int64_t>(c));
        }
}

// ---- hierarchical all-reduce ----------------------------------------------------------
//
// H hosts of L ranks (host ids interleaved, host of r = r % H, or in blocks),
// each rank's three programs from kolo_sched_all_reduce_hier over its intra
// and inter rings (ring/topology.h), run in the model as the core runs them:
// per channel three tasks, each after the one before; the intra phases share
// their connectors (the model orders them by that too).  OUT is readable:
// the later phases read what the earlier ones wrote there.

struct HierRanks {
  int H, L;
  std::vector<std::vector<std::unique_ptr<Prog>>> progs;  // [rank][phase]
  std::string err;
  HierRanks(int H_, int L_, bool interleaved) : H(H_), L(L_) {
    const int n = H * L;
    std::vector<uint64_t> ids((size_t)n);
    for (int r = 0; r < n; r++)
      ids[(size_t)r] = 0xabcdef12345ull * (uint64_t)(1 + (interleaved ? r % H : r / L));
    kolo_hosts h;
    if (kolo_hosts_build(n, ids.data(), &h) != koloSuccess) abort();
    progs.resize((size_t)n);
    for (int r = 0; r < n && err.empty(); r++) {
      kolo_ring intra, inter;
      if (kolo_ring_build_intra(&h, r, &intra) != koloSuccess) abort();
      if (kolo_ring_build_inter(&h, r, &inter) != koloSuccess) abort();
      for (int k = 0; k < KOLO_HIER_PHASES; k++) {
        auto pr = std::make_unique<Prog>();
        koloResult_t res = kolo_sched_all_reduce_hier(&intra, &inter, r, k, &pr->p);
        if (res != koloSuccess) err = "kolo_sched_all_reduce_hier failed: " + std::to_string(res);
        progs[(size_t)r].push_back(std::move(pr));
      }
      kolo_ring_free(&intra);
      kolo_ring_free(&inter);
    }
    kolo_hosts_free(&h);
  }
  const kolo_program &p(int r, int k) const { return progs[(size_t)r][(size_t)k]->p; }
};

template <typename T>
std::string run_hier(const Case &c, int H, int L, bool interleaved) {
  const int n = H * L;
  const size_t cnt = c.count;
  HierRanks hr(H, L, interleaved);
  if (!hr.err.empty()) return hr.err;
  Rng rng(c.seed);
  ModelParams mp = params_of(c);
  mp.nranks = n;
  mp.div = c.op == ROp::kAvg ? n : 1;
  Model<T> m(mp);
  std::vector<std::string> names;
  std::vector<std::vector<T>> inputs((size_t)n);
  std::vector<View> in_view((size_t)n), out_view((size_t)n);
  std::vector<int> out_arena((size_t)n);
  for (int r = 0; r < n; r++) {
    inputs[(size_t)r] = random_values<T>(rng, cnt);
    std::string rs = "rank" + std::to_string(r);
    if (c.in_place) {
      int a = m.add_arena(inputs[(size_t)r]);
      names.push_back(rs + ".inout");
      in_view[(size_t)r] = View{a, 0, cnt, true, false};
      out_view[(size_t)r] = View{a, 0, cnt, true, true};
      out_arena[(size_t)r] = a;
    } else {
      int a = m.add_arena(inputs[(size_t)r]);
      names.push_back(rs + ".in");
      int b = m.add_arena(std::vector<T>(cnt, poison<T>()));
      names.push_back(rs + ".out");
      in_view[(size_t)r] = View{a, 0, cnt, true, false};
      out_view[(size_t)r] = View{b, 0, cnt, true, true};
      out_arena[(size_t)r] = b;
    }
  }
  std::vector<std::vector<T>> want = m.arenas;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < cnt; i++) {
      T acc = inputs[0][i];
      for (int q = 1; q < n; q++)
        acc = c.op == ROp::kMax ? std::max(acc, inputs[(size_t)q][i]) : acc + inputs[(size_t)q][i];
      if (c.op == ROp::kAvg) acc /= (T)n;
      want[(size_t)out_arena[(size_t)r]][i] = acc;
    }
  for (int ch = 0; ch < c.nchannels; ch++)
    for (int r = 0; r < n; r++) {
      int prev = -1;
      for (int k = 0; k < KOLO_HIER_PHASES; k++) {
        std::vector<int> after;
        if (prev >= 0) after.push_back(prev);
        prev = m.add_task(r, ch, &hr.p(r, k), in_view[(size_t)r], out_view[(size_t)r], after);
      }
    }
  std::string err = m.run();
  if (!err.empty()) return err;
  return compare(m.arenas, want, names);
}

TEST(ScheduleHier, ProgramStructure) {
  for (int H = 2; H <= 5; H++)
    for (int L = 2; L <= 5; L++)
      for (bool inter : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "H=" << H << " L=" << L << (inter ? " interleaved" : ""));
        HierRanks hr(H, L, inter);
        ASSERT_EQ(hr.err, "");
        const int n = H * L;
        for (int r = 0; r < n; r++) {
          int finals = 0;
          for (int k = 0; k < KOLO_HIER_PHASES; k++) {
            const kolo_program &p = hr.p(r, k);
            EXPECT_EQ(p.nsteps, k == KOLO_HIER_INTER_AR ? 2 * H - 1 : L * H);
            EXPECT_EQ(p.layout, KOLO_LAYOUT_RING);
            EXPECT_EQ(p.in_blocked + p.out_blocked, 0);
            for (int i = 0; i < p.nsteps; i++) {
              const kolo_step &s = p.steps[i];
              EXPECT_EQ(s.src_chunk, s.dst_chunk);
              EXPECT_GE(s.src_chunk, 0);
              EXPECT_LT(s.src_chunk, n);
              if (kolo_step_reads_src(s.op)) {
                EXPECT_EQ(s.src_buf, k == KOLO_HIER_INTRA_RS ? KOLO_BUF_IN : KOLO_BUF_OUT);
              }
              if (kolo_step_writes_dst(s.op)) {
                EXPECT_EQ(s.dst_buf, KOLO_BUF_OUT);
              }
              finals += (s.flags & KOLO_STEP_FINAL) != 0;
            }
            // Both ends of every connector agree step by step.
            if (p.send_peer >= 0) {
              const kolo_program &q = hr.p(p.send_peer, k);
              EXPECT_EQ(q.recv_peer, r);
              std::vector<int> st, rt;
              for (int i = 0; i < p.nsteps; i++)
                if (kolo_step_sends(p.steps[i].op)) st.push_back(step_tag(p, p.steps[i]));
              for (int i = 0; i < q.nsteps; i++)
                if (kolo_step_recvs(q.steps[i].op)) rt.push_back(step_tag(q, q.steps[i]));
              EXPECT_EQ(st, rt) << "phase " << k << " connector " << r << "->" << p.send_peer;
            }
            // intra phases stay on the host, the inter one leaves it
            bool same_host = inter ? (p.send_peer % H == r % H) : (p.send_peer / L == r / L);
            EXPECT_EQ(same_host, k != KOLO_HIER_INTER_AR) << "phase " << k;
          }
          EXPECT_EQ(finals, 1) << "rank " << r;
        }
      }
  // Too small for hierarchy: refused, *out untouched.
  kolo_hosts h;
  std::vector<uint64_t> ids = {1, 1, 2, 2};
  ASSERT_EQ(kolo_hosts_build(4, ids.data(), &h), koloSuccess);
  kolo_ring intra, inter;
  ASSERT_EQ(kolo_ring_build_intra(&h, 0, &intra), koloSuccess);
  ASSERT_EQ(kolo_ring_build_inter(&h, 0, &inter), koloSuccess);
  kolo_program p{};
  p.nsteps = 77;
  Ring one(std::vector<int>{0});
  EXPECT_EQ(kolo_sched_all_reduce_hier(&one.r, &inter, 0, 0, &p), koloInvalidArgument);  // L = 1
  EXPECT_EQ(kolo_sched_all_reduce_hier(&intra, &one.r, 0, 0, &p), koloInvalidArgument);  // H = 1
  EXPECT_EQ(kolo_sched_all_reduce_hier(&intra, &inter, 2, 0, &p), koloInvalidArgument);  // rank not in them
  EXPECT_EQ(kolo_sched_all_reduce_hier(&intra, &inter, 0, KOLO_HIER_PHASES, &p), koloInvalidArgument);
  EXPECT_EQ(p.nsteps, 77);
  kolo_ring_free(&intra);
  kolo_ring_free(&inter);
  kolo_hosts_free(&h);
}

TEST(ScheduleHier, AllReduceGrid) {
  // H, L = 2..4 x every count x channels x slot sizes, elem size, op,
  // in-place, host layout and FIFO bound rotating from case to case.
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  for (int H = 2; H <= 4; H++)
    for (int L = 2; L <= 4 && g.go(); L++)
      for (size_t count : kCounts)
        for (int nch : kChannels)
          for (size_t slot : kSlots) {
            Case c;
            c.nranks = H * L;
            c.count = count;
            c.nchannels = nch;
            c.slot_elems = slot;
            c.seed = mix(mix((uint64_t)(H * 8 + L), count), mix((uint64_t)nch, slot));
            c.elem_size = kElemSizes[c.seed % 2];
            c.in_place = (c.seed >> 8) & 1;
            c.capacity = capacity_for(c.seed >> 16);
            int opk = (int)((c.seed >> 24) % 3);
            c.op = opk == 0 ? ROp::kSum : opk == 1 ? ROp::kMax : ROp::kAvg;
            bool inter = (c.seed >> 32) & 1;
            if (!sampled(c)) continue;
            std::string extra = " H=" + std::to_string(H) + " L=" + std::to_string(L) +
                                (inter ? " interleaved" : " blocks");
            g.check(c, c.op == ROp::kAvg ? run_hier<double>(c, H, L, inter) : run_hier<int64_t>(c, H, L, inter),
                    extra.c_str());
          }
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  printf("[          ] %ld hierarchical all-reduce cases in %lld ms\n", g.cases, (long long)ms);
}

TEST(ScheduleHier, FewestSlots) {
  // Connectors of 2 or 4 slots, FIFOs bounded to them: no deadlock.
  Grid g;
  for (int H : {2, 3, 5})
    for (int L : {2, 3, 4})
      for (size_t count : {(size_t)65, (size_t)1000, (size_t)4097})
        for (int nslots : {2, 4}) {
          Case c;
          c.nranks = H * L;
          c.count = count;
          c.nslots = nslots;
          c.capacity = (size_t)nslots;
          c.seed = mix(mix((uint64_t)(H * 8 + L), count), (uint64_t)nslots);
          c.nchannels = kChannels[(c.seed >> 4) % 3];
          c.in_place = (c.seed >> 12) & 1;
          std::string extra = " H=" + std::to_string(H) + " L=" + std::to_string(L);
          if (sampled(c)) g.check(c, run_hier<int64_t>(c, H, L, (c.seed >> 20) & 1), extra.c_str());
        }
}

// ---- the C checker (ring/check.h) against the model ------------------------------------
//
// The checker proves programs by symbolic execution of one round with
// connectors of two chunks; the model runs them on data, over many rounds
// of real chunks and slices.  Both judge the same programs: every built-in
// schedule (all accepted), and the built-ins broken at random (a dropped
// step, a chunk changed, a peer changed, a receive turned into a reduction,
// a FINAL flag toggled where it applies), where the two must agree on every
// verdict (harmless changes included: both must accept those).  The
// model runs them out of place and in place (where the collective has it)
// on average in doubles (a post-op shows), count 1000 (300 under
// sanitizers, which also try 3 breakages per case, not 8), 16-element slots,
// connectors of 2 slots with FIFOs bounded to them: the executor the
// checker stands for.

// The C checker's verdict on the programs of channel 0 ("" = proved).
std::string c_verdict(int coll, int n, int root, int peer, const std::vector<std::unique_ptr<Prog>> &progs) {
  std::vector<const kolo_program *> ptrs;
  for (const auto &pr : progs) ptrs.push_back(&pr->p);
  kolo_check_spec spec{coll, n, root, peer, 1, ptrs.data()};
  char why[1024];
  return kolo_schedule_check(&spec, why, sizeof why) == koloSuccess ? "" : why;
}

enum Mutation { kDropStep, kChangeChunk, kChangePeer, kReduceAgain, kToggleFinal, kNumMutations };
const char *mutation_name(int k) {
  static const char *names[] = {"drop a step", "change a chunk", "change a peer", "reduce again", "toggle FINAL"};
  return names[k];
}

// A random step of a random rank that has one matching `want`, or false.
bool pick_step(std::vector<std::unique_ptr<Prog>> &progs, std::mt19937_64 &rng,
               const std::function<bool(const kolo_step &)> &want, int *rank, int *step) {
  std::vector<std::pair<int, int>> all;
  for (size_t r = 0; r < progs.size(); r++)
    for (int i = 0; i < progs[r]->p.nsteps; i++)
      if (want(progs[r]->p.steps[i])) all.push_back({(int)r, i});
  if (all.empty()) return false;
  auto [r, i] = all[rng() % all.size()];
  *rank = r, *step = i;
  return true;
}

bool change_peer(kolo_program &p, int n, std::mt19937_64 &rng) {
  int *peer = p.npeers > 0 ? &p.peers[rng() % (uint64_t)p.npeers].rank : p.send_peer >= 0 ? &p.send_peer : &p.recv_peer;
  if (n < 2 || *peer < 0) return false;
  *peer = (*peer + 1 + (int)(rng() % (uint64_t)(n - 1))) % n;
  kolo_program_index_peers(&p);
  return true;
}

// Breaks progs the way `kind` says; false when it finds nothing to break.
bool mutate_programs(int kind, std::vector<std::unique_ptr<Prog>> &progs, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int r, i;
  auto any = [](const kolo_step &) { return true; };
  auto plain_recv = [](const kolo_step &s) { return kolo_step_recvs(s.op) && !kolo_step_reduces(s.op); };
  switch (kind) {
  case kDropStep:
    if (!pick_step(progs, rng, any, &r, &i)) return false;
    std::copy(progs[(size_t)r]->p.steps + i + 1, progs[(size_t)r]->p.steps + progs[(size_t)r]->p.nsteps,
              progs[(size_t)r]->p.steps + i);
    progs[(size_t)r]->p.nsteps--;
    kolo_program_index_peers(&progs[(size_t)r]->p);
    return true;
  case kChangeChunk: {
    if (n < 2 || !pick_step(progs, rng, any, &r, &i)) return false;
    kolo_program &p = progs[(size_t)r]->p;
    kolo_step &s = p.steps[i];
    int old = kolo_step_reads_src(s.op) ? s.src_chunk : s.dst_chunk, k = (old + 1 + (int)(rng() % (uint64_t)(n - 1))) % n;
    if (p.layout == KOLO_LAYOUT_RING || kolo_step_reads_src(s.op)) s.src_chunk = k;
    if (p.layout == KOLO_LAYOUT_RING || kolo_step_writes_dst(s.op)) s.dst_chunk = k;
    return true;
  }
  case kChangePeer:
    r = (int)(rng() % progs.size());
    return change_peer(progs[(size_t)r]->p, n, rng);
  case kReduceAgain: {
    if (!pick_step(progs, rng, plain_recv, &r, &i)) return false;
    kolo_step &s = progs[(size_t)r]->p.steps[i];
    s.op = kolo_step_sends(s.op) ? KOLO_STEP_RECV_REDUCE_COPY_SEND : KOLO_STEP_RECV_REDUCE_COPY;
    s.src_buf = KOLO_BUF_IN;
    s.src_chunk = s.dst_chunk;
    return true;
  }
  default: /* where it does something */
    if (!pick_step(progs, rng, [](const kolo_step &s) { return kolo_step_post_applies(s.op) != 0; }, &r, &i))
      return false;
    progs[(size_t)r]->p.steps[i].flags ^= KOLO_STEP_FINAL;
    return true;
  }
}

// Whether the collective's in-place form differs from its out-of-place one
// in the model (all-to-all has none).
bool model_has_in_place(int coll) { return coll != KOLO_COLL_ALL_TO_ALL; }

// One case: the model's verdict (out of place, then in place) and the C
// checker's on the same programs, mutated by `kind` (-1: as built).
// Returns false when the mutation found nothing to break.
bool both_verdicts(Case c, int kind, uint64_t seed, std::string *model, std::string *checker) {
  bool applied = kind < 0;
  // The checker proves every channel's programs (the double binary tree's
  // differ); a mutation goes into channel 0's.
  Mutator mut = [&](int ch, std::vector<std::unique_ptr<Prog>> &progs) {
    if (ch != 0 && kind >= 0) return;
    if (kind >= 0) applied = mutate_programs(kind, progs, c.nranks, seed);
    std::string verdict = c_verdict(c.coll, c.nranks, c.root, -1, progs);
    if (checker->empty()) *checker = verdict;
  };
  *model = "";
  for (int ip = 0; ip <= (model_has_in_place(c.coll) ? 1 : 0) && model->empty(); ip++) {
    c.in_place = ip == 1;
    *checker = "";
    *model = kolo_coll_is_multi_peer(c.coll) ? run_multi_peer<double>(c, mut) : run_collective<double>(c, mut);
    if (!applied) return false;
  }
  return true;
}

Case checker_case(int coll, int n, int root, uint64_t seed) {
  Case c;
  c.coll = coll;
  c.nranks = n;
  c.root = root;
  c.count = kSanitized ? 300 : 1000;  // several rounds either way (16-element chunks)
  c.slot_elems = 16;
  c.nslots = 2;
  c.capacity = 2;
  c.op = ROp::kAvg;
  c.seed = seed;
  c.ring_kind = (int)(seed % kNumRingKinds);
  return c;
}

const int kCheckerColls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER,
                             KOLO_COLL_BROADCAST,  KOLO_COLL_REDUCE,         KOLO_COLL_ALL_TO_ALL,
                             KOLO_COLL_GATHER,     KOLO_COLL_SCATTER};

bool is_rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER;
}

TEST(ScheduleChecker, BothProveEveryBuiltin) {
  auto t0 = std::chrono::steady_clock::now();
  int cases = 0;
  for (int n = 1; n <= 16; n++)
    for (int coll : kCheckerColls)
      for (int root = 0; root < (is_rooted(coll) ? n : 1); root++)
        for (int algo = 0; algo < KOLO_ALGO_NUM; algo++) {
          if (algo == KOLO_ALGO_HIER) continue;  // three programs in sequence: proved on their own below
          const unsigned set = coll == KOLO_COLL_ALL_REDUCE ? KOLO_ALGO_ALL_REDUCE_SET
                               : coll == KOLO_COLL_BROADCAST ? KOLO_ALGO_BCAST_SET
                               : coll == KOLO_COLL_REDUCE    ? KOLO_ALGO_REDUCE_SET
                               : coll == KOLO_COLL_ALL_GATHER ? KOLO_ALGO_AG_SET
                                                              : 1u << KOLO_ALGO_RING;
          if (!((set >> algo) & 1u)) continue;
          std::string model, checker;
          Case c = checker_case(coll, n, root, mix(mix((uint64_t)n, (uint64_t)coll), (uint64_t)(root * 8 + algo)));
          c.algo = algo;
          if (algo == KOLO_ALGO_DBTREE) c.nchannels = 2;  // both of its trees
          both_verdicts(c, -1, 0, &model, &checker);
          ASSERT_EQ(model, "") << c.str();
          ASSERT_EQ(checker, "") << c.str();
          cases++;
        }
  // Send / recv: the pair's two programs, one message in the model.
  for (int n = 2; n <= 16; n++)
    for (int from = 0; from < n; from++)
      for (int to : {(from + 1) % n, (from + n - 1) % n, (from + n / 2) % n}) {
        if (to == from) continue;
        Ring ring = identity_ring(n);
        std::vector<std::unique_ptr<Prog>> progs;
        for (int r = 0; r < n; r++) {
          progs.push_back(std::make_unique<Prog>());
          if (r == from) progs.back() = build(KOLO_COLL_SEND, ring, r, to);
          else if (r == to) progs.back() = build(KOLO_COLL_RECV, ring, r, from);
          else ASSERT_EQ(kolo_program_alloc(&progs.back()->p, 0, KOLO_LAYOUT_FLAT), koloSuccess);
        }
        ASSERT_EQ(c_verdict(KOLO_COLL_SEND, n, from, to, progs), "") << n << " " << from << "->" << to;
        Case c = checker_case(KOLO_COLL_SEND, n, 0, mix((uint64_t)n, (uint64_t)(from * 64 + to)));
        ASSERT_EQ(run_p2p<double>(c, {{from, to}}), "") << c.str();
        cases++;
      }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %d built-in schedules proved by both in %lld ms\n", cases, (long long)ms);
}

TEST(ScheduleChecker, AgreesWithTheModelOnBrokenPrograms) {
  auto t0 = std::chrono::steady_clock::now();
  int cases = 0, rejected[kNumMutations] = {0}, tried[kNumMutations] = {0};
  for (int n : {2, 3, 4, 5, 8, 16})
    for (int coll : kCheckerColls)
      for (int kind = 0; kind < kNumMutations; kind++)
        for (int trial = 0; trial < (kSanitized ? 3 : 8); trial++) {
          uint64_t seed = mix(mix((uint64_t)n * 16 + (uint64_t)coll, (uint64_t)kind), (uint64_t)trial);
          Case c = checker_case(coll, n, is_rooted(coll) ? (int)(seed % (uint64_t)n) : 0, seed);
          std::string model, checker;
          if (!both_verdicts(c, kind, seed >> 8, &model, &checker)) continue;
          cases++;
          tried[kind]++;
          rejected[kind] += !checker.empty();
          EXPECT_EQ(model.empty(), checker.empty())
              << c.str() << " mutation " << mutation_name(kind) << "\n  model:   " << model << "\n  checker: " << checker;
        }
  for (int k = 0; k < kNumMutations; k++) {
    printf("[          ] %s: %d of %d broken programs refused by both\n", mutation_name(k), rejected[k], tried[k]);
    // some changes are harmless (a chunk index of a buffer of one block)
    EXPECT_GT(rejected[k], k == kChangeChunk ? tried[k] / 4 : tried[k] * 3 / 4) << mutation_name(k);
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %d mutated cases in %lld ms\n", cases, (long long)ms);
}

// ---- recursive doubling and Rabenseifner -----------------------------------------

// Both ends of every pipe of progs (one per rank) name the same chunks in
// the same order; [a][b]: how many chunks go from rank a to rank b.
std::vector<std::vector<size_t>> expect_pipes_in_step(const std::vector<std::unique_ptr<Prog>> &progs,
                                                      const std::string &what) {
  const int n = (int)progs.size();
  std::vector<std::vector<size_t>> chunks((size_t)n, std::vector<size_t>((size_t)n, 0));
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      std::vector<int> st, rt;
      const kolo_program &pa = progs[(size_t)a]->p, &pb = progs[(size_t)b]->p;
      for (int i = 0; i < pa.nsteps; i++)
        if (kolo_step_send_rank(&pa, &pa.steps[i]) == b) st.push_back(pa.steps[i].src_chunk);
      for (int i = 0; i < pb.nsteps; i++)
        if (kolo_step_recv_rank(&pb, &pb.steps[i]) == a) rt.push_back(pb.steps[i].dst_chunk);
      EXPECT_EQ(st, rt) << what << " pipe " << a << "->" << b;
      chunks[(size_t)a][(size_t)b] = st.size();
    }
  return chunks;
}

const int kDoublingAlgos[] = {KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER};
// The multi-peer all-reduces: the doubling ones and the direct one.
const int kPeerAlgos[] = {KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT, KOLO_ALGO_ONESHOT};

// The structure of rank's program of a doubling all-reduce (algo), with
// what it reads and writes counted per chunk into reads / finals.
void check_doubling_program(int algo, int n, int rank, const kolo_program &p, std::vector<int> &finals) {
  SCOPED_TRACE(::testing::Message() << kolo_algo_name(algo) << " n=" << n << " rank=" << rank);
  const int pw = kolo_pow2_floor(n), k = kolo_log2(pw), nchunks = algo == KOLO_ALGO_RD ? 1 : n;
  const bool extra = n > 1 && kolo_rd_index(n, rank) < 0, folded = kolo_rd_folded(n, rank) >= 0;
  EXPECT_EQ(p.layout, algo == KOLO_ALGO_RD ? KOLO_LAYOUT_FLAT : KOLO_LAYOUT_RING);
  EXPECT_EQ(p.in_blocked + p.out_blocked, 0);
  EXPECT_EQ(p.send_peer, -1);
  EXPECT_EQ(p.recv_peer, -1);
  ASSERT_EQ(p.npeers, n == 1 ? 0 : extra ? 1 : k + folded);
  if (algo == KOLO_ALGO_RD) {
    EXPECT_EQ(p.nsteps, n == 1 ? 1 : extra ? 2 : 2 * k + 2 * folded);
  }
  std::vector<int> seen((size_t)n, 0), used((size_t)p.npeers, 0), reads((size_t)nchunks, 0);
  for (int i = 0; i < p.npeers; i++) {
    const int q = p.peers[i].rank;
    ASSERT_TRUE(q >= 0 && q < n && q != rank) << "peer " << i << " is rank " << q;
    EXPECT_EQ(seen[(size_t)q]++, 0) << "rank " << q << " listed twice";
  }
  for (int i = 0; i < p.nsteps; i++) {
    const kolo_step &s = p.steps[i];
    SCOPED_TRACE(::testing::Message() << "step " << i << " " << op_name(s.op));
    EXPECT_TRUE(s.op == KOLO_STEP_SEND || s.op == KOLO_STEP_RECV || s.op == KOLO_STEP_RECV_REDUCE_COPY ||
                (n == 1 && s.op == KOLO_STEP_COPY));
    EXPECT_EQ(s.flags & ~(KOLO_STEP_FINAL | KOLO_STEP_SRC_FIRST), 0u);
    if (s.flags & KOLO_STEP_SRC_FIRST) {
      EXPECT_TRUE(kolo_step_reduces(s.op));
    }
    ASSERT_TRUE(s.src_chunk >= 0 && s.src_chunk < nchunks && s.dst_chunk == s.src_chunk);
    if (kolo_step_sends(s.op)) used[s.to]++;
    if (kolo_step_recvs(s.op)) used[s.from]++;
    if (kolo_step_reads_src(s.op) && s.src_buf == KOLO_BUF_IN) reads[(size_t)s.src_chunk]++;
    if (kolo_step_writes_dst(s.op)) {
      EXPECT_EQ(s.dst_buf, KOLO_BUF_OUT) << "writes IN";
    }
    if (s.flags & KOLO_STEP_FINAL) {
      EXPECT_TRUE(kolo_step_reduces(s.op) || s.op == KOLO_STEP_COPY);
      finals[(size_t)s.dst_chunk]++;
    }
  }
  for (int i = 0; i < p.npeers; i++) EXPECT_GT(used[(size_t)i], 0) << "peer " << i << " is never used";
  // Each input element is read once, except at recursive doubling's first
  // level: once to send it, once to add it (two paths to the output, each
  // with one read: a premul-sum scales each once).
  const int want_reads = algo == KOLO_ALGO_RD && n > 1 && !extra && !folded ? 2 : 1;
  for (int c = 0; c < nchunks; c++) EXPECT_EQ(reads[(size_t)c], want_reads) << "input chunk " << c << " read";
}

TEST(ScheduleStructure, DoublingAllReducePrograms) {
  for (int algo : kDoublingAlgos)
    for (int n = 1; n <= 16; n++) {
      Ring ring = shuffled_ring(n, 3 + (uint64_t)n);  // the programs ignore the ring
      std::vector<std::unique_ptr<Prog>> progs;
      const int nchunks = algo == KOLO_ALGO_RD ? 1 : n;
      std::vector<int> finals((size_t)nchunks, 0);
      for (int r = 0; r < n; r++) {
        progs.push_back(build(KOLO_COLL_ALL_REDUCE, ring, r, algo));
        ASSERT_TRUE(progs.back());
        check_doubling_program(algo, n, r, progs.back()->p, finals);
      }
      // The average divides once per element: on each rank of the doubling
      // (rd), on the rank that owns the chunk (rabenseifner).
      for (int c = 0; c < nchunks; c++)
        EXPECT_EQ(finals[(size_t)c], algo == KOLO_ALGO_RD ? kolo_pow2_floor(n) : 1) << "chunk " << c << " n " << n;
      // Both ends of every pipe name the same chunks in the same order.
      expect_pipes_in_step(progs, std::string(kolo_algo_name(algo)) + " n=" + std::to_string(n));
    }
}

// The direct all-reduce: rank r talks to every other rank, reads each input
// chunk once (sends the others' chunks, reduces its own), owns chunk r (its
// one FINAL), and the two ends of every pipe name the same chunks.
TEST(ScheduleStructure, DirectAllReducePrograms) {
  for (int n = 1; n <= 16; n++) {
    Ring ring = identity_ring(n);
    std::vector<std::unique_ptr<Prog>> progs;
    std::vector<int> finals((size_t)n, 0);
    for (int r = 0; r < n; r++) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " rank=" << r);
      progs.push_back(build(KOLO_COLL_ALL_REDUCE, ring, r, KOLO_ALGO_DIRECT));
      ASSERT_TRUE(progs.back());
      const kolo_program &p = progs.back()->p;
      EXPECT_EQ(p.layout, KOLO_LAYOUT_RING);
      ASSERT_EQ(p.npeers, n == 1 ? 0 : n - 1);
      EXPECT_EQ(p.nsteps, n == 1 ? 1 : 4 * (n - 1));
      std::vector<int> seen((size_t)n, 0), reads((size_t)n, 0);
      for (int i = 0; i < p.npeers; i++) {
        ASSERT_TRUE(p.peers[i].rank >= 0 && p.peers[i].rank < n && p.peers[i].rank != r);
        EXPECT_EQ(seen[(size_t)p.peers[i].rank]++, 0) << "rank " << p.peers[i].rank << " listed twice";
      }
      for (int i = 0; i < p.nsteps; i++) {
        const kolo_step &st = p.steps[i];
        if (kolo_step_reads_src(st.op) && st.src_buf == KOLO_BUF_IN) reads[(size_t)st.src_chunk]++;
        if (kolo_step_writes_dst(st.op)) {
          EXPECT_EQ(st.dst_buf, KOLO_BUF_OUT) << "step " << i << " writes IN";
        }
        if (st.flags & KOLO_STEP_FINAL) {
          EXPECT_EQ(st.dst_chunk, n == 1 ? 0 : r) << "step " << i << " finishes another rank's chunk";
          finals[(size_t)st.dst_chunk]++;
        }
      }
      for (int c = 0; c < n; c++) EXPECT_EQ(reads[(size_t)c], n == 1 ? (c == 0) : 1) << "input chunk " << c;
    }
    for (int c = 0; c < n; c++) EXPECT_EQ(finals[(size_t)c], n == 1 ? (c == 0) : 1) << "chunk " << c << " n " << n;
    std::vector<std::vector<size_t>> chunks = expect_pipes_in_step(progs, "direct n=" + std::to_string(n));
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++)
        EXPECT_EQ(chunks[(size_t)a][(size_t)b], a == b || n == 1 ? 0u : 2u) << "n=" << n << " pipe " << a << "->" << b;
  }
}

// The one-shot all-reduce: rank r sends its input to every other rank, once,
// receives every other rank's once, reads its own input n times (n - 1 sends
// and its fold), keeps its running result in SCRATCH[0] (from 3 ranks: with
// 2 the one receive carries it) and finishes OUT with one FINAL.
TEST(ScheduleStructure, OneshotAllReducePrograms) {
  for (int n = 1; n <= 16; n++) {
    Ring ring = identity_ring(n);
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " rank=" << r);
      progs.push_back(build(KOLO_COLL_ALL_REDUCE, ring, r, KOLO_ALGO_ONESHOT));
      ASSERT_TRUE(progs.back());
      const kolo_program &p = progs.back()->p;
      EXPECT_EQ(p.layout, KOLO_LAYOUT_FLAT);
      ASSERT_EQ(p.npeers, n == 1 ? 0 : n - 1);
      EXPECT_LE(p.nsteps, 2 * n);
      std::vector<int> sends((size_t)n, 0), recvs((size_t)n, 0);
      int reads = 0, finals = 0;
      for (int i = 0; i < p.nsteps; i++) {
        const kolo_step &st = p.steps[i];
        EXPECT_EQ(st.src_chunk + st.dst_chunk, 0) << "step " << i;
        if (kolo_step_sends(st.op)) sends[(size_t)p.peers[st.to].rank]++;
        if (kolo_step_recvs(st.op)) recvs[(size_t)p.peers[st.from].rank]++;
        reads += kolo_step_reads_src(st.op) && st.src_buf == KOLO_BUF_IN;
        if (kolo_step_writes_dst(st.op)) {
          EXPECT_NE(st.dst_buf, KOLO_BUF_IN) << "step " << i << " writes IN";
        }
        if (st.flags & KOLO_STEP_FINAL) {  // the last fold: into OUT, or into SCRATCH and copied there
          const bool copied = i == p.nsteps - 2 && p.steps[i + 1].op == KOLO_STEP_COPY &&
                              p.steps[i + 1].src_buf == KOLO_BUF_SCRATCH && p.steps[i + 1].dst_buf == KOLO_BUF_OUT;
          EXPECT_TRUE((i == p.nsteps - 1 && st.dst_buf == KOLO_BUF_OUT) || copied) << "step " << i;
          finals++;
        }
      }
      for (int q = 0; q < n; q++) {
        EXPECT_EQ(sends[(size_t)q], q != r) << "sends to rank " << q;
        EXPECT_EQ(recvs[(size_t)q], q != r) << "receives from rank " << q;
      }
      EXPECT_EQ(reads, n);
      EXPECT_EQ(finals, 1);
      EXPECT_EQ(kolo_program_uses_scratch(&p), n >= 3);
    }
    std::vector<std::vector<size_t>> chunks = expect_pipes_in_step(progs, "oneshot n=" + std::to_string(n));
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++)
        EXPECT_EQ(chunks[(size_t)a][(size_t)b], a == b || n == 1 ? 0u : 1u) << "n=" << n << " pipe " << a << "->" << b;
  }
}

// N = 1..16 x every count x geometry for both algorithms, op (sum, max,
// avg, ordered), in place and FIFO bound rotating; the full geometry
// product at a few N.
TEST(ScheduleModel, DoublingAllReduceGrid) {
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  const ROp ops[] = {ROp::kSum, ROp::kMax, ROp::kAvg, ROp::kOrdered};
  for (int algo : kPeerAlgos)
    for (int n = 1; n <= 16 && g.go(); n++)
      for (size_t count : kCounts)
        for (int nch : kChannels)
          for (size_t slot : kSlots)
            for (size_t esz : kElemSizes) {
              const bool full = n == 1 || n == 2 || n == 3 || n == 5 || n == 8 || n == 16;
              if (!full && (esz == 8 || slot == 64)) continue;
              Case c;
              c.algo = algo;
              c.nranks = n;
              c.count = count;
              c.nchannels = nch;
              c.slot_elems = slot;
              c.elem_size = esz;
              c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)algo, count), mix((uint64_t)nch * 7 + esz, slot));
              c.in_place = (c.seed >> 8) & 1;
              c.capacity = capacity_for(c.seed >> 16);
              c.op = ops[(c.seed >> 24) % 4];
              if (sampled(c)) g.check(c, c.op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
            }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %ld recursive doubling / Rabenseifner / direct cases in %lld ms\n", g.cases, (long long)ms);
}

// Every op, in and out of place, for N = 1..16 at a few counts: the ring
// too, which must give every rank the same values (kOrdered) as well.
TEST(ScheduleModel, AllReduceEveryAlgorithmAndOp) {
  Grid g;
  for (int algo : {KOLO_ALGO_RING, KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT, KOLO_ALGO_ONESHOT})
    for (int n = 1; n <= 16 && g.go(); n++)
      for (size_t count : {(size_t)1, (size_t)65, (size_t)4097})
        for (bool inplace : {false, true})
          for (ROp op : {ROp::kSum, ROp::kMax, ROp::kAvg, ROp::kOrdered}) {
            Case c;
            c.algo = algo;
            c.nranks = n;
            c.count = count;
            c.in_place = inplace;
            c.op = op;
            c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)algo, count), (uint64_t)op * 2 + inplace);
            draw_geometry(c);
            if (sampled(c)) g.check(c, op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
          }
}

TEST(ScheduleModel, DoublingFewestSlots) {
  // Connectors of 2 or 4 slots (a chunk is 1 or 2 of them), FIFOs bounded
  // to them, one slice per turn or many: no deadlock.
  Grid g;
  for (int algo : kPeerAlgos)
    for (int n : {2, 3, 5, 7, 12, 16})
      for (size_t count : {(size_t)65, (size_t)1000, (size_t)4097})
        for (int nslots : {2, 4}) {
          Case c;
          c.algo = algo;
          c.nranks = n;
          c.count = count;
          c.nslots = nslots;
          c.capacity = (size_t)nslots;
          c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)algo, count), (uint64_t)nslots);
          c.nchannels = kChannels[(c.seed >> 4) % 3];
          c.in_place = (c.seed >> 12) & 1;
          c.op = (c.seed >> 16) & 1 ? ROp::kOrdered : ROp::kSum;
          if (sampled(c)) g.check(c, run_collective<int64_t>(c));
        }
}

// The model catches a doubling program that is wrong: in the order of its
// operands (ranks disagree), its FINAL flags (avg off), or its order of
// steps (every rank receives first: a cycle of waits).
TEST(ScheduleModel, CatchesBrokenDoublingPrograms) {
  for (int algo : kPeerAlgos)
    for (int n : {4, 6}) {
      SCOPED_TRACE(::testing::Message() << kolo_algo_name(algo) << " n=" << n);
      Ring ring = identity_ring(n);
      auto run = [&](ROp op, const std::function<void(kolo_program &)> &breakit) {
        Case c;
        c.algo = algo;
        c.nranks = n;
        c.count = 1000;
        c.op = op;
        c.capacity = 8;
        std::vector<std::unique_ptr<Prog>> progs;
        for (int r = 0; r < n; r++) {
          progs.push_back(build(KOLO_COLL_ALL_REDUCE, ring, r, algo));
          breakit(progs.back()->p);
        }
        Model<int64_t> m(params_of(c));
        std::vector<int> in((size_t)n), out((size_t)n);
        Rng rng(7);
        for (int r = 0; r < n; r++) {
          in[(size_t)r] = m.add_arena(random_values<int64_t>(rng, c.count));
          out[(size_t)r] = m.add_arena(std::vector<int64_t>(c.count, poison<int64_t>()));
          m.add_task(r, 0, &progs[(size_t)r]->p, View{in[(size_t)r], 0, c.count, true, false},
                     View{out[(size_t)r], 0, c.count, true, true});
        }
        std::string err = m.run();
        if (!err.empty()) return err;
        for (int r = 1; r < n; r++)
          if (m.arenas[(size_t)out[(size_t)r]] != m.arenas[(size_t)out[0]]) return std::string("ranks differ");
        return std::string();
      };
      auto each_step = [](const std::function<void(kolo_step &)> &f) {
        return [f](kolo_program &p) {
          for (int i = 0; i < p.nsteps; i++) f(p.steps[i]);
        };
      };
      EXPECT_EQ(run(ROp::kOrdered, [](kolo_program &) {}), "");
      EXPECT_EQ(run(ROp::kOrdered, each_step([](kolo_step &s) { s.flags &= ~KOLO_STEP_SRC_FIRST; })),
                algo == KOLO_ALGO_RD || algo == KOLO_ALGO_ONESHOT ? "ranks differ" : "")
          << "rabenseifner and direct reduce each element once: their order cannot make ranks differ";
      std::string err = run(ROp::kSum, [](kolo_program &p) {  // each rank's first receive before its sends
        for (int i = 0; i < p.nsteps; i++)
          if (kolo_step_recvs(p.steps[i].op)) {
            std::rotate(p.steps, p.steps + i, p.steps + i + 1);
            break;
          }
      });
      EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
    }
}

// The grids allocate and free buffers of up to a few MiB thousands of times:
// keep glibc from handing them back to the kernel each time (page faults
// would double the run time).  No effect under sanitizers' allocators.
#if defined(__GLIBC__)
const bool kMallocTuned = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc takes
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  return true;
}();
#endif

}  // namespace

// ---- the broadcast tree (ring/bcast_tree.c) ----------------------------------------

// ceil(log2 n): the tree's depth.
int tree_depth(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

// Every n 1..16 and root: each non-root receives every chunk once, from
// one parent; every peer lies 2^j away; the hops from the root to any rank
// are at most ceil(log2 n) (the chain's are n - 1); sends and receives
// pair up on every pipe.
TEST(ScheduleStructure, TreeBroadcastPrograms) {
  for (int n = 1; n <= 16; n++)
    for (int root = 0; root < n; root++) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " root=" << root);
      Ring ring = identity_ring(n);
      std::vector<std::unique_ptr<Prog>> progs;
      std::vector<int> parent((size_t)n, -1);
      std::map<std::pair<int, int>, int> sends, recvs;
      for (int r = 0; r < n; r++) {
        progs.push_back(build(KOLO_COLL_BROADCAST, ring, r, root, KOLO_ALGO_TREE));
        ASSERT_TRUE(progs.back());
        const kolo_program &p = progs.back()->p;
        EXPECT_EQ(p.layout, KOLO_LAYOUT_FLAT);
        int nrecv = 0;
        for (int i = 0; i < p.nsteps; i++) {
          const kolo_step &s = p.steps[i];
          EXPECT_EQ(s.src_chunk, 0);
          EXPECT_EQ(s.dst_chunk, 0);
          EXPECT_FALSE(kolo_step_reduces(s.op));
          EXPECT_EQ(s.flags, 0);
          if (r != root && kolo_step_reads_src(s.op)) {
            EXPECT_EQ(s.src_buf, KOLO_BUF_OUT) << "step " << i;
          }
          int to = kolo_step_send_rank(&p, &s), from = kolo_step_recv_rank(&p, &s);
          if (to >= 0) sends[{r, to}]++;
          if (from >= 0) recvs[{from, r}]++, nrecv++, parent[(size_t)r] = from;
          // sends go 2^j forward, receives come from 2^j back (mod n)
          for (int d : {to >= 0 ? (to - r + n) % n : 1, from >= 0 ? (r - from + n) % n : 1})
            EXPECT_EQ(d & (d - 1), 0) << "rank " << r << " step " << i << ": a peer " << d << " away";
        }
        EXPECT_EQ(nrecv, r == root ? 0 : 1) << "rank " << r;
        if (n > 1) {
          EXPECT_EQ(p.nsteps, std::max(1, p.npeers - (r != root)));
        }
      }
      EXPECT_EQ(sends, recvs);
      for (int r = 0; r < n; r++) {
        int hops = 0;
        for (int x = r; x != root && hops <= n; x = parent[(size_t)x]) hops++;
        EXPECT_LE(hops, tree_depth(n)) << "rank " << r;
      }
    }
}

// A broadcast tree's grid (algo, seeds salted): every n, root, count.
void broadcast_grid(int algo, uint64_t salt, const char *what, int coll = KOLO_COLL_BROADCAST) {
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  for (int n = 1; n <= 16 && g.go(); n++)
    for (int root = 0; root < n; root++)
      for (size_t count : {(size_t)0, (size_t)1, (size_t)63, (size_t)65, (size_t)1000, (size_t)4097}) {
        Case c;
        c.coll = coll;
        c.algo = algo;
        c.nranks = n;
        c.root = root;
        c.count = count;
        c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)root, count), salt);
        draw_geometry_ring_in_place(c);
        c.op = (c.seed >> 24) & 1 ? ROp::kAvg : ROp::kSum;
        g.check(c, c.op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
      }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %ld %s %s cases in %lld ms\n", g.cases, what, kolo_coll_name(coll), (long long)ms);
}

// Connectors of 2 or 4 slots (a chunk is 1 or 2 of them), FIFOs bounded
// to them, many rounds: no deadlock, whatever the root (1-3 channels).
void broadcast_fewest_slots(int algo, uint64_t salt, std::initializer_list<int> ns, int coll = KOLO_COLL_BROADCAST) {
  Grid g;
  for (int n : ns)
    for (int root : {0, 1, n - 1})
      for (int nslots : {2, 4}) {
        Case c;
        c.coll = coll;
        c.algo = algo;
        c.nranks = n;
        c.root = root;
        c.count = 1000;
        c.nslots = nslots;
        c.capacity = (size_t)nslots;
        c.seed = mix(mix((uint64_t)n * 16 + (uint64_t)root, 1000), (uint64_t)nslots + salt);
        c.nchannels = kChannels[(c.seed >> 4) % 3];
        c.in_place = (c.seed >> 12) & 1;
        g.check(c, run_collective<int64_t>(c));
      }
}

// N = 1..16 x every root x counts x geometry, in and out of place, the
// FIFO bound rotating, avg too (a broadcast must not divide): every
// element of every rank's output, and no deadlock.
TEST(ScheduleModel, TreeBroadcastGrid) { broadcast_grid(KOLO_ALGO_TREE, 0x72ee, "tree"); }

TEST(ScheduleModel, TreeBroadcastFewestSlots) { broadcast_fewest_slots(KOLO_ALGO_TREE, 0, {3, 5, 7, 12, 16}); }

// The model and the C checker refuse a tree whose inner rank forwards
// nothing (a dropped step) or the wrong peer, and one whose ranks all
// wait to receive first (a cycle: the root made to receive from a leaf).
void expect_broken_trees_caught(int coll, int algo = KOLO_ALGO_TREE) {
  for (int n : {4, 7}) {
    Case c = checker_case(coll, n, 1, (uint64_t)n);
    c.algo = algo;
    for (int kind : {(int)kDropStep, (int)kChangePeer}) {
      std::string model, checker;
      ASSERT_TRUE(both_verdicts(c, kind, 11, &model, &checker));
      EXPECT_NE(model, "") << kolo_coll_name(coll) << " " << mutation_name(kind);
      EXPECT_NE(checker, "") << kolo_coll_name(coll) << " " << mutation_name(kind);
    }
  }
}

TEST(ScheduleModel, CatchesBrokenTreePrograms) { expect_broken_trees_caught(KOLO_COLL_BROADCAST); }

// ---- the reduce tree (ring/reduce_tree.c) ----------------------------------------

// Rank r's reduce program of algo (channel ch, n ranks, root): the
// broadcast tree's edges reversed (it sends once, to its parent, and
// receives once from each child), the root's last fold FINAL into OUT, a
// rank with two or more children keeps its running sum in SCRATCH, and no
// step writes IN.
void check_reduce_tree(int algo, int ch, int n, int root, int r) {
  SCOPED_TRACE(::testing::Message() << kolo_algo_name(algo) << " ch=" << ch << " n=" << n << " root=" << root
                                    << " rank=" << r);
  std::unique_ptr<Prog> prog = build(KOLO_COLL_REDUCE, identity_ring(n), r, root, algo, ch);
  ASSERT_TRUE(prog);
  const kolo_program &p = prog->p;
  int parent, kids[32];
  const int nkids = algo == KOLO_ALGO_TREE ? kolo_sched_binomial_peers(n, r, root, &parent, kids)
                                           : kolo_sched_dbtree_peers(n, r, root, ch, &parent, kids);
  std::vector<int> sends((size_t)n, 0), recvs((size_t)n, 0);
  int finals = 0;
  for (int i = 0; i < p.nsteps; i++) {
    const kolo_step &s = p.steps[i];
    const int to = kolo_step_send_rank(&p, &s), from = kolo_step_recv_rank(&p, &s);
    if (to >= 0) sends[(size_t)to]++;
    if (from >= 0) recvs[(size_t)from]++;
    if (kolo_step_writes_dst(s.op)) {
      EXPECT_NE(s.dst_buf, KOLO_BUF_IN);
      EXPECT_TRUE(r == root || s.dst_buf != KOLO_BUF_OUT) << "a non-root writes OUT";
    }
    finals += (s.flags & KOLO_STEP_FINAL) != 0;
  }
  for (int q = 0; q < n; q++) {
    EXPECT_EQ(sends[(size_t)q], q == parent && n > 1) << "sends to " << q;
    EXPECT_EQ(recvs[(size_t)q], std::count(kids, kids + nkids, q)) << "receives from " << q;
  }
  EXPECT_EQ(finals, r == root);
  EXPECT_EQ(kolo_program_uses_scratch(&p), nkids >= 2);
}

// Every n 1..16, root and rank, the binomial tree and both trees of the
// double binary tree (channels 0 and 1).
TEST(ScheduleStructure, TreeReducePrograms) {
  for (int algo : {KOLO_ALGO_TREE, KOLO_ALGO_DBTREE})
    for (int ch = 0; ch < (algo == KOLO_ALGO_DBTREE ? 2 : 1); ch++)
      for (int n = 1; n <= 16; n++)
        for (int root = 0; root < n; root++)
          for (int r = 0; r < n; r++) check_reduce_tree(algo, ch, n, root, r);
}

// N = 1..16 x every root x counts x geometry, in and out of place, sum and
// avg: the root's every element, the others' outputs untouched, no deadlock.
TEST(ScheduleModel, TreeReduceGrid) { broadcast_grid(KOLO_ALGO_TREE, 0x7ed, "tree", KOLO_COLL_REDUCE); }

TEST(ScheduleModel, TreeReduceFewestSlots) {
  broadcast_fewest_slots(KOLO_ALGO_TREE, 0x7ed, {3, 5, 7, 12, 16}, KOLO_COLL_REDUCE);
}

TEST(ScheduleModel, DoubleTreeReduceGrid) {
  broadcast_grid(KOLO_ALGO_DBTREE, 0xdb7ed, "double tree", KOLO_COLL_REDUCE);
}

TEST(ScheduleModel, DoubleTreeReduceFewestSlots) {
  broadcast_fewest_slots(KOLO_ALGO_DBTREE, 0xdb7ed, {3, 4, 5, 8, 13, 16}, KOLO_COLL_REDUCE);
}

// The model and the C checker refuse a reduce tree with a dropped step or
// a step moved to another peer.
TEST(ScheduleModel, CatchesBrokenTreeReducePrograms) {
  expect_broken_trees_caught(KOLO_COLL_REDUCE);
  expect_broken_trees_caught(KOLO_COLL_REDUCE, KOLO_ALGO_DBTREE);
}

// ---- the double binary tree's broadcast (ring/bcast_dbtree.c) --------------------

int floor_log2(int m) {
  int k = 0;
  while ((2 << k) <= m) k++;
  return k;
}

// Every n 1..16, root and tree (channel 0 and 1): each non-root receives
// every chunk once, from one parent, and sends it to at most two children;
// the root sends to one; the hops from the root are at most
// floor(log2(n-1)) + 1; no rank but the root is an inner node of both
// trees, so none sends more than two chunks per pair of channels; every
// peer lies 2^j away either way, or (second tree, n even) P - 1 from the
// root, the set core/tree_pipes.c connects; sends and receives pair up.
TEST(ScheduleStructure, DoubleTreeBroadcastPrograms) {
  for (int n = 1; n <= 16; n++)
    for (int root = 0; root < n; root++) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " root=" << root);
      Ring ring = identity_ring(n);
      std::vector<int> sends_per_rank((size_t)n, 0);
      std::vector<int> inner_in((size_t)n, 0);
      for (int tree = 0; tree < 2; tree++) {
        std::vector<int> parent((size_t)n, -1);
        std::map<std::pair<int, int>, int> sends, recvs;
        for (int r = 0; r < n; r++) {
          auto pr = build(KOLO_COLL_BROADCAST, ring, r, root, KOLO_ALGO_DBTREE, tree);
          ASSERT_TRUE(pr);
          const kolo_program &p = pr->p;
          EXPECT_EQ(p.layout, KOLO_LAYOUT_FLAT);
          int nrecv = 0, nsend = 0;
          for (int i = 0; i < p.nsteps; i++) {
            const kolo_step &st = p.steps[i];
            EXPECT_FALSE(kolo_step_reduces(st.op));
            EXPECT_EQ(st.flags, 0);
            if (r != root && kolo_step_reads_src(st.op)) {
              EXPECT_EQ(st.src_buf, KOLO_BUF_OUT) << "step " << i;
            }
            int to = kolo_step_send_rank(&p, &st), from = kolo_step_recv_rank(&p, &st);
            if (to >= 0) {
              sends[{r, to}]++, nsend++;
              int d = (to - r + n) % n, back = n - d, top = 1 << floor_log2(std::max(1, n - 1));
              bool pow2 = (d & (d - 1)) == 0 || (back & (back - 1)) == 0;
              EXPECT_TRUE(pow2 || (tree == 1 && n % 2 == 0 && r == root && d == top - 1))
                  << "rank " << r << " sends to " << to << ", " << d << " away";
            }
            if (from >= 0) recvs[{from, r}]++, nrecv++, parent[(size_t)r] = from;
          }
          EXPECT_EQ(nrecv, r == root ? 0 : 1) << "rank " << r;
          EXPECT_LE(nsend, r == root ? (n > 1 ? 1 : 0) : 2) << "rank " << r;
          sends_per_rank[(size_t)r] += nsend;
          if (r != root && nsend > 0) inner_in[(size_t)r]++;
        }
        EXPECT_EQ(sends, recvs);
        for (int r = 0; r < n; r++) {
          int hops = 0;
          for (int x = r; x != root && hops <= n; x = parent[(size_t)x]) hops++;
          EXPECT_LE(hops, n > 1 ? floor_log2(n - 1) + 1 : 0) << "rank " << r << " tree " << tree;
        }
      }
      for (int r = 0; r < n; r++) {
        EXPECT_LE(inner_in[(size_t)r], 1) << "rank " << r << " is inner in both trees";
        EXPECT_LE(sends_per_rank[(size_t)r], 2) << "rank " << r;
      }
    }
}

// N = 1..16 x every root x counts x geometry (1, 2 or 3 channels: one tree,
// both, both with the first twice), in and out of place, avg too: every
// element of every rank's output, and no deadlock.
TEST(ScheduleModel, DoubleTreeBroadcastGrid) { broadcast_grid(KOLO_ALGO_DBTREE, 0xdb7ee, "double tree"); }

TEST(ScheduleModel, DoubleTreeBroadcastFewestSlots) {
  broadcast_fewest_slots(KOLO_ALGO_DBTREE, 0xdb, {3, 4, 5, 7, 12, 16});
}

// The model and the C checker refuse a double tree with a dropped step or
// a wrong peer.
TEST(ScheduleModel, CatchesBrokenDoubleTreePrograms) {
  for (int n : {4, 7}) {
    Case c = checker_case(KOLO_COLL_BROADCAST, n, 1, (uint64_t)n + 0xdb);
    c.algo = KOLO_ALGO_DBTREE;
    c.nchannels = 2;
    for (int kind : {(int)kDropStep, (int)kChangePeer}) {
      std::string model, checker;
      ASSERT_TRUE(both_verdicts(c, kind, 11, &model, &checker));
      EXPECT_NE(model, "") << mutation_name(kind);
      EXPECT_NE(checker, "") << mutation_name(kind);
    }
  }
}

// ---- Bruck's all-gather (ring/all_gather_bruck.c) ----------------------------------

// The blocks a level of distance d = 2^k moves each way among n ranks:
// m = min(d, n - d).
int bruck_blocks(int n, int d) { return std::min(d, n - d); }

// The structure of rank r's program among n: "" or what is wrong.  Its
// levels come in order, ceil(log2 n) of them, level k sending to r - 2^k
// and receiving from r + 2^k, m blocks each way, two sends ahead of the
// receives; every block it sends it holds (its own, copied in -> out once
// by the first step, or one it received before); it receives every other
// block exactly once and never its own.
std::string bruck_structure(const kolo_program &p, int n, int r) {
  if (p.layout != KOLO_LAYOUT_FLAT || !p.out_blocked || p.in_blocked) return "not FLAT with a blocked out only";
  if (n == 1)
    return p.nsteps == 1 && p.steps[0].op == KOLO_STEP_COPY && p.steps[0].dst_chunk == 0 ? "" : "not one copy";
  if (p.nsteps != 2 * (n - 1)) return "has " + std::to_string(p.nsteps) + " steps";
  std::vector<int> got((size_t)n, 0);
  int at = 0, levels = 0;
  for (int d = 1; d < n; d *= 2, levels++) {
    const int m = bruck_blocks(n, d);
    int sent = 0, recvd = 0;
    for (int i = at; i < at + 2 * m; i++) {
      const kolo_step &s = p.steps[i];
      if (s.flags != 0 || kolo_step_reduces(s.op)) return "step " + std::to_string(i) + " reduces or has flags";
      const bool snd = kolo_step_sends(s.op), rcv = kolo_step_recvs(s.op);
      // two sends ahead: S0 S1 R0 S2 R1 ... S(m-1) R(m-2) R(m-1)
      const int k = i - at;
      const bool want_send = k == 0 || (k % 2 == 1 && k < 2 * m - 1);
      if (snd == rcv || snd != want_send) return "step " + std::to_string(i) + " is out of the two-ahead order";
      if (snd) {
        const int b = s.op == KOLO_STEP_COPY_SEND ? s.dst_chunk : s.src_chunk;
        if (kolo_step_send_rank(&p, &s) != (r - d + n) % n) return "level " + std::to_string(d) + " sends elsewhere";
        if (b != (r + sent) % n) return "step " + std::to_string(i) + " sends the wrong block";
        const bool first = d == 1 && sent == 0;
        if ((s.op == KOLO_STEP_COPY_SEND) != first || (first && s.src_buf != KOLO_BUF_IN) ||
            (!first && (s.op != KOLO_STEP_SEND || s.src_buf != KOLO_BUF_OUT)))
          return "step " + std::to_string(i) + " is not the own block's copySend or a send from out";
        if (!first && got[(size_t)b] != 1) return "step " + std::to_string(i) + " sends a block it does not hold";
        if (first) got[(size_t)b]++;
        sent++;
      } else {
        if (s.op != KOLO_STEP_RECV || s.dst_buf != KOLO_BUF_OUT) return "step " + std::to_string(i) + " is no recv";
        if (kolo_step_recv_rank(&p, &s) != (r + d) % n) return "level " + std::to_string(d) + " receives elsewhere";
        if (s.dst_chunk != (r + d + recvd) % n) return "step " + std::to_string(i) + " receives the wrong block";
        got[(size_t)s.dst_chunk]++;
        recvd++;
      }
    }
    at += 2 * m;
  }
  int want_levels = 0;
  while ((1 << want_levels) < n) want_levels++;
  if (levels != want_levels) return std::to_string(levels) + " levels";
  for (int b = 0; b < n; b++)
    if (got[(size_t)b] != 1) return "block " + std::to_string(b) + " written " + std::to_string(got[(size_t)b]) + " times";
  for (int i = 0; i < p.npeers; i++)
    for (int j = 0; j < i; j++)
      if (p.peers[i].rank == p.peers[j].rank || p.peers[i].rank == r) return "peers repeat, or hold the rank itself";
  return "";
}

// Every n 1..16: each rank's program as bruck_structure says, every peer
// 2^k away (mod n), both ends of every pipe naming the same blocks in the
// same order, and each rank's pipes to the others carrying n - 1 blocks in
// all.
TEST(ScheduleStructure, BruckAllGatherPrograms) {
  for (int n = 1; n <= 16; n++) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    Ring ring = identity_ring(n);
    std::vector<std::unique_ptr<Prog>> progs;
    for (int r = 0; r < n; r++) {
      progs.push_back(build(KOLO_COLL_ALL_GATHER, ring, r, 0, KOLO_ALGO_BRUCK));
      ASSERT_TRUE(progs.back());
      EXPECT_EQ(bruck_structure(progs.back()->p, n, r), "") << "rank " << r;
      const kolo_program &p = progs.back()->p;
      for (int i = 0; i < p.npeers; i++) {
        const int d = (p.peers[i].rank - r + n) % n, e = n - d;  // one way or the other: 2^k
        EXPECT_TRUE((d & (d - 1)) == 0 || (e & (e - 1)) == 0) << "rank " << r << ": a peer " << d << " away";
      }
    }
    // both ends of every pipe: the blocks the sender sends (its own, the
    // copySend's dst) and those the receiver receives, in the same order
    for (int a = 0; a < n; a++) {
      size_t out = 0;
      for (int b = 0; b < n; b++) {
        std::vector<int> st, rt;
        const kolo_program &pa = progs[(size_t)a]->p, &pb = progs[(size_t)b]->p;
        for (int i = 0; i < pa.nsteps; i++)
          if (kolo_step_send_rank(&pa, &pa.steps[i]) == b)
            st.push_back(pa.steps[i].op == KOLO_STEP_COPY_SEND ? pa.steps[i].dst_chunk : pa.steps[i].src_chunk);
        for (int i = 0; i < pb.nsteps; i++)
          if (kolo_step_recv_rank(&pb, &pb.steps[i]) == a) rt.push_back(pb.steps[i].dst_chunk);
        EXPECT_EQ(st, rt) << "pipe " << a << "->" << b;
        out += st.size();
      }
      EXPECT_EQ(out, (size_t)(n - 1)) << "rank " << a << " sends every block but one it received";
    }
  }
}

// N = 1..16 x counts x three draws of geometry (channels, slots, element
// sizes, ring kinds: the program ignores the ring), in and out of place,
// the FIFO bound rotating, avg too (an all-gather must not divide): every
// element of every rank's output, and no deadlock.
TEST(ScheduleModel, BruckAllGatherGrid) {
  Grid g;
  auto t0 = std::chrono::steady_clock::now();
  for (int n = 1; n <= 16 && g.go(); n++)
    for (size_t count : kCounts)
      for (uint64_t draw = 0; draw < 3; draw++) {
        Case c;
        c.coll = KOLO_COLL_ALL_GATHER;
        c.algo = KOLO_ALGO_BRUCK;
        c.nranks = n;
        c.count = count;
        c.seed = mix(mix((uint64_t)n, count), 0xb7c4 + draw);
        draw_geometry_ring_in_place(c);
        c.op = (c.seed >> 24) & 1 ? ROp::kAvg : ROp::kSum;
        if (!sampled(c)) continue;
        g.check(c, c.op == ROp::kAvg ? run_collective<double>(c) : run_collective<int64_t>(c));
      }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  printf("[          ] %ld Bruck all-gather cases in %lld ms\n", g.cases, (long long)ms);
}

// Connectors of 2 or 4 slots (a chunk is 1 or 2 of them: the pipe holds
// two chunks), FIFOs bounded to them, many rounds, levels of up to 8
// blocks: no deadlock, every element.
TEST(ScheduleModel, BruckAllGatherFewestSlots) {
  Grid g;
  for (int n : {3, 5, 6, 7, 8, 9, 12, 16})
    for (int nslots : {2, 4}) {
      Case c;
      c.coll = KOLO_COLL_ALL_GATHER;
      c.algo = KOLO_ALGO_BRUCK;
      c.nranks = n;
      c.count = 1000;
      c.nslots = nslots;
      c.capacity = (size_t)nslots;
      c.seed = mix(mix((uint64_t)n, 1000), (uint64_t)nslots);
      c.nchannels = kChannels[(c.seed >> 4) % 3];
      c.in_place = (c.seed >> 12) & 1;
      g.check(c, run_collective<int64_t>(c));
    }
}

// Every level of p, reordered: its m sends, then its m receives.
void sends_before_receives(kolo_program &p, int n) {
  for (int d = 1, at = 0; d < n; at += 2 * bruck_blocks(n, d), d *= 2)
    std::stable_partition(p.steps + at, p.steps + at + 2 * bruck_blocks(n, d),
                          [](const kolo_step &s) { return kolo_step_sends(s.op) != 0; });
}

// The order matters: a level of m > 2 blocks whose sends all come before
// its receives has every rank blocked on its third send into a pipe that
// holds two chunks, around the cycle.  Both the model (FIFOs of two
// chunks) and the C checker call it a deadlock, from 7 ranks up (below,
// m <= 2 and the reordered program is the same); broken programs (a
// dropped step, a peer or chunk changed) are refused by both.
TEST(ScheduleModel, CatchesBrokenBruckPrograms) {
  for (int n : {4, 6, 7, 8, 12}) {
    Case c = checker_case(KOLO_COLL_ALL_GATHER, n, 0, (uint64_t)n);
    c.algo = KOLO_ALGO_BRUCK;
    c.ring_kind = kIdentity;
    std::string checker;
    Mutator sends_first = [&](int ch, std::vector<std::unique_ptr<Prog>> &progs) {
      for (auto &pr : progs) sends_before_receives(pr->p, n);
      if (ch == 0) checker = c_verdict(c.coll, n, 0, -1, progs);
    };
    std::string model = run_collective<double>(c, sends_first);
    if (n < 7) {
      EXPECT_EQ(model, "") << n;
      EXPECT_EQ(checker, "") << n;
    } else {
      EXPECT_NE(model.find("deadlock"), std::string::npos) << n << ": " << model;
      EXPECT_NE(checker.find("deadlock"), std::string::npos) << n << ": " << checker;
    }
    for (int kind : {(int)kDropStep, (int)kChangePeer, (int)kChangeChunk}) {
      std::string m, k;
      ASSERT_TRUE(both_verdicts(c, kind, 11, &m, &k));
      EXPECT_NE(m, "") << n << " " << mutation_name(kind);
      EXPECT_NE(k, "") << n << " " << mutation_name(kind);
    }
  }
}
