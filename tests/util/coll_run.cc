// coll_run.cc - see coll_run.h.
#include "util/coll_run.h"

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace kt {

const char *coll_name(Coll c) {
  switch (c) {
  case Coll::AllReduce: return "AllReduce";
  case Coll::ReduceScatter: return "ReduceScatter";
  case Coll::AllGather: return "AllGather";
  case Coll::Broadcast: return "Broadcast";
  case Coll::Reduce: return "Reduce";
  case Coll::SendRecv: return "SendRecv";
  case Coll::AlltoAll: return "AlltoAll";
  case Coll::Gather: return "Gather";
  case Coll::Scatter: return "Scatter";
  case Coll::Bcast: return "Bcast";
  }
  return "?";
}

bool has_op(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }
bool has_in_place(Coll c) { return c != Coll::SendRecv && c != Coll::AlltoAll; }
bool has_out_of_place(Coll c) { return c != Coll::Bcast; }
bool is_rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter || c == Coll::Bcast;
}

static koloRedOp_t gen_op(const CollCase &c) { return has_op(c.coll) ? c.op : koloSum; }

std::string CollCase::str() const {
  std::ostringstream s;
  s << coll_name(coll) << " " << type_name(type);
  if (has_op(coll)) s << " " << op_name(op);
  if (is_premul(*this))
    s << (premul_residence(*this) == koloScalarDevice ? " (scalar read at run time)" : " (scalar immediate)");
  s << " nranks=" << nranks << " count=" << count;
  if (is_rooted(coll)) s << " root=" << root;
  if (coll == Coll::SendRecv) s << " shift=" << root;
  s << (in_place ? " in-place" : " out-of-place");
  if (misalign) s << " misalign=" << misalign;
  s << " seed=0x" << std::hex << seed;
  return s.str();
}

void seed_case(CollCase *c) {
  uint64_t h = base_seed();
  h = mix64(h ^ (uint64_t)c->coll);
  h = mix64(h ^ (uint64_t)c->type);
  h = mix64(h ^ (uint64_t)c->op);
  h = mix64(h ^ (uint64_t)c->nranks);
  h = mix64(h ^ (uint64_t)c->count);
  h = mix64(h ^ (uint64_t)c->root ^ ((uint64_t)c->in_place << 32) ^ ((uint64_t)c->misalign << 40));
  c->seed = h;
}

CollCase make_case(Coll coll, koloDataType_t t, koloRedOp_t op, int n, size_t count, bool in_place,
                   int variant) {
  CollCase c;
  c.coll = coll;
  c.type = t;
  c.op = has_op(coll) ? op : koloSum;
  c.nranks = n;
  c.count = count;
  c.in_place = in_place;
  c.root = variant % n;
  c.misalign = variant % 3 == 0 ? 1 + (variant / 3) % 7 : 0;
  seed_case(&c);
  return c;
}

const size_t kSmallCounts[4] = {0, 1, 7, 4095};

std::vector<CollCase> small_grid(Coll coll, int n) {
  std::vector<CollCase> cases;
  int variant = 0;
  for (koloDataType_t t : kAllTypes)
    for (koloRedOp_t op : kAllOps) {
      if (!has_op(coll) && op != koloSum) continue;
      for (size_t count : kSmallCounts)
        for (int ip = 0; ip < (has_in_place(coll) ? 2 : 1); ip++)
          cases.push_back(make_case(coll, t, op, n, count, ip == 1, variant++));
    }
  return cases;
}

std::vector<CollCase> large_grid(Coll coll, int n) {
  static const int kRanks[] = {2, 3, 4, 8};
  int slot = 0;
  while (slot < 3 && kRanks[slot] != n) slot++;
  static const koloDataType_t kOthers[] = {koloInt8,   koloUint8,   koloInt32,    koloUint32,
                                           koloInt64,  koloUint64,  koloFloat16,  koloBfloat16,
                                           koloFloat64, koloFloat8e4m3, koloFloat8e5m2};
  constexpr int kNumOthers = sizeof kOthers / sizeof kOthers[0];
  constexpr int kNumOps = sizeof kAllOps / sizeof kAllOps[0];
  std::vector<CollCase> cases;
  cases.push_back(make_case(coll, koloFloat32, koloSum, n, kLargeCount, false, 1));
  if (has_in_place(coll))
    cases.push_back(make_case(coll, koloFloat32, kAllOps[1 + slot], n, kLargeCount, true, 2));
  for (int k = 0; k < kNumOthers; k += 4) {  // dtypes slot, slot + 4, slot + 8 (< 11)
    int i = slot + k;
    if (i >= kNumOthers || (k > 0 && coll != Coll::AllReduce)) continue;
    koloRedOp_t op = kAllOps[(slot + k) % kNumOps];
    cases.push_back(make_case(coll, kOthers[i], op, n, kLargeCount, i % 2 == 1, 3 + i));
  }
  return cases;
}

std::vector<CollCase> peer_grid(Coll coll, int n, bool large) {
  std::vector<CollCase> cases;
  int variant = 0;
  int k = 0;  // every dtype at count 7, a third of them in turn at the others
  for (size_t count : kSmallCounts)
    for (koloDataType_t t : kAllTypes) {
      if (count != 7 && k++ % 3 != 0) continue;
      for (int ip = has_out_of_place(coll) ? 0 : 1; ip <= (has_in_place(coll) ? 1 : 0); ip++)
        cases.push_back(make_case(coll, t, koloSum, n, count, ip == 1, variant++));
    }
  if (!large) return cases;
  const size_t big = coll == Coll::AlltoAll ? kLargeCount / (size_t)n : kLargeCount;
  cases.push_back(make_case(coll, koloFloat32, koloSum, n, big, coll == Coll::Bcast, variant++));
  cases.push_back(make_case(coll, kAllTypes[(size_t)n % 10], koloSum, n, big + 1, has_in_place(coll), variant++));
  return cases;
}

std::vector<CollCase> sample_cases(int n, std::initializer_list<size_t> counts, int variant0) {
  struct TO {
    koloDataType_t t;
    koloRedOp_t op;
  };
  static const TO kPicks[] = {{koloFloat32, koloSum},       {koloInt32, koloMax},     {koloBfloat16, koloSum},
                              {koloFloat16, koloAvg},       {koloUint8, koloProd},    {koloInt64, koloMin},
                              {koloFloat64, koloProd},      {koloFloat32, kPreMulSum}, {koloFloat8e5m2, koloAvg},
                              {koloFloat8e4m3, kPreMulSum}};
  std::vector<CollCase> cases;
  int variant = variant0;
  for (Coll coll : kAllColls)
    for (size_t count : counts)
      for (int ip = 0; ip < (has_in_place(coll) ? 2 : 1); ip++) {
        const TO &p = kPicks[(size_t)variant % (sizeof kPicks / sizeof kPicks[0])];
        cases.push_back(make_case(coll, p.t, p.op, n, count, ip == 1, variant++));
      }
  return cases;
}

// ---- guarded buffers ----------------------------------------------------------

GuardedBuf::~GuardedBuf() { std::free(base_); }

void GuardedBuf::alloc(size_t bytes, int offset, unsigned char poison) {
  std::free(base_);
  total_ = (2 * kGuard + 8 + bytes + 63) / 64 * 64;
  base_ = static_cast<char *>(std::aligned_alloc(64, total_));
  if (base_ == nullptr) std::abort();
  bytes_ = bytes;
  offset_ = offset;
  poison_ = poison;
  std::memset(base_, poison, total_);
}

std::string GuardedBuf::check_guards(const char *what) const {
  if (base_ == nullptr) return "";
  size_t start = kGuard + (size_t)offset_, end = start + bytes_;
  for (size_t i = 0; i < total_; i++) {
    if (i >= start && i < end) continue;
    if ((unsigned char)base_[i] == poison_) continue;
    std::ostringstream s;
    if (i < start) s << what << ": byte " << (start - i) << " before the buffer was written";
    else s << what << ": byte " << (i - end) << " after the end of the buffer was written";
    return s.str();
  }
  return "";
}

long GuardedBuf::first_unpoisoned(size_t off, size_t len) const {
  const char *p = data();
  for (size_t i = off; i < off + len; i++)
    if ((unsigned char)p[i] != poison_) return (long)i;
  return -1;
}

// ---- one rank's call ----------------------------------------------------------

unsigned char poison_of(const CollCase &c) {
  unsigned char p = (unsigned char)(c.seed >> 56);
  return p == 0 || p == 0xff ? 0xa5 : p;
}

static int offset_of(const CollCase &c, int rank, int which) {
  return c.misalign ? (c.misalign + rank + 3 * which) % 8 : 0;
}

static void prepare_buffers(const CollCase &c, int rank, RankBufs *b);
static void prepare_peer_buffers(const CollCase &c, int rank, RankBufs *b);

static bool is_peer_coll(Coll c) {
  return c == Coll::AlltoAll || c == Coll::Gather || c == Coll::Scatter || c == Coll::Bcast;
}

// A non-root's unused buffer of a gather / scatter: NULL in half the cases
// (the API allows it), else allocated and checked untouched.  Not from the
// seed: a graph replay reseeds a case and must find the same buffers.
static bool unused_is_null(const CollCase &c) {
  return mix64(c.count * 131 + (uint64_t)c.root * 7 + (uint64_t)c.misalign + ((uint64_t)c.type << 20)) & 1;
}

void prepare(const CollCase &c, int rank, RankBufs *b) {
  prepare_buffers(c, rank, b);
  const unsigned char *p = reinterpret_cast<const unsigned char *>(b->a.data());
  b->a_before.assign(p, p + b->a.bytes());
}

static void prepare_buffers(const CollCase &c, int rank, RankBufs *b) {
  const size_t n = (size_t)c.nranks, cnt = c.count, esz = type_size(c.type);
  const koloRedOp_t gop = gen_op(c);
  const unsigned char poison = poison_of(c);
  b->send = nullptr;
  b->recv = nullptr;
  if (is_peer_coll(c.coll)) return prepare_peer_buffers(c, rank, b);
  if (cnt == 0 && !c.in_place) {  // NULL buffers with count 0 are allowed
    b->a.alloc(0, 0, poison);
    b->b.alloc(0, 0, poison);
    return;
  }
  if (c.in_place) {
    size_t elems = (c.coll == Coll::ReduceScatter || c.coll == Coll::AllGather) ? n * cnt : cnt;
    b->a.alloc(elems * esz, offset_of(c, rank, 0), poison);
    char *buf = b->a.data();
    switch (c.coll) {
    case Coll::ReduceScatter:
      fill_input(buf, n * cnt, c.seed, rank, 0, c.type, gop);
      b->send = buf;
      b->recv = buf + (size_t)rank * cnt * esz;
      break;
    case Coll::AllGather:
      fill_input(buf + (size_t)rank * cnt * esz, cnt, c.seed, rank, 0, c.type, gop);
      b->send = buf + (size_t)rank * cnt * esz;
      b->recv = buf;
      break;
    case Coll::Broadcast:
      if (rank == c.root) fill_input(buf, cnt, c.seed, rank, 0, c.type, gop);
      b->send = b->recv = buf;
      break;
    default:  // all-reduce, reduce
      fill_input(buf, cnt, c.seed, rank, 0, c.type, gop);
      b->send = b->recv = buf;
      break;
    }
    return;
  }
  size_t in_elems = c.coll == Coll::ReduceScatter ? n * cnt : cnt;
  size_t out_elems = c.coll == Coll::AllGather ? n * cnt : cnt;
  b->a.alloc(in_elems * esz, offset_of(c, rank, 0), poison);
  b->b.alloc(out_elems * esz, offset_of(c, rank, 1), poison);
  if (c.coll == Coll::Broadcast && rank != c.root)  // a decoy the call must ignore
    fill_input(b->a.data(), in_elems, ~c.seed, rank, 0, c.type, gop);
  else
    fill_input(b->a.data(), in_elems, c.seed, rank, 0, c.type, gop);
  b->send = b->a.data();
  b->recv = b->b.data();
}

bool is_premul(const CollCase &c) { return has_op(c.coll) && c.op == kPreMulSum; }

koloScalarResidence_t premul_residence(const CollCase &c) {
  return (c.seed >> 13) & 1 ? koloScalarDevice : koloScalarHostImmediate;
}

koloResult_t make_call_op(const CollCase &c, const void *scalar, koloComm_t comm, koloRedOp_t *op) {
  *op = c.op;
  if (!is_premul(c)) return koloSuccess;
  return koloRedOpCreatePreMulSum(op, const_cast<void *>(scalar), c.type, premul_residence(c), comm);
}

koloResult_t free_call_op(const CollCase &c, koloRedOp_t op, koloComm_t comm) {
  return is_premul(c) ? koloRedOpDestroy(op, comm) : koloSuccess;
}

static koloResult_t issue_call(const CollCase &c, int rank, RankBufs *b, koloComm_t comm);

// The op is destroyed as soon as the call returned: a non-blocking call
// has not run yet, and must not need it.
// All-to-all, gather, scatter, bcast (coll_run.h).  The root's in-place
// buffer is one allocation of n blocks; a non-root's part in an in-place
// case is as out of place (in-place is the root's matter).
static void prepare_peer_buffers(const CollCase &c, int rank, RankBufs *b) {
  const size_t n = (size_t)c.nranks, cnt = c.count, esz = type_size(c.type);
  const unsigned char poison = poison_of(c);
  const bool root = rank == c.root;
  if (c.coll == Coll::Bcast) {
    b->a.alloc(cnt * esz, offset_of(c, rank, 0), poison);
    if (root) fill_input(b->a.data(), cnt, c.seed, rank, 0, c.type, koloSum);
    b->send = b->recv = b->a.data();
    return;
  }
  if (c.in_place && root) {
    b->a.alloc(n * cnt * esz, offset_of(c, rank, 0), poison);
    char *buf = b->a.data();
    if (c.coll == Coll::Gather) fill_input(buf + (size_t)rank * cnt * esz, cnt, c.seed, rank, 0, c.type, koloSum);
    else fill_input(buf, n * cnt, c.seed, rank, 0, c.type, koloSum);
    b->send = c.coll == Coll::Gather ? buf + (size_t)rank * cnt * esz : buf;
    b->recv = c.coll == Coll::Gather ? buf : buf + (size_t)rank * cnt * esz;
    return;
  }
  const bool a2a = c.coll == Coll::AlltoAll;
  const size_t in_elems = a2a || (c.coll == Coll::Scatter && root) ? n * cnt : cnt;
  const size_t out_elems = a2a || c.coll == Coll::Gather ? n * cnt : cnt;
  const bool no_in = c.coll == Coll::Scatter && !root && unused_is_null(c);
  const bool no_out = c.coll == Coll::Gather && !root && unused_is_null(c);
  b->a.alloc(no_in || cnt == 0 ? 0 : in_elems * esz, offset_of(c, rank, 0), poison);
  b->b.alloc(no_out || cnt == 0 ? 0 : out_elems * esz, offset_of(c, rank, 1), poison);
  if (cnt == 0) return;  // NULL buffers with count 0 are allowed
  if (!no_in) fill_input(b->a.data(), in_elems, c.coll == Coll::Scatter && !root ? ~c.seed : c.seed, rank, 0, c.type, koloSum);
  b->send = no_in ? nullptr : b->a.data();
  b->recv = no_out ? nullptr : b->b.data();
}

koloResult_t issue(const CollCase &c, int rank, RankBufs *b, koloComm_t comm) {
  b->scalar = premul_scalar_bits(c.seed, rank, c.type);
  koloRedOp_t op;
  koloResult_t r = make_call_op(c, &b->scalar, comm, &op);
  if (r != koloSuccess) return r;
  CollCase call = c;
  call.op = op;
  r = issue_call(call, rank, b, comm);
  koloResult_t f = free_call_op(c, op, comm);
  return r != koloSuccess && r != koloInProgress ? r : f != koloSuccess ? f : r;
}

static koloResult_t issue_call(const CollCase &c, int rank, RankBufs *b, koloComm_t comm) {
  switch (c.coll) {
  case Coll::AllReduce:
    return koloAllReduce(b->send, b->recv, c.count, c.type, c.op, comm, nullptr);
  case Coll::ReduceScatter:
    return koloReduceScatter(b->send, b->recv, c.count, c.type, c.op, comm, nullptr);
  case Coll::AllGather: return koloAllGather(b->send, b->recv, c.count, c.type, comm, nullptr);
  case Coll::Broadcast:
    return koloBroadcast(b->send, b->recv, c.count, c.type, c.root, comm, nullptr);
  case Coll::Reduce:
    return koloReduce(b->send, b->recv, c.count, c.type, c.op, c.root, comm, nullptr);
  case Coll::SendRecv: {
    int to = (rank + c.root) % c.nranks, from = (rank - c.root + c.nranks) % c.nranks;
    koloResult_t r = koloGroupStart();
    if (r != koloSuccess) return r;
    koloResult_t r1 = koloSend(b->send, c.count, c.type, to, comm, nullptr);
    koloResult_t r2 = koloRecv(b->recv, c.count, c.type, from, comm, nullptr);
    r = koloGroupEnd();
    if (r1 != koloSuccess) return r1;
    if (r2 != koloSuccess) return r2;
    return r;
  }
  case Coll::AlltoAll: return koloAlltoAll(b->send, b->recv, c.count, c.type, comm, nullptr);
  case Coll::Gather: return koloGather(b->send, b->recv, c.count, c.type, c.root, comm, nullptr);
  case Coll::Scatter: return koloScatter(b->send, b->recv, c.count, c.type, c.root, comm, nullptr);
  case Coll::Bcast: return koloBcast(b->recv, c.count, c.type, c.root, comm, nullptr);
  }
  return koloInternalError;
}

void expected_init(const CollCase &c, Expected *e) {
  const size_t all = (size_t)c.nranks * c.count;
  switch (c.coll) {
  case Coll::AllReduce:
  case Coll::Reduce: expect_init(e, c.type, reduction_is_exact(c.type, c.op), c.count); break;
  case Coll::ReduceScatter: expect_init(e, c.type, reduction_is_exact(c.type, c.op), all); break;
  case Coll::AllGather:
  case Coll::SendRecv:
  case Coll::Gather:
  case Coll::Scatter: expect_init(e, c.type, true, all); break;
  case Coll::Broadcast:
  case Coll::Bcast: expect_init(e, c.type, true, c.count); break;
  case Coll::AlltoAll: expect_init(e, c.type, true, all * (size_t)c.nranks); break;
  }
}

void expected_fill(const CollCase &c, Expected *e, size_t begin, size_t end) {
  const koloRedOp_t gop = gen_op(c);
  switch (c.coll) {
  case Coll::AllReduce:
  case Coll::Reduce:
  case Coll::ReduceScatter: fill_reduction(e, c.seed, c.nranks, begin, end, gop); break;
  case Coll::AllGather:
  case Coll::SendRecv:
  case Coll::Gather: fill_concat(e, c.seed, c.count, begin, end, gop); break;
  case Coll::Broadcast:
  case Coll::Bcast:
  case Coll::Scatter: fill_copy(e, c.seed, c.root, begin, end, gop); break;
  case Coll::AlltoAll: fill_transpose(e, c.seed, c.nranks, c.count, begin, end, gop); break;
  }
}

void expected_for(const CollCase &c, Expected *e) {
  expected_init(c, e);
  expected_fill(c, e, 0, e->n);
}

void expected_window(const CollCase &c, int rank, size_t *begin, size_t *end) {
  const size_t cnt = c.count;
  size_t b = 0, e = cnt;
  switch (c.coll) {
  case Coll::ReduceScatter: b = (size_t)rank * cnt, e = b + cnt; break;
  case Coll::AllGather: e = (size_t)c.nranks * cnt; break;
  case Coll::Reduce: e = rank == c.root ? cnt : 0; break;
  case Coll::SendRecv: b = (size_t)((rank - c.root + c.nranks) % c.nranks) * cnt, e = b + cnt; break;
  case Coll::AlltoAll: b = (size_t)rank * (size_t)c.nranks * cnt, e = b + (size_t)c.nranks * cnt; break;
  case Coll::Gather: e = rank == c.root ? (size_t)c.nranks * cnt : 0; break;
  case Coll::Scatter: b = (size_t)rank * cnt, e = b + cnt; break;
  default: break;
  }
  *begin = b;
  *end = e;
}

void expected_for_rank(const CollCase &c, int rank, Expected *e) {
  size_t b, end;
  expected_init(c, e);
  expected_window(c, rank, &b, &end);
  expected_fill(c, e, b, end);
}

// "" when elements [first, first + n) of buffer a are as prepare left them.
static std::string unchanged(const char *what, const RankBufs &b, size_t first, size_t n,
                             koloDataType_t t) {
  const size_t esz = type_size(t);
  const char *now = b.a.data() + first * esz;
  const unsigned char *before = b.a_before.data() + first * esz;
  if (std::memcmp(now, before, n * esz) == 0) return "";
  for (size_t k = 0; k < n; k++) {
    uint64_t got = load_bits(now, k, t), want = load_bits(before, k, t);
    if (got == want) continue;
    std::ostringstream s;
    s << what << " was modified: element " << k << " is " << element_string(got, t) << ", was "
      << element_string(want, t);
    return s.str();
  }
  return "";
}

static std::string join(const std::vector<std::string> &parts) {
  std::string out;
  for (const std::string &p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += "; ";
    out += p;
  }
  return out;
}

// All-to-all, gather, scatter, bcast: the result window, then what must not
// have changed (inputs, a non-root's unused buffers, the root's in-place
// blocks of others).
static std::string check_peer(const CollCase &c, int rank, const RankBufs &b, const Expected &e,
                              std::vector<std::string> errs) {
  const size_t n = (size_t)c.nranks, cnt = c.count, esz = type_size(c.type);
  const bool root = rank == c.root;
  size_t wb, we;
  expected_window(c, rank, &wb, &we);
  auto add = [&](const std::string &what, const std::string &err) {
    if (!err.empty()) errs.push_back(what + ": " + err);
  };
  if (c.coll == Coll::Bcast) {
    add("result", compare(b.a.data(), e, 0, cnt));
  } else if (c.in_place && root) {
    add("result", compare(b.recv, e, wb, we - wb));
    for (size_t blk = 0; blk < n && c.coll == Coll::Scatter; blk++)
      if (blk != (size_t)rank) errs.push_back(unchanged("sendbuff outside recvbuff", b, blk * cnt, cnt, c.type));
  } else {
    if (b.send) errs.push_back(unchanged(c.coll == Coll::Scatter && !root ? "non-root sendbuff" : "sendbuff", b, 0,
                                         b.a.bytes() / esz, c.type));
    if (c.coll == Coll::Gather && !root) {
      long i = b.recv ? b.b.first_unpoisoned(0, b.b.bytes()) : -1;
      if (i >= 0) errs.push_back("non-root recvbuff was written (byte " + std::to_string(i) + ")");
    } else {
      add("result", compare(b.recv, e, wb, we - wb));
    }
  }
  return join(errs);
}

std::string check(const CollCase &c, int rank, const RankBufs &b, const Expected &e) {
  const size_t n = (size_t)c.nranks, cnt = c.count, esz = type_size(c.type);
  std::vector<std::string> errs;
  auto add = [&](const std::string &what, const std::string &err) {
    if (!err.empty()) errs.push_back(what + ": " + err);
  };
  errs.push_back(b.a.check_guards(c.in_place ? "buffer" : "sendbuff"));
  errs.push_back(b.b.check_guards("recvbuff"));
  if (cnt == 0) return join(errs);
  if (is_peer_coll(c.coll)) return check_peer(c, rank, b, e, errs);
  const char *a = b.a.data();
  if (c.in_place) {
    switch (c.coll) {
    case Coll::AllReduce: add("result", compare(a, e, 0, cnt)); break;
    case Coll::ReduceScatter:
      add("result", compare(b.recv, e, (size_t)rank * cnt, cnt));
      for (size_t blk = 0; blk < n; blk++) {
        if (blk == (size_t)rank) continue;
        errs.push_back(unchanged("sendbuff outside recvbuff", b, blk * cnt, cnt, c.type));
      }
      break;
    case Coll::AllGather:
    case Coll::Broadcast: add("result", compare(a, e, 0, e.n)); break;
    case Coll::Reduce:
      if (rank == c.root) add("result on the root", compare(a, e, 0, cnt));
      else errs.push_back(unchanged("non-root buffer", b, 0, cnt, c.type));
      break;
    case Coll::SendRecv: break;
    case Coll::AlltoAll:  // check_peer
    case Coll::Gather:
    case Coll::Scatter:
    case Coll::Bcast: break;
    }
    return join(errs);
  }
  // out of place: the input is const
  size_t in_elems = c.coll == Coll::ReduceScatter ? n * cnt : cnt;
  bool decoy = c.coll == Coll::Broadcast && rank != c.root;
  errs.push_back(unchanged(decoy ? "non-root sendbuff" : "sendbuff", b, 0, in_elems, c.type));
  const void *out = b.b.data();
  switch (c.coll) {
  case Coll::AllReduce:
  case Coll::Broadcast: add("result", compare(out, e, 0, cnt)); break;
  case Coll::ReduceScatter: add("result", compare(out, e, (size_t)rank * cnt, cnt)); break;
  case Coll::AllGather: add("result", compare(out, e, 0, n * cnt)); break;
  case Coll::Reduce:
    if (rank == c.root) {
      add("result on the root", compare(out, e, 0, cnt));
    } else {
      long i = b.b.first_unpoisoned(0, cnt * esz);
      if (i >= 0) errs.push_back("non-root recvbuff was written (byte " + std::to_string(i) + ")");
    }
    break;
  case Coll::SendRecv: {
    size_t from = (size_t)((rank - c.root + c.nranks) % c.nranks);
    add("received from rank " + std::to_string(from), compare(out, e, from * cnt, cnt));
    break;
  }
  case Coll::AlltoAll:  // check_peer
  case Coll::Gather:
  case Coll::Scatter:
  case Coll::Bcast: break;
  }
  return join(errs);
}

std::string result_text(const char *what, koloResult_t res, koloComm_t comm) {
  std::string s = std::string(what) + " returned " + koloGetErrorString(res);
  const char *last = koloGetLastError(comm);
  if (last && *last) s += std::string(": ") + last;
  return s;
}

int run_cases(koloComm_t comm, int rank, const std::vector<CollCase> &cases) {
  int failures = 0;
  size_t passed = 0;
  Expected e;
  for (const CollCase &c : cases) {
    expected_for_rank(c, rank, &e);
    RankBufs b;
    prepare(c, rank, &b);
    koloResult_t res = issue(c, rank, &b, comm);
    std::string err = res != koloSuccess ? result_text(coll_name(c.coll), res, comm) : check(c, rank, b, e);
    if (err.empty()) {
      passed++;
      continue;
    }
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, c.str().c_str(), err.c_str());
    failures++;
    if (res != koloSuccess) break;  // the communicator is unusable after a failed call
  }
  // What a parent process checks (kt::children_checked): its exit status
  // alone would also pass a child that checked nothing.
  std::fprintf(stderr, "%s%zu\n", kCasesCheckedTag, passed);
  return failures;
}

std::string run_rank(const CollCase &c, int rank, koloComm_t comm, const Expected &e) {
  RankBufs b;
  prepare(c, rank, &b);
  koloResult_t res = issue(c, rank, &b, comm);
  if (res != koloSuccess) return result_text(coll_name(c.coll), res, comm);
  return check(c, rank, b, e);
}

// ---- ranks as threads -------------------------------------------------------

RankPool::RankPool(int n) {
  for (int r = 0; r < n; r++) threads_.emplace_back([this, r] { loop(r); });
}

RankPool::~RankPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread &t : threads_) t.join();
}

void RankPool::loop(int rank) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<void(int)> *fn = fn_;
    lock.unlock();
    (*fn)(rank);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

void RankPool::run(const std::function<void(int)> &fn) {
  std::unique_lock<std::mutex> lock(mu_);
  fn_ = &fn;
  pending_ = (int)threads_.size();
  generation_++;
  start_cv_.notify_all();
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

// ---- misc -------------------------------------------------------------------

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

bool sanitized_build() {
  const char *full = std::getenv("KOLO_TEST_FULL");
  if (full && std::strcmp(full, "1") == 0) return false;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

bool tsan_build() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

void default_test_timeout(int ms) { setenv("KOLO_TIMEOUT_MS", std::to_string(ms).c_str(), 0); }

}  // namespace kt
