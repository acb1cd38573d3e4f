// transport/iface_select.c: KOLO_SOCKET_IFNAME's list (NCCL's syntax),
// pure code, and its regression of a long list (tests/fuzz/fuzz_iface_list.c
// fuzzes it).
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "transport/iface_select.h"
}

TEST(IfaceSelect, PrefixesSelect) {
  EXPECT_EQ(kolo_iface_match("eth,ib", "eth0"), 1);
  EXPECT_EQ(kolo_iface_match("eth,ib", "ib1"), 1);
  EXPECT_EQ(kolo_iface_match("eth,ib", "lo"), 0);
  EXPECT_EQ(kolo_iface_match(",,eth,", "eth0"), 1);  // empty entries are skipped
}

TEST(IfaceSelect, CaretExcludes) {
  EXPECT_EQ(kolo_iface_match("^lo,docker", "lo"), 0);
  EXPECT_EQ(kolo_iface_match("^lo,docker", "docker0"), 0);
  EXPECT_EQ(kolo_iface_match("^lo,docker", "eth0"), 1);
  EXPECT_EQ(kolo_iface_match("^", "eth0"), 1);
}

TEST(IfaceSelect, EqualsIsExact) {
  EXPECT_EQ(kolo_iface_match("=eth0", "eth0"), 1);
  EXPECT_EQ(kolo_iface_match("=eth0", "eth01"), 0);
  EXPECT_EQ(kolo_iface_match("=eth", "eth0"), 0);
  EXPECT_EQ(kolo_iface_match("^=eth0", "eth0"), 0);
  EXPECT_EQ(kolo_iface_match("^=eth0", "eth01"), 1);
}

// The list used to be copied into 256 bytes first: an entry past them was
// lost (or cut into a shorter prefix, selecting other interfaces).
TEST(IfaceSelect, ListLongerThan256BytesIsReadWhole) {
  std::string spec;
  while (spec.size() < 300) spec += "unused_interface,";
  EXPECT_EQ(kolo_iface_match((spec + "ib0").c_str(), "ib0"), 1);
  EXPECT_EQ(kolo_iface_match(("^" + spec + "ib0").c_str(), "ib0"), 0);
  EXPECT_EQ(kolo_iface_match((spec + "ib0").c_str(), "eth0"), 0);
}
