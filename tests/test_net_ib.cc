// test_net_ib.cc - the ibverbs net provider: transport/net_ib*.c,
// transport/ib_select.c, transport/net_registry.c.
//
//  - IbHca: the KOLO_IB_HCA parser and matcher (NCCL's syntax), pure code:
//    always runs.
//  - NetRegistry: providers by name and KOLO_NET's choice: always runs.
//  - IbWire: the ib provider's records (net_wire.h): always runs.
//  - NetIb: the provider alone (util/net_ends.h), both ends in this process
//    and driven from this thread: slices of 0, 1, odd and multi-QP sizes
//    (around the 224 bytes that travel in an entry, the MTU, the 64 KiB
//    split and the 4 MiB piece) with their bytes, the untouched rest of
//    their slots and their call signatures checked, over 1 and 4 QPs; a
//    pipelined stream through 8 slots with the window honored and credits
//    in order; binding both ends again between sizes (either first); stop
//    words both ways with and without a mismatch report, after the slices
//    sent before them; a stray connection refused; a slice larger than the
//    receiver's slot refused; each end's close reported on the other,
//    naming it, after what came before; the wake-up of a sleeping end; and
//    the provider under the engine and the proxy as a kernel drives a pipe.
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
#include "util/net_bench.h"
#include "util/net_ends.h"
#include "util/polled_pipe.h"
#include "util/proc_util.h"

extern "C" {
#include "transport/ib_select.h"
#include "transport/net.h"
#include "transport/net_wire.h"
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

// ---- the ib records (net_wire.h), no device needed ------------------------------------

TEST(IbWire, HelloCarriesTheControlArea) {
  kolo_ib_hello h{};
  h.nqps = 2;
  h.link_layer = 2, h.mtu = 3;
  snprintf(h.dev, sizeof h.dev, "rxe0");
  h.in_addr = 0x7f0012345000ull, h.in_rkey = 0xabcd, h.in_bytes = 16384;
  uint8_t b[KOLO_IB_HELLO_BYTES];
  kolo_encode_ib_hello(&h, b);
  kolo_ib_hello g;
  uint32_t version;
  char why[160] = "";
  ASSERT_EQ(kolo_decode_ib_hello(b, sizeof b, &g, &version, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(g.in_addr, h.in_addr);
  EXPECT_EQ(g.in_rkey, h.in_rkey);
  EXPECT_EQ(g.in_bytes, h.in_bytes);
  for (uint32_t bad : {0u, KOLO_IB_IN_MIN - 1, KOLO_IB_IN_MAX + 1}) {
    h.in_bytes = bad;
    kolo_encode_ib_hello(&h, b);
    EXPECT_EQ(kolo_decode_ib_hello(b, sizeof b, &g, &version, why, sizeof why), KOLO_NET_WIRE_GARBLED) << bad;
    EXPECT_NE(std::string(why).find("control area"), std::string::npos) << why;
  }
}

kolo_ib_msg ring_msg() {
  kolo_ib_msg m{};
  m.kind = KOLO_IB_MSG_RING;
  m.ring = {3, 77, 0x7f0000200000ull, 0x1234, 8, 524288, KOLO_IB_INBOX_MAX};
  return m;
}

TEST(IbWire, MessagesRoundTrip) {
  kolo_ib_msg stop{};
  stop.kind = KOLO_IB_MSG_STOP, stop.flags = KOLO_IB_FLAG_REPORT, stop.value = 0x07000003u;
  stop.report.rank[0] = 2, stop.report.rank[1] = 5;
  stop.report.sig[0] = {64, 9, -1, 1, 7, 0, 1};
  stop.report.sig[1] = {65, 9, -1, 1, 7, 0, 1};
  kolo_ib_msg plain{};
  plain.kind = KOLO_IB_MSG_STOP, plain.value = 0x03000001u;
  for (const kolo_ib_msg &m : {ring_msg(), stop, plain}) {
    uint8_t b[KOLO_IB_MSG_MAX];
    size_t n = kolo_encode_ib_msg(&m, b);
    kolo_ib_msg g;
    char why[200] = "";
    ASSERT_EQ(kolo_decode_ib_msg(b, n, 1, &g, why, sizeof why), KOLO_NET_WIRE_OK) << why;
    EXPECT_EQ(g.kind, m.kind);
    EXPECT_EQ(g.value, m.value);
    EXPECT_EQ(memcmp(&g.ring, &m.ring, sizeof g.ring), 0);
    if (m.flags) {
      EXPECT_EQ(g.report.sig[1].count, 65u);
    }
    // a receiver takes stop words only
    EXPECT_EQ(kolo_decode_ib_msg(b, n, 0, &g, why, sizeof why) == KOLO_NET_WIRE_OK, m.kind == KOLO_IB_MSG_STOP);
    // one byte short, one byte flipped in the header: refused
    EXPECT_EQ(kolo_decode_ib_msg(b, n - 1, 1, &g, why, sizeof why), KOLO_NET_WIRE_GARBLED);
    b[5] ^= 1;
    EXPECT_EQ(kolo_decode_ib_msg(b, n, 1, &g, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  }
}

TEST(IbWire, RingsASenderCannotUseRefused) {
  struct Bad {
    uint32_t gen, nslots, slot_bytes, inbox;
    const char *says;
  };
  for (Bad bad : {Bad{0, 8, 4096, 0, "bind 0"}, Bad{1, 0, 4096, 0, "0 slots"}, Bad{1, 128, 4096, 0, "128 slots"}, Bad{1, 8, KOLO_IB_MAX_SLICE + 1, 0, "slots of"},
                  Bad{1, 8, 4096, KOLO_IB_INBOX_MAX + 1, "small slices"}}) {
    kolo_ib_msg m = ring_msg();
    m.ring.gen = bad.gen, m.ring.nslots = bad.nslots, m.ring.slot_bytes = bad.slot_bytes, m.ring.inbox_max = bad.inbox;
    uint8_t b[KOLO_IB_MSG_MAX];
    size_t n = kolo_encode_ib_msg(&m, b);
    kolo_ib_msg g;
    char why[200] = "";
    EXPECT_EQ(kolo_decode_ib_msg(b, n, 1, &g, why, sizeof why), KOLO_NET_WIRE_GARBLED) << bad.says;
    EXPECT_NE(std::string(why).find(bad.says), std::string::npos) << why;
  }
}

TEST(IbWire, CreditRecordsTornOrEmptyAreNotTaken) {
  uint8_t a[KOLO_IB_CREDIT_BYTES], b[KOLO_IB_CREDIT_BYTES], zero[KOLO_IB_CREDIT_BYTES] = {0};
  uint32_t head = 0;
  kolo_encode_ib_credit(0x000000ff, a);
  kolo_encode_ib_credit(0x00000100, b);
  ASSERT_EQ(kolo_decode_ib_credit(b, &head), KOLO_NET_WIRE_OK);
  EXPECT_EQ(head, 0x100u);
  EXPECT_EQ(kolo_decode_ib_credit(zero, &head), KOLO_NET_WIRE_GARBLED);
  for (int cut = 1; cut < KOLO_IB_CREDIT_BYTES; cut++) {  // written in address order, read mid-way
    uint8_t torn[KOLO_IB_CREDIT_BYTES];
    memcpy(torn, b, (size_t)cut);
    memcpy(torn + cut, a + cut, sizeof torn - (size_t)cut);
    if (kolo_decode_ib_credit(torn, &head) == KOLO_NET_WIRE_OK) {
      EXPECT_TRUE(head == 0xffu || head == 0x100u) << cut;
    }
  }
}

TEST(IbWire, SignatureHeaders) {
  uint8_t h[KOLO_IB_SIGHDR_BYTES] = {0};
  kolo_call_sig s{}, g{};
  int has = 1;
  char why[200] = "";
  ASSERT_EQ(kolo_decode_ib_sighdr(h, &g, &has, why, sizeof why), KOLO_NET_WIRE_OK);
  EXPECT_EQ(has, 0);
  s = {1 << 20, 12, 3, 2, 7, 1, 1};
  kolo_encode_ib_sighdr(&s, h);
  ASSERT_EQ(kolo_decode_ib_sighdr(h, &g, &has, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(has, 1);
  EXPECT_EQ(g.count, s.count);
  EXPECT_EQ(g.seq, s.seq);
  EXPECT_EQ(g.root, s.root);
  EXPECT_EQ(g.coll, s.coll);
  h[KOLO_IB_SIGHDR_BYTES - 1] = 1;  // reserved bytes must be zero
  EXPECT_EQ(kolo_decode_ib_sighdr(h, &g, &has, why, sizeof why), KOLO_NET_WIRE_GARBLED);
}

// ---- the provider alone ---------------------------------------------------------------

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

// Both ends of one ib connection (net_ends.h), the sender on
// KOLO_TEST_IB_SEND_HCA and the receiver on KOLO_TEST_IB_RECV_HCA when given
// (the soft-RoCE guest: rxe1 -> rxe0 across a veth).
struct Pair {
  kt_net_ends *e = nullptr;
  char err[512] = "";
  ~Pair() { kt_net_free(e); }
  ::testing::AssertionResult open(int nqps, int stray = 0) {
    kt_net_cfg cfg{};
    cfg.provider = "ib";
    cfg.streams = nqps;
    cfg.send_hca = getenv("KOLO_TEST_IB_SEND_HCA");
    cfg.recv_hca = getenv("KOLO_TEST_IB_RECV_HCA");
    cfg.stray = stray;
    e = kt_net_open(&cfg, err, sizeof err);
    if (e == nullptr) return ::testing::AssertionFailure() << err;
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult bind(int end, uint32_t nslots, size_t slot_bytes) {
    if (kt_net_bind(e, end, nslots, slot_bytes, err, sizeof err) != 0)
      return ::testing::AssertionFailure() << "bind " << (end == KT_SEND ? "sender" : "receiver") << ": " << err;
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult bind_both(uint32_t nslots, size_t slot_bytes) {
    auto r = bind(KT_RECV, nslots, slot_bytes);
    return r ? bind(KT_SEND, nslots, slot_bytes) : r;
  }
};

unsigned char pattern(uint32_t seed, uint32_t step, size_t i) {
  return (unsigned char)((seed * 2654435761u) ^ (step * 40503u) ^ (uint32_t)(i * 131u + 7u));
}

kt_sig sig_of(uint32_t step) {
  kt_sig s{};
  s.count = 1000 + step;
  s.seq = step * 3 + 1;
  s.root = (int32_t)(step % 5) - 1;
  s.coll = (uint8_t)(step % 7), s.type = (uint8_t)(step % 11), s.op = (uint8_t)(step % 4);
  return s;
}

bool same_sig(const kt_sig &a, const kt_sig &b) {
  return a.count == b.count && a.seq == b.seq && a.root == b.root && a.coll == b.coll && a.type == b.type &&
         a.op == b.op;
}

// A stream of slices through the pair, as the engine drives it: the sender
// fills slot `step` with a pattern and sends it when its window has room
// (step - credited < nslots), every `sig_every`-th with a call signature;
// the receiver checks each slice it is told of (in order, its length, its
// signature, its bytes, the rest of the slot untouched), poisons the slot
// again and credits it.  Steps start at `first`; credits must come in order.
struct Stream {
  explicit Stream(Pair *pair) : p(pair) {}
  Pair *p;
  uint32_t first = 0, nslots = 8;
  int sig_every = 3;
  uint32_t seed = 1;
  uint32_t credit_every = 1;  // the receiver credits after this many slices (and at the end)
  uint32_t sent = 0, delivered = 0, credited = 0;
  std::vector<size_t> sizes;

  ::testing::AssertionResult send_some() {
    while (sent < sizes.size() && sent - (credited - first) < nslots) {
      uint32_t step = first + sent;
      unsigned char *slot = kt_net_slot(p->e, KT_SEND, step);
      for (size_t i = 0; i < sizes[sent]; i++) slot[i] = pattern(seed, step, i);
      kt_sig s = sig_of(step);
      int q = 0;
      if (kt_net_send_slice(p->e, step, sizes[sent], step % sig_every == 0 ? &s : nullptr, &q, p->err,
                            sizeof p->err) != 0)
        return ::testing::AssertionFailure() << "send_slice " << step << ": " << p->err;
      if (!q) break;
      sent++;
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult check_slice(const kt_net_event &ev, size_t slot_bytes) {
    uint32_t step = first + delivered;
    if (ev.kind != KT_SLICE || ev.value != step || ev.len != sizes[delivered])
      return ::testing::AssertionFailure() << "receiver told kind " << ev.kind << " value " << ev.value << " len "
                                           << ev.len << ", expected slice " << step << " of " << sizes[delivered];
    bool want_sig = step % sig_every == 0;
    if (ev.has_sig != want_sig || (want_sig && !same_sig(ev.sig, sig_of(step))))
      return ::testing::AssertionFailure() << "slice " << step << ": signature " << (ev.has_sig ? "differs" : "missing")
                                           << (want_sig ? "" : " (none was sent)");
    unsigned char *slot = kt_net_slot(p->e, KT_RECV, step);
    for (size_t i = 0; i < slot_bytes; i++) {
      unsigned char want = i < ev.len ? pattern(seed, step, i) : (unsigned char)KT_POISON;
      if (slot[i] != want)
        return ::testing::AssertionFailure() << "slice " << step << " (" << ev.len << " B): byte " << i
                                             << (i < ev.len ? " differs" : " past its end was written");
    }
    memset(slot, KT_POISON, slot_bytes);
    delivered++;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult credit(bool force) {
    uint32_t head = first + delivered;
    if (!force && delivered % credit_every != 0) return ::testing::AssertionSuccess();
    int q = 0;
    if (kt_net_send_credit(p->e, head, &q, p->err, sizeof p->err) != 0 || !q)
      return ::testing::AssertionFailure() << "send_credit " << head << ": " << p->err;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult take(size_t slot_bytes) {
    kt_net_event ev;
    while (kt_net_take(p->e, KT_RECV, &ev)) {
      auto r = check_slice(ev, slot_bytes);
      if (r) r = credit(delivered == sizes.size());
      if (!r) return r;
    }
    while (kt_net_take(p->e, KT_SEND, &ev)) {
      if (ev.kind != KT_CREDIT || (int32_t)(ev.value - credited) <= 0 || (int32_t)(ev.value - (first + sent)) > 0)
        return ::testing::AssertionFailure() << "sender told kind " << ev.kind << " value " << ev.value
                                             << " after credit " << credited << ", " << first + sent << " sent";
      credited = ev.value;
    }
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult run(size_t slot_bytes, double limit_ms = 60000) {
    credited = first;
    double t0 = now_ms();
    while (delivered < sizes.size() || credited != first + sizes.size()) {
      auto r = send_some();
      for (int end : {KT_RECV, KT_SEND})
        if (r && kt_net_progress(p->e, end, p->err, sizeof p->err) != 0)
          r = ::testing::AssertionFailure() << (end == KT_SEND ? "sender" : "receiver") << " progress: " << p->err;
      if (r) r = take(slot_bytes);
      if (!r) return r;
      if (now_ms() - t0 > limit_ms)
        return ::testing::AssertionFailure() << "timeout: " << sent << " sent, " << delivered << " delivered, credit "
                                             << credited << " of " << sizes.size() << " from " << first;
    }
    return ::testing::AssertionSuccess();
  }
};

// Drives both ends until neither has output pending (5 s bound).
::testing::AssertionResult settle(Pair *p) {
  for (double t0 = now_ms(); now_ms() - t0 < 5000;) {
    for (int end : {KT_RECV, KT_SEND})
      if (kt_net_progress(p->e, end, p->err, sizeof p->err) != 0)
        return ::testing::AssertionFailure() << "progress: " << p->err;
    if (!kt_net_pending(p->e, KT_RECV) && !kt_net_pending(p->e, KT_SEND)) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "output still pending after 5 s";
}

void slices_of_sizes(int nqps, const std::vector<size_t> &sizes, size_t slot_bytes) {
  REQUIRE_IB(net);
  (void)net;
  int fds_before = count_fds();
  {
    Pair p;
    ASSERT_TRUE(p.open(nqps));
    ASSERT_TRUE(p.bind_both(8, slot_bytes));
    Stream s(&p);
    s.sizes = sizes;
    double t0 = now_ms();
    ASSERT_TRUE(s.run(slot_bytes));
    size_t total = 0;
    for (size_t n : sizes) total += n;
    std::printf("  %zu slices, %zu bytes over %d QP(s) in %.1f ms\n", sizes.size(), total, nqps, now_ms() - t0);
    ASSERT_TRUE(settle(&p));
  }
  EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked";
}

// 0 and 1 byte, around the largest slice that travels in an entry (224),
// around the MTU, the split into pieces (64 KiB) and the 4 MiB piece.
TEST(NetIb, SlicesOfOddSizesOneQp) {
  slices_of_sizes(1, {1, 0, 3, 8, 223, 224, 225, 1023, 1025, 4097, 65535, 65536 + 1, (1u << 20) + 3, (4u << 20) + 5,
                      0, 7},
                  (4u << 20) + 8);
}

// Pieces over 4 QPs: a slice's pieces on QPs (step + i) % 4, small slices
// on QP step % 4, all delivered in step order.
TEST(NetIb, SlicesOverSeveralQps) {
  slices_of_sizes(4, {1, 100, 65536, 65536 * 3 + 7, 200, (1u << 20) + 3, (4u << 20) + 4097, 0, 5000, 9},
                  (4u << 20) + 4097);
}

// Like the engine: 8 slots, a long stream of mixed sizes with the window
// honored and a credit after every other slice; credits arrive in order.
TEST(NetIb, PipelinedSlotsWithCreditsInOrder) {
  REQUIRE_IB(net);
  (void)net;
  Pair p;
  ASSERT_TRUE(p.open(2));
  const size_t slot = 5000;
  ASSERT_TRUE(p.bind_both(8, slot));
  Stream s(&p);
  s.credit_every = 2;
  for (int i = 0; i < 600; i++) s.sizes.push_back(i % 3 == 0 ? slot : i % 3 == 1 ? 8 : 1 + (size_t)(i * 37) % slot);
  double t0 = now_ms();
  ASSERT_TRUE(s.run(slot));
  std::printf("  %zu slices through 8 slots of %zu bytes, credits in order, %.0f ms\n", s.sizes.size(), slot,
              now_ms() - t0);
  ASSERT_TRUE(settle(&p));
  EXPECT_FALSE(kt_net_pending(p.e, KT_SEND));
  EXPECT_FALSE(kt_net_pending(p.e, KT_RECV));
}

// kolo-perf net binds both ends again between sizes, nothing in flight;
// steps go on, in the new rings, whichever end binds first.
TEST(NetIb, RebindBetweenSizes) {
  REQUIRE_IB(net);
  (void)net;
  Pair p;
  ASSERT_TRUE(p.open(2));
  ASSERT_TRUE(p.bind_both(8, 4096));
  Stream s(&p);
  s.sizes.assign(20, 4096);
  ASSERT_TRUE(s.run(4096));
  uint32_t step = s.first + (uint32_t)s.sizes.size();
  struct Round {
    uint32_t nslots;
    size_t slot;
    bool recv_first;
  };
  // 9 slots: kolo-perf net's rings are no power of two
  for (Round r : {Round{4, 100000, true}, Round{9, 64, false}, Round{2, 3u << 20, true}}) {
    ASSERT_TRUE(p.bind(r.recv_first ? KT_RECV : KT_SEND, r.nslots, r.slot));
    ASSERT_TRUE(p.bind(r.recv_first ? KT_SEND : KT_RECV, r.nslots, r.slot));
    Stream t(&p);
    t.first = step;
    t.nslots = r.nslots;
    t.seed = step;
    for (uint32_t i = 0; i < 3 * r.nslots; i++) t.sizes.push_back(i % 2 ? r.slot : 1 + i * 5 % r.slot);
    ASSERT_TRUE(t.run(r.slot)) << "after binding " << r.nslots << " slots of " << r.slot << " bytes";
    step += (uint32_t)t.sizes.size();
  }
}

// Stop words both ways, with and without a mismatch report; a stop word
// comes after the slices sent before it (on one QP: on several, a stop
// word on QP 0 may overtake pieces on the others, as the socket provider's
// may overtake parts on its other streams; what follows a stop is moot).
TEST(NetIb, StopWordsBothWays) {
  REQUIRE_IB(net);
  (void)net;
  Pair p;
  ASSERT_TRUE(p.open(1));
  ASSERT_TRUE(p.bind_both(8, 70000));
  Stream s(&p);
  s.sizes = {10, 70000, 5};
  for (double t0 = now_ms(); s.sent < 3 && now_ms() - t0 < 10000;) {  // the ring comes first
    ASSERT_TRUE(s.send_some());
    for (int end : {KT_RECV, KT_SEND}) ASSERT_EQ(kt_net_progress(p.e, end, p.err, sizeof p.err), 0) << p.err;
  }
  ASSERT_EQ(s.sent, 3u);
  kt_report rep{};
  rep.rank[0] = 3, rep.rank[1] = 5;
  rep.sig[0] = sig_of(11), rep.sig[1] = sig_of(12);
  int q = 0;
  ASSERT_EQ(kt_net_send_stop(p.e, KT_SEND, 0x01000002u, nullptr, &q, p.err, sizeof p.err), 0) << p.err;
  ASSERT_EQ(q, 1);
  ASSERT_EQ(kt_net_send_stop(p.e, KT_RECV, 0x07000004u, &rep, &q, p.err, sizeof p.err), 0) << p.err;
  ASSERT_EQ(q, 1);
  std::vector<kt_net_event> got[2];
  for (double t0 = now_ms(); (got[0].size() < 4 || got[1].size() < 1) && now_ms() - t0 < 10000;) {
    for (int end : {KT_RECV, KT_SEND}) {
      ASSERT_EQ(kt_net_progress(p.e, end, p.err, sizeof p.err), 0) << p.err;
      kt_net_event ev;
      while (kt_net_take(p.e, end, &ev)) got[end].push_back(ev);
    }
  }
  ASSERT_EQ(got[KT_RECV].size(), 4u);
  for (uint32_t i = 0; i < 3; i++) {
    EXPECT_EQ(got[KT_RECV][i].kind, KT_SLICE);
    EXPECT_EQ(got[KT_RECV][i].value, i);
  }
  EXPECT_EQ(got[KT_RECV][3].kind, KT_STOP);
  EXPECT_EQ(got[KT_RECV][3].value, 0x01000002u);
  EXPECT_FALSE(got[KT_RECV][3].has_report);
  ASSERT_EQ(got[KT_SEND].size(), 1u);
  const kt_net_event &st = got[KT_SEND][0];
  EXPECT_EQ(st.kind, KT_STOP);
  EXPECT_EQ(st.value, 0x07000004u);
  ASSERT_TRUE(st.has_report);
  EXPECT_EQ(st.report.rank[0], 3);
  EXPECT_EQ(st.report.rank[1], 5);
  EXPECT_TRUE(same_sig(st.report.sig[0], sig_of(11)));
  EXPECT_TRUE(same_sig(st.report.sig[1], sig_of(12)));
  ASSERT_TRUE(settle(&p)) << "the stop words were not acknowledged";
}

TEST(NetIb, StrayConnectionRefused) {
  REQUIRE_IB(net);
  (void)net;
  Pair p;
  ASSERT_TRUE(p.open(1, /*stray=*/1));
  ASSERT_TRUE(p.bind_both(2, 64));
  Stream s(&p);
  s.sizes = {1, 42};
  ASSERT_TRUE(s.run(64));
}

// A slice larger than the receiver's slots: an error naming the receiver.
TEST(NetIb, SliceLargerThanTheReceiversSlotRefused) {
  REQUIRE_IB(net);
  (void)net;
  Pair p;
  ASSERT_TRUE(p.open(1));
  ASSERT_TRUE(p.bind(KT_RECV, 4, 100));
  ASSERT_TRUE(p.bind(KT_SEND, 4, 200));
  int q = 0, rc = 0;
  for (double t0 = now_ms(); rc == 0 && !q && now_ms() - t0 < 10000;) {
    rc = kt_net_send_slice(p.e, 0, 200, nullptr, &q, p.err, sizeof p.err);
    if (rc != 0) break;
    ASSERT_EQ(kt_net_progress(p.e, KT_RECV, p.err, sizeof p.err), 0) << p.err;
    ASSERT_EQ(kt_net_progress(p.e, KT_SEND, p.err, sizeof p.err), 0) << p.err;
  }
  EXPECT_NE(rc, 0);
  EXPECT_NE(std::string(p.err).find("rank 0 (test) receives at most 100 bytes"), std::string::npos) << p.err;
}

// One end closes: the other, after what was sent before the close, fails
// naming it ("closed its network connection").
void peer_closes(bool sender_closes) {
  REQUIRE_IB(net);
  (void)net;
  int fds_before = count_fds();
  {
    Pair p;
    ASSERT_TRUE(p.open(2));
    ASSERT_TRUE(p.bind_both(4, 300));
    Stream s(&p);
    s.sizes = {7, 300};
    ASSERT_TRUE(s.run(300));
    int stays = sender_closes ? KT_RECV : KT_SEND;
    if (sender_closes) {  // one more slice, sent just before the close: delivered first
      s.first = 2, s.sent = s.delivered = 0, s.credited = 2, s.sizes = {9};
      ASSERT_TRUE(s.send_some());
      ASSERT_EQ(s.sent, 1u);
    }
    kt_net_close_end(p.e, sender_closes ? KT_SEND : KT_RECV);
    int rc = 0;
    double t0 = now_ms();
    kt_net_event ev;
    std::vector<kt_net_event> got;
    while (rc == 0 && now_ms() - t0 < 10000) {
      rc = kt_net_progress(p.e, stays, p.err, sizeof p.err);
      while (kt_net_take(p.e, stays, &ev)) got.push_back(ev);
    }
    EXPECT_NE(rc, 0);
    const char *who = sender_closes ? "rank 1 (test) closed its network connection"
                                    : "rank 0 (test) closed its network connection";
    EXPECT_NE(std::string(p.err).find(who), std::string::npos) << p.err;
    if (sender_closes) {
      ASSERT_EQ(got.size(), 1u) << "the slice sent before the close";
      EXPECT_EQ(got[0].kind, KT_SLICE);
      EXPECT_EQ(got[0].value, 2u);
      EXPECT_EQ(got[0].len, 9u);
    }
    std::printf("  after %.0f ms: %s\n", now_ms() - t0, p.err);
  }
  EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked";
}

TEST(NetIb, SenderClosesReceiverFailsNamingIt) { peer_closes(true); }
TEST(NetIb, ReceiverClosesSenderFailsNamingIt) { peer_closes(false); }

TEST(NetIb, HandleOfAnotherProviderRefused) {
  REQUIRE_IB(net);
  (void)net;
  char err[512];
  EXPECT_EQ(kt_net_cross_connect("socket", "ib", "rank 5 (test)", err, sizeof err), 0) << err;
  EXPECT_NE(std::string(err).find("rank 5 (test)"), std::string::npos) << err;
}

// The provider under the engine and the proxy, polled as a CUDA kernel
// drives a pipe (util/polled_pipe.h): every byte checked, no stall.
TEST(NetIb, PolledPipesThroughTheProxy) {
  REQUIRE_IB(net);
  (void)net;
  for (size_t slot : {(size_t)64, (size_t)5000, (size_t)(256 << 10)}) {
    kt_polled_cfg cfg{};
    cfg.provider = "ib";
    cfg.slot_bytes = slot;
    cfg.nslots = 4;
    cfg.launches = 30;
    cfg.max_slices = 9;
    cfg.pause_us = 2000;
    cfg.stall_ms = 20000;
    cfg.seed = (unsigned)slot;
    char err[512] = "";
    EXPECT_EQ(kt_polled_pipe_run(&cfg, err, sizeof err), 0) << "slot " << slot << ": " << err;
  }
}

// The provider's wake-ups: its fds, and no sleep while something is there.
TEST(NetIb, PollfdsAfterArrival) {
  REQUIRE_IB(net);
  (void)net;
  Pair p;
  ASSERT_TRUE(p.open(1));
  ASSERT_TRUE(p.bind_both(4, 64));
  EXPECT_FALSE(net->flags & KOLO_NET_EXACT_POLL) << "plain credit writes raise no event";
  Stream s(&p);
  s.sizes = {5};
  ASSERT_TRUE(s.run(64));
  pollfd pf[4];
  int n = kt_net_pollfds(p.e, KT_RECV, pf, 4);
  ASSERT_GE(n, 1);
  // A slice arrives while the receiver is armed: its fds wake a poll.
  s.first = 1, s.sent = s.delivered = 0, s.credited = 1, s.sizes = {6};
  ASSERT_TRUE(s.send_some());
  for (int end : {KT_SEND}) ASSERT_EQ(kt_net_progress(p.e, end, p.err, sizeof p.err), 0) << p.err;
  double t0 = now_ms();
  int ready = poll(pf, (nfds_t)n, 5000);
  EXPECT_GT(ready, 0) << "no wake-up within 5 s";
  std::printf("  woke after %.2f ms\n", now_ms() - t0);
  ASSERT_TRUE(s.run(64));
}

// ---- a measurement, on request ----------------------------------------------------

// KOLO_IB_BENCH=1: the provider's own 8-byte latency between two processes
// (util/net_bench.h), ping-pong (ib_write_lat's half round trip) and both
// sending at once (a 2-rank all-reduce's pattern), without kolo's engine;
// KOLO_IB_BENCH_ITERS iterations (default 2000).
TEST(IbBench, Latency) {
  const char *on = getenv("KOLO_IB_BENCH");
  if (on == nullptr || std::strcmp(on, "1") != 0) GTEST_SKIP() << "a measurement: runs with KOLO_IB_BENCH=1";
  REQUIRE_IB(net);
  (void)net;
  const int iters = getenv("KOLO_IB_BENCH_ITERS") ? atoi(getenv("KOLO_IB_BENCH_ITERS")) : 2000;
  for (int exchange : {0, 1}) {
    kt_bench_lat r{};
    char err[512] = "";
    ASSERT_EQ(kt_net_bench_lat("ib", exchange, iters, 8, &r, err, sizeof err), 0) << err;
    std::printf("KOLO-IB-BENCH: %s 8 B x %d: p50 %.2f us, p99 %.2f us, mean %.2f us\n",
                exchange ? "exchange" : "pingpong", r.iters, r.p50_us, r.p99_us, r.mean_us);
  }
}

// KOLO_IB_BENCH=1: the provider's own bandwidth one way between two
// processes (util/net_bench.h), 64 KiB slices with 16 in flight, both
// polling: ib_write_bw -s 65536's counterpart without kolo's engine.
TEST(IbBench, Bandwidth) {
  const char *on = getenv("KOLO_IB_BENCH");
  if (on == nullptr || std::strcmp(on, "1") != 0) GTEST_SKIP() << "a measurement: runs with KOLO_IB_BENCH=1";
  REQUIRE_IB(net);
  (void)net;
  const int iters = getenv("KOLO_IB_BENCH_ITERS") ? atoi(getenv("KOLO_IB_BENCH_ITERS")) : 2000;
  double mbps = 0;
  char err[512] = "";
  ASSERT_EQ(kt_net_bench_bw("ib", iters / 2, 65536, 16, &mbps, err, sizeof err), 0) << err;
  std::printf("KOLO-IB-BENCH: bandwidth 65536 B x %d, 16 in flight: %.2f MB/s\n", iters / 2, mbps);
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
  EXPECT_EQ(children_checked(res, cases.size()), "");
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
