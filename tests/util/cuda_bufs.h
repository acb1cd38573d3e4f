// cuda_bufs.h - one rank's side of an end-to-end collective test on a
// koloMemCuda communicator: the device twin of coll_run.h.
//
// A case is prepared on the host exactly as coll_run.h does (same inputs,
// same poison, same NCCL in-place layout, host buffers aligned), then
// mirrored into device memory and called with device pointers on the rank's
// stream; after the stream is done the device bytes come back into the host
// buffers and coll_run.h's check() judges them, so the reference and every
// rule (inputs unchanged, non-root outputs untouched, ...) are shared with
// the host suites.
//
// Device layout of one buffer: a region in the rank's arena (256-byte
// aligned) of kDevGuard poison bytes, then 0..7 *elements* of misalignment
// (CollCase::misalign != 0: rank r's buffer `which` starts
// (misalign + r + 3 * which) % 8 elements past the region's 64-byte
// aligned start; device pointers must stay element aligned), the payload,
// and kDevGuard poison bytes more.  Every byte of the region outside the
// payload must still hold the poison after the call.
//
// Streams: every upload, memset and download is asynchronous on the rank's
// own stream, so that one rank's thread never waits for the whole device
// (another rank's kernel may be spinning, waiting for this rank).  Device
// memory comes from a per-rank arena that is sized and allocated between
// cases (cudaMalloc / cudaFree may synchronize the device), never while a
// kernel runs.
//
// Nothing here needs a GPU to compile; every function that touches CUDA
// is only called by tests after cuda_unavailable() returned "".
#ifndef KOLO_TESTS_UTIL_CUDA_BUFS_H
#define KOLO_TESTS_UTIL_CUDA_BUFS_H

#include <cuda_runtime.h>

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "kolo.h"
#include "util/coll_ref.h"
#include "util/device_guard.h"
#include "util/coll_run.h"
#include "util/thread_world.h"  // GridReport

namespace kt {

// "" when CUDA has a usable device, else why not (cudaGetDeviceCount's
// error, or "0 devices").  Computed once per process.  Touches CUDA: do not
// call it in a process that forks children which then use CUDA without
// exec (the process tests exec a fresh copy of the test binary instead).
std::string cuda_unavailable();

// Without a device: skips the current test with a visible message, or on
// the CUDA model fails it (util/device_guard.h says why).
#define KT_REQUIRE_CUDA()                                                      \
  do {                                                                         \
    std::string kt_why_ = ::kt::cuda_unavailable();                            \
    if (!kt_why_.empty()) KT_NO_DEVICE("no CUDA device: " << kt_why_);         \
  } while (0)

// "what: <cuda error string>" or "" for cudaSuccess.
std::string cuda_text(const char *what, cudaError_t e);

// ---- device memory ------------------------------------------------------------

// One rank's device memory: a single cudaMalloc, handed out in 256-byte
// aligned pieces by take() and given back all at once by reset().
class DevArena {
 public:
  DevArena() = default;
  ~DevArena();
  DevArena(const DevArena &) = delete;
  DevArena &operator=(const DevArena &) = delete;
  // Makes the capacity at least `bytes` (reallocating: call only while no
  // kernel uses the arena).  "" or the CUDA error.
  std::string reserve(size_t bytes);
  // Frees the memory (call only when every stream using it is idle).
  void release();
  void reset() { used_ = 0; }
  // `bytes` bytes, 256-byte aligned; nullptr when the arena is too small.
  char *take(size_t bytes);
  char *base() const { return base_; }
  size_t capacity() const { return cap_; }
  // false: a kernel may still use the memory (a stream never finished):
  // release() leaks it instead of calling cudaFree (which would wait).
  bool freeable = true;

 private:
  char *base_ = nullptr;
  size_t cap_ = 0, used_ = 0;
};

constexpr size_t kDevGuard = 256;

// One buffer's region in an arena (see the header comment).
struct DevBuf {
  char *region = nullptr;
  size_t region_bytes = 0;
  size_t data_off = 0;
  size_t bytes = 0;
  char *data() const { return region ? region + data_off : nullptr; }
};

// Region bytes of a buffer of `bytes` payload bytes.
size_t dev_region_bytes(size_t bytes);
// Takes b's region from the arena: `bytes` payload bytes starting
// `off_bytes` (< 64) past the region's first kDevGuard bytes.  "" or why not.
std::string dev_buf_place(DevArena *arena, size_t bytes, size_t off_bytes, DevBuf *b);
// Enqueues on s: the poison over b's whole region, then `host` (b.bytes
// bytes, may be nullptr for poison only) into the payload.
std::string dev_buf_upload(const DevBuf &b, const void *host, unsigned char poison, cudaStream_t s);
// Enqueues on s the copy of b's whole region into *out (sized here); the
// caller waits for s before reading it.
std::string dev_buf_download(const DevBuf &b, std::vector<unsigned char> *out, cudaStream_t s);
// "" when every byte of a downloaded region outside the payload holds the
// poison, else which byte was written ("<what> (device): byte ...").
std::string dev_buf_guards(const char *what, const DevBuf &b, const std::vector<unsigned char> &region,
                           unsigned char poison);
// Arena bytes one rank needs for case c (both buffers).
size_t dev_case_bytes(const CollCase &c);
// Arena bytes for a list of cases issued one at a time (the largest), and
// all at once (the sum).
size_t dev_max_case_bytes(const std::vector<CollCase> &cases);
size_t dev_sum_case_bytes(const std::vector<CollCase> &cases);

struct DevRankBufs {
  CollCase host_case;  // the case with misalign 0: the host layout
  RankBufs host;       // prepared host buffers; the results land here
  DevBuf a, b;         // a: sendbuff (or the only buffer in place), b: recvbuff
  const void *send = nullptr;  // device pointers of the call
  void *recv = nullptr;
  unsigned char poison = 0;
  char *scalar = nullptr;  // a premul-sum's scalar in device memory (koloScalarDevice)
};

// Prepares case c for `rank` on the host (coll_run.h's prepare), takes its
// regions from `arena` and enqueues on `stream`: poison over both regions,
// then the host payloads.  "" or what failed.
std::string dev_prepare(const CollCase &c, int rank, DevArena *arena, cudaStream_t stream,
                        DevRankBufs *d);
// Same as dev_prepare but into regions already taken (same case shape,
// e.g. a graph replay with a new seed): the device pointers do not change.
std::string dev_reprepare(const CollCase &c, int rank, cudaStream_t stream, DevRankBufs *d);
// The call(s) of rank on comm with the device pointers, on `stream`
// (send/recv: one group; a premul-sum case makes its op first and destroys
// it as soon as the call returned, before the kernel ran).  What the API
// returned.
koloResult_t dev_issue(const CollCase &c, int rank, const DevRankBufs &d, koloComm_t comm,
                       cudaStream_t stream);
// Copies both regions back (on `stream`, then waits for it), checks the
// device guards, moves the payloads into d->host and runs check().  The
// stream must be done with the call (wait_stream).  "" or what went wrong.
std::string dev_check(const CollCase &c, int rank, DevRankBufs *d, cudaStream_t stream,
                      const Expected &e);

// ---- streams and errors ---------------------------------------------------------

// Polls the stream until its work is done, an error shows, or timeout_ms
// passes (never blocks forever, unlike cudaStreamSynchronize).  Returns ""
// when done; *ms (optional) gets the time waited; *still_busy (optional) is
// set when the timeout passed with work pending.
std::string wait_stream(cudaStream_t s, double timeout_ms, double *ms = nullptr,
                        bool *still_busy = nullptr);
// "" when koloCommGetAsyncError(comm) reports koloSuccess, else the result
// and koloGetLastError(comm).
std::string async_error_text(koloComm_t comm);

// ---- ranks as threads on one GPU -------------------------------------------------

// n ranks as threads of this process on device `dev`, each with its own
// koloMemCuda communicator, its own non-blocking stream, its own arena and
// its own thread (pool).
class CudaWorld {
 public:
  enum class Init {
    kInitAll,          // koloCommInitAllConfig, devlist = {dev, dev, ...}
    kInitRankThreads,  // koloGetUniqueId + koloCommInitRankConfig on the pool's threads
    kInitAllPlain,     // koloCommInitAll (no config: KOLO_MEMORY decides), devlist as above
    kInitRankPlain,    // koloCommInitRank on the pool's threads (no config; current device)
    kGroupOneThread,   // this thread: cudaSetDevice(dev), then koloCommInitRankConfig for every
                       // rank between koloGroupStart / koloGroupEnd (cudaDev: the current device)
  };
  // config == nullptr: memory = koloMemCuda (and cudaDev = dev for
  // kInitRankThreads), everything else from KOLO_*; else *config as given
  // (the caller sets memory, cudaDev, ...).  The *Plain kinds take no config.
  CudaWorld(int nranks, Init how = Init::kInitAll, const koloConfig_t *config = nullptr,
            int dev = 0);
  // Destroys the communicators (koloCommAbort when a stream never
  // finished), the streams and the arenas.
  ~CudaWorld();
  CudaWorld(const CudaWorld &) = delete;
  CudaWorld &operator=(const CudaWorld &) = delete;

  int nranks() const { return (int)comms.size(); }
  bool ok() const { return init_error.empty(); }
  // Makes every arena at least `bytes` (call between cases).
  std::string reserve(size_t bytes);
  // Marks the world as having a stream that never finished.
  void wedge();

  int dev = 0;
  koloResult_t init_result = koloSuccess;
  std::string init_error;  // "" when everything was created
  std::vector<koloComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<DevArena> arenas;
  RankPool pool;  // thread r is rank r (cudaSetDevice(dev) before each job)
  bool wedged = false;

 private:
  void init_group(const koloUniqueId &id, koloConfig_t cfg);
};

// How the ranks' calls are issued.
enum class Issue {
  kPerThread,  // each rank's thread issues its own call, all at once
  kOneThread,  // this thread issues every rank's call in one koloGroupStart/End
};
const char *issue_name(Issue how);
inline void PrintTo(Issue how, std::ostream *os) { *os << issue_name(how); }

// Runs every case on every rank: expected result (shared, built on the
// pool), prepare + upload on each rank's thread, the calls (per `how`), then
// wait, download and check on each rank's thread.  Stops after the first
// case in which a call returned an error or a stream failed or hung.
GridReport run_cuda_grid(CudaWorld &w, const std::vector<CollCase> &cases, Issue how,
                         size_t max_failures = 12);

// Bound on one stream wait in the grids (the kernels' own timeout,
// KOLO_TIMEOUT_MS set by the tests to 60 s, comes first).
constexpr double kStreamWaitMs = 120000;

}  // namespace kt

#endif
