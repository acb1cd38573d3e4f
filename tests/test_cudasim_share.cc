// test_cudasim_share.cc - processes sharing one device of the CPU model of
// the GPU (cudasim/share.c, docs/dev/cuda-model.md): with
// KOLO_SIM_SHARE=timeslice two processes' kernels never run at once and
// both complete, and a process alone is not slowed; with KOLO_SIM_SHARE=mps
// their blocks share the SMs, a block of one process waiting for room that
// another's hold; cudaDevAttrMpsEnabled says which; a process killed on the
// device leaves neither its slice nor its SMs behind.  Model builds only.
//
// Each case forks two children that exec this binary running one disabled
// helper test as "A" or "B" (the model reads its settings once per process,
// and a child forked after it started could not use it); they meet through
// a small host file (KOLO_TEST_SHARE_FILE) and reach each other's device
// memory through CUDA IPC, as ranks do.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cudasim/kolo_sim.h"
#include "kernels/cuda/device_prims.cuh"
#include "util/proc_util.h"

namespace {

using Clock = std::chrono::steady_clock;

// ---- kernels -----------------------------------------------------------------------

// For run_ns: a block of process `me` (0 or 1) counts itself in running[me]
// and, without a poll (so without a switch of the model's runner), checks
// that no block of the other process is in, stays 20 us, and leaves; then
// polls.  w: running[2], overlaps, rounds.
__global__ void exclusive_rounds(unsigned long long *w, int me, uint64_t run_ns) {
  if (threadIdx.x != 0) return;
  uint64_t t0 = kolo_dev::global_ns();
  while (kolo_dev::global_ns() - t0 < run_ns) {
    kolo_dev::add(&w[me], 1ull);
    uint64_t in = kolo_dev::global_ns();
    while (kolo_dev::global_ns() - in < 20000)
      if (__atomic_load_n(&w[1 - me], __ATOMIC_ACQUIRE) != 0) kolo_dev::add(&w[2], 1ull);
    kolo_dev::add(&w[me], ~0ull);
    kolo_dev::add(&w[3], 1ull);
    kolo_dev::poll();
  }
}

// `rounds` rounds of 20 us of work by thread 0, each ending at a barrier
// (a pass of the model's runner: where a slice is checked; a barrier, not
// a poll, so that the runner never takes the block for idle and sleeps).
__global__ void fixed_work(int rounds) {
  for (int i = 0; i < rounds; i++) {
    uint64_t in = kolo_dev::global_ns();
    while (threadIdx.x == 0 && kolo_dev::global_ns() - in < 20000) {
    }
    kolo_dev::block_sync();
  }
}

// Counts itself in *started, then spins until *release is non-zero.
__global__ void hold_until(unsigned long long *started, const unsigned long long *release) {
  if (threadIdx.x == 0) kolo_dev::add(started, 1ull);
  while (__atomic_load_n(release, __ATOMIC_ACQUIRE) == 0) kolo_dev::poll();
}

// ---- the meeting file --------------------------------------------------------------------

// What the two children share on the host.
struct Meeting {
  cudaIpcMemHandle_t handle;  // A's device words
  int step;                   // how far the choreography got (each child waits for the other's steps)
  int b_saw_early;            // mps: B's block had started while A's filled the SMs
  int a_pid;
};

// Whether pid is gone (or a zombie: dead, not yet reaped).
bool gone(int pid) {
  if (kill(pid, 0) != 0) return true;
  char path[64], buf[256] = {0};
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = std::fopen(path, "r");
  if (f == nullptr) return true;
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char *paren = std::strrchr(buf, ')');
  return paren != nullptr && paren[1] == ' ' && paren[2] == 'Z';
}

constexpr const char *kFileVar = "KOLO_TEST_SHARE_FILE";
constexpr const char *kRoleVar = "KOLO_TEST_SHARE_ROLE";

Meeting *meeting() {
  const char *path = std::getenv(kFileVar);
  int fd = path ? open(path, O_RDWR) : -1;
  if (fd < 0) return nullptr;
  void *m = mmap(nullptr, sizeof(Meeting), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return m == MAP_FAILED ? nullptr : static_cast<Meeting *>(m);
}

// Waits until the other child reached `step` (false after 20 s).
bool wait_step(Meeting *m, int step) {
  auto end = Clock::now() + std::chrono::seconds(20);
  while (__atomic_load_n(&m->step, __ATOMIC_ACQUIRE) < step) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void set_step(Meeting *m, int step) { __atomic_store_n(&m->step, step, __ATOMIC_RELEASE); }

// Runs helper test `name` as children A and B at once, with `env` added;
// asserts both passed it (a_dies: A killed itself, B passed).
void run_pair(const std::string &name, const std::vector<std::string> &env, bool a_dies = false) {
  char path[] = "/tmp/kolo-share-meeting-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd, sizeof(Meeting)), 0) << std::strerror(errno);
  close(fd);
  std::vector<std::vector<std::string>> vars(2);
  for (int i = 0; i < 2; i++) {
    for (char **e = environ; *e; e++) {
      bool replaced = std::strncmp(*e, "GTEST_", 6) == 0;
      for (const std::string &x : env) replaced |= std::strncmp(*e, x.c_str(), x.find('=') + 1) == 0;
      if (!replaced) vars[i].push_back(*e);
    }
    for (const std::string &x : env) vars[i].push_back(x);
    vars[i].push_back(std::string(kFileVar) + "=" + path);
    vars[i].push_back(std::string(kRoleVar) + "=" + (i == 0 ? "A" : "B"));
  }
  std::vector<std::vector<char *>> envp(2);
  for (int i = 0; i < 2; i++) {
    for (std::string &s : vars[i]) envp[i].push_back(&s[0]);
    envp[i].push_back(nullptr);
  }
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + name, disabled = "--gtest_also_run_disabled_tests",
              color = "--gtest_color=no";
  std::vector<char *> argv = {&exe[0], &filter[0], &disabled[0], &color[0], nullptr};
  std::vector<kt::ChildResult> res = kt::run_children(
      2,
      [&](int i) {
        dup2(2, 1);
        execve(exe.c_str(), argv.data(), envp[i].data());
        std::fprintf(stderr, "execve(%s): %s\n", exe.c_str(), std::strerror(errno));
        return 127;
      },
      60000);
  unlink(path);
  for (const kt::ChildResult &r : res) {  // the children's figures, in the test's output
    size_t at = 0;
    while ((at = r.output.find("[          ] ", at)) != std::string::npos) {
      size_t end = r.output.find('\n', at);
      std::printf("%s\n", r.output.substr(at, end - at).c_str());
      at = end;
    }
  }
  if (a_dies) {
    EXPECT_EQ(res[0].signal, SIGKILL) << res[0].describe();
    res.erase(res.begin());
  }
  EXPECT_EQ(kt::children_gtest_failures(res, 1), "") << "children A and B each run " << name;
}

bool is_child() { return std::getenv(kRoleVar) != nullptr; }
bool is_a() { return is_child() && std::getenv(kRoleVar)[0] == 'A'; }

#define ASSERT_CUDA(x) ASSERT_EQ((x), cudaSuccess) << #x

int mps_attribute() {
  int v = -1;
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMpsEnabled, 0), cudaSuccess);
  return v;
}

// A's words on the device, or B's mapping of them (IPC): opened, and closed
// again (B) or freed once B closed them (A).
struct SharedWords {
  unsigned long long *w = nullptr;
  Meeting *m = nullptr;
  // A: allocates and publishes (step 1); B: waits for step 1 and opens.
  bool open(Meeting *meet, size_t words) {
    m = meet;
    if (is_a()) {
      if (cudaMalloc(&w, words * 8) != cudaSuccess || cudaMemset(w, 0, words * 8) != cudaSuccess) return false;
      if (cudaIpcGetMemHandle(&m->handle, w) != cudaSuccess) return false;
      set_step(m, 1);
      return true;
    }
    return wait_step(m, 1) &&
           cudaIpcOpenMemHandle(reinterpret_cast<void **>(&w), m->handle, cudaIpcMemLazyEnablePeerAccess) ==
               cudaSuccess;
  }
  // B closes and says so (step 99); A frees after that.
  void close() {
    if (is_a()) {
      EXPECT_TRUE(wait_step(m, 99)) << "B never closed the IPC mapping";
      EXPECT_EQ(cudaFree(w), cudaSuccess);
    } else {
      EXPECT_EQ(cudaIpcCloseMemHandle(w), cudaSuccess);
      set_step(m, 99);
    }
  }
  unsigned long long read(int i) {
    unsigned long long v = ~0ull;
    EXPECT_EQ(cudaMemcpy(&v, w + i, 8, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

}  // namespace

// ---- timeslice ---------------------------------------------------------------------------

// Two processes on device 0, each with 2 blocks of 0.3 s of 20-us rounds:
// no round of one overlaps a block of the other, both kernels complete,
// and the slice passed between them (each ran while the other waited).
TEST(CudaSimShare, TimesliceRunsOneContextAtATime) {
  run_pair("CudaSimShareChild.DISABLED_Timeslice", {"KOLO_SIM_SHARE=timeslice", "KOLO_SIM_TIMESLICE_US=2000"});
}

TEST(CudaSimShareChild, DISABLED_Timeslice) {
  if (!is_child()) GTEST_SKIP() << "helper of CudaSimShare: run by it only";
  EXPECT_EQ(mps_attribute(), 0);
  Meeting *m = meeting();
  ASSERT_NE(m, nullptr);
  SharedWords sw;
  ASSERT_TRUE(sw.open(m, 4));
  if (is_a()) ASSERT_TRUE(wait_step(m, 2));
  else set_step(m, 2);
  int me = is_a() ? 0 : 1;
  auto t0 = Clock::now();
  ASSERT_CUDA((kolo_dev::launch<exclusive_rounds>(2, 32, 0, nullptr, sw.w, me, uint64_t(300000000))));
  ASSERT_CUDA(cudaDeviceSynchronize());
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("[          ] %s: 2 blocks of 300 ms in %.0f ms, %u slice switches, %u waits\n", is_a() ? "A" : "B", ms,
              kolo_sim_slice_switches(0), kolo_sim_slice_waits(0));
  if (is_a()) ASSERT_TRUE(wait_step(m, 3));
  else set_step(m, 3);  // both kernels done: the words are final
  EXPECT_EQ(sw.read(2), 0ull) << "rounds that saw a block of the other process running";
  EXPECT_GT(sw.read(3), 100ull) << "rounds of both kernels";
  EXPECT_GT(kolo_sim_slice_switches(0), 0u) << "the slice never passed between the two processes";
  sw.close();
}

// A process alone (B never launches): 2000 rounds of 20 us, each a pass of
// the runner, in 100-us slices: the slice is renewed without a runner ever
// waiting for it, so the kernel takes about its 40 ms (a slice handed back
// and waited for would cost up to a millisecond each: some 400 ms).
TEST(CudaSimShare, AContextAloneIsNotSlowed) {
  run_pair("CudaSimShareChild.DISABLED_Alone", {"KOLO_SIM_SHARE=timeslice", "KOLO_SIM_TIMESLICE_US=100"});
}

TEST(CudaSimShareChild, DISABLED_Alone) {
  if (!is_child()) GTEST_SKIP() << "helper of CudaSimShare: run by it only";
  if (!is_a()) return;  // B stays off the device
  ASSERT_CUDA((kolo_dev::launch<fixed_work>(1, 32, 0, nullptr, 10)));  // warm: runners, registration
  ASSERT_CUDA(cudaDeviceSynchronize());
  auto t0 = Clock::now();
  ASSERT_CUDA((kolo_dev::launch<fixed_work>(1, 32, 0, nullptr, 2000)));
  ASSERT_CUDA(cudaDeviceSynchronize());
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("[          ] 2000 rounds of 20 us alone in %.0f ms, %u waits for the slice\n", ms,
              kolo_sim_slice_waits(0));
  EXPECT_EQ(kolo_sim_slice_waits(0), 0u) << "a context alone waited for its own slice";
  EXPECT_LT(ms, 2000) << "40 ms of work";
  EXPECT_EQ(kolo_sim_slice_switches(0), 0u);
}

// ---- mps -------------------------------------------------------------------------------------

// A device of 2 SMs; every block of the test's kernels takes a whole SM
// (they are not in the ptxas report).  A fills both SMs with spinning
// blocks; B's block must wait for room until A's leave, then run.
TEST(CudaSimShare, MpsCountsResidencyAcrossProcesses) {
  run_pair("CudaSimShareChild.DISABLED_Mps", {"KOLO_SIM_SHARE=mps", "KOLO_SIM_SMS=2"});
}

TEST(CudaSimShareChild, DISABLED_Mps) {
  if (!is_child()) GTEST_SKIP() << "helper of CudaSimShare: run by it only";
  EXPECT_EQ(mps_attribute(), 1);
  Meeting *m = meeting();
  ASSERT_NE(m, nullptr);
  SharedWords sw;  // words: A's blocks in, B's blocks in, release
  ASSERT_TRUE(sw.open(m, 3));
  cudaStream_t s;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (is_a()) {
    ASSERT_CUDA((kolo_dev::launch<hold_until>(2, 32, 0, s, sw.w, static_cast<const unsigned long long *>(sw.w + 2))));
    auto end = Clock::now() + std::chrono::seconds(10);
    while (sw.read(0) < 2 && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(sw.read(0), 2ull) << "A's 2 blocks fill the 2 SMs";
    set_step(m, 2);
    ASSERT_TRUE(wait_step(m, 3));  // B launched and looked
    unsigned long long one = 1;
    ASSERT_CUDA(cudaMemcpy(sw.w + 2, &one, 8, cudaMemcpyHostToDevice));  // release A's blocks
  } else {
    ASSERT_TRUE(wait_step(m, 2));
    const unsigned long long *release = sw.w + 2;
    ASSERT_CUDA((kolo_dev::launch<hold_until>(1, 32, 0, s, sw.w + 1, release)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    m->b_saw_early = (int)sw.read(1);
    set_step(m, 3);
    EXPECT_EQ(m->b_saw_early, 0) << "B's block ran while A's blocks filled every SM";
  }
  ASSERT_CUDA(cudaStreamSynchronize(s));
  if (!is_a()) {
    EXPECT_EQ(sw.read(1), 1ull) << "B's block ran once A's left";
  }
  if (is_a()) ASSERT_TRUE(wait_step(m, 4));
  else set_step(m, 4);
  ASSERT_CUDA(cudaStreamDestroy(s));
  sw.close();
}

// ---- a process that dies on the device ---------------------------------------------------

// A fills the device (2 spinning blocks: the slice it holds, or both SMs
// of 2 under MPS) and is killed there; B launches once A is dead (its
// slot still says it holds the slice, or the SMs), and its kernel must
// run within 5 s: the dead process's slice, or its SMs, are taken back.
TEST(CudaSimShare, ADeadProcessLeavesTheSliceBehind) {
  run_pair("CudaSimShareChild.DISABLED_DeadHolder", {"KOLO_SIM_SHARE=timeslice"}, true);
}

TEST(CudaSimShare, ADeadProcessLeavesItsSmsBehind) {
  run_pair("CudaSimShareChild.DISABLED_DeadHolder", {"KOLO_SIM_SHARE=mps", "KOLO_SIM_SMS=2"}, true);
}

TEST(CudaSimShareChild, DISABLED_DeadHolder) {
  if (!is_child()) GTEST_SKIP() << "helper of CudaSimShare: run by it only";
  Meeting *m = meeting();
  ASSERT_NE(m, nullptr);
  cudaStream_t s;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (is_a()) {
    unsigned long long *w = nullptr;
    ASSERT_CUDA(cudaMalloc(&w, 16));
    ASSERT_CUDA(cudaMemset(w, 0, 16));
    ASSERT_CUDA((kolo_dev::launch<hold_until>(2, 32, 0, s, w, static_cast<const unsigned long long *>(w + 1))));
    unsigned long long in = 0;
    auto end = Clock::now() + std::chrono::seconds(10);
    while (in < 2 && Clock::now() < end) ASSERT_CUDA(cudaMemcpy(&in, w, 8, cudaMemcpyDeviceToHost));
    ASSERT_EQ(in, 2ull) << "A's blocks run";
    m->a_pid = getpid();
    set_step(m, 2);
    raise(SIGKILL);
  }
  ASSERT_TRUE(wait_step(m, 2));
  // The answer that ended the wait is the one asserted: asked again, the
  // pid of a process that is being reaped (or reused) can look alive.
  auto end = Clock::now() + std::chrono::seconds(10);
  bool dead = false;
  while (!(dead = gone(m->a_pid)) && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(dead) << "A never died";
  ASSERT_CUDA((kolo_dev::launch<fixed_work>(1, 32, 0, s, 10)));
  auto t0 = Clock::now();
  cudaError_t e = cudaErrorNotReady;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && Clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(e, cudaSuccess) << "B's kernel did not run within 5 s of A's death";
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("[          ] B's kernel, launched after A died, done in %.0f ms\n", ms);
  if (e == cudaSuccess) {
    ASSERT_CUDA(cudaStreamDestroy(s));
  }
}
