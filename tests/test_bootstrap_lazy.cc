// test_bootstrap_lazy.cc - the bootstrap's links made when first needed and
// its allgather in log2(n) rounds (transport/bootstrap_mesh.c,
// bootstrap_gather.c), with ranks as threads of this process: every pair
// connecting to each other at the same moment, a peer that is busy
// elsewhere, the allgather on 1..13 ranks with every entry checked and the
// links each rank holds bounded by 2 ceil(log2 n), a rank that dies in the
// middle of an allgather named by the others, and strangers at a rank's
// listener refused and logged, and a process out of descriptors named with
// its RLIMIT_NOFILE.  Every test ends with a leak check.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "common/log.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_int.h"
}

#include "util/proc_util.h"
#include "util/time_scale.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

using kt::count_fds;

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

kolo_uid start_root(int timeout_ms) {
  sockaddr_storage lo;
  memset(&lo, 0, sizeof lo);
  auto *a = reinterpret_cast<sockaddr_in *>(&lo);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  kolo_uid uid;
  kolo_errbuf eb{};
  EXPECT_EQ(kolo_bootstrap_root_start(&lo, nullptr, timeout_ms, &uid, &eb), koloSuccess) << eb.msg;
  return uid;
}

using RankBody = std::function<void(kolo_bootstrap *, int)>;

// nranks ranks as threads: init, body, destroy (unless the body did).  The
// inits must succeed.
void run_job(int nranks, int timeout_ms, const RankBody &body) {
  kolo_uid uid = start_root(timeout_ms);
  std::vector<std::thread> ts;
  for (int r = 0; r < nranks; r++)
    ts.emplace_back([&, r] {
      kolo_errbuf eb{};
      kolo_bootstrap *bs = nullptr;
      koloResult_t res = kolo_bootstrap_init(&uid, r, nranks, timeout_ms, &eb, &bs);
      ASSERT_EQ(res, koloSuccess) << "rank " << r << ": " << eb.msg;
      body(bs, r);
    });
  for (auto &t : ts) t.join();
}

// Lets n threads start something at the same moment.
class StartLine {
 public:
  explicit StartLine(int n) : left_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lk(mu_);
    if (--left_ == 0) cv_.notify_all();
    else cv_.wait(lk, [this] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

class BootstrapLazy : public ::testing::Test {
 protected:
  // Threads stand for processes here: their links are made on first use,
  // as between processes.
  void SetUp() override {
    setenv("KOLO_BOOTSTRAP_PROCESS_LINKS", "0", 1);
    fds_before_ = count_fds();
  }
  void TearDown() override {
    unsetenv("KOLO_BOOTSTRAP_PROCESS_LINKS");
    auto t0 = Clock::now();  // roots close theirs just after the job formed
    while (count_fds() != fds_before_ && ms_since(t0) < kt_ms(8000)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(count_fds(), fds_before_) << "file descriptors leaked";
  }
  int fds_before_ = 0;
};

// ---- connections made when first needed --------------------------------------------

// After init every rank of 16 sends to every other at the same moment, so
// that each pair connects both ways at once (besides the 2 log2 n partners
// init linked), then receives from each: every message arrives, and each
// rank ends with exactly one link per peer, never two half connections.
TEST_F(BootstrapLazy, EveryPairConnectingBothWaysAtOnceEndsWithOneWorkingLink) {
  const int n = 16;
  StartLine go(n);
  std::atomic<int> checked{0};
  run_job(n, 20000, [&](kolo_bootstrap *bs, int r) {
    EXPECT_LE(kolo_bootstrap_links(bs), 2 * ceil_log2(n));
    go.arrive_and_wait();
    for (int i = 1; i < n; i++) {
      int peer = (r + i) % n, word = r * 1000 + peer;
      ASSERT_EQ(kolo_bootstrap_send(bs, peer, 77, &word, sizeof word), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    }
    for (int i = 1; i < n; i++) {
      int peer = (r + n - i) % n, word = -1;
      ASSERT_EQ(kolo_bootstrap_recv(bs, peer, 77, &word, sizeof word), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
      EXPECT_EQ(word, peer * 1000 + r);
    }
    EXPECT_EQ(kolo_bootstrap_links(bs), n - 1) << "rank " << r;
    EXPECT_EQ(kolo_bootstrap_dead_peer(bs), -1);
    ASSERT_EQ(kolo_bootstrap_barrier(bs, 78), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    checked++;
    kolo_bootstrap_destroy(bs);
  });
  EXPECT_EQ(checked.load(), n);
}

// Two ranks that are no partners of each other (0 and 3 of 8) connect to
// each other at the same moment, 20 times over in fresh jobs: the pair ends
// with one link both ways and messages in both directions.
TEST_F(BootstrapLazy, TwoRanksConnectingToEachOtherAtOnce) {
  for (int round = 0; round < 20; round++) {
    StartLine go(2);
    run_job(8, 20000, [&](kolo_bootstrap *bs, int r) {
      if (r == 0 || r == 3) {
        int peer = 3 - r, links = kolo_bootstrap_links(bs), word = r;
        EXPECT_EQ(kolo_bootstrap_peer_dead(bs, peer), KOLO_PEER_ALIVE);
        go.arrive_and_wait();
        ASSERT_EQ(kolo_bootstrap_send(bs, peer, 5, &word, sizeof word), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
        ASSERT_EQ(kolo_bootstrap_recv(bs, peer, 5, &word, sizeof word), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
        EXPECT_EQ(word, peer);
        EXPECT_EQ(kolo_bootstrap_links(bs), links + 1);
      }
      ASSERT_EQ(kolo_bootstrap_barrier(bs, 6), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
      kolo_bootstrap_destroy(bs);
    });
  }
}

// A rank busy elsewhere for a while (not in the bootstrap) takes a new
// connection when it next waits: the sender's connect waits for it.
TEST_F(BootstrapLazy, PeerBusyElsewhereAcceptsWhenItNextWaits) {
  run_job(8, 20000, [&](kolo_bootstrap *bs, int r) {
    int word = 42;
    if (r == 0) {
      ASSERT_EQ(kolo_bootstrap_send(bs, 3, 9, &word, sizeof word), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    }
    if (r == 3) {
      // Paces only: whether rank 3 is busy when the connect comes or not,
      // the word must arrive; the sleep makes the busy case the usual one.
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      word = 0;
      ASSERT_EQ(kolo_bootstrap_recv(bs, 0, 9, &word, sizeof word), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
      EXPECT_EQ(word, 42);
    }
    ASSERT_EQ(kolo_bootstrap_barrier(bs, 10), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    kolo_bootstrap_destroy(bs);
  });
}

// ---- allgather in log2(n) rounds ---------------------------------------------------------

uint32_t word_of(int rank, size_t i, uint32_t salt) {
  uint64_t x = ((uint64_t)rank << 32 | i) * 0x9e3779b97f4a7c15ull ^ salt;
  return (uint32_t)(x ^ (x >> 29));
}

class BootstrapGatherN : public BootstrapLazy, public ::testing::WithParamInterface<int> {};

// Blocks of 1 and 1001 words: every entry of every rank checked; the peer
// table's entries are each rank's own; no rank links to more than its
// 2 ceil(log2 n) partners.
TEST_P(BootstrapGatherN, EveryEntryOnEveryRankWithLogNLinks) {
  const int n = GetParam();
  run_job(n, 20000, [&](kolo_bootstrap *bs, int r) {
    for (int p = 0; p < n; p++) EXPECT_EQ(kolo_bootstrap_peer(bs, p)->rank, p);
    EXPECT_EQ(kolo_bootstrap_peer(bs, r)->pid, (int32_t)getpid());
    for (size_t words : {(size_t)1, (size_t)1001}) {
      std::vector<uint32_t> all(words * n, 0xdeadbeef);
      for (size_t i = 0; i < words; i++) all[r * words + i] = word_of(r, i, (uint32_t)words);
      ASSERT_EQ(kolo_bootstrap_allgather(bs, 30 + (uint32_t)words, all.data(), words * 4), koloSuccess)
          << kolo_bootstrap_errbuf(bs)->msg;
      for (int p = 0; p < n; p++)
        for (size_t i = 0; i < words; i++)
          ASSERT_EQ(all[p * words + i], word_of(p, i, (uint32_t)words)) << "rank " << r << ": entry " << p << "[" << i << "]";
    }
    EXPECT_LE(kolo_bootstrap_links(bs), 2 * ceil_log2(n)) << "rank " << r;
    ASSERT_EQ(kolo_bootstrap_barrier(bs, 40), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    kolo_bootstrap_destroy(bs);
  });
}

INSTANTIATE_TEST_SUITE_P(N, BootstrapGatherN, ::testing::Values(1, 2, 3, 5, 8, 13));

// ---- a rank that dies --------------------------------------------------------------------

// Closes every socket of bs without a goodbye, as a killed process's
// kernel does.
void die(kolo_bootstrap *bs) {
  bs->pid = -1;  // not this process's to say goodbye for
  kolo_bootstrap_destroy(bs);
}

class BootstrapDeath : public BootstrapLazy, public ::testing::WithParamInterface<bool> {};

// Rank 5 of 8 dies in an allgather, before it sent anything or after its
// first round's send.  Before: every other rank's allgather fails within
// the timeout naming rank 5, directly (its connection closed without a
// word) or through the goodbye of a partner that failed on it.  After:
// ranks that got its block from others may complete, with every entry
// right; the others fail naming rank 5; at least one fails.
TEST_P(BootstrapDeath, RankDyingMidAllgatherIsNamed) {
  const int n = 8, victim = 5, timeout_ms = 6000;
  const bool sent_first = GetParam();
  std::vector<std::string> errors(n);
  std::vector<int64_t> took(n);
  std::vector<int> ok(n, 0);
  run_job(n, timeout_ms, [&](kolo_bootstrap *bs, int r) {
    std::vector<int> all(n, -1);
    all[r] = r * 11;
    if (r == victim) {
      if (sent_first) {
        ASSERT_EQ(kolo_bootstrap_send(bs, r - 1, 50, &all[r], sizeof(int)), koloSuccess);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      die(bs);
      return;
    }
    auto t0 = Clock::now();
    koloResult_t res = kolo_bootstrap_allgather(bs, 50, all.data(), sizeof(int));
    took[r] = ms_since(t0);
    errors[r] = kolo_bootstrap_errbuf(bs)->msg;
    ok[r] = res == koloSuccess;
    for (int p = 0; ok[r] && p < n; p++) EXPECT_EQ(all[p], p * 11) << "rank " << r << " entry " << p;
    kolo_bootstrap_destroy(bs);  // its goodbye blames the rank it lost
  });
  int failed = 0;
  for (int r = 0; r < n; r++) {
    if (r == victim || ok[r]) continue;
    failed++;
    EXPECT_TRUE(contains(errors[r], "rank 5")) << "rank " << r << ": " << errors[r];
    EXPECT_LT(took[r], timeout_ms) << "rank " << r << ": " << errors[r];
  }
  EXPECT_EQ(failed, sent_first ? failed : n - 1);
  EXPECT_GE(failed, 1);
}

INSTANTIATE_TEST_SUITE_P(AfterFirstSend, BootstrapDeath, ::testing::Bool());

// A rank that joins at the root by hand and is gone right after the root
// answered (its listener closed: as a process killed there).
struct GoneAfterRendezvous {
  bool join(const kolo_uid &uid, int rank, int nranks) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage at;
    memset(&at, 0, sizeof at);
    auto *a = reinterpret_cast<sockaddr_in *>(&at);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sockaddr_in);
    bool ok = lfd >= 0 && bind(lfd, reinterpret_cast<sockaddr *>(&at), len) == 0 && listen(lfd, 8) == 0 &&
              getsockname(lfd, reinterpret_cast<sockaddr *>(&at), &len) == 0;
    kolo_rank_hello h;
    memset(&h, 0, sizeof h);
    memcpy(h.secret, uid.secret, sizeof h.secret);
    h.rank = rank;
    h.nranks = nranks;
    h.role = KOLO_HELLO_RANK;
    h.info.addr = at;
    h.info.rank = rank;
    uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES];
    kolo_encode_header(m, KOLO_TAG_RANK_HELLO, KOLO_RANK_HELLO_BYTES);
    kolo_encode_rank_hello(&h, m + KOLO_WIRE_HDR_BYTES);
    int root = ok ? raw_connect_to(uid.root) : -1;
    ok = root >= 0 && send(root, m, sizeof m, MSG_NOSIGNAL) == (ssize_t)sizeof m;
    uint8_t answer[KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES];
    pollfd pf{root, POLLIN, 0};
    ok = ok && poll(&pf, 1, 10000) == 1 && recv(root, answer, sizeof answer, MSG_WAITALL) == (ssize_t)sizeof answer;
    if (root >= 0) close(root);
    if (lfd >= 0) close(lfd);  // gone
    return ok;
  }
  static int raw_connect_to(const sockaddr_storage &to) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr *>(&to), sizeof(sockaddr_in)) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
};

// Rank 2 of 4 is gone right after the rendezvous: every other rank's init
// fails naming rank 2, also those that only meet rank 2 through a rank
// that failed on it first (a failed init answers the ranks that come to it
// later with its goodbye, which blames rank 2), and before the timeout: a
// rank waiting in the gather on one that will never send ends when another
// link says a rank failed (rank 1 waits on rank 2, whose address it does
// not know).  5 jobs over.
TEST_F(BootstrapLazy, RankGoneAfterRendezvousIsNamedByEveryInit) {
  const int n = 4, victim = 2, timeout_ms = 3000;
  for (int job = 0; job < 5; job++) {
    kolo_uid uid = start_root(timeout_ms);
    std::vector<std::string> errors(n);
    std::vector<koloResult_t> res(n, koloSuccess);
    std::vector<int64_t> took(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; r++) {
      if (r == victim) continue;
      ts.emplace_back([&, r] {
        kolo_errbuf eb{};
        kolo_bootstrap *bs = nullptr;
        auto t0 = Clock::now();
        res[r] = kolo_bootstrap_init(&uid, r, n, timeout_ms, &eb, &bs);
        took[r] = ms_since(t0);
        errors[r] = eb.msg;
        if (bs) kolo_bootstrap_destroy(bs);
      });
    }
    GoneAfterRendezvous gone;
    EXPECT_TRUE(gone.join(uid, victim, n));
    for (auto &t : ts) t.join();
    for (int r = 0; r < n; r++) {
      if (r == victim) continue;
      EXPECT_NE(res[r], koloSuccess) << "job " << job << " rank " << r;
      EXPECT_TRUE(contains(errors[r], "rank 2")) << "job " << job << " rank " << r << ": " << errors[r];
      EXPECT_LT(took[r], timeout_ms - 500) << "job " << job << " rank " << r << ": " << errors[r];
    }
  }
}

// ---- strangers at a rank's listener -------------------------------------------------------

// Captures what kolo logs at WARN for the scope (KOLO_DEBUG_FILE).
class LogCapture {
 public:
  LogCapture() : path_("/tmp/kolo-lazy-log-" + std::to_string(getpid())) {
    unlink(path_.c_str());
    level_.reset(new kt::ScopedEnv("KOLO_DEBUG", "WARN"));
    file_.reset(new kt::ScopedEnv("KOLO_DEBUG_FILE", path_));
    kolo_log_reset();
  }
  ~LogCapture() {
    file_.reset();
    level_.reset();
    kolo_log_reset();
    kolo_log_level();  // closes the file now: the fixture counts fds
    unlink(path_.c_str());
  }
  std::string text() const {
    std::ifstream f(path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  bool wait_for(const std::string &part, int timeout_ms) const {
    auto t0 = Clock::now();
    while (!contains(text(), part) && ms_since(t0) < kt_ms(timeout_ms)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return contains(text(), part);
  }

 private:
  std::string path_;
  std::unique_ptr<kt::ScopedEnv> level_, file_;
};

int raw_connect(const sockaddr_storage &to) {
  int fd = socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr *>(&to), len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True when the other side closes fd within timeout_ms.
bool closed_by_peer(int fd, int timeout_ms) {
  auto t0 = Clock::now();
  char buf[256];
  while (ms_since(t0) < kt_ms(timeout_ms)) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 50) > 0 && recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

std::vector<uint8_t> mesh_hello(const kolo_uid &uid, int rank, int nranks) {
  kolo_mesh_hello h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, uid.secret, sizeof h.secret);
  h.job = uid.job;
  h.rank = rank;
  h.nranks = nranks;
  std::vector<uint8_t> m(KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES);
  kolo_encode_header(m.data(), KOLO_TAG_MESH_HELLO, KOLO_MESH_HELLO_BYTES);
  kolo_encode_mesh_hello(&h, m.data() + KOLO_WIRE_HDR_BYTES);
  return m;
}

// After init, connections to rank 1's listener that present no secret, a
// wrong one, garbage, or a rank that is already linked are closed and
// logged with the reason while rank 1 waits; the job then goes on.
TEST_F(BootstrapLazy, StrangersAtARankListenerAreRefusedAndLogged) {
  LogCapture log;
  const int n = 3;
  kolo_uid uid = start_root(20000);
  std::atomic<bool> strays_done{false};
  std::vector<std::thread> ts;
  sockaddr_storage at{};
  std::atomic<bool> have_at{false};
  for (int r = 0; r < n; r++)
    ts.emplace_back([&, r] {
      kolo_errbuf eb{};
      kolo_bootstrap *bs = nullptr;
      ASSERT_EQ(kolo_bootstrap_init(&uid, r, n, 20000, &eb, &bs), koloSuccess) << eb.msg;
      int word = 7;
      if (r == 1) {
        at = kolo_bootstrap_peer(bs, 1)->addr;
        have_at = true;
        ASSERT_EQ(kolo_bootstrap_recv(bs, 0, 60, &word, sizeof word), koloSuccess) << eb.msg;  // serves meanwhile
      }
      if (r == 0) {
        while (!strays_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ASSERT_EQ(kolo_bootstrap_send(bs, 1, 60, &word, sizeof word), koloSuccess) << eb.msg;
      }
      EXPECT_EQ(kolo_bootstrap_dead_peer(bs), -1);
      ASSERT_EQ(kolo_bootstrap_barrier(bs, 61), koloSuccess) << eb.msg;
      kolo_bootstrap_destroy(bs);
    });
  while (!have_at) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<uint8_t> wrong = mesh_hello(uid, 2, n), dup = mesh_hello(uid, 0, n), junk(40, 0x5a);
  wrong[KOLO_WIRE_HDR_BYTES + 4] ^= 1;  // the secret's first byte
  uint8_t none[KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES];
  memcpy(none, dup.data(), sizeof none);
  memset(none + KOLO_WIRE_HDR_BYTES + 4, 0, KOLO_SECRET_BYTES);  // no secret at all
  struct {
    const uint8_t *bytes;
    size_t len;
    const char *why;
  } cases[] = {{none, sizeof none, "did not present the job's secret"},
               {wrong.data(), wrong.size(), "did not present the job's secret"},
               {junk.data(), junk.size(), "sent garbage (header magic"},
               {dup.data(), dup.size(), "claims a rank that is already connected"}};
  for (const auto &c : cases) {
    int fd = raw_connect(at);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, c.bytes, c.len, MSG_NOSIGNAL), (ssize_t)c.len);
    EXPECT_TRUE(closed_by_peer(fd, 3000)) << "rank 1 kept a connection that " << c.why;
    close(fd);
    EXPECT_TRUE(log.wait_for(c.why, 3000)) << log.text();
  }
  EXPECT_TRUE(contains(log.text(), "rank 1 dropped a mesh connection from 127.0.0.1:")) << log.text();
  strays_done = true;
  for (auto &t : ts) t.join();
}

// ---- descriptors ---------------------------------------------------------------------------

// Runs fn in a forked child (its limits are its own) and returns what it
// wrote to the pipe: the sentence it got.
std::string in_child(const std::function<std::string()> &fn) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    std::string text = fn();
    ssize_t w = write(p[1], text.data(), text.size());
    _exit(w == (ssize_t)text.size() ? 0 : 1);
  }
  close(p[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)n);
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

// A rank whose process has no descriptor left to connect with says so,
// naming the limit.
TEST_F(BootstrapLazy, OutOfDescriptorsNamesTheLimit) {
  std::string text = in_child([] {
    kolo_uid uid = start_root(5000);
    int lowest_free = dup(0);  // every descriptor below it is taken
    close(lowest_free);
    rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = (rlim_t)lowest_free;  // not one more
    setrlimit(RLIMIT_NOFILE, &rl);
    kolo_errbuf eb{};
    kolo_bootstrap *bs = nullptr;
    koloResult_t res = kolo_bootstrap_init(&uid, 0, 2, 2000, &eb, &bs);
    return std::string(res == koloSystemError ? "" : "not koloSystemError: ") + eb.msg;
  });
  EXPECT_TRUE(contains(text, "too many open files (RLIMIT_NOFILE ")) << text;
  EXPECT_FALSE(contains(text, "not koloSystemError")) << text;
}

// A root whose process cannot hold a connection per rank even at its hard
// limit refuses the job at the first hello, saying what it needs and how
// to get it.
TEST_F(BootstrapLazy, RootBeyondItsHardLimitSaysSo) {
  std::string text = in_child([] {
    rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max = (rlim_t)count_fds() + 40;
    setrlimit(RLIMIT_NOFILE, &rl);
    kolo_uid uid = start_root(5000);
    kolo_errbuf eb{};
    kolo_bootstrap *bs = nullptr;
    kolo_bootstrap_init(&uid, 0, 500, 5000, &eb, &bs);
    return std::string(eb.msg);
  });
  EXPECT_TRUE(contains(text, "cannot hold a connection per rank of its 500")) << text;
  EXPECT_TRUE(contains(text, "RLIMIT_NOFILE allows")) << text;
  EXPECT_TRUE(contains(text, "koloCommInitRankScalable")) << text;
}

}  // namespace
