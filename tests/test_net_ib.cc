// test_net_ib.cc - the ibverbs net provider (issue 4): transport/net_ib*.c,
// transport/ib_select.c, transport/net_registry.c.
//
//  - IbHca: the KOLO_IB_HCA parser and matcher (NCCL's syntax), pure code:
//    always runs.
//  - NetRegistry: providers by name and KOLO_NET's choice: always runs.
//  - NetIb: the provider alone, both ends in this process and driven from
//    this thread (no proxy): regions of odd sizes (0, 1 byte, around and
//    above the MTU, above the 4 MiB piece) in flight together, 1 and 4 QPs
//    per connection, a pipelined stream through 8 fixed slots with a credit
//    per message (control messages in order, registrations reused), stop
//    words both ways, a stray connection refused, sends shorter than their
//    receive (landing at its start) and a longer one refused, and each end's close reported on the other naming it.
//    Skips (visibly) where no ibverbs device is usable.  With
//    KOLO_TEST_IB_SEND_HCA / KOLO_TEST_IB_RECV_HCA the two ends use
//    different devices (the soft-RoCE guest: rxe1 -> rxe0 across a veth).
//  - IbProcs.TwoHosts: two forked ranks as two "hosts" (KOLO_HOSTID) over
//    KOLO_NET=ib: all-reduce, all-gather and send/recv, element-checked;
//    KOLO_TEST_IB_HCA_RANK0/1 give each rank its device.
//  - IbProcs.RankKilledDuringCollective: rank 1 dies (SIGKILL) during a
//    large all-reduce; rank 0 returns an error naming it within the bound.
//  - IbRank.Run: one rank launched from outside (KOLO_IB_RANK=1 and the
//    launcher's variables; tests/rdma/kolo_guest.sh runs two of them on
//    rxe0/10.77.0.1 and rxe1/10.77.0.2): the same collectives.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/proc_util.h"

extern "C" {
#include "transport/ib_select.h"
#include "transport/net.h"
#include "transport/socket.h"
}

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(120000), true);

// ---- KOLO_IB_HCA ---------------------------------------------------------------

kolo_ib_hca_list parse_ok(const char *spec) {
  kolo_ib_hca_list l;
  char why[160] = "";
  EXPECT_EQ(kolo_ib_hca_parse(spec, &l, why, sizeof why), 0) << spec << ": " << why;
  return l;
}

TEST(IbHca, EmptySelectsEverything) {
  for (const char *spec : {(const char *)nullptr, ""}) {
    kolo_ib_hca_list l = parse_ok(spec);
    EXPECT_EQ(l.n, 0);
    EXPECT_TRUE(kolo_ib_hca_match(&l, "mlx5_0", 1));
    EXPECT_TRUE(kolo_ib_hca_match(&l, "rxe1", 2));
  }
}

TEST(IbHca, PrefixesAndPorts) {
  kolo_ib_hca_list l = parse_ok("mlx5_0:1,mlx5_1");
  ASSERT_EQ(l.n, 2);
  EXPECT_STREQ(l.e[0].name, "mlx5_0");
  EXPECT_EQ(l.e[0].port, 1);
  EXPECT_EQ(l.e[1].port, 0);
  EXPECT_TRUE(kolo_ib_hca_match(&l, "mlx5_0", 1));
  EXPECT_FALSE(kolo_ib_hca_match(&l, "mlx5_0", 2));
  EXPECT_TRUE(kolo_ib_hca_match(&l, "mlx5_1", 1));
  EXPECT_TRUE(kolo_ib_hca_match(&l, "mlx5_1", 2));
  EXPECT_TRUE(kolo_ib_hca_match(&l, "mlx5_10", 1));  // a prefix, as in NCCL
  EXPECT_FALSE(kolo_ib_hca_match(&l, "mlx5_2", 1));
  l = parse_ok("mlx5");
  EXPECT_TRUE(kolo_ib_hca_match(&l, "mlx5_3", 1));
  EXPECT_FALSE(kolo_ib_hca_match(&l, "mlx4_0", 1));
  EXPECT_FALSE(kolo_ib_hca_match(&l, "mlx", 1));
}

TEST(IbHca, ExactAndExclude) {
  kolo_ib_hca_list l = parse_ok("=rxe0");
  EXPECT_TRUE(l.exact);
  EXPECT_TRUE(kolo_ib_hca_match(&l, "rxe0", 1));
  EXPECT_FALSE(kolo_ib_hca_match(&l, "rxe01", 1));
  l = parse_ok("^rxe0");
  EXPECT_TRUE(l.exclude);
  EXPECT_FALSE(kolo_ib_hca_match(&l, "rxe0", 1));
  EXPECT_FALSE(kolo_ib_hca_match(&l, "rxe01", 1));  // prefix excluded too
  EXPECT_TRUE(kolo_ib_hca_match(&l, "rxe1", 1));
  l = parse_ok("^=rxe0:2");
  EXPECT_TRUE(l.exclude && l.exact);
  EXPECT_TRUE(kolo_ib_hca_match(&l, "rxe0", 1));
  EXPECT_FALSE(kolo_ib_hca_match(&l, "rxe0", 2));
  EXPECT_TRUE(kolo_ib_hca_match(&l, "rxe01", 2));
  l = parse_ok("rxe0,,rxe1,");  // empty entries are forgiven
  EXPECT_EQ(l.n, 2);
}

TEST(IbHca, MalformedListsSayWhy) {
  std::string long_name(80, 'x');
  std::string many;
  for (int i = 0; i < KOLO_IB_HCA_MAX + 1; i++) many += "d" + std::to_string(i) + ",";
  for (std::string spec : {std::string(":1"), std::string("rxe0:"), std::string("rxe0:0"), std::string("rxe0:x"),
                           std::string("rxe0:256"), std::string("^"), std::string("="), std::string("^="),
                           long_name, many}) {
    kolo_ib_hca_list l;
    char why[160] = "";
    EXPECT_EQ(kolo_ib_hca_parse(spec.c_str(), &l, why, sizeof why), -1) << spec;
    EXPECT_NE(why[0], '\0') << spec;
  }
}

// ---- the registry ------------------------------------------------------------------

TEST(NetRegistry, FindAndChoose) {
  EXPECT_EQ(kolo_net_find("socket"), &kolo_net_socket);
  EXPECT_EQ(kolo_net_find("nope"), nullptr);
  EXPECT_EQ(kolo_net_find(nullptr), nullptr);
#ifdef KOLO_HAVE_IBVERBS
  EXPECT_EQ(kolo_net_find("ib"), &kolo_net_ib);
#else
  EXPECT_EQ(kolo_net_find("ib"), nullptr);
#endif
  kolo_errbuf eb{};
  {
    ScopedEnv net("KOLO_NET", "socket");
    EXPECT_EQ(kolo_net_default(&eb), &kolo_net_socket);
  }
  {
    ScopedEnv net("KOLO_NET", "carrier-pigeon");
    EXPECT_EQ(kolo_net_default(&eb), nullptr);
    EXPECT_NE(std::string(eb.msg).find("carrier-pigeon"), std::string::npos) << eb.msg;
  }
  unsetenv("KOLO_NET");
  const kolo_net_provider *p = kolo_net_default(&eb);
  ASSERT_NE(p, nullptr);
  int ndev = 0;
  kolo_errbuf deb{};
  const kolo_net_provider *ib = kolo_net_find("ib");
  bool ib_usable = ib && ib->devices(&ndev, &deb) == koloSuccess && ndev > 0;
  EXPECT_EQ(p, ib_usable ? ib : &kolo_net_socket) << "automatic choice: " << p->name;
  std::printf("  automatic choice here: %s%s%s\n", p->name, ib_usable ? "" : " (ib: ",
              ib_usable ? "" : (std::string(deb.msg) + ")").c_str());
}

// ---- the provider alone ---------------------------------------------------------------

// Open file descriptors of this process.
int count_fds() {
  int n = 0;
  for (int fd = 0; fd < 4096; fd++) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

// The ib provider, or nullptr with the reason it cannot run here.
const kolo_net_provider *usable_ib(std::string *why) {
  const kolo_net_provider *ib = kolo_net_find("ib");
  if (ib == nullptr) {
    *why = "kolo was built without libibverbs";
    return nullptr;
  }
  int ndev = 0;
  kolo_errbuf eb{};
  if (ib->devices(&ndev, &eb) != koloSuccess || ndev == 0) {
    *why = std::string("no usable ibverbs device: ") + eb.msg;
    return nullptr;
  }
  return ib;
}

#define REQUIRE_IB(net)                                                        \
  std::string skip_why_;                                                       \
  const kolo_net_provider *net = usable_ib(&skip_why_);                        \
  if (net == nullptr) GTEST_SKIP() << "SKIP: " << skip_why_

// KOLO_IB_HCA for one end, from KOLO_TEST_IB_{SEND,RECV}_HCA when given.
struct EndHca {
  std::string old;
  bool had = false, set = false;
  explicit EndHca(const char *var) {
    const char *v = getenv(var);
    if (v == nullptr || *v == '\0') return;
    const char *o = getenv("KOLO_IB_HCA");
    had = o != nullptr;
    if (had) old = o;
    setenv("KOLO_IB_HCA", v, 1);
    set = true;
  }
  ~EndHca() {
    if (!set) return;
    if (had) setenv("KOLO_IB_HCA", old.c_str(), 1);
    else unsetenv("KOLO_IB_HCA");
  }
};

struct Pair {
  const kolo_net_provider *net = nullptr;
  void *lcomm = nullptr, *s = nullptr, *r = nullptr;
  kolo_errbuf eb{};
  ~Pair() {
    if (lcomm) net->close_listen(lcomm);
    if (s) net->close(s);
    if (r) net->close(r);
  }
};

sockaddr_storage loopback() {
  sockaddr_storage a{};
  auto *v4 = reinterpret_cast<sockaddr_in *>(&a);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// listen + connect (the sender, "rank 1" to it) + accept ("rank 0").
::testing::AssertionResult open_pair(Pair *p, const kolo_net_provider *net, int nqps) {
  p->net = net;
  ScopedEnv qps("KOLO_IB_QPS_PER_CONN", std::to_string(nqps));
  sockaddr_storage lo = loopback();
  kolo_net_handle h;
  if (net->listen(&lo, 0, &h, &p->lcomm, &p->eb) != koloSuccess)
    return ::testing::AssertionFailure() << "listen: " << p->eb.msg;
  {
    EndHca hca("KOLO_TEST_IB_SEND_HCA");
    if (net->connect(&h, 0, kolo_deadline(10000), 10000, "rank 1 (test)", &p->s, &p->eb) != koloSuccess)
      return ::testing::AssertionFailure() << "connect: " << p->eb.msg;
  }
  {
    EndHca hca("KOLO_TEST_IB_RECV_HCA");
    if (net->accept(p->lcomm, kolo_deadline(10000), 10000, "rank 0 (test)", &p->r, &p->eb) != koloSuccess)
      return ::testing::AssertionFailure() << "accept: " << p->eb.msg;
  }
  net->close_listen(p->lcomm);
  p->lcomm = nullptr;
  return ::testing::AssertionSuccess();
}

// Drives both ends until every request finished, in order (30 s bound).
::testing::AssertionResult finish(Pair *p, const std::vector<uint32_t> &sid, const std::vector<uint32_t> &rid) {
  size_t sd = 0, rd = 0;
  double t0 = now_ms();
  while (sd < sid.size() || rd < rid.size()) {
    int d = 0;
    if (sd < sid.size()) {
      if (p->net->test(p->s, sid[sd], &d, &p->eb) != koloSuccess)
        return ::testing::AssertionFailure() << "sender test " << sd << ": " << p->eb.msg;
      sd += d;
    }
    if (rd < rid.size()) {
      if (p->net->test(p->r, rid[rd], &d, &p->eb) != koloSuccess)
        return ::testing::AssertionFailure() << "receiver test " << rd << ": " << p->eb.msg;
      rd += d;
    }
    if (now_ms() - t0 > 30000)
      return ::testing::AssertionFailure() << "timeout: " << sd << "/" << sid.size() << " sent, " << rd << "/"
                                           << rid.size() << " received";
  }
  return ::testing::AssertionSuccess();
}

void pattern(unsigned char *p, size_t n, uint32_t seed) {
  uint64_t x = mix64(seed + 1);
  for (size_t i = 0; i < n; i++) {
    if (i % 8 == 0) x = mix64(x + i);
    p[i] = (unsigned char)(x >> (8 * (i % 8)));
  }
}

// Every size in flight at once, each checked byte for byte.
void round_trip(int nqps, const std::vector<size_t> &sizes) {
  REQUIRE_IB(net);
  int fds_before = count_fds();
  {
    Pair p;
    ASSERT_TRUE(open_pair(&p, net, nqps));
    std::vector<std::vector<unsigned char>> src(sizes.size()), dst(sizes.size());
    std::vector<uint32_t> sid(sizes.size()), rid(sizes.size());
    for (size_t k = 0; k < sizes.size(); k++) {
      src[k].resize(sizes[k] + 1);  // + 1: never a null data()
      dst[k].assign(sizes[k] + 1, 0xee);
      pattern(src[k].data(), sizes[k], (uint32_t)k);
      int q = 0;
      ASSERT_EQ(net->irecv(p.r, dst[k].data(), sizes[k], &rid[k], &q, &p.eb), koloSuccess) << p.eb.msg;
      ASSERT_EQ(q, 1);
      ASSERT_EQ(net->isend(p.s, src[k].data(), sizes[k], &sid[k], &q, &p.eb), koloSuccess) << p.eb.msg;
      ASSERT_EQ(q, 1);
    }
    double t0 = now_ms();
    ASSERT_TRUE(finish(&p, sid, rid));
    double ms = now_ms() - t0;
    size_t total = 0;
    for (size_t k = 0; k < sizes.size(); k++) {
      total += sizes[k];
      EXPECT_EQ(memcmp(src[k].data(), dst[k].data(), sizes[k]), 0) << "region " << k << " of " << sizes[k]
                                                                     << " bytes differs";
      EXPECT_EQ(dst[k][sizes[k]], 0xee) << "region " << k << ": written past its end";
    }
    std::printf("  %zu regions, %zu bytes over %d QP(s) in %.1f ms\n", sizes.size(), total, nqps, ms);
  }
  EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked";
}

TEST(NetIb, OddSizesInFlightOneQp) {
  round_trip(1, {1, 0, 3, 1023, 1025, 4097, 65535, 65536 + 1, (1u << 20) + 3, (4u << 20) + 5});
}

TEST(NetIb, SeveralQpsPerConnection) {
  round_trip(4, {1, 100, 65536, 65536 * 3 + 7, (1u << 20) + 3, (4u << 20) + 4097});
}

// Like the proxy: 8 fixed slots per end, a stream of messages through them,
// the receiver's credit (messages drained) after each one; the sender sees
// the credits in order.
TEST(NetIb, PipelinedSlotsWithCreditsInOrder) {
  REQUIRE_IB(net);
  Pair p;
  ASSERT_TRUE(open_pair(&p, net, 2));
  const int kSlots = 8, kMsgs = 400;
  const size_t len = 5000;  // several MTUs
  std::vector<unsigned char> sbuf(kSlots * len), rbuf(kSlots * len), want(len);
  uint32_t sid[kSlots], rid[kSlots];
  int sp = 0, sd = 0, rp = 0, rd = 0, credits = 0, q = 0, got = 0;
  uint32_t kind = 0, value = 0;
  double t0 = now_ms();
  while ((rd < kMsgs || credits < kMsgs) && now_ms() - t0 < 60000) {
    while (sp < kMsgs && sp - sd < kSlots) {
      pattern(&sbuf[(sp % kSlots) * len], len, (uint32_t)sp + 1000);
      ASSERT_EQ(net->isend(p.s, &sbuf[(sp % kSlots) * len], len, &sid[sp % kSlots], &q, &p.eb), koloSuccess)
          << p.eb.msg;
      ASSERT_EQ(q, 1);
      sp++;
    }
    while (rp < kMsgs && rp - rd < kSlots) {
      ASSERT_EQ(net->irecv(p.r, &rbuf[(rp % kSlots) * len], len, &rid[rp % kSlots], &q, &p.eb), koloSuccess)
          << p.eb.msg;
      ASSERT_EQ(q, 1);
      rp++;
    }
    int d = 0;
    if (sd < sp) {
      ASSERT_EQ(net->test(p.s, sid[sd % kSlots], &d, &p.eb), koloSuccess) << p.eb.msg;
      sd += d;
    }
    if (rd < rp) {
      ASSERT_EQ(net->test(p.r, rid[rd % kSlots], &d, &p.eb), koloSuccess) << p.eb.msg;
      if (d) {
        pattern(want.data(), len, (uint32_t)rd + 1000);
        ASSERT_EQ(memcmp(&rbuf[(rd % kSlots) * len], want.data(), len), 0) << "message " << rd << " differs";
        memset(&rbuf[(rd % kSlots) * len], 0, len);
        rd++;
        do ASSERT_EQ(net->ctrl_send(p.r, KOLO_NET_CTRL_CREDIT, (uint32_t)rd, &q, &p.eb), koloSuccess) << p.eb.msg;
        while (!q);
      }
    }
    ASSERT_EQ(net->ctrl_recv(p.s, &kind, &value, &got, &p.eb), koloSuccess) << p.eb.msg;
    if (got) {
      ASSERT_EQ(kind, (uint32_t)KOLO_NET_CTRL_CREDIT);
      ASSERT_EQ(value, (uint32_t)credits + 1) << "credits out of order";
      credits++;
    }
  }
  EXPECT_EQ(rd, kMsgs);
  EXPECT_EQ(credits, kMsgs);
  std::printf("  %d messages of %zu bytes through %d slots, %d credits in order, %.0f ms\n", kMsgs, len, kSlots,
              credits, now_ms() - t0);

  // Stop words both ways, several in a row, in order.
  for (uint32_t v = 1; v <= 3; v++) {
    ASSERT_EQ(net->ctrl_send(p.s, KOLO_NET_CTRL_STOP, 0x3000000 + v, &q, &p.eb), koloSuccess);
    ASSERT_EQ(net->ctrl_send(p.r, KOLO_NET_CTRL_STOP, 0x4000000 + v, &q, &p.eb), koloSuccess);
  }
  for (void *end : {p.r, p.s}) {
    uint32_t base = end == p.r ? 0x3000000 : 0x4000000;
    for (uint32_t v = 1; v <= 3; v++) {
      got = 0;
      for (t0 = now_ms(); !got && now_ms() - t0 < 5000;) {
        ASSERT_EQ(net->ctrl_recv(end, &kind, &value, &got, &p.eb), koloSuccess) << p.eb.msg;
        int idle = 0;
        (void)net->test(end == p.r ? p.s : p.r, 0, &idle, &p.eb);  // the other end progresses too
      }
      ASSERT_TRUE(got);
      EXPECT_EQ(kind, (uint32_t)KOLO_NET_CTRL_STOP);
      EXPECT_EQ(value, base + v);
    }
  }
  // Nothing left in flight: both ends say so.
  for (t0 = now_ms(); (net->pending(p.s) || net->pending(p.r)) && now_ms() - t0 < 5000;) {
    int d = 0;
    (void)net->ctrl_recv(p.s, &kind, &value, &d, &p.eb);
    (void)net->ctrl_recv(p.r, &kind, &value, &d, &p.eb);
  }
  EXPECT_FALSE(net->pending(p.s));
  EXPECT_FALSE(net->pending(p.r));
}

TEST(NetIb, StrayConnectionRefused) {
  REQUIRE_IB(net);
  Pair p;
  p.net = net;
  sockaddr_storage lo = loopback();
  kolo_net_handle h;
  ASSERT_EQ(net->listen(&lo, 0, &h, &p.lcomm, &p.eb), koloSuccess) << p.eb.msg;
  sockaddr_storage addr{};
  socklen_t alen = sizeof addr;
  int lfd = *static_cast<int *>(p.lcomm);  // the listener starts with its fd
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr *>(&addr), &alen), 0);
  int stray = -1;
  ASSERT_EQ(kolo_sock_connect(&addr, kolo_deadline(2000), 2000, "listener", &p.eb, &stray), koloSuccess);
  std::vector<char> junk(400, 'x');
  memcpy(junk.data(), "GET / HTTP/1.0\r\n\r\n", 18);
  ASSERT_EQ(kolo_sock_send_all(stray, junk.data(), junk.size(), kolo_deadline(2000), "listener", &p.eb),
            koloSuccess);
  ASSERT_EQ(net->connect(&h, 0, kolo_deadline(5000), 5000, "rank 1 (test)", &p.s, &p.eb), koloSuccess) << p.eb.msg;
  ASSERT_EQ(net->accept(p.lcomm, kolo_deadline(5000), 5000, "rank 0 (test)", &p.r, &p.eb), koloSuccess)
      << p.eb.msg;
  close(stray);
  unsigned char a = 42, b = 0;
  uint32_t sid, rid;
  int q;
  ASSERT_EQ(net->irecv(p.r, &b, 1, &rid, &q, &p.eb), koloSuccess);
  ASSERT_EQ(net->isend(p.s, &a, 1, &sid, &q, &p.eb), koloSuccess);
  ASSERT_TRUE(finish(&p, {sid}, {rid}));
  EXPECT_EQ(b, 42);
}

// A send shorter than its receive lands at the receive's start and leaves
// the rest alone (the proxy sends only a slot's filled part); longer fails.
TEST(NetIb, ShortSendsLandLongerFail) {
  REQUIRE_IB(net);
  ASSERT_TRUE(net->flags & KOLO_NET_SHORT_SENDS);
  Pair p;
  ASSERT_TRUE(open_pair(&p, net, 3));
  const size_t cap = (1u << 20) + 17;
  const size_t lens[] = {0, 1, 100, 65536 * 2 + 5, cap};
  std::vector<std::vector<unsigned char>> src, dst;
  std::vector<uint32_t> sid, rid;
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    src.emplace_back(cap);
    dst.emplace_back(cap, 0xab);
    pattern(src[k].data(), cap, (uint32_t)k + 77);
    uint32_t a, b;
    int q;
    ASSERT_EQ(net->irecv(p.r, dst[k].data(), cap, &b, &q, &p.eb), koloSuccess) << p.eb.msg;
    ASSERT_EQ(net->isend(p.s, src[k].data(), lens[k], &a, &q, &p.eb), koloSuccess) << p.eb.msg;
    sid.push_back(a);
    rid.push_back(b);
  }
  ASSERT_TRUE(finish(&p, sid, rid));
  for (size_t k = 0; k < src.size(); k++) {
    EXPECT_EQ(memcmp(src[k].data(), dst[k].data(), lens[k]), 0) << "region " << k << " (" << lens[k] << " B)";
    size_t touched = 0;
    for (size_t i = lens[k]; i < cap; i++) touched += dst[k][i] != 0xab;
    EXPECT_EQ(touched, 0u) << "region " << k << ": bytes past the " << lens[k] << " sent were written";
  }
  // Longer than the receive: an error, naming the peer.
  std::vector<unsigned char> a(200, 1), b(100, 0);
  uint32_t s2, r2;
  int q;
  ASSERT_EQ(net->irecv(p.r, b.data(), b.size(), &r2, &q, &p.eb), koloSuccess);
  // The advert may be there already: isend itself may see the mismatch.
  koloResult_t r = net->isend(p.s, a.data(), a.size(), &s2, &q, &p.eb);
  int d = 0;
  for (double t0 = now_ms(); r == koloSuccess && !d && now_ms() - t0 < 10000;) {
    r = net->test(p.s, s2, &d, &p.eb);
    int rd = 0;
    (void)net->test(p.r, r2, &rd, nullptr);
  }
  EXPECT_NE(r, koloSuccess);
  EXPECT_NE(std::string(p.eb.msg).find("rank 1 (test) receives at most 100 bytes, this end sends 200"),
            std::string::npos)
      << p.eb.msg;
}

// One end closes: the other's open request fails, naming it.
void peer_closes(bool sender_closes) {
  REQUIRE_IB(net);
  int fds_before = count_fds();
  {
    Pair p;
    ASSERT_TRUE(open_pair(&p, net, 2));
    unsigned char a = 7, b = 0;
    uint32_t sid, rid;
    int q;
    ASSERT_EQ(net->irecv(p.r, &b, 1, &rid, &q, &p.eb), koloSuccess);
    ASSERT_EQ(net->isend(p.s, &a, 1, &sid, &q, &p.eb), koloSuccess);
    ASSERT_TRUE(finish(&p, {sid}, {rid}));
    void *&gone = sender_closes ? p.s : p.r;
    void *stays = sender_closes ? p.r : p.s;
    net->close(gone);
    gone = nullptr;
    std::vector<unsigned char> buf(4096);
    uint32_t id;
    koloResult_t r = sender_closes ? net->irecv(stays, buf.data(), buf.size(), &id, &q, &p.eb)
                                   : net->isend(stays, buf.data(), buf.size(), &id, &q, &p.eb);
    int d = 0;
    double t0 = now_ms();
    while (r == koloSuccess && !d && now_ms() - t0 < 10000) r = net->test(stays, id, &d, &p.eb);
    EXPECT_EQ(r, koloRemoteError) << p.eb.msg;
    const char *who = sender_closes ? "rank 0 (test)" : "rank 1 (test)";
    EXPECT_NE(std::string(p.eb.msg).find(who), std::string::npos) << p.eb.msg;
    std::printf("  after %.0f ms: %s\n", now_ms() - t0, p.eb.msg);
  }
  EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked";
}

TEST(NetIb, SenderClosesReceiverFailsNamingIt) { peer_closes(true); }
TEST(NetIb, ReceiverClosesSenderFailsNamingIt) { peer_closes(false); }

TEST(NetIb, HandleOfAnotherProviderRefused) {
  REQUIRE_IB(net);
  sockaddr_storage lo = loopback();
  kolo_net_handle h;
  void *l = nullptr, *c = nullptr;
  kolo_errbuf eb{};
  ASSERT_EQ(kolo_net_socket.listen(&lo, 0, &h, &l, &eb), koloSuccess);
  EXPECT_NE(net->connect(&h, 0, kolo_deadline(2000), 2000, "rank 5 (test)", &c, &eb), koloSuccess);
  EXPECT_NE(std::string(eb.msg).find("rank 5 (test)"), std::string::npos) << eb.msg;
  kolo_net_socket.close_listen(l);
}

// ---- a measurement, on request ----------------------------------------------------

// Drives one end's requests ids[lo, hi) (in order) until done; false on error.
// With KOLO_IB_BENCH_WAIT=poll it sleeps in poll() on the fds of both
// connections (`c` and `also`) when nothing finished, as the proxy does,
// instead of spinning.
bool drain(const kolo_net_provider *net, void *c, const std::vector<uint32_t> &ids, size_t *next, size_t upto,
           kolo_errbuf *eb, void *also = nullptr) {
  static const bool sleep = getenv("KOLO_IB_BENCH_WAIT") && std::strcmp(getenv("KOLO_IB_BENCH_WAIT"), "poll") == 0;
  while (*next < upto) {
    int d = 0;
    if (net->test(c, ids[*next % ids.size()], &d, eb) != koloSuccess) return false;
    if (!d) {
      if (sleep) {
        pollfd pf[8];
        int n = net->pollfds(c, pf, 4);
        if (also) n += net->pollfds(also, pf + n, 4);
        if (poll(pf, (nfds_t)n, 1) < 0 && errno != EINTR) return false;
      }
      return true;
    }
    (*next)++;
  }
  return true;
}

// KOLO_IB_BENCH=1: point-to-point bandwidth (KOLO_IB_BENCH_SIZE bytes, 64 KiB
// by default, KOLO_IB_BENCH_ITERS of them, 16 in flight) and latency (8 B
// ping-pong, half the round trip) between this process (sender, on
// KOLO_TEST_IB_SEND_HCA) and a forked child (receiver, KOLO_TEST_IB_RECV_HCA),
// over the provider alone, as ib_write_bw / ib_write_lat measure verbs.
TEST(IbBench, PointToPoint) {
  const char *on = getenv("KOLO_IB_BENCH");
  if (on == nullptr || std::strcmp(on, "1") != 0) GTEST_SKIP() << "a measurement: runs with KOLO_IB_BENCH=1";
  REQUIRE_IB(net);
  const size_t size = getenv("KOLO_IB_BENCH_SIZE") ? strtoull(getenv("KOLO_IB_BENCH_SIZE"), nullptr, 0) : 65536;
  const size_t iters = getenv("KOLO_IB_BENCH_ITERS") ? strtoull(getenv("KOLO_IB_BENCH_ITERS"), nullptr, 0) : 2000;
  const size_t lat_iters = iters / 2 + 1, window = 16;
  sockaddr_storage lo = loopback();
  kolo_net_handle ha, hb;
  void *la = nullptr, *lb = nullptr;
  kolo_errbuf eb{};
  ASSERT_EQ(net->listen(&lo, 0, &ha, &la, &eb), koloSuccess) << eb.msg;  // parent -> child
  ASSERT_EQ(net->listen(&lo, 0, &hb, &lb, &eb), koloSuccess) << eb.msg;  // child -> parent
  auto res = run_children(1, [&](int) {
    EndHca hca("KOLO_TEST_IB_RECV_HCA");
    void *a = nullptr, *b = nullptr;
    kolo_errbuf ceb{};
    if (net->accept(la, kolo_deadline(10000), 10000, "the sender", &a, &ceb) != koloSuccess ||
        net->connect(&hb, 0, kolo_deadline(10000), 10000, "the sender", &b, &ceb) != koloSuccess) {
      std::fprintf(stderr, "child setup: %s\n", ceb.msg);
      return 2;
    }
    std::vector<unsigned char> buf(window * size), one(8);
    std::vector<uint32_t> ids(window);
    size_t posted = 0, done = 0;
    int q = 0;
    while (done < iters) {  // bandwidth: keep `window` receives posted
      while (posted < iters && posted - done < window) {
        if (net->irecv(a, &buf[(posted % window) * size], size, &ids[posted % window], &q, &ceb) != koloSuccess)
          return 3;
        posted++;
      }
      if (!drain(net, a, ids, &done, posted, &ceb, b)) return 3;
    }
    // Ping-pong: pong 0 says "bandwidth done"; the receive of the next ping
    // is posted before each pong (its advert travels ahead).
    std::vector<unsigned char> ping(8);
    std::vector<uint32_t> r1(1), s1(1);
    for (size_t i = 0; i <= lat_iters; i++) {
      size_t dr = 0, ds = 0;
      while (i > 0 && dr < 1)
        if (!drain(net, a, r1, &dr, 1, &ceb, b)) return 4;
      if (i < lat_iters && net->irecv(a, ping.data(), 8, &r1[0], &q, &ceb) != koloSuccess) return 4;
      if (net->isend(b, one.data(), 8, &s1[0], &q, &ceb) != koloSuccess) return 4;
      while (ds < 1)
        if (!drain(net, b, s1, &ds, 1, &ceb, a)) return 4;
    }
    while (net->pending(b)) {
      uint32_t k, v;
      int g;
      (void)net->ctrl_recv(b, &k, &v, &g, &ceb);
    }
    net->close(a);
    net->close(b);
    return 0;
  }, 300000, [&](const std::vector<pid_t> &) {
    EndHca hca("KOLO_TEST_IB_SEND_HCA");
    void *a = nullptr, *b = nullptr;
    if (net->connect(&ha, 0, kolo_deadline(10000), 10000, "the receiver", &a, &eb) != koloSuccess ||
        net->accept(lb, kolo_deadline(10000), 10000, "the receiver", &b, &eb) != koloSuccess) {
      ADD_FAILURE() << "setup: " << eb.msg;
      return;
    }
    std::vector<unsigned char> buf(window * size, 1), one(8);
    std::vector<uint32_t> ids(window);
    size_t posted = 0, done = 0;
    int q = 0;
    uint32_t rid = 0, sid = 0;
    double t0 = now_ms();
    bool ok = net->irecv(b, one.data(), 8, &rid, &q, &eb) == koloSuccess;  // the child's "done"
    while (ok && done < iters) {
      while (ok && posted < iters && posted - done < window) {
        ok = net->isend(a, &buf[(posted % window) * size], size, &ids[posted % window], &q, &eb) == koloSuccess;
        posted++;
      }
      ok = ok && drain(net, a, ids, &done, posted, &eb, b);
    }
    for (size_t r = 0; ok && r < 1;) {
      std::vector<uint32_t> r1{rid};
      ok = drain(net, b, r1, &r, 1, &eb, a);
    }
    double bw_ms = now_ms() - t0;
    double t1 = now_ms();
    for (size_t i = 0; ok && i < lat_iters; i++) {
      ok = net->irecv(b, one.data(), 8, &rid, &q, &eb) == koloSuccess &&
           net->isend(a, one.data(), 8, &sid, &q, &eb) == koloSuccess;
      std::vector<uint32_t> r1{rid}, s1{sid};
      size_t dr = 0, ds = 0;
      while (ok && (ds < 1 || dr < 1))
        ok = (ds == 1 || drain(net, a, s1, &ds, 1, &eb, b)) && (dr == 1 || drain(net, b, r1, &dr, 1, &eb, a));
    }
    double lat_us = (now_ms() - t1) * 1000.0 / (double)lat_iters / 2;
    EXPECT_TRUE(ok) << eb.msg;
    if (ok)
      std::printf("KOLO-IB-BENCH: bw %zu B x %zu: %.2f MB/s; lat 8 B x %zu: %.2f us (half round trip)\n", size,
                  iters, (double)size * (double)iters / (bw_ms * 1000.0), lat_iters, lat_us);
    for (int k = 0; k < 1000 && (net->pending(a) || net->pending(b)); k++) usleep(1000);
    net->close(a);
    net->close(b);
  });
  net->close_listen(la);
  net->close_listen(lb);
  EXPECT_EQ(children_failures(res), "");
}

// ---- ranks over ib ------------------------------------------------------------------

std::vector<CollCase> ib_cases(int n) {
  std::vector<CollCase> cases;
  int v = 0;
  struct TO {
    Coll coll;
    koloDataType_t t;
    koloRedOp_t op;
  };
  const TO kinds[] = {{Coll::AllReduce, koloFloat32, koloSum}, {Coll::AllReduce, koloInt32, koloMax},
                      {Coll::AllGather, koloFloat32, koloSum}, {Coll::AllGather, koloBfloat16, koloSum},
                      {Coll::SendRecv, koloFloat32, koloSum},  {Coll::SendRecv, koloInt8, koloSum}};
  for (const TO &k : kinds)
    for (size_t count : {(size_t)1, (size_t)7, (size_t)4095, (size_t)65536 + 3})
      for (int ip = 0; ip < (has_in_place(k.coll) ? 2 : 1); ip++) {
        CollCase c;
        c.coll = k.coll;
        c.type = k.t;
        c.op = k.op;
        c.nranks = n;
        c.count = count;
        c.in_place = ip == 1;
        c.root = 1 + v % (n - 1 > 0 ? n - 1 : 1);
        c.misalign = v % 3;
        v++;
        seed_case(&c);
        cases.push_back(c);
      }
  return cases;
}

TEST(IbProcs, TwoHosts) {
  REQUIRE_IB(net);
  (void)net;
  ScopedEnv force("KOLO_NET", "ib");
  ScopedEnv noshm("KOLO_SHM_DISABLE", "1");
  ScopedEnv t("KOLO_TIMEOUT_MS", "60000");
  const int n = 2;
  std::vector<CollCase> cases = ib_cases(n);
  double t0 = now_ms();
  auto res = run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        std::string host = "ib-test-host-" + std::to_string(rank);
        setenv("KOLO_HOSTID", host.c_str(), 1);  // two "hosts": net pipes between them
        std::string var = "KOLO_TEST_IB_HCA_RANK" + std::to_string(rank);
        if (const char *hca = getenv(var.c_str())) setenv("KOLO_IB_HCA", hca, 1);
        koloComm_t comm = nullptr;
        if (koloCommInitRank(&comm, n, id, rank) != koloSuccess) {
          std::fprintf(stderr, "rank %d: init: %s\n", rank, koloGetLastError(nullptr));
          return 2;
        }
        int failures = run_cases(comm, rank, cases);
        if (koloCommDestroy(comm) != koloSuccess) failures++;
        return failures ? 1 : 0;
      },
      240000);
  EXPECT_EQ(children_failures(res), "");
  std::printf("  %zu cases at 2 ranks over ib in %.0f ms\n", cases.size(), now_ms() - t0);
}

// Rank 1 dies (SIGKILL) 50 ms into a large all-reduce over ib: rank 0 must
// return an error naming it within a bound: the dead peer seen through its
// closed connection, or at worst the wait's timeout (the kernel closes the
// dead rank's sockets only after tearing down its RDMA resources, which
// takes seconds in an emulated guest under load).
TEST(IbProcs, RankKilledDuringCollective) {
  REQUIRE_IB(net);
  (void)net;
  const int kTimeoutMs = 3000;
  ScopedEnv force("KOLO_NET", "ib");
  ScopedEnv noshm("KOLO_SHM_DISABLE", "1");
  ScopedEnv t("KOLO_TIMEOUT_MS", std::to_string(kTimeoutMs));
  const int n = 2;
  const size_t count = (size_t)8 << 20;  // 32 MiB of float32: long enough to die in
  auto res = run_children_with_id(
      n,
      [&](int rank, const koloUniqueId &id) {
        std::string host = "ib-kill-host-" + std::to_string(rank);
        setenv("KOLO_HOSTID", host.c_str(), 1);
        std::string var = "KOLO_TEST_IB_HCA_RANK" + std::to_string(rank);
        if (const char *hca = getenv(var.c_str())) setenv("KOLO_IB_HCA", hca, 1);
        koloComm_t comm;
        if (koloCommInitRank(&comm, n, id, rank) != koloSuccess) {
          std::fprintf(stderr, "init failed: %s\n", koloGetLastError(nullptr));
          return 2;
        }
        float one = 1, sum = 0;
        if (koloAllReduce(&one, &sum, 1, koloFloat32, koloSum, comm, nullptr) != koloSuccess || sum != 2) {
          std::fprintf(stderr, "warm-up all-reduce failed: %s\n", koloGetLastError(comm));
          return 2;
        }
        std::vector<float> x(count, 1.0f);
        if (rank == 1)
          std::thread([] {
            usleep(50 * 1000);
            raise(SIGKILL);
          }).detach();
        double t0 = now_ms();
        koloResult_t rc = koloAllReduce(x.data(), x.data(), count, koloFloat32, koloSum, comm, nullptr);
        double ms = now_ms() - t0;
        std::string text = koloGetLastError(comm);
        std::fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, koloGetErrorString(rc), ms, text.c_str());
        int bad = rc == koloSuccess || text.find("rank 1") == std::string::npos || ms > kTimeoutMs + 10000;
        koloCommDestroy(comm);
        return bad;
      },
      60000);
  EXPECT_FALSE(res[1].exited) << res[1].describe();
  EXPECT_EQ(res[1].signal, SIGKILL) << res[1].describe();
  EXPECT_TRUE(res[0].exited && res[0].code == 0) << res[0].describe();
  std::printf("  %s", res[0].output.c_str());
}

TEST(IbRank, Run) {
  const char *mode = getenv("KOLO_IB_RANK");
  if (mode == nullptr || std::strcmp(mode, "1") != 0)
    GTEST_SKIP() << "one rank of tests/rdma/kolo_guest.sh (runs only with KOLO_IB_RANK=1)";
  koloComm_t comm = nullptr;
  ASSERT_EQ(koloCommInitFromEnv(&comm, nullptr), koloSuccess) << koloGetLastError(nullptr);
  int rank = -1, n = 0;
  ASSERT_EQ(koloCommUserRank(comm, &rank), koloSuccess);
  ASSERT_EQ(koloCommCount(comm, &n), koloSuccess);
  std::vector<CollCase> cases = ib_cases(n);
  double t0 = now_ms();
  int failures = run_cases(comm, rank, cases);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(koloCommDestroy(comm), koloSuccess);
  if (failures == 0)
    std::printf("  rank %d of %d: %zu cases passed (all-reduce, all-gather, send/recv) in %.0f ms\n", rank, n,
                cases.size(), now_ms() - t0);
}

}  // namespace
