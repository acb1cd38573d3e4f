// test_cuda_plan.cc - the CUDA planner (core/cuda_plan.c) and CUDA
// communicator init, on machines with or without a GPU.
//
// The planner is a pure function of ops and per-comm tables, so it runs
// here with fake device pointers: real programs from ring/ (one per
// collective, root and peer, as a CUDA comm uploads them) stand beside fake
// device copies of their steps, and fake connector ends carry unique step
// counter addresses (the planner's notion of "the same end").  Checked:
// task count and channels, programs and connector ends chosen, geometry
// equal to what the host executor builds (enqueue.c: chunk = half the
// slots), the protocol choice (LL up to KOLO_LL_THRESHOLD bytes, the same on
// every rank), cuts between launches (shared end, dtype, protocol,
// KOLO_DEV_MAX_TASKS, a send to oneself kept with its recv), a missing pipe
// reported, by simulating launches of all ranks - that the launches of
// random groups cannot deadlock across ranks, and the slices a task moves
// through each end (what the launcher posts to a net pipe's proxy) against
// the connector steps the host executor really took running the same call
// on a host communicator of threads.
//
// Init: without a usable GPU a koloMemCuda communicator fails cleanly with
// a sentence naming the device; in a build without CUDA it is refused
// naming the build.  The end-to-end CUDA tests at the bottom need a GPU and
// skip without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern "C" {
#include "core/cuda_plan.h"
#include "core/proto_select.h"
#include "kernels/cuda/ll_format.h"
#include "kolo.h"
#include "ring/program.h"
#include "ring/schedule.h"
#include "ring/topology.h"
}

#include "util/comm_peek.h"
#include "util/expect_text.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

// ---- a fake CUDA communicator ----------------------------------------------------------

struct Shape {
  int nranks = 4, nch = 2;
  uint32_t nslots = 8;
  size_t slot_bytes = 512 * 1024;
  size_t p2p_slot_bytes = 128 * 1024;  // KOLO_P2P_BUFFSIZE / nslots: point-to-point pipes' own
  size_t min_channel_bytes = 256 * 1024;
  size_t ll_threshold = 64 * 1024;  // KOLO_LL_THRESHOLD
  uint32_t proto_off = 0;            // KOLO_PROTO's record (core/proto_select.h)
  uint32_t ll_slot_bytes = 16 * 1024;
  int max_tasks = 0;  // the block budget of a launch (0: KOLO_DEV_MAX_TASKS)
};

const void *fake(uintptr_t v) { return reinterpret_cast<const void *>(v); }

// pc's per-collective LL thresholds, as a CUDA comm without net pipes sets
// them (core/cuda_comm.c).
void set_ll_thresholds(kolo_cuda_plan_comm *pc, const Shape &sh) {
  for (int k = 0; k < KOLO_COLL_NUM; k++) pc->ll_threshold[k] = kolo_proto_ll_threshold(sh.proto_off, k, sh.ll_threshold);
}

// The protocol the planner gives op on a comm of shape sh.
int protocol_of(const Shape &sh, const kolo_op &op) {
  kolo_cuda_plan_comm pc{};
  set_ll_thresholds(&pc, sh);
  return kolo_cuda_plan_protocol(&op, &pc);
}

// The tables a CUDA comm of rank `rank` hands the planner, with every
// pipe connected (the p2p ones too) unless disconnect() says otherwise.
struct FakeComm {
  Shape sh;
  int rank;
  kolo_ring ring{};
  std::vector<kolo_program> progs[KOLO_COLL_NUM];
  std::vector<const kolo_step *> dsteps[KOLO_COLL_NUM];
  std::vector<kolo_dev_conn> ring_send, ring_recv, p2p_send, p2p_recv;
  std::vector<kolo_dev_ends> tables[KOLO_COLL_NUM];  // multi-peer end tables, fake device pointers
  std::vector<uint32_t> counters;  // only their addresses matter
  uint32_t abort_word = 0, status[3] = {0, 0, 0};
  kolo_cuda_plan_comm pc{};

  FakeComm(const Shape &s, int r) : sh(s), rank(r) {
    std::vector<uint64_t> hosts((size_t)sh.nranks, 7);
    EXPECT_EQ(kolo_ring_build(sh.nranks, hosts.data(), &ring), koloSuccess);
    for (int k = 0; k < KOLO_COLL_NUM; k++) {
      const int nslot = kolo_program_slots(k, sh.nranks);
      progs[k].resize((size_t)std::max(nslot, sh.nranks));
      dsteps[k].assign((size_t)std::max(nslot, sh.nranks), nullptr);
      for (int a = 0; a < nslot; a++) {
        EXPECT_EQ(kolo_schedule_build(k, &ring, rank, kolo_arg_root(k, a, sh.nranks), kolo_arg_algo(k, a, sh.nranks),
                                      &progs[k][(size_t)a]),
                  koloSuccess);
        dsteps[k][(size_t)a] = static_cast<const kolo_step *>(fake(dev_steps_value(k, a)));
      }
    }
    size_t np = (size_t)sh.nranks * (size_t)sh.nch;
    counters.assign(2 * (size_t)sh.nch + 2 * np, 0);
    for (int ch = 0; ch < sh.nch; ch++) {
      ring_send.push_back(conn(kolo_ring_next(&ring, rank), &counters[(size_t)ch], 0x1000 + ch));
      ring_recv.push_back(conn(kolo_ring_prev(&ring, rank), &counters[(size_t)(sh.nch + ch)], 0x2000 + ch));
    }
    for (size_t k = 0; k < np; k++) {
      int peer = (int)(k / (size_t)sh.nch);
      p2p_send.push_back(conn(peer, &counters[2 * (size_t)sh.nch + k], 0x10000 + k, sh.p2p_slot_bytes));
      p2p_recv.push_back(conn(peer, &counters[2 * (size_t)sh.nch + np + k], 0x20000 + k, sh.p2p_slot_bytes));
    }
    if (sh.nranks == 1) {  // a comm of one rank has no ring pipes
      ring_send.assign((size_t)sh.nch, kolo_dev_conn{});
      ring_recv.assign((size_t)sh.nch, kolo_dev_conn{});
    }
    pc.rank = rank;
    pc.nranks = sh.nranks;
    pc.nchannels = sh.nch;
    pc.nslots = sh.nslots;
    pc.slot_bytes = sh.slot_bytes;
    pc.p2p_slot_bytes = sh.p2p_slot_bytes;
    pc.min_channel_bytes = sh.min_channel_bytes;
    pc.max_tasks = sh.max_tasks;
    set_ll_thresholds(&pc, sh);
    pc.timeout_ns = 1234567;
    pc.abort = &abort_word;
    pc.status = status;
    for (int k = 0; k < KOLO_COLL_NUM; k++) {
      pc.programs[k] = progs[k].data();
      pc.dev_steps[k] = dsteps[k].data();
      if (!kolo_coll_may_be_multi_peer(k)) continue;
      for (int a = 0; a < kolo_program_slots(k, sh.nranks) * sh.nch; a++)
        tables[k].push_back(static_cast<kolo_dev_ends>(fake(end_table_value(k, a / sh.nch, a % sh.nch))));
      pc.end_tables[k] = tables[k].data();
    }
    pc.ring_send = ring_send.data();
    pc.ring_recv = ring_recv.data();
    pc.p2p_send = p2p_send.data();
    pc.p2p_recv = p2p_recv.data();
  }
  ~FakeComm() {
    for (auto &v : progs)
      for (auto &p : v)
        if (p.steps) kolo_program_free(&p);
    kolo_ring_free(&ring);
  }
  FakeComm(const FakeComm &) = delete;
  FakeComm &operator=(const FakeComm &) = delete;

  static uintptr_t dev_steps_value(int coll, int slot) {
    return 0x7000000000ull + (uintptr_t)coll * 0x100000 + (uintptr_t)slot * 0x100;
  }
  static uintptr_t end_table_value(int coll, int slot, int ch) {
    return 0x7c00000000ull + (uintptr_t)coll * 0x100000 + (uintptr_t)slot * 0x100 + (uintptr_t)ch * 8;
  }
  kolo_dev_conn conn(int peer, uint32_t *step, uintptr_t tag, size_t slot_bytes = 0) const {
    kolo_dev_conn d{};
    d.slots = (char *)fake(0x5000000000ull + tag * 0x1000);
    d.ll_slots = (char *)fake(0x6000000000ull + tag * 0x1000);
    d.ll_slot_bytes = sh.ll_slot_bytes;
    d.tail = (uint32_t *)fake(0x4000000000ull + tag * 0x1000);
    d.head = d.tail + 32;
    d.stop = d.tail + 64;
    d.step = step;
    d.nslots = sh.nslots;
    d.slot_bytes = (uint32_t)(slot_bytes ? slot_bytes : sh.slot_bytes);
    d.peer = peer;
    return d;
  }
  void disconnect_p2p(int peer, bool send) {
    for (int ch = 0; ch < sh.nch; ch++) (send ? p2p_send : p2p_recv)[(size_t)(peer * sh.nch + ch)] = kolo_dev_conn{};
  }
};

kolo_op make_op(int coll, const void *in, void *out, size_t count, koloDataType_t type, int arg = 0,
                koloRedOp_t op = koloSum) {
  kolo_op o{};
  o.coll = coll;
  o.sendbuff = in;
  o.recvbuff = out;
  o.count = count;
  o.type = type;
  o.op = op;
  o.arg = arg;
  o.comm = nullptr;  // the planner never looks at it
  o.stream = nullptr;
  return o;
}

// Plans ops on fc; fails the test on a planner error.
std::vector<kolo_dev_batch> plan(const FakeComm &fc, const std::vector<kolo_op> &ops) {
  int n = kolo_cuda_plan_count(ops.data(), (int)ops.size(), &fc.pc);
  std::vector<kolo_cuda_plan_item> items((size_t)n + 1);
  kolo_cuda_plan_items(ops.data(), (int)ops.size(), &fc.pc, items.data());
  std::vector<kolo_dev_batch> out;
  int next = 0, r;
  kolo_dev_batch b;
  while ((r = kolo_cuda_plan_next(ops.data(), &fc.pc, items.data(), n, &next, &b)) == 1) {
    EXPECT_GT(b.ntasks, 0);
    out.push_back(b);
    if (out.size() > 10000) break;
  }
  EXPECT_EQ(r, 0) << "planner error at item " << next;
  EXPECT_EQ(next, n);
  return out;
}

// Every task of a single op's launches, with the slices
// kolo_cuda_plan_slices counts for its send and receive ends.
struct TaskSlices {
  kolo_dev_task task;
  uint64_t sends, recvs;
};

std::vector<TaskSlices> plan_slices(const kolo_op &op, const kolo_cuda_plan_comm &pc) {
  int nitems = kolo_cuda_plan_count(&op, 1, &pc);
  std::vector<kolo_cuda_plan_item> items((size_t)nitems + 1);
  kolo_cuda_plan_items(&op, 1, &pc, items.data());
  std::vector<TaskSlices> out;
  kolo_dev_batch b;
  for (int next = 0, first = 0; kolo_cuda_plan_next(&op, &pc, items.data(), nitems, &next, &b) == 1; first = next)
    for (int j = 0; j < b.ntasks; j++) {
      TaskSlices ts{b.tasks[j], 0, 0};
      kolo_cuda_plan_slices(&op, &pc, &items[(size_t)(first + j)], &b.tasks[j], b.protocol, &ts.sends, &ts.recvs);
      out.push_back(ts);
    }
  return out;
}

int total_tasks(const std::vector<kolo_dev_batch> &bs) {
  int n = 0;
  for (auto &b : bs) n += b.ntasks;
  return n;
}

bool same_end(const kolo_dev_conn &a, const kolo_dev_conn &b) {
  return a.step == b.step && a.slots == b.slots && a.ll_slots == b.ll_slots && a.tail == b.tail &&
         a.head == b.head && a.stop == b.stop && a.peer == b.peer && a.nslots == b.nslots &&
         a.slot_bytes == b.slot_bytes && a.ll_slot_bytes == b.ll_slot_bytes;
}

// The host executor's geometry (core/enqueue.c: add_tasks), written out;
// for an LL call, chunks are half the slots' worth of LL slices (half an LL
// slot each) instead of SIMPLE slots; a task on point-to-point pipes (p2p)
// counts their slots.
kolo_geometry host_geometry(const Shape &sh, const kolo_op &op, int layout, int nch, bool p2p = false) {
  size_t esz = koloTypeSize(op.type);
  kolo_geometry g{};
  g.count = op.count;
  g.elem_size = esz;
  g.nranks = sh.nranks;
  g.nchannels = nch;
  bool ll = protocol_of(sh, op) == KOLO_PROTO_LL;
  size_t slice_bytes = ll ? sh.ll_slot_bytes / 2 : p2p ? sh.p2p_slot_bytes : sh.slot_bytes;
  g.chunk_elems = slice_bytes * (sh.nslots / 2) / esz;
  g.layout = layout;
  return g;
}

// The host executor's channel count (core/plan.c: kolo_comm_op_channels), written out.
int host_channels(const Shape &sh, const kolo_op &op) {
  size_t bytes = op.count * koloTypeSize(op.type);
  if (op.coll == KOLO_COLL_ALL_REDUCE) bytes /= (size_t)sh.nranks;
  size_t want = bytes / sh.min_channel_bytes;
  if (want < 1) want = 1;
  return (int)std::min(want, (size_t)sh.nch);
}

void expect_geometry(const kolo_geometry &a, const kolo_geometry &b) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.elem_size, b.elem_size);
  EXPECT_EQ(a.nranks, b.nranks);
  EXPECT_EQ(a.nchannels, b.nchannels);
  EXPECT_EQ(a.chunk_elems, b.chunk_elems);
  EXPECT_EQ(a.layout, b.layout);
}

// ---- single calls ----------------------------------------------------------------------

TEST(CudaPlan, AllReduceIsOneLaunchWithATaskPerChannel) {
  Shape sh;
  FakeComm fc(sh, 1);
  const void *in = fake(0xa0000);
  void *out = const_cast<void *>(fake(0xb0000));
  kolo_op op = make_op(KOLO_COLL_ALL_REDUCE, in, out, 1 << 20, koloFloat32);
  auto bs = plan(fc, {op});
  ASSERT_EQ(bs.size(), 1u);
  const kolo_dev_batch &b = bs[0];
  ASSERT_EQ(b.ntasks, 2);
  EXPECT_EQ(b.protocol, KOLO_PROTO_SIMPLE);  // 4 MiB > 64 KiB
  EXPECT_EQ(b.timeout_ns, 1234567u);
  EXPECT_EQ(b.abort, &fc.abort_word);
  EXPECT_EQ(b.status, fc.status);
  EXPECT_EQ(b.rank, 1);
  const kolo_program &prog = fc.progs[KOLO_COLL_ALL_REDUCE][0];
  for (int ch = 0; ch < 2; ch++) {
    const kolo_dev_task &t = b.tasks[ch];
    EXPECT_EQ(t.channel, ch);
    EXPECT_EQ((uintptr_t)t.steps, FakeComm::dev_steps_value(KOLO_COLL_ALL_REDUCE, 0));
    EXPECT_EQ(t.nsteps, prog.nsteps);
    EXPECT_EQ(t.in_blocked, prog.in_blocked);
    EXPECT_EQ(t.out_blocked, prog.out_blocked);
    expect_geometry(t.geo, host_geometry(sh, op, KOLO_LAYOUT_RING, 2));
    EXPECT_EQ(t.in, (const char *)in);
    EXPECT_EQ(t.out, (char *)out);
    EXPECT_EQ(t.type, koloFloat32);
    EXPECT_EQ(t.op, koloSum);
    EXPECT_EQ(t.div, 1);
    ASSERT_TRUE(t.has_send);
    ASSERT_TRUE(t.has_recv);
    EXPECT_TRUE(same_end(t.send, fc.ring_send[(size_t)ch]));
    EXPECT_TRUE(same_end(t.recv, fc.ring_recv[(size_t)ch]));
    EXPECT_EQ(t.send.peer, 2);
    EXPECT_EQ(t.recv.peer, 0);
  }
}

// Channels on rotated rings (core/comm_state.h: nrings): channel ch takes the
// program of ring ch % nrings (kolo_program_index) and its pipe ends.
TEST(CudaPlan, ChannelsTakeTheProgramOfTheirRing) {
  Shape sh;
  sh.nch = 4;
  const int nrings = 2, rank = 1;
  FakeComm fc(sh, rank);
  std::vector<uint64_t> ids((size_t)sh.nranks);
  for (int q = 0; q < sh.nranks; q++) ids[(size_t)q] = 100 + (uint64_t)(q % 2);  // 2 hosts, interleaved
  kolo_hosts h;
  ASSERT_EQ(kolo_hosts_build(sh.nranks, ids.data(), &h), koloSuccess);
  kolo_ring rings[nrings];
  for (int v = 0; v < nrings; v++) ASSERT_EQ(kolo_ring_build_channel(&h, v, &rings[v]), koloSuccess);
  const int colls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_BROADCAST};
  std::vector<kolo_program> progs[KOLO_COLL_NUM];
  std::vector<const kolo_step *> dsteps[KOLO_COLL_NUM];
  for (int coll : colls) {
    progs[coll].assign((size_t)(sh.nranks * nrings), kolo_program{});
    dsteps[coll].assign((size_t)(sh.nranks * nrings), nullptr);
    for (int a = 0; a < (coll == KOLO_COLL_BROADCAST ? sh.nranks : 1); a++)
      for (int v = 0; v < nrings; v++) {
        int i = kolo_program_index(coll, a, v, nrings);
        ASSERT_EQ(kolo_schedule_build(coll, &rings[v], rank, a, kolo_arg_algo(coll, a, sh.nranks), &progs[coll][(size_t)i]),
                  koloSuccess);
        dsteps[coll][(size_t)i] = static_cast<const kolo_step *>(fake(FakeComm::dev_steps_value(coll, i)));
      }
    fc.pc.programs[coll] = progs[coll].data();
    fc.pc.dev_steps[coll] = dsteps[coll].data();
  }
  for (int ch = 0; ch < sh.nch; ch++) {
    fc.ring_send[(size_t)ch].peer = kolo_ring_next(&rings[ch % nrings], rank);
    fc.ring_recv[(size_t)ch].peer = kolo_ring_prev(&rings[ch % nrings], rank);
  }
  fc.pc.nrings = nrings;
  for (int coll : colls) {
    SCOPED_TRACE(kolo_coll_name(coll));
    const int arg = coll == KOLO_COLL_BROADCAST ? 2 : KOLO_ALGO_RING;
    kolo_op op = make_op(coll, fake(0x1000), const_cast<void *>(fake(0x2000)), 4u << 20, koloFloat32, arg);
    auto bs = plan(fc, {op});
    ASSERT_EQ(bs.size(), 1u);
    ASSERT_EQ(bs[0].ntasks, sh.nch);
    for (int ch = 0; ch < sh.nch; ch++) {
      const kolo_dev_task &t = bs[0].tasks[ch];
      int i = kolo_program_index(coll, arg, ch, nrings);
      EXPECT_EQ((uintptr_t)t.steps, FakeComm::dev_steps_value(coll, i)) << "channel " << ch;
      EXPECT_EQ(t.nsteps, progs[coll][(size_t)i].nsteps);
      if (progs[coll][(size_t)i].send_peer >= 0) {
        EXPECT_EQ(t.send.peer, kolo_ring_next(&rings[ch % nrings], rank));
      }
    }
  }
  // The two rings differ here: channel 1 leaves the host from another rank.
  EXPECT_NE(kolo_ring_next(&rings[0], rank), kolo_ring_next(&rings[1], rank));
  for (auto &v : progs)
    for (auto &p : v)
      if (p.steps) kolo_program_free(&p);
  for (auto &r : rings) kolo_ring_free(&r);
  kolo_hosts_free(&h);
}

TEST(CudaPlan, ChannelsAndGeometryMatchTheHostExecutor) {
  Shape sh;
  sh.nch = 4;
  FakeComm fc(sh, 0);
  const koloDataType_t types[] = {koloInt8, koloFloat16, koloFloat32, koloFloat64};
  const size_t counts[] = {1, 1000, 64 * 1024, 256 * 1024 + 3, 3u << 20};
  const int colls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER,
                       KOLO_COLL_BROADCAST, KOLO_COLL_REDUCE};
  for (int coll : colls)
    for (koloDataType_t ty : types)
      for (size_t count : counts) {
        SCOPED_TRACE(std::string(kolo_coll_name(coll)) + " count " + std::to_string(count) + " type " +
                     std::to_string(ty));
        kolo_op op = make_op(coll, fake(0x1000), const_cast<void *>(fake(0x2000)), count, ty, 3);
        int nch = host_channels(sh, op);
        EXPECT_EQ(kolo_op_channels(&op, sh.nranks, sh.nch, sh.min_channel_bytes, nullptr), nch);
        auto bs = plan(fc, {op});
        ASSERT_EQ(bs.size(), 1u);
        ASSERT_EQ(bs[0].ntasks, nch);
        int slot = kolo_program_slot(coll, 3);
        const kolo_program &prog = fc.progs[coll][(size_t)slot];
        for (int ch = 0; ch < nch; ch++) {
          expect_geometry(bs[0].tasks[ch].geo, host_geometry(sh, op, prog.layout, nch, prog.npeers > 0));
          EXPECT_EQ((uintptr_t)bs[0].tasks[ch].steps, FakeComm::dev_steps_value(coll, slot));
          EXPECT_EQ(bs[0].tasks[ch].in_blocked, prog.in_blocked);
          EXPECT_EQ(bs[0].tasks[ch].out_blocked, prog.out_blocked);
        }
      }
}

// A step of a ring moves at most half the slots' worth of slices in either
// protocol: with a step of as many slices as slots, every rank of a ring
// waits for send credit before it receives (an LL reduce-scatter of 3 ranks
// and 64 KiB per rank hung on the CUDA model before LL chunks were cut from
// LL slices).
TEST(CudaPlan, AStepNeverTakesMoreThanHalfTheSlots) {
  Shape sh;
  FakeComm fc(sh, 1);
  for (koloDataType_t ty : {koloInt8, koloFloat32, koloFloat64})
    for (size_t bytes : {size_t(4096), size_t(65536), size_t(4) << 20}) {
      size_t esz = koloTypeSize(ty);
      kolo_op op = make_op(KOLO_COLL_REDUCE_SCATTER, fake(0x1000), const_cast<void *>(fake(0x2000)), bytes / esz, ty);
      auto bs = plan(fc, {op});
      ASSERT_EQ(bs.size(), 1u);
      const kolo_dev_task &t = bs[0].tasks[0];
      size_t slice_elems = bs[0].protocol == KOLO_PROTO_LL ? kolo_ll_slice_elems(t.send.ll_slot_bytes, esz)
                                                          : t.send.slot_bytes / esz;
      EXPECT_LE(t.geo.chunk_elems, slice_elems * (t.send.nslots / 2))
          << "bytes " << bytes << " type " << ty << " protocol " << bs[0].protocol;
    }
}

// kolo_cuda_plan_slices against the host executor: the same programs and
// geometry run on a host communicator of threads, whose connectors count
// every slice they move.  Small slots (4 KiB), so calls take many slices
// and several rounds; counts that leave channels, chunks and slices partly
// empty; every collective with a connector, 1 and 3 ranks.
TEST(CudaPlan, SlicesEqualTheHostExecutorsConnectorSteps) {
  kt::ScopedEnv algo("KOLO_ALGO", "ring");  // the ring pipes' steps are counted
  kt::ScopedEnv buf("KOLO_BUFFSIZE", "32768");
  kt::ScopedEnv slots("KOLO_NSLOTS", "8");
  kt::ScopedEnv chans("KOLO_NCHANNELS", "3");
  kt::ScopedEnv minch("KOLO_MIN_CHANNEL_BYTES", "4096");
  for (int n : {3, 1}) {
    kt::ThreadWorld w(n);
    ASSERT_TRUE(w.ok()) << w.init_error;
    Shape sh;
    sh.nranks = n;
    kt_comm_shape(w.comms[0], &sh.nch, &sh.nslots, &sh.slot_bytes, &sh.min_channel_bytes);
    sh.p2p_slot_bytes = kt_comm_p2p_slot_bytes(w.comms[0]);
    ASSERT_EQ(sh.slot_bytes, 4096u);
    sh.ll_threshold = 0;  // net pipes: SIMPLE only
    std::vector<std::unique_ptr<FakeComm>> fcs;
    for (int r = 0; r < n; r++) fcs.emplace_back(new FakeComm(sh, r));
    const kt::Coll colls[] = {kt::Coll::AllReduce, kt::Coll::ReduceScatter, kt::Coll::AllGather,
                              kt::Coll::Broadcast, kt::Coll::Reduce};
    std::mt19937 rng(4242);
    for (kt::Coll coll : colls)
      for (size_t count : {size_t(1), size_t(1023), size_t(4096 * 3 + 17), size_t(100000) + rng() % 50000}) {
        kt::CollCase c;
        c.coll = coll;
        c.type = count % 2 ? koloFloat32 : koloFloat64;
        c.nranks = n;
        c.count = count;
        c.root = n > 1 ? 2 : 0;
        kt::seed_case(&c);
        SCOPED_TRACE(c.str());
        std::vector<std::vector<uint32_t>> before((size_t)n, std::vector<uint32_t>(2 * (size_t)sh.nch));
        auto snap = [&](std::vector<std::vector<uint32_t>> &v) {
          for (int r = 0; r < n; r++)
            for (int ch = 0; ch < sh.nch; ch++)
              kt_ring_steps(w.comms[(size_t)r], ch, &v[(size_t)r][2 * (size_t)ch], &v[(size_t)r][2 * (size_t)ch + 1]);
        };
        snap(before);
        kt::GridReport rep = kt::run_grid(w, {c});
        ASSERT_EQ(rep.failed_cases, 0) << (rep.failures.empty() ? "" : rep.failures[0]);
        std::vector<std::vector<uint32_t>> after = before;
        snap(after);
        const int kcoll = coll == kt::Coll::AllReduce       ? KOLO_COLL_ALL_REDUCE
                          : coll == kt::Coll::ReduceScatter ? KOLO_COLL_REDUCE_SCATTER
                          : coll == kt::Coll::AllGather     ? KOLO_COLL_ALL_GATHER
                          : coll == kt::Coll::Broadcast     ? KOLO_COLL_BROADCAST
                                                            : KOLO_COLL_REDUCE;
        for (int r = 0; r < n; r++) {
          const bool by_algo = kcoll == KOLO_COLL_ALL_REDUCE || kcoll == KOLO_COLL_ALL_GATHER;  // arg: the ring
          kolo_op op = make_op(kcoll, fake(0x1000), const_cast<void *>(fake(0x2000)), count, c.type,
                               by_algo ? KOLO_ALGO_RING : c.root);
          std::vector<uint64_t> want(2 * (size_t)sh.nch, 0);
          for (const TaskSlices &ts : plan_slices(op, fcs[(size_t)r]->pc)) {
            int ch = ts.task.channel;
            EXPECT_TRUE(ts.task.has_send || ts.sends == 0);
            EXPECT_TRUE(ts.task.has_recv || ts.recvs == 0);
            want[2 * (size_t)ch] += ts.sends;
            want[2 * (size_t)ch + 1] += ts.recvs;
          }
          for (int ch = 0; ch < sh.nch; ch++) {
            EXPECT_EQ((uint32_t)want[2 * (size_t)ch], after[(size_t)r][2 * (size_t)ch] - before[(size_t)r][2 * (size_t)ch])
                << "rank " << r << " channel " << ch << ": slices sent";
            EXPECT_EQ((uint32_t)want[2 * (size_t)ch + 1],
                      after[(size_t)r][2 * (size_t)ch + 1] - before[(size_t)r][2 * (size_t)ch + 1])
                << "rank " << r << " channel " << ch << ": slices received";
          }
        }
      }
  }
}

TEST(CudaPlan, AverageDividesByTheRanks) {
  Shape sh;
  FakeComm fc(sh, 0);
  auto bs = plan(fc, {make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 100,
                              koloFloat64, 0, koloAvg)});
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].tasks[0].div, sh.nranks);
  EXPECT_EQ(bs[0].tasks[0].op, koloAvg);
}

TEST(CudaPlan, RootsAndPeersPickTheirProgramsAndPipes) {
  Shape sh;
  sh.nranks = 5;
  FakeComm fc(sh, 1);
  // broadcast from root 3: its program, ring pipes as the program says
  auto bs = plan(fc, {make_op(KOLO_COLL_BROADCAST, fake(0x10), const_cast<void *>(fake(0x20)), 10, koloInt32, 3)});
  ASSERT_EQ(bs.size(), 1u);
  const kolo_program &bp = fc.progs[KOLO_COLL_BROADCAST][3];
  EXPECT_EQ((uintptr_t)bs[0].tasks[0].steps, FakeComm::dev_steps_value(KOLO_COLL_BROADCAST, 3));
  EXPECT_EQ(bs[0].tasks[0].has_send, bp.send_peer >= 0);
  EXPECT_EQ(bs[0].tasks[0].has_recv, bp.recv_peer >= 0);
  if (bp.send_peer >= 0) {
    EXPECT_TRUE(same_end(bs[0].tasks[0].send, fc.ring_send[0]));
  }
  if (bp.recv_peer >= 0) {
    EXPECT_TRUE(same_end(bs[0].tasks[0].recv, fc.ring_recv[0]));
  }
  // send to 4 and recv from 2 on two channels: point-to-point pipes
  const size_t big = 4 << 20;
  bs = plan(fc, {make_op(KOLO_COLL_SEND, fake(0x10), nullptr, big, koloUint8, 4),
                 make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x20)), big, koloUint8, 2)});
  ASSERT_EQ(bs.size(), 1u);
  ASSERT_EQ(bs[0].ntasks, 4);
  int sends = 0, recvs = 0;
  for (int i = 0; i < 4; i++) {
    const kolo_dev_task &t = bs[0].tasks[i];
    EXPECT_EQ(t.geo.layout, KOLO_LAYOUT_FLAT);
    if (t.has_send) {
      sends++;
      EXPECT_FALSE(t.has_recv);
      EXPECT_EQ((uintptr_t)t.steps, FakeComm::dev_steps_value(KOLO_COLL_SEND, 4));
      EXPECT_TRUE(same_end(t.send, fc.p2p_send[(size_t)(4 * sh.nch + t.channel)]));
      EXPECT_EQ(t.in, (const char *)fake(0x10));
    } else {
      recvs++;
      ASSERT_TRUE(t.has_recv);
      EXPECT_EQ((uintptr_t)t.steps, FakeComm::dev_steps_value(KOLO_COLL_RECV, 2));
      EXPECT_TRUE(same_end(t.recv, fc.p2p_recv[(size_t)(2 * sh.nch + t.channel)]));
      EXPECT_EQ(t.out, (char *)fake(0x20));
    }
  }
  EXPECT_EQ(sends, 2);
  EXPECT_EQ(recvs, 2);
}

TEST(CudaPlan, OneRankCommHasNoPipes) {
  Shape sh;
  sh.nranks = 1;
  FakeComm fc(sh, 0);
  auto bs = plan(fc, {make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 1000, koloFloat32)});
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_FALSE(bs[0].tasks[0].has_send);
  EXPECT_FALSE(bs[0].tasks[0].has_recv);
}

TEST(CudaPlan, CountZeroMakesNoTask) {
  Shape sh;
  FakeComm fc(sh, 0);
  std::vector<kolo_op> ops = {make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 0, koloFloat32),
                              make_op(KOLO_COLL_SEND, fake(0x10), nullptr, 0, koloFloat32, 2)};
  EXPECT_EQ(kolo_cuda_plan_count(ops.data(), 2, &fc.pc), 0);
  EXPECT_TRUE(plan(fc, ops).empty());
}

// ---- multi-peer programs (all-to-all, gather, scatter) -----------------------------------

// A multi-peer task carries its program's peer count and the end table of
// its (collective, root, channel), no ends of its own; its geometry is the
// host executor's.
TEST(CudaPlan, MultiPeerTasksCarryTheirEndTables) {
  Shape sh;
  sh.nranks = 5;
  FakeComm fc(sh, 1);
  const size_t big = 4 << 20;
  for (int coll : {KOLO_COLL_ALL_TO_ALL, KOLO_COLL_GATHER, KOLO_COLL_SCATTER})
    for (int root : {1, 3}) {
      SCOPED_TRACE(std::string(kolo_coll_name(coll)) + " root " + std::to_string(root));
      kolo_op op = make_op(coll, fake(0x10), const_cast<void *>(fake(0x20)), big, koloFloat32, root);
      auto bs = plan(fc, {op});
      const int slot = kolo_program_slot(coll, root);
      const kolo_program &p = fc.progs[coll][(size_t)slot];
      ASSERT_GT(p.npeers, 0);
      ASSERT_EQ(total_tasks(bs), sh.nch);
      ASSERT_EQ(bs.size(), 1u) << "different channels share no end";
      for (int i = 0; i < bs[0].ntasks; i++) {
        const kolo_dev_task &t = bs[0].tasks[i];
        EXPECT_EQ(t.npeers, p.npeers);
        EXPECT_EQ((uintptr_t)t.ends, FakeComm::end_table_value(coll, slot, t.channel));
        EXPECT_FALSE(t.has_send);
        EXPECT_FALSE(t.has_recv);
        EXPECT_EQ((uintptr_t)t.steps, FakeComm::dev_steps_value(coll, slot));
        EXPECT_EQ(t.in_blocked, p.in_blocked);
        EXPECT_EQ(t.out_blocked, p.out_blocked);
        expect_geometry(t.geo, host_geometry(sh, op, KOLO_LAYOUT_FLAT, sh.nch, true));
      }
    }
}

// Two multi-peer tasks of one channel never share a launch (they may use
// one end); a send/recv task shares one with a multi-peer task of its
// channel only when none of its ends is the other's.
TEST(CudaPlan, MultiPeerTasksKeepApartFromTasksOnTheirEnds) {
  Shape sh;
  sh.nranks = 4;
  sh.nch = 1;
  FakeComm fc(sh, 0);
  auto a2a = make_op(KOLO_COLL_ALL_TO_ALL, fake(0x100), const_cast<void *>(fake(0x200)), 100, koloFloat32);
  auto gather = make_op(KOLO_COLL_GATHER, fake(0x300), const_cast<void *>(fake(0x400)), 100, koloFloat32, 2);
  // rank 0 is a leaf of the gather to 2: it sends to 2 only
  auto bs = plan(fc, {a2a, gather});
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0].ntasks, 1);
  EXPECT_EQ(bs[1].ntasks, 1);
  auto send3 = make_op(KOLO_COLL_SEND, fake(0x500), nullptr, 100, koloFloat32, 3);
  auto recv3 = make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x600)), 100, koloFloat32, 3);
  auto send2 = make_op(KOLO_COLL_SEND, fake(0x700), nullptr, 100, koloFloat32, 2);
  bs = plan(fc, {gather, send3, recv3});  // none of the leaf's ends: one launch
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].ntasks, 3);
  bs = plan(fc, {gather, send2});  // the leaf's send end to 2: two launches
  ASSERT_EQ(bs.size(), 2u);
  bs = plan(fc, {a2a, recv3});  // the all-to-all receives from 3 too
  ASSERT_EQ(bs.size(), 2u);
  sh.nch = 2;
  FakeComm f2(sh, 0);
  auto big = make_op(KOLO_COLL_ALL_TO_ALL, fake(0x100), const_cast<void *>(fake(0x200)), 1 << 20, koloFloat32);
  auto big2 = make_op(KOLO_COLL_SCATTER, fake(0x300), const_cast<void *>(fake(0x400)), 1 << 20, koloFloat32, 0);
  bs = plan(f2, {big, big2});  // per channel apart: two launches of a task per channel each
  ASSERT_EQ(bs.size(), 2u);
  for (const kolo_dev_batch &b : bs) {
    ASSERT_EQ(b.ntasks, 2);
    EXPECT_NE(b.tasks[0].channel, b.tasks[1].channel);
  }
}

// A multi-peer task whose peer has no pipe yet is the caller's bug: -1.
TEST(CudaPlan, MissingPeerPipeIsReported) {
  Shape sh;
  for (bool send : {true, false}) {
    FakeComm fc(sh, 0);
    fc.disconnect_p2p(2, send);
    std::vector<kolo_op> ops = {make_op(KOLO_COLL_ALL_TO_ALL, fake(0x10), const_cast<void *>(fake(0x20)), 100, koloFloat32)};
    int n = kolo_cuda_plan_count(ops.data(), 1, &fc.pc);
    std::vector<kolo_cuda_plan_item> items((size_t)n);
    kolo_cuda_plan_items(ops.data(), 1, &fc.pc, items.data());
    int next = 0;
    kolo_dev_batch b;
    EXPECT_EQ(kolo_cuda_plan_next(ops.data(), &fc.pc, items.data(), n, &next, &b), -1) << (send ? "send" : "recv");
    // a gather leaf of root 1 never uses the pipes of rank 2: fine
    ops[0] = make_op(KOLO_COLL_GATHER, fake(0x10), nullptr, 100, koloFloat32, 1);
    EXPECT_EQ(plan(fc, ops).size(), 1u);
  }
}

// A comm across hosts has device pipes to some peers and net pipes (no LL
// region) to others: a multi-peer task over both plans under SIMPLE (the
// only protocol such comms use), and ends that would slice LL differently
// are refused under LL.
TEST(CudaPlan, MultiPeerTaskOverDeviceAndNetPipes) {
  Shape sh;
  sh.ll_threshold = 0;
  FakeComm fc(sh, 0);
  for (int ch = 0; ch < sh.nch; ch++) {
    fc.p2p_send[(size_t)(2 * sh.nch + ch)].ll_slot_bytes = 0;  // rank 2 is on another host
    fc.p2p_recv[(size_t)(2 * sh.nch + ch)].ll_slot_bytes = 0;
  }
  auto op = make_op(KOLO_COLL_ALL_TO_ALL, fake(0x10), const_cast<void *>(fake(0x20)), 100, koloFloat32);
  auto bs = plan(fc, {op});
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].protocol, KOLO_PROTO_SIMPLE);
  sh.ll_threshold = 64 * 1024;
  set_ll_thresholds(&fc.pc, sh);
  std::vector<kolo_cuda_plan_item> items(1);
  kolo_cuda_plan_items(&op, 1, &fc.pc, items.data());
  int next = 0;
  kolo_dev_batch b;
  EXPECT_EQ(kolo_cuda_plan_next(&op, &fc.pc, items.data(), 1, &next, &b), -1);
}

// kolo_cuda_plan_peer_slices against the host executor: the point-to-point
// pipe ends of every peer count the slices a multi-peer call moved through
// them (4 KiB slots: many slices and rounds; counts that leave channels
// and chunks partly empty).
// One call of case c (collective kcoll with program argument arg) on the
// threads of w: what kolo_cuda_plan_peer_slices counts for each rank's
// tasks (planned on fcs) against the slices its point-to-point pipe ends
// moved.
void expect_peer_slices(kt::ThreadWorld &w, const Shape &sh, const std::vector<std::unique_ptr<FakeComm>> &fcs,
                        const kt::CollCase &c, int kcoll, int arg) {
  const int n = sh.nranks;
  SCOPED_TRACE(c.str());
  auto snap = [&](std::vector<uint32_t> &v) {  // [((r * n + peer) * nch + ch) * 2 + dir]
    v.assign((size_t)(n * n * sh.nch * 2), 0);
    for (int r = 0; r < n; r++)
      for (int q = 0; q < n; q++)
        for (int ch = 0; ch < sh.nch; ch++) {
          size_t i = ((size_t)(r * n + q) * (size_t)sh.nch + (size_t)ch) * 2;
          kt_p2p_steps(w.comms[(size_t)r], q, ch, &v[i], &v[i + 1]);
        }
  };
  std::vector<uint32_t> before, after;
  snap(before);
  kt::GridReport rep = kt::run_grid(w, {c});
  ASSERT_EQ(rep.failed_cases, 0) << (rep.failures.empty() ? "" : rep.failures[0]);
  snap(after);
  uint64_t moved = 0;
  for (int r = 0; r < n; r++) {
    std::vector<uint64_t> want((size_t)(n * sh.nch * 2), 0);
    kolo_op op = make_op(kcoll, fake(0x1000), const_cast<void *>(fake(0x2000)), c.count, c.type, arg);
    int nitems = kolo_cuda_plan_count(&op, 1, &fcs[(size_t)r]->pc);
    std::vector<kolo_cuda_plan_item> items((size_t)nitems + 1);
    kolo_cuda_plan_items(&op, 1, &fcs[(size_t)r]->pc, items.data());
    kolo_dev_batch b;
    for (int next = 0, first = 0; kolo_cuda_plan_next(&op, &fcs[(size_t)r]->pc, items.data(), nitems, &next, &b) == 1;
         first = next)
      for (int j = 0; j < b.ntasks; j++) {
        const kolo_dev_task &t = b.tasks[j];
        std::vector<uint64_t> counts(2 * (size_t)t.npeers, 7);
        kolo_cuda_plan_peer_slices(&op, &fcs[(size_t)r]->pc, &items[(size_t)(first + j)], &t, b.protocol, counts.data());
        const kolo_program &p = fcs[(size_t)r]->progs[kcoll][(size_t)kolo_program_slot(kcoll, arg)];
        for (int e = 0; e < 2 * t.npeers; e++) {
          int q = p.peers[e / 2].rank;
          want[((size_t)q * (size_t)sh.nch + (size_t)t.channel) * 2 + (size_t)(e % 2)] += counts[(size_t)e];
        }
      }
    for (int q = 0; q < n; q++)
      for (int ch = 0; ch < sh.nch; ch++)
        for (int dir = 0; dir < 2; dir++) {
          size_t i = ((size_t)(r * n + q) * (size_t)sh.nch + (size_t)ch) * 2 + (size_t)dir;
          uint32_t got = after[i] - before[i];
          moved += got;
          EXPECT_EQ((uint32_t)want[((size_t)q * (size_t)sh.nch + (size_t)ch) * 2 + (size_t)dir], got)
              << "rank " << r << (dir ? " from " : " to ") << q << " channel " << ch;
        }
  }
  EXPECT_GT(moved, 0u);
}

// A host world of n threads with 4 KiB slots (many slices and rounds) and
// 3 channels, a channel per 4 KiB, and a FakeComm per rank of its shape.
struct SmallSlotWorld {
  // point-to-point pipes of 4 KiB slots, ring pipes of 8 KiB: a planner
  // that slices one kind by the other's slots is caught
  kt::ScopedEnv buf{"KOLO_BUFFSIZE", "65536"}, p2p{"KOLO_P2P_BUFFSIZE", "32768"}, slots{"KOLO_NSLOTS", "8"},
      chans{"KOLO_NCHANNELS", "3"}, minch{"KOLO_MIN_CHANNEL_BYTES", "4096"};
  kt::ThreadWorld w;
  Shape sh;
  std::vector<std::unique_ptr<FakeComm>> fcs;
  explicit SmallSlotWorld(int n) : w(n) {
    EXPECT_TRUE(w.ok()) << w.init_error;
    sh.nranks = n;
    if (w.ok()) kt_comm_shape(w.comms[0], &sh.nch, &sh.nslots, &sh.slot_bytes, &sh.min_channel_bytes);
    if (w.ok()) sh.p2p_slot_bytes = kt_comm_p2p_slot_bytes(w.comms[0]);
    EXPECT_EQ(sh.slot_bytes, 8192u);
    EXPECT_EQ(sh.p2p_slot_bytes, 4096u);
    sh.ll_threshold = 0;
    for (int r = 0; r < n; r++) fcs.emplace_back(new FakeComm(sh, r));
  }
};

// kolo_cuda_plan_peer_slices against the host executor: the point-to-point
// pipe ends of every peer count the slices a multi-peer call moved through
// them (4 KiB slots: many slices and rounds; counts that leave channels
// and chunks partly empty).
TEST(CudaPlan, PeerSlicesEqualTheHostExecutorsConnectorSteps) {
  SmallSlotWorld sw(3);
  ASSERT_TRUE(sw.w.ok());
  const std::pair<kt::Coll, int> colls[] = {{kt::Coll::AlltoAll, KOLO_COLL_ALL_TO_ALL},
                                            {kt::Coll::Gather, KOLO_COLL_GATHER},
                                            {kt::Coll::Scatter, KOLO_COLL_SCATTER}};
  for (auto [coll, kcoll] : colls)
    for (size_t count : {size_t(1), size_t(4096 * 3 + 17), size_t(70001)}) {
      kt::CollCase c = kt::make_case(coll, koloFloat32, koloSum, 3, count, false, 1);
      expect_peer_slices(sw.w, sw.sh, sw.fcs, c, kcoll, c.root);
    }
}

// The same for the doubling all-reduces (KOLO_ALGO forces them), on a power
// of two and ranks to fold.
TEST(CudaPlan, DoublingAllReduceSlicesEqualTheHostExecutorsConnectorSteps) {
  for (int algo : {KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT})
    for (int n : {4, 3}) {
      kt::ScopedEnv force("KOLO_ALGO", kolo_algo_name(algo));
      SmallSlotWorld sw(n);
      ASSERT_TRUE(sw.w.ok());
      for (size_t count : {size_t(1), size_t(4096 * 3 + 17), size_t(70001)}) {
        kt::CollCase c = kt::make_case(kt::Coll::AllReduce, koloFloat32, koloSum, n, count, false, 1);
        expect_peer_slices(sw.w, sw.sh, sw.fcs, c, KOLO_COLL_ALL_REDUCE, algo);
      }
    }
}

// The same for Bruck's all-gather (KOLO_ALGO=allgather:bruck), on a power of
// two and not: each level's pipe carries its blocks' slices.
TEST(CudaPlan, BruckAllGatherSlicesEqualTheHostExecutorsConnectorSteps) {
  kt::ScopedEnv force("KOLO_ALGO", "allgather:bruck");
  for (int n : {4, 5}) {
    SmallSlotWorld sw(n);
    ASSERT_TRUE(sw.w.ok());
    for (size_t count : {size_t(1), size_t(4096 * 3 + 17), size_t(70001)}) {
      kt::CollCase c = kt::make_case(kt::Coll::AllGather, koloFloat32, koloSum, n, count, count % 2 == 0, 1);
      expect_peer_slices(sw.w, sw.sh, sw.fcs, c, KOLO_COLL_ALL_GATHER, KOLO_ALGO_BRUCK);
    }
  }
}

// A doubling all-reduce's task carries its program's peers and the end
// table of (all-reduce, its algorithm, channel), like the other multi-peer
// programs; its geometry is the host executor's, in its program's layout.
TEST(CudaPlan, DoublingAllReduceTasksCarryTheirEndTables) {
  for (int n : {2, 3, 5, 8})
    for (int algo : {KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT}) {
      Shape sh;
      sh.nranks = n;
      for (int rank = 0; rank < n; rank++) {
        SCOPED_TRACE(std::string(kolo_algo_name(algo)) + " n=" + std::to_string(n) + " rank " + std::to_string(rank));
        FakeComm fc(sh, rank);
        kolo_op op = make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 4 << 20, koloFloat32,
                             algo, koloAvg);
        auto bs = plan(fc, {op});
        const kolo_program &p = fc.progs[KOLO_COLL_ALL_REDUCE][(size_t)algo];
        ASSERT_GT(p.npeers, 0);
        ASSERT_EQ(bs.size(), 1u);
        ASSERT_EQ(bs[0].ntasks, host_channels(sh, op));
        for (int i = 0; i < bs[0].ntasks; i++) {
          const kolo_dev_task &t = bs[0].tasks[i];
          EXPECT_EQ(t.npeers, p.npeers);
          EXPECT_EQ((uintptr_t)t.ends, FakeComm::end_table_value(KOLO_COLL_ALL_REDUCE, algo, t.channel));
          EXPECT_EQ((uintptr_t)t.steps, FakeComm::dev_steps_value(KOLO_COLL_ALL_REDUCE, algo));
          EXPECT_FALSE(t.has_send || t.has_recv);
          EXPECT_EQ(t.div, n);
          expect_geometry(t.geo, host_geometry(sh, op, p.layout, bs[0].ntasks, true));
        }
      }
    }
}

// A program that names scratch (the one-shot all-reduce, the reduce tree)
// gets the comm's scratch in its launch (block i: part i); without scratch,
// or with parts too small for its chunks, the planner refuses it; a launch
// of programs without scratch carries none.
int plan_result(const FakeComm &fc, const kolo_op &op, kolo_dev_batch *b) {
  int n = kolo_cuda_plan_count(&op, 1, &fc.pc);
  std::vector<kolo_cuda_plan_item> items((size_t)n + 1);
  kolo_cuda_plan_items(&op, 1, &fc.pc, items.data());
  int next = 0;
  return kolo_cuda_plan_next(&op, &fc.pc, items.data(), n, &next, b);
}

TEST(CudaPlan, ScratchProgramsGetTheLaunchsScratch) {
  Shape sh;
  sh.nranks = 5;
  FakeComm fc(sh, 2);
  // both programs are multi-peer: their chunks are the point-to-point slots'
  const size_t part = (size_t)KOLO_SCRATCH_CHUNKS * sh.p2p_slot_bytes * (sh.nslots / 2);
  const kolo_op oneshot = make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 1 << 20,
                                  koloFloat32, KOLO_ALGO_ONESHOT, koloSum);
  const kolo_op tree = make_op(KOLO_COLL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 1000, koloFloat32,
                               kolo_reduce_arg(2, KOLO_ALGO_TREE, sh.nranks), koloSum);  // rank 2 is the root: 2 children
  const kolo_op ring = make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 1 << 20, koloFloat32,
                               KOLO_ALGO_RING, koloSum);
  kolo_dev_batch b;
  EXPECT_EQ(plan_result(fc, oneshot, &b), -1) << "no scratch";
  fc.pc.scratch = static_cast<char *>(const_cast<void *>(fake(0x9000000)));
  fc.pc.scratch_task_bytes = part / 2;
  EXPECT_EQ(plan_result(fc, oneshot, &b), -1) << "parts too small";
  fc.pc.scratch_task_bytes = part;
  for (const kolo_op &op : {oneshot, tree}) {
    ASSERT_EQ(plan_result(fc, op, &b), 1) << kolo_coll_name(op.coll);
    EXPECT_EQ(b.scratch, fc.pc.scratch);
    EXPECT_EQ(b.scratch_task_bytes, part);
  }
  ASSERT_EQ(plan_result(fc, ring, &b), 1);
  EXPECT_EQ(b.scratch, nullptr);
}

// ---- protocol ----------------------------------------------------------------------------

TEST(CudaPlan, ProtocolIsLLUpToTheThreshold) {
  Shape sh64;  // 64 KiB
  auto op = [](size_t count, koloDataType_t type) {
    return make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), count, type);
  };
  EXPECT_EQ(protocol_of(sh64, op(16384, koloFloat32)), KOLO_PROTO_LL);
  EXPECT_EQ(protocol_of(sh64, op(16385, koloFloat32)), KOLO_PROTO_SIMPLE);
  EXPECT_EQ(protocol_of(sh64, op(65536, koloInt8)), KOLO_PROTO_LL);
  EXPECT_EQ(protocol_of(sh64, op(8193, koloFloat64)), KOLO_PROTO_SIMPLE);
  Shape off;
  off.ll_threshold = 0;  // LL off
  EXPECT_EQ(protocol_of(off, op(1, koloInt8)), KOLO_PROTO_SIMPLE);
  Shape sh;
  sh.ll_threshold = 4096;
  for (size_t count : {(size_t)1, (size_t)1024, (size_t)1025, (size_t)100000}) {
    int want = count * 4 <= 4096 ? KOLO_PROTO_LL : KOLO_PROTO_SIMPLE;
    for (int coll : {KOLO_COLL_ALL_REDUCE, KOLO_COLL_ALL_GATHER, KOLO_COLL_REDUCE}) {
      for (int r = 0; r < sh.nranks; r++) {  // every rank decides alike
        FakeComm fc(sh, r);
        auto bs = plan(fc, {make_op(coll, fake(0x10), const_cast<void *>(fake(0x20)), count, koloFloat32, 1)});
        ASSERT_EQ(bs.size(), 1u);
        EXPECT_EQ(bs[0].protocol, want) << kolo_coll_name(coll) << " count " << count << " rank " << r;
      }
    }
  }
}

TEST(CudaPlan, ProtocolsDoNotShareALaunch) {
  Shape sh;
  FakeComm fc(sh, 0);
  auto bs = plan(fc, {make_op(KOLO_COLL_SEND, fake(0x10), nullptr, 100, koloFloat32, 1),
                      make_op(KOLO_COLL_SEND, fake(0x20), nullptr, 1 << 20, koloFloat32, 2)});
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_NE(bs[0].protocol, bs[1].protocol);
  for (auto &b : bs)
    for (int i = 0; i < b.ntasks; i++)
      EXPECT_EQ(protocol_of(sh, make_op(KOLO_COLL_SEND, fake(0x10), nullptr,
                                        b.tasks[i].in == (const char *)fake(0x10) ? 100 : 1 << 20, koloFloat32, 1)),
                b.protocol);
}

// KOLO_PROTO per collective: each collective's calls take its own choice
// (forced LL even for 4 MiB, forced Simple even for 100 elements, else LL
// up to KOLO_LL_THRESHOLD), on every rank alike; the two ends of a transfer
// (sendrecv) take one.
TEST(CudaPlan, KoloProtoChoosesPerCollective) {
  char why[512] = "";
  int ll128 = 0;
  Shape sh;
  sh.proto_off = (uint32_t)kolo_proto_off_parse("allreduce:LL;broadcast:Simple;sendrecv:^LL;gather:LL", &ll128,
                                                 why, sizeof why);
  ASSERT_GT(sh.proto_off, 0u) << why;
  struct Want {
    int coll;
    size_t count;
    int protocol;
  } wants[] = {
      {KOLO_COLL_ALL_REDUCE, 1 << 20, KOLO_PROTO_LL},   {KOLO_COLL_ALL_REDUCE, 100, KOLO_PROTO_LL},
      {KOLO_COLL_BROADCAST, 100, KOLO_PROTO_SIMPLE},    {KOLO_COLL_BROADCAST, 1 << 20, KOLO_PROTO_SIMPLE},
      {KOLO_COLL_ALL_GATHER, 100, KOLO_PROTO_LL},       {KOLO_COLL_ALL_GATHER, 1 << 20, KOLO_PROTO_SIMPLE},
      {KOLO_COLL_SEND, 100, KOLO_PROTO_SIMPLE},         {KOLO_COLL_RECV, 100, KOLO_PROTO_SIMPLE},
      {KOLO_COLL_GATHER, 1 << 20, KOLO_PROTO_LL},       {KOLO_COLL_ALL_TO_ALL, 100, KOLO_PROTO_LL},
      {KOLO_COLL_ALL_TO_ALL, 1 << 20, KOLO_PROTO_SIMPLE},
  };
  for (const Want &w : wants)
    for (int r = 0; r < sh.nranks; r++) {  // every rank decides alike
      FakeComm fc(sh, r);
      const int arg = kolo_coll_is_p2p(w.coll) ? (r + 1) % sh.nranks : w.coll == KOLO_COLL_ALL_REDUCE ? 0 : 1;
      auto bs = plan(fc, {make_op(w.coll, fake(0x10), const_cast<void *>(fake(0x20)), w.count, koloFloat32, arg)});
      ASSERT_GE(bs.size(), 1u) << kolo_coll_name(w.coll);
      for (auto &b : bs)
        EXPECT_EQ(b.protocol, w.protocol) << kolo_coll_name(w.coll) << " count " << w.count << " rank " << r;
    }
  // unset, the same calls follow KOLO_LL_THRESHOLD alone
  sh.proto_off = 0;
  FakeComm plain(sh, 0);
  auto big = plan(plain, {make_op(KOLO_COLL_ALL_REDUCE, fake(0x10), const_cast<void *>(fake(0x20)), 1 << 20, koloFloat32)});
  ASSERT_GE(big.size(), 1u);
  EXPECT_EQ(big[0].protocol, KOLO_PROTO_SIMPLE);
}

// ---- cuts ----------------------------------------------------------------------------------

TEST(CudaPlan, CollectivesOfAGroupLaunchInIssueOrder) {
  Shape sh;
  FakeComm fc(sh, 2);
  std::vector<kolo_op> ops;
  for (int i = 0; i < 3; i++)
    ops.push_back(make_op(KOLO_COLL_ALL_REDUCE, fake(0x1000 * (i + 1)), const_cast<void *>(fake(0x1000 * (i + 1))),
                          1 << 20, koloFloat32));
  auto bs = plan(fc, ops);
  ASSERT_EQ(bs.size(), 3u);  // each uses the ring ends of channels 0 and 1
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(bs[(size_t)i].ntasks, 2);
    EXPECT_EQ(bs[(size_t)i].tasks[0].in, (const char *)fake(0x1000 * (i + 1)));
  }
  // a one-channel call, then a two-channel one: the second waits for channel 0
  bs = plan(fc, {make_op(KOLO_COLL_ALL_REDUCE, fake(0x1000), const_cast<void *>(fake(0x1000)), 10, koloFloat32),
                 make_op(KOLO_COLL_ALL_REDUCE, fake(0x2000), const_cast<void *>(fake(0x2000)), 1 << 20, koloFloat32)});
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0].ntasks, 1);
  EXPECT_EQ(bs[1].ntasks, 2);
}

TEST(CudaPlan, DtypesDoNotShareALaunch) {
  Shape sh;
  FakeComm fc(sh, 0);
  auto bs = plan(fc, {make_op(KOLO_COLL_SEND, fake(0x10), nullptr, 1 << 20, koloFloat32, 1),
                      make_op(KOLO_COLL_SEND, fake(0x20), nullptr, 1 << 20, koloInt32, 2),
                      make_op(KOLO_COLL_SEND, fake(0x30), nullptr, 1 << 20, koloFloat32, 3)});
  // sorted by dtype: int32 first, then both float32 sends together
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(total_tasks(bs), 6);
  for (auto &b : bs)
    for (int i = 0; i < b.ntasks; i++) EXPECT_EQ(b.tasks[i].type, b.tasks[0].type);
  EXPECT_EQ(bs[0].tasks[0].type, koloInt32);
  EXPECT_EQ(bs[1].ntasks, 4);
}

TEST(CudaPlan, AnEndIsUsedOncePerLaunchInMatchingOrder) {
  Shape sh;
  FakeComm fc(sh, 0);
  auto bs = plan(fc, {make_op(KOLO_COLL_SEND, fake(0x10), nullptr, 1 << 20, koloFloat32, 1),
                      make_op(KOLO_COLL_SEND, fake(0x20), nullptr, 1 << 20, koloFloat32, 1)});
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0].tasks[0].in, (const char *)fake(0x10));  // the first send matches the first recv
  EXPECT_EQ(bs[1].tasks[0].in, (const char *)fake(0x20));
}

TEST(CudaPlan, NoMoreThanMaxTasksPerLaunch) {
  Shape sh;
  sh.nranks = 20;
  sh.nch = 1;
  FakeComm fc(sh, 5);
  std::vector<kolo_op> ops;
  for (int p = 0; p < sh.nranks; p++) {
    if (p == 5) continue;
    ops.push_back(make_op(KOLO_COLL_SEND, fake(0x1000 + p), nullptr, 1000, koloFloat32, p));
    ops.push_back(make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x2000 + p)), 1000, koloFloat32, p));
  }
  auto bs = plan(fc, ops);
  EXPECT_EQ(total_tasks(bs), 38);
  ASSERT_EQ(bs.size(), 3u);
  std::set<const uint32_t *> all;
  for (auto &b : bs) {
    EXPECT_LE(b.ntasks, KOLO_DEV_MAX_TASKS);
    std::set<const uint32_t *> ends;
    for (int i = 0; i < b.ntasks; i++) {
      const uint32_t *e = b.tasks[i].has_send ? b.tasks[i].send.step : b.tasks[i].recv.step;
      EXPECT_TRUE(ends.insert(e).second) << "an end twice in one launch";
      all.insert(e);
    }
  }
  EXPECT_EQ(all.size(), 38u);
}

// Ranks sharing a device get a block budget (core/cuda_residency.c): no
// launch has more tasks, but a send to oneself and its recv stay together.
TEST(CudaPlan, LaunchesKeepToTheBlockBudget) {
  Shape sh;
  sh.nranks = 20;
  sh.nch = 1;
  sh.max_tasks = 3;
  FakeComm fc(sh, 5);
  std::vector<kolo_op> ops;
  for (int p = 0; p < sh.nranks; p++) {
    if (p == 5) continue;
    ops.push_back(make_op(KOLO_COLL_SEND, fake(0x1000 + p), nullptr, 1000, koloFloat32, p));
    ops.push_back(make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x2000 + p)), 1000, koloFloat32, p));
  }
  auto bs = plan(fc, ops);
  EXPECT_EQ(total_tasks(bs), 38);
  EXPECT_EQ(bs.size(), 13u);
  for (auto &b : bs) EXPECT_LE(b.ntasks, 3);
  fc.pc.max_tasks = 1;
  bs = plan(fc, {make_op(KOLO_COLL_SEND, fake(0x9000), nullptr, 100, koloFloat32, 5),
                 make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x9100)), 100, koloFloat32, 5),
                 make_op(KOLO_COLL_SEND, fake(0x9200), nullptr, 100, koloFloat32, 6)});
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0].ntasks, 2);  // the pair, whole
  EXPECT_EQ(bs[1].ntasks, 1);
}

TEST(CudaPlan, SendToSelfStaysWithItsRecv) {
  Shape sh;
  sh.nranks = 17;
  sh.nch = 1;
  FakeComm fc(sh, 15);
  std::vector<kolo_op> ops;
  for (int p = 0; p < 15; p++)  // keys (sender p, receiver 15): before the self pair
    ops.push_back(make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x2000 + p)), 100, koloFloat32, p));
  ops.push_back(make_op(KOLO_COLL_SEND, fake(0x9000), nullptr, 100, koloFloat32, 15));
  ops.push_back(make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x9100)), 100, koloFloat32, 15));
  auto bs = plan(fc, ops);
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[0].ntasks, 15);  // the pair would straddle the 16-task limit: it moves on whole
  ASSERT_EQ(bs[1].ntasks, 2);
  EXPECT_TRUE(bs[1].tasks[0].has_send && bs[1].tasks[1].has_recv);
}

TEST(CudaPlan, MissingPipeIsReported) {
  Shape sh;
  FakeComm fc(sh, 0);
  fc.disconnect_p2p(3, true);
  std::vector<kolo_op> ops = {make_op(KOLO_COLL_SEND, fake(0x10), nullptr, 100, koloFloat32, 3)};
  int n = kolo_cuda_plan_count(ops.data(), 1, &fc.pc);
  std::vector<kolo_cuda_plan_item> items((size_t)n);
  kolo_cuda_plan_items(ops.data(), 1, &fc.pc, items.data());
  int next = 0;
  kolo_dev_batch b;
  EXPECT_EQ(kolo_cuda_plan_next(ops.data(), &fc.pc, items.data(), n, &next, &b), -1);
  EXPECT_EQ(next, 0);
}

// ---- hierarchical all-reduce ----------------------------------------------------------
//
// A FakeComm of H hosts of L ranks (rank r on host r / L) given what a CUDA
// comm hands the planner for the hierarchical all-reduce: the algorithm
// topology, its three phase programs (ring/all_reduce_hier.c over the
// host's intra ring and the inter ring of the ranks at its position),
// fake device copies of their steps and the ends of the intra and inter
// pipes, with step counters of their own.

struct HierFake {
  FakeComm fc;
  kolo_algo_topo topo{};
  kolo_program hprog[KOLO_HIER_PHASES]{};
  std::vector<kolo_dev_conn> hsend[2], hrecv[2];
  std::vector<uint32_t> hcounters;

  HierFake(const Shape &s, int rank, int hosts, int forced) : fc(s, rank) {
    const int L = s.nranks / hosts;
    std::vector<uint64_t> ids((size_t)s.nranks);
    for (int q = 0; q < s.nranks; q++) ids[(size_t)q] = 500 + (uint64_t)(q / L);
    kolo_hosts h;
    EXPECT_EQ(kolo_hosts_build(s.nranks, ids.data(), &h), koloSuccess);
    kolo_ring intra{}, inter{};
    EXPECT_EQ(kolo_ring_build_intra(&h, rank, &intra), koloSuccess);
    EXPECT_EQ(kolo_ring_build_inter(&h, rank, &inter), koloSuccess);
    for (int k = 0; k < KOLO_HIER_PHASES; k++) {
      EXPECT_EQ(kolo_sched_all_reduce_hier(&intra, &inter, rank, k, &hprog[k]), koloSuccess);
      fc.pc.hier_steps[k] = static_cast<const kolo_step *>(fake(steps_value(k)));
    }
    kolo_ring_free(&intra);
    kolo_ring_free(&inter);
    kolo_hosts_free(&h);
    topo = kolo_algo_topo{s.nranks, hosts, L, forced, 0, 0, nullptr, 0, 0, 0};
    hcounters.assign(4 * (size_t)s.nch, 0);
    for (int k = 0; k < 2; k++) {
      const kolo_program &p = hprog[k == 0 ? KOLO_HIER_INTRA_RS : KOLO_HIER_INTER_AR];
      for (int ch = 0; ch < s.nch; ch++) {
        hsend[k].push_back(fc.conn(p.send_peer, &hcounters[(size_t)(2 * k * s.nch + ch)], 0x30000 + 0x100 * k + ch));
        hrecv[k].push_back(fc.conn(p.recv_peer, &hcounters[(size_t)((2 * k + 1) * s.nch + ch)], 0x40000 + 0x100 * k + ch));
      }
      fc.pc.hier_send[k] = hsend[k].data();
      fc.pc.hier_recv[k] = hrecv[k].data();
    }
    fc.pc.hier_programs = hprog;
  }
  ~HierFake() {
    for (auto &p : hprog)
      if (p.steps) kolo_program_free(&p);
  }
  HierFake(const HierFake &) = delete;
  HierFake &operator=(const HierFake &) = delete;
  static uintptr_t steps_value(int phase) { return 0x7800000000ull + (uintptr_t)phase * 0x1000; }
  // The phase a task runs (from its steps), or -1 for a flat program.
  static int phase_of(const kolo_dev_task &t) {
    for (int k = 0; k < KOLO_HIER_PHASES; k++)
      if ((uintptr_t)t.steps == steps_value(k)) return k;
    return -1;
  }
};

// KOLO_ALGO=hier on 2 hosts of 2: per channel three tasks, in three
// launches one after the other (a phase reads what the one before wrote),
// each with its phase's program and the geometry the host executor builds
// for it (enqueue.c: add_hier_tasks), the intra phases on the intra pipes,
// the inter phase on the inter pipes.  Forced ring: the flat program.
TEST(CudaPlan, HierarchicalAllReducePhasesRunInConsecutiveLaunches) {
  Shape sh;
  sh.nranks = 4;
  sh.nch = 2;
  sh.ll_threshold = 0;  // a comm across hosts: SIMPLE only
  for (int rank = 0; rank < sh.nranks; rank++) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    HierFake hf(sh, rank, 2, KOLO_ALGO_HIER);
    const void *in = fake(0xa0000);
    void *out = const_cast<void *>(fake(0xb0000));
    kolo_op op = make_op(KOLO_COLL_ALL_REDUCE, in, out, 1 << 20, koloFloat32, KOLO_ALGO_HIER, koloAvg);
    EXPECT_EQ(kolo_cuda_plan_is_hier(&op, &hf.fc.pc), 1);
    auto bs = plan(hf.fc, {op});
    ASSERT_EQ(bs.size(), (size_t)KOLO_HIER_PHASES);
    for (int k = 0; k < KOLO_HIER_PHASES; k++) {
      ASSERT_EQ(bs[(size_t)k].ntasks, sh.nch) << "phase " << k;
      const kolo_program &prog = hf.hprog[k];
      int pipe = k == KOLO_HIER_INTER_AR;
      for (int ch = 0; ch < sh.nch; ch++) {
        const kolo_dev_task &t = bs[(size_t)k].tasks[ch];
        EXPECT_EQ(t.channel, ch);
        EXPECT_EQ(HierFake::phase_of(t), k);
        EXPECT_EQ(t.nsteps, prog.nsteps);
        EXPECT_EQ(t.in_blocked, prog.in_blocked);
        EXPECT_EQ(t.out_blocked, prog.out_blocked);
        expect_geometry(t.geo, host_geometry(sh, op, prog.layout, sh.nch, prog.npeers > 0));
        EXPECT_EQ(t.in, (const char *)in);
        EXPECT_EQ(t.out, (char *)out);
        EXPECT_EQ(t.div, sh.nranks);  // the average divides by every rank, as on the host
        EXPECT_EQ(t.has_send, prog.send_peer >= 0);
        EXPECT_EQ(t.has_recv, prog.recv_peer >= 0);
        if (t.has_send) {
          EXPECT_TRUE(same_end(t.send, hf.hsend[pipe][(size_t)ch])) << "phase " << k;
        }
        if (t.has_recv) {
          EXPECT_TRUE(same_end(t.recv, hf.hrecv[pipe][(size_t)ch])) << "phase " << k;
        }
      }
    }
    // inter peers live on the other host, intra peers on this one
    EXPECT_NE(hf.hprog[KOLO_HIER_INTER_AR].send_peer / 2, rank / 2);
    EXPECT_EQ(hf.hprog[KOLO_HIER_INTRA_RS].send_peer / 2, rank / 2);
  }
  HierFake ring(sh, 0, 2, KOLO_ALGO_RING);
  kolo_op op = make_op(KOLO_COLL_ALL_REDUCE, fake(0x1), const_cast<void *>(fake(0x2)), 1 << 20, koloFloat32);
  EXPECT_EQ(kolo_cuda_plan_is_hier(&op, &ring.fc.pc), 0);
  auto bs = plan(ring.fc, {op});
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(HierFake::phase_of(bs[0].tasks[0]), -1);
  EXPECT_TRUE(same_end(bs[0].tasks[0].send, ring.fc.ring_send[0]));
  // The algorithm the call was recorded with (enqueue.c: the cost model's
  // choice when KOLO_ALGO is unset, as on the host) decides.
  for (size_t count : {(size_t)7, (size_t)100003, (size_t)(16u << 20)}) {
    HierFake autof(sh, 1, 2, KOLO_ALGO_AUTO);
    autof.topo.no_auto_peers = 1;  // a CUDA comm's
    kolo_op o = make_op(KOLO_COLL_ALL_REDUCE, fake(0x1), const_cast<void *>(fake(0x2)), count, koloFloat32);
    o.arg = kolo_algo_choose(&autof.topo, count * 4, host_channels(sh, o));
    int want = o.arg == KOLO_ALGO_HIER;
    EXPECT_EQ(kolo_cuda_plan_is_hier(&o, &autof.fc.pc), want) << count;
    EXPECT_EQ(total_tasks(plan(autof.fc, {o})), host_channels(sh, o) * (want ? KOLO_HIER_PHASES : 1)) << count;
  }
}

// In a group, no launch holds two phases of one all-reduce, and every
// phase of an all-reduce comes after the one before; other collectives
// keep their flat programs and ring pipes.
TEST(CudaPlan, HierarchicalPhasesInGroupsNeverShareALaunch) {
  Shape sh;
  sh.nranks = 6;
  sh.nch = 3;
  sh.min_channel_bytes = 4096;
  sh.ll_threshold = 0;
  HierFake hf(sh, 4, 2, KOLO_ALGO_HIER);
  std::vector<kolo_op> ops;
  for (int i = 0; i < 5; i++) {
    int coll = i % 2 ? KOLO_COLL_ALL_GATHER : KOLO_COLL_ALL_REDUCE;
    ops.push_back(make_op(coll, fake(0x100000 * (i + 1)), const_cast<void *>(fake(0x100000 * (i + 1) + 8)),
                          i == 2 ? 1 : 50000 + 1000 * (size_t)i, koloFloat32,
                          coll == KOLO_COLL_ALL_REDUCE ? KOLO_ALGO_HIER : 0));
  }
  auto bs = plan(hf.fc, ops);
  std::map<const char *, int> last_phase;  // per all-reduce (by its input), the last phase launched
  int hier_tasks = 0;
  for (size_t b = 0; b < bs.size(); b++) {
    std::map<const char *, std::set<int>> phases;
    for (int j = 0; j < bs[b].ntasks; j++) {
      const kolo_dev_task &t = bs[b].tasks[j];
      int k = HierFake::phase_of(t);
      if (k < 0) {
        EXPECT_TRUE(same_end(t.send, hf.fc.ring_send[(size_t)t.channel])) << "launch " << b;
        continue;
      }
      hier_tasks++;
      phases[t.in].insert(k);
    }
    for (auto &kv : phases) {
      EXPECT_EQ(kv.second.size(), 1u) << "launch " << b << " holds several phases of one all-reduce";
      int k = *kv.second.begin();
      int before = last_phase.count(kv.first) ? last_phase[kv.first] : -1;
      EXPECT_TRUE(k == before + 1 || (k == before && k >= 0)) << "launch " << b << ": phase " << k
                                                              << " after phase " << before;
      last_phase[kv.first] = k;
    }
  }
  int want = 0;
  for (const kolo_op &o : ops)
    if (o.coll == KOLO_COLL_ALL_REDUCE) want += host_channels(sh, o) * KOLO_HIER_PHASES;
  EXPECT_EQ(hier_tasks, want);
  for (auto &kv : last_phase) EXPECT_EQ(kv.second, KOLO_HIER_PHASES - 1);
}

// The slices of every hierarchical phase balance across ranks: what rank r
// sends on a pipe on channel ch is what its peer receives from r on that
// pipe and channel (the launcher posts both to the proxies of net pipes:
// a mismatch stalls or overruns a pipe).  3 hosts of 2, 2 channels, 4 KiB
// slots; counts that leave chunks and slices partly empty.
TEST(CudaPlan, HierarchicalSlicesBalanceAcrossRanks) {
  Shape sh;
  sh.nranks = 6;
  sh.nch = 2;
  sh.slot_bytes = 4096;
  sh.p2p_slot_bytes = 4096;
  sh.min_channel_bytes = 4096;
  sh.ll_threshold = 0;
  std::vector<std::unique_ptr<HierFake>> fs;
  for (int r = 0; r < sh.nranks; r++) fs.emplace_back(new HierFake(sh, r, 3, KOLO_ALGO_HIER));
  for (size_t count : {(size_t)1, (size_t)1023, (size_t)(4096 * 3 + 17), (size_t)250001}) {
    SCOPED_TRACE("count " + std::to_string(count));
    // [rank][phase][channel] -> slices sent / received
    std::vector<std::vector<std::vector<uint64_t>>> sent((size_t)sh.nranks), got((size_t)sh.nranks);
    for (int r = 0; r < sh.nranks; r++) {
      sent[(size_t)r].assign(KOLO_HIER_PHASES, std::vector<uint64_t>((size_t)sh.nch, 0));
      got[(size_t)r] = sent[(size_t)r];
      kolo_op op = make_op(KOLO_COLL_ALL_REDUCE, fake(0x1000), const_cast<void *>(fake(0x2000)), count, koloFloat64,
                           KOLO_ALGO_HIER);
      for (const TaskSlices &ts : plan_slices(op, fs[(size_t)r]->fc.pc)) {
        int k = HierFake::phase_of(ts.task);
        ASSERT_GE(k, 0);
        sent[(size_t)r][(size_t)k][(size_t)ts.task.channel] += ts.sends;
        got[(size_t)r][(size_t)k][(size_t)ts.task.channel] += ts.recvs;
      }
    }
    uint64_t inter = 0;
    for (int r = 0; r < sh.nranks; r++)
      for (int k = 0; k < KOLO_HIER_PHASES; k++) {
        int peer = fs[(size_t)r]->hprog[k].send_peer;
        if (peer < 0) continue;
        ASSERT_EQ(fs[(size_t)peer]->hprog[k].recv_peer, r);
        for (int ch = 0; ch < sh.nch; ch++)
          EXPECT_EQ(sent[(size_t)r][(size_t)k][(size_t)ch], got[(size_t)peer][(size_t)k][(size_t)ch])
              << "rank " << r << " -> " << peer << ", phase " << k << ", channel " << ch;
        if (k == KOLO_HIER_INTER_AR)
          for (int ch = 0; ch < sh.nch; ch++) inter += sent[(size_t)r][(size_t)k][(size_t)ch];
      }
    EXPECT_GT(inter, 0u) << "no slice crossed hosts";
  }
}

// ---- no deadlock across ranks ------------------------------------------------------------
//
// Launches of one rank run one after the other; a task finishes only when
// every task of its transfer (both ends of a send/recv, all ranks of a
// collective, on that channel) is in a running launch at once (messages
// larger than a pipe).  A transfer is named by the buffer tag its ops
// carry.  Returns false when no launch of any rank can finish.

struct Unit {
  uintptr_t tag;
  int channel;
  bool operator<(const Unit &o) const { return tag != o.tag ? tag < o.tag : channel < o.channel; }
};

bool runs_to_the_end(const std::vector<std::vector<kolo_dev_batch>> &per_rank,
                     const std::map<uintptr_t, int> &parties) {
  size_t nr = per_rank.size();
  std::vector<size_t> cur(nr, 0);
  std::vector<std::vector<bool>> done(nr);
  auto unit_of = [](const kolo_dev_task &t) {
    return Unit{(uintptr_t)(t.in ? (const void *)t.in : (const void *)t.out), t.channel};
  };
  for (;;) {
    bool all_done = true, moved = false;
    std::map<Unit, int> running;
    for (size_t r = 0; r < nr; r++) {
      if (cur[r] == per_rank[r].size()) continue;
      all_done = false;
      const kolo_dev_batch &b = per_rank[r][cur[r]];
      if (done[r].empty()) done[r].assign((size_t)b.ntasks, false);
      for (int i = 0; i < b.ntasks; i++) running[unit_of(b.tasks[i])]++;
    }
    if (all_done) return true;
    for (size_t r = 0; r < nr; r++) {
      if (cur[r] == per_rank[r].size()) continue;
      const kolo_dev_batch &b = per_rank[r][cur[r]];
      bool all = true;
      for (int i = 0; i < b.ntasks; i++) {
        Unit u = unit_of(b.tasks[i]);
        if (!done[r][(size_t)i] && running[u] == parties.at(u.tag)) done[r][(size_t)i] = true;
        all = all && done[r][(size_t)i];
      }
      if (all) {
        cur[r]++;
        done[r].clear();
        moved = true;
      }
    }
    // Which launches run changes only when one finishes: none did, so
    // nothing ever will.
    if (!moved) return false;
  }
}

TEST(CudaPlan, SimulatorSeesADeadlock) {
  // Two ranks that each send first and receive second, in separate
  // launches, deadlock; with one of them receiving first they do not.
  Shape sh;
  sh.nranks = 2;
  sh.nch = 1;
  FakeComm f0(sh, 0), f1(sh, 1);
  auto s01 = plan(f0, {make_op(KOLO_COLL_SEND, fake(0x100), nullptr, 1 << 20, koloFloat32, 1)});
  auto r01 = plan(f1, {make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x100)), 1 << 20, koloFloat32, 0)});
  auto s10 = plan(f1, {make_op(KOLO_COLL_SEND, fake(0x200), nullptr, 1 << 20, koloFloat32, 0)});
  auto r10 = plan(f0, {make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(0x200)), 1 << 20, koloFloat32, 1)});
  std::map<uintptr_t, int> parties = {{0x100, 2}, {0x200, 2}};
  std::vector<std::vector<kolo_dev_batch>> bad = {{s01[0], r10[0]}, {s10[0], r01[0]}};
  EXPECT_FALSE(runs_to_the_end(bad, parties));
  std::vector<std::vector<kolo_dev_batch>> good = {{s01[0], r10[0]}, {r01[0], s10[0]}};
  EXPECT_TRUE(runs_to_the_end(good, parties));
}

TEST(CudaPlan, RandomGroupsCannotDeadlockAcrossRanks) {
  std::mt19937_64 rng(20240611);
  const koloDataType_t types[] = {koloFloat32, koloInt32, koloFloat16};
  const size_t counts[] = {100, 5000, 300000};  // LL, LL/SIMPLE by type, SIMPLE on 1 or 2 channels
  for (int iter = 0; iter < 300; iter++) {
    Shape sh;
    sh.nranks = 2 + (int)(rng() % 9);
    sh.nch = 1 + (int)(rng() % 2);
    sh.min_channel_bytes = 256 * 1024;
    sh.ll_threshold = (rng() % 3 == 0) ? 0 : 64 * 1024;
    std::mt19937_64 budget_rng((uint64_t)iter);  // apart, so that the groups stay what they were
    sh.max_tasks = budget_rng() % 2 ? 0 : sh.nch + (int)(budget_rng() % 3);
    int n = sh.nranks;
    std::vector<std::vector<kolo_op>> ops((size_t)n);
    std::map<uintptr_t, int> parties;
    uintptr_t tag = 0x10000;
    // collectives: one order for all ranks; a multi-peer one in 2 of 5
    // (from a stream of its own, so that the groups stay what they were)
    int ncoll = (int)(rng() % 3);
    std::vector<kolo_op> colls;
    std::mt19937_64 peer_rng((uint64_t)iter * 7 + 1);
    for (int k = 0; k < ncoll; k++) {
      tag += 0x100;
      int coll = (int)(rng() % 5);
      if (peer_rng() % 5 < 2) coll = KOLO_COLL_ALL_TO_ALL + (int)(peer_rng() % 3);
      kolo_op o = make_op(coll, fake(tag), const_cast<void *>(fake(tag)), counts[rng() % 3], types[rng() % 3],
                          (int)(rng() % (uint64_t)n));
      if (coll == KOLO_COLL_ALL_REDUCE) o.arg %= KOLO_ALGO_RABENSEIFNER + 1;  // the algorithm: ring or a doubling one
      if (coll == KOLO_COLL_BROADCAST && peer_rng() % 2)  // a tree
        o.arg = kolo_bcast_arg(o.arg, peer_rng() % 2 ? KOLO_ALGO_TREE : KOLO_ALGO_DBTREE, n);
      if (coll == KOLO_COLL_ALL_GATHER) o.arg = peer_rng() % 2 ? KOLO_ALGO_BRUCK : KOLO_ALGO_RING;  // its algorithm
      colls.push_back(o);
      parties[tag] = n;
    }
    // transfers: each lands in its sender's and receiver's list at random places
    int ntr = (int)(rng() % (uint64_t)(3 * n + 20));
    for (int k = 0; k < ntr; k++) {
      tag += 0x100;
      int s = (int)(rng() % (uint64_t)n), r = (int)(rng() % (uint64_t)n);
      size_t count = counts[rng() % 3];
      koloDataType_t ty = types[rng() % 3];
      auto insert = [&](std::vector<kolo_op> &v, const kolo_op &o) {
        v.insert(v.begin() + (long)(rng() % (v.size() + 1)), o);
      };
      insert(ops[(size_t)s], make_op(KOLO_COLL_SEND, fake(tag), nullptr, count, ty, r));
      insert(ops[(size_t)r], make_op(KOLO_COLL_RECV, nullptr, const_cast<void *>(fake(tag)), count, ty, s));
      parties[tag] = 2;
    }
    // The order of sends to one peer (and recvs from one) is the order
    // that matches them: keep each rank's relative order of same-pair ops
    // as the transfer order.  Re-sort each list's same-(coll, peer) ops
    // by tag so the j-th send meets the j-th recv.
    for (auto &v : ops) {
      std::map<std::pair<int, int>, std::vector<size_t>> slots;
      for (size_t i = 0; i < v.size(); i++) slots[{v[i].coll, v[i].arg}].push_back(i);
      for (auto &kv : slots) {
        std::vector<kolo_op> same;
        for (size_t i : kv.second) same.push_back(v[i]);
        std::sort(same.begin(), same.end(), [](const kolo_op &a, const kolo_op &b) {
          return (uintptr_t)(a.sendbuff ? a.sendbuff : a.recvbuff) < (uintptr_t)(b.sendbuff ? b.sendbuff : b.recvbuff);
        });
        for (size_t j = 0; j < kv.second.size(); j++) v[kv.second[j]] = same[j];
      }
    }
    // collectives at random places, in the same order on every rank
    for (auto &v : ops) {
      std::vector<size_t> at;
      for (size_t k = 0; k < colls.size(); k++) at.push_back(rng() % (v.size() + 1));
      std::sort(at.begin(), at.end());
      for (size_t k = colls.size(); k-- > 0;) v.insert(v.begin() + (long)at[k], colls[k]);
    }
    std::vector<std::vector<kolo_dev_batch>> per_rank((size_t)n);
    for (int r = 0; r < n; r++) {
      FakeComm fc(sh, r);
      per_rank[(size_t)r] = plan(fc, ops[(size_t)r]);
    }
    ASSERT_TRUE(runs_to_the_end(per_rank, parties))
        << "iteration " << iter << ": " << n << " ranks, " << sh.nch << " channel(s), " << ntr
        << " transfers, " << ncoll << " collectives, at most " << sh.max_tasks << " tasks a launch";
  }
}

// ---- communicator init -------------------------------------------------------------------

koloConfig_t cuda_config() {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = 20000;
  return cfg;
}

#ifdef KOLO_HAVE_CUDA

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  (void)cudaGetLastError();
  return n;
}

TEST(CudaInit, MissingDeviceFailsCleanlyNamingIt) {
  int ndev = visible_devices();
  koloConfig_t cfg = cuda_config();
  // Without a GPU, device 0 is missing; with one, ask for one past the last.
  int missing = ndev;
  if (ndev > 0) cfg.cudaDev = missing;
  koloComm_t comms[2] = {nullptr, nullptr};
  int devs[2] = {missing, missing};
  koloResult_t res = koloCommInitAllConfig(comms, 2, devs, &cfg);
  EXPECT_NE(res, koloSuccess);
  EXPECT_TRUE(res == koloUnhandledCudaError || res == koloRemoteError) << koloGetErrorString(res);
  std::string msg = koloGetLastError(nullptr);
  EXPECT_CONTAINS(msg, "CUDA device " + std::to_string(missing));
  EXPECT_CONTAINS(msg, "rank ");
  EXPECT_EQ(comms[0], nullptr);
  EXPECT_EQ(comms[1], nullptr);
}

TEST(CudaInit, MemoryFromTheEnvironment) {
  if (visible_devices() > 0) GTEST_SKIP() << "a GPU is present: this checks the no-GPU path";
  kt::ScopedEnv env("KOLO_MEMORY", "cuda");
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitAll(&comm, 1, nullptr);
  EXPECT_NE(res, koloSuccess);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "CUDA device 0");
  EXPECT_EQ(comm, nullptr);
}

TEST(CudaInit, BadLLSlotSizeIsRefused) {
  kt::ScopedEnv env("KOLO_LL_SLOT_BYTES", "1000");
  koloConfig_t cfg = cuda_config();
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitAllConfig(&comm, 1, nullptr, &cfg);
  EXPECT_EQ(res, koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "KOLO_LL_SLOT_BYTES");
}

// A KOLO_PROTO kolo cannot read fails init with a sentence naming the
// value and what is wrong, before any device is touched.
TEST(CudaInit, UnreadableKoloProtoIsRefused) {
  const std::pair<const char *, const char *> cases[] = {
      {"allreduce:LL;bcast:Simple", "KOLO_PROTO / NCCL_PROTO \"allreduce:LL;bcast:Simple\": no collective ("},
      {"LL,LL64", "KOLO_PROTO / NCCL_PROTO \"LL,LL64\": no protocol (kolo has LL and Simple) named \"LL64\""},
      {"LL128", "\"LL128\": allows neither LL nor Simple (LL128 is not in kolo) in the entry \"LL128\""},
      {"broadcast:", "\"broadcast:\": has an empty protocol list or name in the entry \"broadcast:\""}};
  koloConfig_t cfg = cuda_config();
  for (const auto &c : cases) {
    kt::ScopedEnv env("KOLO_PROTO", c.first);
    koloComm_t comm = nullptr;
    EXPECT_EQ(koloCommInitAllConfig(&comm, 1, nullptr, &cfg), koloInvalidArgument) << c.first;
    EXPECT_CONTAINS(koloGetLastError(nullptr), c.second);
    EXPECT_EQ(comm, nullptr);
  }
}

// One rank's init of a CUDA comm of n ranks, rank 1 with KOLO_PROTO
// `odd` and the others with `common` (nullptr: unset): 0 when what it
// returned says `want` ("" : nothing of KOLO_PROTO), else 1 with a line.
int proto_init_child(int rank, const koloUniqueId &id, int n, const char *common, const char *odd,
                     const std::string &want) {
  const char *mine = rank == 1 ? odd : common;
  if (mine) setenv("KOLO_PROTO", mine, 1);
  else unsetenv("KOLO_PROTO");
  koloConfig_t cfg = cuda_config();
  koloComm_t comm = nullptr;
  koloResult_t r = koloCommInitRankConfig(&comm, n, id, rank, &cfg);
  std::string msg = r == koloSuccess ? "" : koloGetLastError(nullptr);
  if (comm) koloCommDestroy(comm);
  bool ok = want.empty() ? msg.find("KOLO_PROTO") == std::string::npos
                         : r == koloInvalidUsage && msg.find(want) != std::string::npos;
  if (!ok) std::fprintf(stderr, "rank %d: %s: \"%s\" (wanted \"%s\")\n", rank, koloGetErrorString(r), msg.c_str(), want.c_str());
  return ok ? 0 : 1;
}

// Ranks that give different KOLO_PROTO values would run one transfer LL
// at one end and Simple at the other: init fails on every rank, naming
// both choices; ranks that agree get past the check.
TEST(CudaInit, KoloProtoDiffersBetweenRanks) {
  const int n = 3;
  std::string id_error;
  auto res = kt::run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        std::string want = rank == 1 ? "rank 1: KOLO_PROTO (or NCCL_PROTO) differs between ranks, and must be alike "
                                       "on all: rank 0 allows LL and Simple, this rank allows allreduce:Simple (its "
                                       "value: \"allreduce:^LL\")"
                                     : "KOLO_PROTO (or NCCL_PROTO) differs between ranks, and must be alike on all: "
                                       "rank 1 allows allreduce:Simple, this rank allows LL and Simple (its value: "
                                       "\"unset\")";
        return proto_init_child(rank, id, n, nullptr, "allreduce:^LL", want);
      },
      60000, nullptr, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(kt::children_failures(res), "");
  // the same choice in two spellings: alike
  res = kt::run_children_with_id(
      n, [&](int rank, const koloUniqueId &id) { return proto_init_child(rank, id, n, "allreduce:Simple", "allreduce:^LL", ""); },
      60000, nullptr, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(kt::children_failures(res), "");
}

#else

TEST(CudaInit, RefusedWithoutCudaInTheBuild) {
  koloConfig_t cfg = cuda_config();
  koloComm_t comms[2] = {nullptr, nullptr};
  koloResult_t res = koloCommInitAllConfig(comms, 2, nullptr, &cfg);
  EXPECT_EQ(res, koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "this build of kolo has none");
  EXPECT_EQ(comms[0], nullptr);
  kt::ScopedEnv env("KOLO_MEMORY", "cuda");
  koloComm_t comm = nullptr;
  EXPECT_EQ(koloCommInitAll(&comm, 1, nullptr), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "KOLO_CUDA=OFF");
}

#endif

// ---- end to end on a GPU (skipped without one) -------------------------------------------

#ifdef KOLO_HAVE_CUDA

class CudaComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visible_devices() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// n ranks as threads' comms on device 0, each with its own non-blocking stream.
struct GpuWorld {
  std::vector<koloComm_t> comms;
  std::vector<cudaStream_t> streams;
  koloResult_t res = koloSuccess;
  explicit GpuWorld(int n) : comms((size_t)n, nullptr), streams((size_t)n, nullptr) {
    koloConfig_t cfg = cuda_config();
    std::vector<int> devs((size_t)n, 0);
    res = koloCommInitAllConfig(comms.data(), n, devs.data(), &cfg);
    cudaSetDevice(0);
    for (auto &s : streams) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~GpuWorld() {
    for (auto &c : comms)
      if (c) koloCommDestroy(c);
    for (auto &s : streams)
      if (s) cudaStreamDestroy(s);
  }
};

TEST_F(CudaComm, AllReduceOfRanksSharingOneDevice) {
  for (size_t count : {(size_t)1, (size_t)1000, (size_t)(1 << 20) + 5}) {
    const int n = 3;
    GpuWorld w(n);
    ASSERT_EQ(w.res, koloSuccess) << koloGetLastError(nullptr);
    std::vector<float *> buf((size_t)n);
    for (int r = 0; r < n; r++) {
      ASSERT_EQ(cudaMalloc(&buf[(size_t)r], count * sizeof(float)), cudaSuccess);
      std::vector<float> h(count, (float)(r + 1));
      cudaMemcpy(buf[(size_t)r], h.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    }
    ASSERT_EQ(koloGroupStart(), koloSuccess);
    for (int r = 0; r < n; r++)
      EXPECT_EQ(koloAllReduce(buf[(size_t)r], buf[(size_t)r], count, koloFloat32, koloSum, w.comms[(size_t)r],
                              (koloStream_t)w.streams[(size_t)r]),
                koloSuccess);
    ASSERT_EQ(koloGroupEnd(), koloSuccess) << koloGetLastError(w.comms[0]);
    for (int r = 0; r < n; r++) ASSERT_EQ(cudaStreamSynchronize(w.streams[(size_t)r]), cudaSuccess);
    for (int r = 0; r < n; r++) {
      koloResult_t ae;
      EXPECT_EQ(koloCommGetAsyncError(w.comms[(size_t)r], &ae), koloSuccess);
      EXPECT_EQ(ae, koloSuccess) << koloGetLastError(w.comms[(size_t)r]);
      std::vector<float> h(count);
      cudaMemcpy(h.data(), buf[(size_t)r], count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; i++) ASSERT_EQ(h[i], 6.0f) << "rank " << r << " element " << i;
      cudaFree(buf[(size_t)r]);
    }
  }
}

TEST_F(CudaComm, SendRecvRingAndTheNullStreamRule) {
  const int n = 2;
  GpuWorld w(n);
  ASSERT_EQ(w.res, koloSuccess) << koloGetLastError(nullptr);
  // two ranks of this process on device 0: the NULL stream is refused
  int *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(koloAllReduce(d, d, 4, koloInt32, koloSum, w.comms[0], nullptr), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "NULL (legacy default) stream");
  cudaFree(d);
  const size_t count = 300000;
  std::vector<int *> in((size_t)n), out((size_t)n);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaMalloc(&in[(size_t)r], count * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out[(size_t)r], count * sizeof(int)), cudaSuccess);
    std::vector<int> h(count);
    for (size_t i = 0; i < count; i++) h[i] = (int)(i * 7 + (size_t)r);
    cudaMemcpy(in[(size_t)r], h.data(), count * sizeof(int), cudaMemcpyHostToDevice);
  }
  ASSERT_EQ(koloGroupStart(), koloSuccess);
  for (int r = 0; r < n; r++) {
    int peer = 1 - r;
    EXPECT_EQ(koloSend(in[(size_t)r], count, koloInt32, peer, w.comms[(size_t)r], (koloStream_t)w.streams[(size_t)r]),
              koloSuccess);
    EXPECT_EQ(koloRecv(out[(size_t)r], count, koloInt32, peer, w.comms[(size_t)r], (koloStream_t)w.streams[(size_t)r]),
              koloSuccess);
  }
  ASSERT_EQ(koloGroupEnd(), koloSuccess) << koloGetLastError(w.comms[0]);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaStreamSynchronize(w.streams[(size_t)r]), cudaSuccess);
    std::vector<int> h(count);
    cudaMemcpy(h.data(), out[(size_t)r], count * sizeof(int), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count; i++) ASSERT_EQ(h[i], (int)(i * 7 + (size_t)(1 - r))) << "rank " << r << " element " << i;
    cudaFree(in[(size_t)r]);
    cudaFree(out[(size_t)r]);
  }
}

#endif

}  // namespace
