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
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "util/coll_ref.h"

namespace {

using kt::Expected;

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

#define NEED_DEVICES(n)                                                          \
  do {                                                                           \
    if (device_count() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices"; \
  } while (0)

std::string last(ncclComm_t c = nullptr) { return ncclGetLastError(c); }

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

// ---- communicators: ranks 0..n-1 on devices 0..n-1, from one thread -------

struct World {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  ~World() {
    for (size_t r = 0; r < comms.size(); r++) {
      cudaSetDevice((int)r);
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
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << last();
}

void sync_world(const World &w) {
  for (size_t r = 0; r < w.comms.size(); r++) {
    ASSERT_EQ(cudaSetDevice((int)r), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(w.streams[r]), cudaSuccess);
  }
}

// ---- device buffers ------------------------------------------------------------

struct DevBuf {
  int dev = 0;
  char *base = nullptr;
  size_t bytes = 0, offset = 0;  // offset: an unaligned start
  void *ptr() const { return base + offset; }
  ~DevBuf() {
    if (base) cudaSetDevice(dev), cudaFree(base);
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

void make_op(const Case &c, ncclComm_t comm, int rank, RankOp *o) {
  o->op = c.op;
  if (!(reduces(c.coll) && c.op == (ncclRedOp_t)ncclNumOps)) return;
  o->scalar_bits = kt::premul_scalar_bits(c.seed, rank, (koloDataType_t)c.type);
  void *scalar = &o->scalar_bits;  // little-endian: the low bytes are the scalar
  ncclScalarResidence_t where = rank % 2 ? ncclScalarDevice : ncclScalarHostImmediate;
  if (where == ncclScalarDevice) {
    dev_alloc(&o->scalar_dev, rank, 8, 0);
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

void run_case(World &w, const Case &c) {
  int n = (int)w.comms.size();
  size_t es = kt::type_size((koloDataType_t)c.type);
  std::vector<DevBuf> send(n), recv(n);
  std::vector<RankOp> ops(n);
  for (int r = 0; r < n; r++) {
    size_t ns, nr;
    sizes(c, n, &ns, &nr);
    size_t unaligned = (r + c.seed) % 2 ? es : 0;  // odd ranks (or seeds) start one element in
    dev_alloc(&send[r], r, (c.in_place ? std::max(ns, nr) : ns) * es, unaligned);
    if (!c.in_place) dev_alloc(&recv[r], r, nr * es, unaligned);
    DevBuf at = {};  // in-place all-gather: the input is the rank's block
    at.dev = r, at.base = send[r].base, at.offset = send[r].offset;
    if (c.in_place && c.coll == Coll::AllGather) at.offset += in_place_offset(c, r);
    to_dev(at, input_of(c, r, ns));
    at.base = nullptr;  // send[r]'s
    make_op(c, w.comms[r], r, &ops[r]);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    void *d = c.in_place ? (char *)send[r].ptr() : recv[r].ptr();
    const void *s = c.in_place ? (char *)send[r].ptr() + in_place_offset(c, r) : send[r].ptr();
    if (c.in_place && c.coll == Coll::ReduceScatter) s = send[r].ptr(), d = (char *)send[r].ptr() + in_place_offset(c, r);
    ASSERT_EQ(issue(c, s, d, ops[r].op, r, n, w.comms[r], w.streams[r]), ncclSuccess) << describe(c) << ": " << last(w.comms[r]);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << describe(c) << ": " << last();
  sync_world(w);
  for (int r = 0; r < n; r++) {
    Expected e;
    size_t first;
    if (!expected_for(c, r, n, &e, &first)) continue;
    size_t nr, ns;
    sizes(c, n, &ns, &nr);
    const DevBuf &out = c.in_place ? send[r] : recv[r];
    DevBuf view = {};
    view.dev = out.dev, view.base = out.base, view.offset = out.offset;
    if (c.in_place && c.coll == Coll::ReduceScatter) view.offset += in_place_offset(c, r);
    std::vector<unsigned char> got = from_dev(view, nr * es);
    view.base = nullptr;  // not ours to free
    EXPECT_EQ(kt::compare(got.data(), e, first, nr), "") << describe(c) << ", rank " << r << " of " << n;
  }
  for (int r = 0; r < n && reduces(c.coll) && c.op == (ncclRedOp_t)ncclNumOps; r++)
      EXPECT_EQ(ncclRedOpDestroy(ops[r].op, w.comms[r]), ncclSuccess) << last(w.comms[r]);
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

// The other collectives: each type once per collective (ops rotating), an
// empty call and an in-place one where NCCL has in place.
std::vector<Case> other_grid(uint64_t seed, int n) {
  std::vector<Case> cases;
  int v = 0;
  for (int ci = (int)Coll::ReduceScatter; ci <= (int)Coll::SendRecv; ci++) {
    Coll coll = (Coll)ci;
    bool has_in_place = coll == Coll::ReduceScatter || coll == Coll::AllGather || coll == Coll::Broadcast ||
                        coll == Coll::Reduce;
    for (ncclDataType_t t : kTypes) {
      size_t count = v % 5 == 0 ? 0 : 257 + v % 3;
      cases.push_back({coll, t, kOps[v % 6], count, has_in_place && v % 3 == 1, v % n, seed + 1000 + v});
      v++;
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
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 100000 && state == ncclInProgress; i++) ASSERT_EQ(ncclCommGetAsyncError(w.comms[0], &state), ncclSuccess);
  ASSERT_EQ(state, ncclSuccess) << last(w.comms[0]);
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
  NEED_DEVICES(1);
  World w;
  make_world(&w, 1);
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
