// test_e2e_adasum.cc - koloAdasum end to end, ranks as threads of this
// process (ThreadWorld: koloCommInitAll, each rank's call from its own
// thread; non-blocking communicators driven from one thread), and ranks as
// processes (AdasumProcs: forked children joining with koloCommInitRank, as
// kolo.torch's ranks do, their outputs checked here against the same
// reference).
//
// The reference is computed here in double, from the definition, over the
// same inputs (rounded to the call's type first): the combine rule
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// (a squared norm below 1e-8 has coefficient 1), the extra ranks p + i of a
// rank count that is no power of two folded into rank i first, then a
// binary tree over consecutive ranks: (0,1), (2,3), ... then (01,23), ...,
// the lower group always a.  Every output element is checked against it
// (outputs poisoned first), and every rank's output must be the same bits.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "kernels/host_reduce.h"
}
#include "util/coll_run.h"
#include "util/expect_text.h"
#include "util/proc_util.h"
#include "util/thread_world.h"

using namespace kt;

namespace {

// A hang becomes an error after 60 s instead of ctest's timeout.
const bool kTimeoutSet = (default_test_timeout(60000), true);

using Vec = std::vector<double>;
using Combine = std::function<Vec(const Vec &, const Vec &)>;

double coefficient(double dot, double normsq) { return normsq >= 1e-8 ? 1.0 - dot / (2.0 * normsq) : 1.0; }

Vec adasum2(const Vec &a, const Vec &b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  double ca = coefficient(dot, aa), cb = coefficient(dot, bb);
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); i++) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// The fold of the extra ranks, then the binary tree over consecutive ranks.
Vec reference(std::vector<Vec> in, const Combine &f) {
  int n = (int)in.size(), p = 1;
  while (p * 2 <= n) p *= 2;
  for (int i = 0; i + p < n; i++) in[(size_t)i] = f(in[(size_t)i], in[(size_t)(i + p)]);
  for (int w = 1; w < p; w *= 2)
    for (int b = 0; b < p; b += 2 * w) in[(size_t)b] = f(in[(size_t)b], in[(size_t)(b + w)]);
  return in[0];
}

// ---- elements of the four types, as double ----------------------------------

double load(koloDataType_t t, const unsigned char *p) {
  if (t == koloFloat64) {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  if (t == koloFloat32) {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, p, 2);
  return t == koloFloat16 ? kolo_half_to_float(h) : kolo_bf16_to_float(h);
}

void store(koloDataType_t t, unsigned char *p, double x) {
  if (t == koloFloat64) {
    memcpy(p, &x, 8);
  } else if (t == koloFloat32) {
    float v = (float)x;
    memcpy(p, &v, 4);
  } else {
    uint16_t h = t == koloFloat16 ? kolo_float_to_half((float)x) : kolo_float_to_bf16((float)x);
    memcpy(p, &h, 2);
  }
}

// Tolerance, relative to max(|expected element|, the largest input): every
// value the call rounds is a combination of inputs with coefficients near 1
// (the inputs share a common part, so 1 - a.b / (2|a|^2) stays within about
// [0.3, 1.5]), each level rounds once to the type (float: 2^-24 ~ 6e-8) and
// its coefficients come from dot products of rounded values; over at most
// 4 levels (8 ranks: fold none, 3 tree levels) that is below ~2e-6 of the
// scale for float, with 5x to spare at 1e-5.  Double: 2^-53 ~ 1e-16, 1e-12.
// float16 (2^-11) and bfloat16 (2^-8) round far more coarsely.
double tolerance(koloDataType_t t) {
  switch (t) {
    case koloFloat64: return 1e-12;
    case koloFloat32: return 1e-5;
    case koloFloat16: return 8e-3;
    default: return 5e-2;
  }
}

// ---- one call on every rank ---------------------------------------------------

struct AdaCase {
  koloDataType_t type = koloFloat32;
  size_t count = 0;
  bool in_place = false;
  bool unaligned = false;
  int zero_rank = -1;  // this rank's input is all zeros
  unsigned seed = 1;
  std::string str() const {
    const char *name = type == koloFloat32 ? "float32" : type == koloFloat64 ? "float64"
                       : type == koloFloat16 ? "float16" : "bfloat16";
    return std::string(name) + " count " + std::to_string(count) + (in_place ? " in place" : " out of place") +
           (unaligned ? " unaligned" : "") + (zero_rank >= 0 ? " zero rank " + std::to_string(zero_rank) : "");
  }
};

// Rank r's input: a part common to all ranks plus 0.6 x its own noise, so
// that the coefficients are far from 1 (Adasum then differs from a sum).
std::vector<Vec> make_inputs(const AdaCase &c, int n) {
  std::mt19937_64 gen(c.seed * 7919u + (unsigned)n);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Vec base(c.count);
  for (double &x : base) x = u(gen);
  std::vector<Vec> in((size_t)n, Vec(c.count));
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < c.count; i++) in[(size_t)r][i] = r == c.zero_rank ? 0.0 : base[i] + 0.6 * u(gen);
  return in;
}

struct RankBuf {
  std::vector<unsigned char> send, recv;  // with room to shift
  unsigned char *sp = nullptr, *rp = nullptr;
};

// Fills rank r's buffers (rounding the inputs to the type in `in`) and
// poisons its output.
void prepare(const AdaCase &c, int r, Vec *in, RankBuf *b) {
  size_t esz = koloTypeSize(c.type), bytes = c.count * esz;
  b->send.assign(bytes + 16, 0);
  b->recv.assign(bytes + 16, 0xA5);  // 0xA5 bytes: a NaN-free value no result has
  size_t shift = c.unaligned ? (size_t)(1 + r % 3) : 0;
  b->sp = b->send.data() + shift;
  b->rp = c.in_place ? b->sp : b->recv.data() + (c.unaligned ? (size_t)(3 - r % 3) : 0);
  for (size_t i = 0; i < c.count; i++) {
    store(c.type, b->sp + i * esz, (*in)[i]);
    (*in)[i] = load(c.type, b->sp + i * esz);
  }
}

// The first few elements of out that differ from want by more than the
// tolerance, or "".
std::string compare(const AdaCase &c, const unsigned char *out, const Vec &want, double scale) {
  size_t esz = koloTypeSize(c.type), bad = 0;
  std::string msg;
  for (size_t i = 0; i < c.count; i++) {
    double got = load(c.type, out + i * esz), tol = tolerance(c.type) * std::max(std::fabs(want[i]), scale);
    if (std::fabs(got - want[i]) <= tol) continue;  // a NaN fails here too
    if (bad++ < 4) msg += " [" + std::to_string(i) + "] " + std::to_string(got) + " != " + std::to_string(want[i]);
  }
  return bad ? std::to_string(bad) + " element(s) off:" + msg : "";
}

double largest(const std::vector<Vec> &in) {
  double m = 0;
  for (const Vec &v : in)
    for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Runs c on every rank of w (blocking); fills *in with the rounded inputs
// and *bufs with the outputs; "" or the first failed call.
std::string run_case(ThreadWorld &w, const AdaCase &c, std::vector<Vec> *in, std::vector<RankBuf> *bufs) {
  const int n = w.nranks();
  *in = make_inputs(c, n);
  bufs->assign((size_t)n, RankBuf());
  for (int r = 0; r < n; r++) prepare(c, r, &(*in)[(size_t)r], &(*bufs)[(size_t)r]);
  std::vector<std::string> errs((size_t)n);
  w.pool.run([&](int r) {
    RankBuf &b = (*bufs)[(size_t)r];
    koloResult_t res = koloAdasum(b.sp, b.rp, c.count, c.type, w.comms[(size_t)r], nullptr);
    if (res != koloSuccess)
      errs[(size_t)r] = "rank " + std::to_string(r) + ": " + koloGetErrorString(res) + ": " + koloGetLastError(w.comms[(size_t)r]);
  });
  for (const std::string &e : errs)
    if (!e.empty()) return e;
  return "";
}

// "" when every rank's output matches the reference of f and rank 0's bits.
std::string check_case(const AdaCase &c, const std::vector<Vec> &in, const std::vector<RankBuf> &bufs, const Combine &f) {
  Vec want = reference(in, f);
  double scale = largest(in);
  size_t bytes = c.count * koloTypeSize(c.type);
  for (size_t r = 0; r < bufs.size(); r++) {
    std::string e = compare(c, bufs[r].rp, want, scale);
    if (!e.empty()) return "rank " + std::to_string(r) + ": " + e;
    if (bytes && memcmp(bufs[r].rp, bufs[0].rp, bytes) != 0) return "rank " + std::to_string(r) + " differs from rank 0";
  }
  return "";
}

// ---- the grid -----------------------------------------------------------------

class Adasum : public ::testing::TestWithParam<int> {};

TEST_P(Adasum, EveryElementMatchesTheReference) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << koloGetErrorString(w.init_result) << ": " << w.init_error;
  unsigned seed = 1;
  for (koloDataType_t t : {koloFloat32, koloFloat64})
    for (size_t count : {0, 1, 2, 3, 7, 33, 1000, 4099, 300001})
      for (int mode = 0; mode < 3; mode++) {  // out of place, unaligned out of place, unaligned in place
        AdaCase c;
        c.type = t;
        c.count = count;
        c.unaligned = mode > 0;
        c.in_place = mode == 2;
        c.seed = seed++;
        std::vector<Vec> in;
        std::vector<RankBuf> bufs;
        ASSERT_EQ(run_case(w, c, &in, &bufs), "") << c.str();
        EXPECT_EQ(check_case(c, in, bufs, adasum2), "") << c.str() << ", " << n << " ranks";
      }
}

// A zero vector (on the first, a middle and the last rank) leaves the
// others' combination as it is: its coefficient rule is exercised.
TEST_P(Adasum, ZeroVectorOnOneRank) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (int z : {0, n / 2, n - 1}) {
    AdaCase c;
    c.count = 257;
    c.zero_rank = z;
    c.seed = 100 + (unsigned)z;
    std::vector<Vec> in;
    std::vector<RankBuf> bufs;
    ASSERT_EQ(run_case(w, c, &in, &bufs), "") << c.str();
    EXPECT_EQ(check_case(c, in, bufs, adasum2), "") << c.str() << ", " << n << " ranks";
  }
}

// float16 and bfloat16: widened to double, rounded back once per level.
TEST_P(Adasum, HalfTypes) {
  const int n = GetParam();
  ThreadWorld w(n);
  ASSERT_TRUE(w.ok()) << w.init_error;
  for (koloDataType_t t : {koloFloat16, koloBfloat16})
    for (size_t count : {1, 37, 4099}) {
      AdaCase c;
      c.type = t;
      c.count = count;
      c.unaligned = true;
      c.seed = 200 + (unsigned)count;
      std::vector<Vec> in;
      std::vector<RankBuf> bufs;
      ASSERT_EQ(run_case(w, c, &in, &bufs), "") << c.str();
      EXPECT_EQ(check_case(c, in, bufs, adasum2), "") << c.str() << ", " << n << " ranks";
    }
}

INSTANTIATE_TEST_SUITE_P(Threads, Adasum, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// ---- ranks as processes -------------------------------------------------------

// Memory shared with forked children (MAP_SHARED): where each child leaves
// its outputs for this process to check.
class SharedBytes {
 public:
  explicit SharedBytes(size_t bytes) : size_(bytes ? bytes : 1) {
    void *p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char *>(p);
  }
  ~SharedBytes() {
    if (data_) munmap(data_, size_);
  }
  SharedBytes(const SharedBytes &) = delete;
  SharedBytes &operator=(const SharedBytes &) = delete;
  unsigned char *data() const { return data_; }

 private:
  size_t size_;
  unsigned char *data_ = nullptr;
};

// The cases of one run: float32 and float64 at uneven counts, out of place
// and unaligned in place; float16 and bfloat16; a zero vector on the last
// rank.  Seeds differ per case and rank count.
std::vector<AdaCase> proc_cases(int n) {
  std::vector<AdaCase> cases;
  unsigned seed = 500 + 100 * (unsigned)n;
  for (koloDataType_t t : {koloFloat32, koloFloat64})
    for (size_t count : {1, 7, 4099, 70001})
      for (bool in_place : {false, true}) {
        AdaCase c;
        c.type = t;
        c.count = count;
        c.in_place = c.unaligned = in_place;
        c.seed = seed++;
        cases.push_back(c);
      }
  for (koloDataType_t t : {koloFloat16, koloBfloat16}) {
    AdaCase c;
    c.type = t;
    c.count = 1037;
    c.unaligned = true;
    c.seed = seed++;
    cases.push_back(c);
  }
  AdaCase z;
  z.count = 257;
  z.zero_rank = n - 1;
  z.seed = seed++;
  cases.push_back(z);
  return cases;
}

// Child `rank` of n: joins with koloCommInitRank, runs every case on its
// own (forked) copy of the buffers and leaves each output in `shared` at
// its offset; 0, or 1 and a line on stderr.
int adasum_child(int n, int rank, const koloUniqueId &id, const std::vector<AdaCase> &cases,
                 std::vector<std::vector<RankBuf>> &bufs, const std::vector<size_t> &offsets, unsigned char *shared) {
  koloComm_t comm = nullptr;
  koloResult_t res = koloCommInitRank(&comm, n, id, rank);
  if (res != koloSuccess) {
    std::fprintf(stderr, "rank %d: koloCommInitRank: %s: %s\n", rank, koloGetErrorString(res), koloGetLastError(nullptr));
    return 1;
  }
  for (size_t k = 0; k < cases.size(); k++) {
    RankBuf &b = bufs[k][(size_t)rank];
    size_t bytes = cases[k].count * koloTypeSize(cases[k].type);
    res = koloAdasum(b.sp, b.rp, cases[k].count, cases[k].type, comm, nullptr);
    if (res != koloSuccess) {
      std::fprintf(stderr, "rank %d: %s: %s: %s\n", rank, cases[k].str().c_str(), koloGetErrorString(res),
                   koloGetLastError(comm));
      return 1;
    }
    std::memcpy(shared + offsets[k] + (size_t)rank * bytes, b.rp, bytes);
  }
  return koloCommDestroy(comm) == koloSuccess ? 0 : 1;
}

class AdasumProcs : public ::testing::TestWithParam<int> {};

// Every rank a forked process: inputs and poisoned outputs are made here
// before the fork, each child runs the cases on its communicator, and this
// process checks every rank's output against the double reference and
// rank 0's bits, as for threads.
TEST_P(AdasumProcs, EveryElementMatchesTheReference) {
  const int n = GetParam();
  const std::vector<AdaCase> cases = proc_cases(n);
  std::vector<std::vector<Vec>> in(cases.size());
  std::vector<std::vector<RankBuf>> bufs(cases.size(), std::vector<RankBuf>((size_t)n));
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t k = 0; k < cases.size(); k++) {
    in[k] = make_inputs(cases[k], n);
    for (int r = 0; r < n; r++) prepare(cases[k], r, &in[k][(size_t)r], &bufs[k][(size_t)r]);
    offsets.push_back(total);
    total += (size_t)n * cases[k].count * koloTypeSize(cases[k].type);
  }
  SharedBytes shared(total);
  ASSERT_NE(shared.data(), nullptr) << "mmap of " << total << " shared bytes failed";
  std::vector<ChildResult> res = run_children_with_id(
      n, [&](int r, const koloUniqueId &id) { return adasum_child(n, r, id, cases, bufs, offsets, shared.data()); },
      120000);
  ASSERT_EQ(children_failures(res), "");
  for (size_t k = 0; k < cases.size(); k++) {
    size_t bytes = cases[k].count * koloTypeSize(cases[k].type);
    for (int r = 0; r < n; r++) std::memcpy(bufs[k][(size_t)r].rp, shared.data() + offsets[k] + (size_t)r * bytes, bytes);
    EXPECT_EQ(check_case(cases[k], in[k], bufs[k], adasum2), "") << cases[k].str() << ", " << n << " processes";
  }
}

INSTANTIATE_TEST_SUITE_P(Procs, AdasumProcs, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int> &p) { return std::to_string(p.param) + "ranks"; });

// One rank: the output is the input, bit for bit.
TEST(AdasumOneRank, OutputIsTheInput) {
  ThreadWorld w(1);
  ASSERT_TRUE(w.ok()) << w.init_error;
  AdaCase c;
  c.count = 1001;
  c.unaligned = true;
  std::vector<Vec> in;
  std::vector<RankBuf> bufs;
  ASSERT_EQ(run_case(w, c, &in, &bufs), "");
  EXPECT_EQ(memcmp(bufs[0].rp, bufs[0].sp, c.count * 4), 0);
}

// The check itself catches a wrong combine: the library's output, right by
// the reference above, is wrong by a reference with the coefficients'
// norms swapped, by a plain sum, by an average, and by another tree (the
// extra rank folded into the last rank instead of rank 0; pairs (0,2),
// (1,3)).  So a library that combined that way would fail the grid.
TEST(AdasumCheck, AWrongCombineFails) {
  Combine swapped = [](const Vec &a, const Vec &b) {
    double dot = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); i++) dot += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
    Vec out(a.size());
    for (size_t i = 0; i < a.size(); i++) out[i] = coefficient(dot, bb) * a[i] + coefficient(dot, aa) * b[i];
    return out;
  };
  Combine sum = [](const Vec &a, const Vec &b) {
    Vec out(a.size());
    for (size_t i = 0; i < a.size(); i++) out[i] = a[i] + b[i];
    return out;
  };
  Combine average = [&](const Vec &a, const Vec &b) {
    Vec out = sum(a, b);
    for (double &x : out) x /= 2;
    return out;
  };
  for (int n : {3, 4}) {
    ThreadWorld w(n);
    ASSERT_TRUE(w.ok()) << w.init_error;
    AdaCase c;
    c.count = 33;
    c.seed = 7;
    std::vector<Vec> in;
    std::vector<RankBuf> bufs;
    ASSERT_EQ(run_case(w, c, &in, &bufs), "");
    EXPECT_EQ(check_case(c, in, bufs, adasum2), "");
    EXPECT_NE(check_case(c, in, bufs, swapped), "") << n << " ranks: swapped norms passed";
    EXPECT_NE(check_case(c, in, bufs, sum), "") << n << " ranks: a sum passed";
    EXPECT_NE(check_case(c, in, bufs, average), "") << n << " ranks: an average passed";
    std::vector<Vec> other = in;  // another tree: ranks reordered 0, 2, 1, (3)
    std::swap(other[1], other[2]);
    EXPECT_NE(check_case(c, other, bufs, adasum2), "") << n << " ranks: another tree passed";
  }
}

// ---- non-blocking communicators -------------------------------------------------

// config.blocking = 0: each rank's call returns koloInProgress (one thread
// issues all of them, two calls in a row per communicator), runs on the
// progress threads, and koloCommGetAsyncError reaches koloSuccess.
TEST(AdasumNonBlocking, ReturnsInProgressThenCompletes) {
  for (int n : {2, 3, 4}) {
    koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ThreadWorld w(n, ThreadWorld::Init::kInitAll, &cfg);
    ASSERT_TRUE(w.ok()) << w.init_error;
    AdaCase cases[2];
    cases[0].count = 4099;
    cases[0].seed = 300;
    cases[1].type = koloFloat64;
    cases[1].count = 70001;
    cases[1].in_place = cases[1].unaligned = true;
    cases[1].seed = 301;
    std::vector<Vec> in[2];
    std::vector<RankBuf> bufs[2];
    for (int k = 0; k < 2; k++) {
      in[k] = make_inputs(cases[k], n);
      bufs[k].assign((size_t)n, RankBuf());
      for (int r = 0; r < n; r++) prepare(cases[k], r, &in[k][(size_t)r], &bufs[k][(size_t)r]);
    }
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < n; r++) {
        RankBuf &b = bufs[k][(size_t)r];
        ASSERT_EQ(koloAdasum(b.sp, b.rp, cases[k].count, cases[k].type, w.comms[(size_t)r], nullptr), koloInProgress)
            << koloGetLastError(w.comms[(size_t)r]);
      }
    double t0 = now_ms();
    for (int r = 0; r < n; r++) {
      koloResult_t async = koloInProgress;
      while (async == koloInProgress && now_ms() - t0 < 60000) {
        ASSERT_EQ(koloCommGetAsyncError(w.comms[(size_t)r], &async), koloSuccess);
        if (async == koloInProgress) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      ASSERT_EQ(async, koloSuccess) << "rank " << r << ": " << koloGetLastError(w.comms[(size_t)r]);
    }
    for (int k = 0; k < 2; k++) EXPECT_EQ(check_case(cases[k], in[k], bufs[k], adasum2), "") << cases[k].str();
  }
}

// ---- bad input --------------------------------------------------------------------

// Refusals come before any exchange, so one thread may call for one rank.
TEST(AdasumErrors, BadArgumentsAreNamed) {
  ThreadWorld w(2);
  ASSERT_TRUE(w.ok()) << w.init_error;
  koloComm_t comm = w.comms[0];
  std::vector<float> buf(64, 1.0f);
  EXPECT_EQ(koloAdasum(buf.data(), buf.data(), 4, koloFloat32, nullptr, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(nullptr), "comm is NULL");
  EXPECT_EQ(koloAdasum(buf.data(), buf.data(), 4, koloInt32, comm, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(comm), "koloAdasum: datatype int32");
  EXPECT_EQ(koloAdasum(buf.data(), buf.data(), 4, (koloDataType_t)99, comm, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(comm), "datatype 99");
  EXPECT_EQ(koloAdasum(nullptr, buf.data(), 4, koloFloat32, comm, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(comm), "koloAdasum: sendbuff is NULL");
  EXPECT_EQ(koloAdasum(buf.data(), nullptr, 4, koloFloat32, comm, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(comm), "koloAdasum: recvbuff is NULL");
  EXPECT_EQ(koloAdasum(buf.data(), buf.data() + 1, 4, koloFloat32, comm, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(comm), "sendbuff and recvbuff overlap");
  EXPECT_EQ(koloAdasum(buf.data(), buf.data(), SIZE_MAX / 2, koloFloat32, comm, nullptr), koloInvalidArgument);
  EXPECT_CONTAINS(koloGetLastError(comm), "overflows");
  ASSERT_EQ(koloGroupStart(), koloSuccess);
  EXPECT_EQ(koloAdasum(buf.data(), buf.data(), 4, koloFloat32, comm, nullptr), koloInvalidUsage);
  EXPECT_CONTAINS(koloGetLastError(comm), "between koloGroupStart and koloGroupEnd");
  ASSERT_EQ(koloGroupEnd(), koloSuccess);
  // count 0 needs no buffers and no peer
  EXPECT_EQ(koloAdasum(nullptr, nullptr, 0, koloFloat64, comm, nullptr), koloSuccess);
  // the communicator still works on both ranks afterwards
  AdaCase c;
  c.count = 5;
  std::vector<Vec> in;
  std::vector<RankBuf> bufs;
  ASSERT_EQ(run_case(w, c, &in, &bufs), "");
  EXPECT_EQ(check_case(c, in, bufs, adasum2), "");
}

}  // namespace
