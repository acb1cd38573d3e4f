// kolo-perf's command line: nccl-tests' flags with nccl-tests' meanings,
// kolo-perf's own flags where nccl-tests' letters pushed them, and the
// sentences that refuse what kolo-perf cannot do.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include <getopt.h>

extern "C" {
#include "perf/perf_args.h"
#include "perf/perf_args_opts.h"
}

namespace {

// Parses a command line (argv[0] included) as kolo-perf or kolo-mpi-ref does.
// The words live as long as the test program: perf_args keeps pointers into
// them (--json, --label), as kolo-perf's into its argv.
int Parse(perf_args *a, const std::vector<std::string> &words_in, int tool = PERF_TOOL_KOLO) {
  static std::deque<std::vector<std::string>> kept;  // a deque never moves what it holds
  kept.push_back(words_in);
  std::vector<std::string> &words = kept.back();
  std::vector<char *> argv;
  for (auto &w : words) argv.push_back(&w[0]);
  argv.push_back(nullptr);
  return perf_args_parse(a, (int)words.size(), argv.data(), tool);
}

// A subcommand as kolo-perf overlap or p2p declares one: two shared flags,
// one of its own, its defaults.
int sub_width;
void SubDefaults(perf_args *a) { a->iters = 7, sub_width = 1; }
int SubApply(perf_args *, int c, const char *v) { return c == PERF_SUB_OPT ? perf_parse_int(v, 1, 9, &sub_width) : -1; }
void SubUsage(FILE *out, const char *prog) { fprintf(out, "usage: %s sub\n", prog); }
const int kSubShared[] = {'n', OPT_MEM, 0};
const struct option kSubLongs[] = {{"width", required_argument, nullptr, PERF_SUB_OPT}, {nullptr, 0, nullptr, 0}};
const perf_sub_flags kSub = {"sub", kSubShared, kSubLongs, SubDefaults, SubApply, nullptr, SubUsage};

int ParseSub(perf_args *a, std::vector<std::string> words) {
  static std::deque<std::vector<std::string>> kept;
  kept.push_back(std::move(words));
  std::vector<char *> argv;
  for (auto &w : kept.back()) argv.push_back(&w[0]);
  argv.push_back(nullptr);
  return perf_args_parse_sub(a, (int)kept.back().size(), argv.data(), &kSub);
}

TEST(PerfArgs, TypicalNcclTestsLineMeansTheSame) {
  // nccl-tests' README: ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1 (and its -c, -n, -w)
  perf_args a;
  ASSERT_EQ(0, Parse(&a, {"kolo-perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "1", "-c", "1", "-n", "20", "-w",
                          "5", "all_reduce"}));
  EXPECT_EQ(PERF_ALL_REDUCE, a.coll);
  EXPECT_EQ(8u, a.min_bytes);
  EXPECT_EQ(128u << 20, a.max_bytes);
  EXPECT_EQ(2u, a.step_factor);
  EXPECT_EQ(1, a.gpus_per_thread);
  EXPECT_EQ(1, a.check);
  EXPECT_EQ(20, a.iters);
  EXPECT_EQ(5, a.warmup);
  EXPECT_EQ(1, perf_local_ranks(&a));
  // The sweep steps as nccl-tests': 8, 16, ... 128M.
  size_t n = 0, last = 0;
  for (size_t s = a.min_bytes; s != 0; s = perf_next_size(&a, s)) n++, last = s;
  EXPECT_EQ(25u, n);
  EXPECT_EQ(128u << 20, last);
}

TEST(PerfArgs, LongNamesAreNcclTests) {
  perf_args s, l;
  ASSERT_EQ(0, Parse(&s, {"kolo-perf", "-b", "1K", "-e", "1M", "-i", "4K", "-n", "3", "-w", "2", "-m", "4", "-N", "2",
                          "-c", "3", "-d", "half", "-o", "max", "-r", "1", "-a", "0", "-z", "3", "-p", "1", "-C", "1",
                          "-T", "30", "-t", "2", "-g", "4", "reduce"}));
  ASSERT_EQ(0, Parse(&l, {"kolo-perf", "--minbytes", "1K", "--maxbytes", "1M", "--stepbytes", "4K", "--iters", "3",
                          "--warmup_iters", "2", "--agg_iters", "4", "--run_cycles", "2", "--check", "3",
                          "--datatype", "half", "--op", "max", "--root", "1", "--average", "0", "--blocking", "3",
                          "--parallel_init", "1", "--report_cputime", "1", "--timeout", "30", "--nthreads", "2",
                          "--ngpus", "4", "reduce"}));
  for (const perf_args *a : {&s, &l}) {
    EXPECT_EQ(1024u, a->min_bytes);
    EXPECT_EQ(1u, a->step_factor);  // -i alone: a fixed increment
    EXPECT_EQ(4096u, a->step_bytes);
    EXPECT_EQ(4, a->agg_iters);
    EXPECT_EQ(2, a->run_cycles);
    EXPECT_EQ(3, a->check);
    EXPECT_EQ(PERF_FLOAT16, a->type);
    EXPECT_EQ(PERF_MAX, a->op);
    EXPECT_EQ(1, a->root);
    EXPECT_EQ(PERF_AVERAGE_RANK0, a->average);
    EXPECT_EQ(PERF_BLOCKING_OUTER, a->blocking);
    EXPECT_EQ(1, a->parallel_init);
    EXPECT_EQ(1, a->report_cputime);
    EXPECT_EQ(30, a->timeout_s);
    EXPECT_EQ(8, perf_local_ranks(a));  // nccl-tests: ranks = threads x GPUs per thread
  }
}

TEST(PerfArgs, KoloDefaultsKeptWhereNcclTestsDiffers) {
  perf_args a;
  ASSERT_EQ(0, Parse(&a, {"kolo-perf", "all_gather"}));
  EXPECT_EQ(PERF_AVERAGE_MAX, a.average);  // the slowest rank's, as kolo-perf always printed
  EXPECT_EQ(5, a.warmup);
  EXPECT_EQ(PERF_PLACE_BOTH, a.placement);
  EXPECT_EQ(0, a.graph_launches);
  EXPECT_EQ(1, a.procs);
}

TEST(PerfArgs, MovedKoloFlags) {
  perf_args a;
  ASSERT_EQ(0, Parse(&a, {"kolo-perf", "-P", "4", "--inplace", "1", "--mem", "cuda", "--devices", "0,2", "-G", "3",
                          "--json", "out.json", "--label", "run A", "--ceiling", "12.5", "sendrecv"}));
  EXPECT_EQ(4, a.procs);
  EXPECT_EQ(1, a.procs_given);
  EXPECT_EQ(PERF_PLACE_IN, a.placement);
  EXPECT_EQ(1, a.mem_cuda);
  ASSERT_EQ(2, a.ndevs);
  EXPECT_EQ(2, a.devs[1]);
  EXPECT_EQ(3, a.graph_launches);
  EXPECT_STREQ("out.json", a.json);
  EXPECT_STREQ("run A", a.label);
  EXPECT_DOUBLE_EQ(12.5, a.ceiling_gbps);
  ASSERT_EQ(0, Parse(&a, {"kolo-perf", "--mem", "cuda", "--graph", "--gpu", "1", "-J", "x.json", "all_reduce"}));
  EXPECT_EQ(1, a.graph_launches);  // --graph is -G 1
  EXPECT_EQ(1, a.devs[0]);         // --gpu, the old long name of the device list
  EXPECT_STREQ("x.json", a.json);  // nccl-tests' -J writes kolo's JSON
}

TEST(PerfArgs, NccltestsFlagsKoloLacksAreTakenAtTheirDefaultOnly) {
  perf_args a;
  EXPECT_EQ(0, Parse(&a, {"kolo-perf", "-y", "0", "-R", "0", "-x", "0", "-D", "0", "-V", "16", "-S", "0", "-M", "0",
                          "-u", "0", "-I", "0", "-K", "0", "all_reduce"}));
  for (const char *flag : {"-y", "-R", "-x", "-D", "-S", "-M", "-u", "-I", "-K"})
    EXPECT_EQ(-1, Parse(&a, {"kolo-perf", flag, "1", "all_reduce"})) << flag;
}

TEST(PerfArgs, BadValuesAndCombinationsAreRefused) {
  perf_args a;
  const std::vector<std::vector<std::string>> bad = {
      {"-a", "4"}, {"-z", "4"}, {"-p", "2"}, {"-C", "2"}, {"-g", "0"}, {"-t", "0"}, {"-m", "0"}, {"-n", "0"},
      {"-N", "-1"}, {"-c", "-1"}, {"-b", "1x"}, {"-d", "float7"}, {"-o", "xor"}, {"--mem", "disk"},
      {"--inplace", "2"}, {"--offset", "4096"}, {"--offset", "-1"}, {"--offset", "16x"},
      {"--ceiling", "-3"}, {"-G", "1"},                                   // -G needs --mem cuda
      {"--devices", "0"},                                                // so does --devices
      {"--mem", "cuda", "-G", "1", "-z", "1"},                           // a graph cannot wait per call
      {"--mem", "cuda", "-G", "1", "-w", "0"},                           // capture needs a warm-up
      {"--mem", "cuda", "--ceiling", "memcpy"}, {"-b", "2M", "-e", "1M"}, {"--no-such-flag"}};
  for (const auto &flags : bad) {
    std::vector<std::string> words = {"kolo-perf"};
    words.insert(words.end(), flags.begin(), flags.end());
    words.push_back("all_reduce");
    EXPECT_EQ(-1, Parse(&a, words)) << flags[0];
  }
  EXPECT_EQ(-1, Parse(&a, {"kolo-perf", "-m", "2", "prims"}));
  EXPECT_EQ(-1, Parse(&a, {"kolo-perf", "not_a_collective"}));
}

TEST(PerfArgs, MpiRefTakesNoKoloOnlyFlag) {
  perf_args a;
  EXPECT_EQ(0, Parse(&a, {"kolo-mpi-ref", "-a", "1", "-m", "2", "-z", "1", "-N", "2", "-C", "1", "all_reduce"},
                     PERF_TOOL_MPI));
  for (const char *flag : {"-P", "-p", "-t", "-g", "-T", "-G"})
    EXPECT_EQ(-1, Parse(&a, {"kolo-mpi-ref", flag, "1", "all_reduce"}, PERF_TOOL_MPI)) << flag;
  // the buffers' place within a page: both tools, for a comparison with one placement
  ASSERT_EQ(0, Parse(&a, {"kolo-mpi-ref", "--offset", "16", "all_reduce"}, PERF_TOOL_MPI));
  EXPECT_EQ(16, a.offset);
  ASSERT_EQ(0, Parse(&a, {"kolo-perf", "--offset", "4095", "all_reduce"}));
  EXPECT_EQ(4095, a.offset);
  ASSERT_EQ(0, Parse(&a, {"kolo-perf", "all_reduce"}));
  EXPECT_EQ(0, a.offset);  // on a page, as before
  EXPECT_EQ(-1, Parse(&a, {"kolo-perf", "--offset", "16", "prims"}));
}

TEST(PerfArgs, SubcommandFlagsGoThroughTheSameParser) {
  perf_args a;
  ASSERT_EQ(0, ParseSub(&a, {"kolo-perf", "sub"}));
  EXPECT_EQ(7, a.iters);  // its defaults over the shared ones
  EXPECT_EQ(1, sub_width);
  ASSERT_EQ(0, ParseSub(&a, {"kolo-perf", "sub", "-n", "3", "--width", "4", "--mem", "host"}));
  EXPECT_EQ(3, a.iters);
  EXPECT_EQ(4, sub_width);
  EXPECT_EQ(-1, ParseSub(&a, {"kolo-perf", "sub", "-b", "8"}));       // a shared flag it does not take
  EXPECT_EQ(-1, ParseSub(&a, {"kolo-perf", "sub", "--width", "10"})); // its own flag, a bad value
  EXPECT_EQ(-1, ParseSub(&a, {"kolo-perf", "sub", "extra"}));
  EXPECT_EQ(-1, ParseSub(&a, {"kolo-perf", "all_reduce"}));
  EXPECT_EQ(1, ParseSub(&a, {"kolo-perf", "sub", "--help"}));
}

}  // namespace
