// test_wire_ranks.cc - what ranks tell each other beyond the bootstrap's
// own messages and the pipe setup (test_wire.cc), and the unique id users
// pass between processes: the koloUniqueId (transport/uid_codec.c), the
// init, split, shrink and CUDA records (core/comm_wire.h) and the fusion's
// (fusion/negotiate_wire.h).  For each: a round trip through fixed
// little-endian bytes, every cut and a longer copy refused, and each
// garbled field refused with a sentence naming the sender.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "core/comm_wire.h"
#include "core/proto_select.h"
#include "fusion/negotiate_wire.h"
#include "kolo_fusion.h"
#include "ring/algo.h"
#include "transport/bootstrap_wire.h"
}

namespace {

bool contains(const std::string &s, const std::string &part) { return s.find(part) != std::string::npos; }

using Decode = std::function<int(const uint8_t *, size_t, char *, size_t)>;

// Every shorter copy of a valid encoding, and one a byte longer, is refused
// with a sentence naming the sender (rank 5 here) and the expected length.
void expect_every_cut_refused(const std::vector<uint8_t> &b, const Decode &decode) {
  char why[512];
  std::vector<uint8_t> longer(b);
  longer.push_back(0);
  for (size_t n = 0; n <= longer.size(); n++) {
    if (n == b.size()) continue;
    why[0] = '\0';
    EXPECT_NE(decode(longer.data(), n, why, sizeof why), 0) << "cut to " << n;
    EXPECT_TRUE(contains(why, "rank 5 sent a")) << why;
    EXPECT_TRUE(contains(why, "kolo wire version " + std::to_string(KOLO_WIRE_VERSION) + " has " +
                                  std::to_string(b.size())))
        << why;
  }
}

// Each spoiled copy of a sample is refused with its sentence.
template <typename T>
void expect_refusals(const T &sample, std::vector<std::pair<std::function<void(T *)>, std::string>> bad,
                     const std::function<void(const T &, std::vector<uint8_t> *)> &encode, const Decode &decode,
                     const std::string &what) {
  for (const auto &c : bad) {
    T x = sample;
    c.first(&x);
    std::vector<uint8_t> b;
    encode(x, &b);
    char why[512] = "";
    EXPECT_NE(decode(b.data(), b.size(), why, sizeof why), 0) << c.second;
    EXPECT_TRUE(contains(why, "rank 5 sent a " + what + " " + c.second)) << why;
  }
}

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
  id.internal[4] = 6;  // version 6
  expect_uid_refused(id, KOLO_WIRE_OTHER_VERSION, "comes from a kolo of wire version 6, this process speaks 5");
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

// ---- the communicator's records -----------------------------------------------------------

kolo_comm_shape sample_shape() {
  return kolo_comm_shape{4,      8, koloMemCuda, 8192, 1u << 20, (1ull << 40), KOLO_ALGO_HIER, 0x0123456789abcdefull,
                         1u << KOLO_ALGO_HIER, 0x1122334455667788ull, 1u << KOLO_ALGO_TREE,
                         // KOLO_PROTO=allreduce:Simple;sendrecv:LL
                         KOLO_PROTO_OFF_LL | KOLO_PROTO_OFF_SIMPLE << (2 * KOLO_COLL_SEND) |
                             KOLO_PROTO_OFF_SIMPLE << (2 * KOLO_COLL_RECV),
                         KOLO_ALGO_AG_SET,  // KOLO_ALGO=allgather:ring,bruck
                         0x0000000012345678ull,  // KOLO_MIN_CHANNEL_BYTES
                         1u << KOLO_ALGO_TREE,   // KOLO_ALGO=reduce:tree
                         1, 96, 12,              // channels fixed; 96 CPUs for 12 ranks on the sender's host
                         0x0000000000123000ull}; // KOLO_NET_CHUNK_BYTES
}

void encode_shape(const kolo_comm_shape &s, std::vector<uint8_t> *b) {
  b->resize(KOLO_COMM_SHAPE_BYTES);
  kolo_encode_comm_shape(&s, b->data());
}

TEST(CommWire, ShapeRoundTripCutsAndRanges) {
  kolo_comm_shape s = sample_shape(), back{};
  std::vector<uint8_t> b;
  encode_shape(s, &b);
  EXPECT_EQ(b[0], 4);
  EXPECT_EQ(b[16 + 8 + 5], 1);  // bit 40 of the LL threshold, little-endian
  EXPECT_EQ(b[KOLO_COMM_SHAPE_BYTES - 8], 0xef);  // the schedule file's hash, little-endian, last
  EXPECT_EQ(b[KOLO_COMM_SHAPE_BYTES - 16], 0x88);  // the tuning file's, before it
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 24]), 0x123000u);  // KOLO_NET_CHUNK_BYTES, low half, before it
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 20]), 0u);         // and its high half
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 28]), 12u);  // the sender's host's ranks, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 32]), 96u);  // its CPUs, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 36]), 1u);   // whether the channel count was set, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 40]), s.reduce_allowed);  // KOLO_ALGO's reduce set, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 48]), 0x12345678u);  // KOLO_MIN_CHANNEL_BYTES, low half, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 44]), 0u);           // and its high half
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 52]), s.ag_allowed);  // KOLO_ALGO's all-gather set, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 56]), s.proto_off);  // KOLO_PROTO's record, before that
  EXPECT_EQ(le32(&b[KOLO_COMM_SHAPE_BYTES - 60]), s.bcast_allowed);  // KOLO_ALGO's broadcast set, before that
  EXPECT_EQ(KOLO_COMM_SHAPE_BYTES, 100);
  EXPECT_EQ(s.ag_allowed, 0x41u);
  EXPECT_EQ(s.proto_off, 0x2801u);
  char why[512] = "";
  ASSERT_EQ(kolo_decode_comm_shape(b.data(), b.size(), 5, &back, why, sizeof why), KOLO_COMM_WIRE_OK) << why;
  std::vector<uint8_t> again;
  encode_shape(back, &again);
  EXPECT_EQ(again, b);  // every field back, and the encoding is canonical (init compares bytes)
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kolo_decode_comm_shape(p, n, 5, &back, w, wl); };
  expect_every_cut_refused(b, d);
  using S = kolo_comm_shape;
  expect_refusals<S>(s,
                     {{[](S *x) { x->nchannels = 0; }, "with 0 channels (1..16)"},
                      {[](S *x) { x->nslots = 12; }, "with 12 slots (a power of two in 2..64)"},
                      {[](S *x) { x->memory = 2; }, "of memory kind 2"},
                      {[](S *x) { x->ll_slot_bytes = 1000; }, "with LL slots of 1000 bytes"},
                      {[](S *x) { x->slot_bytes = 4097; }, "with slots of 4097 bytes"},
                      {[](S *x) { x->ll_threshold = (1ull << 40) + 1; }, "with an LL threshold of"},
                      {[](S *x) { x->algo = KOLO_ALGO_TREE; }, "with algorithm 4"},
                      {[](S *x) { x->algo = KOLO_ALGO_BRUCK; }, "with algorithm 6"},
                      {[](S *x) { x->algo = KOLO_ALGO_DBTREE; }, "with algorithm 7"},
                      {[](S *x) { x->algo = KOLO_ALGO_NUM; }, "with algorithm 9"},
                      {[](S *x) { x->algo_allowed = 1u << KOLO_ALGO_TREE; }, "with allowed algorithms 0x10"},
                      {[](S *x) { x->algo_allowed = 1u << KOLO_ALGO_BRUCK; }, "with allowed algorithms 0x40"},
                      {[](S *x) { x->bcast_allowed = 1u << KOLO_ALGO_RD; }, "with allowed broadcast algorithms 0x4"},
                      {[](S *x) { x->bcast_allowed = 1u << KOLO_ALGO_BRUCK; }, "with allowed broadcast algorithms 0x40"},
                      {[](S *x) { x->ag_allowed = 1u << KOLO_ALGO_TREE; }, "with allowed all-gather algorithms 0x10"},
                      {[](S *x) { x->ag_allowed = 1u << KOLO_ALGO_DBTREE; }, "with allowed all-gather algorithms 0x80"},
                      {[](S *x) { x->ag_allowed = 1u << KOLO_ALGO_ONESHOT; }, "with allowed all-gather algorithms 0x100"},
                      {[](S *x) { x->bcast_allowed = 1u << KOLO_ALGO_ONESHOT; }, "with allowed broadcast algorithms 0x100"},
                      {[](S *x) { x->algo_allowed = 1u << KOLO_ALGO_NUM; }, "with allowed algorithms 0x200"},
                      {[](S *x) { x->reduce_allowed = 1u << KOLO_ALGO_RD; }, "with allowed reduce algorithms 0x4"},
                      {[](S *x) { x->algo_allowed = 3; }, "with algorithm 1 that its allowed set 0x3 does not force"},
                      {[](S *x) { x->min_channel_bytes = (1ull << 62) + 1; },
                       "with 4611686018427387905 bytes a channel (KOLO_MIN_CHANNEL_BYTES, 0..2^62)"},
                      {[](S *x) { x->channels_fixed = 2; }, "with channels fixed = 2 (0 or 1)"},
                      {[](S *x) { x->host_cpus = 0; }, "with 0 CPUs for 12 ranks on its host (1..2^20 each)"},
                      {[](S *x) { x->host_ranks = (1u << 20) + 1; }, "with 96 CPUs for 1048577 ranks on its host"},
                      {[](S *x) { x->net_chunk_bytes = 4097; },
                       "with chunks of 4097 bytes over the network (KOLO_NET_CHUNK_BYTES: 0, or a multiple of 4 KiB"},
                      {[](S *x) { x->net_chunk_bytes = (1ull << 30) + 4096; }, "with chunks of 1073745920 bytes"},
                      {[](S *x) { x->proto_off = 1u << 20; },
                       "with protocols left out 0x100000 that has bits beyond its collectives'"},
                      {[](S *x) { x->proto_off = 3; },
                       "with protocols left out 0x3 that leaves a collective neither LL nor Simple"},
                      {[](S *x) { x->proto_off = 0x2001; },
                       "with protocols left out 0x2001 that gives send and recv different protocols"}},
                     encode_shape, d, "communicator shape");
}

TEST(CommWire, SplitEntryRoundTripCutsAndRanges) {
  kolo_split_entry e{KOLO_SPLIT_NOCOLOR, -7, 5}, back{};
  std::vector<uint8_t> b(KOLO_SPLIT_ENTRY_BYTES);
  kolo_encode_split_entry(&e, b.data());
  EXPECT_EQ(le32(b.data()), 0xffffffffu);
  char why[512] = "";
  ASSERT_EQ(kolo_decode_split_entry(b.data(), b.size(), 5, &back, why, sizeof why), KOLO_COMM_WIRE_OK) << why;
  EXPECT_EQ(back.color, KOLO_SPLIT_NOCOLOR);
  EXPECT_EQ(back.key, -7);
  EXPECT_EQ(back.rank, 5);
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kolo_decode_split_entry(p, n, 5, &back, w, wl); };
  expect_every_cut_refused(b, d);
  using E = kolo_split_entry;
  auto enc = [](const E &x, std::vector<uint8_t> *o) {
    o->resize(KOLO_SPLIT_ENTRY_BYTES);
    kolo_encode_split_entry(&x, o->data());
  };
  expect_refusals<E>(e,
                     {{[](E *x) { x->color = -2; }, "of color -2"}, {[](E *x) { x->rank = 6; }, "for rank 6"}},
                     enc, d, "split entry");
}

TEST(CommWire, ShrinkMessageRoundTripCutsAndItsId) {
  kolo_shrink_msg m{}, back{};
  kolo_uid u = sample_uid(addr6(5000));
  kolo_uid_encode(&u, &m.id);
  m.digest = 0xfedcba9876543210ull;
  m.nsurvivors = 3;
  std::vector<uint8_t> b(KOLO_SHRINK_MSG_BYTES);
  kolo_encode_shrink_msg(&m, b.data());
  char why[512] = "";
  ASSERT_EQ(kolo_decode_shrink_msg(b.data(), b.size(), 5, 4, &back, why, sizeof why), KOLO_COMM_WIRE_OK) << why;
  EXPECT_EQ(memcmp(back.id.internal, m.id.internal, sizeof m.id.internal), 0);
  EXPECT_EQ(back.digest, m.digest);
  EXPECT_EQ(back.nsurvivors, 3);
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) {
    return kolo_decode_shrink_msg(p, n, 5, 4, &back, w, wl);
  };
  expect_every_cut_refused(b, d);
  using M = kolo_shrink_msg;
  auto enc = [](const M &x, std::vector<uint8_t> *o) {
    o->resize(KOLO_SHRINK_MSG_BYTES);
    kolo_encode_shrink_msg(&x, o->data());
  };
  expect_refusals<M>(m, {{[](M *x) { x->nsurvivors = 0; }, "for 0 survivors (1..4)"},
                         {[](M *x) { x->nsurvivors = 5; }, "for 5 survivors (1..4)"}},
                     enc, d, "shrink message");
  b[4] = 3;  // the id's version
  EXPECT_EQ(d(b.data(), b.size(), why, sizeof why), KOLO_COMM_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "the unique id rank 5 sent comes from a kolo of wire version 3")) << why;
}

TEST(CommWire, DeviceChoiceRoundTripCutsAndRanges) {
  kolo_device_choice c{0, 2, 4}, back{};
  std::vector<uint8_t> b(KOLO_DEVICE_CHOICE_BYTES);
  kolo_encode_device_choice(&c, b.data());
  char why[512] = "";
  ASSERT_EQ(kolo_decode_device_choice(b.data(), b.size(), 5, &back, why, sizeof why), KOLO_COMM_WIRE_OK) << why;
  EXPECT_EQ(back.err, 0);
  EXPECT_EQ(back.dev, 2);
  EXPECT_EQ(back.count, 4);
  kolo_device_choice failed{100, 7, 0};  // a failed choice of a device it does not have: told as it is
  kolo_encode_device_choice(&failed, b.data());
  EXPECT_EQ(kolo_decode_device_choice(b.data(), b.size(), 5, &back, why, sizeof why), KOLO_COMM_WIRE_OK) << why;
  kolo_encode_device_choice(&c, b.data());
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kolo_decode_device_choice(p, n, 5, &back, w, wl); };
  expect_every_cut_refused(b, d);
  using C = kolo_device_choice;
  auto enc = [](const C &x, std::vector<uint8_t> *o) {
    o->resize(KOLO_DEVICE_CHOICE_BYTES);
    kolo_encode_device_choice(&x, o->data());
  };
  expect_refusals<C>(c,
                     {{[](C *x) { x->err = -1; }, "with CUDA error -1 (0..65535)"},
                      {[](C *x) { x->count = 5000; }, "of 5000 devices (0..4096)"},
                      {[](C *x) { x->dev = -2; }, "naming device -2"},
                      {[](C *x) { x->dev = 4; }, "that selected device 4 of the 4 its process sees without an error"}},
                     enc, d, "CUDA device choice");
}

TEST(CommWire, DeviceRoomRoundTripCutsAndRanges) {
  kolo_device_room f{0, 1, 132, 2, 3, 1, 0x1234567890abcdefull}, back{};
  std::vector<uint8_t> b(KOLO_DEVICE_ROOM_BYTES);
  kolo_encode_device_room(&f, b.data());
  char why[512] = "";
  ASSERT_EQ(kolo_decode_device_room(b.data(), b.size(), 5, 8, &back, why, sizeof why), KOLO_COMM_WIRE_OK) << why;
  EXPECT_EQ(memcmp(&back, &f, sizeof f), 0);
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) {
    return kolo_decode_device_room(p, n, 5, 8, &back, w, wl);
  };
  expect_every_cut_refused(b, d);
  using F = kolo_device_room;
  auto enc = [](const F &x, std::vector<uint8_t> *o) {
    o->resize(KOLO_DEVICE_ROOM_BYTES);
    kolo_encode_device_room(&x, o->data());
  };
  expect_refusals<F>(f,
                     {{[](F *x) { x->err = 70000; }, "with CUDA error 70000"},
                      {[](F *x) { x->dev = -1; }, "naming device -1 (0..4095)"},
                      {[](F *x) { x->sms = -3; }, "of -3 SMs holding 2 blocks each"},
                      {[](F *x) { x->per_sm = 1 << 16; }, "of 132 SMs holding 65536 blocks each"},
                      {[](F *x) { x->sharing = 0; }, "of a device shared by 0 ranks of its process (1..8)"},
                      {[](F *x) { x->sharing = 9; }, "of a device shared by 9 ranks"},
                      {[](F *x) { x->mps = 2; }, "saying MPS is 2 (0 or 1)"}},
                     enc, d, "record of its CUDA device's room");
}

// ---- the fusion's records --------------------------------------------------------------------

kf_view sample_view() {
  kf_view v{};
  v.sig = kf_sig{(1ull << 35) + 3, 0x1122334455667788ull, 2, 10};
  v.rank = 5;
  v.ended = 1;
  v.nmarked = 7;
  v.first_unmarked = 3;
  v.stalled = 0;
  v.probe = -1;
  return v;
}

TEST(FusionWire, SignatureIsLittleEndian) {
  kf_sig s{0x0102030405060708ull, 0x1112131415161718ull, 0x21222324u, 0x31323334u};
  uint8_t b[KF_SIG_WIRE_BYTES];
  kf_encode_sig(&s, b);
  const uint8_t want[KF_SIG_WIRE_BYTES] = {8, 7, 6, 5, 4, 3, 2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
                                           0x24, 0x23, 0x22, 0x21, 0x34, 0x33, 0x32, 0x31};
  EXPECT_EQ(memcmp(b, want, sizeof want), 0);
}

// The hash every rank sends of its declarations is that of their values,
// not of their bytes in memory: pinned here.
TEST(FusionWire, DeclarationHashIsPinned) {
  kf_decl d[2] = {{1000, koloFloat32, KOLO_FUSION_ALLOCATE}, {(size_t)1 << 33, koloBfloat16, KOLO_FUSION_EXTERNAL}};
  uint64_t h = 1469598103934665603ull;
  for (const kf_decl &x : d) {
    uint64_t w[3] = {x.count, (uint64_t)x.dtype, (uint64_t)x.storage};
    for (int k = 0; k < 24; k++) h = (h ^ ((w[k / 8] >> (8 * (k % 8))) & 0xff)) * 1099511628211ull;
  }
  EXPECT_EQ(kf_decl_hash(d, 2), h);
  EXPECT_EQ(kf_decl_hash(d, 0), 1469598103934665603ull);
}

TEST(FusionWire, ViewRoundTripCutsAndRanges) {
  kf_view v = sample_view(), back{};
  std::vector<uint8_t> b(KF_VIEW_WIRE_BYTES);
  kf_encode_view(&v, b.data());
  char why[512] = "";
  ASSERT_EQ(kf_decode_view(b.data(), b.size(), 5, &back, why, sizeof why), KF_WIRE_OK) << why;
  EXPECT_EQ(memcmp(&back, &v, sizeof v), 0);
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kf_decode_view(p, n, 5, &back, w, wl); };
  expect_every_cut_refused(b, d);
  auto enc = [](const kf_view &x, std::vector<uint8_t> *o) {
    o->resize(KF_VIEW_WIRE_BYTES);
    kf_encode_view(&x, o->data());
  };
  expect_refusals<kf_view>(v,
                           {{[](kf_view *x) { x->sig.ntensors = (1u << 24) + 1; }, "of a step with 16777217 tensors"},
                            {[](kf_view *x) { x->rank = 4; }, "for rank 4"},
                            {[](kf_view *x) { x->ended = 2; }, "with flags ended 2"},
                            {[](kf_view *x) { x->probe = 2; }, "with flags ended 1, stalled 0, probe 2"},
                            {[](kf_view *x) { x->nmarked = 11; }, "marking 11 of 10 tensors, the first unmarked 3"},
                            {[](kf_view *x) { x->first_unmarked = 10; }, "marking 7 of 10 tensors, the first unmarked 10"}},
                           enc, d, "fusion step view");
}

TEST(FusionWire, DeclarationsAndOrderRoundTripCutsAndRanges) {
  std::vector<kf_decl> decl = {{1000, koloFloat32, KOLO_FUSION_ALLOCATE},
                               {((size_t)1 << 40) / 2, koloFloat16, KOLO_FUSION_EXTERNAL},
                               {1, koloInt8, KOLO_FUSION_ALLOCATE}};
  std::vector<uint8_t> b(3 * KF_DECL_WIRE_BYTES);
  kf_encode_decls(decl.data(), 3, b.data());
  std::vector<kf_decl> back(3);
  char why[512] = "";
  ASSERT_EQ(kf_decode_decls(b.data(), b.size(), 5, 3, back.data(), why, sizeof why), KF_WIRE_OK) << why;
  for (int i = 0; i < 3; i++) EXPECT_EQ(memcmp(&back[i], &decl[i], sizeof decl[i]), 0) << i;
  expect_every_cut_refused(b, [&](const uint8_t *p, size_t n, char *w, size_t wl) {
    return kf_decode_decls(p, n, 5, 3, back.data(), w, wl);
  });
  struct {
    kf_decl d;
    const char *why;
  } bad[] = {{{10, koloNumTypes, 0}, "whose tensor 1 is of datatype 12"},
             {{10, koloFloat32, 2}, "whose tensor 1 is of storage 2"},
             {{0, koloFloat32, 0}, "whose tensor 1 is of 0 elements"},
             {{((size_t)1 << 40) / 2 + 1, koloFloat16, 0}, "whose tensor 1 is of 549755813889 elements"}};
  for (const auto &c : bad) {
    std::vector<kf_decl> x = decl;
    x[1] = c.d;
    kf_encode_decls(x.data(), 3, b.data());
    EXPECT_EQ(kf_decode_decls(b.data(), b.size(), 5, 3, back.data(), why, sizeof why), KF_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, std::string("rank 5 sent a list of fusion declarations ") + c.why)) << why;
  }
  int order[4] = {2, 0, 3, 1}, got[4];
  std::vector<uint8_t> o(16);
  kf_encode_order(order, 4, o.data());
  ASSERT_EQ(kf_decode_order(o.data(), o.size(), 5, 4, got, why, sizeof why), KF_WIRE_OK) << why;
  EXPECT_EQ(memcmp(got, order, sizeof order), 0);
  expect_every_cut_refused(o, [&](const uint8_t *p, size_t n, char *w, size_t wl) {
    return kf_decode_order(p, n, 5, 4, got, w, wl);
  });
  for (int spoil : {4, -1, 2}) {  // out of range, negative, twice
    int x[4] = {2, 0, 3, spoil};
    kf_encode_order(x, 4, o.data());
    EXPECT_EQ(kf_decode_order(o.data(), o.size(), 5, 4, got, why, sizeof why), KF_WIRE_GARBLED);
    EXPECT_TRUE(contains(why, "rank 5 sent a ready order for the bucket rebuild that is not a permutation of 0..3"))
        << why;
  }
}

kf_decl_summary sample_summary() {
  kf_decl_summary s{};
  s.shape = kf_shape{1u << 20, 1u << 16, 1u << 22, 0.5, koloAvg, 1, 4, 0};
  s.hash = 0xa5a5a5a55a5a5a5aull;
  s.ntensors = 12;
  return s;
}

TEST(FusionWire, SummaryRoundTripCutsAndRanges) {
  kf_decl_summary s = sample_summary(), back;
  std::vector<uint8_t> b(KF_SUMMARY_WIRE_BYTES);
  kf_encode_summary(&s, b.data());
  char why[512] = "";
  ASSERT_EQ(kf_decode_summary(b.data(), b.size(), 5, &back, why, sizeof why), KF_WIRE_OK) << why;
  EXPECT_EQ(memcmp(&back, &s, sizeof s), 0);  // preScale's bits too; the pads zero
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kf_decode_summary(p, n, 5, &back, w, wl); };
  expect_every_cut_refused(b, d);
  using S = kf_decl_summary;
  auto enc = [](const S &x, std::vector<uint8_t> *o) {
    o->resize(KF_SUMMARY_WIRE_BYTES);
    kf_encode_summary(&x, o->data());
  };
  expect_refusals<S>(s,
                     {{[](S *x) { x->shape.bucket_bytes = 0; }, "with bucketBytes 0"},
                      {[](S *x) { x->shape.fusion_bytes = (1ull << 40) + 1; },
                       "with bucketBytes 1048576, firstBucketBytes 65536, fusionBytes 1099511627777"},
                      {[](S *x) { x->shape.prescale = NAN; }, "with a preScale that is not finite"},
                      {[](S *x) { x->shape.op = koloMax; }, "with op 2, rebuildBuckets 1"},
                      {[](S *x) { x->shape.rebuild = 3; }, "with op 4, rebuildBuckets 3"},
                      {[](S *x) { x->shape.min_buckets = 0; }, "with minBuckets 0"},
                      {[](S *x) { x->ntensors = -1; }, "declaring -1 tensors"}},
                     enc, d, "fusion summary");
}

TEST(FusionWire, DifferenceRoundTripCutsAndRanges) {
  kf_decl_diff diff{3, 1, {64, koloInt32, KOLO_FUSION_EXTERNAL}}, none{-1, 0, {0, 0, 0}}, back;
  std::vector<uint8_t> b(KF_DIFF_WIRE_BYTES);
  char why[512] = "";
  for (const kf_decl_diff &x : {diff, none}) {
    kf_encode_diff(&x, b.data());
    ASSERT_EQ(kf_decode_diff(b.data(), b.size(), 5, &back, why, sizeof why), KF_WIRE_OK) << why;
    EXPECT_EQ(memcmp(&back, &x, sizeof x), 0);
  }
  Decode d = [&](const uint8_t *p, size_t n, char *w, size_t wl) { return kf_decode_diff(p, n, 5, &back, w, wl); };
  expect_every_cut_refused(b, d);
  using D = kf_decl_diff;
  auto enc = [](const D &x, std::vector<uint8_t> *o) {
    o->resize(KF_DIFF_WIRE_BYTES);
    kf_encode_diff(&x, o->data());
  };
  expect_refusals<D>(diff,
                     {{[](D *x) { x->first_diff = -2; }, "at tensor -2 with has 1"},
                      {[](D *x) { x->has = 2; }, "at tensor 3 with has 2"},
                      {[](D *x) { x->first_diff = -1; }, "at tensor -1 with has 1"},
                      {[](D *x) { x->decl.dtype = -1; }, "whose tensor 3 is of datatype -1"}},
                     enc, d, "fusion declaration difference");
  kf_encode_diff(&none, b.data());
  b[8] = 1;  // a declaration where none is announced
  EXPECT_EQ(d(b.data(), b.size(), why, sizeof why), KF_WIRE_GARBLED);
  EXPECT_TRUE(contains(why, "rank 5 sent a fusion declaration difference with garbage in its unused declaration"))
      << why;
}

}  // namespace
