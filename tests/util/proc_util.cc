// proc_util.cc - see proc_util.h.
#include "util/proc_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "util/coll_run.h"

namespace kt {

std::string ChildResult::describe() const {
  std::string s = "child " + std::to_string(pid);
  if (killed_by_timeout) s += " was killed after the test's timeout";
  else if (exited) s += " exited with " + std::to_string(code);
  else if (signal) s += " died of signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  if (!output.empty()) s += "; its stderr:\n" + output;
  return s;
}

std::vector<ChildResult> run_children(int n, const std::function<int(int)> &fn, double timeout_ms,
                                      const std::function<void(const std::vector<pid_t> &)> &on_fork) {
  std::vector<ChildResult> res((size_t)n);
  std::vector<int> fds((size_t)n, -1);
  std::vector<pid_t> pids;
  double t0 = now_ms();
  std::fflush(nullptr);
  for (int i = 0; i < n; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) std::abort();
    pid_t pid = fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      dup2(p[1], 2);
      close(p[0]);
      for (int k = 0; k < i; k++) close(fds[k]);
      int code = 3;
      try {
        code = fn(i);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "child %d: exception: %s\n", i, e.what());
      }
      std::fflush(nullptr);
      _exit(code);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    fds[i] = p[0];
    res[i].pid = pid;
    pids.push_back(pid);
  }
  if (on_fork) on_fork(pids);
  int open_fds = n, running = n;
  std::vector<char> reaped((size_t)n, 0);
  while (open_fds > 0 || running > 0) {
    std::vector<pollfd> pf;
    std::vector<int> idx;
    for (int i = 0; i < n; i++)
      if (fds[i] >= 0) {
        pf.push_back({fds[i], POLLIN, 0});
        idx.push_back(i);
      }
    if (!pf.empty()) poll(pf.data(), pf.size(), 20);
    else usleep(2000);
    for (size_t k = 0; k < pf.size(); k++) {
      if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int i = idx[k];
      char buf[4096];
      ssize_t got;
      while ((got = read(fds[i], buf, sizeof buf)) > 0) res[i].output.append(buf, (size_t)got);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        close(fds[i]);
        fds[i] = -1;
        open_fds--;
      }
    }
    for (int i = 0; i < n; i++) {
      if (reaped[i]) continue;
      int st;
      if (waitpid(res[i].pid, &st, WNOHANG) != res[i].pid) continue;
      reaped[i] = 1;
      running--;
      res[i].ms = now_ms() - t0;
      res[i].exited = WIFEXITED(st);
      res[i].code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      res[i].signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
    if (now_ms() - t0 > timeout_ms) {
      for (int i = 0; i < n; i++) {
        if (reaped[i]) continue;
        kill(res[i].pid, SIGKILL);
        res[i].killed_by_timeout = true;
      }
      timeout_ms = 1e300;  // reap them in the next rounds
    }
  }
  return res;
}

std::string gtest_ran(const std::string &output, int tests) {
  const std::string passed = "[  PASSED  ] " + std::to_string(tests) + (tests == 1 ? " test." : " tests.");
  if (output.find("[  SKIPPED ]") != std::string::npos) return "it skipped a test";
  if (output.find(passed) == std::string::npos) return "its output lacks \"" + passed + "\"";
  return "";
}

std::string children_gtest_failures(const std::vector<ChildResult> &res, int tests) {
  std::string s = children_failures(res);
  for (const ChildResult &c : res) {
    std::string why = gtest_ran(c.output, tests);
    if (!why.empty()) s += "child " + std::to_string(c.pid) + ": " + why + "; its output:\n" + c.output + "\n";
  }
  return s;
}

std::string children_checked(const std::vector<ChildResult> &res, size_t cases) {
  std::string s = children_failures(res);
  const std::string said = std::string(kCasesCheckedTag) + std::to_string(cases) + "\n";
  for (size_t i = 0; i < res.size(); i++)
    if (res[i].output.find(said) == std::string::npos)
      s += "\n  rank " + std::to_string(i) + " did not say \"" + said.substr(0, said.size() - 1) + "\": " +
           res[i].describe();
  return s;
}

std::vector<ChildResult> run_children_with_ids(
    int n, int nids, const std::function<int(int, const std::vector<koloUniqueId> &)> &fn, double timeout_ms,
    const std::function<void(const std::vector<pid_t> &)> &on_fork, std::string *id_error) {
  std::vector<int> rd((size_t)n, -1), wr((size_t)n, -1);
  for (int i = 0; i < n; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) std::abort();
    rd[(size_t)i] = p[0];
    wr[(size_t)i] = p[1];
  }
  const size_t bytes = (size_t)nids * sizeof(koloUniqueId);
  auto child = [&](int rank) {
    for (int i = 0; i < n; i++) {
      close(wr[(size_t)i]);
      if (i != rank) close(rd[(size_t)i]);
    }
    std::vector<koloUniqueId> ids((size_t)nids);
    size_t got = 0;
    char *dst = reinterpret_cast<char *>(ids.data());
    while (got < bytes) {
      pollfd pf = {rd[(size_t)rank], POLLIN, 0};
      if (poll(&pf, 1, 60000) <= 0) break;
      ssize_t k = read(rd[(size_t)rank], dst + got, bytes - got);
      if (k <= 0) break;
      got += (size_t)k;
    }
    close(rd[(size_t)rank]);
    if (got != bytes) {
      std::fprintf(stderr, "rank %d: no unique id from the test process\n", rank);
      return 4;
    }
    return fn(rank, ids);
  };
  auto forked = [&](const std::vector<pid_t> &pids) {
    for (int i = 0; i < n; i++) close(rd[(size_t)i]);
    std::vector<koloUniqueId> ids((size_t)nids);
    koloResult_t r = koloSuccess;
    for (int k = 0; k < nids && r == koloSuccess; k++) r = koloGetUniqueId(&ids[(size_t)k]);
    if (r != koloSuccess && id_error) *id_error = koloGetLastError(nullptr);
    for (int i = 0; i < n; i++) {
      if (r == koloSuccess && write(wr[(size_t)i], ids.data(), bytes) != (ssize_t)bytes)
        std::fprintf(stderr, "cannot hand the unique ids to child %d\n", i);
      close(wr[(size_t)i]);
    }
    if (on_fork) on_fork(pids);
  };
  return run_children(n, child, timeout_ms, forked);
}

std::vector<ChildResult> run_children_with_id(
    int n, const std::function<int(int, const koloUniqueId &)> &fn, double timeout_ms,
    const std::function<void(const std::vector<pid_t> &)> &on_fork, std::string *id_error) {
  return run_children_with_ids(
      n, 1, [&](int rank, const std::vector<koloUniqueId> &ids) { return fn(rank, ids[0]); }, timeout_ms, on_fork,
      id_error);
}

std::string children_failures(const std::vector<ChildResult> &res) {
  std::string s;
  for (size_t i = 0; i < res.size(); i++) {
    const ChildResult &r = res[i];
    if (r.exited && r.code == 0 && !r.killed_by_timeout) continue;
    s += "\n  rank " + std::to_string(i) + ": " + r.describe();
  }
  return s;
}

int count_proc_entries(const char *what) {
  DIR *d = opendir((std::string("/proc/self/") + what).c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr) n++;
  closedir(d);
  return n;
}

std::set<std::string> shm_entries() {
  std::set<std::string> out;
  DIR *d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent *e = readdir(d))
    if (std::strncmp(e->d_name, "kolo-", 5) == 0) out.insert(e->d_name);
  closedir(d);
  return out;
}

// kolo-<job hex>-<pid>-<from>-<to>-<tag>: the pid field, or -1.
static long pid_field(const std::string &name) {
  size_t a = name.find('-', 5);
  if (a == std::string::npos) return -1;
  size_t b = name.find('-', a + 1);
  if (b == std::string::npos) return -1;
  return std::strtol(name.substr(a + 1, b - a - 1).c_str(), nullptr, 10);
}

std::vector<std::string> shm_leaks(const std::set<std::string> &before,
                                   const std::set<std::string> &after,
                                   const std::vector<pid_t> &pids) {
  std::vector<std::string> leaks;
  for (const std::string &name : after) {
    if (before.count(name)) continue;
    long pid = pid_field(name);
    bool ours = pids.empty();
    for (pid_t p : pids) ours |= p == pid;
    if (ours) leaks.push_back("/dev/shm/" + name);
  }
  return leaks;
}

ScopedEnv::ScopedEnv(const char *name, const std::string &value) : name_(name) {
  const char *old = getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

void clear_launcher_env() {
  static const char *const vars[] = {"KOLO_RANK",   "KOLO_WORLD_SIZE", "KOLO_ROOT",
                                     "KOLO_SECRET", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                     "SLURM_PROCID", "SLURM_NTASKS",   "SLURM_JOB_ID", "RANK",
                                     "WORLD_SIZE",  "MASTER_ADDR",     "MASTER_PORT", "KOLO_COMM_ID"};
  for (const char *v : vars) unsetenv(v);
}

std::vector<std::pair<std::string, std::string>> model_gpus_for_procs(int n) {
  const char *share = std::getenv("KOLO_SIM_SHARE");
  if (share == nullptr) return {{"KOLO_SIM_SHARE", "mps"}};
  if (std::string(share) == "timeslice") return {{"KOLO_SIM_GPUS", std::to_string(std::max(n, 2))}};
  return {};
}

}  // namespace kt
