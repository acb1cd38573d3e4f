// test_cuda_stall.cc - the stall warning on koloMemCuda communicators
// (KOLO_STALL_WARN_S; the host executor's is StallWarning.* in
// test_mismatch.cc).
//
// Two ranks as threads on one device (tests/util/cuda_bufs.h's CudaWorld):
// a warm-up all-reduce on both (call #1), then rank 0 calls a second
// all-reduce that rank 1 never makes.  Rank 0's kernel waits for rank 1's
// call signature; past the threshold it notes the stall in its status
// words and keeps waiting, and the host logs it once, at WARN, naming
// rank 1 and the call, before the timeout turns the wait into an error.
// The log goes to a file (KOLO_DEBUG_FILE) that the tests read.
//
// Nothing here waits for a WARN line against a clock that load could
// beat: the first test looks at the log after the timeout (the warning
// must be in it, before the error, which kolo_cuda_comm_status makes sure
// of), the second one polls it for 30 s while nothing else can end the
// kernel (timeout 60 s; expected after ~1.2 s).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "util/cuda_bufs.h"
#include "util/expect_text.h"
#include "util/proc_util.h"

using namespace kt;

namespace {

constexpr size_t kLL = 1000;        // 4000 bytes: the LL protocol
constexpr size_t kSimple = 100000;  // 400000 bytes: SIMPLE
const char *const kWatcher = "kolo-stall"; // the watcher thread's name (core/cuda_stall.c)

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t occurrences(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) n++;
  return n;
}

// Whether a thread of this process is named `name` (/proc/self/task/*/comm).
bool has_thread(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (d == nullptr) return false;
  bool found = false;
  for (dirent *e; !found && (e = readdir(d)) != nullptr;) {
    if (e->d_name[0] == '.') continue;
    std::string comm = read_file(std::string("/proc/self/task/") + e->d_name + "/comm");
    found = comm == std::string(name) + "\n";
  }
  closedir(d);
  return found;
}

// A log file in a directory of its own, for KOLO_DEBUG_FILE.
struct TempLog {
  char dir[32] = "/tmp/kolo-cstall-XXXXXX";
  std::string path;
  TempLog() {
    if (mkdtemp(dir) != nullptr) path = std::string(dir) + "/log";
  }
  ~TempLog() {
    if (path.empty()) return;
    unlink(path.c_str());
    rmdir(dir);
  }
};

// Each rank's device buffer of kSimple float32s.
struct Bufs {
  std::vector<void *> p;
  ~Bufs() {
    for (void *x : p)
      if (x != nullptr) cudaFree(x);
  }
  std::string alloc(int n) {
    p.assign((size_t)n, nullptr);
    for (void *&x : p) {
      std::string e = cuda_text("cudaMalloc", cudaMalloc(&x, kSimple * sizeof(float)));
      if (e.empty()) e = cuda_text("cudaMemset", cudaMemset(x, 0, kSimple * sizeof(float)));
      if (!e.empty()) return e;
    }
    return "";
  }
};

// An all-reduce of `count` float32s (sum, in place) on the ranks in
// `callers`, each on its own thread; the calls only enqueue.
void all_reduce(CudaWorld &w, Bufs &b, size_t count, const std::vector<int> &callers) {
  std::vector<koloResult_t> rc((size_t)w.nranks(), koloSuccess);
  w.pool.run([&](int r) {
    for (int c : callers)
      if (c == r)
        rc[(size_t)r] = koloAllReduce(b.p[(size_t)r], b.p[(size_t)r], count, koloFloat32, koloSum,
                                      w.comms[(size_t)r], w.streams[(size_t)r]);
  });
  for (int r : callers) ASSERT_EQ(rc[(size_t)r], koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[(size_t)r]);
}

// The world, its buffers and call #1 on both ranks, done.
void start(CudaWorld &w, Bufs &b, size_t count) {
  ASSERT_TRUE(w.ok()) << w.init_error;
  ASSERT_EQ(b.alloc(w.nranks()), "");
  all_reduce(w, b, count, {0, 1});
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < w.nranks(); r++) {
    ASSERT_EQ(wait_stream(w.streams[(size_t)r], 60000), "") << "warm-up, rank " << r;
    ASSERT_EQ(async_error_text(w.comms[(size_t)r]), "") << "warm-up, rank " << r;
  }
}

// Rank 0's stream until its kernel gives up (60 s at most); then its
// asynchronous error.
koloResult_t wait_for_timeout(CudaWorld &w) {
  bool busy = false;
  std::string werr = wait_stream(w.streams[0], 60000, nullptr, &busy);
  if (busy) w.wedge();
  EXPECT_EQ(werr, "") << "rank 0's stream";
  koloResult_t async = koloSuccess;
  EXPECT_EQ(koloCommGetAsyncError(w.comms[0], &async), koloSuccess);
  return async;
}

koloConfig_t cuda_config(int timeout_ms) {
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.timeoutMs = timeout_ms;
  return cfg;
}

// Under KOLO_STALL_WARN_S=warn_s, KOLO_DEBUG=WARN into log_path and a
// timeout of timeout_ms: both ranks make call #1 (LL), rank 0 alone call
// #2; once rank 0's kernel gives up, `inside` looks at the world, and the
// result is rank 0's asynchronous error (koloSuccess after a fatal
// failure, which the caller checks).
koloResult_t stall_until_timeout(const char *warn_s, int timeout_ms, const std::string &log_path,
                                 const std::function<void(CudaWorld &)> &inside) {
  ScopedEnv warn("KOLO_STALL_WARN_S", warn_s), level("KOLO_DEBUG", "WARN"), file("KOLO_DEBUG_FILE", log_path);
  koloResetDebugInit();
  koloConfig_t cfg = cuda_config(timeout_ms);
  CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
  Bufs b;
  start(w, b, kLL);
  if (::testing::Test::HasFatalFailure()) return koloSuccess;
  all_reduce(w, b, kLL, {0});
  if (::testing::Test::HasFatalFailure()) return koloSuccess;
  koloResult_t async = wait_for_timeout(w);
  inside(w);
  return async;
}

// KOLO_STALL_WARN_S=1, timeout 6 s, LL: one WARN naming rank 1 and call
// #2, then the timeout's error.
TEST(CudaStallWarning, NamesTheMissingRankAndTheCallBeforeTheTimeout) {
  KT_REQUIRE_CUDA();
  TempLog tmp;
  ASSERT_FALSE(tmp.path.empty());
  koloResult_t async = stall_until_timeout("1", 6000, tmp.path, [](CudaWorld &w) {
    EXPECT_CONTAINS(koloGetLastError(w.comms[0]), "waited 6000 ms for rank 1");
  });
  if (HasFatalFailure()) return;
  koloResetDebugInit();
  EXPECT_EQ(async, koloTimeout) << koloGetErrorString(async);
  const std::string log = read_file(tmp.path);
  const std::string warn = "rank 0: stalled for 1 s in AllReduce(count=1000, float32, sum) #2, waiting for rank 1";
  const size_t at = log.find(warn);
  ASSERT_NE(at, std::string::npos) << log;
  // the rest of the line: the channel (1 or 2 of them) and the host executor's words
  const std::string line = log.substr(at, log.find('\n', at) - at);
  EXPECT_TRUE(std::regex_match(line.substr(warn.size()),
                               std::regex(" \\(channel [01]: it has sent nothing of this call\\); the ranks missing "
                                          "have not reached this call or are stuck before it \\(an error after "
                                          "KOLO_TIMEOUT_MS = 6000 ms\\)")))
      << line;
  // (a warm-up slow enough to warn would be right to: only call #2's count)
  EXPECT_EQ(occurrences(log, warn), 1u) << "warned more than once:\n" << log;
  const size_t timeout_at = log.find("waited 6000 ms for rank 1");
  ASSERT_NE(timeout_at, std::string::npos) << log;
  EXPECT_LT(at, timeout_at) << "the warning must come before the timeout's error:\n" << log;
  std::printf("  %s", log.substr(at, log.find('\n', at) + 1 - at).c_str());
}

// KOLO_STALL_WARN_S=1, timeout 60 s, SIMPLE: the caller never calls kolo
// again (as one blocked in cudaStreamSynchronize): the watcher thread logs
// the warning while the kernel still waits; koloCommAbort then ends it, and
// the thread is gone once the communicators are.
TEST(CudaStallWarning, TheWatcherWarnsWhileTheKernelWaits) {
  KT_REQUIRE_CUDA();
  TempLog tmp;
  ASSERT_FALSE(tmp.path.empty());
  const std::string warn = "rank 0: stalled for 1 s in AllReduce(count=100000, float32, sum) #2, waiting for rank 1";
  {
    ScopedEnv env("KOLO_STALL_WARN_S", "1"), level("KOLO_DEBUG", "WARN"), file("KOLO_DEBUG_FILE", tmp.path);
    koloResetDebugInit();
    koloConfig_t cfg = cuda_config(60000);
    CudaWorld w(2, CudaWorld::Init::kInitAll, &cfg);
    Bufs b;
    start(w, b, kSimple);
    if (HasFatalFailure()) return;
    const auto t0 = std::chrono::steady_clock::now(); /* before the kernel can start waiting */
    all_reduce(w, b, kSimple, {0});
    if (HasFatalFailure()) return;
    bool seen = false;
    while (!seen && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      seen = read_file(tmp.path).find(warn) != std::string::npos;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(seen) << "no warning after " << s << " s:\n" << read_file(tmp.path);
    EXPECT_GE(s, 0.95) << "warned before the stall reached KOLO_STALL_WARN_S";
    EXPECT_EQ(cudaStreamQuery(w.streams[0]), cudaErrorNotReady) << "rank 0's kernel must still wait";
    EXPECT_TRUE(has_thread(kWatcher));
    std::printf("  the warning came %.1f s after the call\n", s);
    EXPECT_EQ(koloCommAbort(w.comms[0]), koloSuccess);
    w.comms[0] = nullptr;  // freed by the abort
    bool busy = false;
    EXPECT_EQ(wait_stream(w.streams[0], 60000, nullptr, &busy), "") << "rank 0's stream after the abort";
    if (busy) w.wedge();
  }
  koloResetDebugInit();
  EXPECT_FALSE(has_thread(kWatcher)) << "the watcher outlived the communicators";
  const std::string log = read_file(tmp.path);
  EXPECT_EQ(occurrences(log, warn), 1u) << "not once:\n" << log;
  EXPECT_CONTAINS(log, warn + " (channel ");
  EXPECT_CONTAINS(log, "it has sent nothing of this call");
}

// KOLO_STALL_WARN_S=0: no warning and no watcher thread, only the
// timeout's error.
TEST(CudaStallWarning, ZeroTurnsItOff) {
  KT_REQUIRE_CUDA();
  TempLog tmp;
  ASSERT_FALSE(tmp.path.empty());
  bool watcher = true;
  koloResult_t async = stall_until_timeout("0", 2500, tmp.path, [&](CudaWorld &) { watcher = has_thread(kWatcher); });
  if (HasFatalFailure()) return;
  koloResetDebugInit();
  EXPECT_EQ(async, koloTimeout) << koloGetErrorString(async);
  EXPECT_FALSE(watcher) << "a watcher thread with the warning off";
  const std::string log = read_file(tmp.path);
  EXPECT_CONTAINS(log, "waited 2500 ms for rank 1");
  EXPECT_EQ(log.find("stalled for"), std::string::npos) << log;
}

}  // namespace
