// test_sched_file.cc - schedule files (ring/sched_file.h,
// docs/schedule-format.md): the examples in perf/schedules/ parse and are
// proved (the wrong one refused with the checker's sentence); every
// built-in schedule written out in the format parses back into the same
// steps and peers and is proved again; every malformed line is refused
// with "name:line: what"; sections are found by collective, root and
// channel (modulo the file's channels), buffers blocked after the
// collective.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "util/sched_text.h"

extern "C" {
#include "ring/algo.h"
#include "ring/sched_file.h"
#include "ring/schedule.h"
#include "ring/step_names.h"
}

namespace {

std::string repo_dir() {
  std::string f = __FILE__;
  size_t slash = f.rfind("/tests/");
  return slash == std::string::npos ? std::string(".") : f.substr(0, slash);
}

std::string read_text(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses text as `name`: "" and *f filled, or the sentence.
std::string parse(const std::string &text, kolo_sched_file *f, const char *name = "t.sched") {
  char why[1024];
  koloResult_t res = kolo_sched_parse(text.data(), text.size(), name, f, why, sizeof why);
  if (res != koloSuccess) {
    EXPECT_EQ(f->nsections, 0);
    EXPECT_EQ(f->sections, nullptr);
    return why;
  }
  EXPECT_STREQ(why, "");
  return "";
}

std::string parse_and_check(const std::string &text, const char *name = "t.sched") {
  kolo_sched_file f;
  std::string err = parse(text, &f, name);
  if (!err.empty()) return err;
  char why[1024];
  koloResult_t res = kolo_sched_check(&f, name, why, sizeof why);
  kolo_sched_free(&f);
  return res == koloSuccess ? "" : why;
}

TEST(SchedFile, ExamplesAreProvedAndTheWrongOneRefused) {
  const std::string dir = repo_dir() + "/perf/schedules/";
  for (const char *good : {"ring_allreduce_4.sched", "rd_allreduce_4.sched", "oneshot_allreduce_3.sched"}) {
    std::string text = read_text(dir + good);
    ASSERT_FALSE(text.empty()) << dir + good;
    EXPECT_EQ(parse_and_check(text, good), "") << good;
  }
  std::string wrong = read_text(dir + "wrong_rd_allreduce_4.sched");
  ASSERT_FALSE(wrong.empty());
  EXPECT_EQ(parse_and_check(wrong, "wrong_rd_allreduce_4.sched"),
            "wrong_rd_allreduce_4.sched:8: AllReduce on 4 ranks: deadlock: rank 0 step 2 (recvReduceCopy from rank 2) "
            "waits for rank 2 (at its step 2); rank 2 step 2 (recvReduceCopy from rank 0) waits for rank 0 (at its step "
            "2); every other rank has finished");
}

// ---- every built-in schedule, written out and read back -----------------------

// The same steps (ops, flags, the chunks and buffers each uses, peer
// ranks), blocking and layout.
void expect_same(const kolo_program &a, const kolo_program &b, const std::string &what) {
  ASSERT_EQ(a.nsteps, b.nsteps) << what;
  EXPECT_EQ(a.layout, b.layout) << what;
  EXPECT_EQ(a.in_blocked, b.in_blocked) << what;
  EXPECT_EQ(a.out_blocked, b.out_blocked) << what;
  for (int i = 0; i < a.nsteps; i++) {
    const kolo_step &s = a.steps[i], &t = b.steps[i];
    SCOPED_TRACE(what + " step " + std::to_string(i));
    EXPECT_EQ(s.op, t.op);
    EXPECT_EQ(s.flags, t.flags);
    if (kolo_step_reads_src(s.op)) {
      EXPECT_EQ(std::make_pair(s.src_buf, s.src_chunk), std::make_pair(t.src_buf, t.src_chunk));
    }
    if (kolo_step_writes_dst(s.op)) {
      EXPECT_EQ(std::make_pair(s.dst_buf, s.dst_chunk), std::make_pair(t.dst_buf, t.dst_chunk));
    }
    EXPECT_EQ(kolo_step_send_rank(&a, &s), kolo_step_send_rank(&b, &t));
    EXPECT_EQ(kolo_step_recv_rank(&a, &s), kolo_step_recv_rank(&b, &t));
  }
}

TEST(SchedFile, EveryBuiltinScheduleReadsBackAndIsProved) {
  const int colls[] = {KOLO_COLL_ALL_REDUCE, KOLO_COLL_REDUCE_SCATTER, KOLO_COLL_ALL_GATHER, KOLO_COLL_BROADCAST,
                       KOLO_COLL_REDUCE,     KOLO_COLL_ALL_TO_ALL,     KOLO_COLL_GATHER,     KOLO_COLL_SCATTER};
  for (int n : {1, 2, 3, 4, 5, 8}) {
    std::ostringstream text;
    text << "kolo-schedule 1\nranks " << n << "\n";
    std::vector<std::vector<kolo_program>> built;
    std::vector<std::pair<int, int>> sections;  // coll, root
    for (int coll : colls)
      for (int root = 0; root < (kt::sched_rooted(coll) ? n : 1); root++) {
        built.emplace_back();
        text << "\n" << kt::sched_builtin_section(coll, n, root, 2, &built.back());
        sections.push_back({coll, kt::sched_rooted(coll) ? root : -1});
      }
    kolo_sched_file f;
    ASSERT_EQ(parse(text.str(), &f), "") << text.str();
    ASSERT_EQ(f.nranks, n);
    ASSERT_EQ(f.nsections, (int)sections.size());
    char why[1024];
    EXPECT_EQ(kolo_sched_check(&f, "t.sched", why, sizeof why), koloSuccess) << why;
    for (size_t k = 0; k < sections.size(); k++) {
      auto [coll, root] = sections[k];
      EXPECT_TRUE(kolo_sched_has(&f, coll));
      for (int ch = 0; ch < 4; ch++)  // channels 2 and 3 take the file's 0 and 1
        for (int r = 0; r < n; r++) {
          const kolo_program *p = kolo_sched_find(&f, coll, root, ch, r);
          ASSERT_NE(p, nullptr);
          expect_same(*p, built[k][(size_t)((ch % 2) * n + r)],
                      std::string(kolo_coll_name(coll)) + " n=" + std::to_string(n) + " root=" +
                          std::to_string(root) + " ch=" + std::to_string(ch) + " rank=" + std::to_string(r));
        }
    }
    EXPECT_EQ(kolo_sched_find(&f, KOLO_COLL_SEND, 0, 0, 0), nullptr);
    EXPECT_EQ(kolo_sched_find(&f, KOLO_COLL_ALL_REDUCE, 0, 0, n), nullptr);
    kolo_sched_free(&f);
    for (auto &v : built)
      for (kolo_program &p : v) kolo_program_free(&p);
  }
}

// The multi-peer all-reduces (operand order, scratch and local reduces
// included) written out, read back the same and proved.
TEST(SchedFile, EveryAllReduceAlgorithmReadsBackAndIsProved) {
  for (int algo : {KOLO_ALGO_RD, KOLO_ALGO_RABENSEIFNER, KOLO_ALGO_DIRECT, KOLO_ALGO_ONESHOT})
    for (int n : {1, 2, 3, 4, 5, 8}) {
      std::vector<kolo_program> built;
      std::string text = "kolo-schedule 1\nranks " + std::to_string(n) + "\n\n" +
                         kt::sched_builtin_section(KOLO_COLL_ALL_REDUCE, n, 0, 1, &built, algo);
      kolo_sched_file f;
      ASSERT_EQ(parse(text, &f), "") << text;
      char why[1024];
      EXPECT_EQ(kolo_sched_check(&f, "t.sched", why, sizeof why), koloSuccess) << why;
      for (int r = 0; r < n; r++) {
        const kolo_program *p = kolo_sched_find(&f, KOLO_COLL_ALL_REDUCE, -1, 0, r);
        ASSERT_NE(p, nullptr);
        expect_same(*p, built[(size_t)r], std::string(kolo_algo_name(algo)) + " n=" + std::to_string(n) + " rank=" +
                                              std::to_string(r));
      }
      kolo_sched_free(&f);
      for (kolo_program &p : built) kolo_program_free(&p);
    }
}

// Scratch holds nothing from one round to the next: a program that reads it
// before writing it in the round is refused, naming the step.
TEST(SchedFile, ScratchReadBeforeWrittenIsRefused) {
  const std::string H = "kolo-schedule 1\nranks 2\ncollective AllReduce\nlayout flat\n";
  const std::string good = H +
                           "rank 0\nsend in to 1\nrecv scratch from 1\nreduce in scratch\ncopy scratch out final\n"
                           "rank 1\nsend in to 0\nrecvReduceCopy in out from 0 final\n";
  EXPECT_EQ(parse_and_check(good), "");
  const std::string bad = H +
                          "rank 0\nsend in to 1\nreduce in scratch\nrecvReduceCopy scratch out from 1 final\n"
                          "rank 1\nsend in to 0\nrecvReduceCopy in out from 0 final\n";
  EXPECT_EQ(parse_and_check(bad),
            "t.sched:3: AllReduce on 2 ranks: rank 0 step 1 (reduce) reads SCRATCH[0] before any step of the round "
            "wrote it (scratch keeps nothing from one round to the next)");
}

TEST(SchedFile, SectionsByRootAndTheHash) {
  const std::string text =
      "kolo-schedule 1\nranks 2\n"
      "collective Broadcast root 1\nrank 0\nrecv out from 1\nrank 1\ncopySend in out to 0\n"
      "collective allreduce\nrank 0\nsend in to 1\nrecvReduceCopy in out from 1 final\n"
      "rank 1\nsend in to 0\nrecvReduceCopy in out from 0 final\n";
  kolo_sched_file f;
  ASSERT_EQ(parse(text, &f), "");
  EXPECT_NE(kolo_sched_find(&f, KOLO_COLL_BROADCAST, 1, 0, 0), nullptr);
  EXPECT_EQ(kolo_sched_find(&f, KOLO_COLL_BROADCAST, 0, 0, 0), nullptr) << "root 0 is not in the file";
  EXPECT_TRUE(kolo_sched_has(&f, KOLO_COLL_BROADCAST));
  EXPECT_FALSE(kolo_sched_has(&f, KOLO_COLL_REDUCE));
  const kolo_program *p = kolo_sched_find(&f, KOLO_COLL_ALL_REDUCE, 7, 5, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->npeers, 1);
  EXPECT_EQ(p->peers[0].rank, 0);
  EXPECT_EQ(p->peers[0].sends + p->peers[0].recvs, 2);
  EXPECT_EQ(p->send_peer, -1);
  EXPECT_EQ(f.hash, kolo_sched_hash(text.data(), text.size()));
  EXPECT_NE(f.hash, kolo_sched_hash(text.data(), text.size() - 1));
  char why[512];
  EXPECT_EQ(kolo_sched_check(&f, "t.sched", why, sizeof why), koloSuccess) << why;
  kolo_sched_free(&f);
}

// ---- malformed files -------------------------------------------------------------

struct Bad {
  std::string text;
  const char *why;
};

TEST(SchedFile, MalformedLinesAreNamed) {
  const std::string H = "kolo-schedule 1\nranks 2\ncollective AllReduce\n";
  const std::string R = "rank 0\nsend in to 1\nrecvReduceCopy in out from 1 final\nrank 1\n";
  const std::vector<Bad> bad = {
      {"", "t.sched:1: empty: a schedule file starts with `kolo-schedule 1`"},
      {"# nothing\n\n", "t.sched:2: empty: a schedule file starts with `kolo-schedule 1`"},
      {"ranks 2\n", "t.sched:1: a schedule file starts with `kolo-schedule 1`"},
      {"kolo-schedule 2\n", "t.sched:1: format version 2: this kolo reads version 1"},
      {"kolo-schedule 1\nkolo-schedule 1\n", "t.sched:2: a second `kolo-schedule` line"},
      {"kolo-schedule 1qranks 1\n", "t.sched:1: `kolo-schedule V` takes one number, the format version"},
      {"kolo-schedule 1\n", "t.sched:1: no collective: a schedule file holds at least one `collective` section"},
      {"kolo-schedule 1\nranks 0\n", "t.sched:2: the rank count \"0\" is not a number in 1..256"},
      {"kolo-schedule 1\nranks 2 3\n", "t.sched:2: `ranks N` takes one number"},
      {"kolo-schedule 1\nranks 2\nranks 2\n", "t.sched:3: a second `ranks` line"},
      {"kolo-schedule 1\ncollective AllReduce\n", "t.sched:2: a collective before `ranks N`: for how many ranks is it?"},
      {"kolo-schedule 1\nranks 2\ncollective AllSum\n",
       "t.sched:3: \"AllSum\" is no collective: AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AlltoAll, "
       "Gather or Scatter"},
      {"kolo-schedule 1\nranks 2\ncollective Send\n", "t.sched:3: Send is point-to-point: a schedule file holds collectives"},
      {"kolo-schedule 1\nranks 2\ncollective Broadcast\n", "t.sched:3: Broadcast takes a root: `collective Broadcast root R`"},
      {"kolo-schedule 1\nranks 2\ncollective AllReduce root 0\n", "t.sched:3: `collective AllReduce` takes nothing after it"},
      {"kolo-schedule 1\nranks 2\ncollective Reduce root 2\n", "t.sched:3: the root \"2\" is not a number in 0..1"},
      {"kolo-schedule 1\nranks 2\nrank 0\n", "t.sched:3: `rank` outside a collective section"},
      {"kolo-schedule 1\nranks 2\nlayout ring\n", "t.sched:3: `layout` belongs in a collective section, before its first `rank`"},
      {H + "rank 0\nlayout ring\n", "t.sched:5: `layout` belongs in a collective section, before its first `rank`"},
      {H + "layout diagonal\n", "t.sched:4: the layout \"diagonal\" is neither ring nor flat"},
      {H + "channels 65\n", "t.sched:4: the channel count \"65\" is not a number in 1..64"},
      {H + "channels\n", "t.sched:4: `channels` takes one value"},
      {H + "send in to 1\n", "t.sched:4: a step before any `rank` line: whose program is it?"},
      {H + "rank 2\n", "t.sched:4: the rank \"2\" is not a number in 0..1"},
      {H + "rank 0 channel 1\n", "t.sched:4: the channel \"1\" is not a number in 0..0"},
      {H + "rank 0 chan 0\n", "t.sched:4: `rank R` or `rank R channel C`"},
      {H + R + "rank 0\n", "t.sched:8: a second program for rank 0 channel 0 in this section"},
      {H + "rank 0\nsend in to 1\n", "t.sched:5: the AllReduce section of line 3 has no program for rank 1 channel 0"},
      {H + R + "collective AllReduce\n", "t.sched:8: a second AllReduce section (the first is at line 3)"},
      {H + "rank 0\nsendd in to 1\n",
       "t.sched:5: \"sendd\" is neither a directive nor a step op (send, recv, copy, copySend, ...)"},
      {H + "rank 0\nsend to 1\n", "t.sched:5: send takes 1 buffer: src"},
      {H + "rank 0\nrecvReduceCopy in from 1\n", "t.sched:5: recvReduceCopy takes 2 buffers: src then dst"},
      {H + "rank 0\nsend input to 1\n", "t.sched:5: \"input\" is no buffer: in, out, scratch, or one of them with [CHUNK]"},
      {H + "rank 0\nsend in[ to 1\n", "t.sched:5: \"in[\" is no buffer: in, out, scratch, or one of them with [CHUNK]"},
      {H + "rank 0\nsend in[2] to 1\n", "t.sched:5: the chunk \"2\" is not a number in 0..1"},
      {H + "rank 0\nsend in[-1] to 1\n", "t.sched:5: the chunk \"-1\" is not a number in 0..1"},
      {H + "rank 0\nsend in[99999999999] to 1\n",
       "t.sched:5: the chunk \"99999999999\" is not a number in 0..1"},
      {H + "rank 0\nsend in\n", "t.sched:5: send sends: say to which rank (to RANK)"},
      {H + "rank 0\nsend in to 1 from 1\n", "t.sched:5: send does not receive: no `from`"},
      {H + "rank 0\nrecv out to 1\n", "t.sched:5: recv receives: say from which rank (from RANK)"},
      {H + "rank 0\nsend in to 1 to 1\n",
       "t.sched:5: \"to\" is not one of from RANK, to RANK, final and srcFirst (each once), which may follow the "
       "buffers"},
      {H + "rank 0\nsend in to\n", "t.sched:5: \"to\" without a rank after it"},
      {H + "rank 0\nsend in to 2\n", "t.sched:5: the peer \"2\" is not a number in 0..1"},
      {H + "rank 0\nsend in to 1 final\n",
       "t.sched:5: `final` does nothing on send: the post-op is applied by copy, reduce, recvReduceCopy and "
       "recvReduceCopySend"},
      {H + "rank 0\nsend in to 1 srcFirst\n",
       "t.sched:5: `srcFirst` does nothing on send: it orders the two operands of a step that reduces"},
      {H + "rank 0\nreduce in scratch[2]\n", "t.sched:5: the scratch chunk \"2\" is not a number in 0..1"},
      {H + "rank 0\nreduce in\n", "t.sched:5: reduce takes 2 buffers: src then dst"},
      {H + "rank 0\nsend in to 1 a b c d e f g h i j k l m\n", "t.sched:5: more than 16 words on one line"},
      {H + "rank 0\n" + std::string(5000, ' ') + "\n", "t.sched:5: a line of more than 4096 bytes"},
  };
  for (const Bad &b : bad) {
    kolo_sched_file f;
    EXPECT_EQ(parse(b.text, &f), b.why) << "text:\n" << b.text;
  }
  kolo_sched_file f;
  std::string nul = H + "rank 0\nsend in";
  nul += '\0';
  nul += " to 1\n";
  EXPECT_EQ(parse(nul, &f), "t.sched:5: a NUL byte: a schedule file is text");
  // Parsed, then refused by the checker: the section's line and its sentence.
  EXPECT_EQ(parse_and_check(H + R + "send in to 0\nrecvReduceCopy in out from 0\n"),
            "t.sched:3: AllReduce on 2 ranks: rank 1 OUT element 0 got every rank's IN element 0 once, post-op applied "
            "0 times, should have every rank's IN element 0 once, post-op applied once");
}

TEST(SchedFile, CommentsBlanksAndLineEndings) {
  const std::string text =
      "  # a schedule\r\n\tkolo-schedule 1   # version\r\nranks 1\r\n\r\ncollective ALLREDUCE\r\nrank 0\r\n"
      "copy in out final # one rank: a copy\r\n";
  kolo_sched_file f;
  ASSERT_EQ(parse(text, &f), "");
  const kolo_program *p = kolo_sched_find(&f, KOLO_COLL_ALL_REDUCE, 0, 0, 0);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->nsteps, 1);
  EXPECT_EQ(p->npeers, 0);
  EXPECT_EQ(p->steps[0].op, KOLO_STEP_COPY);
  EXPECT_EQ(p->steps[0].flags, KOLO_STEP_FINAL);
  EXPECT_EQ(p->steps[0].src_buf, KOLO_BUF_IN);
  EXPECT_EQ(p->steps[0].dst_buf, KOLO_BUF_OUT);
  kolo_sched_free(&f);
}

}  // namespace
