// KOLO_PROTO's NCCL syntax (core/proto_select.c): every form it takes, the
// per-collective LL thresholds it gives, and every refusal with its
// sentence.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "core/proto_select.h"
}

namespace {

struct Parsed {
  int off;
  int ll128;
  std::string why;
};

Parsed parse(const char *v) {
  char buf[512] = "";
  int ll128 = 0;
  int off = kolo_proto_off_parse(v, &ll128, buf, sizeof buf);
  return {off, ll128, buf};
}

// What coll may use under the value v: "LL", "Simple" or "LL,Simple".
std::string allowed(const char *v, int coll) {
  Parsed p = parse(v);
  if (p.off < 0) return "refused: " + p.why;
  switch (kolo_proto_off_of((uint32_t)p.off, coll)) {
    case 0: return "LL,Simple";
    case KOLO_PROTO_OFF_LL: return "Simple";
    case KOLO_PROTO_OFF_SIMPLE: return "LL";
    default: return "none";
  }
}

const int kAll[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER, KOLO_COLL_BROADCAST,
                    KOLO_COLL_REDUCE,     KOLO_COLL_SEND,           KOLO_COLL_RECV,       KOLO_COLL_ALL_TO_ALL,
                    KOLO_COLL_GATHER,     KOLO_COLL_SCATTER};

TEST(ProtoSelect, UnsetOrEmptyLeavesBoth) {
  EXPECT_EQ(parse(nullptr).off, 0);
  EXPECT_EQ(parse("").off, 0);
}

TEST(ProtoSelect, ListsAndExclusionsApplyToEveryCollective) {
  for (int k : kAll) {
    EXPECT_EQ(allowed("Simple", k), "Simple") << k;
    EXPECT_EQ(allowed("ll", k), "LL") << k;  // any case
    EXPECT_EQ(allowed("SIMPLE,LL", k), "LL,Simple") << k;
    EXPECT_EQ(allowed(" LL , Simple ", k), "LL,Simple") << k;  // blanks around names
    EXPECT_EQ(allowed("^LL", k), "Simple") << k;
    EXPECT_EQ(allowed("^Simple", k), "LL") << k;
    EXPECT_EQ(allowed("^LL128", k), "LL,Simple") << k;  // excludes nothing kolo has
  }
}

TEST(ProtoSelect, PerCollectiveEntries) {
  const char *v = "allreduce:LL;Broadcast:^LL;reduce:Simple;allgather:LL;reducescatter:^Simple;sendrecv:Simple;"
                  "alltoall:LL;gather:Simple;scatter:LL";
  EXPECT_EQ(allowed(v, KOLO_COLL_ALL_REDUCE), "LL");
  EXPECT_EQ(allowed(v, KOLO_COLL_BROADCAST), "Simple");
  EXPECT_EQ(allowed(v, KOLO_COLL_REDUCE), "Simple");
  EXPECT_EQ(allowed(v, KOLO_COLL_ALL_GATHER), "LL");
  EXPECT_EQ(allowed(v, KOLO_COLL_REDUCE_SCATTER), "LL");
  EXPECT_EQ(allowed(v, KOLO_COLL_SEND), "Simple");  // sendrecv: both ends of a transfer
  EXPECT_EQ(allowed(v, KOLO_COLL_RECV), "Simple");
  EXPECT_EQ(allowed(v, KOLO_COLL_ALL_TO_ALL), "LL");
  EXPECT_EQ(allowed(v, KOLO_COLL_GATHER), "Simple");
  EXPECT_EQ(allowed(v, KOLO_COLL_SCATTER), "LL");
  // the others keep both
  EXPECT_EQ(allowed("allreduce:Simple", KOLO_COLL_BROADCAST), "LL,Simple");
  EXPECT_EQ(allowed(" allreduce : Simple ", KOLO_COLL_ALL_REDUCE), "Simple");
}

TEST(ProtoSelect, LaterEntriesReplaceEarlierOnes) {
  // an entry without a collective is every collective's, NCCL's meaning
  EXPECT_EQ(allowed("Simple;allreduce:LL", KOLO_COLL_ALL_REDUCE), "LL");
  EXPECT_EQ(allowed("Simple;allreduce:LL", KOLO_COLL_REDUCE), "Simple");
  EXPECT_EQ(allowed("allreduce:LL;Simple", KOLO_COLL_ALL_REDUCE), "Simple");
  EXPECT_EQ(allowed("allreduce:LL;allreduce:^LL", KOLO_COLL_ALL_REDUCE), "Simple");
  EXPECT_EQ(allowed("allreduce:LL;allreduce:LL,Simple", KOLO_COLL_ALL_REDUCE), "LL,Simple");
  EXPECT_EQ(parse("allreduce:LL;allreduce:LL,Simple").off, 0);  // one record per meaning
}

TEST(ProtoSelect, LL128IsTakenAndLeftOut) {
  Parsed p = parse("LL,LL128");
  EXPECT_EQ(p.ll128, 1);
  EXPECT_EQ(allowed("LL,LL128", KOLO_COLL_ALL_REDUCE), "LL");
  EXPECT_EQ(parse("LL,Simple").ll128, 0);
  EXPECT_EQ(allowed("^LL128;allreduce:LL128,Simple", KOLO_COLL_ALL_REDUCE), "Simple");
}

void expect_refused(const char *v, int want, const std::string &sentence) {
  Parsed p = parse(v);
  EXPECT_EQ(p.off, want) << v;
  EXPECT_EQ(p.why, sentence) << v;
}

TEST(ProtoSelect, RefusesWithASentence) {
  const std::string head = "KOLO_PROTO / NCCL_PROTO ";
  expect_refused("LL,Fast", KOLO_PROTO_UNREADABLE, head + "\"LL,Fast\": no protocol (kolo has LL and Simple) named \"Fast\"");
  expect_refused("tree:LL", KOLO_PROTO_UNREADABLE,
                 head + "\"tree:LL\": no collective (allreduce, broadcast, reduce, allgather, reducescatter, "
                        "sendrecv, alltoall, gather, scatter) named \"tree\"");
  expect_refused("send:LL", KOLO_PROTO_UNREADABLE,
                 head + "\"send:LL\": no collective (allreduce, broadcast, reduce, allgather, reducescatter, "
                        "sendrecv, alltoall, gather, scatter) named \"send\"");
  expect_refused("allreduce:", KOLO_PROTO_UNREADABLE,
                 head + "\"allreduce:\": has an empty protocol list or name in the entry \"allreduce:\"");
  expect_refused("LL,", KOLO_PROTO_UNREADABLE, head + "\"LL,\": has an empty protocol list or name in the entry \"LL,\"");
  expect_refused("LL;", KOLO_PROTO_UNREADABLE, head + "\"LL;\": has an empty protocol list or name in the entry \"\"");
  expect_refused("^", KOLO_PROTO_UNREADABLE, head + "\"^\": has an empty protocol list or name in the entry \"^\"");
  expect_refused("LL128", KOLO_PROTO_NONE_LEFT,
                 head + "\"LL128\": allows neither LL nor Simple (LL128 is not in kolo) in the entry \"LL128\"");
  expect_refused("Simple;allreduce:^LL,Simple", KOLO_PROTO_NONE_LEFT,
                 head + "\"Simple;allreduce:^LL,Simple\": allows neither LL nor Simple (LL128 is not in kolo) in the "
                        "entry \"allreduce:^LL,Simple\"");
}

TEST(ProtoSelect, ThresholdsPerCollective) {
  uint32_t off = (uint32_t)parse("allreduce:LL;broadcast:Simple").off;
  const size_t t = 65536;
  EXPECT_EQ(kolo_proto_ll_threshold(off, KOLO_COLL_ALL_REDUCE, t), KOLO_PROTO_LL_ALWAYS);
  EXPECT_EQ(kolo_proto_ll_threshold(off, KOLO_COLL_BROADCAST, t), 0u);
  EXPECT_EQ(kolo_proto_ll_threshold(off, KOLO_COLL_REDUCE, t), t);  // KOLO_LL_THRESHOLD
  EXPECT_EQ(kolo_proto_ll_threshold(0, KOLO_COLL_SEND, 0), 0u);     // KOLO_LL_THRESHOLD=0 stays LL off
}

TEST(ProtoSelect, WireRecordsAndText) {
  EXPECT_EQ(kolo_proto_off_wrong(0), nullptr);
  EXPECT_EQ(kolo_proto_off_wrong((uint32_t)parse("^LL;sendrecv:LL;alltoall:LL").off), nullptr);
  EXPECT_STREQ(kolo_proto_off_wrong(KOLO_PROTO_OFF_ALL + 1), "has bits beyond its collectives'");
  EXPECT_STREQ(kolo_proto_off_wrong(3u << (2 * KOLO_COLL_GATHER)), "leaves a collective neither LL nor Simple");
  EXPECT_STREQ(kolo_proto_off_wrong(1u << (2 * KOLO_COLL_SEND)), "gives send and recv different protocols");
  char buf[160];
  EXPECT_STREQ(kolo_proto_off_text(0, buf, sizeof buf), "LL and Simple");
  EXPECT_STREQ(kolo_proto_off_text((uint32_t)parse("^LL").off, buf, sizeof buf), "Simple");
  EXPECT_STREQ(kolo_proto_off_text((uint32_t)parse("sendrecv:LL;allreduce:Simple").off, buf, sizeof buf),
               "allreduce:Simple;sendrecv:LL");
  // the longest text (every collective named) fits the callers' 160 bytes, and reads back
  const char *mixed = "Simple;allreduce:LL";
  std::string text = kolo_proto_off_text((uint32_t)parse(mixed).off, buf, sizeof buf);
  EXPECT_EQ(parse(text.c_str()).off, parse(mixed).off) << text;
}

}  // namespace
