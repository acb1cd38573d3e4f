// test_ll_format.cc - the LL protocol's line format (kernels/cuda/ll_format.h),
// the part of the LL protocol that runs the same on the host: slice and line
// sizes, which payload bytes go in which line, flags, and packing then
// unpacking byte strings of every length 0..100 at every offset 0..7 (the
// way the CUDA executor moves a slice line by line through user buffers of
// any alignment).  Needs no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
#include "kernels/cuda/ll_format.h"
}

namespace {

constexpr size_t kMaxLen = 100;
constexpr size_t kGuard = 16;
constexpr unsigned char kPoison = 0xA5;

std::vector<unsigned char> random_bytes(std::mt19937 &rng, size_t n) {
  std::vector<unsigned char> v(n);
  for (auto &b : v) b = (unsigned char)(rng() & 0xff);
  return v;
}

TEST(LLFormat, LineLayoutIsData0FlagData1Flag) {
  static_assert(sizeof(kolo_ll_line) == KOLO_LL_LINE_BYTES, "a line is 16 bytes");
  const uint64_t payload = 0x8877665544332211ull;
  const uint32_t flag = 0xdeadbeefu;
  kolo_ll_line l = kolo_ll_make_line(payload, flag);
  uint32_t w[4];
  std::memcpy(w, &l, sizeof w);
  EXPECT_EQ(w[0], 0x44332211u);
  EXPECT_EQ(w[1], flag);
  EXPECT_EQ(w[2], 0x88776655u);
  EXPECT_EQ(w[3], flag);
  // The device stores the line as two 64-bit halves: the same 16 bytes.
  uint64_t halves[2] = {kolo_ll_lo(payload, flag), kolo_ll_hi(payload, flag)};
  EXPECT_EQ(std::memcmp(halves, &l, sizeof l), 0);
  EXPECT_EQ(kolo_ll_payload(halves[0], halves[1]), payload);
  EXPECT_TRUE(kolo_ll_ready(halves[0], halves[1], flag));
}

TEST(LLFormat, PayloadBytesInOrder) {
  // Byte j of the line's 8 payload bytes is bits 8j..8j+7 of the payload, so
  // a little-endian 8-byte load of the user buffer is the payload.
  const unsigned char bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint64_t v = kolo_ll_pack_bytes(bytes, 8), loaded;
  std::memcpy(&loaded, bytes, 8);
  EXPECT_EQ(v, loaded);
  kolo_ll_line l = kolo_ll_make_line(v, 1);
  EXPECT_EQ(std::memcmp(&l.data0, bytes, 4), 0);
  EXPECT_EQ(std::memcmp(&l.data1, bytes + 4, 4), 0);
  // Fewer bytes: zero padded.
  EXPECT_EQ(kolo_ll_pack_bytes(bytes, 3), 0x030201ull);
  EXPECT_EQ(kolo_ll_pack_bytes(bytes, 0), 0ull);
}

TEST(LLFormat, ElementsOfEverySize) {
  // One 8-byte element is split in two 4-byte halves.
  double d = -1234.5678;
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  kolo_ll_line l;
  kolo_ll_pack(&l, &d, 8, 7);
  EXPECT_EQ(l.data0, (uint32_t)bits);
  EXPECT_EQ(l.data1, (uint32_t)(bits >> 32));
  // Two 4-byte elements, four 2-byte, eight 1-byte: in order.
  uint32_t w[2] = {0x11111111u, 0x22222222u};
  kolo_ll_pack(&l, w, 8, 7);
  EXPECT_EQ(l.data0, w[0]);
  EXPECT_EQ(l.data1, w[1]);
  uint16_t h[4] = {0xa1a1, 0xb2b2, 0xc3c3, 0xd4d4};
  kolo_ll_pack(&l, h, 8, 7);
  EXPECT_EQ(l.data0, 0xb2b2a1a1u);
  EXPECT_EQ(l.data1, 0xd4d4c3c3u);
  // Three 2-byte elements: the last quarter is padding.
  kolo_ll_pack(&l, h, 6, 7);
  EXPECT_EQ(l.data1, 0x0000c3c3u);
}

TEST(LLFormat, LineCountsAndLineBytes) {
  EXPECT_EQ(kolo_ll_lines(0), 0u);
  for (size_t n = 0; n <= 1000; n++) {
    size_t lines = kolo_ll_lines(n);
    EXPECT_EQ(lines, (n + 7) / 8) << n;
    size_t sum = 0;
    for (size_t i = 0; i < lines; i++) {
      unsigned nb = kolo_ll_line_bytes(n, i);
      EXPECT_GE(nb, 1u);
      EXPECT_LE(nb, 8u);
      if (i + 1 < lines) {
        EXPECT_EQ(nb, 8u) << "only the last line is short";
      }
      sum += nb;
    }
    EXPECT_EQ(sum, n);
    EXPECT_EQ(kolo_ll_line_bytes(n, lines), 0u) << "nothing past the last line";
  }
}

TEST(LLFormat, SliceSizesFitTheSlot) {
  for (size_t slot = 16; slot <= 64 * 1024; slot += 16) {
    EXPECT_EQ(kolo_ll_slice_bytes(slot), slot / 2);
    for (size_t esz : {1, 2, 4, 8}) {
      size_t elems = kolo_ll_slice_elems(slot, esz);
      EXPECT_EQ(elems, slot / 2 / esz);
      // A full slice never takes more lines than the slot holds.
      EXPECT_LE(kolo_ll_lines(elems * esz) * KOLO_LL_LINE_BYTES, slot) << slot << " " << esz;
      // Every slice but possibly the last of a step is whole lines: the
      // next slice's user bytes start at a multiple of 8 from the chunk.
      EXPECT_EQ(elems * esz % KOLO_LL_LINE_PAYLOAD, 0u) << slot << " " << esz;
    }
  }
}

TEST(LLFormat, Flags) {
  EXPECT_EQ(kolo_ll_flag(0), 1u);
  EXPECT_EQ(kolo_ll_flag(41), 42u);
  EXPECT_EQ(kolo_ll_flag(0xfffffffeu), 0xffffffffu);
  EXPECT_EQ(kolo_ll_flag(0xffffffffu), 1u);  // never 0, what a zeroed line holds (see ll_format.h)
  const uint32_t nslots = 8;
  for (uint32_t step : {0u, 1u, 7u, 8u, 1000u, 0x7fffffffu, 0xfffffff0u, 0xffffffffu}) {
    uint32_t f = kolo_ll_flag(step);
    uint64_t p = 0x0123456789abcdefull;
    EXPECT_TRUE(kolo_ll_ready(kolo_ll_lo(p, f), kolo_ll_hi(p, f), f));
    // A zeroed slot is never ready.
    EXPECT_FALSE(kolo_ll_ready(0, 0, f));
    // What the slot held nslots steps before (or any earlier use) is stale.
    for (uint32_t k = 1; k <= 4; k++) {
      uint32_t old = kolo_ll_flag(step - k * nslots);
      EXPECT_FALSE(kolo_ll_ready(kolo_ll_lo(p, old), kolo_ll_hi(p, old), f));
      // A line half written (one 8-byte half new, the other old) is not ready.
      EXPECT_FALSE(kolo_ll_ready(kolo_ll_lo(p, f), kolo_ll_hi(p, old), f));
      EXPECT_FALSE(kolo_ll_ready(kolo_ll_lo(p, old), kolo_ll_hi(p, f), f));
    }
  }
}

// The cleaning window: 64 consecutive steps (every slot of up to 64) twice
// per 2^32 steps, so no line's flag is older than 2^31 + 64 steps.
TEST(LLFormat, CleaningWindow) {
  std::vector<uint32_t> clean;
  for (uint64_t s = 0; s < (1ull << 32); s += 1u << 6)
    if (kolo_ll_clean_step((uint32_t)s)) clean.push_back((uint32_t)s);
  ASSERT_EQ(clean.size(), 2u);
  EXPECT_EQ(clean[0], 0x7fffffc0u);
  EXPECT_EQ(clean[1], 0xffffffc0u);
  for (uint32_t s : clean)
    for (uint32_t k = 0; k < 64; k++) EXPECT_TRUE(kolo_ll_clean_step(s + k)) << s + k;
  EXPECT_FALSE(kolo_ll_clean_step(0x7fffffbfu));
  EXPECT_FALSE(kolo_ll_clean_step(0x80000000u));
  EXPECT_FALSE(kolo_ll_clean_step(0u));
}

// Whole slices: pack then unpack reproduces every byte, writes nothing past
// the slice, pads with zeros and carries the flag in every line.
TEST(LLFormat, PackUnpackRoundTrip) {
  std::mt19937 rng(12345);
  for (size_t n = 0; n <= kMaxLen; n++) {
    for (size_t soff = 0; soff < 8; soff++) {
      for (size_t doff = 0; doff < 8; doff += (soff == 0 ? 1 : 3)) {
        uint32_t flag = (uint32_t)rng();
        std::vector<unsigned char> src = random_bytes(rng, soff + n + kGuard);
        std::vector<kolo_ll_line> lines(kolo_ll_lines(n) + 1);
        std::memset(lines.data(), 0x5a, lines.size() * sizeof(kolo_ll_line));
        kolo_ll_pack(lines.data(), src.data() + soff, n, flag);
        const size_t nl = kolo_ll_lines(n);
        // The line after the slice is untouched.
        const unsigned char *past = reinterpret_cast<const unsigned char *>(&lines[nl]);
        for (size_t j = 0; j < sizeof(kolo_ll_line); j++) ASSERT_EQ(past[j], 0x5a);
        for (size_t i = 0; i < nl; i++) {
          ASSERT_EQ(lines[i].flag0, flag);
          ASSERT_EQ(lines[i].flag1, flag);
          uint64_t v = (uint64_t)lines[i].data0 | ((uint64_t)lines[i].data1 << 32);
          unsigned nb = kolo_ll_line_bytes(n, i);
          for (unsigned j = 0; j < 8; j++) {
            unsigned char byte = (unsigned char)(v >> (8 * j));
            if (j < nb) ASSERT_EQ(byte, src[soff + 8 * i + j]) << "n " << n << " line " << i;
            else ASSERT_EQ(byte, 0) << "padding of line " << i;
          }
        }
        std::vector<unsigned char> dst(kGuard + 8 + n + kGuard, kPoison);
        ASSERT_EQ(kolo_ll_unpack(dst.data() + kGuard + doff, lines.data(), n, flag), 1);
        for (size_t j = 0; j < dst.size(); j++) {
          bool inside = j >= kGuard + doff && j < kGuard + doff + n;
          if (inside) ASSERT_EQ(dst[j], src[soff + j - kGuard - doff]) << "n " << n << " byte " << j;
          else ASSERT_EQ(dst[j], kPoison) << "n " << n << " wrote outside at " << j;
        }
      }
    }
  }
}

// Line by line, as the executor does it: each line's bytes loaded from the
// source at 8i and stored to the destination at 8i with kolo_ll_line_bytes,
// in any order of lines, reproduce the slice.
TEST(LLFormat, LineByLineAnyOrder) {
  std::mt19937 rng(777);
  for (size_t n = 0; n <= kMaxLen; n++) {
    for (size_t off = 1; off < 8; off += 2) {
      std::vector<unsigned char> src = random_bytes(rng, off + n);
      std::vector<unsigned char> dst(off + n + kGuard, kPoison);
      const size_t nl = kolo_ll_lines(n);
      std::vector<size_t> order(nl);
      for (size_t i = 0; i < nl; i++) order[i] = nl - 1 - i;
      std::shuffle(order.begin(), order.end(), rng);
      const uint32_t flag = kolo_ll_flag((uint32_t)n);
      for (size_t i : order) {
        unsigned nb = kolo_ll_line_bytes(n, i);
        uint64_t p = kolo_ll_pack_bytes(src.data() + off + 8 * i, nb);
        uint64_t lo = kolo_ll_lo(p, flag), hi = kolo_ll_hi(p, flag);
        ASSERT_TRUE(kolo_ll_ready(lo, hi, flag));
        kolo_ll_unpack_bytes(kolo_ll_payload(lo, hi), dst.data() + off + 8 * i, nb);
      }
      for (size_t j = 0; j < dst.size(); j++) {
        if (j >= off && j < off + n) ASSERT_EQ(dst[j], src[j]) << "n " << n << " byte " << j;
        else ASSERT_EQ(dst[j], kPoison) << "n " << n << " wrote outside at " << j;
      }
    }
  }
}

TEST(LLFormat, UnpackStopsAtALineNotReady) {
  unsigned char src[40], dst[40];
  for (int i = 0; i < 40; i++) src[i] = (unsigned char)i;
  kolo_ll_line lines[5];
  kolo_ll_pack(lines, src, 40, 9);
  EXPECT_EQ(kolo_ll_unpack(dst, lines, 40, 9), 1);
  EXPECT_EQ(std::memcmp(dst, src, 40), 0);
  lines[3].flag1 = 8;  // the second half of line 3 not yet arrived
  EXPECT_EQ(kolo_ll_unpack(dst, lines, 40, 9), 0);
  EXPECT_EQ(kolo_ll_unpack(dst, lines, 24, 9), 1);  // lines 0..2 only
}

}  // namespace
