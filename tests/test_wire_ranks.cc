// test_wire_ranks.cc - what ranks tell each other beyond the bootstrap's
// own messages and the pipe setup (test_wire.cc), and the unique id users
// pass between processes: the koloUniqueId (transport/uid_codec.c).  A
// round trip through fixed little-endian bytes, and each garbled field
// refused with a sentence naming the id's sender.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "transport/bootstrap_wire.h"
}

namespace {

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

sockaddr_storage addr4(uint32_t host, int port) {
  sockaddr_storage a{};
  auto *v4 = reinterpret_cast<sockaddr_in *>(&a);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(host);
  v4->sin_port = htons((uint16_t)port);
  return a;
}

sockaddr_storage addr6(int port) {
  sockaddr_storage a{};
  auto *v6 = reinterpret_cast<sockaddr_in6 *>(&a);
  v6->sin6_family = AF_INET6;
  for (int i = 0; i < 16; i++) v6->sin6_addr.s6_addr[i] = (uint8_t)(0x20 + i);
  v6->sin6_port = htons((uint16_t)port);
  return a;
}

kolo_uid sample_uid(const sockaddr_storage &root) {
  kolo_uid u{};
  u.magic = KOLO_UID_MAGIC;
  u.job = 0x0123456789abcdefull;
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) u.secret[i] = (uint8_t)(0xa0 + i);
  u.root = root;
  return u;
}

uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

// ---- the unique id ---------------------------------------------------------------

TEST(UidWire, RoundTripInFixedBytes) {
  for (const sockaddr_storage &root : {addr4(0x0a000001, 4242), addr6(61000)}) {
    kolo_uid u = sample_uid(root), back;
    koloUniqueId id;
    kolo_uid_encode(&u, &id);
    const uint8_t *b = reinterpret_cast<const uint8_t *>(id.internal);
    EXPECT_EQ(std::string(id.internal, 4), "DIUk");  // "kUID", little-endian
    EXPECT_EQ(le32(b + 4), KOLO_WIRE_VERSION);
    EXPECT_EQ(le32(b + 8), (uint32_t)KOLO_UID_MAGIC);  // the uid's magic, low half first
    EXPECT_EQ(b[8 + 8 + 8 + KOLO_SECRET_BYTES], root.ss_family == AF_INET ? 4 : 6);
    EXPECT_EQ(b[8 + 8 + 8 + KOLO_SECRET_BYTES + 1], root.ss_family == AF_INET ? 4242 % 256 : 61000 % 256);
    kolo_errbuf eb{};
    ASSERT_EQ(kolo_uid_decode(&id, &back, &eb), koloSuccess) << eb.msg;
    EXPECT_EQ(back.magic, u.magic);
    EXPECT_EQ(back.job, u.job);
    EXPECT_EQ(memcmp(back.secret, u.secret, sizeof u.secret), 0);
    EXPECT_EQ(memcmp(&back.root, &u.root, sizeof back.root), 0);
  }
  kolo_uid u = sample_uid(addr4(0x7f000001, 1));
  u.magic = KOLO_UID_MAGIC_ROOT_AT_INIT;  // the id of KOLO_COMM_ID / the environment
  koloUniqueId id;
  kolo_uid_encode(&u, &id);
  kolo_uid back;
  char why[512];
  EXPECT_EQ(kolo_decode_unique_id(id.internal, sizeof id.internal, "the id", &back, why, sizeof why), KOLO_WIRE_OK);
  EXPECT_EQ(back.magic, KOLO_UID_MAGIC_ROOT_AT_INIT);
}

// Decodes id, expecting verdict v and a sentence holding part.
void expect_uid_refused(const koloUniqueId &id, int v, const std::string &part, size_t len = KOLO_UNIQUE_ID_BYTES) {
  kolo_uid back;
  char why[512] = "";
  EXPECT_EQ(kolo_decode_unique_id(id.internal, len, "rank 2's unique id", &back, why, sizeof why), v) << part;
  EXPECT_TRUE(contains(why, "rank 2's unique id " + part)) << why;
  kolo_errbuf eb{};
  EXPECT_EQ(kolo_uid_decode(&id, &back, &eb), len == KOLO_UNIQUE_ID_BYTES ? koloInvalidArgument : koloSuccess);
}

TEST(UidWire, RefusesOtherVersionsShortIdsAndGarbledFields) {
  kolo_uid u = sample_uid(addr4(0x0a000001, 4242));
  koloUniqueId good, id;
  kolo_uid_encode(&u, &good);
  expect_uid_refused(good, KOLO_WIRE_GARBLED, "is 127 bytes, a koloUniqueId has 128", 127);
  id = good;
  id.internal[4] = 5;  // version 5
  expect_uid_refused(id, KOLO_WIRE_OTHER_VERSION, "comes from a kolo of wire version 5, this process speaks 4");
  kolo_uid_decode(&good, &u, nullptr);
  memset(&id, 0, sizeof id);
  memcpy(id.internal, &u, 32);  // version 3's id: the struct's head, then a raw sockaddr_in6
  memcpy(id.internal + 32, &u.root, sizeof(sockaddr_in6));
  expect_uid_refused(id, KOLO_WIRE_GARBLED, "comes from a kolo of wire version 3 or older (a host-order struct)");
  id = good;
  id.internal[0] ^= 1;
  expect_uid_refused(id, KOLO_WIRE_GARBLED, "is not one from koloGetUniqueId (bad magic 0x6b554945)");
  id = good;
  id.internal[8] ^= 1;  // the uid's magic: neither kind
  expect_uid_refused(id, KOLO_WIRE_GARBLED, "is of no kind kolo makes");
  id = good;
  id.internal[8 + 8 + 8 + KOLO_SECRET_BYTES] = 5;  // address family 5
  expect_uid_refused(id, KOLO_WIRE_GARBLED, "holds no valid root address");
  kolo_uid no_port = sample_uid(addr4(0x0a000001, 0));
  kolo_uid_encode(&no_port, &id);
  expect_uid_refused(id, KOLO_WIRE_GARBLED, "holds no valid root address");
  id = good;
  id.internal[KOLO_UNIQUE_ID_BYTES - 1] = 1;
  expect_uid_refused(id, KOLO_WIRE_GARBLED, "has garbage in its unused bytes");
}

}  // namespace
