// test_copy.cc - kolo_copy (common/copy.h): every byte, on random data,
// with the destination poisoned and guarded on both sides, at sizes around
// its thresholds and at the distances between destination and source
// (modulo a 4 KiB page) where it leaves memcpy, beside them, and none.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" {
#include "common/copy.h"
}

namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kPoison = 0xA5;

// Pages of at least `bytes` (aligned_alloc wants a multiple of the alignment).
struct PageBuffer {
  explicit PageBuffer(size_t bytes)
      : raw(static_cast<uint8_t *>(std::aligned_alloc(4096, (bytes + 4095) & ~static_cast<size_t>(4095)))) {}
  ~PageBuffer() { std::free(raw); }
  uint8_t *raw;
};

void check_copy(size_t n, unsigned src_place, unsigned distance, std::mt19937 &rng) {
  const size_t span = n + 2 * 4096 + 2 * kGuard;
  PageBuffer s(span + 4096), d(span + 4096);
  uint8_t *src = s.raw + 4096 + src_place;
  uint8_t *dst = d.raw + 4096 + (src_place + distance) % 4096;
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < n; i++) src[i] = static_cast<uint8_t>(byte(rng));
  std::fill(dst - kGuard, dst + n + kGuard, kPoison);
  ASSERT_EQ((reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095u, distance % 4096);
  kolo_copy(dst, src, n);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(dst[i], src[i]) << "byte " << i << " of " << n << ", distance " << distance << ", source at "
                              << src_place;
  for (size_t i = 1; i <= kGuard; i++) {
    ASSERT_EQ(dst[-static_cast<ptrdiff_t>(i)], kPoison) << "guard before, " << n << " bytes";
    ASSERT_EQ(dst[n - 1 + i], kPoison) << "guard after, " << n << " bytes";
  }
}

TEST(Copy, EveryByteAtEveryDistanceThatMatters) {
  std::mt19937 rng(20261203);
  const size_t sizes[] = {0, 1, 7, 63, 64, 65, 2047, 2048, 2049, 2111, 4096, 65536 + 13, 300001};
  const unsigned distances[] = {0, 1, 8, 16, 31, 32, 48, 63, 64, 65, 2048, 4032, 4080, 4095};
  const unsigned places[] = {0, 5, 16, 4090};
  for (size_t n : sizes)
    for (unsigned d : distances)
      for (unsigned p : places) {
        check_copy(n, p, d, rng);
        if (HasFatalFailure()) return;
      }
}

TEST(Copy, SaysWhereTheDistanceAliases) {
  std::vector<uint8_t> buf(3 * 4096);
  const uint8_t *src = buf.data();
  EXPECT_FALSE(kolo_copy_aliases(src, src));
  EXPECT_TRUE(kolo_copy_aliases(src + 1, src));
  EXPECT_TRUE(kolo_copy_aliases(src + 16, src));
  EXPECT_TRUE(kolo_copy_aliases(src + 63, src));
  EXPECT_FALSE(kolo_copy_aliases(src + 64, src));
  EXPECT_TRUE(kolo_copy_aliases(src + 4096 + 16, src));  // modulo a page
  EXPECT_FALSE(kolo_copy_aliases(src, src + 16));        // the destination before the source
  EXPECT_FALSE(kolo_copy_aliases(src + 4096, src));
}

}  // namespace
