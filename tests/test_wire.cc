// test_wire.cc - the net transports' wire (transport/net_wire.h): round
// trips of the socket provider's hello, frames and control messages and of
// the ib provider's setup hello; every cut refused; peers of another
// version named by their version; and a fake peer of version 1 and one of
// a garbled magic at the socket provider's listener, refused with the right
// sentence while the real sender gets through.  And what ranks send each
// other to set up pipes (transport/conn_wire.h): the offer, the local, shm,
// p2p and net descriptors and the net handles: round trips, every cut and
// garbled field refused with a sentence naming the peer.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "common/log.h"
#include "transport/bootstrap_wire.h"
#include "transport/conn_wire.h"
#include "transport/net.h"
#include "transport/net_wire.h"
#include "transport/socket.h"
}

#include "util/proc_util.h"

namespace {

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

kolo_ib_hello sample_ib(uint32_t nqps) {
  kolo_ib_hello h;
  memset(&h, 0, sizeof h);
  h.nqps = nqps;
  for (int i = 0; i < KOLO_IB_TOKEN_BYTES; i++) h.token[i] = (uint8_t)(0xc0 + i);
  for (int q = 0; q < KOLO_IB_MAX_QPS; q++) h.qpn[q] = 0x100u + (uint32_t)q, h.psn[q] = 0xabcdefu - (uint32_t)q;
  for (int i = 0; i < 16; i++) h.gid[i] = (uint8_t)(i * 17);
  h.lid = 0x1234;
  h.link_layer = 2;
  h.mtu = 3;
  snprintf(h.dev, sizeof h.dev, "rxe0");
  h.in_addr = 0x7f0012340000ull, h.in_rkey = 0x5678, h.in_bytes = 16384;
  return h;
}

TEST(NetWire, IbHelloRoundTripCutsAndVersions) {
  kolo_ib_hello h = sample_ib(3), back;
  std::vector<uint8_t> b(KOLO_IB_HELLO_BYTES);
  kolo_encode_ib_hello(&h, b.data());
  uint32_t version = 0;
  char why[160] = "";
  ASSERT_EQ(kolo_decode_ib_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(memcmp(&back, &h, sizeof h), 0);  // every field, padding zeroed on both
  for (size_t n = 0; n < b.size(); n++)
    EXPECT_NE(kolo_decode_ib_hello(b.data(), n, &back, &version, why, sizeof why), KOLO_NET_WIRE_OK) << n;
  std::vector<uint8_t> longer = b;
  longer.push_back(0);
  EXPECT_EQ(kolo_decode_ib_hello(longer.data(), longer.size(), &back, &version, why, sizeof why),
            KOLO_NET_WIRE_GARBLED);
  struct {
    void (*spoil)(kolo_ib_hello *);
    const char *why;
  } bad[] = {{[](kolo_ib_hello *x) { x->nqps = 0; }, "offers 0 QPs"},
             {[](kolo_ib_hello *x) { x->nqps = KOLO_IB_MAX_QPS + 1; }, "offers 9 QPs"},
             {[](kolo_ib_hello *x) { x->mtu = 6; }, "MTU code 6"},
             {[](kolo_ib_hello *x) { x->link_layer = 3; }, "link layer 3"},
             {[](kolo_ib_hello *x) { memset(x->dev, 'x', sizeof x->dev); }, "not terminated"},
             {[](kolo_ib_hello *x) { x->in_bytes = 0; }, "control area of 0 bytes"}};
  for (const auto &c : bad) {
    kolo_ib_hello x = sample_ib(1);
    c.spoil(&x);
    kolo_encode_ib_hello(&x, b.data());
    EXPECT_EQ(kolo_decode_ib_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_NET_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, c.why)) << why;
  }
  kolo_encode_ib_hello(&h, b.data());
  b[4] = 2;  // version 2 (older)
  EXPECT_EQ(kolo_decode_ib_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_NET_WIRE_OTHER_VERSION);
  EXPECT_TRUE(contains(why, "speaks kolo wire version 2, this rank speaks 5")) << why;
  const uint8_t v1[8] = {0x31, 0x62, 0x69, 0x6b, 1, 0, 0, 0};  // "kib1" as version 1 sent it, then nqps
  EXPECT_EQ(kolo_decode_ib_hello(v1, sizeof v1, &back, &version, why, sizeof why), KOLO_NET_WIRE_OTHER_VERSION);
  EXPECT_EQ(version, 1u);
}

bool same_sig(const kolo_call_sig &a, const kolo_call_sig &b) {  // field by field: padding is no field
  return a.count == b.count && a.seq == b.seq && a.root == b.root && a.coll == b.coll && a.type == b.type &&
         a.op == b.op && a.set == b.set;
}

TEST(NetWire, SocketHelloFramesAndRecords) {
  kolo_sock_hello h = {2, 4, {0}}, back;
  memset(h.token, 0x5e, sizeof h.token);
  uint8_t b[KOLO_SOCK_HELLO_BYTES];
  kolo_encode_sock_hello(&h, b);
  EXPECT_EQ(b[0], 0x54);  // "kNET" little-endian: 'T' first
  uint32_t version = 0;
  char why[160] = "";
  ASSERT_EQ(kolo_decode_sock_hello(b, sizeof b, &back, &version, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(back.index, 2u);
  EXPECT_EQ(back.nstreams, 4u);
  EXPECT_EQ(memcmp(back.token, h.token, sizeof h.token), 0);
  for (size_t n = 0; n < sizeof b; n++)
    EXPECT_NE(kolo_decode_sock_hello(b, n, &back, &version, why, sizeof why), KOLO_NET_WIRE_OK) << n;
  h.index = 4;
  kolo_encode_sock_hello(&h, b);
  EXPECT_EQ(kolo_decode_sock_hello(b, sizeof b, &back, &version, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "stream 4 of 4")) << why;

  // Frames: each kind where it belongs, refused where it does not.
  uint8_t f[KOLO_SOCK_HDR_BYTES];
  kolo_sock_frame fr = {KOLO_SOCK_DATA, KOLO_SOCK_FLAG_SIG, 7, 1000, 0}, back_f;
  kolo_encode_sock_frame(f, &fr);
  ASSERT_EQ(kolo_decode_sock_frame(f, 0, 7, 1000, &back_f, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(back_f.kind, KOLO_SOCK_DATA);
  EXPECT_EQ(back_f.flags, KOLO_SOCK_FLAG_SIG);
  EXPECT_EQ(back_f.value, 7u);
  EXPECT_EQ(back_f.len, 1000u);
  EXPECT_EQ(kolo_sock_frame_extra(&back_f), (size_t)KOLO_NET_SIG_BYTES);
  EXPECT_EQ(kolo_decode_sock_frame(f, 0, 8, 1000, &back_f, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "out of step on its network connection (slice 7 came where 8 was due)")) << why;
  EXPECT_EQ(kolo_decode_sock_frame(f, 0, 7, 999, &back_f, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "slice of 1000 bytes for slots of 999")) << why;
  EXPECT_EQ(kolo_decode_sock_frame(f, 1, 7, 1000, &back_f, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "sent a slice to its sender")) << why;
  for (size_t i = 0; i < sizeof f; i++) {  // any flipped byte is caught
    uint8_t g[KOLO_SOCK_HDR_BYTES];
    memcpy(g, f, sizeof g);
    g[i] ^= 0x10;
    EXPECT_NE(kolo_decode_sock_frame(g, 0, 7, 1000, &back_f, why, sizeof why), KOLO_NET_WIRE_OK) << i;
  }
  kolo_sock_frame cr = {KOLO_SOCK_CREDIT, 0, 0x01020304u, 0, 0};
  kolo_encode_sock_frame(f, &cr);
  EXPECT_EQ(f[4], 0x04);  // the value, little-endian
  ASSERT_EQ(kolo_decode_sock_frame(f, 1, 0, 0, &back_f, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(back_f.value, 0x01020304u);
  EXPECT_EQ(kolo_decode_sock_frame(f, 0, 0, 0, &back_f, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "sent a credit to its receiver")) << why;
  kolo_sock_frame st = {KOLO_SOCK_STOP, KOLO_SOCK_FLAG_REPORT, 0x07000003u, 0, 0};
  kolo_encode_sock_frame(f, &st);
  for (int to_sender = 0; to_sender < 2; to_sender++) {
    ASSERT_EQ(kolo_decode_sock_frame(f, to_sender, 0, 0, &back_f, why, sizeof why), KOLO_NET_WIRE_OK) << why;
    EXPECT_EQ(kolo_sock_frame_extra(&back_f), (size_t)KOLO_NET_REPORT_BYTES);
  }

  // Padding: a slice's, after its signature, up to 64 bytes; no other kind's.
  for (unsigned pad = 0; pad <= KOLO_SOCK_PAD_MAX; pad += 8) {
    kolo_sock_frame pd = {KOLO_SOCK_DATA, (uint8_t)(pad % 16 ? KOLO_SOCK_FLAG_SIG : 0), 3, 4096, (uint8_t)pad};
    kolo_encode_sock_frame(f, &pd);
    ASSERT_EQ(kolo_decode_sock_frame(f, 0, 3, 4096, &back_f, why, sizeof why), KOLO_NET_WIRE_OK) << why;
    EXPECT_EQ(back_f.pad, pad);
    EXPECT_EQ(back_f.flags, pd.flags);
    EXPECT_EQ(kolo_sock_frame_extra(&back_f), pad + (pd.flags ? (size_t)KOLO_NET_SIG_BYTES : 0));
  }
  kolo_sock_frame over = {KOLO_SOCK_DATA, 0, 3, 4096, KOLO_SOCK_PAD_MAX + 8};
  kolo_encode_sock_frame(f, &over);
  EXPECT_EQ(kolo_decode_sock_frame(f, 0, 3, 4096, &back_f, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "padded with 72 bytes (at most 64)")) << why;
  kolo_sock_frame padded_credit = {KOLO_SOCK_CREDIT, 0, 5, 0, 8};
  kolo_encode_sock_frame(f, &padded_credit);
  EXPECT_EQ(kolo_decode_sock_frame(f, 1, 0, 0, &back_f, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "sent a credit with padding")) << why;

  // Signatures and reports: explicit bytes, and garbage refused.
  kolo_call_sig sig = {1ull << 40 | 5, 9, -1, 2, 7, 0xff, 1}, sback;
  uint8_t sb[KOLO_NET_SIG_BYTES];
  kolo_encode_call_sig(&sig, sb);
  ASSERT_EQ(kolo_decode_call_sig(sb, &sback, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_TRUE(same_sig(sig, sback));
  EXPECT_EQ(sb[5], 0x01);  // count, little-endian: bit 40
  sb[19] = 0;              // not marked set
  EXPECT_EQ(kolo_decode_call_sig(sb, &sback, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  kolo_call_mismatch m = {{1, 4}, {sig, sig}}, mback;
  m.sig[1].count = 3;
  uint8_t mb[KOLO_NET_REPORT_BYTES];
  kolo_encode_mismatch(&m, mb);
  ASSERT_EQ(kolo_decode_mismatch(mb, &mback, why, sizeof why), KOLO_NET_WIRE_OK) << why;
  EXPECT_EQ(m.rank[0], mback.rank[0]);
  EXPECT_EQ(m.rank[1], mback.rank[1]);
  EXPECT_TRUE(same_sig(m.sig[0], mback.sig[0]) && same_sig(m.sig[1], mback.sig[1]));
  mb[0] = 0xff, mb[1] = 0xff, mb[2] = 0xff, mb[3] = 0xff;  // rank -1
  EXPECT_EQ(kolo_decode_mismatch(mb, &mback, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "naming ranks -1 and 4")) << why;
}

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Sends `bytes` on a new connection to the listener of handle h (kept open
// until the accept has judged it).
int send_stray(const kolo_net_handle *h, const void *bytes, size_t n) {
  kolo_net_listen_info info{};
  char why[KOLO_ERR_LEN];
  if (kolo_decode_net_handle(h, KOLO_NET_HANDLE_SOCK_MAGIC, "test", &info, why, sizeof why) != KOLO_CONN_WIRE_OK)
    return -1;
  sockaddr_storage addr = info.addr;
  kolo_errbuf eb{};
  int fd = -1;
  if (kolo_sock_connect(&addr, kolo_deadline(2000), 2000, "listener", &eb, &fd) != koloSuccess) return -1;
  if (kolo_sock_send_all(fd, bytes, n, kolo_deadline(2000), "listener", &eb) != koloSuccess) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(NetWire, SocketListenerRefusesVersion1AndGarbageByName) {
  std::string path = "/tmp/kolo-netwire-log-" + std::to_string(getpid());
  unlink(path.c_str());
  {
    kt::ScopedEnv level("KOLO_DEBUG", "WARN"), file("KOLO_DEBUG_FILE", path), streams("KOLO_SOCKET_NSTREAMS", "1");
    kolo_log_reset();
    const kolo_net_provider &net = kolo_net_socket;
    kolo_errbuf eb{};
    sockaddr_storage local{};
    auto *v4 = reinterpret_cast<sockaddr_in *>(&local);
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    kolo_net_handle h;
    void *lcomm = nullptr, *scomm = nullptr, *rcomm = nullptr;
    ASSERT_EQ(net.listen(&local, 0, &h, &lcomm, &eb), koloSuccess) << eb.msg;
    // Version 1's hello: "knet", index 0, 1 stream, a token (host order).
    uint32_t v1[7] = {0x6b6e6574u, 0, 1, 0, 0, 0, 0};
    int old = send_stray(&h, v1, sizeof v1);
    ASSERT_GE(old, 0);
    char junk[40] = "GET / HTTP/1.0\r\n\r\n";
    int garbage = send_stray(&h, junk, sizeof junk);
    ASSERT_GE(garbage, 0);
    ASSERT_EQ(net.connect(&h, 0, kolo_deadline(5000), 5000, "rank 1 (test)", &scomm, &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(net.accept(lcomm, kolo_deadline(5000), 5000, "rank 0 (test)", &rcomm, &eb), koloSuccess) << eb.msg;
    net.close_listen(lcomm);
    close(old);
    close(garbage);
    // The pipe works: a credit across.
    char ring[64];
    uint32_t credited = 0;
    kolo_net_ring sr = {ring, 1, sizeof ring, 0}, rr = sr;
    kolo_net_sink sink{};
    sink.ctx = &credited;
    sink.slice = [](void *, uint32_t, uint32_t, const kolo_call_sig *) {};
    sink.credit = [](void *ctx, uint32_t head) { *static_cast<uint32_t *>(ctx) = head; };
    sink.stop = [](void *, uint32_t, const kolo_call_mismatch *) {};
    ASSERT_EQ(net.bind(scomm, &sr, &sink, &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(net.bind(rcomm, &rr, &sink, &eb), koloSuccess) << eb.msg;
    int q = 0;
    ASSERT_EQ(net.send_credit(rcomm, 42, &q, &eb), koloSuccess) << eb.msg;
    for (int i = 0; i < 2000 && credited != 42; i++) {
      ASSERT_EQ(net.progress(rcomm, KOLO_NET_OUT, &eb), koloSuccess) << eb.msg;
      ASSERT_EQ(net.progress(scomm, KOLO_NET_IN, &eb), koloSuccess) << eb.msg;
      if (credited != 42) usleep(1000);
    }
    EXPECT_EQ(credited, 42u);
    net.close(scomm);
    net.close(rcomm);
  }
  kolo_log_reset();
  kolo_log_level();  // closes the log file
  std::string log = read_file(path);
  unlink(path.c_str());
  EXPECT_TRUE(contains(log, "refused a network connection (socket) from 127.0.0.1:"))
      << log;
  EXPECT_TRUE(contains(log, ": it speaks kolo wire version 1, this rank speaks 5")) << log;
  EXPECT_TRUE(contains(log, "it is not a kolo connection")) << log;
}


// ---- pipe offers, transport descriptors and net handles (conn_wire.h) ----------

using Decode = std::function<int(const uint8_t *, size_t, char *, size_t)>;

// Every shorter (and one longer) copy of a valid encoding is refused with a
// sentence naming the peer (rank 5 in these tests).
void expect_every_cut_refused(const std::vector<uint8_t> &b, const Decode &decode) {
  char why[512];
  for (size_t n = 0; n < b.size(); n++) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + (long)n);
    why[0] = '\0';
    EXPECT_EQ(decode(cut.data(), n, why, sizeof why), KOLO_CONN_WIRE_GARBLED) << "cut to " << n;
    EXPECT_TRUE(contains(why, "rank 5 sent a")) << why;
  }
  std::vector<uint8_t> longer(b);
  longer.push_back(0);
  EXPECT_EQ(decode(longer.data(), longer.size(), why, sizeof why), KOLO_CONN_WIRE_GARBLED);
}

// A byte set in a descriptor's padding is refused too.
void expect_padding_checked(std::vector<uint8_t> b, size_t used, const Decode &decode) {
  char why[512] = "";
  b[used] = 1;
  EXPECT_EQ(decode(b.data(), b.size(), why, sizeof why), KOLO_CONN_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "rank 5 sent a")) << why;
  EXPECT_TRUE(contains(why, "garbage in its unused bytes")) << why;
}

TEST(ConnWire, OfferRoundTripCutsAndTransportInRange) {
  kolo_conn_offer o{}, back{};
  o.transport = 3;
  o.slot_bytes = (1ull << 33) + 7;  // wider than 32 bits: nothing is cut on the way
  o.nslots = 8;
  o.ll_slot_bytes = 4096;
  for (int i = 0; i < KOLO_CONN_DESC_BYTES; i++) o.desc[i] = (uint8_t)(i * 3);
  std::vector<uint8_t> b(KOLO_CONN_OFFER_BYTES);
  kolo_encode_conn_offer(&o, b.data());
  EXPECT_EQ(b[0], 3);  // little-endian
  EXPECT_EQ(b[4 + 4], 2);  // bit 33 of slot_bytes
  char why[512] = "";
  ASSERT_EQ(kolo_decode_conn_offer(b.data(), b.size(), 4, 5, &back, why, sizeof why), KOLO_CONN_WIRE_OK) << why;
  EXPECT_EQ(back.transport, 3u);
  EXPECT_EQ(back.slot_bytes, o.slot_bytes);
  EXPECT_EQ(back.nslots, 8u);
  EXPECT_EQ(back.ll_slot_bytes, 4096u);
  EXPECT_EQ(memcmp(back.desc, o.desc, sizeof o.desc), 0);
  expect_every_cut_refused(b, [&](const uint8_t *p, size_t n, char *w, size_t wl) {
    return kolo_decode_conn_offer(p, n, 4, 5, &back, w, wl);
  });
  b[0] = 4;
  EXPECT_EQ(kolo_decode_conn_offer(b.data(), b.size(), 4, 5, &back, why, sizeof why), KOLO_CONN_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "rank 5 offered a pipe over transport 4, which is none of kolo's 4")) << why;
}

TEST(ConnWire, LocalDescRoundTripCutsAndNull) {
  std::vector<uint8_t> b(KOLO_CONN_DESC_BYTES);
  kolo_encode_local_desc(0x00007f0012345000ull, b.data());
  uint64_t addr = 0;
  char why[512] = "";
  ASSERT_EQ(kolo_decode_local_desc(b.data(), b.size(), 5, &addr, why, sizeof why), KOLO_CONN_WIRE_OK) << why;
  EXPECT_EQ(addr, 0x00007f0012345000ull);
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kolo_decode_local_desc(p, n, 5, &addr, w, wl); };
  expect_every_cut_refused(b, d);
  expect_padding_checked(b, 8, d);
  kolo_encode_local_desc(0, b.data());
  EXPECT_EQ(kolo_decode_local_desc(b.data(), b.size(), 5, &addr, why, sizeof why), KOLO_CONN_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "rank 5 sent a local pipe descriptor with a null address")) << why;
}

TEST(ConnWire, ShmDescRoundTripCutsAndForeignNames) {
  const char *name = "/kolo-00000000deadbeef-4242-1-0-1000";
  std::vector<uint8_t> b(KOLO_CONN_DESC_BYTES);
  kolo_encode_shm_desc(name, b.data());
  char back[KOLO_SHM_NAME_BYTES], why[512] = "";
  ASSERT_EQ(kolo_decode_shm_desc(b.data(), b.size(), 5, back, why, sizeof why), KOLO_CONN_WIRE_OK) << why;
  EXPECT_STREQ(back, name);
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kolo_decode_shm_desc(p, n, 5, back, w, wl); };
  expect_every_cut_refused(b, d);
  expect_padding_checked(b, 1 + strlen(name), d);
  struct {
    const char *name;
    const char *why;
  } bad[] = {{"/etc-passwd", "is not kolo's"}, {"/kolo-../../etc/passwd", "holds a '/'"}, {"", "is not kolo's"}};
  for (const auto &c : bad) {
    kolo_encode_shm_desc(c.name, b.data());
    EXPECT_EQ(kolo_decode_shm_desc(b.data(), b.size(), 5, back, why, sizeof why), KOLO_CONN_WIRE_GARBLED) << c.name;
    EXPECT_TRUE(contains(why, "rank 5 sent a shm pipe descriptor")) << why;
    EXPECT_TRUE(contains(why, c.why)) << why;
    EXPECT_STREQ(back, "");
  }
  kolo_encode_shm_desc(name, b.data());
  b[1 + 10] = 0;  // a NUL inside the name, past "/kolo-"
  EXPECT_EQ(kolo_decode_shm_desc(b.data(), b.size(), 5, back, why, sizeof why), KOLO_CONN_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "holds a NUL")) << why;
  b[0] = KOLO_SHM_NAME_BYTES;  // longer than a connector's name
  EXPECT_EQ(kolo_decode_shm_desc(b.data(), b.size(), 5, back, why, sizeof why), KOLO_CONN_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "too long")) << why;
}

kolo_p2p_desc sample_p2p(uint32_t mode) {
  kolo_p2p_desc d{};
  d.mode = mode;
  d.dev = 3;
  d.bytes = 4096 + 8 * 65536;
  d.share = mode == KOLO_P2P_LOCAL ? 0x00007f00aabbcc00ull : 0;
  for (int i = 0; i < KOLO_P2P_IPC_BYTES; i++) d.ipc[i] = mode == KOLO_P2P_IPC ? (uint8_t)(0xf0 ^ i) : 0;
  return d;
}

TEST(ConnWire, P2pDescRoundTripCutsAndBadFields) {
  for (uint32_t mode : {(uint32_t)KOLO_P2P_LOCAL, (uint32_t)KOLO_P2P_IPC}) {
    kolo_p2p_desc d = sample_p2p(mode), back{};
    std::vector<uint8_t> b(KOLO_CONN_DESC_BYTES);
    kolo_encode_p2p_desc(&d, b.data());
    char why[512] = "";
    ASSERT_EQ(kolo_decode_p2p_desc(b.data(), b.size(), 5, &back, why, sizeof why), KOLO_CONN_WIRE_OK) << why;
    EXPECT_EQ(back.mode, mode);
    EXPECT_EQ(back.dev, 3);
    EXPECT_EQ(back.bytes, d.bytes);
    EXPECT_EQ(back.share, d.share);
    EXPECT_EQ(memcmp(back.ipc, d.ipc, sizeof d.ipc), 0);  // the runtime's opaque bytes, unchanged
    Decode dec = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kolo_decode_p2p_desc(p, n, 5, &back, w, wl); };
    expect_every_cut_refused(b, dec);
    expect_padding_checked(b, 4 + 4 + 8 + 8 + KOLO_P2P_IPC_BYTES, dec);
  }
  struct {
    void (*spoil)(kolo_p2p_desc *);
    const char *why;
  } bad[] = {{[](kolo_p2p_desc *x) { x->mode = 7; }, "of an unknown mode (mode 7"},
             {[](kolo_p2p_desc *x) { x->dev = -1; }, "naming no device ordinal"},
             {[](kolo_p2p_desc *x) { x->dev = KOLO_P2P_MAX_DEV; }, "naming no device ordinal"},
             {[](kolo_p2p_desc *x) { x->bytes = 0; }, "of an empty block"},
             {[](kolo_p2p_desc *x) { x->share = 0; }, "of a pointer that is null"},
             {[](kolo_p2p_desc *x) { x->mode = KOLO_P2P_IPC; }, "of an IPC handle with a pointer"}};
  for (const auto &c : bad) {
    kolo_p2p_desc x = sample_p2p(KOLO_P2P_LOCAL), back{};
    c.spoil(&x);
    std::vector<uint8_t> b(KOLO_CONN_DESC_BYTES);
    kolo_encode_p2p_desc(&x, b.data());
    char why[512] = "";
    EXPECT_EQ(kolo_decode_p2p_desc(b.data(), b.size(), 5, &back, why, sizeof why), KOLO_CONN_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, "rank 5 sent a device pipe descriptor")) << why;
    EXPECT_TRUE(contains(why, c.why)) << why;
  }
}

TEST(ConnWire, NetDescRoundTripCutsAndProviderName) {
  kolo_net_handle h, back;
  for (int i = 0; i < KOLO_NET_HANDLE_BYTES; i++) h.bytes[i] = (uint8_t)(i + 1);
  std::vector<uint8_t> b(KOLO_CONN_DESC_BYTES);
  kolo_encode_net_desc(&h, "socket", b.data());
  char name[KOLO_NET_PROVIDER_BYTES], why[512] = "";
  ASSERT_EQ(kolo_decode_net_desc(b.data(), b.size(), 5, &back, name, why, sizeof why), KOLO_CONN_WIRE_OK) << why;
  EXPECT_EQ(memcmp(back.bytes, h.bytes, sizeof h.bytes), 0);
  EXPECT_STREQ(name, "socket");
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) {
    return kolo_decode_net_desc(p, n, 5, &back, name, w, wl);
  };
  expect_every_cut_refused(b, d);
  expect_padding_checked(b, KOLO_NET_HANDLE_BYTES + KOLO_NET_PROVIDER_BYTES, d);
  for (auto spoil : {std::function<void(uint8_t *)>([](uint8_t *p) { memset(p, 'x', KOLO_NET_PROVIDER_BYTES); }),
                     std::function<void(uint8_t *)>([](uint8_t *p) { p[0] = '\0'; }),
                     std::function<void(uint8_t *)>([](uint8_t *p) { p[1] = '\n'; })}) {
    std::vector<uint8_t> x(b);
    spoil(x.data() + KOLO_NET_HANDLE_BYTES);
    EXPECT_EQ(kolo_decode_net_desc(x.data(), x.size(), 5, &back, name, why, sizeof why), KOLO_CONN_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, "rank 5 sent a network pipe descriptor whose provider name is empty, unterminated or "
                              "not printable")) << why;
  }
}

kolo_net_listen_info sample_listen(uint32_t magic, int family) {
  kolo_net_listen_info l{};
  l.magic = magic;
  if (family == AF_INET6) {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&l.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(41234);
    for (int i = 0; i < 16; i++) a->sin6_addr.s6_addr[i] = (uint8_t)(0x20 + i);
  } else {
    auto *a = reinterpret_cast<sockaddr_in *>(&l.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(41234);
    a->sin_addr.s_addr = htonl(0x0a000002u);
  }
  for (int i = 0; i < KOLO_NET_TOKEN_BYTES; i++) l.token[i] = (uint8_t)(0x90 + i);
  l.nconns = 4;
  return l;
}

TEST(ConnWire, NetHandleRoundTripAndGarbledFields) {
  for (uint32_t magic : {KOLO_NET_HANDLE_SOCK_MAGIC, KOLO_NET_HANDLE_IB_MAGIC}) {
    for (int family : {AF_INET, AF_INET6}) {
      kolo_net_listen_info l = sample_listen(magic, family), back{};
      kolo_net_handle h;
      kolo_encode_net_handle(&l, &h);
      char why[512] = "";
      ASSERT_EQ(kolo_decode_net_handle(&h, magic, "rank 5 (test)", &back, why, sizeof why), KOLO_CONN_WIRE_OK) << why;
      EXPECT_EQ(back.magic, magic);
      EXPECT_EQ(back.addr.ss_family, family);
      EXPECT_EQ(kolo_addr_port(&back.addr), 41234);
      EXPECT_EQ(memcmp(back.token, l.token, sizeof l.token), 0);
      EXPECT_EQ(back.nconns, 4u);
      char a[80], b[80];
      kolo_addr_str(&l.addr, a, sizeof a);
      kolo_addr_str(&back.addr, b, sizeof b);
      EXPECT_STREQ(a, b);
    }
  }
  struct {
    void (*spoil)(kolo_net_handle *);
    const char *why;
  } bad[] = {{[](kolo_net_handle *x) { x->bytes[0] ^= 0xff; }, "is no kolo network handle"},
             {[](kolo_net_handle *x) { x->bytes[4] = 5; }, "neither IPv4 nor IPv6"},
             {[](kolo_net_handle *x) { x->bytes[4 + KOLO_ADDR_WIRE_BYTES + 16] = 0; }, "asks for 0 connections (1..8)"},
             {[](kolo_net_handle *x) { x->bytes[4 + KOLO_ADDR_WIRE_BYTES + 16] = 9; }, "asks for 9 connections"},
             {[](kolo_net_handle *x) { x->bytes[KOLO_NET_HANDLE_BYTES - 1] = 1; }, "garbage in its unused bytes"}};
  for (const auto &c : bad) {
    kolo_net_listen_info l = sample_listen(KOLO_NET_HANDLE_SOCK_MAGIC, AF_INET), back{};
    kolo_net_handle h;
    kolo_encode_net_handle(&l, &h);
    c.spoil(&h);
    char why[512] = "";
    EXPECT_EQ(kolo_decode_net_handle(&h, KOLO_NET_HANDLE_SOCK_MAGIC, "rank 5 (test)", &back, why, sizeof why),
              KOLO_CONN_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, "rank 5 (test)'s network handle")) << why;
    EXPECT_TRUE(contains(why, c.why)) << why;
  }
  kolo_net_listen_info l = sample_listen(KOLO_NET_HANDLE_IB_MAGIC, AF_INET), back{};
  kolo_net_handle h;
  kolo_encode_net_handle(&l, &h);
  char why[512] = "";
  EXPECT_EQ(kolo_decode_net_handle(&h, KOLO_NET_HANDLE_SOCK_MAGIC, "rank 5 (test)", &back, why, sizeof why),
            KOLO_CONN_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "is the ib provider's, this rank uses socket")) << why;
}

// The socket provider connects through an encoded handle, and refuses a
// garbled one with the decoder's sentence before it connects anywhere.
TEST(ConnWire, SocketProviderRefusesAGarbledHandle) {
  const kolo_net_provider &net = kolo_net_socket;
  kolo_errbuf eb{};
  sockaddr_storage local{};
  auto *v4 = reinterpret_cast<sockaddr_in *>(&local);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  kolo_net_handle h;
  void *lcomm = nullptr, *scomm = nullptr;
  ASSERT_EQ(net.listen(&local, 0, &h, &lcomm, &eb), koloSuccess) << eb.msg;
  kolo_net_listen_info l{};
  char why[512] = "";
  ASSERT_EQ(kolo_decode_net_handle(&h, KOLO_NET_HANDLE_SOCK_MAGIC, "me", &l, why, sizeof why), KOLO_CONN_WIRE_OK)
      << why;
  EXPECT_EQ(l.addr.ss_family, AF_INET);
  EXPECT_NE(kolo_addr_port(&l.addr), 0);
  h.bytes[4 + KOLO_ADDR_WIRE_BYTES + 16] = 0;  // no streams
  EXPECT_EQ(net.connect(&h, 0, kolo_deadline(2000), 2000, "rank 5 (test)", &scomm, &eb), koloRemoteError);
  EXPECT_TRUE(contains(eb.msg, "rank 5 (test)'s network handle asks for 0 connections")) << eb.msg;
  net.close_listen(lcomm);
}

}  // namespace
