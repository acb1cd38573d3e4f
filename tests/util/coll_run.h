// coll_run.h - one rank's side of an end-to-end collective test: buffers
// with guards and poison, the call with NCCL's in-place conventions, and the
// check of everything the call wrote and everything it must not have written.
//
// Per case, every rank runs prepare -> issue -> check; the expected result
// (expected_for) is the same array for every rank, each rank checking its
// window of it, so threads share one copy and processes build their own.
//
// Buffers (rank r, n ranks, count c; "input" = kt::fill_input data of rank r):
//   all-reduce      send c, recv c              in place: one buffer of c
//   reduce-scatter  send n*c, recv c            in place: recv = send + r*c
//   all-gather      send c, recv n*c            in place: send = recv + r*c
//   broadcast       send c (root's input; non-roots' send holds a decoy that
//                   must not be read or written), recv c
//                                               in place: one buffer, root's
//                                               holds the input, others poison
//   reduce          send c, recv c (written on the root only: a non-root's
//                   recv must keep its poison; in place its input)
//   send/recv       rank r sends c elements to (r + root) % n and receives c
//                   from (r - root) % n, in one group (root = the shift)
//   all-to-all      send n*c, recv n*c (no in-place form)
//   gather          send c, recv n*c on the root; a non-root's recv is NULL or
//                   n*c of poison that must stay
//                                               in place (root): send = recv + root*c
//   scatter         send n*c on the root (a non-root's is NULL or a decoy that
//                   must not change), recv c    in place (root): recv = send + root*c
//   bcast           koloBcast: broadcast's in-place buffers (only in place)
// Every output starts poisoned with a byte pattern that depends on the seed;
// every buffer sits between guard bytes (and, when misaligned, 1..7 bytes of
// poison) that must stay untouched, and inputs that are not outputs must come
// back unchanged (sendbuff is const).  With count 0 out-of-place calls pass
// NULL buffers (allowed by the API).
#ifndef KOLO_TESTS_UTIL_COLL_RUN_H
#define KOLO_TESTS_UTIL_COLL_RUN_H

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "kolo.h"
#include "util/coll_ref.h"

namespace kt {

enum class Coll { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, SendRecv, AlltoAll, Gather, Scatter, Bcast };
// The collectives of the first grids, and the multi-peer ones (their
// own, smaller grids: see peer_grid).
constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather,
                              Coll::Broadcast, Coll::Reduce,        Coll::SendRecv};
constexpr Coll kPeerColls[] = {Coll::AlltoAll, Coll::Gather, Coll::Scatter, Coll::Bcast};

const char *coll_name(Coll c);
// For gtest's parameter printing.
inline void PrintTo(Coll c, std::ostream *os) { *os << coll_name(c); }
bool has_op(Coll c);        // takes a reduction op
bool has_in_place(Coll c);  // has an in-place form
bool has_out_of_place(Coll c);  // has an out-of-place form (all but bcast)
// Whether a collective is rooted (broadcast, reduce, gather, scatter, bcast).
bool is_rooted(Coll c);

struct CollCase {
  Coll coll = Coll::AllReduce;
  koloDataType_t type = koloFloat32;
  koloRedOp_t op = koloSum;  // ignored (sum) when !has_op(coll)
  int nranks = 1;
  size_t count = 0;  // the API's count: recvcount (reduce-scatter), sendcount (all-gather)
  int root = 0;      // broadcast / reduce root; send/recv shift
  bool in_place = false;
  int misalign = 0;  // 0: aligned; k > 0: rank r's buffers start (k + r) % 8 and
                     // (k + r + 3) % 8 bytes past a 64-byte boundary
  uint64_t seed = 0;
  std::string str() const;
};

// Sets case.seed from the base seed and the case's other fields.
void seed_case(CollCase *c);

// A seeded case of the end-to-end grids: op ignored (sum) where the
// collective takes none; `variant` (the case's index in its grid) picks the
// root / shift (variant % n) and, for every third case, a misalignment of
// 1..7 bytes.
CollCase make_case(Coll coll, koloDataType_t t, koloRedOp_t op, int n, size_t count, bool in_place, int variant);

// The end-to-end grids (test_e2e_threads, test_e2e_cuda).  Small: every
// dtype x op (the premul-sum included; sum only where the collective takes
// none) x the counts of kSmallCounts (0, 1, odd, one short of a page of
// floats) x out of / in place.  Large (kLargeCount elements, a few past
// 2^20): per (collective, n in {2, 3, 4, 8}) float32 sum out of place,
// float32 with another op in place, and other dtypes (three for all-reduce
// where there are, one for the rest); over the 4 rank counts every op and
// every dtype comes up for all-reduce.
constexpr size_t kLargeCount = (1u << 20) + 3;
extern const size_t kSmallCounts[4];
std::vector<CollCase> small_grid(Coll coll, int n);
std::vector<CollCase> large_grid(Coll coll, int n);
// A few cases per collective, every collective: the types and ops that
// exercise different code (integer wrap, 16-bit floats, float64) in turn,
// at each of `counts`, in and out of place; variants from variant0.
std::vector<CollCase> sample_cases(int n, std::initializer_list<size_t> counts, int variant0 = 0);
// The grid of the collectives of kPeerColls (copies: no op): dtypes in turn
// (every dtype comes up over the counts) x counts {0, 1, 7, 4095} x in and
// out of place where the collective has them; roots from the variant.
// large adds count kLargeCount / n (all-to-all, whose buffers hold n
// blocks) or kLargeCount (the rest) in float32 and another dtype.
std::vector<CollCase> peer_grid(Coll coll, int n, bool large = false);

// `bytes` bytes at byte offset `offset` (0..7) past a 64-byte boundary, with
// guard bytes on both sides; all poisoned with `poison` on alloc.
class GuardedBuf {
 public:
  static constexpr size_t kGuard = 128;
  GuardedBuf() = default;
  ~GuardedBuf();
  GuardedBuf(const GuardedBuf &) = delete;
  GuardedBuf &operator=(const GuardedBuf &) = delete;
  void alloc(size_t bytes, int offset, unsigned char poison);
  char *data() const { return base_ ? base_ + kGuard + offset_ : nullptr; }
  size_t bytes() const { return bytes_; }
  // "" when every byte outside [data, data + bytes) still holds the poison.
  std::string check_guards(const char *what) const;
  // Index of the first byte in [off, off + len) of the payload that is not
  // the poison, or -1.
  long first_unpoisoned(size_t off, size_t len) const;

 private:
  char *base_ = nullptr;
  size_t total_ = 0, bytes_ = 0;
  int offset_ = 0;
  unsigned char poison_ = 0;
};

struct RankBufs {
  GuardedBuf a, b;  // a: sendbuff (or the only buffer in place), b: recvbuff
  const void *send = nullptr;
  void *recv = nullptr;
  std::vector<unsigned char> a_before;  // a's payload after prepare
  uint64_t scalar = 0;  // a premul-sum's scalar (read from here when the call runs: koloScalarDevice)
};

// A premul-sum case's scalar residence: by the case's seed, half of them
// koloScalarDevice (on a host communicator: a host pointer, read when the
// call runs), half koloScalarHostImmediate.
koloScalarResidence_t premul_residence(const CollCase &c);
// The op of rank's call: c.op, or for kPreMulSum (in a collective that takes
// an op) one made now on comm with rank's scalar, read at `scalar`, which
// holds premul_scalar_bits (host or device memory after the communicator's
// kind; for koloScalarDevice it must hold it until the call ran).
koloResult_t make_call_op(const CollCase &c, const void *scalar, koloComm_t comm, koloRedOp_t *op);
// After the call returned (not necessarily ran): destroys what make_call_op
// made, as NCCL allows.  What koloRedOpDestroy returned, or koloSuccess.
koloResult_t free_call_op(const CollCase &c, koloRedOp_t op, koloComm_t comm);
// Whether case c calls with a premul-sum op.
bool is_premul(const CollCase &c);

// The poison byte of a case.
unsigned char poison_of(const CollCase &c);
void prepare(const CollCase &c, int rank, RankBufs *bufs);
// The call(s) of rank on comm (send/recv: one group).  Returns what the API returned.
koloResult_t issue(const CollCase &c, int rank, RankBufs *bufs, koloComm_t comm);
// The expected array of a case: init sizes it, fill sets [begin, end) (so
// that threads can share the work), expected_for does both.
void expected_init(const CollCase &c, Expected *e);
void expected_fill(const CollCase &c, Expected *e, size_t begin, size_t end);
void expected_for(const CollCase &c, Expected *e);
// The part [*begin, *end) of the expected array that `rank` checks, and
// expected_init + expected_fill of that part only (processes: each builds
// what it needs).
void expected_window(const CollCase &c, int rank, size_t *begin, size_t *end);
void expected_for_rank(const CollCase &c, int rank, Expected *e);
std::string check(const CollCase &c, int rank, const RankBufs &bufs, const Expected &e);
// prepare + issue + check on a blocking communicator; "" or what went wrong.
std::string run_rank(const CollCase &c, int rank, koloComm_t comm, const Expected &e);

// ---- ranks as threads -------------------------------------------------------

// n persistent threads; run(fn) calls fn(rank) on thread `rank` for every
// rank at once and returns when all have returned.
class RankPool {
 public:
  explicit RankPool(int n);
  ~RankPool();
  RankPool(const RankPool &) = delete;
  RankPool &operator=(const RankPool &) = delete;
  void run(const std::function<void(int)> &fn);
  int size() const { return (int)threads_.size(); }

 private:
  void loop(int rank);
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)> *fn_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// ---- misc -------------------------------------------------------------------

// Monotonic milliseconds.
double now_ms();
// True when built with a sanitizer (ASan / TSan): the grids skip their large
// sizes unless KOLO_TEST_FULL=1.
bool sanitized_build();
// True when built with ThreadSanitizer (which cannot follow fork() from a
// process with threads: the tests that fork skip there).
bool tsan_build();
// Sets KOLO_TIMEOUT_MS (unless already set) so that a hang in a test turns
// into an error instead of ctest's timeout.
void default_test_timeout(int ms);
// "what failed: <result string>: <koloGetLastError(comm)>"
std::string result_text(const char *what, koloResult_t res, koloComm_t comm);
// One rank's side of a list of cases on comm, in order: prepare, issue,
// check; prints each failure to stderr and stops at the first failed call
// (the communicator is unusable after it).  Returns the number of failures.
// Last, it writes kCasesCheckedTag and the number of cases that passed their
// check on a line of stderr, for a parent process to count.
constexpr const char *kCasesCheckedTag = "kt: cases checked: ";
int run_cases(koloComm_t comm, int rank, const std::vector<CollCase> &cases);

}  // namespace kt

#endif
