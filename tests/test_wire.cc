// test_wire.cc - the net transports' wire (transport/net_wire.h): round
// trips of the socket provider's hello, frames and control messages and of
// the ib provider's setup hello; every cut refused; peers of another
// version named by their version; and a fake peer of version 1 and one of
// a garbled magic at the socket provider's listener, refused with the right
// sentence while the real sender gets through.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "common/log.h"
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
             {[](kolo_ib_hello *x) { memset(x->dev, 'x', sizeof x->dev); }, "not terminated"}};
  for (const auto &c : bad) {
    kolo_ib_hello x = sample_ib(1);
    c.spoil(&x);
    kolo_encode_ib_hello(&x, b.data());
    EXPECT_EQ(kolo_decode_ib_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_NET_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, c.why)) << why;
  }
  kolo_encode_ib_hello(&h, b.data());
  b[4] = 3;  // version 3
  EXPECT_EQ(kolo_decode_ib_hello(b.data(), b.size(), &back, &version, why, sizeof why), KOLO_NET_WIRE_OTHER_VERSION);
  EXPECT_TRUE(contains(why, "speaks kolo wire version 3, this rank speaks 2")) << why;
  const uint8_t v1[8] = {0x31, 0x62, 0x69, 0x6b, 1, 0, 0, 0};  // "kib1" as version 1 sent it, then nqps
  EXPECT_EQ(kolo_decode_ib_hello(v1, sizeof v1, &back, &version, why, sizeof why), KOLO_NET_WIRE_OTHER_VERSION);
  EXPECT_EQ(version, 1u);
}

TEST(NetWire, SocketHelloFramesAndControl) {
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
  h.index = 5;
  kolo_encode_sock_hello(&h, b);
  EXPECT_EQ(kolo_decode_sock_hello(b, sizeof b, &back, &version, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "stream 5 of 4")) << why;

  uint8_t f[KOLO_SOCK_FRAME_BYTES];
  kolo_encode_sock_frame(f, 1000, 7);
  uint32_t len = 0;
  EXPECT_EQ(kolo_decode_sock_frame(f, 7, 1000, &len, why, sizeof why), KOLO_NET_WIRE_OK);
  EXPECT_EQ(len, 1000u);
  EXPECT_EQ(kolo_decode_sock_frame(f, 8, 1000, &len, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "out of step on its network connection (request 8, header of 7)")) << why;
  EXPECT_EQ(kolo_decode_sock_frame(f, 7, 999, &len, why, sizeof why), KOLO_NET_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "1000 bytes for a receive of 999")) << why;

  uint8_t c[KOLO_SOCK_CTRL_BYTES];
  kolo_encode_sock_ctrl(c, KOLO_NET_CTRL_STOP, 0x01020304u);
  uint32_t kind = 0, value = 0;
  kolo_decode_sock_ctrl(c, &kind, &value);
  EXPECT_EQ(kind, (uint32_t)KOLO_NET_CTRL_STOP);
  EXPECT_EQ(value, 0x01020304u);
  EXPECT_EQ(c[4], 0x04);
}

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Sends `bytes` on a new connection to the listener of lcomm (kept open
// until the accept has judged it).
int send_stray(void *lcomm, const void *bytes, size_t n) {
  sockaddr_storage addr{};
  socklen_t alen = sizeof addr;
  int lfd = *static_cast<int *>(lcomm);  // sock_listen starts with its fd
  if (getsockname(lfd, reinterpret_cast<sockaddr *>(&addr), &alen) != 0) return -1;
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
    int old = send_stray(lcomm, v1, sizeof v1);
    ASSERT_GE(old, 0);
    char junk[40] = "GET / HTTP/1.0\r\n\r\n";
    int garbage = send_stray(lcomm, junk, sizeof junk);
    ASSERT_GE(garbage, 0);
    ASSERT_EQ(net.connect(&h, 0, kolo_deadline(5000), 5000, "rank 1 (test)", &scomm, &eb), koloSuccess) << eb.msg;
    ASSERT_EQ(net.accept(lcomm, kolo_deadline(5000), 5000, "rank 0 (test)", &rcomm, &eb), koloSuccess) << eb.msg;
    net.close_listen(lcomm);
    close(old);
    close(garbage);
    // The pipe works: one control message across.
    int q = 0, got = 0;
    uint32_t kind = 0, value = 0;
    ASSERT_EQ(net.ctrl_send(scomm, KOLO_NET_CTRL_CREDIT, 42, &q, &eb), koloSuccess) << eb.msg;
    for (int i = 0; i < 2000 && !got; i++) {
      ASSERT_EQ(net.ctrl_recv(rcomm, &kind, &value, &got, &eb), koloSuccess) << eb.msg;
      if (!got) usleep(1000);
    }
    EXPECT_EQ(got, 1);
    EXPECT_EQ(value, 42u);
    net.close(scomm);
    net.close(rcomm);
  }
  kolo_log_reset();
  kolo_log_level();  // closes the log file
  std::string log = read_file(path);
  unlink(path.c_str());
  EXPECT_TRUE(contains(log, "while waiting for rank 0 (test): it speaks kolo wire version 1, this rank speaks 2"))
      << log;
  EXPECT_TRUE(contains(log, "it is not a kolo connection")) << log;
}

}  // namespace
