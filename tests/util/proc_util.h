// proc_util.h - ranks as processes: forking children that report through
// their exit code and stderr, /dev/shm leak checks (free TCP ports: util/free_port.h).
//
// Children are forked from the test process (after any koloGetUniqueId, whose
// root thread stays in the parent); each runs a function and _exit()s with
// its return value, never returning into the test framework.  Their stderr
// goes to a pipe the parent reads, so failures show up in the test's output.
#ifndef KOLO_TESTS_UTIL_PROC_UTIL_H
#define KOLO_TESTS_UTIL_PROC_UTIL_H

#include <sys/types.h>

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kolo.h"

namespace kt {

struct ChildResult {
  pid_t pid = -1;
  bool exited = false;  // WIFEXITED
  int code = -1;        // exit code when exited
  int signal = 0;       // terminating signal, else 0
  bool killed_by_timeout = false;
  double ms = 0;        // from fork to reaping
  std::string output;   // what the child wrote to stderr
  std::string describe() const;
};

// Forks n children; child i runs fn(i) and exits with its return value
// (exit code 3 if it throws).  Waits for all of them; children still running
// after timeout_ms are killed (SIGKILL) and marked killed_by_timeout.
// `on_fork` (optional) is called in the parent with the pids once all are
// forked.
std::vector<ChildResult> run_children(int n, const std::function<int(int)> &fn, double timeout_ms,
                                      const std::function<void(const std::vector<pid_t> &)> &on_fork = nullptr);

// Like run_children, but forks the children first and only then makes the
// unique id (koloGetUniqueId starts the rendezvous root thread here) and hands
// it to each child through a pipe.  Forking while that thread runs can
// deadlock a child: a fork copies locks another thread holds, and ASan's
// allocator (unlike glibc's malloc) is not made fork-safe.  A child whose id
// does not arrive within 60 s exits with 4; when koloGetUniqueId fails, every
// child exits with 4 and *id_error (if given) says why.
std::vector<ChildResult> run_children_with_id(
    int n, const std::function<int(int, const koloUniqueId &)> &fn, double timeout_ms,
    const std::function<void(const std::vector<pid_t> &)> &on_fork = nullptr,
    std::string *id_error = nullptr);

// The same with nids unique ids (koloCommInitRankScalable), made by nids
// koloGetUniqueId calls here after the fork: nids rendezvous roots.
std::vector<ChildResult> run_children_with_ids(
    int n, int nids, const std::function<int(int, const std::vector<koloUniqueId> &)> &fn, double timeout_ms,
    const std::function<void(const std::vector<pid_t> &)> &on_fork = nullptr, std::string *id_error = nullptr);

// "" when every child exited with 0, else one line per child that did not.
std::string children_failures(const std::vector<ChildResult> &res);

// "" when a child's GoogleTest output says it ran and passed exactly
// `tests` tests and skipped none, else what it said instead.  A child that
// exits 0 may have run nothing (a filter that matches no test, a helper
// test that skipped): its exit status alone does not say it checked.
std::string gtest_ran(const std::string &output, int tests);
// children_failures, and gtest_ran(tests) for each child's output.
std::string children_gtest_failures(const std::vector<ChildResult> &res, int tests);

// "" when every child exited with 0 and said (run_cases, coll_run.h) that
// `cases` cases passed their check, else one line per child that did not.
std::string children_checked(const std::vector<ChildResult> &res, size_t cases);

// Entries of /proc/self/<what>: "task" counts this process's threads, "fd"
// its open descriptors, each with "." and ".." (and, for fd, the one that
// reads it): compare two counts, never take one for a number of threads or
// descriptors.  -1 when the directory cannot be read.
int count_proc_entries(const char *what);
inline int count_fds() { return count_proc_entries("fd"); }
inline int count_threads() { return count_proc_entries("task"); }

// Names of /dev/shm entries that start with "kolo-".
std::set<std::string> shm_entries();
// Entries of `after` not in `before` that belong to one of `pids` (kolo names
// its segments kolo-<job>-<pid>-...), and those of any pid if pids is empty.
std::vector<std::string> shm_leaks(const std::set<std::string> &before,
                                   const std::set<std::string> &after,
                                   const std::vector<pid_t> &pids);

// Sets an environment variable for the scope (forked children inherit it;
// koloGetUniqueId's root thread reads KOLO_TIMEOUT_MS when started).
class ScopedEnv {
 public:
  ScopedEnv(const char *name, const std::string &value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Ranks as processes on the CUDA model's GPUs take device rank % devices,
// and ranks of different processes on one GPU need MPS (kolo refuses them
// without).  The variables that let n such processes run: the model's MPS
// unless KOLO_SIM_SHARE says otherwise, and under its time slices a device
// per process.  (The model's own variables: a GPU ignores them.)
std::vector<std::pair<std::string, std::string>> model_gpus_for_procs(int n);

// Removes the launcher variables koloCommInitFromEnv reads (KOLO_RANK, OMPI_*,
// SLURM_*, RANK, MASTER_ADDR, ...) from this process's environment.
void clear_launcher_env();

}  // namespace kt

#endif
