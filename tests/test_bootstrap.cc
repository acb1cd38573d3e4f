// test_bootstrap.cc - transport/bootstrap: the unique id, the choice of
// interface, the root's rendezvous, the mesh, tagged messages, allgather,
// barrier and liveness, with ranks as threads of this process.
//
// Hostile peers are raw TCP clients speaking the wire format of
// transport/bootstrap_wire.h (wrong secret, garbage, truncated or oversized
// hellos, a fake rank that sends an oversized mesh message).  Every test
// ends with a leak check: the process has as many fds as before (roots are
// detached threads that close theirs shortly after the job is done, or
// after lingering timeout_ms past a failure, so the check waits for them).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

extern "C" {
#include "transport/bootstrap.h"
#include "common/log.h"
#include "transport/bootstrap_wire.h"
}

#include <fstream>
#include <memory>
#include <sstream>

#include "util/proc_util.h"
#include "util/time_scale.h"

namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

using kt::count_fds;

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// Waits (bounded) until the roots of this process have taken in `joins`
// ranks in all: a test that needs one rank at the root before another
// waits for that, not for a guessed time.
bool wait_for_joins(int joins) {
  auto t0 = Clock::now();
  while (kolo_bootstrap_root_joins() < joins && ms_since(t0) < kt_ms(5000))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return kolo_bootstrap_root_joins() >= joins;
}

sockaddr_storage loopback4(int port = 0) {
  sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  auto *a = reinterpret_cast<sockaddr_in *>(&ss);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a->sin_port = htons((uint16_t)port);
  return ss;
}

bool have_ipv6_loopback() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// Sets an environment variable for one scope.
class EnvGuard {
 public:
  EnvGuard(const char *name, const char *value) : name_(name) {
    const char *old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvGuard() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char *name_;
  bool had_ = false;
  std::string old_;
};

kolo_uid start_root(int timeout_ms, const sockaddr_storage *bind = nullptr) {
  sockaddr_storage lo = loopback4();
  kolo_uid uid;
  kolo_errbuf eb{};
  koloResult_t res = kolo_bootstrap_root_start(bind ? bind : &lo, nullptr, timeout_ms, &uid, &eb);
  EXPECT_EQ(res, koloSuccess) << eb.msg;
  return uid;
}

// What one rank thread saw.
struct RankOutcome {
  koloResult_t res = koloInternalError;
  std::string error;
  int64_t elapsed_ms = 0;
};

using RankBody = std::function<void(kolo_bootstrap *, int)>;

// Runs `ranks` (rank numbers, each with nranks) as threads: init, body,
// destroy.  Returns each init's outcome.
// uids: one id, or several (kolo_bootstrap_init_multi).
std::vector<RankOutcome> run_ranks_multi(const std::vector<kolo_uid> &uids, const std::vector<int> &ranks,
                                         int nranks, int timeout_ms, const RankBody &body = nullptr) {
  std::vector<RankOutcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); i++) {
    threads.emplace_back([&, i] {
      kolo_errbuf eb{};
      kolo_bootstrap *bs = nullptr;
      auto t0 = Clock::now();
      out[i].res = uids.size() == 1 ? kolo_bootstrap_init(&uids[0], ranks[i], nranks, timeout_ms, &eb, &bs)
                                    : kolo_bootstrap_init_multi(uids.data(), (int)uids.size(), ranks[i], nranks,
                                                                timeout_ms, &eb, &bs);
      out[i].elapsed_ms = ms_since(t0);
      out[i].error = eb.msg;
      if (out[i].res != koloSuccess) {
        EXPECT_EQ(bs, nullptr);
        return;
      }
      EXPECT_EQ(kolo_bootstrap_errbuf(bs), &eb);
      if (body) body(bs, ranks[i]);
      kolo_bootstrap_destroy(bs);
    });
  }
  for (auto &t : threads) t.join();
  return out;
}

std::vector<RankOutcome> run_ranks(const kolo_uid &uid, const std::vector<int> &ranks, int nranks,
                                   int timeout_ms, const RankBody &body = nullptr) {
  return run_ranks_multi({uid}, ranks, nranks, timeout_ms, body);
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; i++) v[i] = i;
  return v;
}

// ---- raw clients ---------------------------------------------------------

int raw_connect(const sockaddr_storage &to) {
  int fd = socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t len = to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (connect(fd, reinterpret_cast<const sockaddr *>(&to), len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool raw_send(int fd, const void *p, size_t n) {
  return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n;
}

bool raw_recv(int fd, void *p, size_t n, int timeout_ms) {
  char *c = static_cast<char *>(p);
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, (int)kt_ms(timeout_ms)) <= 0) return false;
    ssize_t got = recv(fd, c, n, 0);
    if (got <= 0) return false;
    c += got;
    n -= (size_t)got;
  }
  return true;
}

// True when the other side closes fd within timeout_ms (reading and
// discarding anything it sends first).
bool closed_by_peer(int fd, int timeout_ms) {
  auto t0 = Clock::now();
  char buf[4096];
  while (ms_since(t0) < kt_ms(timeout_ms)) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
  return false;
}

struct RankHelloMsg {
  kolo_wire_header hdr;
  kolo_rank_hello body;
};

RankHelloMsg make_rank_hello(const kolo_uid &uid, int rank, int nranks) {
  RankHelloMsg m;
  memset(&m, 0, sizeof m);
  m.hdr.magic = KOLO_WIRE_MAGIC;
  m.hdr.tag = KOLO_TAG_RANK_HELLO;
  m.hdr.len = KOLO_RANK_HELLO_BYTES;
  memcpy(m.body.secret, uid.secret, sizeof m.body.secret);
  m.body.rank = rank;
  m.body.nranks = nranks;
  m.body.info.addr = loopback4(1);
  m.body.info.rank = rank;
  return m;
}

// A mesh hello of `rank` of nranks in job uid, with its header, as a rank
// that knows the secret would send it to a peer.
std::vector<uint8_t> mesh_hello_bytes(const kolo_uid &uid, int rank, int nranks) {
  kolo_mesh_hello h;
  memset(&h, 0, sizeof h);
  memcpy(h.secret, uid.secret, sizeof h.secret);
  h.job = uid.job;
  h.rank = rank;
  h.nranks = nranks;
  std::vector<uint8_t> mh(KOLO_WIRE_HDR_BYTES + KOLO_MESH_HELLO_BYTES);
  kolo_encode_header(mh.data(), KOLO_TAG_MESH_HELLO, KOLO_MESH_HELLO_BYTES);
  kolo_encode_mesh_hello(&h, mh.data() + KOLO_WIRE_HDR_BYTES);
  return mh;
}

// The bytes of a message as the wire carries them: m.hdr as it is (a test
// may announce a wrong length), the body encoded.
std::vector<uint8_t> wire_bytes(const RankHelloMsg &m) {
  std::vector<uint8_t> out(KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES);
  kolo_encode_header(out.data(), m.hdr.tag, m.hdr.len);
  kolo_wire_out w = kolo_wire_writer(out.data(), 4);
  kolo_put_u32(&w, m.hdr.magic);
  kolo_encode_rank_hello(&m.body, out.data() + KOLO_WIRE_HDR_BYTES);
  return out;
}

bool raw_send(int fd, const std::vector<uint8_t> &bytes) { return raw_send(fd, bytes.data(), bytes.size()); }

// Reads one message (header decoded, body bytes) within timeout_ms.
bool raw_recv_msg(int fd, kolo_wire_header *hdr, std::vector<uint8_t> *body, int timeout_ms) {
  uint8_t raw[KOLO_WIRE_HDR_BYTES];
  if (!raw_recv(fd, raw, sizeof raw, timeout_ms)) return false;
  *hdr = kolo_decode_header(raw);
  if (hdr->len > (1u << 20)) return false;
  body->assign(hdr->len, 0);
  return raw_recv(fd, body->data(), body->size(), timeout_ms);
}

// Rank 1 of a job of 2 played by hand (the real rank 0 runs as a thread):
// it listens, joins at the root, and takes rank 0's connection as the
// protocol says: reads its mesh hello, accepts it, and sends its entry of
// the peer table, which rank 0's init gathers.
struct FakeRank1 {
  int lfd = -1, link = -1;
  kolo_peer_info me{}, rank0{};  // rank0: what the root says of it (rank 1's ring predecessor)
  ~FakeRank1() {
    if (link >= 0) close(link);
    if (lfd >= 0) close(lfd);
  }
  bool join(const kolo_uid &uid) {
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage at = loopback4(0);
    socklen_t len = sizeof(sockaddr_in);
    if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr *>(&at), len) != 0 || listen(lfd, 8) != 0 ||
        getsockname(lfd, reinterpret_cast<sockaddr *>(&at), &len) != 0)
      return false;
    RankHelloMsg hello = make_rank_hello(uid, 1, 2);
    hello.body.info.addr = at;
    me = hello.body.info;
    int root = raw_connect(uid.root);
    bool ok = root >= 0 && raw_send(root, wire_bytes(hello));
    std::vector<uint8_t> m(KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES);
    ok = ok && raw_recv(root, m.data(), m.size(), 5000);
    kolo_errbuf eb{};
    ok = ok && kolo_root_decode_reply(m.data(), m.size(), 0, &rank0, "root", &eb) == koloSuccess;
    EXPECT_TRUE(ok) << eb.msg;
    if (root >= 0) close(root);
    return ok;
  }
  bool take_link(const kolo_uid &uid) {
    pollfd pf{lfd, POLLIN, 0};
    if (poll(&pf, 1, 5000) != 1 || (link = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) < 0) return false;
    kolo_wire_header hdr;
    std::vector<uint8_t> body;
    kolo_mesh_hello h;
    uint32_t version;
    char why[256] = "";
    if (!raw_recv_msg(link, &hdr, &body, 5000) || hdr.tag != KOLO_TAG_MESH_HELLO) return false;
    EXPECT_EQ(kolo_decode_mesh_hello(body.data(), body.size(), &h, &version, why, sizeof why), KOLO_WIRE_OK) << why;
    EXPECT_EQ(h.rank, 0);
    EXPECT_EQ(memcmp(h.secret, uid.secret, sizeof h.secret), 0);
    uint8_t v[KOLO_WIRE_HDR_BYTES + KOLO_VERDICT_BYTES + KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES];
    kolo_encode_header(v, KOLO_TAG_MESH_VERDICT, KOLO_VERDICT_BYTES);
    kolo_encode_verdict(KOLO_MESH_ACCEPTED, v + KOLO_WIRE_HDR_BYTES);
    uint8_t *entry = v + KOLO_WIRE_HDR_BYTES + KOLO_VERDICT_BYTES;
    kolo_encode_header(entry, KOLO_TAG_PEERS, KOLO_PEER_INFO_BYTES);
    kolo_encode_peer_info(&me, entry + KOLO_WIRE_HDR_BYTES);
    if (!raw_send(link, v, sizeof v)) return false;
    // rank 0's entry, from rank 0 itself
    kolo_peer_info got;
    if (!raw_recv_msg(link, &hdr, &body, 5000) || hdr.tag != KOLO_TAG_PEERS) return false;
    return kolo_decode_peer_info(body.data(), body.size(), 0, &got, why, sizeof why) == KOLO_WIRE_OK;
  }
};

// ---- fixture: leak check ---------------------------------------------------

class Bootstrap : public ::testing::Test {
 protected:
  void SetUp() override { fds_before_ = count_fds(); }
  void TearDown() override {
    // Roots exit on their own: give them time to close their sockets.
    auto t0 = Clock::now();
    while (count_fds() != fds_before_ && ms_since(t0) < kt_ms(8000))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(count_fds(), fds_before_) << "file descriptors leaked";
  }
  int fds_before_ = 0;
};

// ---- the unique id -----------------------------------------------------------

TEST_F(Bootstrap, UniqueIdRoundTrip) {
  kolo_uid uid;
  memset(&uid, 0, sizeof uid);
  uid.magic = KOLO_UID_MAGIC;
  uid.job = 0x1234567890abcdefull;
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) uid.secret[i] = (uint8_t)(i * 7 + 1);
  uid.root = loopback4(4242);
  koloUniqueId id;
  kolo_uid_encode(&uid, &id);
  kolo_uid back;
  kolo_errbuf eb{};
  ASSERT_EQ(kolo_uid_decode(&id, &back, &eb), koloSuccess) << eb.msg;
  EXPECT_EQ(back.magic, uid.magic);
  EXPECT_EQ(back.job, uid.job);
  EXPECT_EQ(memcmp(back.secret, uid.secret, KOLO_SECRET_BYTES), 0);
  EXPECT_EQ(memcmp(&back.root, &uid.root, sizeof(sockaddr_in)), 0);

  id.internal[0] ^= 1;  // bad magic
  EXPECT_EQ(kolo_uid_decode(&id, &back, &eb), koloInvalidArgument);
  EXPECT_TRUE(contains(eb.msg, "magic")) << eb.msg;

  uid.root = loopback4(0);  // no port: no root
  kolo_uid_encode(&uid, &id);
  EXPECT_EQ(kolo_uid_decode(&id, &back, &eb), koloInvalidArgument);
}

// ---- interface choice ----------------------------------------------------------

TEST_F(Bootstrap, PickAddrDefaultAndLoopback) {
  EnvGuard ifn("KOLO_SOCKET_IFNAME", nullptr), fam("KOLO_SOCKET_FAMILY", nullptr);
  sockaddr_storage a;
  kolo_errbuf eb{};
  ASSERT_EQ(kolo_bootstrap_pick_addr(&a, &eb), koloSuccess) << eb.msg;
  EXPECT_TRUE(a.ss_family == AF_INET || a.ss_family == AF_INET6);

  for (const char *spec : {"lo", "=lo", "l", "nosuch,lo", "=eth0,lo"}) {
    EnvGuard g("KOLO_SOCKET_IFNAME", spec);
    ASSERT_EQ(kolo_bootstrap_pick_addr(&a, &eb), koloSuccess) << spec << ": " << eb.msg;
    ASSERT_EQ(a.ss_family, AF_INET) << spec;  // IPv4 preferred
    EXPECT_EQ(reinterpret_cast<sockaddr_in *>(&a)->sin_addr.s_addr, htonl(INADDR_LOOPBACK)) << spec;
  }
}

TEST_F(Bootstrap, PickAddrExcludeExactAndErrors) {
  EnvGuard fam("KOLO_SOCKET_FAMILY", nullptr);
  sockaddr_storage a;
  kolo_errbuf eb{};
  {
    EnvGuard g("KOLO_SOCKET_IFNAME", "=l");  // exact: "l" is not "lo"
    koloResult_t res = kolo_bootstrap_pick_addr(&a, &eb);
    if (res == koloSuccess) ADD_FAILURE() << "=l matched an interface";
    else EXPECT_TRUE(contains(eb.msg, "KOLO_SOCKET_IFNAME==l")) << eb.msg;
  }
  {
    EnvGuard g("KOLO_SOCKET_IFNAME", "nosuchif0");
    EXPECT_EQ(kolo_bootstrap_pick_addr(&a, &eb), koloInvalidUsage);
    EXPECT_TRUE(contains(eb.msg, "nosuchif0")) << eb.msg;
  }
  {
    EnvGuard g("KOLO_SOCKET_IFNAME", "^lo");  // anything but loopback
    if (kolo_bootstrap_pick_addr(&a, &eb) == koloSuccess && a.ss_family == AF_INET) {
      EXPECT_NE(reinterpret_cast<sockaddr_in *>(&a)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    }
  }
  {
    EnvGuard g("KOLO_SOCKET_FAMILY", "AF_BOGUS");
    EXPECT_EQ(kolo_bootstrap_pick_addr(&a, &eb), koloInvalidArgument);
    EXPECT_TRUE(contains(eb.msg, "AF_BOGUS")) << eb.msg;
  }
  if (have_ipv6_loopback()) {
    EnvGuard g("KOLO_SOCKET_IFNAME", "lo"), f("KOLO_SOCKET_FAMILY", "AF_INET6");
    ASSERT_EQ(kolo_bootstrap_pick_addr(&a, &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(a.ss_family, AF_INET6);
    EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6 *>(&a)->sin6_addr));
  }
}

// ---- the whole job, N ranks as threads ---------------------------------------------

// Rank r's allgather contribution: random per run (seeds drawn once by the
// test), cheap to recompute word by word on every rank.
uint32_t part_value(uint32_t seed, int r, size_t i) {
  uint64_t x = (seed + (uint64_t)r * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  return (uint32_t)(x ^ (x >> 29));
}

uint32_t random_seed() {
  static std::mt19937 rng(std::random_device{}());
  return (uint32_t)rng();
}

void check_table(kolo_bootstrap *bs, int nranks) {
  const kolo_peer_info *me = kolo_bootstrap_peer(bs, kolo_bootstrap_rank(bs));
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(me->pid, (int32_t)getpid());
  for (int r = 0; r < nranks; r++) {
    const kolo_peer_info *p = kolo_bootstrap_peer(bs, r);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->rank, r);
    EXPECT_EQ(p->host_hash, me->host_hash);    // one host
    EXPECT_EQ(p->proc_token, me->proc_token);  // one process
    EXPECT_EQ(p->addr.ss_family, AF_INET);
  }
  EXPECT_EQ(kolo_bootstrap_peer(bs, nranks), nullptr);
  EXPECT_EQ(kolo_bootstrap_peer(bs, -1), nullptr);
}

void check_allgather(kolo_bootstrap *bs, int rank, int nranks, size_t words, uint32_t seed,
                     uint32_t tag) {
  std::vector<uint32_t> all(words * nranks, 0xdeadbeef);
  for (size_t i = 0; i < words; i++) all[(size_t)rank * words + i] = part_value(seed, rank, i);
  ASSERT_EQ(kolo_bootstrap_allgather(bs, tag, all.data(), words * 4), koloSuccess)
      << kolo_bootstrap_errbuf(bs)->msg;
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < words; i++) {
      uint32_t want = part_value(seed, r, i);
      if (all[(size_t)r * words + i] != want) {
        ADD_FAILURE() << "rank " << rank << ": word " << i << " of rank " << r << " is "
                      << all[(size_t)r * words + i] << ", expected " << want;
        return;
      }
    }
}

// Each rank sends tags 3, 2, 1 to every rank (itself included) and receives
// them as 1, 2, 3: the others wait in the unexpected queue.
void check_tagged(kolo_bootstrap *bs, int rank, int nranks) {
  for (int peer = 0; peer < nranks; peer++)
    for (uint32_t tag = 3; tag >= 1; tag--) {
      uint64_t v = ((uint64_t)rank << 32) | ((uint64_t)peer << 8) | tag;
      ASSERT_EQ(kolo_bootstrap_send(bs, peer, 100 + tag, &v, sizeof v), koloSuccess)
          << kolo_bootstrap_errbuf(bs)->msg;
    }
  for (int peer = nranks - 1; peer >= 0; peer--)
    for (uint32_t tag = 1; tag <= 3; tag++) {
      uint64_t v = 0;
      ASSERT_EQ(kolo_bootstrap_recv(bs, peer, 100 + tag, &v, sizeof v), koloSuccess)
          << kolo_bootstrap_errbuf(bs)->msg;
      EXPECT_EQ(v, ((uint64_t)peer << 32) | ((uint64_t)rank << 8) | tag);
    }
}

class BootstrapRanks : public Bootstrap, public ::testing::WithParamInterface<int> {};

TEST_P(BootstrapRanks, InitAllgatherTaggedBarrier) {
  const int n = GetParam();
  kolo_uid uid = start_root(10000);
  const uint32_t seed = random_seed();
  std::atomic<int> done{0};
  auto out = run_ranks(uid, iota(n), n, 10000, [&](kolo_bootstrap *bs, int rank) {
    EXPECT_EQ(kolo_bootstrap_rank(bs), rank);
    EXPECT_EQ(kolo_bootstrap_nranks(bs), n);
    check_table(bs, n);
    check_allgather(bs, rank, n, 1000, seed, 1);
    check_allgather(bs, rank, n, 1, seed + 1, 2);
    check_tagged(bs, rank, n);
    EXPECT_EQ(kolo_bootstrap_barrier(bs, 50), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    EXPECT_EQ(kolo_bootstrap_dead_peer(bs), -1);
    EXPECT_EQ(kolo_bootstrap_barrier(bs, 51), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
    done++;
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(out[r].res, koloSuccess) << "rank " << r << ": " << out[r].error;
  EXPECT_EQ(done.load(), n);
}

INSTANTIATE_TEST_SUITE_P(N, BootstrapRanks, ::testing::Values(1, 2, 3, 5, 8));

// Every rank sends 8 MiB to every other before reading: more than socket
// buffers hold (even autotuned on loopback), so sends must read while they
// wait.
TEST_F(Bootstrap, LargeAllgatherDoesNotDeadlock) {
  kolo_uid uid = start_root(20000);
  const uint32_t seed = random_seed();
  auto out = run_ranks(uid, iota(3), 3, 20000, [&](kolo_bootstrap *bs, int rank) {
    check_allgather(bs, rank, 3, (8 << 20) / 4, seed, 9);
  });
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
}

TEST_F(Bootstrap, RootOnIPv6AndDefaultInterface) {
  EnvGuard ifn("KOLO_SOCKET_IFNAME", nullptr), fam("KOLO_SOCKET_FAMILY", nullptr);
  {
    kolo_uid uid;
    kolo_errbuf eb{};
    ASSERT_EQ(kolo_bootstrap_root_start(nullptr, nullptr, 10000, &uid, &eb), koloSuccess) << eb.msg;
    auto out = run_ranks(uid, iota(2), 2, 10000, [](kolo_bootstrap *bs, int) {
      EXPECT_EQ(kolo_bootstrap_barrier(bs, 1), koloSuccess);
    });
    for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
  }
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback";
  sockaddr_storage v6;
  memset(&v6, 0, sizeof v6);
  reinterpret_cast<sockaddr_in6 *>(&v6)->sin6_family = AF_INET6;
  reinterpret_cast<sockaddr_in6 *>(&v6)->sin6_addr = in6addr_loopback;
  kolo_uid uid = start_root(10000, &v6);
  auto out = run_ranks(uid, iota(3), 3, 10000, [](kolo_bootstrap *bs, int rank) {
    EXPECT_EQ(kolo_bootstrap_peer(bs, rank)->addr.ss_family, AF_INET6);
    EXPECT_EQ(kolo_bootstrap_barrier(bs, 1), koloSuccess);
  });
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
}

// ---- strangers at the root ------------------------------------------------------

enum class Stranger { kWrongSecret, kGarbage, kTruncated, kOversized, kStall };

// Connects to the root and misbehaves; returns the connection.
int stranger_connect(const kolo_uid &uid, Stranger kind) {
  int fd = raw_connect(uid.root);
  EXPECT_GE(fd, 0);
  RankHelloMsg m = make_rank_hello(uid, 0, 2);
  switch (kind) {
    case Stranger::kWrongSecret:
      m.body.secret[5] ^= 0x40;
      EXPECT_TRUE(raw_send(fd, wire_bytes(m)));
      break;
    case Stranger::kGarbage: {
      char junk[KOLO_WIRE_HDR_BYTES + KOLO_RANK_HELLO_BYTES];
      for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
      EXPECT_TRUE(raw_send(fd, junk, sizeof junk));
      break;
    }
    case Stranger::kTruncated:
      EXPECT_TRUE(raw_send(fd, wire_bytes(m).data(), KOLO_WIRE_HDR_BYTES + 10));
      shutdown(fd, SHUT_WR);
      break;
    case Stranger::kOversized:
      m.hdr.len = 1ull << 30;
      EXPECT_TRUE(raw_send(fd, wire_bytes(m)));
      break;
    case Stranger::kStall:
      break;
  }
  return fd;
}

class BootstrapStranger : public Bootstrap, public ::testing::WithParamInterface<Stranger> {};

TEST_P(BootstrapStranger, IsDroppedAndTheJobCompletes) {
  kolo_uid uid = start_root(10000);
  int fd = stranger_connect(uid, GetParam());
  if (GetParam() != Stranger::kStall) {
    EXPECT_TRUE(closed_by_peer(fd, 2000)) << "the root kept a stranger";
  }
  auto out = run_ranks(uid, iota(2), 2, 10000, [](kolo_bootstrap *bs, int) {
    EXPECT_EQ(kolo_bootstrap_barrier(bs, 1), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
  });
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
  // A stall is closed when the root is done.
  if (GetParam() == Stranger::kStall) {
    EXPECT_TRUE(closed_by_peer(fd, 2000));
  }
  close(fd);
}

INSTANTIATE_TEST_SUITE_P(Kinds, BootstrapStranger,
                         ::testing::Values(Stranger::kWrongSecret, Stranger::kGarbage, Stranger::kTruncated,
                                           Stranger::kOversized, Stranger::kStall));

// ---- several roots (koloCommInitRankScalable) --------------------------------------

// Blocks: rank r meets at root r * nids / nranks, contiguous and never empty.
TEST(BootstrapRootBlocks, ContiguousAndComplete) {
  for (int n = 1; n <= 40; n++)
    for (int k = 1; k <= n; k++) {
      int next = 0;
      for (int b = 0; b < k; b++) {
        int lo, hi;
        kolo_root_block(b, n, k, &lo, &hi);
        ASSERT_EQ(lo, next) << n << " ranks, " << k << " roots, block " << b;
        ASSERT_GT(hi, lo) << n << " ranks, " << k << " roots, block " << b;
        for (int r = lo; r < hi; r++) ASSERT_EQ(kolo_root_of(r, n, k), b) << n << " ranks, " << k << " roots, rank " << r;
        next = hi;
      }
      ASSERT_EQ(next, n);
    }
}

// 7 ranks through 3 roots, 4 through 4, 5 through 2: every rank gets the same
// whole table and the mesh works (allgather, tagged messages, barrier).
class BootstrapRoots : public Bootstrap, public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(BootstrapRoots, EveryRankGetsTheWholeTable) {
  auto [n, nids] = GetParam();
  std::vector<kolo_uid> uids;
  for (int k = 0; k < nids; k++) uids.push_back(start_root(10000));
  const uint32_t seed = random_seed();
  auto out = run_ranks_multi(uids, iota(n), n, 10000, [&](kolo_bootstrap *bs, int rank) {
    check_table(bs, n);
    check_allgather(bs, rank, n, 100, seed, 1);
    check_tagged(bs, rank, n);
    EXPECT_EQ(kolo_bootstrap_barrier(bs, 50), koloSuccess) << kolo_bootstrap_errbuf(bs)->msg;
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(out[r].res, koloSuccess) << "rank " << r << ": " << out[r].error;
}

INSTANTIATE_TEST_SUITE_P(N, BootstrapRoots,
                         ::testing::Values(std::make_tuple(7, 3), std::make_tuple(4, 4), std::make_tuple(5, 2)));

// A root receives only its own block: a rank hello for another block is
// refused, naming the root that rank belongs to.
TEST_F(Bootstrap, RootRefusesARankOfAnotherBlock) {
  kolo_uid root0 = start_root(2000), root1 = start_root(500);
  int fd = raw_connect(root1.root);
  ASSERT_GE(fd, 0);
  RankHelloMsg hello = make_rank_hello(root1, 0, 4);  // rank 0 of 4 belongs to root 0
  hello.body.nids = 2;
  hello.body.root_index = 1;
  hello.body.first = root0;
  ASSERT_TRUE(raw_send(fd, wire_bytes(hello)));
  kolo_wire_header hdr;
  std::vector<uint8_t> body;
  ASSERT_TRUE(raw_recv_msg(fd, &hdr, &body, 5000));
  ASSERT_EQ(hdr.tag, (uint32_t)KOLO_TAG_REFUSED);
  std::string why(body.begin() + 4, body.end());
  EXPECT_TRUE(contains(why, "rank 0: it meets at commIds[0]")) << why;
  close(fd);
  // root 0 still serves a job of its own
  auto out = run_ranks(root0, {0, 1}, 2, 2000);
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
}

// 4 ranks, 2 roots, rank 3 never comes: rank 2 (root 1) hears that rank 3
// did not join, ranks 0 and 1 (root 0) that root 1 never forwarded its
// block; all within a bounded time.
TEST_F(Bootstrap, MissingRankBehindAnotherRoot) {
  std::vector<kolo_uid> uids = {start_root(1000), start_root(1000)};
  auto out = run_ranks_multi(uids, {0, 1, 2}, 4, 1000);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(out[i].res, koloTimeout) << out[i].error;
    EXPECT_TRUE(contains(out[i].error, i < 2 ? "the root of commIds 1 did not forward its ranks" : "rank 3 of 4 did not join"))
        << "rank " << i << ": " << out[i].error;
    EXPECT_LT(out[i].elapsed_ms, kt_ms(4000)) << out[i].error;
  }
}

// Ranks that pass different numbers of ids fail, saying so, in bounded time.
// The timeout is long (3 s) so that a loaded machine cannot turn the
// mismatch, found at once, into a timeout.
TEST_F(Bootstrap, DifferentIdCountsFail) {
  std::vector<kolo_uid> uids = {start_root(3000), start_root(3000)};
  RankOutcome one, two;
  const int joins = kolo_bootstrap_root_joins();
  std::thread t([&] { one = run_ranks_multi({uids[0]}, {0}, 2, 3000)[0]; });
  EXPECT_TRUE(wait_for_joins(joins + 1)) << "rank 0 never reached its root";
  two = run_ranks_multi(uids, {1}, 2, 3000)[0];
  t.join();
  for (const RankOutcome *o : {&one, &two}) {
    EXPECT_NE(o->res, koloSuccess);
    EXPECT_TRUE(contains(o->error, "the root of commIds[1]: it passes 2 ids, rank 0 passed 1")) << o->error;
    EXPECT_LT(o->elapsed_ms, kt_ms(4000)) << o->error;
  }
}

// ---- a job that cannot form -------------------------------------------------------

TEST_F(Bootstrap, MismatchedNranksFailsEveryRank) {
  kolo_uid uid = start_root(1000);
  RankOutcome first;
  const int joins = kolo_bootstrap_root_joins();
  std::thread t([&] { first = run_ranks(uid, {0}, 2, 3000)[0]; });
  EXPECT_TRUE(wait_for_joins(joins + 1)) << "rank 0 never joined";  // rank 0 joins first
  RankOutcome odd = run_ranks(uid, {1}, 3, 3000)[0];
  t.join();
  EXPECT_EQ(odd.res, koloInvalidUsage);
  EXPECT_TRUE(contains(odd.error, "nranks 3 differs from rank 0's 2")) << odd.error;
  EXPECT_EQ(first.res, koloInvalidUsage);
  EXPECT_TRUE(contains(first.error, "nranks 3 differs from rank 0's 2")) << first.error;
  EXPECT_LT(odd.elapsed_ms, kt_ms(2000));
  EXPECT_LT(first.elapsed_ms, kt_ms(2000));
}

TEST_F(Bootstrap, DuplicateRankFails) {
  kolo_uid uid = start_root(1000);
  auto out = run_ranks(uid, {1, 1}, 3, 3000);
  for (auto &o : out) {
    EXPECT_EQ(o.res, koloInvalidUsage);
    EXPECT_TRUE(contains(o.error, "rank 1")) << o.error;
    EXPECT_TRUE(contains(o.error, "twice")) << o.error;
    EXPECT_LT(o.elapsed_ms, kt_ms(2000));
  }
}

TEST_F(Bootstrap, RootNotThereTimesOut) {
  // A port nobody listens on.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_storage a = loopback4();
  socklen_t len = sizeof(sockaddr_in);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr *>(&a), len), 0);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr *>(&a), &len), 0);
  close(s);
  int port = ntohs(reinterpret_cast<sockaddr_in *>(&a)->sin_port);

  kolo_uid uid;
  memset(&uid, 0, sizeof uid);
  uid.magic = KOLO_UID_MAGIC;
  uid.root = a;
  koloUniqueId id;
  kolo_uid_encode(&uid, &id);
  kolo_uid decoded;
  kolo_errbuf eb{};
  ASSERT_EQ(kolo_uid_decode(&id, &decoded, &eb), koloSuccess) << eb.msg;

  RankOutcome o = run_ranks(decoded, {0}, 2, 500)[0];
  EXPECT_EQ(o.res, koloTimeout);
  std::string root = "root 127.0.0.1:" + std::to_string(port);
  EXPECT_TRUE(contains(o.error, root + " did not answer within 500 ms")) << o.error;
  EXPECT_GE(o.elapsed_ms, 450);
  EXPECT_LT(o.elapsed_ms, kt_ms(2000));
}

TEST_F(Bootstrap, MissingRankIsNamed) {
  kolo_uid uid = start_root(2000);
  auto out = run_ranks(uid, {0, 1}, 3, 2000);
  for (auto &o : out) {
    EXPECT_EQ(o.res, koloTimeout);
    EXPECT_TRUE(contains(o.error, "rank 2 of 3 did not join within 2000 ms")) << o.error;
    EXPECT_GE(o.elapsed_ms, 1900);
    EXPECT_LT(o.elapsed_ms, kt_ms(4000));
  }
  // A latecomer hears the same from the lingering root.
  RankOutcome late = run_ranks(uid, {2}, 3, 2000)[0];
  EXPECT_EQ(late.res, koloTimeout);
  EXPECT_TRUE(contains(late.error, "rank 2 of 3 did not join")) << late.error;
}

TEST_F(Bootstrap, BadArguments) {
  kolo_uid uid;
  memset(&uid, 0, sizeof uid);
  kolo_errbuf eb{};
  kolo_bootstrap *bs = reinterpret_cast<kolo_bootstrap *>(0x1);
  EXPECT_EQ(kolo_bootstrap_init(&uid, 2, 2, 100, &eb, &bs), koloInvalidArgument);
  EXPECT_EQ(kolo_bootstrap_init(&uid, -1, 2, 100, &eb, &bs), koloInvalidArgument);
  EXPECT_EQ(kolo_bootstrap_init(&uid, 0, 0, 100, &eb, &bs), koloInvalidArgument);
  EXPECT_EQ(kolo_bootstrap_init(nullptr, 0, 1, 100, &eb, &bs), koloInvalidArgument);
  EXPECT_EQ(bs, reinterpret_cast<kolo_bootstrap *>(0x1));  // untouched on failure
  kolo_bootstrap_destroy(nullptr);
}

// ---- messages and liveness ------------------------------------------------------------

TEST_F(Bootstrap, MessageErrors) {
  kolo_uid uid = start_root(5000);
  std::atomic<bool> timed_out{false};
  auto out = run_ranks(uid, iota(2), 2, 800, [&](kolo_bootstrap *bs, int rank) {
    kolo_errbuf *eb = kolo_bootstrap_errbuf(bs);
    int peer = 1 - rank;
    char small[8] = {};
    // Larger than the limit: refused before anything is sent.
    EXPECT_EQ(kolo_bootstrap_send(bs, peer, 1, small, (64u << 20) + 1), koloInvalidArgument);
    EXPECT_TRUE(contains(eb->msg, "rank " + std::to_string(peer) + " (")) << eb->msg;
    EXPECT_EQ(kolo_bootstrap_send(bs, 7, 1, small, 1), koloInvalidArgument);
    EXPECT_EQ(kolo_bootstrap_recv(bs, -1, 1, small, 1), koloInvalidArgument);
    // Wrong length: the message is consumed, the error names the sender.
    EXPECT_EQ(kolo_bootstrap_send(bs, peer, 2, small, 4), koloSuccess);
    EXPECT_EQ(kolo_bootstrap_recv(bs, peer, 2, small, 8), koloRemoteError);
    EXPECT_TRUE(contains(eb->msg, "sent 4 bytes")) << eb->msg;
    // Zero-length messages; the own queue.
    EXPECT_EQ(kolo_bootstrap_send(bs, peer, 5, nullptr, 0), koloSuccess);
    EXPECT_EQ(kolo_bootstrap_recv(bs, peer, 5, nullptr, 0), koloSuccess);
    EXPECT_EQ(kolo_bootstrap_recv(bs, rank, 4, small, 1), koloInvalidUsage);
    // Nothing sent with this tag: a bounded wait, reported into the errbuf
    // set last.  Rank 1 waits outside the bootstrap meanwhile.
    if (rank == 0) {
      kolo_errbuf mine{};
      kolo_bootstrap_set_errbuf(bs, &mine);
      auto t0 = Clock::now();
      EXPECT_EQ(kolo_bootstrap_recv(bs, peer, 3, small, 1), koloTimeout);
      EXPECT_GE(ms_since(t0), 750);
      EXPECT_TRUE(contains(mine.msg, "no message with tag 0x3 from rank 1 (")) << mine.msg;
      EXPECT_TRUE(contains(mine.msg, "within 800 ms")) << mine.msg;
      kolo_bootstrap_set_errbuf(bs, eb);
      timed_out = true;
    }
    while (!timed_out) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(kolo_bootstrap_barrier(bs, 6), koloSuccess) << eb->msg;
  });
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
}

TEST_F(Bootstrap, DeadPeerAndRecvFromClosedPeer) {
  kolo_uid uid = start_root(5000);
  std::atomic<int> seen_dead{-2};
  auto out = run_ranks(uid, iota(2), 2, 5000, [&](kolo_bootstrap *bs, int rank) {
    kolo_errbuf *eb = kolo_bootstrap_errbuf(bs);
    char c = 'x';
    if (rank == 1) {
      // A message the other side finds while checking liveness ...
      ASSERT_EQ(kolo_bootstrap_send(bs, 0, 7, &c, 1), koloSuccess);
      ASSERT_EQ(kolo_bootstrap_recv(bs, 0, 8, &c, 1), koloSuccess) << eb->msg;
      // ... and a last one just before going away.
      c = 'z';
      ASSERT_EQ(kolo_bootstrap_send(bs, 0, 9, &c, 1), koloSuccess);
      return;  // run_ranks destroys the bootstrap: the socket closes
    }
    auto t0 = Clock::now();
    while (ms_since(t0) < 300) {  // data pending is not death
      EXPECT_EQ(kolo_bootstrap_dead_peer(bs), -1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(kolo_bootstrap_send(bs, 1, 8, &c, 1), koloSuccess);
    t0 = Clock::now();
    int dead = -1;
    while (dead < 0 && ms_since(t0) < kt_ms(3000)) {
      dead = kolo_bootstrap_dead_peer(bs);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    seen_dead = dead;
    EXPECT_EQ(kolo_bootstrap_dead_peer(bs), 1);  // remembered
    // Messages that arrived before the close are still delivered.
    ASSERT_EQ(kolo_bootstrap_recv(bs, 1, 7, &c, 1), koloSuccess) << eb->msg;
    EXPECT_EQ(c, 'x');
    ASSERT_EQ(kolo_bootstrap_recv(bs, 1, 9, &c, 1), koloSuccess) << eb->msg;
    EXPECT_EQ(c, 'z');
    EXPECT_EQ(kolo_bootstrap_recv(bs, 1, 10, &c, 1), koloRemoteError);
    EXPECT_TRUE(contains(eb->msg, "rank 1 (127.0.0.1:")) << eb->msg;
    EXPECT_TRUE(contains(eb->msg, "left (destroyed its communicator)")) << eb->msg;
    EXPECT_EQ(kolo_bootstrap_send(bs, 1, 11, &c, 1), koloRemoteError);
  });
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
  EXPECT_EQ(seen_dead.load(), 1);
}

using kt::count_threads;

// A joined thread stays listed in /proc/self/task until the kernel reaps it
// (pthread_join returns once its tid is cleared), so the count after a
// stop is taken again until it is `want`, for up to 2 s: a thread left
// running stays counted.
int threads_settled_at(int want) {
  int n = count_threads();
  for (int i = 0; i < 200 && n != want; i++) {
    usleep(10 * 1000);
    n = count_threads();
  }
  return n;
}

// The root a rank 0 starts at init (KOLO_COMM_ID) is owned by it: stopping
// it while a rank waits in it (the job failed) ends the thread at once and
// closes every socket, and the waiting rank learns the root is gone.  It
// was a detached thread that lingered up to 10 s (kolo-fault --tcp found
// rank 0's thread and fds left after a failed init).
TEST_F(Bootstrap, OwnedRootStopsAtOnceAndLeavesNothing) {
  // A thread made and joined first: TSan starts its own background thread
  // at a process's first pthread_create, which is not kolo's to count.
  std::thread([] {}).join();
  int fds0 = count_fds(), threads0 = count_threads();
  sockaddr_storage lo = loopback4();
  kolo_uid uid;
  kolo_errbuf eb{};
  kolo_root *root = nullptr;
  ASSERT_EQ(kolo_bootstrap_root_start_owned(&lo, nullptr, 60000, &uid, &eb, &root), koloSuccess) << eb.msg;
  RankOutcome waiting;
  Clock::time_point returned;
  const int joins = kolo_bootstrap_root_joins();
  std::thread rank1([&] {
    kolo_errbuf reb{};
    kolo_bootstrap *bs = nullptr;
    waiting.res = kolo_bootstrap_init(&uid, 1, 2, 60000, &reb, &bs);  // rank 0 never comes
    returned = Clock::now();
    waiting.error = reb.msg;
    if (bs) kolo_bootstrap_destroy(bs);
  });
  EXPECT_TRUE(wait_for_joins(joins + 1)) << "rank 1 never joined";  // it waits in the root now
  auto t0 = Clock::now();
  kolo_bootstrap_root_stop(root);
  EXPECT_LT(ms_since(t0), kt_ms(5000)) << "must not hang";
  rank1.join();
  EXPECT_NE(waiting.res, koloSuccess);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(returned - t0).count(), kt_ms(5000))
      << "must learn the root is gone at once: " << waiting.error;
  EXPECT_EQ(count_fds(), fds0);
  EXPECT_EQ(threads_settled_at(threads0), threads0);
}

// A fake rank 1, speaking the wire format by hand: rank 0 drops its mesh
// connection with a wrong secret, takes the right one, then fails a recv on
// an oversized message naming rank 1.
TEST_F(Bootstrap, FakeRankOnTheMesh) {
  kolo_uid uid = start_root(5000);
  RankOutcome real;
  std::string recv_error;
  koloResult_t recv_res = koloSuccess;
  int dead = -2;
  std::thread t([&] {
    real = run_ranks(uid, {0}, 2, 5000, [&](kolo_bootstrap *bs, int) {
      char buf[16];
      recv_res = kolo_bootstrap_recv(bs, 1, 1, buf, sizeof buf);
      recv_error = kolo_bootstrap_errbuf(bs)->msg;
      dead = kolo_bootstrap_dead_peer(bs);
    })[0];
  });
  FakeRank1 fake;
  ASSERT_TRUE(fake.join(uid));

  std::vector<uint8_t> mh = mesh_hello_bytes(uid, 1, 2);
  auto bad = mh;
  bad[KOLO_WIRE_HDR_BYTES + 4] ^= 1;  // the secret's first byte
  int stranger = raw_connect(fake.rank0.addr);
  ASSERT_GE(stranger, 0);
  ASSERT_TRUE(raw_send(stranger, bad));
  EXPECT_TRUE(closed_by_peer(stranger, 2000)) << "rank 0 kept a mesh connection with a wrong secret";
  close(stranger);

  ASSERT_TRUE(fake.take_link(uid));
  int mesh = fake.link;
  uint8_t huge[KOLO_WIRE_HDR_BYTES];
  kolo_encode_header(huge, 1, (64ull << 20) + 1);
  ASSERT_TRUE(raw_send(mesh, huge, sizeof huge));
  t.join();
  EXPECT_EQ(real.res, koloSuccess) << real.error;
  EXPECT_EQ(recv_res, koloRemoteError);
  EXPECT_TRUE(contains(recv_error, "rank 1")) << recv_error;
  EXPECT_TRUE(contains(recv_error, "more than the limit")) << recv_error;
  EXPECT_EQ(dead, 1);
}

// ---- the versioned wire ----------------------------------------------------------

kolo_peer_info sample_info(int rank, bool v6) {
  kolo_peer_info p;
  memset(&p, 0, sizeof p);
  if (v6) {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&p.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)(4000 + rank));
    for (int i = 0; i < 16; i++) a->sin6_addr.s6_addr[i] = (uint8_t)(0x20 + i + rank);
  } else {
    p.addr = loopback4(5000 + rank);
  }
  p.host_hash = 0x0123456789abcdefull ^ (uint64_t)rank;
  p.proc_token = 0xfedcba9876543210ull + (uint64_t)rank;
  p.pid = 100000 + rank;
  p.rank = rank;
  return p;
}

bool same_info(const kolo_peer_info &a, const kolo_peer_info &b) {
  char x[80], y[80];
  kolo_addr_str(&a.addr, x, sizeof x);
  kolo_addr_str(&b.addr, y, sizeof y);
  return std::string(x) == y && a.addr.ss_family == b.addr.ss_family && a.host_hash == b.host_hash &&
         a.proc_token == b.proc_token && a.pid == b.pid && a.rank == b.rank;
}

kolo_rank_hello sample_hello(int role) {
  kolo_rank_hello h;
  memset(&h, 0, sizeof h);
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) h.secret[i] = (uint8_t)(0xa0 + i);
  h.nranks = 7;
  h.nids = 3;
  h.role = role;
  h.rank = role == KOLO_HELLO_SUBROOT ? -1 : 6;
  h.root_index = role == KOLO_HELLO_SUBROOT ? 1 : kolo_root_of(6, 7, 3);
  h.first.magic = KOLO_UID_MAGIC;
  h.first.job = 0x1122334455667788ull;
  memcpy(h.first.secret, h.secret, sizeof h.secret);
  h.first.root = loopback4(7777);
  if (role == KOLO_HELLO_RANK) h.info = sample_info(6, true);
  return h;
}

// Every prefix of a message is refused as garbled (never decoded), and so
// is the message with one byte more.
template <typename Decode>
void expect_every_cut_refused(const std::vector<uint8_t> &msg, Decode decode) {
  for (size_t n = 0; n < msg.size(); n++) EXPECT_NE(decode(msg.data(), n), KOLO_WIRE_OK) << "cut at " << n;
  std::vector<uint8_t> longer = msg;
  longer.push_back(0);
  EXPECT_EQ(decode(longer.data(), longer.size()), KOLO_WIRE_GARBLED);
  EXPECT_EQ(decode(msg.data(), msg.size()), KOLO_WIRE_OK);
}

TEST(WireCodec, CursorFailsOnOverrunInsteadOfReadingPast) {
  uint8_t buf[6];
  kolo_wire_out w = kolo_wire_writer(buf, sizeof buf);
  kolo_put_u32(&w, 0x04030201u);
  EXPECT_EQ(w.bad, 0);
  kolo_put_u32(&w, 0xdeadbeefu);  // does not fit: nothing written
  EXPECT_EQ(w.bad, 1);
  EXPECT_EQ(w.off, 4u);
  EXPECT_EQ(buf[0], 1);  // little-endian whatever the host
  EXPECT_EQ(buf[3], 4);
  kolo_wire_in r = kolo_wire_reader(buf, 5);
  EXPECT_EQ(kolo_get_u32(&r), 0x04030201u);
  EXPECT_EQ(kolo_get_u16(&r), 0u);  // 1 byte left: a failed get returns 0
  EXPECT_EQ(r.bad, 1);
  EXPECT_EQ(kolo_get_u8(&r), 0u);  // and stays failed
  EXPECT_EQ(kolo_wire_left(&r), 0u);
}

TEST(WireCodec, HeaderRoundTripIsLittleEndian) {
  uint8_t raw[KOLO_WIRE_HDR_BYTES];
  kolo_encode_header(raw, KOLO_TAG_NEIGHBOR, 0x0102030405060708ull);
  EXPECT_EQ(raw[0], 0x6f);  // "kolo" as a little-endian u32
  EXPECT_EQ(raw[8], 0x08);
  kolo_wire_header h = kolo_decode_header(raw);
  EXPECT_EQ(h.magic, (uint32_t)KOLO_WIRE_MAGIC);
  EXPECT_EQ(h.tag, (uint32_t)KOLO_TAG_NEIGHBOR);
  EXPECT_EQ(h.len, 0x0102030405060708ull);
}

TEST(WireCodec, RankHelloRoundTripAndEveryCutRefused) {
  for (int role : {KOLO_HELLO_RANK, KOLO_HELLO_SUBROOT}) {
    kolo_rank_hello h = sample_hello(role), back;
    std::vector<uint8_t> b(KOLO_RANK_HELLO_BYTES);
    kolo_encode_rank_hello(&h, b.data());
    uint32_t version = 0;
    char why[256] = "";
    ASSERT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OK) << why;
    EXPECT_EQ(version, KOLO_BOOTSTRAP_WIRE_VERSION);
    EXPECT_EQ(memcmp(back.secret, h.secret, sizeof h.secret), 0);
    EXPECT_EQ(back.rank, h.rank);
    EXPECT_EQ(back.nranks, h.nranks);
    EXPECT_EQ(back.nids, h.nids);
    EXPECT_EQ(back.root_index, h.root_index);
    EXPECT_EQ(back.role, h.role);
    EXPECT_EQ(back.first.magic, h.first.magic);
    EXPECT_EQ(back.first.job, h.first.job);
    EXPECT_EQ(kolo_addr_port(&back.first.root), 7777);
    if (role == KOLO_HELLO_RANK) {
      EXPECT_TRUE(same_info(back.info, h.info));
    }
    expect_every_cut_refused(b, [&](const uint8_t *p, size_t n) {
      return kolo_decode_rank_hello(p, n, &back, &version, why, sizeof why);
    });
  }
}

TEST(WireCodec, RankHelloOfAnotherVersionOrOutOfRange) {
  kolo_rank_hello h = sample_hello(KOLO_HELLO_RANK), back;
  std::vector<uint8_t> b(KOLO_RANK_HELLO_BYTES);
  kolo_encode_rank_hello(&h, b.data());
  uint32_t version = 0;
  char why[256] = "";
  const std::string ours = std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION);
  b[0] = (uint8_t)(KOLO_BOOTSTRAP_WIRE_VERSION + 1);  // a newer version, little-endian
  EXPECT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OTHER_VERSION);
  EXPECT_EQ(version, KOLO_BOOTSTRAP_WIRE_VERSION + 1);
  EXPECT_TRUE(contains(why, "speaks kolo wire version " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION + 1) +
                                ", this process speaks " + ours))
      << why;
  b[0] = 2;  // version 2 (older: host-order pipe descriptors)
  EXPECT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OTHER_VERSION);
  EXPECT_TRUE(contains(why, "speaks kolo wire version 2, this process speaks " + ours)) << why;
  b[0] = 3;  // version 3 (older: host-order init, split, shrink and fusion records)
  EXPECT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OTHER_VERSION);
  EXPECT_TRUE(contains(why, "speaks kolo wire version 3, this process speaks " + ours)) << why;
  b[0] = 4;  // version 4 (older: the whole table from the root, a full mesh at init)
  EXPECT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OTHER_VERSION);
  EXPECT_TRUE(contains(why, "speaks kolo wire version 4, this process speaks " + ours)) << why;
  struct Bad {
    int rank, nranks, nids, root_index, role;
    const char *why;
  } cases[] = {{0, 0, 1, 0, KOLO_HELLO_RANK, "for 0 ranks"},     {7, 7, 1, 0, KOLO_HELLO_RANK, "rank 7 of 7"},
               {-2, 4, 1, 0, KOLO_HELLO_RANK, "rank -2 of 4"},   {0, 4, 5, 0, KOLO_HELLO_RANK, "5 ids"},
               {0, 4, 2, 2, KOLO_HELLO_RANK, "root 2 of 2 ids"}, {0, 4, 1, 0, 9, "unknown role 9"},
               {3, 4, 2, 1, KOLO_HELLO_SUBROOT, "rank 3 of 4"}};
  for (const Bad &c : cases) {
    h = sample_hello(KOLO_HELLO_RANK);
    h.rank = c.rank, h.nranks = c.nranks, h.nids = c.nids, h.root_index = c.root_index, h.role = c.role;
    kolo_encode_rank_hello(&h, b.data());
    EXPECT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_GARBLED)
        << c.why;
    EXPECT_TRUE(contains(why, c.why)) << why;
  }
  h = sample_hello(KOLO_HELLO_RANK);
  kolo_encode_rank_hello(&h, b.data());
  b[KOLO_RANK_HELLO_BYTES - KOLO_PEER_INFO_BYTES] = 5;  // the info's address family: neither 4 nor 6
  EXPECT_EQ(kolo_decode_rank_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "neither IPv4 nor IPv6")) << why;
}

TEST(WireCodec, MeshHelloRoundTripAndEveryCutRefused) {
  kolo_mesh_hello h, back;
  memset(&h, 0, sizeof h);
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) h.secret[i] = (uint8_t)(3 * i);
  h.job = 0x8877665544332211ull;
  h.rank = 4;
  h.nranks = 5;
  std::vector<uint8_t> b(KOLO_MESH_HELLO_BYTES);
  kolo_encode_mesh_hello(&h, b.data());
  uint32_t version = 0;
  char why[256] = "";
  ASSERT_EQ(kolo_decode_mesh_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OK) << why;
  EXPECT_EQ(memcmp(back.secret, h.secret, sizeof h.secret), 0);
  EXPECT_EQ(back.job, h.job);
  EXPECT_EQ(back.rank, 4);
  EXPECT_EQ(back.nranks, 5);
  expect_every_cut_refused(b, [&](const uint8_t *p, size_t n) {
    return kolo_decode_mesh_hello(p, n, &back, &version, why, sizeof why);
  });
  h.rank = 5;
  kolo_encode_mesh_hello(&h, b.data());
  EXPECT_EQ(kolo_decode_mesh_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "rank 5 of 5")) << why;
  b[0] = 1;
  EXPECT_EQ(kolo_decode_mesh_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_WIRE_OTHER_VERSION);
  EXPECT_EQ(version, 1u);
}

TEST(WireCodec, PeerTableRoundTripAndWrongEntries) {
  std::vector<kolo_peer_info> t = {sample_info(0, false), sample_info(1, true), sample_info(2, false)};
  std::vector<uint8_t> b(3 * KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_table(t.data(), 0, 3, b.data());
  std::vector<kolo_peer_info> back(3);
  char why[256] = "";
  ASSERT_EQ(kolo_decode_peer_table(b.data(), b.size(), 0, 3, back.data(), why, sizeof why), KOLO_WIRE_OK) << why;
  for (int r = 0; r < 3; r++) EXPECT_TRUE(same_info(back[(size_t)r], t[(size_t)r])) << "entry " << r;
  // a block: entries 1..2 only
  ASSERT_EQ(kolo_decode_peer_table(b.data() + KOLO_PEER_INFO_BYTES, 2 * KOLO_PEER_INFO_BYTES, 1, 3, back.data(),
                                   why, sizeof why),
            KOLO_WIRE_OK)
      << why;
  EXPECT_EQ(kolo_decode_peer_table(b.data(), b.size() - 1, 0, 3, back.data(), why, sizeof why), KOLO_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "expected 129")) << why;
  t[1].rank = 2;
  kolo_encode_peer_table(t.data(), 0, 3, b.data());
  EXPECT_EQ(kolo_decode_peer_table(b.data(), b.size(), 0, 3, back.data(), why, sizeof why), KOLO_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "entry 1 as rank 2")) << why;
}

TEST(WireCodec, RefusalAndRootReply) {
  uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
  size_t n = kolo_encode_refusal(koloInvalidUsage, "nranks 4 differs", m + KOLO_WIRE_HDR_BYTES);
  EXPECT_EQ(n, 4u + 16u);
  kolo_encode_header(m, KOLO_TAG_REFUSED, n);
  kolo_peer_info table[2];
  kolo_errbuf eb;
  EXPECT_EQ(kolo_root_decode_reply(m, KOLO_WIRE_HDR_BYTES + n, 2, table, "root X", &eb), koloInvalidUsage);
  EXPECT_STREQ(eb.msg, "nranks 4 differs");
  // a refusal may not smuggle in success, nor a code kolo does not have
  m[KOLO_WIRE_HDR_BYTES] = 0;
  EXPECT_EQ(kolo_root_decode_reply(m, KOLO_WIRE_HDR_BYTES + n, 2, table, "root X", &eb), koloRemoteError);
  // the ring predecessor's entry; the wrong rank, the wrong size, a short message, garbage
  std::vector<uint8_t> t(KOLO_WIRE_HDR_BYTES + KOLO_PEER_INFO_BYTES);
  kolo_peer_info one = sample_info(1, true);
  kolo_encode_header(t.data(), KOLO_TAG_NEIGHBOR, KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_info(&one, t.data() + KOLO_WIRE_HDR_BYTES);
  ASSERT_EQ(kolo_root_decode_reply(t.data(), t.size(), 1, &table[1], "root X", &eb), koloSuccess) << eb.msg;
  EXPECT_TRUE(same_info(table[1], one));
  EXPECT_EQ(kolo_root_decode_reply(t.data(), t.size(), 2, &table[1], "root X", &eb), koloRemoteError);
  EXPECT_TRUE(contains(eb.msg, "root X sent the entry of rank 2 as rank 1")) << eb.msg;
  std::vector<uint8_t> two(KOLO_WIRE_HDR_BYTES + 2 * KOLO_PEER_INFO_BYTES);
  kolo_peer_info both[2] = {sample_info(0, false), sample_info(1, false)};
  kolo_encode_header(two.data(), KOLO_TAG_NEIGHBOR, 2 * KOLO_PEER_INFO_BYTES);
  kolo_encode_peer_table(both, 0, 2, two.data() + KOLO_WIRE_HDR_BYTES);
  EXPECT_EQ(kolo_root_decode_reply(two.data(), two.size(), 1, &table[1], "root X", &eb), koloRemoteError);
  EXPECT_TRUE(contains(eb.msg, "root X sent a peer entry of 86 bytes, expected 43")) << eb.msg;
  EXPECT_EQ(kolo_root_decode_reply(t.data(), t.size() - 1, 1, &table[1], "root X", &eb), koloRemoteError);
  EXPECT_TRUE(contains(eb.msg, "announced 43 bytes and sent 42")) << eb.msg;
  t[0] ^= 0xff;
  EXPECT_EQ(kolo_root_decode_reply(t.data(), t.size(), 1, &table[1], "root X", &eb), koloRemoteError);
  EXPECT_TRUE(contains(eb.msg, "sent garbage")) << eb.msg;
}

// A mesh hello's verdict: accepted or crossed, nothing else, exactly 4 bytes.
TEST(WireCodec, MeshVerdictRoundTripAndGarbage) {
  uint8_t b[KOLO_VERDICT_BYTES + 1] = {0};
  uint32_t v = 0;
  for (uint32_t want : {(uint32_t)KOLO_MESH_ACCEPTED, (uint32_t)KOLO_MESH_CROSSED}) {
    kolo_encode_verdict(want, b);
    ASSERT_EQ(kolo_decode_verdict(b, KOLO_VERDICT_BYTES, &v), KOLO_WIRE_OK);
    EXPECT_EQ(v, want);
    EXPECT_EQ(kolo_decode_verdict(b, KOLO_VERDICT_BYTES - 1, &v), KOLO_WIRE_GARBLED);
    EXPECT_EQ(kolo_decode_verdict(b, KOLO_VERDICT_BYTES + 1, &v), KOLO_WIRE_GARBLED);
  }
  kolo_encode_verdict(3, b);
  EXPECT_EQ(kolo_decode_verdict(b, KOLO_VERDICT_BYTES, &v), KOLO_WIRE_GARBLED);
}

// Captures what kolo logs at WARN for the scope (KOLO_DEBUG_FILE).
class LogCapture {
 public:
  LogCapture() : path_("/tmp/kolo-wire-log-" + std::to_string(getpid())) {
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
  // Waits until the log holds `part` (the root logs from its own thread).
  bool wait_for(const std::string &part, int timeout_ms) const {
    auto t0 = Clock::now();
    while (!contains(text(), part) && ms_since(t0) < kt_ms(timeout_ms))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return contains(text(), part);
  }

 private:
  std::string path_;
  std::unique_ptr<kt::ScopedEnv> level_, file_;
};

// A hello as version 1 sent it: its own tag, a host-order struct's bytes.
std::vector<uint8_t> v1_hello(uint32_t tag, size_t body_bytes) {
  std::vector<uint8_t> m(KOLO_WIRE_HDR_BYTES + body_bytes, 0x11);
  kolo_encode_header(m.data(), tag, body_bytes);
  return m;
}

std::vector<uint8_t> hello_of_version(const kolo_uid &uid, uint32_t version) {
  RankHelloMsg h = make_rank_hello(uid, 0, 2);
  std::vector<uint8_t> m = wire_bytes(h);
  kolo_wire_out w = kolo_wire_writer(m.data() + KOLO_WIRE_HDR_BYTES, 4);
  kolo_put_u32(&w, version);
  return m;
}

enum class OldPeer { kVersion1, kVersion2, kOutOfRange };

class BootstrapOldPeer : public Bootstrap, public ::testing::WithParamInterface<OldPeer> {};

// A peer of another version at the root is refused with a sentence naming
// both versions, told to it as a refusal, logged by the root; the job then
// completes.
TEST_P(BootstrapOldPeer, IsRefusedWithBothVersionsAndTheJobCompletes) {
  LogCapture log;
  kolo_uid uid = start_root(10000);
  int fd = raw_connect(uid.root);
  ASSERT_GE(fd, 0);
  std::string want;
  if (GetParam() == OldPeer::kVersion1) {
    ASSERT_TRUE(raw_send(fd, v1_hello(KOLO_TAG_RANK_HELLO_V1, 352)));
    want = "speaks kolo wire version 1, this root speaks " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION);
  } else if (GetParam() == OldPeer::kVersion2) {
    ASSERT_TRUE(raw_send(fd, hello_of_version(uid, 2)));
    want = "speaks kolo wire version 2, this root speaks " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION);
  } else {
    RankHelloMsg h = make_rank_hello(uid, 0, 2);
    h.body.nranks = 0;
    ASSERT_TRUE(raw_send(fd, wire_bytes(h)));
    want = "sent a hello for 0 ranks";
  }
  kolo_wire_header hdr;
  std::vector<uint8_t> body;
  ASSERT_TRUE(raw_recv_msg(fd, &hdr, &body, 5000));
  EXPECT_EQ(hdr.tag, (uint32_t)KOLO_TAG_REFUSED);
  koloResult_t res;
  char text[KOLO_ERR_LEN];
  ASSERT_EQ(kolo_decode_refusal(body.data(), body.size(), &res, text, sizeof text), KOLO_WIRE_OK);
  EXPECT_EQ(res, koloInvalidUsage);
  EXPECT_TRUE(contains(text, want)) << text;
  EXPECT_TRUE(contains(text, "peer 127.0.0.1:")) << text;
  EXPECT_TRUE(closed_by_peer(fd, 2000));
  close(fd);
  EXPECT_TRUE(log.wait_for(want, 2000)) << log.text();
  auto out = run_ranks(uid, iota(2), 2, 10000);
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
}

INSTANTIATE_TEST_SUITE_P(Kinds, BootstrapOldPeer,
                         ::testing::Values(OldPeer::kVersion1, OldPeer::kVersion2, OldPeer::kOutOfRange));

// The root logs why it dropped each stranger (the sentence, not just the drop).
TEST_F(Bootstrap, StrangersAreDroppedWithTheRightSentence) {
  LogCapture log;
  kolo_uid uid = start_root(10000);
  struct {
    Stranger kind;
    const char *why;
  } cases[] = {{Stranger::kWrongSecret, "did not present the job's secret"},
               {Stranger::kGarbage, "sent garbage (header magic"},
               {Stranger::kTruncated, "(truncated hello)"},
               {Stranger::kOversized, "more than 512 (oversized)"}};
  for (const auto &c : cases) {
    int fd = stranger_connect(uid, c.kind);
    EXPECT_TRUE(closed_by_peer(fd, 2000)) << c.why;
    close(fd);
    EXPECT_TRUE(log.wait_for(c.why, 2000)) << log.text();
  }
  auto out = run_ranks(uid, iota(2), 2, 10000);
  for (auto &o : out) EXPECT_EQ(o.res, koloSuccess) << o.error;
}

// A fake root that answers with a refusal of a newer version: the rank's
// init fails with the root's sentence (the refused side learns why).  The
// fake root also checks what a real rank sends: a hello of this version.
TEST_F(Bootstrap, RankLearnsWhyARootOfAnotherVersionRefusedIt) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_storage at = loopback4(0);
  socklen_t len = sizeof(sockaddr_in);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr *>(&at), len), 0);
  ASSERT_EQ(listen(lfd, 4), 0);
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr *>(&at), &len), 0);
  kolo_uid uid;
  memset(&uid, 0, sizeof uid);
  uid.magic = KOLO_UID_MAGIC;
  uid.root = at;
  std::thread fake([&] {
    int fd = accept(lfd, nullptr, nullptr);
    ASSERT_GE(fd, 0);
    kolo_wire_header hdr;
    std::vector<uint8_t> body;
    ASSERT_TRUE(raw_recv_msg(fd, &hdr, &body, 5000));
    EXPECT_EQ(hdr.tag, (uint32_t)KOLO_TAG_RANK_HELLO);
    kolo_rank_hello h;
    uint32_t version = 0;
    char why[256] = "";
    EXPECT_EQ(kolo_decode_rank_hello(body.data(), body.size(), &h, &version, why, sizeof why), KOLO_WIRE_OK) << why;
    EXPECT_EQ(h.rank, 1);
    EXPECT_EQ(h.nranks, 3);
    EXPECT_EQ(h.info.pid, (int32_t)getpid());
    uint8_t m[KOLO_WIRE_HDR_BYTES + KOLO_REFUSAL_MAX_BYTES];
    std::string text = "root R: peer P speaks kolo wire version " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION) +
                       ", this root speaks " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION + 1);
    size_t n = kolo_encode_refusal(koloInvalidUsage, text.c_str(),
                                   m + KOLO_WIRE_HDR_BYTES);
    kolo_encode_header(m, KOLO_TAG_REFUSED, n);
    EXPECT_TRUE(raw_send(fd, m, KOLO_WIRE_HDR_BYTES + n));
    close(fd);
  });
  kolo_errbuf eb;
  kolo_bootstrap *bs = nullptr;
  EXPECT_EQ(kolo_bootstrap_init(&uid, 1, 3, 5000, &eb, &bs), koloInvalidUsage);
  EXPECT_TRUE(contains(eb.msg, "this root speaks " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION + 1))) << eb.msg;
  fake.join();
  close(lfd);
}

// A fake rank 1 on the mesh: a version 1 mesh hello is refused (and told
// why), a truncated one dropped; the real one is taken, and its goodbye
// says how it went.
TEST_F(Bootstrap, MeshRefusesOtherVersionsAndHearsGoodbyes) {
  LogCapture log;
  kolo_uid uid = start_root(5000);
  std::string recv_error;
  koloResult_t recv_res = koloSuccess;
  int fate = -1;
  RankOutcome real;
  std::thread t([&] {
    real = run_ranks(uid, {0}, 2, 5000, [&](kolo_bootstrap *bs, int) {
      char c;
      recv_res = kolo_bootstrap_recv(bs, 1, 1, &c, 1);
      recv_error = kolo_bootstrap_errbuf(bs)->msg;
      fate = kolo_bootstrap_peer_dead(bs, 1);
    })[0];
  });
  FakeRank1 fake;
  ASSERT_TRUE(fake.join(uid));
  kolo_wire_header hdr;
  std::vector<uint8_t> body;

  int old = raw_connect(fake.rank0.addr);
  ASSERT_GE(old, 0);
  ASSERT_TRUE(raw_send(old, v1_hello(KOLO_TAG_MESH_HELLO_V1, 40)));
  ASSERT_TRUE(raw_recv_msg(old, &hdr, &body, 5000));
  EXPECT_EQ(hdr.tag, (uint32_t)KOLO_TAG_REFUSED);
  std::string text(body.begin() + 4, body.end());
  EXPECT_TRUE(contains(text, "rank 0 refused a mesh connection: peer 127.0.0.1:")) << text;
  EXPECT_TRUE(contains(text, "speaks kolo wire version 1, this rank speaks " + std::to_string(KOLO_BOOTSTRAP_WIRE_VERSION))) << text;
  EXPECT_TRUE(closed_by_peer(old, 2000));
  close(old);

  std::vector<uint8_t> mh = mesh_hello_bytes(uid, 1, 2);
  int cut = raw_connect(fake.rank0.addr);
  ASSERT_GE(cut, 0);
  ASSERT_TRUE(raw_send(cut, mh.data(), mh.size() - 3));
  shutdown(cut, SHUT_WR);
  EXPECT_TRUE(closed_by_peer(cut, 2000));
  close(cut);
  EXPECT_TRUE(log.wait_for("(truncated hello)", 2000)) << log.text();

  ASSERT_TRUE(fake.take_link(uid));
  int mesh = fake.link;
  // A goodbye of 4 bytes (the reason only, as before it blamed a rank).
  uint8_t bye[KOLO_WIRE_HDR_BYTES + 4];
  kolo_encode_header(bye, KOLO_TAG_GOODBYE, 4);
  kolo_wire_out w = kolo_wire_writer(bye + KOLO_WIRE_HDR_BYTES, 4);
  kolo_put_u32(&w, KOLO_BYE_EXITED);
  ASSERT_TRUE(raw_send(mesh, bye, sizeof bye));
  t.join();
  EXPECT_EQ(real.res, koloSuccess) << real.error;
  EXPECT_EQ(recv_res, koloRemoteError);
  EXPECT_TRUE(contains(recv_error, "rank 1 (127.0.0.1:")) << recv_error;
  EXPECT_TRUE(contains(recv_error, "exited without destroying its communicator")) << recv_error;
  EXPECT_EQ(fate, KOLO_PEER_EXITED);
}

}  // namespace
