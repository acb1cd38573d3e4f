// test_e2e_procs.cc - end-to-end tests with ranks as processes: the test
// process forks N children, then creates the unique id (koloGetUniqueId
// starts the rendezvous root thread here, after the fork: see
// run_children_with_id) and hands it to them; each child joins with
// koloCommInitRank (or koloCommInitFromEnv with launcher variables) and runs
// a grid.  A child reports failures on stderr and through its exit code; the
// parent asserts that all exit 0 and that /dev/shm holds no
// kolo-* segment of theirs afterwards (kolo unlinks every segment as soon as
// both ends have mapped it).
//
// Grid per N in {1,2,3,4,8}: every collective for float32 sum, int32 max,
// bfloat16 sum, float16 avg, float8e5m2 premul-sum (each rank's op made for
// the call and destroyed as soon as it returned) and float8e4m3 avg at counts
// {0, 1, 7, 4095}, in and out of place; count 1 MiB + 3 for every collective
// x those six at N <= 4 (out of
// place, and in place for float32 sum) and for float32 sum at N = 8; a
// 64 MiB float32 all-reduce at N = 2 and N = 4; all-to-all, gather,
// scatter and bcast at counts {0, 7, 4095} (dtypes in turn) and 1 MiB + 3
// (all-to-all: in all) at N <= 4.  util/coll_run.h says what is checked per
// call.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <string>
#include <vector>

extern "C" {
#include "transport/shm_sweep.h"
}

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/free_port.h"
#include "util/shm_ends.h"
#include "util/proc_util.h"

using namespace kt;

namespace {

// A hang becomes an error after 60 s (children inherit the variable).
const bool kTimeoutSet = (default_test_timeout(60000), true);

constexpr size_t kLarge = (1u << 20) + 3;
constexpr double kChildTimeoutMs = 240000;

struct TypeOp {
  koloDataType_t t;
  koloRedOp_t op;
};
const TypeOp kProcTypes[] = {{koloFloat32, koloSum},       {koloInt32, koloMax},
                             {koloBfloat16, koloSum},      {koloFloat16, koloAvg},
                             {koloFloat8e5m2, kPreMulSum}, {koloFloat8e4m3, koloAvg}};

CollCase make_case(Coll coll, TypeOp to, int n, size_t count, bool in_place, int variant) {
  return kt::make_case(coll, to.t, to.op, n, count, in_place, variant);
}

std::vector<CollCase> proc_grid(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : kAllColls)
    for (const TypeOp &to : kProcTypes) {
      for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)4095})
        for (int ip = 0; ip < (has_in_place(coll) ? 2 : 1); ip++)
          cases.push_back(make_case(coll, to, n, count, ip == 1, v++));
      if (sanitized_build()) continue;
      bool f32sum = to.t == koloFloat32 && to.op == koloSum;
      if (n <= 4 || f32sum) cases.push_back(make_case(coll, to, n, kLarge, false, v++));
      if (f32sum && has_in_place(coll)) cases.push_back(make_case(coll, to, n, kLarge, true, v++));
    }
  // all-to-all, gather, scatter, bcast: the dtypes in turn, smaller counts
  for (Coll coll : kPeerColls) {
    for (size_t count : {(size_t)0, (size_t)7, (size_t)4095})
      for (int ip = has_out_of_place(coll) ? 0 : 1; ip <= (has_in_place(coll) ? 1 : 0); ip++, v++)
        cases.push_back(make_case(coll, kProcTypes[v % 4], n, count, ip == 1, v));
    if (!sanitized_build() && n <= 4)
      cases.push_back(make_case(coll, kProcTypes[0], n, coll == Coll::AlltoAll ? kLarge / (size_t)n : kLarge,
                                coll == Coll::Bcast, v++));
  }
  return cases;
}

// Child body: join as `rank` of n with koloCommInitRank and run the cases.
int child_init_rank(int rank, int n, const koloUniqueId &id, const std::vector<CollCase> &cases) {
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRank(&comm, n, id, rank);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommInitRank: %s: %s\n", rank, koloGetErrorString(res),
                 koloGetLastError(nullptr));
    return 2;
  }
  int failures = run_cases(comm, rank, cases);
  res = koloCommDestroy(comm);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommDestroy: %s\n", rank, koloGetErrorString(res));
    failures++;
  }
  return failures ? 1 : 0;
}

std::string leaks_text(const std::vector<std::string> &leaks) {
  std::string s;
  for (const std::string &l : leaks) s += " " + l;
  return s;
}

// Forks n ranks running `body`, asserts they all exit 0 having checked
// `cases` cases (run_cases says how many) and leave no kolo-* segment in
// /dev/shm.
void run_ranks(int n, size_t cases, const std::function<int(int)> &body) {
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  std::vector<ChildResult> res =
      run_children(n, body, kChildTimeoutMs, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_EQ(children_checked(res, cases), "");
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm:" << leaks_text(leaks);
}

// The same, but the children are forked before the unique id (and its root
// thread) exists; see run_children_with_id.
void run_ranks_with_id(int n, size_t cases, const std::function<int(int, const koloUniqueId &)> &body) {
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  std::string id_error;
  std::vector<ChildResult> res = run_children_with_id(
      n, body, kChildTimeoutMs, [&](const std::vector<pid_t> &p) { pids = p; }, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_checked(res, cases), "");
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm:" << leaks_text(leaks);
}

class Procs : public ::testing::TestWithParam<int> {};

TEST_P(Procs, Grid) {
  const int n = GetParam();
  std::vector<CollCase> cases = proc_grid(n);
  run_ranks_with_id(n, cases.size(),
                    [&](int rank, const koloUniqueId &id) { return child_init_rank(rank, n, id, cases); });
}

INSTANTIATE_TEST_SUITE_P(Procs, Procs, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "procs";
                         });

class ProcsHuge : public ::testing::TestWithParam<int> {};

TEST_P(ProcsHuge, AllReduce64MiBFloat32) {
  if (sanitized_build()) GTEST_SKIP() << "64 MiB skipped in sanitizer builds (KOLO_TEST_FULL=1 runs it)";
  const int n = GetParam();
  std::vector<CollCase> cases = {
      make_case(Coll::AllReduce, {koloFloat32, koloSum}, n, (64u << 20) / 4, false, 1)};
  run_ranks_with_id(n, cases.size(),
                    [&](int rank, const koloUniqueId &id) { return child_init_rank(rank, n, id, cases); });
}

INSTANTIATE_TEST_SUITE_P(Procs, ProcsHuge, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int> &p) {
                           return std::to_string(p.param) + "procs";
                         });

// ---- forking after kolo was used in the parent ---------------------------------

// A program that made (and destroyed) communicators among its threads, then
// forks worker processes that form a job of their own: each child is a
// separate process, so pipes between them must be shared memory, not the
// plain pointers of ranks in one process.
TEST(ProcsAfterThreads, ForkAfterCommunicatorsInParent) {
  {
    koloComm_t comms[2];
    ASSERT_EQ(koloCommInitAll(comms, 2, nullptr), koloSuccess) << koloGetLastError(nullptr);
    for (koloComm_t c : comms) koloCommDestroy(c);
  }
  const int n = 3;
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : kAllColls) cases.push_back(make_case(coll, kProcTypes[v % 4], n, 4095, false, v)), v++;
  ScopedEnv timeout("KOLO_TIMEOUT_MS", "5000");  // a hang fails in 5 s
  run_ranks_with_id(n, cases.size(),
                    [&](int rank, const koloUniqueId &id) { return child_init_rank(rank, n, id, cases); });
}

// ---- koloCommInitFromEnv ------------------------------------------------------

// Child body: set the launcher's variables, join with koloCommInitFromEnv,
// check rank and size, run `cases` (made in the parent, which counts what
// each child checked).
int child_from_env(int rank, int n, const std::vector<std::pair<std::string, std::string>> &vars,
                   const std::vector<CollCase> &cases) {
  clear_launcher_env();
  for (const auto &kv : vars) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitFromEnv(&comm, nullptr);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommInitFromEnv: %s: %s\n", rank, koloGetErrorString(res),
                 koloGetLastError(nullptr));
    return 2;
  }
  int failures = 0, count = -1, me = -1;
  if (koloCommCount(comm, &count) != koloSuccess || count != n) {
    std::fprintf(stderr, "rank %d: koloCommCount says %d, want %d\n", rank, count, n);
    failures++;
  }
  if (koloCommUserRank(comm, &me) != koloSuccess || me != rank) {
    std::fprintf(stderr, "rank %d: koloCommUserRank says %d\n", rank, me);
    failures++;
  }
  failures += run_cases(comm, rank, cases);
  koloCommDestroy(comm);
  return failures ? 1 : 0;
}

using EnvFn = std::function<std::vector<std::pair<std::string, std::string>>(int rank, int n, int port)>;

void from_env(int n, const EnvFn &env) {
  int port = kt_free_port();
  ASSERT_GT(port, 0);
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : kAllColls)
    for (size_t count : {(size_t)1, (size_t)4095, (size_t)100003})
      cases.push_back(make_case(coll, kProcTypes[v % 4], n, count, v % 2 == 1 && has_in_place(coll), v)), v++;
  run_ranks(n, cases.size(), [&](int rank) { return child_from_env(rank, n, env(rank, n, port), cases); });
}

TEST(ProcsFromEnv, KoloVariables) {
  from_env(3, [](int rank, int n, int port) {
    return std::vector<std::pair<std::string, std::string>>{
        {"KOLO_ROOT", "127.0.0.1:" + std::to_string(port)},
        {"KOLO_RANK", std::to_string(rank)},
        {"KOLO_WORLD_SIZE", std::to_string(n)},
        {"KOLO_SECRET", "00112233445566778899aabbccddeeff"}};
  });
}

TEST(ProcsFromEnv, OpenMpiVariables) {
  from_env(4, [](int rank, int n, int port) {
    return std::vector<std::pair<std::string, std::string>>{
        {"KOLO_ROOT", "127.0.0.1:" + std::to_string(port)},
        {"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
        {"OMPI_COMM_WORLD_SIZE", std::to_string(n)}};
  });
}

TEST(ProcsFromEnv, SlurmVariables) {
  from_env(3, [](int rank, int n, int port) {
    return std::vector<std::pair<std::string, std::string>>{
        {"KOLO_ROOT", "127.0.0.1:" + std::to_string(port)},
        {"SLURM_PROCID", std::to_string(rank)},
        {"SLURM_NTASKS", std::to_string(n)},
        {"SLURM_JOB_ID", "4242"}};
  });
}

TEST(ProcsFromEnv, TorchrunVariables) {
  from_env(2, [](int rank, int n, int port) {
    return std::vector<std::pair<std::string, std::string>>{
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port)},
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(n)}};
  });
}

// ---- KOLO_COMM_ID (NCCL_COMM_ID): each process makes the id itself ---------

// Child body: no id is passed between the processes; each one's
// koloGetUniqueId reads KOLO_COMM_ID, and rank 0 starts the root at init.
int child_comm_id(int rank, int n, int port, const std::vector<CollCase> &cases) {
  clear_launcher_env();
  setenv("KOLO_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
  setenv("KOLO_SECRET", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", 1);
  koloUniqueId id;
  koloComm_t comm = nullptr;
  koloResult_t res = koloGetUniqueId(&id);
  if (res == koloSuccess) res = koloCommInitRank(&comm, n, id, rank);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: KOLO_COMM_ID init: %s: %s\n", rank, koloGetErrorString(res),
                 koloGetLastError(nullptr));
    return 2;
  }
  int count = -1, me = -1, failures = 0;
  if (koloCommCount(comm, &count) != koloSuccess || count != n || koloCommUserRank(comm, &me) != koloSuccess ||
      me != rank) {
    std::fprintf(stderr, "rank %d: count %d rank %d\n", rank, count, me);
    failures++;
  }
  failures += run_cases(comm, rank, cases);
  koloCommDestroy(comm);
  return failures ? 1 : 0;
}

TEST(ProcsCommId, EveryProcessComputesTheId) {
  const int n = 3;
  int port = kt_free_port();
  ASSERT_GT(port, 0);
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : kAllColls) cases.push_back(make_case(coll, kProcTypes[v % 4], n, 1001, false, v)), v++;
  run_ranks(n, cases.size(), [&](int rank) { return child_comm_id(rank, n, port, cases); });
}

TEST(ProcsCommId, NotHostPortIsNamed) {
  ScopedEnv at("KOLO_COMM_ID", "no-port-here");
  koloUniqueId id;
  EXPECT_EQ(koloGetUniqueId(&id), koloInvalidArgument);
  EXPECT_NE(std::string(koloGetLastError(nullptr)).find("KOLO_COMM_ID=no-port-here is not host:port"),
            std::string::npos)
      << koloGetLastError(nullptr);
}

// ==== NCCL 2.28 calls: scalable init, shrink after a death ==========

void run_ranks_with_ids(int n, int nids, size_t cases,
                        const std::function<int(int, const std::vector<koloUniqueId> &)> &body) {
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  std::string id_error;
  std::vector<ChildResult> res = run_children_with_ids(
      n, nids, body, kChildTimeoutMs, [&](const std::vector<pid_t> &p) { pids = p; }, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_checked(res, cases), "");
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm:" << leaks_text(leaks);
}

// koloCommInitRankScalable: n processes meet through nids roots (made by the
// test process: each root gets only its block of ranks, the others forward
// theirs to the first), then every collective, checked, and nothing left.
class ProcsScalable : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ProcsScalable, EveryCollective) {
  auto [n, nids] = GetParam();
  std::vector<CollCase> cases = sample_cases(n, {1, 4095, 100003});
  run_ranks_with_ids(n, nids, cases.size(), [&](int rank, const std::vector<koloUniqueId> &ids) {
    std::vector<koloUniqueId> mine = ids;
    koloComm_t comm = nullptr;
    koloResult_t res = koloCommInitRankScalable(&comm, n, rank, nids, mine.data(), nullptr);
    if (res != koloSuccess) {
      std::fprintf(stderr, "rank %d: koloCommInitRankScalable: %s: %s\n", rank, koloGetErrorString(res),
                   koloGetLastError(nullptr));
      return 2;
    }
    int failures = run_cases(comm, rank, cases);
    koloCommDestroy(comm);
    return failures ? 1 : 0;
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, ProcsScalable,
                         ::testing::Values(std::make_tuple(5, 2), std::make_tuple(7, 3), std::make_tuple(3, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>> &p) {
                           return std::to_string(std::get<0>(p.param)) + "procs" + std::to_string(std::get<1>(p.param)) +
                                  "ids";
                         });

// 4 processes (timeout 5 s); after a warm-up all-reduce rank 2 is killed
// (SIGKILL).  Default mode: the survivors' next all-reduce fails naming
// rank 2, then they shrink.  Abort mode (non-blocking parent): they issue an
// all-reduce and shrink at once, with KOLO_SHRINK_ABORT.  Either way the
// shrink returns within the bound, the survivors are ranks 0, 1, 2 of a new
// communicator in the parent's order, every collective on it is right, and
// nothing is left in /dev/shm.
class ProcsShrink : public ::testing::TestWithParam<int> {};

int shrink_child(int rank, const koloUniqueId &id, int flags, const std::vector<CollCase> &cases) {
  const int n = 4;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.timeoutMs = 5000;
  cfg.blocking = flags == KOLO_SHRINK_ABORT ? 0 : 1;
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRankConfig(&comm, n, id, rank, &cfg);
  while (res == koloInProgress && koloCommGetAsyncError(comm, &res) == koloSuccess && res == koloInProgress)
    usleep(1000);
  float one = 1, sum = 0;
  if (res == koloSuccess) res = koloAllReduce(&one, &sum, 1, koloFloat32, koloSum, comm, nullptr);
  while (res == koloInProgress && koloCommGetAsyncError(comm, &res) == koloSuccess && res == koloInProgress)
    usleep(1000);
  if (res != koloSuccess || sum != 4) {
    std::fprintf(stderr, "rank %d: warm-up: %s: %s (sum %g)\n", rank, koloGetErrorString(res), koloGetLastError(comm), sum);
    return 2;
  }
  if (rank == 2) raise(SIGKILL);
  std::vector<float> x(1 << 16, 1.0f);
  res = koloAllReduce(x.data(), x.data(), x.size(), koloFloat32, koloSum, comm, nullptr);
  if (flags == KOLO_SHRINK_DEFAULT && (res == koloSuccess || !strstr(koloGetLastError(comm), "rank 2"))) {
    std::fprintf(stderr, "rank %d: the all-reduce with a dead rank 2 returned %s: %s\n", rank, koloGetErrorString(res),
                 koloGetLastError(comm));
    return 1;
  }
  int excluded = 2;
  koloComm_t sub = nullptr;
  double t0 = now_ms();
  koloConfig_t sub_cfg = cfg;  // abort mode: the new communicator blocks (default: inherited)
  sub_cfg.blocking = 1;
  res = koloCommShrink(comm, &excluded, 1, &sub, flags == KOLO_SHRINK_ABORT ? &sub_cfg : nullptr, flags);
  while (res == koloInProgress && koloCommGetAsyncError(sub, &res) == koloSuccess && res == koloInProgress)
    usleep(1000);
  double ms = now_ms() - t0;
  int failures = 0, newrank = -1, count = -1;
  if (res != koloSuccess || ms > 10000) {
    std::fprintf(stderr, "rank %d: koloCommShrink: %s after %.0f ms: %s\n", rank, koloGetErrorString(res), ms,
                 koloGetLastError(comm));
    return 1;
  }
  koloCommUserRank(sub, &newrank);
  koloCommCount(sub, &count);
  if (newrank != (rank < 2 ? rank : rank - 1) || count != 3) {
    std::fprintf(stderr, "rank %d: new rank %d of %d\n", rank, newrank, count);
    failures++;
  }
  if (failures == 0) failures += run_cases(sub, newrank, cases);
  koloCommDestroy(sub);
  koloCommDestroy(comm);
  return failures ? 1 : 0;
}

TEST_P(ProcsShrink, AfterAKilledRank) {
  const int flags = GetParam();
  std::vector<CollCase> cases = sample_cases(3, {1, 4095, 100003});
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  auto res = run_children_with_id(4, [&](int rank, const koloUniqueId &id) { return shrink_child(rank, id, flags, cases); },
                                  120000, [&](const std::vector<pid_t> &p) { pids = p; });
  EXPECT_EQ(res[2].signal, SIGKILL) << res[2].describe();
  // each survivor exits 0 having checked every case on the new communicator
  for (int r : {0, 1, 3}) EXPECT_EQ(children_checked({res[r]}, cases.size()), "") << "rank " << r;
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm:" << leaks_text(leaks);
}

INSTANTIATE_TEST_SUITE_P(Procs, ProcsShrink, ::testing::Values(KOLO_SHRINK_DEFAULT, KOLO_SHRINK_ABORT),
                         [](const ::testing::TestParamInfo<int> &p) { return p.param ? "Abort" : "Default"; });

}  // namespace

// A receiver killed between creating its segment and its sender mapping it
// leaves a name that only a sweep can find.  kolo_shm_sweep_stale removes
// such a name once its creator is gone and it is older than the bound, and
// keeps a young one (it may be another pid namespace's, still connecting),
// one whose creator lives, and names that are not a segment's.
TEST(ShmSweep, RemovesOnlyOldNamesOfDeadCreators) {
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  struct Name {
    std::string name;
    bool old, swept;
  };
  unsigned long long job = 0x5eed00000000ull | (unsigned)getpid();
  auto segment = [&](pid_t creator, int tag) {
    char n[80];
    snprintf(n, sizeof n, "kolo-%016llx-%d-1-0-%x", job, (int)creator, tag);
    return std::string(n);
  };
  const std::vector<Name> names = {{segment(dead, 1), true, true},
                                   {segment(dead, 2), false, false},
                                   {segment(getppid(), 3), true, false},
                                   {segment(dead, 4) + "-x", true, false}};
  for (const Name &n : names) {
    int fd = shm_open(("/" + n.name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << n.name << ": " << strerror(errno);
    struct timespec when[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
    if (n.old) {
      EXPECT_EQ(futimens(fd, when), 0) << strerror(errno);
    }
    close(fd);
  }
  EXPECT_GE(kolo_shm_sweep_stale("/dev/shm", 600), 1);
  for (const Name &n : names) {
    bool there = access(("/dev/shm/" + n.name).c_str(), F_OK) == 0;
    EXPECT_EQ(there, !n.swept) << n.name;
    if (there) shm_unlink(("/" + n.name).c_str());
  }
}

// A receiver killed or stopped after making its segment, before its sender
// mapped it, would leave the name for good; the sender, giving up on that
// pipe, removes it.  Both ends must spell the name alike: the sender's
// abandon removes its own pipe's name and no other's.
TEST(ShmAbandon, ASenderThatGivesUpRemovesOnlyItsPipesName) {
  uint64_t job = 0xab0d00000000ull | (unsigned)getpid();
  kt_shm_receiver *mine = kt_shm_receiver_make(job, 0, 1, 0x2001);
  kt_shm_receiver *other = kt_shm_receiver_make(job, 2, 1, 0x2001);
  ASSERT_NE(mine, nullptr);
  ASSERT_NE(other, nullptr);
  std::string mine_path = std::string("/dev/shm") + kt_shm_receiver_name(mine);
  std::string other_path = std::string("/dev/shm") + kt_shm_receiver_name(other);
  ASSERT_EQ(access(mine_path.c_str(), F_OK), 0) << mine_path;
  kt_shm_sender_abandon(job, 0, 1, getpid(), 0x2002); /* another tag: not this pipe */
  kt_shm_sender_abandon(job, 0, 1, getpid() + 1, 0x2001); /* another creator */
  EXPECT_EQ(access(mine_path.c_str(), F_OK), 0) << mine_path;
  kt_shm_sender_abandon(job, 0, 1, getpid(), 0x2001);
  EXPECT_NE(access(mine_path.c_str(), F_OK), 0) << mine_path << " outlived its sender's abandon";
  EXPECT_EQ(access(other_path.c_str(), F_OK), 0) << other_path << " is another sender's";
  kt_shm_sender_abandon(job, 0, 1, getpid(), 0x2001); /* gone already: no harm */
  kt_shm_receiver_close(mine);
  kt_shm_receiver_close(other);
  EXPECT_NE(access(other_path.c_str(), F_OK), 0) << other_path;
}
