// test_net.cc - the net transport (socket provider and proxy).
//
//  - NetSocket: the TCP provider alone: slices of 0 bytes to a whole slot
//    over three streams, two laps of a ring, with and without signatures,
//    every byte and signature checked; credits (a newer one replacing one
//    not sent); stop words both ways, with a mismatch report; a stray
//    connection (no token) refused while the real sender gets through; the
//    peer's close reported as an error naming it; no fd left.  unacked():
//    a sender's bytes in its kernel until the receiver's host has them, and a
//    close after it loses none.
//  - NetProcs.Grid: ranks as processes of this host forced onto the net
//    transport (KOLO_NET_FORCE=1, KOLO_SHM_DISABLE=1, so nothing else could
//    connect them), every collective for float32 sum, int32 max and
//    bfloat16 sum at counts 0, 1, 7, 4095 and 1 MiB + 3, at 2 and 3 ranks,
//    element-checked against tests/util's reference.
//  - NetProcs.RankKilledDuringCollective: 3 ranks, timeout 2 s; rank 2 dies
//    (SIGKILL) 50 ms into a large all-reduce; ranks 0 and 1 must return an
//    error naming rank 2 within the bound.
//  - NetCredit: when a receive end sends its credit.
//  - NetPolled.KernelStylePipesWakeOnPost: the proxy's polled pipes (the
//    net pipes of CUDA communicators, whose kernels ring no doorbell) over
//    the socket provider, driven by tests/util/polled_pipe.c with the
//    proxy's idle sleep raised to 20 s: only the launcher's posts can wake
//    it, so a missed wake-up or a proxy that stops polling too early shows
//    as a stalled counter; bytes are checked, and only the filled bytes of
//    each slot may land.
//  - NetNs.TwoAndThreeNamespaces: runs tests/netns/run.sh, which puts each
//    rank in its own network namespace (veth + bridge, 10.x addresses) and
//    runs NetNsRank.Run there; skipped with a message where namespaces
//    cannot be made (not root, no permission).
//  - NetNsRank.Run: one rank from the launcher's variables (only when
//    KOLO_NETNS_RANK=1; the script sets it).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "util/coll_ref.h"
#include "util/coll_run.h"
#include "util/net_bench.h"
#include "util/comm_peek.h"
#include "util/exec_turns.h"
#include "util/polled_pipe.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

extern "C" {
#include "ring/algo.h"
#include "transport/conn_wire.h"
#include "transport/net.h"
#include "transport/net_credit.h"
#include "transport/socket.h"
}

using namespace kt;

namespace {

const bool kTimeoutSet = (default_test_timeout(60000), true);

// TSan does not support fork() from a multi-threaded process (the unique
// id's root thread runs here): the suites that fork ranks skip under it,
// as tests/CMakeLists.txt leaves test_e2e_procs out of TSan builds.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif
#define SKIP_UNDER_TSAN() \
  if (kTsan) GTEST_SKIP() << "forks ranks: not under TSan (runs in the release and ASan builds)"

constexpr size_t kLarge = (1u << 20) + 3;

struct TypeOp {
  koloDataType_t t;
  koloRedOp_t op;
};
const TypeOp kNetTypes[] = {{koloFloat32, koloSum}, {koloInt32, koloMax}, {koloBfloat16, koloSum}};

CollCase make_case(Coll coll, TypeOp to, int n, size_t count, bool in_place, int variant) {
  return kt::make_case(coll, to.t, to.op, n, count, in_place, variant);
}

std::vector<CollCase> net_grid(int n, bool large) {
  std::vector<CollCase> cases;
  int v = 0;
  for (Coll coll : kAllColls)
    for (const TypeOp &to : kNetTypes) {
      for (size_t count : {(size_t)0, (size_t)1, (size_t)7, (size_t)4095})
        for (int ip = 0; ip < (has_in_place(coll) ? 2 : 1); ip++)
          cases.push_back(make_case(coll, to, n, count, ip == 1, v++));
      if (large && !sanitized_build()) cases.push_back(make_case(coll, to, n, kLarge, false, v++));
    }
  return cases;
}

// Forked ranks leave with _exit, which skips LeakSanitizer's check at exit:
// run it here (ASan builds); 1 when something leaked.
int leak_check() {
#if defined(__SANITIZE_ADDRESS__)
  return __lsan_do_recoverable_leak_check() != 0;
#else
  return 0;
#endif
}

// ---- the provider alone ----------------------------------------------------

struct Loopback {
  sockaddr_storage local{};
  Loopback() {
    auto *v4 = reinterpret_cast<sockaddr_in *>(&local);
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
};

// One end of a provider connection as the test drives it: the sink's
// records.
struct End {
  void *comm = nullptr;
  std::vector<unsigned char> ring;
  std::vector<std::pair<uint32_t, uint32_t>> slices;  // (step, len)
  std::vector<kolo_call_sig> sigs;                     // of the slices that had one
  std::vector<uint32_t> sig_steps;
  uint32_t head = 0;
  int stops = 0;
  uint32_t stop_word = 0;
  bool has_report = false;
  kolo_call_mismatch report{};
};

kolo_net_sink sink_of(End *e) {
  kolo_net_sink k{};
  k.ctx = e;
  k.slice = [](void *ctx, uint32_t step, uint32_t len, const kolo_call_sig *sig) {
    End *x = static_cast<End *>(ctx);
    x->slices.emplace_back(step, len);
    if (sig) x->sigs.push_back(*sig), x->sig_steps.push_back(step);
  };
  k.credit = [](void *ctx, uint32_t head) { static_cast<End *>(ctx)->head = head; };
  k.stop = [](void *ctx, uint32_t word, const kolo_call_mismatch *m) {
    End *x = static_cast<End *>(ctx);
    x->stops++;
    x->stop_word = word;
    x->has_report = m != nullptr;
    if (m) x->report = *m;
  };
  return k;
}

// Both ends progress from this one thread until done() (or 10 s pass).
template <class F>
koloResult_t pump(End &s, End &r, F done, kolo_errbuf *eb) {
  double t0 = now_ms();
  while (!done()) {
    koloResult_t res = kolo_net_socket.progress(s.comm, KOLO_NET_OUT | KOLO_NET_IN, eb);
    if (res == koloSuccess) res = kolo_net_socket.progress(r.comm, KOLO_NET_OUT | KOLO_NET_IN, eb);
    if (res != koloSuccess) return res;
    if (now_ms() - t0 > 10000) return koloTimeout;
  }
  return koloSuccess;
}

kolo_call_sig test_sig(uint32_t k) {
  kolo_call_sig g{};
  g.count = 1000003ull * k + 7;
  g.seq = k;
  g.root = (int32_t)k % 3;
  g.coll = (uint8_t)k;
  g.type = 9;
  g.op = 0xff;
  g.set = 1;
  return g;
}

// What end e was told by a stop word: `word`, with report m (its ranks, and
// the count and sequence number of both calls).
void expect_stop(const End &e, uint32_t word, const kolo_call_mismatch &m) {
  EXPECT_EQ(e.stop_word, word);
  ASSERT_TRUE(e.has_report);
  EXPECT_EQ(e.report.rank[0], m.rank[0]);
  EXPECT_EQ(e.report.rank[1], m.rank[1]);
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ(e.report.sig[i].count, m.sig[i].count) << "call " << i;
    EXPECT_EQ(e.report.sig[i].seq, m.sig[i].seq) << "call " << i;
  }
}

// Binds both ends of a socket connection to rings of nslots slots of
// `slot` bytes, the sender's filled with s_fill, the receiver's with r_fill.
void bind_rings(End &s, End &r, size_t slot, uint32_t nslots, unsigned char s_fill, unsigned char r_fill) {
  kolo_errbuf eb{};
  s.ring.assign(slot * nslots, s_fill);
  r.ring.assign(slot * nslots, r_fill);
  kolo_net_ring sr = {reinterpret_cast<char *>(s.ring.data()), nslots, slot, 0};
  kolo_net_ring rr = {reinterpret_cast<char *>(r.ring.data()), nslots, slot, 0};
  kolo_net_sink ss = sink_of(&s), rs = sink_of(&r);
  ASSERT_EQ(kolo_net_socket.bind(s.comm, &sr, &ss, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(kolo_net_socket.bind(r.comm, &rr, &rs, &eb), koloSuccess) << eb.msg;
}

// A socket connection over loopback: s.comm connects, r.comm accepts.
void connect_ends(End &s, End &r) {
  const kolo_net_provider &net = kolo_net_socket;
  kolo_errbuf eb{};
  Loopback lo;
  kolo_net_handle h;
  void *lcomm = nullptr;
  ASSERT_EQ(net.listen(&lo.local, 0, &h, &lcomm, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(net.connect(&h, 0, kolo_deadline(5000), 5000, "rank 1 (test)", &s.comm, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(net.accept(lcomm, kolo_deadline(5000), 5000, "rank 0 (test)", &r.comm, &eb), koloSuccess) << eb.msg;
  net.close_listen(lcomm);
}

// Progress on comm until it fails (its peer closed) or 5 s pass: the result.
koloResult_t progress_until_failure(void *comm, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  for (double t0 = now_ms(); res == koloSuccess && now_ms() - t0 < 5000; usleep(100))
    res = kolo_net_socket.progress(comm, KOLO_NET_OUT | KOLO_NET_IN, eb);
  return res;
}

TEST(NetSocket, SlicesCreditsStopsStrayAndClose) {
  ScopedEnv streams("KOLO_SOCKET_NSTREAMS", "3");
  int fds_before = count_fds();
  const kolo_net_provider &net = kolo_net_socket;
  kolo_errbuf eb{};
  Loopback lo;
  kolo_net_handle h;
  void *lcomm = nullptr;
  End s, r;
  ASSERT_EQ(net.listen(&lo.local, 0, &h, &lcomm, &eb), koloSuccess) << eb.msg;

  // A stray connection to the listener: right port, no token.
  kolo_net_listen_info info{};
  char why[KOLO_ERR_LEN];
  ASSERT_EQ(kolo_decode_net_handle(&h, KOLO_NET_HANDLE_SOCK_MAGIC, "test", &info, why, sizeof why), KOLO_CONN_WIRE_OK)
      << why;
  sockaddr_storage addr = info.addr;
  int stray = -1;
  ASSERT_EQ(kolo_sock_connect(&addr, kolo_deadline(2000), 2000, "listener", &eb, &stray), koloSuccess) << eb.msg;
  const char junk[40] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(kolo_sock_send_all(stray, junk, sizeof junk, kolo_deadline(2000), "listener", &eb), koloSuccess);

  ASSERT_EQ(net.connect(&h, 0, kolo_deadline(5000), 5000, "rank 1 (test)", &s.comm, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(net.accept(lcomm, kolo_deadline(5000), 5000, "rank 0 (test)", &r.comm, &eb), koloSuccess) << eb.msg;
  net.close_listen(lcomm);
  close(stray);

  // Four slots of 1 MiB + 5 bytes (parts over all three streams, not a
  // multiple of the stream count); slices of every shape, two laps.
  const size_t slot = (1u << 20) + 5;
  const uint32_t nslots = 4;
  ASSERT_NO_FATAL_FAILURE(bind_rings(s, r, slot, nslots, 0, 0xa5));
  const size_t lens[8] = {slot, 7, 0, 200000, 1, slot - 1, 65536 * 2 + 3, 4096};
  for (uint32_t lap = 0; lap < 2; lap++) {
    for (uint32_t k = 4 * lap; k < 4 * lap + 4; k++) {
      unsigned char *src = s.ring.data() + (k % nslots) * slot;
      for (size_t i = 0; i < lens[k]; i++) src[i] = (unsigned char)(i * 131 + 7 * k + 1);
      kolo_call_sig g = test_sig(k);
      int q = 0;
      ASSERT_EQ(net.send_slice(s.comm, k, lens[k], k % 2 ? nullptr : &g, &q, &eb), koloSuccess) << eb.msg;
      ASSERT_EQ(q, 1);
    }
    ASSERT_EQ(pump(s, r, [&] { return r.slices.size() == 4 * (lap + 1); }, &eb), koloSuccess) << eb.msg;
    for (uint32_t k = 4 * lap; k < 4 * lap + 4; k++) {
      EXPECT_EQ(r.slices[k].first, k);
      EXPECT_EQ(r.slices[k].second, lens[k]);
      EXPECT_EQ(memcmp(r.ring.data() + (k % nslots) * slot, s.ring.data() + (k % nslots) * slot, lens[k]), 0)
          << "slice " << k << " differs";
    }
    // Credits: two in a row, the second replacing the first if it has not left.
    int q = 0;
    ASSERT_EQ(net.send_credit(r.comm, 4 * lap + 2, &q, &eb), koloSuccess);
    ASSERT_EQ(net.send_credit(r.comm, 4 * lap + 4, &q, &eb), koloSuccess);
    ASSERT_EQ(pump(s, r, [&] { return s.head == 4 * lap + 4; }, &eb), koloSuccess) << eb.msg;
  }
  ASSERT_EQ(r.sigs.size(), 4u);
  for (size_t i = 0; i < r.sigs.size(); i++) {
    kolo_call_sig want = test_sig(r.sig_steps[i]);
    EXPECT_EQ(r.sig_steps[i] % 2, 0u);
    const kolo_call_sig &got = r.sigs[i];
    EXPECT_TRUE(got.count == want.count && got.seq == want.seq && got.root == want.root && got.coll == want.coll &&
                got.type == want.type && got.op == want.op && got.set == 1)
        << "signature of step " << r.sig_steps[i];
  }

  // Stop words both ways, with and without a report.
  kolo_call_mismatch m{{0, 2}, {test_sig(3), test_sig(4)}};
  int q = 0;
  ASSERT_EQ(net.send_stop(s.comm, (7u << 24) | 1, &m, &q, &eb), koloSuccess);
  ASSERT_EQ(net.send_stop(r.comm, (1u << 24) | 2, nullptr, &q, &eb), koloSuccess);
  ASSERT_EQ(pump(s, r, [&] { return s.stops == 1 && r.stops == 1; }, &eb), koloSuccess) << eb.msg;
  ASSERT_NO_FATAL_FAILURE(expect_stop(r, (7u << 24) | 1, m));
  EXPECT_EQ(s.stop_word, (1u << 24) | 2);
  EXPECT_FALSE(s.has_report);

  // The sender goes away: the receiver's progress fails naming it.
  net.close(s.comm);
  koloResult_t res = progress_until_failure(r.comm, &eb);
  EXPECT_EQ(res, koloRemoteError);
  EXPECT_NE(std::string(eb.msg).find("rank 0 (test)"), std::string::npos) << eb.msg;
  net.close(r.comm);
  EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked";
}

// Small socket buffers on every stream of a connection (its pollfds), so
// that a few slices fill them whatever the host's TCP autotuning allows.
void shrink_buffers(void *comm, int opt) {
  struct pollfd pf[KOLO_NET_MAX_STREAMS + 2];
  int n = kolo_net_socket.pollfds(comm, pf, KOLO_NET_MAX_STREAMS + 2);
  int bytes = 64 << 10;
  for (int i = 0; i < n; i++) ASSERT_EQ(setsockopt(pf[i].fd, SOL_SOCKET, opt, &bytes, sizeof bytes), 0);
}

// A sender whose receiver reads slowly: its last bytes wait in its kernel's
// send queue after its own queue emptied (pending 0), and a credit it never
// read sits in its input.  Closing then would reset the connection and drop
// those bytes: unacked() says so until the receiver's host has them all,
// and a close after that loses nothing (the slice arrives whole, then the
// close is reported).
TEST(NetSocket, UnackedUntilThePeersHostHasEveryByte) {
  ScopedEnv streams("KOLO_SOCKET_NSTREAMS", "1");
  const kolo_net_provider &net = kolo_net_socket;
  ASSERT_NE(net.unacked, nullptr);
  kolo_errbuf eb{};
  End s, r;
  ASSERT_NO_FATAL_FAILURE(connect_ends(s, r));
  // 512 KiB against a 64 KiB receive buffer: the receiver's host takes
  // part, the sender's kernel holds the rest.
  const size_t slot = 512u << 10;
  ASSERT_NO_FATAL_FAILURE(bind_rings(s, r, slot, 2, 0, 0xa5));
  ASSERT_NO_FATAL_FAILURE(shrink_buffers(r.comm, SO_RCVBUF));
  for (size_t i = 0; i < slot; i++) s.ring[i] = (unsigned char)(i * 131 + 7);
  int q = 0;
  ASSERT_EQ(net.send_credit(r.comm, 1, &q, &eb), koloSuccess) << eb.msg; /* s never reads it */
  ASSERT_EQ(net.progress(r.comm, KOLO_NET_OUT, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(net.send_slice(s.comm, 0, slot, nullptr, &q, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(q, 1);
  for (double t0 = now_ms(); net.pending(s.comm) && now_ms() - t0 < 5000; usleep(200))
    ASSERT_EQ(net.progress(s.comm, KOLO_NET_OUT, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(net.pending(s.comm), 0) << "the sender's kernel did not take the slice";
  EXPECT_NE(net.unacked(s.comm), 0) << "512 KiB into a 64 KiB receive buffer: some waits in the sender's kernel";
  // Once the receiver has read enough, the sender's kernel holds nothing.
  for (double t0 = now_ms(); net.unacked(s.comm) && now_ms() - t0 < 10000; usleep(100))
    ASSERT_EQ(net.progress(r.comm, KOLO_NET_IN, &eb), koloSuccess) << eb.msg;
  ASSERT_EQ(net.unacked(s.comm), 0) << "the receiver read, yet the sender's kernel still holds bytes";
  net.close(s.comm);
  koloResult_t res = progress_until_failure(r.comm, &eb);
  EXPECT_EQ(res, koloRemoteError);
  EXPECT_EQ(std::string(eb.msg).find("middle of a slice"), std::string::npos) << eb.msg;
  ASSERT_EQ(r.slices.size(), 1u);
  EXPECT_EQ(r.slices[0].second, slot);
  EXPECT_EQ(memcmp(r.ring.data(), s.ring.data(), slot), 0) << "the slice differs";
  net.close(r.comm);
}

// Progress on comm, writing only, until its peer's host has every byte it
// queued (within 5 s); whether it did.
bool written_to_peer_host(void *comm, kolo_errbuf *eb) {
  const kolo_net_provider &net = kolo_net_socket;
  for (double t0 = now_ms(); (net.pending(comm) || net.unacked(comm)) && now_ms() - t0 < 5000; usleep(200))
    if (net.progress(comm, KOLO_NET_OUT, eb) != koloSuccess) return false;
  return !net.pending(comm) && !net.unacked(comm);
}

// 1 once every stream of comm's connection is closed on this host's side
// (a reset came), within 5 s.
bool wait_reset(void *comm) {
  struct pollfd pf[KOLO_NET_MAX_STREAMS + 2];
  int n = kolo_net_socket.pollfds(comm, pf, KOLO_NET_MAX_STREAMS + 2);
  for (double t0 = now_ms(); now_ms() - t0 < 5000; usleep(200)) {
    int closed = 0;
    for (int i = 0; i < n; i++) {
      tcp_info ti{};
      socklen_t len = sizeof ti;
      closed += getsockopt(pf[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE;
    }
    if (n > 0 && closed == n) return true;
  }
  return false;
}

// A peer that stops, says so and leaves without reading what it was sent:
// its close resets the connection, and the sender's next write fails.  Its
// stop word (with its mismatch report) came before the reset and waits in
// the sender's input: the failed write still delivers it, before the
// failure, whatever the caller asked progress to do.  (Without it the
// sender's side reports a peer that left, not why it stopped.)
TEST(NetSocket, AWriteThatMeetsAResetDeliversThePeersStopFirst) {
  for (const char *streams : {"1", "3"}) {
    SCOPED_TRACE(std::string("KOLO_SOCKET_NSTREAMS=") + streams);
    ScopedEnv env("KOLO_SOCKET_NSTREAMS", streams);
    const int fds_before = count_fds();
    const kolo_net_provider &net = kolo_net_socket;
    kolo_errbuf eb{};
    End s, r;
    ASSERT_NO_FATAL_FAILURE(connect_ends(s, r));
    const size_t slot = 16u << 10; /* within any receive buffer */
    ASSERT_NO_FATAL_FAILURE(bind_rings(s, r, slot, 4, 0x5a, 0xa5));
    int q = 0;
    // A slice the receiver's host takes and the receiver never reads.
    ASSERT_EQ(net.send_slice(s.comm, 0, slot, nullptr, &q, &eb), koloSuccess) << eb.msg;
    ASSERT_TRUE(written_to_peer_host(s.comm, &eb)) << "the receiver's host did not take the slice: " << eb.msg;
    // The receiver stops with a report, its stop reaches the sender's host,
    // and it closes: a reset, for what it left unread.
    kolo_call_mismatch m{{1, 2}, {test_sig(5), test_sig(6)}};
    ASSERT_EQ(net.send_stop(r.comm, (7u << 24) | 3, &m, &q, &eb), koloSuccess) << eb.msg;
    ASSERT_TRUE(written_to_peer_host(r.comm, &eb)) << "the sender's host did not take the stop word: " << eb.msg;
    net.close(r.comm);
    ASSERT_TRUE(wait_reset(s.comm)) << "closing with unread bytes did not reset the connection";
    ASSERT_EQ(s.stops, 0) << "the sender read its input before the write";
    // The sender writes again, asking progress only to write.
    koloResult_t res = net.send_slice(s.comm, 1, slot, nullptr, &q, &eb);
    for (double t0 = now_ms(); res == koloSuccess && now_ms() - t0 < 5000; usleep(200))
      res = net.progress(s.comm, KOLO_NET_OUT, &eb);
    EXPECT_EQ(res, koloRemoteError) << "a write to a reset connection did not fail";
    EXPECT_NE(std::string(eb.msg).find("rank 1 (test)"), std::string::npos) << eb.msg;
    ASSERT_EQ(s.stops, 1) << "the stop word that came before the reset was lost: " << eb.msg;
    ASSERT_NO_FATAL_FAILURE(expect_stop(s, (7u << 24) | 3, m));
    EXPECT_EQ(net.progress(s.comm, KOLO_NET_OUT | KOLO_NET_IN, &eb), koloRemoteError);
    EXPECT_EQ(s.stops, 1);
    net.close(s.comm);
    EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked";
  }
}

// Slices sent from the caller's buffer (send_slice_from): the buffer is
// poisoned as soon as each call returns, and the sender's slots were
// still holds older slices, so a byte that went out from either place too
// late, or from the wrong one, arrives wrong.  The socket buffers are
// small: most of a large slice waits in its slot (the copied rest); a
// small one goes out whole.
TEST(NetSocket, SliceFromCallersBufferIsFreeOnReturn) {
  ScopedEnv streams("KOLO_SOCKET_NSTREAMS", "2");
  const kolo_net_provider &net = kolo_net_socket;
  kolo_errbuf eb{};
  End s, r;
  ASSERT_NO_FATAL_FAILURE(connect_ends(s, r));
  shrink_buffers(s.comm, SO_SNDBUF);
  shrink_buffers(r.comm, SO_RCVBUF);
  const size_t slot = (1u << 20) + 5;
  const uint32_t nslots = 4, nslices = 12;
  ASSERT_NO_FATAL_FAILURE(bind_rings(s, r, slot, nslots, 0x5a, 0xa5));
  std::vector<unsigned char> user(slot + 1), want(slot);
  int left_queued = 0;
  for (uint32_t k = 0; k < nslices; k++) {
    std::memset(r.ring.data() + (k % nslots) * slot, 0xa5, slot);  // the receiver's slot, poisoned again
    size_t len = k % 3 == 2 ? 4096 + k : slot - k;
    unsigned char *src = user.data() + (k & 1);  // odd addresses too
    for (size_t i = 0; i < len; i++) src[i] = want[i] = (unsigned char)(rand() & 0xff);
    kolo_call_sig g = test_sig(k);
    int q = 0;
    ASSERT_EQ(net.send_slice_from(s.comm, k, len, k % 2 ? nullptr : &g, src, &q, &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(q, 1);
    std::memset(user.data(), 0xee, user.size());
    left_queued += net.pending(s.comm);
    ASSERT_EQ(pump(s, r, [&] { return r.slices.size() == k + 1; }, &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(r.slices[k].second, len);
    ASSERT_EQ(memcmp(r.ring.data() + (k % nslots) * slot, want.data(), len), 0) << "slice " << k << " differs";
    ASSERT_EQ(r.sigs.size(), (k + 2) / 2u);
  }
  EXPECT_GT(left_queued, 0) << "every slice went out at once: the copied rest was never sent";
  net.close(s.comm);
  net.close(r.comm);
}

// The pipes of a process share one listener: 8 receiving pipes listen on
// one port; their senders connect in the reverse order, with a stray
// connection among them; 8 threads accept at once, each its own pipe.  A
// credit sent back on each pipe reaches that pipe's sender and no other;
// the listener closes with its last pipe.
TEST(NetSocket, PipesShareOneListenerAndTakeTheirOwnConnections) {
  ScopedEnv streams("KOLO_SOCKET_NSTREAMS", "2");
  const int fds_before = count_fds();
  const kolo_net_provider &net = kolo_net_socket;
  Loopback lo;
  constexpr int kPipes = 8;
  kolo_net_handle h[kPipes];
  void *lcomm[kPipes];
  End s[kPipes], r[kPipes];
  int port = -1;
  for (int i = 0; i < kPipes; i++) {
    kolo_errbuf eb{};
    ASSERT_EQ(net.listen(&lo.local, 0, &h[i], &lcomm[i], &eb), koloSuccess) << eb.msg;
    kolo_net_listen_info info{};
    char why[KOLO_ERR_LEN];
    ASSERT_EQ(kolo_decode_net_handle(&h[i], KOLO_NET_HANDLE_SOCK_MAGIC, "test", &info, why, sizeof why),
              KOLO_CONN_WIRE_OK) << why;
    int p = ntohs(reinterpret_cast<sockaddr_in *>(&info.addr)->sin_port);
    if (i == 0) port = p;
    EXPECT_EQ(p, port) << "pipe " << i << " listens on a port of its own";
  }
  kolo_net_listen_info info{};
  char why[KOLO_ERR_LEN];
  ASSERT_EQ(kolo_decode_net_handle(&h[0], KOLO_NET_HANDLE_SOCK_MAGIC, "test", &info, why, sizeof why),
            KOLO_CONN_WIRE_OK);
  kolo_errbuf eb{};
  int stray = -1;
  for (int i = kPipes - 1; i >= 0; i--) {
    if (i == kPipes / 2) {
      ASSERT_EQ(kolo_sock_connect(&info.addr, kolo_deadline(2000), 2000, "listener", &eb, &stray), koloSuccess);
      const char junk[40] = "GET / HTTP/1.0\r\n\r\n";
      ASSERT_EQ(kolo_sock_send_all(stray, junk, sizeof junk, kolo_deadline(2000), "listener", &eb), koloSuccess);
    }
    std::string who = "rank " + std::to_string(i) + " (test)";
    ASSERT_EQ(net.connect(&h[i], 0, kolo_deadline(5000), 5000, who.c_str(), &s[i].comm, &eb), koloSuccess) << eb.msg;
  }
  std::vector<std::thread> acceptors;
  std::vector<koloResult_t> got(kPipes, koloInternalError);
  for (int i = 0; i < kPipes; i++)
    acceptors.emplace_back([&, i] {
      kolo_errbuf e{};
      got[(size_t)i] = net.accept(lcomm[i], kolo_deadline(10000), 10000, "a sender (test)", &r[i].comm, &e);
    });
  for (auto &t : acceptors) t.join();
  close(stray);
  char ring[kPipes][64];
  kolo_net_sink sinks[2 * kPipes];
  for (int i = 0; i < kPipes; i++) {
    ASSERT_EQ(got[(size_t)i], koloSuccess) << "pipe " << i;
    kolo_net_ring rg = {ring[i], 1, sizeof ring[i], 0};
    sinks[2 * i] = sink_of(&s[i]);
    sinks[2 * i + 1] = sink_of(&r[i]);
    ASSERT_EQ(net.bind(s[i].comm, &rg, &sinks[2 * i], &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(net.bind(r[i].comm, &rg, &sinks[2 * i + 1], &eb), koloSuccess) << eb.msg;
    int q = 0;
    ASSERT_EQ(net.send_credit(r[i].comm, 100 + (uint32_t)i, &q, &eb), koloSuccess) << eb.msg;
  }
  for (double t0 = now_ms(); now_ms() - t0 < 5000; usleep(200)) {
    int done = 0;
    for (int i = 0; i < kPipes; i++) {
      ASSERT_EQ(net.progress(r[i].comm, KOLO_NET_OUT, &eb), koloSuccess) << eb.msg;
      ASSERT_EQ(net.progress(s[i].comm, KOLO_NET_IN, &eb), koloSuccess) << eb.msg;
      done += s[i].head != 0;
    }
    if (done == kPipes) break;
  }
  for (int i = 0; i < kPipes; i++) EXPECT_EQ(s[i].head, 100u + (uint32_t)i) << "pipe " << i << "'s sender";
  for (int i = 0; i < kPipes; i++) {
    net.close_listen(lcomm[i]);
    net.close(s[i].comm);
    net.close(r[i].comm);
  }
  EXPECT_EQ(count_fds(), fds_before) << "file descriptors leaked (the listener outlived its pipes?)";
}

// ---- polled pipes (CUDA communicators' net pipes) ------------------------------

TEST(NetPolled, KernelStylePipesWakeOnPost) {
  ScopedEnv idle("KOLO_PROXY_IDLE_MS", "20000");
  for (size_t slot : {size_t(4096), size_t(65536) + 64}) {
    kt_polled_cfg cfg{};
    cfg.provider = "socket";
    cfg.slot_bytes = slot;
    cfg.nslots = 4;
    cfg.launches = 30;
    cfg.max_slices = 11;
    cfg.pause_us = 15000;  // the proxy falls asleep between launches
    cfg.stall_ms = 5000;   // far below the 20 s sleep a missed wake-up would cost
    cfg.seed = 1234 + (unsigned)slot;
    char err[512] = "";
    EXPECT_EQ(kt_polled_pipe_run(&cfg, err, sizeof err), 0) << "slot " << slot << ": " << err;
  }
}

// When a receive end credits: a quarter of the window left (two slots at
// least), never past half of it, at once for one or two slots.
TEST(NetCredit, DueWhenAQuarterOfTheWindowIsLeft) {
  const uint32_t nslots[] = {1, 2, 4, 8, 16, 32, 64};
  const uint32_t first_due[] = {1, 1, 2, 6, 12, 24, 48};
  for (size_t i = 0; i < sizeof nslots / sizeof nslots[0]; i++) {
    for (uint32_t owed = 0; owed <= nslots[i]; owed++)
      EXPECT_EQ(kolo_net_pipe_credit_due(owed, nslots[i]), owed >= first_due[i] ? 1 : 0)
          << owed << " of " << nslots[i] << " slots owed";
  }
}

// Executor-style threads on a pipe pair with the proxy beside them: small
// slices from the sending thread, larger ones handed to the proxy, credits
// paid when kolo_net_pipe_credit_due says or lazily; the bytes checked as
// above.  Under TSan (tests/run_all.sh runs NetCallers there) this checks
// the pipes' locking.
TEST(NetCallers, ExecutorStyleThreadsBesideTheProxy) {
  for (size_t slot : {size_t(4096), size_t(65536) + 64}) {
    kt_polled_cfg cfg{};
    cfg.provider = "socket";
    cfg.slot_bytes = slot;
    cfg.nslots = 4;
    cfg.launches = 40;
    cfg.max_slices = 11;
    cfg.pause_us = 200;
    cfg.stall_ms = 10000;
    cfg.seed = 4321 + (unsigned)slot;
    cfg.caller = 1;
    cfg.caller_bytes = slot / 2;  // some slices from the thread, some through the proxy
    char err[512] = "";
    EXPECT_EQ(kt_polled_pipe_run(&cfg, err, sizeof err), 0) << "slot " << slot << ": " << err;
  }
}

// The host executor on a stand-in for a net pipe (util/exec_turns.h): its
// slice lands in a turn, after `turns_before_landing` empty ones.
static kt_exec_turns run_turns(const kt_exec_turns_cfg &cfg) {
  kt_exec_turns r{};
  char err[256] = "";
  EXPECT_EQ(kt_exec_turns_run(&cfg, &r, err, sizeof err), 0) << err;
  EXPECT_EQ(r.result, 0);
  EXPECT_EQ(r.bytes_wrong, 0);
  return r;
}

// A turn of a net pipe that brings a slice ends the wait's idle polls: the
// executor takes the slice then, rather than sleep on a wake-up that came
// and went (a sleep of up to a millisecond per call where waits sleep
// soon: KOLO_SPIN=0, or CPUs shared by more ranks than they hold).  Where
// turns > spin the wait reaches its sleeps, and none may start with the
// slice unread.
TEST(NetCallers, ExecutorTakesWhatATurnBroughtBeforeSleeping) {
  for (kt_exec_turns_cfg cfg : {kt_exec_turns_cfg{1, 0, 0, 0, 0, 0}, kt_exec_turns_cfg{5, 3, 0, 0, 0, 0},
                                kt_exec_turns_cfg{16, 20, 8, 4, 0, 0}, kt_exec_turns_cfg{7, 8, 8, 0, 0, 0},
                                kt_exec_turns_cfg{3, 0, 2000, 64, 0, 0}}) {
    SCOPED_TRACE(std::to_string(cfg.count) + " int32 after " + std::to_string(cfg.turns_before_landing) +
                 " empty turns, spin " + std::to_string(cfg.spin) + ", yields " + std::to_string(cfg.yields));
    kt_exec_turns r = run_turns(cfg);
    EXPECT_EQ(r.sleeps_with_slice, 0);
    if (cfg.turns_before_landing > cfg.spin + cfg.yields) {
      EXPECT_GT(r.sleeps, 0);  // the case reached the sleeps it tests
    }
  }
}

// Where ranks outnumber CPUs, waits yield for a time (yield_ns) before they
// sleep, except on a transport that sleeps in a wait of its own (a net
// pipe's, which its data ends): there after wake_yields yields.  A yield
// time of a minute stands for "for ever" here: the case would time out.
TEST(NetCallers, CrowdedWaitsOnNetPipesSleepAfterTheirYields) {
  kt_exec_turns_cfg cfg{4, 8 + 16 + 10, 8, 64, 60LL * 1000 * 1000 * 1000, 16};
  kt_exec_turns r = run_turns(cfg);
  EXPECT_GT(r.sleeps, 0);
  EXPECT_LE(r.sleeps, 10 + 1);  // one turn each: the slice lands in the 11th at most
  EXPECT_EQ(r.sleeps_with_slice, 0);
}

// ---- ranks as processes over the net transport -------------------------------

// The channel count is pinned: its default drops to 1 over the network on a
// host with fewer than two CPUs per rank (NetChannels below), and these
// tests cover the pipes of two channels on any machine.
struct NetEnv {
  ScopedEnv force{"KOLO_NET_FORCE", "1"};
  ScopedEnv noshm{"KOLO_SHM_DISABLE", "1"};
  ScopedEnv channels{"KOLO_NCHANNELS", "2"};
};

int child_grid(int rank, int n, const koloUniqueId &id, const std::vector<CollCase> &cases) {
  int fds_before = count_fds();
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRank(&comm, n, id, rank);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommInitRank: %s: %s\n", rank, koloGetErrorString(res),
                 koloGetLastError(nullptr));
    return 2;
  }
  int failures = run_cases(comm, rank, cases);
  // Blocked waits on net pipes move them from the executor (transport.h:
  // progress), not only through the proxy thread's wake-ups.
  if (n > 1 && kt_proxy_caller_turns() == 0) {
    std::fprintf(stderr, "rank %d: no blocked wait took a proxy turn itself\n", rank);
    failures++;
  }
  koloCommDestroy(comm);
  failures += leak_check();
  int fds_after = count_fds();
  if (fds_after != fds_before) {
    std::fprintf(stderr, "rank %d: %d file descriptors before init, %d after destroy\n", rank, fds_before,
                 fds_after);
    failures++;
  }
  return failures ? 1 : 0;
}

class NetProcs : public ::testing::TestWithParam<int> {};

TEST_P(NetProcs, Grid) {
  SKIP_UNDER_TSAN();
  NetEnv env;
  const int n = GetParam();
  std::vector<CollCase> cases = net_grid(n, true);
  double t0 = now_ms();
  // Forks first, then makes the id: see run_children_with_id.
  auto res = run_children_with_id(
      n, [&](int rank, const koloUniqueId &id) { return child_grid(rank, n, id, cases); }, 240000);
  EXPECT_EQ(children_checked(res, cases.size()), "");
  std::printf("  %zu cases at %d ranks over net in %.0f ms\n", cases.size(), n, now_ms() - t0);
}

INSTANTIATE_TEST_SUITE_P(Net, NetProcs, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "procs"; });

// The provider benchmark harness that perf/rxe_guest.sh runs over ib
// (util/net_bench.h), over sockets: its two processes must meet through
// their own listeners, since a child never takes over its parent's.
TEST(NetBench, HarnessMeasuresOverSockets) {
  SKIP_UNDER_TSAN();
  for (int exchange : {0, 1}) {
    kt_bench_lat r{};
    char err[512] = "";
    ASSERT_EQ(kt_net_bench_lat("socket", exchange, 200, 8, &r, err, sizeof err), 0) << err;
    EXPECT_EQ(r.iters, 200);
    EXPECT_GT(r.p50_us, 0);
  }
  double mbps = 0;
  char err[512] = "";
  ASSERT_EQ(kt_net_bench_bw("socket", 200, 65536, 16, &mbps, err, sizeof err), 0) << err;
  EXPECT_GT(mbps, 0);
}

// KOLO_NET_FORCE sends every hop over the network, and the algorithm
// choice must price it so: at 32 KiB on 4 ranks a network hop's latency
// favours recursive doubling (2 steps) over the ring (6 steps), which
// shared-memory prices would pick.  The calls at that size run checked.
int child_net_choice(int rank, int n, const koloUniqueId &id, const std::vector<CollCase> &cases) {
  koloComm_t comm = nullptr;
  if (koloCommInitRank(&comm, n, id, rank) != koloSuccess) return 2;
  int algo = kt_comm_algo(comm, 32768, 1), failures = 0;
  if (algo != KOLO_ALGO_RD) {
    std::fprintf(stderr, "rank %d: a 32 KiB all-reduce over the network picks %s, not rd\n", rank,
                 kolo_algo_name(algo));
    failures++;
  }
  failures += run_cases(comm, rank, cases);
  koloCommDestroy(comm);
  return failures ? 1 : 0;
}

TEST(NetProcsChoice, NetworkHopsArePricedAsNetwork) {
  SKIP_UNDER_TSAN();
  NetEnv env;
  const int n = 4;
  std::vector<CollCase> cases;
  for (int ip = 0; ip < 2; ip++) cases.push_back(make_case(Coll::AllReduce, kNetTypes[0], n, 8192, ip == 1, ip));
  auto res = run_children_with_id(
      n, [&](int rank, const koloUniqueId &id) { return child_net_choice(rank, n, id, cases); }, 120000);
  EXPECT_EQ(children_checked(res, cases.size()), "");
}

// Ranks of one process talk without the network even under
// KOLO_NET_FORCE (kolo_net_between), and are priced so: the ring at 32 KiB.
TEST(NetProcsChoice, RanksOfOneProcessArePricedAsLocal) {
  NetEnv env;
  kt::ThreadWorld w(4);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (koloComm_t comm : w.comms) EXPECT_EQ(kt_comm_algo(comm, 32768, 1), KOLO_ALGO_RING);
}

// The default channel count over the network follows the CPUs per rank
// (core/comm_topology.c): 1 where each rank has one CPU but not two.
// 2 processes on a host of `cpus` CPUs (as
// KOLO_HOST_CPUS says) must have `want` channels, and a 2 MiB all-reduce
// (which would use two) runs checked on them.
void expect_net_channels(const char *cpus, const char *nchannels, int want) {
  ScopedEnv force("KOLO_NET_FORCE", "1"), noshm("KOLO_SHM_DISABLE", "1"), host("KOLO_HOST_CPUS", cpus);
  ScopedEnv channels("KOLO_NCHANNELS", nchannels);  // "": unset
  const int n = 2;
  std::vector<CollCase> cases;
  for (int ip = 0; ip < 2; ip++)
    cases.push_back(make_case(Coll::AllReduce, kNetTypes[0], n, (size_t)1 << 19, ip == 1, ip));
  auto res = run_children_with_id(n, [&](int rank, const koloUniqueId &id) {
    koloComm_t comm = nullptr;
    if (koloCommInitRank(&comm, n, id, rank) != koloSuccess) return 2;
    int nch = 0, failures = 0;
    uint32_t nslots = 0;
    size_t slot_bytes = 0, min_bytes = 0;
    kt_comm_shape(comm, &nch, &nslots, &slot_bytes, &min_bytes);
    if (nch != want) {
      std::fprintf(stderr, "rank %d: %d channels with KOLO_HOST_CPUS=%s, KOLO_NCHANNELS=%s; want %d\n", rank, nch,
                   cpus, *nchannels ? nchannels : "unset", want);
      failures++;
    }
    failures += run_cases(comm, rank, cases);
    koloCommDestroy(comm);
    return failures ? 1 : 0;
  }, 120000);
  EXPECT_EQ(children_checked(res, cases.size()), "") << "KOLO_HOST_CPUS=" << cpus;
}

TEST(NetChannels, OneWhereAHostHasOneCpuPerRankButNotTwo) {
  SKIP_UNDER_TSAN();
  expect_net_channels("3", "", 1);  // 3 CPUs for 2 ranks
  expect_net_channels("2", "", 1);  // 1 per rank
  expect_net_channels("4", "", 2);  // 2 per rank: the default
  expect_net_channels("1", "", 2);  // more ranks than CPUs: the default
  expect_net_channels("1", "2", 2);  // set: kept
  expect_net_channels("1", "3", 3);
}

// Ranks of one process meet without the network: their channels stay.
TEST(NetChannels, RanksOfOneProcessKeepTheirs) {
  NetEnv env;
  ScopedEnv unpin("KOLO_NCHANNELS", ""), host("KOLO_HOST_CPUS", "1");
  kt::ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (koloComm_t comm : w.comms) {
    int nch = 0;
    uint32_t nslots = 0;
    size_t slot_bytes = 0, min_bytes = 0;
    kt_comm_shape(comm, &nch, &nslots, &slot_bytes, &min_bytes);
    EXPECT_EQ(nch, 2);
  }
}

// A count set on one rank and defaulted on another would split them (the
// default may drop): init refuses, naming both.
TEST(NetChannels, SetOnOneRankOnlyIsRefused) {
  SKIP_UNDER_TSAN();
  ScopedEnv force("KOLO_NET_FORCE", "1"), noshm("KOLO_SHM_DISABLE", "1"), host("KOLO_HOST_CPUS", "1");
  ScopedEnv unpin("KOLO_NCHANNELS", "");
  auto res = run_children_with_id(2, [&](int rank, const koloUniqueId &id) {
    if (rank == 1) setenv("KOLO_NCHANNELS", "2", 1);
    koloComm_t comm = nullptr;
    if (koloCommInitRank(&comm, 2, id, rank) == koloSuccess) return 1;
    std::string text = koloGetLastError(nullptr);
    std::string want = rank == 0 ? "left to its default on this rank and set on rank 1"
                                 : "set on this rank and left to its default on rank 0";
    if (text.find(want) == std::string::npos) {
      std::fprintf(stderr, "rank %d: init failed with \"%s\", not \"%s\"\n", rank, text.c_str(), want.c_str());
      return 1;
    }
    return 0;
  }, 60000);
  EXPECT_EQ(children_failures(res), "");
}

// A round's chunk over the network in host memory follows the ranks per
// CPU (core/comm_topology.c): 512 KiB over their most on a host, at least
// 64 KiB, unless KOLO_NET_CHUNK_BYTES (`chunk`, where not null) sets it.
// n processes on a host of `cpus` CPUs (KOLO_HOST_CPUS) must cap it at
// `want` bytes, and calls of many such rounds -- all-reduce,
// reduce-scatter, all-gather, an odd count, in place and out, unaligned --
// run checked on them.
void expect_net_chunk(int n, const char *cpus, size_t want, const char *chunk = nullptr) {
  ScopedEnv force("KOLO_NET_FORCE", "1"), noshm("KOLO_SHM_DISABLE", "1"), host("KOLO_HOST_CPUS", cpus),
      set("KOLO_NET_CHUNK_BYTES", chunk ? chunk : "0");
  std::vector<CollCase> cases;
  const size_t count = (size_t)3 << 18 | 5;  // 3 MiB + 20 B of float32: rounds of every size here
  int v = 0;
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather})
    for (int ip = 0; ip < 2; ip++) cases.push_back(make_case(coll, kNetTypes[0], n, count / (size_t)n, ip == 1, v++));
  cases.push_back(make_case(Coll::AllReduce, kNetTypes[0], n, count, false, 2));  // misaligned by the variant
  auto res = run_children_with_id(n, [&](int rank, const koloUniqueId &id) {
    koloComm_t comm = nullptr;
    if (koloCommInitRank(&comm, n, id, rank) != koloSuccess) return 2;
    int failures = 0;
    if (kt_comm_chunk_cap(comm) != want) {
      std::fprintf(stderr, "rank %d of %d: chunk cap %zu with KOLO_HOST_CPUS=%s, KOLO_NET_CHUNK_BYTES=%s; want %zu\n",
                   rank, n, kt_comm_chunk_cap(comm), cpus, chunk ? chunk : "0", want);
      failures++;
    }
    failures += run_cases(comm, rank, cases);
    koloCommDestroy(comm);
    return failures ? 1 : 0;
  }, 120000);
  EXPECT_EQ(children_checked(res, cases.size()), "")
      << n << " ranks, KOLO_HOST_CPUS=" << cpus << ", KOLO_NET_CHUNK_BYTES=" << (chunk ? chunk : "0");
}

TEST(NetChunk, FollowsTheRanksPerCpu) {
  SKIP_UNDER_TSAN();
  expect_net_chunk(2, "4", (size_t)512 << 10);  // 1 rank per CPU
  expect_net_chunk(2, "1", (size_t)256 << 10);  // 2 per CPU
  expect_net_chunk(3, "1", 172032);             // 3 per CPU: 512 KiB / 3, in whole pages
  expect_net_chunk(3, "48", (size_t)512 << 10);  // CPUs to spare: the same as one per CPU
}

// KOLO_NET_CHUNK_BYTES takes the rule's place, below it and above it (3
// pages: rounds whose chunks split unevenly among 3 ranks), and half the
// slots (2 MiB) bounds it: no cap at or above that.
TEST(NetChunk, FollowsTheUsersSetting) {
  SKIP_UNDER_TSAN();
  expect_net_chunk(3, "1", 12288, "12K");
  expect_net_chunk(2, "4", (size_t)1 << 20, "1M");
  expect_net_chunk(2, "4", 0, "4M");
}

// Ranks of one process meet without the network: no cap.
TEST(NetChunk, RanksOfOneProcessKeepHalfTheSlots) {
  NetEnv env;
  kt::ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (koloComm_t comm : w.comms) EXPECT_EQ(kt_comm_chunk_cap(comm), 0u);
}

TEST(NetFailingProcs, RankKilledDuringCollective) {
  SKIP_UNDER_TSAN();
  NetEnv env;
  const int kTimeoutMs = 2000;
  const double kBoundMs = kTimeoutMs + 3000;
  ScopedEnv timeout("KOLO_TIMEOUT_MS", std::to_string(kTimeoutMs));
  const int n = 3;
  const size_t count = (size_t)16 << 20;  // 64 MiB of float32 over TCP: long enough to die in
  auto res = run_children_with_id(n, [&](int rank, const koloUniqueId &id) {
    koloComm_t comm;
    koloResult_t rc = koloCommInitRank(&comm, n, id, rank);
    if (rc != koloSuccess) {
      std::fprintf(stderr, "init failed: %s\n", koloGetLastError(nullptr));
      return 2;
    }
    float one = 1, sum = 0;
    rc = koloAllReduce(&one, &sum, 1, koloFloat32, koloSum, comm, nullptr);
    if (rc != koloSuccess || sum != 3) {
      std::fprintf(stderr, "warm-up all-reduce failed: %s\n", koloGetLastError(comm));
      return 2;
    }
    std::vector<float> x(count, 1.0f);
    if (rank == 2)
      std::thread([] {
        usleep(50 * 1000);
        raise(SIGKILL);
      }).detach();
    double t0 = now_ms();
    rc = koloAllReduce(x.data(), x.data(), count, koloFloat32, koloSum, comm, nullptr);
    double ms = now_ms() - t0;
    std::string text = koloGetLastError(comm);
    std::fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, koloGetErrorString(rc), ms, text.c_str());
    int bad = 0;
    if (rc == koloSuccess) bad = 1;
    if (text.find("rank 2") == std::string::npos) bad = 1;
    if (ms > kBoundMs) bad = 1;
    koloCommDestroy(comm);
    x.clear();
    x.shrink_to_fit();
    bad |= leak_check();
    return bad ? 1 : 0;
  }, 60000);
  EXPECT_FALSE(res[2].exited) << res[2].describe();
  EXPECT_EQ(res[2].signal, SIGKILL) << res[2].describe();
  for (int r : {0, 1}) {
    EXPECT_TRUE(res[r].exited && res[r].code == 0) << "rank " << r << ": " << res[r].describe();
    std::printf("  %s", res[r].output.c_str());
  }
}

// ---- network namespaces ----------------------------------------------------

std::string source_dir() {
  std::string f = __FILE__;
  size_t slash = f.rfind('/');
  return slash == std::string::npos ? std::string(".") : f.substr(0, slash);
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

TEST(NetNs, TwoAndThreeNamespaces) {
  SKIP_UNDER_TSAN();
  std::string script = source_dir() + "/netns/run.sh";
  if (access(script.c_str(), X_OK) != 0) GTEST_SKIP() << "SKIP: " << script << " is not there";
  std::string cmd = script + " " + self_exe() + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd << " failed:\n" << out;
  std::printf("%s", out.c_str());
  if (out.compare(0, 6, "SKIP: ") == 0 || out.find("\nSKIP: ") != std::string::npos) GTEST_SKIP() << out;
}

TEST(NetNsRank, Run) {
  const char *mode = getenv("KOLO_NETNS_RANK");
  if (mode == nullptr || std::strcmp(mode, "1") != 0)
    GTEST_SKIP() << "one rank of tests/netns/run.sh (runs only with KOLO_NETNS_RANK=1)";
  koloComm_t comm = nullptr;
  ASSERT_EQ(koloCommInitFromEnv(&comm, nullptr), koloSuccess) << koloGetLastError(nullptr);
  int rank = -1, n = 0;
  ASSERT_EQ(koloCommUserRank(comm, &rank), koloSuccess);
  ASSERT_EQ(koloCommCount(comm, &n), koloSuccess);
  std::vector<CollCase> cases = net_grid(n, true);
  int failures = run_cases(comm, rank, cases);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(koloCommDestroy(comm), koloSuccess);
  if (failures == 0) std::printf("  rank %d of %d: %zu cases passed\n", rank, n, cases.size());
}

}  // namespace
