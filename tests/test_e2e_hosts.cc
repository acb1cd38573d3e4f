// test_e2e_hosts.cc - ranks as processes of this machine placed on several
// "hosts" by KOLO_HOSTID (transport/bootstrap.c): ranks with different ids
// talk through the net transport (sockets and the proxy), ranks with the
// same id through shared memory, and the rings group ranks by host and
// rotate per channel (ring/topology.h).
//
// Layouts (host of each rank, interleaved so that host order differs from
// rank order): 2 hosts x 2 ranks, 2 x 3, and 3 hosts of 1, 2 and 2 ranks
// (uneven: hierarchical all-reduce is impossible there, KOLO_ALGO=hier runs
// the ring).  Each layout runs with KOLO_ALGO=ring and =hier (2 x 3 also
// with the cost model's choice; 2 x 2 hier also on non-blocking
// communicators with batches of calls in flight, 2 x 3 hier and the uneven
// ring also with batches of calls in one group), and each child first checks which
// algorithm its communicator picks for an all-reduce (so that a silent
// fallback cannot pass for hier).  HostsConfig: a KOLO_ALGO that names no
// algorithm, or that differs between ranks, fails init naming it.
//
// Cases per run: all-reduce for every op (premul-sum included) x {float32,
// int32} x counts {1, 7, 1003, 100003} x in/out of place and for every op in
// float8e4m3 at 7 and 100003, plus every other collective for float32 sum
// and int32 max at 7 and 100003 elements and for float8e5m2 (premul-sum
// where it reduces) at 100003 (all-to-all, gather, scatter and bcast over
// point-to-point pipes: net ones between hosts); 3 channels, a channel per 4 KiB
// (so that several channels, each on its own rotated ring, run already at
// moderate sizes) and 256 KiB of slots per pipe (chunks of 128 KiB: the
// large counts take several rounds).  Inputs are random (util/coll_ref.h),
// outputs start poisoned, every element is compared with a reference
// computed independently of kolo, guards and untouched inputs are checked
// (util/coll_run.h), and no /dev/shm segment may be left behind.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "core/op.h"
#include "ring/algo.h"
}

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/proc_util.h"

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);
constexpr double kChildTimeoutMs = 300000;

struct Layout {
  const char *name;
  std::vector<int> host_of;  // host index of each rank
  bool uniform;
};

const Layout kLayouts[] = {
    {"2x2", {0, 1, 1, 0}, true},
    {"2x3", {1, 0, 1, 0, 0, 1}, true},
    {"3hosts_1_2_2", {1, 2, 0, 2, 1}, false},
};

struct Param {
  int layout;
  const char *algo;  // KOLO_ALGO, "" for the cost model
  int mode = 0;  // kBlocking, kNonBlocking (config.blocking = 0), kGrouped
};
enum { kBlocking = 0, kNonBlocking = 1, kGrouped = 2 };
const char *const kModeNames[] = {"", "_nb", "_group"};

std::vector<CollCase> host_grid(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  auto add = [&](Coll coll, koloDataType_t t, koloRedOp_t op, size_t count, bool in_place) {
    cases.push_back(make_case(coll, t, op, n, count, in_place, v++));
  };
  for (koloRedOp_t op : kAllOps)
    for (koloDataType_t t : {koloFloat32, koloInt32})
      for (size_t count : {(size_t)1, (size_t)7, (size_t)1003, (size_t)100003})
        for (bool ip : {false, true}) add(Coll::AllReduce, t, op, count, ip);
  for (koloRedOp_t op : kAllOps)
    for (size_t count : {(size_t)7, (size_t)100003}) add(Coll::AllReduce, koloFloat8e4m3, op, count, op == koloMax);
  for (Coll coll : kAllColls) {
    if (coll == Coll::AllReduce) continue;
    for (size_t count : {(size_t)7, (size_t)100003}) {
      add(coll, koloFloat32, koloSum, count, false);
      add(coll, koloInt32, koloMax, count, has_in_place(coll));
    }
    add(coll, koloFloat8e5m2, has_op(coll) ? kPreMulSum : koloSum, 100003, has_in_place(coll));
  }
  for (Coll coll : kPeerColls)  // multi-peer programs: point-to-point pipes, net ones across hosts
    for (size_t count : {(size_t)7, (size_t)100003}) {
      add(coll, koloFloat32, koloSum, count, !has_out_of_place(coll));
      add(coll, koloInt32, koloSum, count, has_in_place(coll));
    }
  return cases;
}

// Non-blocking: batches of calls issued without waiting (each returns
// koloInProgress), then koloCommGetAsyncError until the batch is done, then
// every result checked.  Grouped (blocking comm): each batch is one
// koloGroupStart/End, so the phases of several hierarchical all-reduces and
// other collectives share one executor run.  Like run_cases, it ends by
// saying how many cases passed their check (a failed call returns at once:
// its child fails by its exit status).
int run_cases_batched(koloComm_t comm, int rank, const std::vector<CollCase> &cases, bool grouped) {
  int failures = 0;
  size_t passed = 0;
  const size_t batch = 5;
  for (size_t first = 0; first < cases.size() && failures == 0; first += batch) {
    size_t last = std::min(cases.size(), first + batch);
    std::vector<RankBufs> bufs(last - first);
    for (size_t i = first; i < last; i++) prepare(cases[i], rank, &bufs[i - first]);
    if (grouped && koloGroupStart() != koloSuccess) return failures + 1;
    for (size_t i = first; i < last; i++) {
      koloResult_t res = issue(cases[i], rank, &bufs[i - first], comm);
      if (res != koloInProgress && res != koloSuccess) {
        std::fprintf(stderr, "rank %d: %s: %s\n", rank, cases[i].str().c_str(),
                     result_text(coll_name(cases[i].coll), res, comm).c_str());
        return failures + 1;
      }
    }
    if (grouped) {
      koloResult_t res = koloGroupEnd();
      if (res != koloSuccess) {
        std::fprintf(stderr, "rank %d: batch at case %zu: %s\n", rank, first,
                     result_text("koloGroupEnd", res, comm).c_str());
        return failures + 1;
      }
    }
    koloResult_t async = koloInProgress;
    double t0 = now_ms();
    while (async == koloInProgress && now_ms() - t0 < 120000) {
      if (koloCommGetAsyncError(comm, &async) != koloSuccess) async = koloInternalError;
      if (async == koloInProgress) usleep(200);
    }
    if (async != koloSuccess) {
      std::fprintf(stderr, "rank %d: batch at case %zu: %s: %s\n", rank, first, koloGetErrorString(async),
                   koloGetLastError(comm));
      return failures + 1;
    }
    Expected e;
    for (size_t i = first; i < last; i++) {
      expected_for_rank(cases[i], rank, &e);
      std::string err = check(cases[i], rank, bufs[i - first], e);
      if (err.empty()) {
        passed++;
        continue;
      }
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, cases[i].str().c_str(), err.c_str());
      failures++;
    }
  }
  std::fprintf(stderr, "%s%zu\n", kCasesCheckedTag, passed);
  return failures;
}

// The algorithm a child must see for an all-reduce of `count` float32.
int want_algo(const Layout &l, const char *algo, size_t count) {
  int hosts = 0;
  for (int h : l.host_of) hosts = std::max(hosts, h + 1);
  int n = (int)l.host_of.size();
  // forced (hier where the hosts allow it, else the ring) or the cost model's
  kolo_algo_topo t{n, hosts, l.uniform ? n / hosts : 0, *algo ? kolo_algo_parse(algo) : KOLO_ALGO_AUTO, 0, 0, nullptr, 0, 0, 0};
  // the channels the core gives that call: one per 4 KiB of a rank's share, at most 3
  size_t want = count * 4 / (size_t)n / 4096;
  int nch = want < 1 ? 1 : want > 3 ? 3 : (int)want;
  return kolo_algo_choose(&t, count * 4, nch);
}

int child(int rank, const koloUniqueId &id, const Layout &l, const char *algo, int mode,
          const std::vector<CollCase> &cases) {
  const int n = (int)l.host_of.size();
  setenv("KOLO_HOSTID", ("host-" + std::to_string(l.host_of[(size_t)rank])).c_str(), 1);
  if (*algo) setenv("KOLO_ALGO", algo, 1);
  else unsetenv("KOLO_ALGO");
  setenv("KOLO_NCHANNELS", "3", 1);
  setenv("KOLO_MIN_CHANNEL_BYTES", "4096", 1);
  setenv("KOLO_BUFFSIZE", "262144", 1);
  koloComm_t comm = nullptr;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.blocking = mode == kNonBlocking ? 0 : 1;
  koloResult_t res = koloCommInitRankConfig(&comm, n, id, rank, &cfg);
  // config.blocking = 0: the init goes on after the call returned
  while (res == koloInProgress && koloCommGetAsyncError(comm, &res) == koloSuccess && res == koloInProgress)
    usleep(1000);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommInitRank: %s: %s\n", rank, koloGetErrorString(res),
                 koloGetLastError(nullptr));
    return 2;
  }
  int failures = 0;
  for (size_t count : {(size_t)7, (size_t)100003}) {
    int got = kolo_comm_all_reduce_algo(comm, count, koloFloat32), want = want_algo(l, algo, count);
    if (got != want) {
      std::fprintf(stderr, "rank %d: all-reduce of %zu float32 runs %s, expected %s\n", rank, count,
                   kolo_algo_name(got), kolo_algo_name(want));
      failures++;
    }
  }
  failures += mode == kBlocking ? run_cases(comm, rank, cases)
                                : run_cases_batched(comm, rank, cases, mode == kGrouped);
  res = koloCommDestroy(comm);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommDestroy: %s\n", rank, koloGetErrorString(res));
    failures++;
  }
  return failures ? 1 : 0;
}

class Hosts : public ::testing::TestWithParam<Param> {};

TEST_P(Hosts, Grid) {
  const Layout &l = kLayouts[GetParam().layout];
  const char *algo = GetParam().algo;
  const int mode = GetParam().mode;
  const int n = (int)l.host_of.size();
  std::vector<CollCase> cases = host_grid(n);
  std::set<std::string> before = shm_entries();
  std::vector<pid_t> pids;
  std::string id_error;
  double t0 = now_ms();
  std::vector<ChildResult> res = run_children_with_id(
      n, [&](int rank, const koloUniqueId &id) { return child(rank, id, l, algo, mode, cases); }, kChildTimeoutMs,
      [&](const std::vector<pid_t> &p) { pids = p; }, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_checked(res, cases.size()), "");
  std::vector<std::string> leaks = shm_leaks(before, shm_entries(), pids);
  std::string text;
  for (const std::string &s : leaks) text += " " + s;
  EXPECT_TRUE(leaks.empty()) << "left in /dev/shm:" << text;
  static const char *const modes[] = {"blocking", "non-blocking", "grouped"};
  std::printf("  %zu cases, %s, KOLO_ALGO=%s, %s, in %.0f ms\n", cases.size(), l.name,
              *algo ? algo : "(unset)", modes[mode], now_ms() - t0);
}

INSTANTIATE_TEST_SUITE_P(Hosts, Hosts,
                         ::testing::Values(Param{0, "ring"}, Param{0, "hier"}, Param{1, "ring"},
                                           Param{1, "hier"}, Param{1, ""}, Param{2, "ring"},
                                           Param{2, "hier"}, Param{0, "hier", kNonBlocking},
                                           Param{1, "hier", kGrouped}, Param{2, "ring", kGrouped}),
                         [](const ::testing::TestParamInfo<Param> &p) {
                           return std::string(kLayouts[p.param.layout].name) + "_" +
                                  (*p.param.algo ? p.param.algo : "auto") + kModeNames[p.param.mode];
                         });

// KOLO_ALGO must name an algorithm, and be the same on every rank (ranks
// choosing differently would wait on pipes the others never use).
TEST(HostsConfig, BadAlgoRefused) {
  ScopedEnv algo("KOLO_ALGO", "tree");
  koloComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(koloCommInitAll(comms, 2, nullptr), koloInvalidArgument);
  EXPECT_NE(std::string(koloGetLastError(nullptr)).find("KOLO_ALGO"), std::string::npos)
      << koloGetLastError(nullptr);
}

TEST(HostsConfig, AlgoDiffersBetweenRanks) {
  const int n = 2;
  std::string id_error;
  auto res = run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        setenv("KOLO_ALGO", rank == 0 ? "ring" : "hier", 1);
        koloComm_t comm = nullptr;
        koloResult_t r = koloCommInitRank(&comm, n, id, rank);
        if (r == koloSuccess) {
          std::fprintf(stderr, "rank %d: init succeeded with KOLO_ALGO differing\n", rank);
          koloCommDestroy(comm);
          return 1;
        }
        std::string msg = koloGetLastError(nullptr);
        if (r != koloInvalidUsage || msg.find("KOLO_ALGO") == std::string::npos) {
          std::fprintf(stderr, "rank %d: %s: %s\n", rank, koloGetErrorString(r), msg.c_str());
          return 1;
        }
        return 0;
      },
      60000, nullptr, &id_error);
  EXPECT_EQ(id_error, "");
  EXPECT_EQ(children_failures(res), "");
}

}  // namespace
