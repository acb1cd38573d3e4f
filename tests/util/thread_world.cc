// thread_world.cc - see thread_world.h.
#include "util/thread_world.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <thread>

namespace kt {

ThreadWorld::ThreadWorld(int nranks, Init how, koloConfig_t *config)
    : comms((size_t)nranks, nullptr), pool(nranks) {
  if (how == Init::kInitAll) {
    init_result = config ? koloCommInitAllConfig(comms.data(), nranks, nullptr, config)
                         : koloCommInitAll(comms.data(), nranks, nullptr);
    if (init_result != koloSuccess) {
      init_error = koloGetLastError(nullptr);
      comms.assign((size_t)nranks, nullptr);
    }
    return;
  }
  koloUniqueId id;
  init_result = koloGetUniqueId(&id);
  if (init_result != koloSuccess) {
    init_error = koloGetLastError(nullptr);
    return;
  }
  if (how == Init::kGroupOneThread) {
    init_group(id, config);
    return;
  }
  std::vector<koloResult_t> res((size_t)nranks, koloSuccess);
  std::vector<std::string> errs((size_t)nranks);
  pool.run([&](int r) {
    res[r] = config ? koloCommInitRankConfig(&comms[r], nranks, id, r, config)
                    : koloCommInitRank(&comms[r], nranks, id, r);
    if (res[r] != koloSuccess) {
      comms[r] = nullptr;
      errs[r] = koloGetLastError(nullptr);
    }
  });
  for (int r = 0; r < nranks; r++) {
    if (res[r] == koloSuccess) continue;
    if (init_result == koloSuccess) {
      init_result = res[r];
      init_error = "rank " + std::to_string(r) + ": " + errs[r];
    }
  }
}

// This thread makes every rank inside one group; each init returns at once
// (koloSuccess), koloGroupEnd runs them (koloInProgress with
// config.blocking = 0: then each comm is polled until its init is done).
void ThreadWorld::init_group(const koloUniqueId &id, koloConfig_t *config) {
  const int n = nranks();
  koloGroupStart();
  for (int r = 0; r < n && init_result == koloSuccess; r++) {
    init_result = config ? koloCommInitRankConfig(&comms[r], n, id, r, config) : koloCommInitRank(&comms[r], n, id, r);
    if (init_result != koloSuccess) init_error = "koloCommInitRank in a group, rank " + std::to_string(r) + ": " +
                                                 koloGetLastError(nullptr);
  }
  koloResult_t end = koloGroupEnd();
  if (init_result == koloSuccess && end != koloSuccess && end != koloInProgress) {
    init_result = end;
    init_error = std::string("koloGroupEnd: ") + koloGetLastError(nullptr);
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < n && init_result == koloSuccess; r++) {
    koloResult_t async = koloInProgress;
    while (async == koloInProgress && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
      if (koloCommGetAsyncError(comms[r], &async) != koloSuccess) async = koloInternalError;
      if (async == koloInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (async != koloSuccess) {
      init_result = async;
      init_error = "rank " + std::to_string(r) + ": " + koloGetLastError(comms[r]);
    }
  }
  if (init_result == koloSuccess) return;
  for (koloComm_t &c : comms)
    if (c) koloCommDestroy(c), c = nullptr;  // handles of a failed group init are valid
}

ThreadWorld::~ThreadWorld() {
  for (koloComm_t c : comms)
    if (c) koloCommDestroy(c);
}

GridReport run_grid(ThreadWorld &w, const std::vector<CollCase> &cases, size_t max_failures) {
  GridReport rep;
  const int n = w.nranks();
  std::vector<std::string> errs((size_t)n);
  std::vector<char> call_failed((size_t)n);
  Expected e;
  const bool verbose = std::getenv("KOLO_TEST_VERBOSE") != nullptr;
  std::vector<double> t_call((size_t)n), t_prep((size_t)n), t_check((size_t)n);
  for (const CollCase &c : cases) {
    double t0 = now_ms();
    expected_init(c, &e);
    w.pool.run([&](int r) {  // the ranks' threads share the work
      size_t per = (e.n + (size_t)n - 1) / (size_t)n, b = std::min(e.n, per * (size_t)r);
      expected_fill(c, &e, b, std::min(e.n, b + per));
    });
    double t1 = now_ms();
    w.pool.run([&](int r) {
      RankBufs b;
      double a = now_ms();
      prepare(c, r, &b);
      double bb = now_ms();
      koloResult_t res = issue(c, r, &b, w.comms[r]);
      double cc = now_ms();
      call_failed[r] = res != koloSuccess;
      errs[r] = res != koloSuccess ? result_text(coll_name(c.coll), res, w.comms[r]) : check(c, r, b, e);
      t_prep[r] = bb - a;
      t_call[r] = cc - bb;
      t_check[r] = now_ms() - cc;
    });
    if (verbose)
      std::fprintf(stderr, "%s: expected %.1f ms, rank 0: prepare %.1f call %.1f check %.1f ms, total %.1f\n",
                   c.str().c_str(), t1 - t0, t_prep[0], t_call[0], t_check[0], now_ms() - t0);
    rep.cases++;
    bool bad = false;
    for (int r = 0; r < n; r++) {
      if (errs[r].empty()) continue;
      bad = true;
      if (rep.failures.size() < max_failures)
        rep.failures.push_back(c.str() + ": rank " + std::to_string(r) + ": " + errs[r]);
      rep.call_failed |= call_failed[r] != 0;
    }
    rep.failed_cases += bad;
    if (rep.call_failed) break;
  }
  return rep;
}

// Prepares every rank's buffers, issues every rank's call between one
// koloGroupStart / koloGroupEnd on this thread, then checks every rank.
std::string run_one_thread_group(ThreadWorld &w, const std::vector<CollCase> &cases) {
  const int n = w.nranks();
  std::string errs;
  Expected e;
  for (const CollCase &c : cases) {
    std::vector<RankBufs> bufs((size_t)n);
    for (int r = 0; r < n; r++) prepare(c, r, &bufs[r]);
    koloResult_t res = koloGroupStart();
    if (res != koloSuccess) return result_text("koloGroupStart", res, nullptr);
    std::string issue_errs;
    for (int r = 0; r < n; r++) {
      koloResult_t rr = issue(c, r, &bufs[r], w.comms[r]);
      if (rr != koloSuccess) issue_errs += " rank " + std::to_string(r) + ": " + result_text(coll_name(c.coll), rr, w.comms[r]);
    }
    res = koloGroupEnd();
    if (res != koloSuccess || !issue_errs.empty())
      return c.str() + ": " + result_text("koloGroupEnd", res, w.comms[0]) + issue_errs;
    expected_for(c, &e);
    for (int r = 0; r < n; r++) {
      std::string err = check(c, r, bufs[r], e);
      if (!err.empty()) errs += "\n  " + c.str() + ": rank " + std::to_string(r) + ": " + err;
    }
  }
  return errs;
}

std::string report_text(const GridReport &rep) {
  std::string s = std::to_string(rep.failed_cases) + " of " + std::to_string(rep.cases) +
                  " cases failed" + (rep.call_failed ? " (stopped at a failed call)" : "") + ":";
  for (const std::string &f : rep.failures) s += "\n  " + f;
  return s;
}

std::vector<std::string> run_cases_in_one_group(ThreadWorld &w, const std::vector<CollCase> &cases) {
  std::vector<Expected> exp(cases.size());
  for (size_t i = 0; i < cases.size(); i++) expected_for(cases[i], &exp[i]);
  std::vector<std::string> errs((size_t)w.nranks());
  w.pool.run([&](int r) {
    std::vector<RankBufs> bufs(cases.size());
    for (size_t i = 0; i < cases.size(); i++) prepare(cases[i], r, &bufs[i]);
    koloResult_t res = koloGroupStart();
    for (size_t i = 0; i < cases.size() && res == koloSuccess; i++) res = issue(cases[i], r, &bufs[i], w.comms[r]);
    koloResult_t end = koloGroupEnd();
    if (res == koloSuccess) res = end;
    if (res != koloSuccess) {
      errs[r] = result_text("group", res, w.comms[r]);
      return;
    }
    for (size_t i = 0; i < cases.size(); i++) {
      std::string e = check(cases[i], r, bufs[i], exp[i]);
      if (!e.empty()) errs[r] += "\n    " + cases[i].str() + ": " + e;
    }
  });
  return errs;
}

}  // namespace kt
