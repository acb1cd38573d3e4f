// test_nccl_layer.cc - kolo's libnccl.so.2 as an unmodified NCCL program
// sees it: compiled against the CUDA toolkit's own nccl.h (NVIDIA's
// prototypes, enum values and ncclConfig_t), linked to kolo's libnccl.so.2
// and nothing else of kolo.  Ranks are devices driven from one thread, the
// way NCCL's examples do it (cudaSetDevice + ncclCommInitRank in a group).
//
// Every result is checked element by element against tests/util/coll_ref's
// reference (written from the API contract, in double or exact integers),
// outputs poisoned first.  On the CPU model of the GPU (build-sim) every
// test runs; in a build for a real GPU without one, the device tests skip.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/coll_ref.h"
#include "util/device_guard.h"
#include "util/free_port.h"

namespace {

using kt::Expected;

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// Fewer devices than n: a skip with real CUDA, a failure on the model.
#define NEED_DEVICES(n)                                                                       \
  do {                                                                                        \
    if (device_count() < (n)) KT_NO_DEVICE("needs " << (n) << " CUDA devices, sees " << device_count()); \
  } while (0)

std::string last(ncclComm_t c = nullptr) { return ncclGetLastError(c); }

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// ---- communicators: ranks 0..n-1 on devices 0..n-1, from one thread -------

struct World {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<int> devs;  // rank r's device; empty: r
  int dev(int r) const { return devs.empty() ? r : devs[r]; }
  ~World() {
    for (size_t r = 0; r < comms.size(); r++) {
      cudaSetDevice(dev((int)r));
      if (comms[r]) ncclCommDestroy(comms[r]);
      if (streams[r]) cudaStreamDestroy(streams[r]);
    }
  }
};

// NCCL's pattern: one id, a group of ncclCommInitRank, one per device.
void make_world(World *w, int n, ncclConfig_t *config = nullptr) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << last();
  w->comms.assign(n, nullptr);
  w->streams.assign(n, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&w->streams[r]), cudaSuccess);
    ncclResult_t res = ncclCommInitRankConfig(&w->comms[r], n, id, r, config);
    ASSERT_TRUE(res == ncclSuccess || res == ncclInProgress) << ncclGetErrorString(res) << ": " << last();
  }
  ncclResult_t end = ncclGroupEnd();  // non-blocking inits: ncclInProgress
  ASSERT_TRUE(end == ncclSuccess || end == ncclInProgress) << ncclGetErrorString(end) << ": " << last();
}

// ncclCommInitAll over devlist (several ranks may share a device).
void make_world_all(World *w, const std::vector<int> &devlist) {
  int n = (int)devlist.size();
  w->devs = devlist;
  w->comms.assign(n, nullptr);
  w->streams.assign(n, nullptr);
  ASSERT_EQ(ncclCommInitAll(w->comms.data(), n, devlist.data()), ncclSuccess) << last();
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaSetDevice(devlist[r]), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&w->streams[r], cudaStreamNonBlocking), cudaSuccess);
  }
}

void sync_world(const World &w) {
  for (size_t r = 0; r < w.comms.size(); r++) {
    ASSERT_EQ(cudaSetDevice(w.dev((int)r)), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(w.streams[r]), cudaSuccess);
  }
}

// ---- device buffers ------------------------------------------------------------

struct DevBuf {
  int dev = 0;
  char *base = nullptr;
  size_t bytes = 0, offset = 0;  // offset: an unaligned start
  bool owned = true;             // false: a view of another's memory
  void *ptr() const { return base + offset; }
  DevBuf() = default;
  DevBuf(const DevBuf &o) : dev(o.dev), base(o.base), bytes(o.bytes), offset(o.offset), owned(false) {}
  DevBuf &operator=(const DevBuf &) = delete;
  ~DevBuf() {
    if (base && owned) cudaSetDevice(dev), cudaFree(base);
  }
};

void dev_alloc(DevBuf *b, int dev, size_t bytes, size_t offset) {
  b->dev = dev;
  b->bytes = bytes;
  b->offset = offset;
  ASSERT_EQ(cudaSetDevice(dev), cudaSuccess);
  ASSERT_EQ(cudaMalloc((void **)&b->base, bytes + offset + 1), cudaSuccess);
  ASSERT_EQ(cudaMemset(b->base, 0xa5, bytes + offset + 1), cudaSuccess);  // poison
}

void to_dev(const DevBuf &b, const std::vector<unsigned char> &host) {
  ASSERT_EQ(cudaSetDevice(b.dev), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.ptr(), host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<unsigned char> from_dev(const DevBuf &b, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  cudaSetDevice(b.dev);
  EXPECT_EQ(cudaMemcpy(host.data(), b.ptr(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// ---- one collective over every rank, checked -------------------------------

enum class Coll { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AlltoAll, Gather, Scatter, SendRecv };

const char *coll_name(Coll c) {
  static const char *names[] = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce",
                                "AlltoAll",  "Gather",        "Scatter",   "SendRecv"};
  return names[(int)c];
}

struct Case {
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;  // (ncclRedOp_t)ncclNumOps: premul-sum, made per rank
  size_t count;
  bool in_place;
  int root;
  uint64_t seed;
};

std::string describe(const Case &c) {
  return std::string(coll_name(c.coll)) + " " + kt::type_name((koloDataType_t)c.type) + " " +
         kt::op_name((koloRedOp_t)c.op) + " count " + std::to_string(c.count) + (c.in_place ? " in place" : "") +
         " root " + std::to_string(c.root);
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }

// Elements of each rank's send and receive buffers.
void sizes(const Case &c, int n, size_t *send, size_t *recv) {
  size_t k = c.count;
  switch (c.coll) {
  case Coll::ReduceScatter: *send = k * n, *recv = k; break;
  case Coll::AllGather: case Coll::Gather: *send = k, *recv = k * n; break;
  case Coll::AlltoAll: *send = k * n, *recv = k * n; break;
  case Coll::Scatter: *send = k * n, *recv = k; break;
  default: *send = k, *recv = k;
  }
}

// The op each rank passes: premul-sum made on its comm with its own scalar
// (immediate on even ranks, in device memory on odd ones).
struct RankOp {
  ncclRedOp_t op;
  DevBuf scalar_dev;
  uint64_t scalar_bits = 0;
};

void make_op(const Case &c, ncclComm_t comm, int rank, int dev, RankOp *o) {
  o->op = c.op;
  if (!(reduces(c.coll) && c.op == (ncclRedOp_t)ncclNumOps)) return;
  o->scalar_bits = kt::premul_scalar_bits(c.seed, rank, (koloDataType_t)c.type);
  void *scalar = &o->scalar_bits;  // little-endian: the low bytes are the scalar
  ncclScalarResidence_t where = rank % 2 ? ncclScalarDevice : ncclScalarHostImmediate;
  if (where == ncclScalarDevice) {
    dev_alloc(&o->scalar_dev, dev, 8, 0);
    std::vector<unsigned char> b(8);
    memcpy(b.data(), &o->scalar_bits, 8);
    to_dev(o->scalar_dev, b);
    scalar = o->scalar_dev.ptr();
  }
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&o->op, scalar, c.type, where, comm), ncclSuccess) << last(comm);
}

// Rank r's input: rank r's send elements from the reference's generator.
std::vector<unsigned char> input_of(const Case &c, int rank, size_t n) {
  std::vector<unsigned char> host(n * kt::type_size((koloDataType_t)c.type) + 1);
  koloRedOp_t op = reduces(c.coll) ? (koloRedOp_t)c.op : koloSum;
  kt::fill_input(host.data(), n, c.seed, rank, 0, (koloDataType_t)c.type, op);
  host.pop_back();
  return host;
}

ncclResult_t issue(const Case &c, const void *s, void *d, ncclRedOp_t op, int rank, int n, ncclComm_t comm,
                   cudaStream_t st) {
  size_t k = c.count;
  switch (c.coll) {
  case Coll::AllReduce: return ncclAllReduce(s, d, k, c.type, op, comm, st);
  case Coll::ReduceScatter: return ncclReduceScatter(s, d, k, c.type, op, comm, st);
  case Coll::AllGather: return ncclAllGather(s, d, k, c.type, comm, st);
  case Coll::Broadcast: return ncclBroadcast(s, d, k, c.type, c.root, comm, st);
  case Coll::Reduce: return ncclReduce(s, d, k, c.type, op, c.root, comm, st);
  case Coll::AlltoAll: return ncclAlltoAll(s, d, k, c.type, comm, st);
  case Coll::Gather: return ncclGather(s, d, k, c.type, c.root, comm, st);
  case Coll::Scatter: return ncclScatter(s, d, k, c.type, c.root, comm, st);
  case Coll::SendRecv: {  // a ring: send to the next rank, receive from the previous
    ncclResult_t a = ncclSend(s, k, c.type, (rank + 1) % n, comm, st);
    return a != ncclSuccess ? a : ncclRecv(d, k, c.type, (rank + n - 1) % n, comm, st);
  }
  }
  return ncclInternalError;
}

// Exact expected bits: element i is rank src(i)'s input element idx(i).
Expected expect_copy(const Case &c, size_t n, const std::function<void(size_t, int *, size_t *)> &from) {
  Expected e;
  kt::expect_init(&e, (koloDataType_t)c.type, true, n);
  for (size_t i = 0; i < n; i++) {
    int src;
    size_t idx;
    from(i, &src, &idx);
    kt::store_bits(e.raw.data(), i, (koloDataType_t)c.type, kt::input_bits(c.seed, src, idx, (koloDataType_t)c.type, koloSum));
  }
  return e;
}

// What rank `rank`'s receive buffer must hold, and from which element of
// the reference (first); false: the rank's buffer is not written.
bool expected_for(const Case &c, int rank, int n, Expected *e, size_t *first) {
  koloDataType_t t = (koloDataType_t)c.type;
  size_t k = c.count;
  *first = 0;
  switch (c.coll) {
  case Coll::AllReduce: case Coll::Reduce: case Coll::ReduceScatter:
    if (c.coll == Coll::Reduce && rank != c.root) return false;
    kt::expect_init(e, t, kt::reduction_is_exact(t, (koloRedOp_t)c.op), c.coll == Coll::ReduceScatter ? k * n : k);
    kt::fill_reduction(e, c.seed, n, 0, e->n, (koloRedOp_t)c.op);
    *first = c.coll == Coll::ReduceScatter ? k * rank : 0;
    return true;
  case Coll::AllGather: case Coll::Gather:
    if (c.coll == Coll::Gather && rank != c.root) return false;
    *e = expect_copy(c, k * n, [&](size_t i, int *s, size_t *x) { *s = (int)(i / k), *x = i % k; });
    return true;
  case Coll::Broadcast: *e = expect_copy(c, k, [&](size_t i, int *s, size_t *x) { *s = c.root, *x = i; }); return true;
  case Coll::AlltoAll:
    *e = expect_copy(c, k * n, [&](size_t i, int *s, size_t *x) { *s = (int)(i / k), *x = rank * k + i % k; });
    return true;
  case Coll::Scatter:
    *e = expect_copy(c, k, [&](size_t i, int *s, size_t *x) { *s = c.root, *x = rank * k + i; });
    return true;
  case Coll::SendRecv:
    *e = expect_copy(c, k, [&](size_t i, int *s, size_t *x) { *s = (rank + n - 1) % n, *x = i; });
    return true;
  }
  return false;
}

// In place as NCCL defines it: the receive buffer is the send buffer
// (all-reduce, broadcast, reduce), or the send buffer is the rank's block of
// the receive buffer (all-gather, reduce-scatter: the receive buffer is the
// rank's block of the send buffer).
size_t in_place_offset(const Case &c, int rank) {
  size_t bytes = c.count * kt::type_size((koloDataType_t)c.type);
  if (c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter) return bytes * rank;
  return 0;
}

// One rank's part of a case: its buffers (device `dev`), its op.
struct RankCase {
  DevBuf send, recv;
  RankOp op;
  bool nccl_mem = false;  // buffers from ncclMemAlloc, registered with the comm
  void *handles[2] = {nullptr, nullptr};
};

DevBuf view_of(const DevBuf &b, size_t extra) {
  DevBuf v(b);  // a view: frees nothing
  v.offset += extra;
  return v;
}

// ncclMemAlloc'd memory registered with comm, instead of cudaMalloc's.
void mem_alloc(DevBuf *b, ncclComm_t comm, size_t bytes, void **handle) {
  ASSERT_EQ(cudaSetDevice(b->dev), cudaSuccess);
  void *p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, bytes + 1), ncclSuccess) << last();
  ASSERT_EQ(cudaMemset(p, 0xa5, bytes + 1), cudaSuccess);
  ASSERT_EQ(ncclCommRegister(comm, p, bytes + 1, handle), ncclSuccess) << last(comm);
  b->base = (char *)p, b->bytes = bytes, b->offset = 0;
  b->owned = false;  // ncclMemFree's, in rank_check
}

void rank_prepare(const Case &c, int n, int r, int dev, ncclComm_t comm, RankCase *rc) {
  size_t es = kt::type_size((koloDataType_t)c.type), ns, nr;
  sizes(c, n, &ns, &nr);
  size_t unaligned = (r + c.seed) % 2 ? es : 0;  // odd ranks (or seeds) start one element in
  size_t send_bytes = (c.in_place ? std::max(ns, nr) : ns) * es;
  rc->send.dev = rc->recv.dev = dev;
  if (rc->nccl_mem) {
    mem_alloc(&rc->send, comm, send_bytes, &rc->handles[0]);
    if (!c.in_place) mem_alloc(&rc->recv, comm, nr * es, &rc->handles[1]);
  } else {
    dev_alloc(&rc->send, dev, send_bytes, unaligned);
    if (!c.in_place) dev_alloc(&rc->recv, dev, nr * es, unaligned);
  }
  if (::testing::Test::HasFatalFailure()) return;
  // in-place all-gather: the input is the rank's block
  DevBuf at = view_of(rc->send, c.in_place && c.coll == Coll::AllGather ? in_place_offset(c, r) : 0);
  to_dev(at, input_of(c, r, ns));
  at.base = nullptr;  // rc->send's
  make_op(c, comm, r, dev, &rc->op);
}

ncclResult_t rank_issue(const Case &c, RankCase &rc, int r, int n, ncclComm_t comm, cudaStream_t st) {
  char *base = (char *)rc.send.ptr();
  void *d = c.in_place ? base : rc.recv.ptr();
  const void *s = c.in_place ? base + in_place_offset(c, r) : base;
  if (c.in_place && c.coll == Coll::ReduceScatter) s = base, d = base + in_place_offset(c, r);
  return issue(c, s, d, rc.op.op, r, n, comm, st);
}

// Checks rank r's output; then frees its op and registrations.
void rank_check(const Case &c, RankCase &rc, int r, int n, ncclComm_t comm) {
  Expected e;
  size_t first, ns, nr, es = kt::type_size((koloDataType_t)c.type);
  sizes(c, n, &ns, &nr);
  if (expected_for(c, r, n, &e, &first)) {
    const DevBuf &out = c.in_place ? rc.send : rc.recv;
    DevBuf view = view_of(out, c.in_place && c.coll == Coll::ReduceScatter ? in_place_offset(c, r) : 0);
    std::vector<unsigned char> got = from_dev(view, nr * es);
    view.base = nullptr;  // not ours to free
    EXPECT_EQ(kt::compare(got.data(), e, first, nr), "") << describe(c) << ", rank " << r << " of " << n;
  }
  if (reduces(c.coll) && c.op == (ncclRedOp_t)ncclNumOps) {
    EXPECT_EQ(ncclRedOpDestroy(rc.op.op, comm), ncclSuccess) << last(comm);
  }
  for (int i = 0; i < 2 && rc.nccl_mem; i++) {
    DevBuf &b = i == 0 ? rc.send : rc.recv;
    if (rc.handles[i]) {
      EXPECT_EQ(ncclCommDeregister(comm, rc.handles[i]), ncclSuccess) << last(comm);
    }
    if (b.base) {
      EXPECT_EQ(ncclMemFree(b.base), ncclSuccess) << last();
    }
    b.base = nullptr;
  }
}

void run_case(World &w, const Case &c, bool nccl_mem = false) {
  int n = (int)w.comms.size();
  std::vector<RankCase> rcs(n);
  for (int r = 0; r < n; r++) {
    rcs[r].nccl_mem = nccl_mem;
    rank_prepare(c, n, r, w.dev(r), w.comms[r], &rcs[r]);
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaSetDevice(w.dev(r)), cudaSuccess);
    ASSERT_EQ(rank_issue(c, rcs[r], r, n, w.comms[r], w.streams[r]), ncclSuccess) << describe(c) << ": " << last(w.comms[r]);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << describe(c) << ": " << last();
  int current = -1;  // the caller's device, as NCCL leaves it
  EXPECT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << "ncclGroupEnd changed the current device";
  sync_world(w);
  for (int r = 0; r < n; r++) rank_check(c, rcs[r], r, n, w.comms[r]);
}

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32, ncclInt64,      ncclUint64,
                                 ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, (ncclRedOp_t)ncclNumOps};

// All-reduce: every type with every op (premul-sum included), odd count,
// every other one in place.
std::vector<Case> allreduce_grid(uint64_t seed) {
  std::vector<Case> cases;
  int v = 0;
  for (ncclDataType_t t : kTypes)
    for (ncclRedOp_t op : kOps) cases.push_back({Coll::AllReduce, t, op, 1001, v % 2 == 1, 0, seed + v}), v++;
  return cases;
}

// The other collectives: reduce-scatter and reduce with every type and op,
// the rest with every type; roots rotating, some calls empty, every other
// one in place where NCCL has in place.
std::vector<Case> other_grid(uint64_t seed, int n) {
  std::vector<Case> cases;
  int v = 0;
  for (int ci = (int)Coll::ReduceScatter; ci <= (int)Coll::SendRecv; ci++) {
    Coll coll = (Coll)ci;
    bool has_in_place = coll == Coll::ReduceScatter || coll == Coll::AllGather || coll == Coll::Broadcast ||
                        coll == Coll::Reduce;
    int nops = reduces(coll) ? 6 : 1;
    for (ncclDataType_t t : kTypes)
      for (int o = 0; o < nops; o++, v++) {
        size_t count = v % 7 == 0 ? 0 : 257 + v % 3;
        cases.push_back({coll, t, kOps[o], count, has_in_place && v % 2 == 1, v % n, seed + 1000 + v});
      }
  }
  return cases;
}

void run_grid(int n, const std::vector<Case> &cases) {
  World w;
  make_world(&w, n);
  if (::testing::Test::HasFatalFailure()) return;
  for (const Case &c : cases) {
    run_case(w, c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- the library itself ---------------------------------------------------------

TEST(NcclLayer, IsKolosLibraryUnderNcclsName) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);  // the toolkit header's: 2.28.9 = 22809
  EXPECT_EQ(v, NCCL_VERSION(2, 28, 9));
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);  // loaded by SONAME already
  ASSERT_NE(h, nullptr) << dlerror();
  Dl_info info;
  ASSERT_NE(dladdr(dlsym(h, "ncclAllReduce"), &info), 0);
  EXPECT_TRUE(contains(info.dli_fname, KOLO_NCCL_BUILD_DIR)) << info.dli_fname << " is not kolo's";
  EXPECT_EQ(dlsym(h, "koloAllReduce"), nullptr) << "kolo's own API must not leak from libnccl.so.2";
  EXPECT_NE(dlsym(h, "pncclAllReduce"), nullptr);
  dlclose(h);
}

TEST(NcclLayer, BadArgumentsNameWhatIsWrong) {
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_TRUE(contains(last(), "version is NULL")) << last();
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x1234;
  ncclComm_t comm = nullptr;
  ncclUniqueId id = {};
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_TRUE(contains(last(), "config.magic is 0x1234")) << last();
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument);
  EXPECT_TRUE(contains(last(), "config.blocking = 7")) << last();
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_STRNE(ncclGetErrorString(ncclRemoteError), "");
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
}

// ---- collectives ------------------------------------------------------------------

TEST(NcclLayer, OneRankAllReduce) {
  NEED_DEVICES(1);
  run_grid(1, {{Coll::AllReduce, ncclFloat32, ncclSum, 4097, false, 0, 7},
               {Coll::AllReduce, ncclInt64, ncclMax, 3, true, 0, 8}});
}

TEST(NcclLayer, AllReduceEveryTypeAndOp) {
  int n = device_count();
  NEED_DEVICES(2);
  run_grid(n, allreduce_grid(kt::base_seed() + 100));
}

TEST(NcclLayer, EveryOtherCollective) {
  int n = device_count();
  NEED_DEVICES(2);
  run_grid(n, other_grid(kt::base_seed() + 200, n));
}

// NCCL's ncclCommInitAll with several ranks per device (the model has 2):
// ranks 0, 1 on device 0, ranks 2, 3 on device 1.
TEST(NcclLayer, InitAllSeveralRanksPerDevice) {
  NEED_DEVICES(2);
  World w;
  make_world_all(&w, {0, 0, 1, 1});
  if (HasFatalFailure()) return;
  uint64_t seed = kt::base_seed() + 300;
  for (const Case &c : {Case{Coll::AllReduce, ncclBfloat16, ncclSum, 4099, false, 0, seed},
                        Case{Coll::AlltoAll, ncclInt32, ncclSum, 513, false, 0, seed + 1},
                        Case{Coll::ReduceScatter, ncclFloat8e4m3, (ncclRedOp_t)ncclNumOps, 300, true, 0, seed + 2},
                        Case{Coll::Gather, ncclFloat64, ncclSum, 77, false, 3, seed + 3}}) {
    run_case(w, c);
    if (HasFatalFailure()) return;
  }
}

// Buffers from ncclMemAlloc, registered with ncclCommRegister, as users of
// NCCL's registration pass them.
TEST(NcclLayer, MemAllocRegisteredBuffers) {
  int n = device_count();
  NEED_DEVICES(2);
  World w;
  make_world(&w, n);
  if (HasFatalFailure()) return;
  uint64_t seed = kt::base_seed() + 400;
  run_case(w, {Coll::AllReduce, ncclFloat32, ncclSum, 100003, false, 0, seed}, true);
  run_case(w, {Coll::AllGather, ncclUint8, ncclSum, 4097, true, 0, seed + 1}, true);
}

// ---- ranks as processes: NCCL_COMM_ID, non-blocking init, shrink ----------

// Until comm's non-blocking work is done; its final state.
ncclResult_t wait_ready(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 200000 && state == ncclInProgress; i++) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return state;
}

// One rank's part of a case in its own process (no group).
void run_rank(const Case &c, ncclComm_t comm, cudaStream_t st, int r, int n, int dev) {
  RankCase rc;
  rank_prepare(c, n, r, dev, comm, &rc);
  if (::testing::Test::HasFatalFailure()) return;
  ncclResult_t res = rank_issue(c, rc, r, n, comm, st);
  ASSERT_TRUE(res == ncclSuccess || res == ncclInProgress) << describe(c) << ": " << last(comm);
  ASSERT_EQ(wait_ready(comm), ncclSuccess) << describe(c) << ": " << last(comm);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  rank_check(c, rc, r, n, comm);
}

// The child's side (run by NcclProcs only): every process computes the same
// id from NCCL_COMM_ID; init is non-blocking; with NCCL_TEST_SHRINK the last
// rank dies after two calls and the others shrink it away.
TEST(NcclProcsChild, DISABLED_Rank) {
  const char *rs = getenv("NCCL_TEST_RANK"), *ns = getenv("NCCL_TEST_NRANKS");
  if (rs == nullptr || ns == nullptr) GTEST_SKIP() << "run by the NcclProcs tests only";
  int rank = atoi(rs), n = atoi(ns), ndev = device_count(), dev = ndev > 0 ? rank % ndev : 0;
  ASSERT_GT(ndev, 0);
  ASSERT_EQ(cudaSetDevice(dev), cudaSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << last();
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t res = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
  ASSERT_TRUE(res == ncclInProgress || res == ncclSuccess) << ncclGetErrorString(res) << ": " << last();
  ASSERT_EQ(wait_ready(comm), ncclSuccess) << last(comm);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  uint64_t seed = kt::base_seed() + 500;
  run_rank({Coll::AllReduce, ncclFloat32, (ncclRedOp_t)ncclNumOps, 70001, false, 0, seed}, comm, st, rank, n, dev);
  run_rank({Coll::AlltoAll, ncclInt8, ncclSum, 1001, false, 0, seed + 1}, comm, st, rank, n, dev);
  if (getenv("NCCL_TEST_SHRINK") != nullptr) {
    if (rank == n - 1) raise(SIGKILL);
    int gone = n - 1;
    ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
    blocking.blocking = 1;
    ncclComm_t small = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, &gone, 1, &small, &blocking, NCCL_SHRINK_DEFAULT), ncclSuccess) << last(comm);
    int count = -1;
    EXPECT_EQ(ncclCommCount(small, &count), ncclSuccess);
    EXPECT_EQ(count, n - 1);
    run_rank({Coll::AllReduce, ncclFloat64, ncclMax, 4097, true, 0, seed + 2}, small, st, rank, n - 1, dev);
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess) << last();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess) << last();
  } else {
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << last();
  }
  cudaStreamDestroy(st);
}

// What a child wrote to its output file, from the start.
std::string output_of(FILE *f) {
  std::string out;
  char buf[4096];
  size_t k;
  rewind(f);
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, k);
  return out;
}

// A child that exits 0 may have run nothing (its filter matched no test,
// or the helper test skipped): it passes only if gtest says it ran one.
bool ran_one_test(const std::string &out) {
  return out.find("[  PASSED  ] 1 test.") != std::string::npos && out.find("[  SKIPPED ]") == std::string::npos;
}

// n processes of this binary running NcclProcsChild.DISABLED_Rank; each must
// pass, having run that test (with shrink: the last one dies by SIGKILL),
// within 120 s.
void run_procs(int n, bool shrink) {
  int port = kt_free_port();
  ASSERT_GT(port, 0);
  std::vector<pid_t> pids;
  std::vector<std::unique_ptr<FILE, int (*)(FILE *)>> outs;
  for (int r = 0; r < n; r++) {
    outs.emplace_back(tmpfile(), fclose);
    ASSERT_NE(outs.back().get(), nullptr);
    const int out_fd = fileno(outs.back().get());
    std::vector<std::string> env = {"NCCL_COMM_ID=127.0.0.1:" + std::to_string(port),
                                    "KOLO_SECRET=a1b2c3d4e5f60718293a4b5c6d7e8f90", "KOLO_TIMEOUT_MS=20000",
                                    "NCCL_TEST_RANK=" + std::to_string(r), "NCCL_TEST_NRANKS=" + std::to_string(n)};
    if (shrink) env.push_back("NCCL_TEST_SHRINK=1");
    // A model device per process (rank % devices), as NCCL wants: a GPU
    // shared by processes runs their kernels by time slices, and NCCL and
    // kolo refuse it without MPS.  (Ignored on a GPU.)  Before the
    // inherited variables: the first of a name wins.
    env.push_back("KOLO_SIM_GPUS=" + std::to_string(std::max(n, 2)));
    for (char **e = environ; *e; e++)
      if (strncmp(*e, "NCCL_", 5) != 0) env.push_back(*e);
    std::vector<char *> envp;
    for (std::string &e : env) envp.push_back(&e[0]);
    envp.push_back(nullptr);
    char exe[] = "/proc/self/exe", f[] = "--gtest_filter=NcclProcsChild.DISABLED_Rank",
         d[] = "--gtest_also_run_disabled_tests";
    char *argv[] = {exe, f, d, nullptr};
    pid_t pid = fork();
    if (pid == 0) {
      dup2(out_fd, 1);
      dup2(out_fd, 2);
      execve(exe, argv, envp.data());
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  std::vector<int> status(n, 0);
  std::vector<bool> done(n, false);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int left = n; left > 0 && std::chrono::steady_clock::now() < deadline;) {
    for (int r = 0; r < n; r++) {
      int st = 0;
      if (!done[r] && waitpid(pids[r], &st, WNOHANG) == pids[r]) done[r] = true, status[r] = st, left--;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < n; r++) {
    if (!done[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], &status[r], 0);
      ADD_FAILURE() << "rank " << r << " did not finish within 120 s";
    } else if (shrink && r == n - 1) {
      EXPECT_TRUE(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL) << "rank " << r << ": " << status[r];
    } else {
      const std::string out = output_of(outs[r].get());
      EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0) << "rank " << r << ": status " << status[r]
                                                                        << "; its output:\n" << out;
      EXPECT_TRUE(ran_one_test(out)) << "rank " << r << " did not run its test; its output:\n" << out;
    }
  }
}

TEST(NcclProcs, NcclCommIdAndNonBlockingInit) {
  NEED_DEVICES(1);
  run_procs(3, false);
}

TEST(NcclProcs, ShrinkAfterARankIsKilled) {
  NEED_DEVICES(1);
  run_procs(3, true);
}

// ---- ncclConfig_t as NCCL reads it: by size, magic and version ---------------------

// NCCL 2.14's struct ended after `blocking`; a newer one carries fields
// this header does not know.  Both initialize, and the comm works.
TEST(NcclLayer, OlderAndNewerConfigStructs) {
  NEED_DEVICES(1);
  ncclConfig_t old_cfg = NCCL_CONFIG_INITIALIZER;
  old_cfg.size = offsetof(ncclConfig_t, blocking) + sizeof(int);
  old_cfg.version = NCCL_VERSION(2, 14, 0);
  old_cfg.cgaClusterSize = 12345;  // beyond its size: must not be read
  struct {
    ncclConfig_t c;
    int later[8];
  } new_cfg = {NCCL_CONFIG_INITIALIZER, {1, 2, 3, 4, 5, 6, 7, 8}};
  new_cfg.c.size = sizeof new_cfg;
  new_cfg.c.version = NCCL_VERSION(2, 31, 0);
  for (ncclConfig_t *cfg : {&old_cfg, &new_cfg.c}) {
    World w;
    make_world(&w, 1, cfg);
    if (HasFatalFailure()) return;
    run_case(w, {Coll::AllReduce, ncclFloat32, ncclSum, 100, false, 0, 9});
  }
}

// config.blocking = 0: init returns ncclInProgress (or success), and
// ncclCommGetAsyncError reaches ncclSuccess.
TEST(NcclLayer, NonBlockingInit) {
  NEED_DEVICES(1);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  World w;
  make_world(&w, 1, &cfg);
  if (HasFatalFailure()) return;
  ASSERT_EQ(wait_ready(w.comms[0]), ncclSuccess) << last(w.comms[0]);
  run_case(w, {Coll::AllReduce, ncclFloat32, ncclSum, 100, false, 0, 10});
}

// ---- the rest of the API -------------------------------------------------------------

TEST(NcclLayer, QueriesSplitAndRegisteredBuffers) {
  int n = device_count();
  NEED_DEVICES(2);
  World w;
  make_world(&w, n);
  if (HasFatalFailure()) return;
  for (int r = 0; r < n; r++) {
    int count = -1, rank = -1, dev = -1;
    EXPECT_EQ(ncclCommCount(w.comms[r], &count), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(w.comms[r], &rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(w.comms[r], &dev), ncclSuccess);
    EXPECT_EQ(count, n);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(dev, r);
  }
  // ncclMemAlloc'd and registered memory; a second deregistration is refused.
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  void *buf = nullptr, *handle = nullptr;
  ASSERT_EQ(ncclMemAlloc(&buf, 1 << 16), ncclSuccess) << last();
  ASSERT_EQ(ncclCommRegister(w.comms[0], buf, 1 << 16, &handle), ncclSuccess) << last(w.comms[0]);
  EXPECT_EQ(ncclCommDeregister(w.comms[0], handle), ncclSuccess) << last(w.comms[0]);
  EXPECT_NE(ncclCommDeregister(w.comms[0], handle), ncclSuccess);
  EXPECT_FALSE(last(w.comms[0]).empty());
  EXPECT_EQ(ncclMemFree(buf), ncclSuccess) << last();
  // Split: every rank its own communicator of one.
  std::vector<ncclComm_t> alone(n, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ncclCommSplit(w.comms[r], r, 0, &alone[r], nullptr);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << last();
  for (int r = 0; r < n; r++) {
    int count = -1;
    ASSERT_NE(alone[r], nullptr) << last(w.comms[r]);
    EXPECT_EQ(ncclCommCount(alone[r], &count), ncclSuccess);
    EXPECT_EQ(count, 1);
    cudaSetDevice(r);
    EXPECT_EQ(ncclCommDestroy(alone[r]), ncclSuccess);
  }
}

// kolo's timeout (a peer that never came) is NCCL's remote error, with
// kolo's sentence in ncclGetLastError.
TEST(NcclLayer, PeerThatNeverComesIsARemoteError) {
  NEED_DEVICES(1);
  setenv("KOLO_TIMEOUT_MS", "700", 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclResult_t res = ncclCommInitRank(&comm, 2, id, 0);
  unsetenv("KOLO_TIMEOUT_MS");
  EXPECT_EQ(res, ncclRemoteError);
  EXPECT_TRUE(contains(last(), "rank 1 of 2 did not join")) << last();
  if (comm) ncclCommDestroy(comm);
}

// What the group simulation estimates: a positive time, nothing run.
TEST(NcclLayer, GroupSimulateEnd) {
  NEED_DEVICES(2);
  World w;
  make_world(&w, 2);
  if (HasFatalFailure()) return;
  DevBuf b;
  dev_alloc(&b, 0, 4096, 0);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b.ptr(), b.ptr(), 1024, ncclFloat32, ncclSum, w.comms[0], w.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << last();
  EXPECT_GT(sim.estimatedTime, 0.0f);
  std::vector<unsigned char> got = from_dev(b, 4);
  EXPECT_EQ(got[0], 0xa5) << "a simulated group must not run";
}

}  // namespace
