// thread_world.h - n ranks as threads of this process, each with its own
// blocking (or non-blocking) host communicator and its own thread, and a grid
// runner on top: for each case the expected result is built once on the
// calling thread, then every rank's thread prepares, calls and checks at the
// same time (a blocking call returns when its result is in place).
#ifndef KOLO_TESTS_UTIL_THREAD_WORLD_H
#define KOLO_TESTS_UTIL_THREAD_WORLD_H

#include <string>
#include <vector>

#include "kolo.h"
#include "util/coll_run.h"

namespace kt {

class ThreadWorld {
 public:
  // kGroupOneThread: this thread calls koloCommInitRank[Config] for every
  // rank between koloGroupStart and koloGroupEnd (then waits for a
  // non-blocking config's inits).
  enum class Init { kInitAll, kInitRankThreads, kGroupOneThread };
  // config == nullptr: the defaults (and KOLO_* variables).
  ThreadWorld(int nranks, Init how = Init::kInitAll, koloConfig_t *config = nullptr);
  ~ThreadWorld();  // koloCommDestroy on every communicator that exists
  ThreadWorld(const ThreadWorld &) = delete;
  ThreadWorld &operator=(const ThreadWorld &) = delete;

  int nranks() const { return (int)comms.size(); }
  bool ok() const { return init_result == koloSuccess; }

  koloResult_t init_result = koloSuccess;
  std::string init_error;  // koloGetLastError(NULL) of a failed init
  std::vector<koloComm_t> comms;
  RankPool pool;

 private:
  void init_group(const koloUniqueId &id, koloConfig_t *config);
};

// Outcome of running a list of cases.
struct GridReport {
  int cases = 0, failed_cases = 0;
  std::vector<std::string> failures;  // the first few, one line each
  bool call_failed = false;           // a call returned an error: the run stopped there
};

// Runs every case on every rank (threads), stopping after the first case in
// which a call returned an error (the communicator is unusable after that).
GridReport run_grid(ThreadWorld &w, const std::vector<CollCase> &cases, size_t max_failures = 12);

// Per case: prepares every rank's buffers, issues every rank's call between
// one koloGroupStart / koloGroupEnd on this thread, then checks every rank;
// "" or what went wrong (NCCL's one-thread-drives-all-ranks pattern).
std::string run_one_thread_group(ThreadWorld &w, const std::vector<CollCase> &cases);

// Every case in one group per rank: each rank's thread prepares all the
// cases, issues them between its own koloGroupStart / koloGroupEnd, then
// checks them; per rank, "" or what went wrong.
std::vector<std::string> run_cases_in_one_group(ThreadWorld &w, const std::vector<CollCase> &cases);

// "k of n cases failed:" and the failures, one per line.
std::string report_text(const GridReport &rep);
#define EXPECT_GRID_OK(rep) EXPECT_EQ((rep).failed_cases, 0) << kt::report_text(rep)
#define ASSERT_GRID_OK(rep) ASSERT_EQ((rep).failed_cases, 0) << kt::report_text(rep)

}  // namespace kt

#endif
