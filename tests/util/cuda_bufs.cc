// cuda_bufs.cc - see cuda_bufs.h.
#include "util/cuda_bufs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace kt {

std::string cuda_unavailable() {
  static std::once_flag once;
  static std::string why;
  std::call_once(once, [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
      cudaGetLastError();  // clear it
    } else if (n <= 0) {
      why = "cudaGetDeviceCount() = 0";
    }
  });
  return why;
}

std::string cuda_text(const char *what, cudaError_t e) {
  if (e == cudaSuccess) return "";
  return std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

// ---- arena ---------------------------------------------------------------------

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

DevArena::~DevArena() { release(); }

std::string DevArena::reserve(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 256), 256);
  if (bytes <= cap_) return "";
  release();
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_text(("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str(), e);
  }
  base_ = static_cast<char *>(p);
  cap_ = bytes;
  used_ = 0;
  return "";
}

void DevArena::release() {
  if (base_ && freeable) cudaFree(base_);
  base_ = nullptr;
  cap_ = used_ = 0;
}

char *DevArena::take(size_t bytes) {
  size_t need = round_up(bytes, 256);
  if (base_ == nullptr || used_ + need > cap_) return nullptr;
  char *p = base_ + used_;
  used_ += need;
  return p;
}

// ---- layout --------------------------------------------------------------------

size_t dev_region_bytes(size_t bytes) { return round_up(kDevGuard + 64 + bytes + kDevGuard, 256); }

std::string dev_buf_place(DevArena *arena, size_t bytes, size_t off_bytes, DevBuf *b) {
  *b = DevBuf();
  if (off_bytes >= 64) return "internal: misalignment of " + std::to_string(off_bytes) + " bytes";
  b->bytes = bytes;
  b->region_bytes = dev_region_bytes(bytes);
  b->data_off = kDevGuard + off_bytes;
  b->region = arena->take(b->region_bytes);
  if (b->region == nullptr) {
    *b = DevBuf();
    return "internal: device arena of " + std::to_string(arena->capacity()) + " bytes is too small";
  }
  return "";
}

std::string dev_buf_upload(const DevBuf &b, const void *host, unsigned char poison, cudaStream_t s) {
  if (b.region == nullptr) return "";
  cudaError_t e = cudaMemsetAsync(b.region, poison, b.region_bytes, s);
  if (e != cudaSuccess) return cuda_text("cudaMemsetAsync (poison)", e);
  if (b.bytes == 0 || host == nullptr) return "";
  e = cudaMemcpyAsync(b.data(), host, b.bytes, cudaMemcpyHostToDevice, s);
  return cuda_text("cudaMemcpyAsync (upload)", e);
}

std::string dev_buf_download(const DevBuf &b, std::vector<unsigned char> *out, cudaStream_t s) {
  out->clear();
  if (b.region == nullptr) return "";
  out->resize(b.region_bytes);
  cudaError_t e = cudaMemcpyAsync(out->data(), b.region, b.region_bytes, cudaMemcpyDeviceToHost, s);
  return cuda_text("cudaMemcpyAsync (download)", e);
}

std::string dev_buf_guards(const char *what, const DevBuf &b, const std::vector<unsigned char> &region,
                           unsigned char poison) {
  if (b.region == nullptr) return "";
  if (region.size() != b.region_bytes) return std::string(what) + ": internal: region not downloaded";
  const size_t start = b.data_off, end = b.data_off + b.bytes;
  for (size_t i = 0; i < b.region_bytes; i++) {
    if (i >= start && i < end) continue;
    if (region[i] == poison) continue;
    std::string s = std::string(what) + " (device): byte ";
    if (i < start) s += std::to_string(start - i) + " before the buffer was written";
    else s += std::to_string(i - end) + " after the end of the buffer was written";
    return s;
  }
  return "";
}

// Elements of misalignment of rank's buffer `which` (0: a, 1: b).
static size_t offset_elems(const CollCase &c, int rank, int which) {
  return c.misalign ? (size_t)((c.misalign + rank + 3 * which) % 8) : 0;
}

// Arena bytes of a premul-sum's device scalar.
constexpr size_t kScalarBytes = 256;

size_t dev_case_bytes(const CollCase &c) {
  const size_t n = (size_t)c.nranks, cnt = c.count, esz = type_size(c.type);
  if (is_premul(c)) {
    CollCase plain = c;
    plain.op = koloSum;
    return kScalarBytes + dev_case_bytes(plain);
  }
  if (c.coll == Coll::AlltoAll || c.coll == Coll::Gather || c.coll == Coll::Scatter)
    return 2 * dev_region_bytes(n * cnt * esz);  // at most two buffers of n blocks
  if (cnt == 0 && !c.in_place) return 0;
  const bool spread = c.coll == Coll::ReduceScatter || c.coll == Coll::AllGather;
  if (c.in_place) return dev_region_bytes((spread ? n * cnt : cnt) * esz);
  size_t in = c.coll == Coll::ReduceScatter ? n * cnt : cnt;
  size_t out = c.coll == Coll::AllGather ? n * cnt : cnt;
  return dev_region_bytes(in * esz) + dev_region_bytes(out * esz);
}

size_t dev_max_case_bytes(const std::vector<CollCase> &cases) {
  size_t m = 0;
  for (const CollCase &c : cases) m = std::max(m, dev_case_bytes(c));
  return m;
}

size_t dev_sum_case_bytes(const std::vector<CollCase> &cases) {
  size_t s = 0;
  for (const CollCase &c : cases) s += dev_case_bytes(c);
  return s;
}

// ---- one rank's call -------------------------------------------------------------

// Device address of host pointer hp (inside d->host.a or .b), or nullptr.
static char *to_device(const DevRankBufs &d, const void *hp) {
  if (hp == nullptr) return nullptr;
  const char *p = static_cast<const char *>(hp);
  const GuardedBuf *hb[2] = {&d.host.a, &d.host.b};
  const DevBuf *db[2] = {&d.a, &d.b};
  for (int k = 0; k < 2; k++) {
    const char *h = hb[k]->data();
    if (db[k]->region == nullptr || h == nullptr) continue;
    if (p >= h && p <= h + hb[k]->bytes()) return db[k]->data() + (p - h);
  }
  return nullptr;
}

// Both buffers, and a premul-sum's scalar where the case has one.
static std::string upload(const CollCase &c, int rank, cudaStream_t s, DevRankBufs *d) {
  std::string e = dev_buf_upload(d->a, d->host.a.data(), d->poison, s);
  if (e.empty()) e = dev_buf_upload(d->b, d->host.b.data(), d->poison, s);
  if (!e.empty() || d->scalar == nullptr) return e;
  d->host.scalar = premul_scalar_bits(c.seed, rank, c.type);
  return cuda_text("cudaMemcpyAsync (scalar)",
                   cudaMemcpyAsync(d->scalar, &d->host.scalar, type_size(c.type), cudaMemcpyHostToDevice, s));
}

// Sets send / recv from the host pointers; "" or why not.
static std::string map_pointers(DevRankBufs *d) {
  d->send = to_device(*d, d->host.send);
  d->recv = to_device(*d, d->host.recv);
  if ((d->host.send != nullptr) != (d->send != nullptr) ||
      (d->host.recv != nullptr) != (d->recv != nullptr))
    return "internal: a host buffer pointer has no device twin";
  return "";
}

// Whether host pointer p lies in g's payload (its end included: an empty
// buffer's pointer).
static bool points_into(const GuardedBuf &g, const void *p) {
  const char *h = g.data(), *q = static_cast<const char *>(p);
  return p != nullptr && h != nullptr && q >= h && q <= h + g.bytes();
}

std::string dev_prepare(const CollCase &c, int rank, DevArena *arena, cudaStream_t stream,
                        DevRankBufs *d) {
  d->host_case = c;
  d->host_case.misalign = 0;
  prepare(d->host_case, rank, &d->host);
  d->poison = poison_of(c);
  d->a = DevBuf();
  d->b = DevBuf();
  const size_t esz = type_size(c.type);
  // a device twin for each host buffer a call pointer lies in
  const RankBufs &h = d->host;
  std::string err;
  if (points_into(h.a, h.send) || points_into(h.a, h.recv))
    err = dev_buf_place(arena, h.a.bytes(), offset_elems(c, rank, 0) * esz, &d->a);
  if (err.empty() && (points_into(h.b, h.send) || points_into(h.b, h.recv)))
    err = dev_buf_place(arena, h.b.bytes(), offset_elems(c, rank, 1) * esz, &d->b);
  if (!err.empty()) return err;
  d->scalar = nullptr;
  if (is_premul(c) && (d->scalar = arena->take(kScalarBytes)) == nullptr)
    return "internal: device arena too small for the scalar";
  err = map_pointers(d);
  if (!err.empty()) return err;
  return upload(c, rank, stream, d);
}

std::string dev_reprepare(const CollCase &c, int rank, cudaStream_t stream, DevRankBufs *d) {
  const void *send = d->send;
  void *recv = d->recv;
  d->host_case = c;
  d->host_case.misalign = 0;
  prepare(d->host_case, rank, &d->host);
  d->poison = poison_of(c);
  if (d->host.a.bytes() != d->a.bytes || (d->b.region && d->host.b.bytes() != d->b.bytes))
    return "internal: dev_reprepare with a case of another shape";
  std::string err = map_pointers(d);
  if (!err.empty()) return err;
  if (d->send != send || d->recv != recv) return "internal: dev_reprepare moved the buffers";
  return upload(c, rank, stream, d);
}

static koloResult_t dev_issue_call(const CollCase &c, int rank, const DevRankBufs &d, koloComm_t comm,
                                   cudaStream_t stream);

koloResult_t dev_issue(const CollCase &c, int rank, const DevRankBufs &d, koloComm_t comm,
                       cudaStream_t stream) {
  const uint64_t immediate = premul_scalar_bits(c.seed, rank, c.type);
  const bool on_device = is_premul(c) && premul_residence(c) == koloScalarDevice;
  koloRedOp_t op;
  koloResult_t r = make_call_op(c, on_device ? static_cast<const void *>(d.scalar) : &immediate, comm, &op);
  if (r != koloSuccess) return r;
  CollCase call = c;
  call.op = op;
  r = dev_issue_call(call, rank, d, comm, stream);
  koloResult_t f = free_call_op(c, op, comm);
  return r != koloSuccess ? r : f;
}

static koloResult_t dev_issue_call(const CollCase &c, int rank, const DevRankBufs &d, koloComm_t comm,
                                   cudaStream_t stream) {
  const void *send = d.send;
  void *recv = d.recv;
  switch (c.coll) {
  case Coll::AllReduce: return koloAllReduce(send, recv, c.count, c.type, c.op, comm, stream);
  case Coll::ReduceScatter:
    return koloReduceScatter(send, recv, c.count, c.type, c.op, comm, stream);
  case Coll::AllGather: return koloAllGather(send, recv, c.count, c.type, comm, stream);
  case Coll::Broadcast: return koloBroadcast(send, recv, c.count, c.type, c.root, comm, stream);
  case Coll::Reduce: return koloReduce(send, recv, c.count, c.type, c.op, c.root, comm, stream);
  case Coll::SendRecv: {
    int to = (rank + c.root) % c.nranks, from = (rank - c.root + c.nranks) % c.nranks;
    koloResult_t r = koloGroupStart();
    if (r != koloSuccess) return r;
    koloResult_t r1 = koloSend(send, c.count, c.type, to, comm, stream);
    koloResult_t r2 = koloRecv(recv, c.count, c.type, from, comm, stream);
    r = koloGroupEnd();
    if (r1 != koloSuccess) return r1;
    if (r2 != koloSuccess) return r2;
    return r;
  }
  case Coll::AlltoAll: return koloAlltoAll(send, recv, c.count, c.type, comm, stream);
  case Coll::Gather: return koloGather(send, recv, c.count, c.type, c.root, comm, stream);
  case Coll::Scatter: return koloScatter(send, recv, c.count, c.type, c.root, comm, stream);
  case Coll::Bcast: return koloBcast(recv, c.count, c.type, c.root, comm, stream);
  }
  return koloInternalError;
}

std::string dev_check(const CollCase &c, int rank, DevRankBufs *d, cudaStream_t stream,
                      const Expected &e) {
  GuardedBuf *hb[2] = {&d->host.a, &d->host.b};
  const DevBuf *db[2] = {&d->a, &d->b};
  const char *names[2] = {c.in_place ? "buffer" : "sendbuff", "recvbuff"};
  std::vector<unsigned char> back[2];
  for (int k = 0; k < 2; k++) {
    std::string err = dev_buf_download(*db[k], &back[k], stream);
    if (!err.empty()) return err;
  }
  cudaError_t err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return cuda_text("cudaStreamSynchronize (download)", err);
  std::string out;
  for (int k = 0; k < 2; k++) {
    if (db[k]->region == nullptr) continue;
    std::string g = dev_buf_guards(names[k], *db[k], back[k], d->poison);
    if (!g.empty()) out += (out.empty() ? "" : "; ") + g;
    if (db[k]->bytes) std::memcpy(hb[k]->data(), back[k].data() + db[k]->data_off, db[k]->bytes);
  }
  std::string r = check(d->host_case, rank, d->host, e);
  if (!r.empty()) out += (out.empty() ? "" : "; ") + r;
  return out;
}

// ---- streams and errors ---------------------------------------------------------

std::string wait_stream(cudaStream_t s, double timeout_ms, double *ms, bool *still_busy) {
  const double t0 = now_ms();
  if (still_busy) *still_busy = false;
  for (int polls = 0;; polls++) {
    cudaError_t e = cudaStreamQuery(s);
    double dt = now_ms() - t0;
    if (ms) *ms = dt;
    if (e == cudaSuccess) return "";
    if (e != cudaErrorNotReady) return cuda_text("the stream failed", e);
    if (dt > timeout_ms) {
      if (still_busy) *still_busy = true;
      return "the stream was still busy after " + std::to_string((long)dt) +
             " ms (a kernel that never ends)";
    }
    if (polls < 200) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 500));
  }
}

std::string async_error_text(koloComm_t comm) {
  koloResult_t async = koloSuccess;
  koloResult_t r = koloCommGetAsyncError(comm, &async);
  if (r != koloSuccess) return result_text("koloCommGetAsyncError", r, comm);
  if (async == koloSuccess) return "";
  std::string s = std::string("koloCommGetAsyncError reports ") + koloGetErrorString(async);
  const char *last = koloGetLastError(comm);
  if (last && *last) s += std::string(": ") + last;
  return s;
}

// ---- ranks as threads on one GPU -------------------------------------------------

// The inits return at once; koloGroupEnd runs them on threads of their own,
// each on the device that was current when its init was called (NCCL's
// loop: cudaSetDevice, then InitRank; here device 0 is current in between
// and at koloGroupEnd, so that a device picked later would show).
void CudaWorld::init_group(const koloUniqueId &id, koloConfig_t cfg) {
  const int n = nranks();
  koloGroupStart();
  for (int r = 0; r < n && init_result == koloSuccess; r++) {
    cudaSetDevice(dev);
    init_result = koloCommInitRankConfig(&comms[r], n, id, r, &cfg);
    cudaSetDevice(0);
    if (init_result != koloSuccess)
      init_error = "koloCommInitRankConfig in a group, rank " + std::to_string(r) + ": " + koloGetLastError(nullptr);
  }
  koloResult_t end = koloGroupEnd();
  cudaSetDevice(dev);
  if (init_result == koloSuccess && end != koloSuccess) {
    init_result = end;
    init_error = std::string("koloGroupEnd: ") + koloGetErrorString(end) + ": " + koloGetLastError(nullptr);
  }
  if (init_result == koloSuccess) return;
  for (koloComm_t &c : comms)
    if (c) koloCommDestroy(c), c = nullptr;
}

CudaWorld::CudaWorld(int nranks, Init how, const koloConfig_t *config, int device)
    : dev(device),
      comms((size_t)nranks, nullptr),
      streams((size_t)nranks, nullptr),
      arenas((size_t)nranks),
      pool(nranks) {
  cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    init_error = cuda_text("cudaSetDevice", e);
    return;
  }
  for (int r = 0; r < nranks; r++) {
    e = cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      streams[r] = nullptr;
      init_error = cuda_text("cudaStreamCreateWithFlags", e);
      return;
    }
  }
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  if (config) cfg = *config;
  else cfg.memory = koloMemCuda;
  const bool plain = how == Init::kInitAllPlain || how == Init::kInitRankPlain;
  if (how == Init::kInitAll || how == Init::kInitAllPlain) {
    std::vector<int> devlist((size_t)nranks, dev);
    init_result = plain ? koloCommInitAll(comms.data(), nranks, devlist.data())
                        : koloCommInitAllConfig(comms.data(), nranks, devlist.data(), &cfg);
    if (init_result != koloSuccess) {
      init_error = std::string(plain ? "koloCommInitAll: " : "koloCommInitAllConfig: ") +
                   koloGetErrorString(init_result) + ": " + koloGetLastError(nullptr);
      comms.assign((size_t)nranks, nullptr);
    }
    return;
  }
  if (!config && how != Init::kGroupOneThread) cfg.cudaDev = dev;
  koloUniqueId id;
  init_result = koloGetUniqueId(&id);
  if (init_result != koloSuccess) {
    init_error = std::string("koloGetUniqueId: ") + koloGetLastError(nullptr);
    return;
  }
  if (how == Init::kGroupOneThread) {
    init_group(id, cfg);
    return;
  }
  std::vector<koloResult_t> res((size_t)nranks, koloSuccess);
  std::vector<std::string> errs((size_t)nranks);
  pool.run([&](int r) {
    cudaSetDevice(dev);
    koloConfig_t mine = cfg;
    res[r] = plain ? koloCommInitRank(&comms[r], nranks, id, r)
                   : koloCommInitRankConfig(&comms[r], nranks, id, r, &mine);
    if (res[r] != koloSuccess) {
      comms[r] = nullptr;
      errs[r] = koloGetLastError(nullptr);
    }
  });
  for (int r = 0; r < nranks; r++) {
    if (res[r] == koloSuccess || !init_error.empty()) continue;
    init_result = res[r];
    init_error = std::string(plain ? "koloCommInitRank" : "koloCommInitRankConfig") + ": rank " +
                 std::to_string(r) + ": " +
                 koloGetErrorString(res[r]) + ": " + errs[r];
  }
}

CudaWorld::~CudaWorld() {
  for (koloComm_t &c : comms) {
    if (c == nullptr) continue;
    if (wedged) koloCommAbort(c);  // stops kernels that still spin
    else koloCommDestroy(c);
    c = nullptr;
  }
  for (size_t r = 0; r < streams.size(); r++) {
    if (streams[r] == nullptr) continue;
    bool busy = false;
    if (wedged) wait_stream(streams[r], 10000, nullptr, &busy);
    if (busy) {
      std::fprintf(stderr, "CudaWorld: rank %zu's stream never finished: its device memory is leaked\n", r);
      arenas[r].freeable = false;
    }
    cudaStreamDestroy(streams[r]);
  }
  for (DevArena &a : arenas) a.release();
}

std::string CudaWorld::reserve(size_t bytes) {
  for (size_t r = 0; r < arenas.size(); r++) {
    std::string e = arenas[r].reserve(bytes);
    if (!e.empty()) return "rank " + std::to_string(r) + ": " + e;
  }
  return "";
}

void CudaWorld::wedge() { wedged = true; }

const char *issue_name(Issue how) { return how == Issue::kPerThread ? "threads" : "onethread"; }

GridReport run_cuda_grid(CudaWorld &w, const std::vector<CollCase> &cases, Issue how,
                         size_t max_failures) {
  GridReport rep;
  const int n = w.nranks();
  std::string err = w.reserve(dev_max_case_bytes(cases));
  if (!err.empty()) {
    rep.failed_cases = 1;
    rep.call_failed = true;
    rep.failures.push_back(err);
    return rep;
  }
  std::vector<std::string> errs((size_t)n);
  std::vector<char> call_failed((size_t)n), hung((size_t)n);
  std::vector<std::unique_ptr<DevRankBufs>> bufs((size_t)n);
  Expected e;
  const bool verbose = std::getenv("KOLO_TEST_VERBOSE") != nullptr;
  for (const CollCase &c : cases) {
    const double t0 = now_ms();
    expected_init(c, &e);
    w.pool.run([&](int r) {  // the ranks' threads share the work
      size_t per = (e.n + (size_t)n - 1) / (size_t)n, b = std::min(e.n, per * (size_t)r);
      expected_fill(c, &e, b, std::min(e.n, b + per));
    });
    // prepare + upload; per-thread: the call too
    w.pool.run([&](int r) {
      cudaSetDevice(w.dev);
      errs[r].clear();
      call_failed[r] = 0;
      hung[r] = 0;
      bufs[r].reset(new DevRankBufs);
      w.arenas[r].reset();
      errs[r] = dev_prepare(c, r, &w.arenas[r], w.streams[r], bufs[r].get());
      if (!errs[r].empty()) {
        call_failed[r] = 1;
        return;
      }
      if (how != Issue::kPerThread) return;
      koloResult_t res = dev_issue(c, r, *bufs[r], w.comms[r], w.streams[r]);
      if (res != koloSuccess) {
        errs[r] = result_text(coll_name(c.coll), res, w.comms[r]);
        call_failed[r] = 1;
      }
    });
    if (how == Issue::kOneThread) {
      bool prepared = std::none_of(call_failed.begin(), call_failed.end(), [](char f) { return f != 0; });
      if (!prepared) {
        for (int r = 0; r < n; r++)
          if (!call_failed[r]) {
            errs[r] = "not issued: another rank's buffers could not be prepared";
            call_failed[r] = 1;
          }
      } else {
        cudaSetDevice(w.dev);
        koloResult_t res = koloGroupStart();
        if (res != koloSuccess) {
          errs[0] = result_text("koloGroupStart", res, nullptr);
          call_failed[0] = 1;
        } else {
          for (int r = 0; r < n; r++) {
            koloResult_t rr = dev_issue(c, r, *bufs[r], w.comms[r], w.streams[r]);
            if (rr != koloSuccess) {
              errs[r] = result_text(coll_name(c.coll), rr, w.comms[r]);
              call_failed[r] = 1;
            }
          }
          res = koloGroupEnd();
          if (res != koloSuccess) {
            errs[0] += (errs[0].empty() ? "" : "; ") + result_text("koloGroupEnd", res, w.comms[0]);
            call_failed[0] = 1;
          }
        }
      }
    }
    const double t1 = now_ms();
    // wait, download, check
    w.pool.run([&](int r) {
      cudaSetDevice(w.dev);
      bool busy = false;
      std::string werr = wait_stream(w.streams[r], kStreamWaitMs, nullptr, &busy);
      hung[r] = busy;
      if (!werr.empty()) {
        errs[r] += (errs[r].empty() ? "" : "; ") + werr;
        call_failed[r] = 1;
      }
      if (call_failed[r]) return;
      std::string aerr = async_error_text(w.comms[r]);
      if (!aerr.empty()) {
        errs[r] = aerr;
        call_failed[r] = 1;
        return;
      }
      errs[r] = dev_check(c, r, bufs[r].get(), w.streams[r], e);
    });
    if (verbose)
      std::fprintf(stderr, "%s (%s): expected + prepare + issue %.1f ms, wait + check %.1f ms\n",
                   c.str().c_str(), issue_name(how), t1 - t0, now_ms() - t1);
    rep.cases++;
    bool bad = false;
    for (int r = 0; r < n; r++) {
      if (hung[r]) w.wedge();
      if (errs[r].empty()) continue;
      bad = true;
      if (rep.failures.size() < max_failures)
        rep.failures.push_back(c.str() + " (" + issue_name(how) + "): rank " + std::to_string(r) +
                               ": " + errs[r]);
      rep.call_failed |= call_failed[r] != 0;
    }
    rep.failed_cases += bad;
    if (rep.call_failed) break;
  }
  return rep;
}

}  // namespace kt
