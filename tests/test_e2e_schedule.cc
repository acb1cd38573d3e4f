// test_e2e_schedule.cc - KOLO_SCHEDULE_FILE end to end, 4 ranks as
// processes (forked before anything starts CUDA or a rendezvous root here):
//
//   SchedFileHost   each good example of perf/schedules/ (the ring
//                   all-reduce on two channels, one each way round; the
//                   recursive doubling, multi-peer) runs every all-reduce
//                   case below on host communicators with every element
//                   checked (util/coll_run.h), and each rank shows that the
//                   file's programs ran: its all-reduce program is the
//                   file's, the ring pipes carried nothing, and the
//                   point-to-point pipes carried slices exactly to and from
//                   the peers the file names on each channel; and a file
//                   of every built-in schedule of 8 collectives (every root,
//                   two channels: the ring in rank order and reversed),
//                   written out as text, runs every collective (ring pipes
//                   untouched: only the file's programs ran);
//   SchedFileCuda   the same cases (and files) on koloMemCuda communicators (the CUDA
//                   kernel; on the CPU model in build-sim), device buffers
//                   checked likewise (util/cuda_bufs.h); skipped where there
//                   is no device (every child exits 77);
//   SchedFileRefused  the wrong example is refused by koloCommInitRank on
//                   every rank with the checker's sentence; ranks that load
//                   different files fail at init saying so; a file for
//                   another rank count, or none that can be read, is refused.
//
// All-reduce cases: float32 sum, int32 max, bfloat16 sum, float16 avg,
// float8e5m2 premul-sum and float64 avg at counts 0, 1, 7, 4095 and 65539
// (past the CUDA LL threshold), in and out of place, and 1 MiB + 3 float32
// sum (two channels) in and out of place.  Every collective: counts 7, 4095
// and 65539, in and out of place where NCCL has them, the roots in turn,
// float32 sum, int32 max and bfloat16 avg in turn where there is an op.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/comm_peek.h"
#include "util/proc_util.h"
#include "util/sched_text.h"
#ifdef KOLO_HAVE_CUDA
#include "util/cuda_bufs.h"
#endif

extern "C" {
#include "ring/algo.h"
#include "ring/schedule.h"
}

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);
constexpr int kRanks = 4;
constexpr double kChildTimeoutMs = 180000;
constexpr int kSkip = 77;

std::string schedule_path(const char *name) {
  std::string f = __FILE__;
  return f.substr(0, f.rfind("/tests/")) + "/perf/schedules/" + name;
}

std::vector<CollCase> all_reduce_cases() {
  struct TO {
    koloDataType_t t;
    koloRedOp_t op;
  };
  const TO picks[] = {{koloFloat32, koloSum}, {koloInt32, koloMax},         {koloBfloat16, koloSum},
                      {koloFloat16, koloAvg}, {koloFloat8e5m2, kPreMulSum}, {koloFloat64, koloAvg}};
  std::vector<CollCase> cases;
  int v = 0;
  for (const TO &p : picks)
    for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)4095, (size_t)65539})
      for (bool ip : {false, true}) cases.push_back(make_case(Coll::AllReduce, p.t, p.op, kRanks, count, ip, v++));
  if (!sanitized_build())
    for (bool ip : {false, true})
      cases.push_back(make_case(Coll::AllReduce, koloFloat32, koloSum, kRanks, (1u << 20) + 3, ip, v++));
  return cases;
}

// What a child checks besides the results: the file it runs.
enum FileKind { kRingFile, kRdFile, kBuiltinsFile };

// The file of every built-in schedule (8 collectives, every root, two
// channels) for kRanks ranks, in a temporary file; its path.  With an
// all-reduce algorithm: that all-reduce's programs alone (the one-shot's
// use scratch and local reduces).
std::string write_builtins_file(int algo = -1) {
  const int colls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER, KOLO_COLL_BROADCAST,
                       KOLO_COLL_REDUCE,     KOLO_COLL_ALL_TO_ALL,     KOLO_COLL_GATHER,     KOLO_COLL_SCATTER};
  std::string text = "kolo-schedule 1\nranks " + std::to_string(kRanks) + "\n";
  for (int coll : colls)
    for (int root = 0; root < (sched_rooted(coll) ? kRanks : 1) && (algo < 0 || coll == KOLO_COLL_ALL_REDUCE); root++)
      text += "\n" + sched_builtin_section(coll, kRanks, root, 2, nullptr, algo < 0 ? KOLO_ALGO_RING : algo);
  char path[] = "/tmp/kolo-builtins-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || write(fd, text.data(), text.size()) != (ssize_t)text.size()) std::abort();
  close(fd);
  return path;
}

std::vector<CollCase> every_collective_cases() {
  const Coll colls[] = {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast,
                        Coll::Reduce,    Coll::AlltoAll,      Coll::Gather,    Coll::Scatter};
  const koloDataType_t types[] = {koloFloat32, koloInt32, koloBfloat16};
  const koloRedOp_t ops[] = {koloSum, koloMax, koloAvg};
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : colls)
    for (size_t count : {(size_t)7, (size_t)4095, (size_t)65539})
      for (int ip = has_out_of_place(coll) ? 0 : 1; ip <= (has_in_place(coll) ? 1 : 0); ip++, v++)
        cases.push_back(make_case(coll, types[v % 3], ops[v % 3], kRanks, count, ip == 1, v));
  return cases;
}

#define CHILD_FAIL(...)                      \
  do {                                       \
    std::fprintf(stderr, "rank %d: ", rank); \
    std::fprintf(stderr, __VA_ARGS__);       \
    std::fprintf(stderr, "\n");              \
    failures++;                              \
  } while (0)

// Rank's all-reduce program on channel ch is the file's (steps, 2 peers).
int check_program(koloComm_t comm, int rank, int ch, int want_steps) {
  int failures = 0, nsteps = -1, npeers = -1;
  if (kt_program_shape(comm, KOLO_COLL_ALL_REDUCE, 0, ch, &nsteps, &npeers) != 0 || nsteps != want_steps ||
      npeers != 2)
    CHILD_FAIL("channel %d runs a program of %d steps and %d peers, not the file's (%d steps, 2 peers)", ch, nsteps,
               npeers, want_steps);
  return failures;
}

// The peers the file has rank send to (*to) and receive from (*from) on
// channel ch: the ring goes round one way on channel 0, the other way on
// channel 1; recursive doubling exchanges with rank ^ 1, then rank ^ 2.
// Channel 1 only carries the 1 MiB cases (not in sanitizer builds).
void file_peers(bool ring, int rank, int ch, std::set<int> *to, std::set<int> *from) {
  int d = ch == 0 ? 1 : kRanks - 1;
  if (ch == 1 && sanitized_build()) *to = *from = {};
  else if (ring) *to = {(rank + d) % kRanks}, *from = {(rank + kRanks - d) % kRanks};
  else *to = *from = {rank ^ 1, rank ^ 2};
}

// Slices went exactly where the file says (host pipes' step counts), and
// none through the ring pipes the built-in collectives use.
int check_traffic(koloComm_t comm, int rank, FileKind kind) {
  int failures = 0;
  const bool ring = kind == kRingFile;
  for (int ch = 0; ch < 2; ch++) {
    uint32_t s = 0, r = 0;
    kt_ring_steps(comm, ch, &s, &r);
    if (s || r) CHILD_FAIL("the ring pipes of channel %d moved %u / %u slices: a built-in program ran", ch, s, r);
    if (kind == kBuiltinsFile) continue;
    std::set<int> to, from;
    file_peers(ring, rank, ch, &to, &from);
    for (int peer = 0; peer < kRanks; peer++) {
      kt_p2p_steps(comm, peer, ch, &s, &r);
      if ((s > 0) != (to.count(peer) > 0) || (r > 0) != (from.count(peer) > 0))
        CHILD_FAIL("channel %d, rank %d: %u slices sent to it and %u received from it, which the file does not say",
                   ch, peer, s, r);
    }
  }
  return failures;
}

int host_child(int rank, const koloUniqueId &id, const std::vector<CollCase> &cases, FileKind kind) {
  int failures = 0;
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRank(&comm, kRanks, id, rank);
  if (res != koloSuccess) {
    CHILD_FAIL("koloCommInitRank: %s: %s", koloGetErrorString(res), koloGetLastError(nullptr));
    return failures;
  }
  failures += run_cases(comm, rank, cases);
  for (int ch = 0; ch < 2 && failures == 0 && kind != kBuiltinsFile; ch++)
    failures += check_program(comm, rank, ch, kind == kRingFile ? 7 : 4);
  if (failures == 0) failures += check_traffic(comm, rank, kind);
  if ((res = koloCommDestroy(comm)) != koloSuccess) CHILD_FAIL("koloCommDestroy: %s", koloGetErrorString(res));
  return failures ? 1 : 0;
}

class SchedFileHost : public ::testing::TestWithParam<const char *> {};

TEST_P(SchedFileHost, EveryElementOnFourProcesses) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const std::string file = schedule_path(GetParam());
  const FileKind kind = std::string(GetParam()).rfind("ring", 0) == 0 ? kRingFile : kRdFile;
  ScopedEnv env("KOLO_SCHEDULE_FILE", file);
  const std::vector<CollCase> cases = all_reduce_cases();
  double t0 = now_ms();
  std::vector<ChildResult> res = run_children_with_id(
      kRanks, [&](int rank, const koloUniqueId &id) { return host_child(rank, id, cases, kind); }, kChildTimeoutMs);
  EXPECT_EQ(children_checked(res, cases.size()), "");
  std::printf("[          ] %zu all-reduce cases of %s on %d processes in %.0f ms\n", cases.size(), GetParam(), kRanks,
              now_ms() - t0);
}

TEST(SchedFileHost, EveryCollectiveFromTheBuiltinsWrittenOut) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const std::string file = write_builtins_file();
  ScopedEnv env("KOLO_SCHEDULE_FILE", file);
  const std::vector<CollCase> cases = every_collective_cases();
  double t0 = now_ms();
  std::vector<ChildResult> res = run_children_with_id(
      kRanks, [&](int rank, const koloUniqueId &id) { return host_child(rank, id, cases, kBuiltinsFile); },
      kChildTimeoutMs);
  unlink(file.c_str());
  EXPECT_EQ(children_checked(res, cases.size()), "");
  std::printf("[          ] %zu cases of 8 collectives on %d processes in %.0f ms\n", cases.size(), kRanks, now_ms() - t0);
}

TEST(SchedFileHost, TheOneshotAllReduceWrittenOut) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const std::string file = write_builtins_file(KOLO_ALGO_ONESHOT);
  ScopedEnv env("KOLO_SCHEDULE_FILE", file);
  const std::vector<CollCase> cases = all_reduce_cases();
  std::vector<ChildResult> res = run_children_with_id(
      kRanks, [&](int rank, const koloUniqueId &id) { return host_child(rank, id, cases, kBuiltinsFile); },
      kChildTimeoutMs);
  unlink(file.c_str());
  EXPECT_EQ(children_checked(res, cases.size()), "");
}

INSTANTIATE_TEST_SUITE_P(Examples, SchedFileHost, ::testing::Values("ring_allreduce_4.sched", "rd_allreduce_4.sched"),
                         [](const ::testing::TestParamInfo<const char *> &p) {
                           return std::string(p.param).substr(0, std::string(p.param).find('_'));
                         });

// ---- refused files ------------------------------------------------------------------

// Every child calls koloCommInitRank (nranks) and must fail with `want`
// and a sentence holding each of `parts`.
void expect_every_rank_refused(int nranks, koloResult_t want, const std::vector<std::string> &parts,
                               const std::function<void(int)> &setup = nullptr) {
  std::vector<ChildResult> res = run_children_with_id(
      kRanks,
      [&](int rank, const koloUniqueId &id) {
        int failures = 0;
        if (setup) setup(rank);
        koloComm_t comm = nullptr;
        koloResult_t r = koloCommInitRank(&comm, nranks, id, rank < nranks ? rank : 0);
        std::string text = koloGetLastError(nullptr);
        if (r != want) CHILD_FAIL("koloCommInitRank returned %s, not %s: %s", koloGetErrorString(r), koloGetErrorString(want), text.c_str());
        for (const std::string &p : parts)
          if (text.find(p) == std::string::npos) CHILD_FAIL("the sentence \"%s\" does not say \"%s\"", text.c_str(), p.c_str());
        if (r == koloSuccess) koloCommDestroy(comm);
        return failures ? 1 : 0;
      },
      kChildTimeoutMs);
  EXPECT_EQ(children_failures(res), "");
}

TEST(SchedFileRefused, TheWrongExampleOnEveryRank) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const std::string file = schedule_path("wrong_rd_allreduce_4.sched");
  ScopedEnv env("KOLO_SCHEDULE_FILE", file);
  expect_every_rank_refused(
      kRanks, koloInvalidArgument,
      {"koloCommInitRank: KOLO_SCHEDULE_FILE: " + file +
       ":8: AllReduce on 4 ranks: deadlock: rank 0 step 2 (recvReduceCopy from rank 2) waits for rank 2 (at its step "
       "2); rank 2 step 2 (recvReduceCopy from rank 0) waits for rank 0 (at its step 2); every other rank has "
       "finished"});
}

// KOLO_TUNING_FILE is compared the same way (core/comm.c, file_differs).
TEST(TuningFileRefused, RanksThatLoadDifferentFiles) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  char a[] = "/tmp/kolo-tune-a.XXXXXX", b[] = "/tmp/kolo-tune-b.XXXXXX";
  int fa = mkstemp(a), fb = mkstemp(b);
  ASSERT_TRUE(fa >= 0 && fb >= 0);
  const std::string ta = "kolo-tuning 1\nlink shm 1 2\n", tb = "kolo-tuning 1\nlink shm 1 3\n";
  ASSERT_EQ(write(fa, ta.data(), ta.size()), (ssize_t)ta.size());
  ASSERT_EQ(write(fb, tb.data(), tb.size()), (ssize_t)tb.size());
  close(fa);
  close(fb);
  ScopedEnv env("KOLO_TUNING_FILE", a);
  expect_every_rank_refused(kRanks, koloInvalidUsage,
                            {"KOLO_TUNING_FILE differs between ranks: rank ",
                             "every rank must load the same tuning file, or they could choose different algorithms"},
                            [&](int rank) {
                              if (rank == 2) setenv("KOLO_TUNING_FILE", b, 1);
                            });
  unlink(a);
  unlink(b);
}

// KOLO_MIN_CHANNEL_BYTES sets how many channels each call uses: ranks that
// differ in it fail init with a sentence naming it, and a negative value
// fails it on its own.
TEST(ChannelBytesRefused, RanksThatDiffer) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  ScopedEnv env("KOLO_MIN_CHANNEL_BYTES", "262144");
  expect_every_rank_refused(kRanks, koloInvalidUsage,
                            {"KOLO_MIN_CHANNEL_BYTES differs between ranks, and must be alike on all", "4096"},
                            [&](int rank) {
                              if (rank == 1) setenv("KOLO_MIN_CHANNEL_BYTES", "4096", 1);
                            });
  ScopedEnv negative("KOLO_MIN_CHANNEL_BYTES", "-1");
  koloComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(koloCommInitAll(comms, 2, nullptr), koloInvalidArgument);
  EXPECT_NE(std::string(koloGetLastError(nullptr)).find("KOLO_MIN_CHANNEL_BYTES = -1 is outside 0..2^62"),
            std::string::npos)
      << koloGetLastError(nullptr);
}

// KOLO_NET_CHUNK_BYTES sets the rounds a call moves in over the network:
// ranks that differ in it fail init with a sentence naming it, and a value
// that is not whole pages fails it on its own.
TEST(NetChunkRefused, RanksThatDifferAndValuesOutOfRange) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  ScopedEnv env("KOLO_NET_CHUNK_BYTES", "65536");
  expect_every_rank_refused(kRanks, koloInvalidUsage,
                            {"KOLO_NET_CHUNK_BYTES differs between ranks, and must be alike on all", "65536"},
                            [&](int rank) {
                              if (rank == 2) setenv("KOLO_NET_CHUNK_BYTES", "0", 1);
                            });
  for (const char *bad : {"5000", "-4096", "2G"}) {
    ScopedEnv wrong("KOLO_NET_CHUNK_BYTES", bad);
    koloComm_t comms[2] = {nullptr, nullptr};
    EXPECT_EQ(koloCommInitAll(comms, 2, nullptr), koloInvalidArgument) << bad;
    EXPECT_NE(std::string(koloGetLastError(nullptr)).find("is neither 0 nor a multiple of 4 KiB in 4 KiB..1 GiB"),
              std::string::npos)
        << koloGetLastError(nullptr);
  }
}

// The rest of the shape (channels, slots, buffer...) must be alike too,
// whatever each host's CPUs and ranks, which ranks may differ in.
TEST(ShapeRefused, RanksThatDifferInSlotsOrChannels) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  ScopedEnv slots("KOLO_NSLOTS", "8"), channels("KOLO_NCHANNELS", "2");
  expect_every_rank_refused(kRanks, koloInvalidUsage, {"has channels=2 slots=", "set KOLO_NCHANNELS, KOLO_NSLOTS"},
                            [&](int rank) {
                              if (rank == 1) setenv("KOLO_NSLOTS", "16", 1);
                            });
  expect_every_rank_refused(kRanks, koloInvalidUsage, {"has channels=", "set KOLO_NCHANNELS, KOLO_NSLOTS"},
                            [&](int rank) {
                              if (rank == 2) setenv("KOLO_NCHANNELS", "3", 1);
                            });
}

TEST(SchedFileRefused, RanksThatLoadDifferentFiles) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const std::string rd = schedule_path("rd_allreduce_4.sched"), ring = schedule_path("ring_allreduce_4.sched");
  ScopedEnv env("KOLO_SCHEDULE_FILE", rd);
  expect_every_rank_refused(
      kRanks, koloInvalidUsage,
      {"KOLO_SCHEDULE_FILE differs between ranks: rank ", "every rank must load the same schedule file"},
      [&](int rank) {
        if (rank == 3) setenv("KOLO_SCHEDULE_FILE", ring.c_str(), 1);
      });
  // one rank with none
  expect_every_rank_refused(kRanks, koloInvalidUsage, {"KOLO_SCHEDULE_FILE differs between ranks: rank "},
                            [&](int rank) {
                              if (rank == 1) unsetenv("KOLO_SCHEDULE_FILE");
                            });
}

TEST(SchedFileRefused, AnotherRankCountOrNoFile) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const std::string rd = schedule_path("rd_allreduce_4.sched");
  {
    ScopedEnv env("KOLO_SCHEDULE_FILE", rd);
    expect_every_rank_refused(2, koloInvalidUsage,
                              {"koloCommInitRank: KOLO_SCHEDULE_FILE=" + rd +
                               " is written for 4 ranks, and this communicator has 2"});
  }
  ScopedEnv env("KOLO_SCHEDULE_FILE", "/nonexistent/x.sched");
  expect_every_rank_refused(
      kRanks, koloSystemError,
      {"koloCommInitRank: KOLO_SCHEDULE_FILE=/nonexistent/x.sched cannot be read: No such file or directory"});
}

// ---- the CUDA executor -----------------------------------------------------------

#ifdef KOLO_HAVE_CUDA
// One case on rank's stream, then its check; "" or what went wrong.
std::string cuda_case(const CollCase &c, int rank, koloComm_t comm, cudaStream_t s, DevArena *arena) {
  Expected e;
  expected_for_rank(c, rank, &e);
  arena->reset();
  DevRankBufs d;
  std::string err = dev_prepare(c, rank, arena, s, &d);
  if (!err.empty()) return err;
  koloResult_t res = dev_issue(c, rank, d, comm, s);
  if (res != koloSuccess) return result_text("koloAllReduce", res, comm);
  bool busy = false;
  err = wait_stream(s, kStreamWaitMs, nullptr, &busy);
  if (busy) arena->freeable = false;
  if (err.empty()) err = async_error_text(comm);
  return err.empty() ? dev_check(c, rank, &d, s, e) : err;
}

int cuda_child(int rank, const koloUniqueId &id, const std::vector<CollCase> &cases, FileKind kind) {
  int failures = 0, ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || cudaSetDevice(rank % ndev) != cudaSuccess) return kSkip;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemCuda;
  cfg.cudaDev = rank % ndev;
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRankConfig(&comm, kRanks, id, rank, &cfg);
  if (res != koloSuccess) {
    CHILD_FAIL("koloCommInitRankConfig: %s: %s", koloGetErrorString(res), koloGetLastError(nullptr));
    return 1;
  }
  cudaStream_t s = nullptr;
  DevArena arena;
  std::string err = cuda_text("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (err.empty()) err = arena.reserve(dev_max_case_bytes(cases));
  if (!err.empty()) CHILD_FAIL("%s", err.c_str());
  size_t passed = 0;
  for (size_t i = 0; i < cases.size() && err.empty(); i++) {
    err = cuda_case(cases[i], rank, comm, s, &arena);
    if (!err.empty()) CHILD_FAIL("%s: %s", cases[i].str().c_str(), err.c_str());
    else passed++;
  }
  std::fprintf(stderr, "%s%zu\n", kCasesCheckedTag, passed);  // the parent counts them
  for (int ch = 0; ch < 2 && failures == 0 && kind != kBuiltinsFile; ch++)
    failures += check_program(comm, rank, ch, kind == kRingFile ? 7 : 4);
  if (!arena.freeable) koloCommAbort(comm);
  else if ((res = koloCommDestroy(comm)) != koloSuccess) CHILD_FAIL("koloCommDestroy: %s", koloGetErrorString(res));
  if (arena.freeable && s) cudaStreamDestroy(s);
  arena.release();
  return failures ? 1 : 0;
}

class SchedFileCuda : public ::testing::TestWithParam<const char *> {};

TEST_P(SchedFileCuda, EveryElementOnFourProcesses) {
  if (tsan_build()) GTEST_SKIP() << "forks ranks (not under TSan)";
  const bool oneshot = GetParam()[0] == '+', builtins = GetParam()[0] == '*' || oneshot;
  const std::string file = oneshot    ? write_builtins_file(KOLO_ALGO_ONESHOT)
                           : builtins ? write_builtins_file()
                                      : schedule_path(GetParam());
  const FileKind kind = builtins ? kBuiltinsFile : std::string(GetParam()).rfind("ring", 0) == 0 ? kRingFile : kRdFile;
  ScopedEnv env("KOLO_SCHEDULE_FILE", file);
  ScopedEnv queues("CUDA_DEVICE_MAX_CONNECTIONS", "32");
  // Each process takes device rank % devices: on the model under its MPS,
  // or a device of its own under its time slices.
  std::vector<std::unique_ptr<ScopedEnv>> gpus;
  for (const auto &kv : model_gpus_for_procs(kRanks))
    gpus.push_back(std::make_unique<ScopedEnv>(kv.first.c_str(), kv.second));
  const std::vector<CollCase> cases = kind == kBuiltinsFile && !oneshot ? every_collective_cases() : all_reduce_cases();
  double t0 = now_ms();
  std::vector<ChildResult> res = run_children_with_id(
      kRanks, [&](int rank, const koloUniqueId &id) { return cuda_child(rank, id, cases, kind); }, kChildTimeoutMs);
  if (kind == kBuiltinsFile) unlink(file.c_str());
  int skipped = 0;
  for (const ChildResult &r : res) skipped += r.exited && r.code == kSkip;
  if (skipped == kRanks) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(children_checked(res, cases.size()), "");
  std::printf("[          ] %zu cases of %s on %d CUDA processes in %.0f ms\n", cases.size(), GetParam(), kRanks,
              now_ms() - t0);
}

// "*": the file of every built-in schedule, every collective's cases;
// "+": the one-shot all-reduce written out (scratch on the device).
INSTANTIATE_TEST_SUITE_P(Examples, SchedFileCuda,
                         ::testing::Values("ring_allreduce_4.sched", "rd_allreduce_4.sched", "*", "+"),
                         [](const ::testing::TestParamInfo<const char *> &p) {
                           return p.param[0] == '*'   ? std::string("builtins")
                                  : p.param[0] == '+' ? std::string("oneshot")
                                                      : std::string(p.param).substr(0, std::string(p.param).find('_'));
                         });
#endif

}  // namespace
