// sched_text.cc - see sched_text.h.
#include "util/sched_text.h"

#include <gtest/gtest.h>

#include <sstream>

extern "C" {
#include "ring/algo.h"
#include "ring/schedule.h"
#include "ring/step_names.h"
}

namespace kt {

namespace {
std::string buffer_text(int buf, int chunk) {
  return std::string(buf == KOLO_BUF_IN ? "in" : buf == KOLO_BUF_OUT ? "out" : "scratch") + "[" +
         std::to_string(chunk) + "]";
}
}  // namespace

bool sched_rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER;
}

std::string sched_program_text(const kolo_program &p, int rank, int ch) {
  std::ostringstream os;
  os << "rank " << rank << " channel " << ch << "\n";
  for (int i = 0; i < p.nsteps; i++) {
    const kolo_step &s = p.steps[i];
    os << kolo_step_op_name(s.op);
    if (kolo_step_reads_src(s.op)) os << " " << buffer_text(s.src_buf, s.src_chunk);
    if (kolo_step_writes_dst(s.op)) os << " " << buffer_text(s.dst_buf, s.dst_chunk);
    if (kolo_step_recvs(s.op)) os << " from " << kolo_step_recv_rank(&p, &s);
    if (kolo_step_sends(s.op)) os << "   to " << kolo_step_send_rank(&p, &s);
    if (s.flags & KOLO_STEP_SRC_FIRST) os << " srcFirst";
    if (s.flags & KOLO_STEP_FINAL) os << " final  # the last addend";
    os << "\n";
  }
  return os.str();
}

std::string sched_builtin_section(int coll, int n, int root, int nch, std::vector<kolo_program> *built, int algo) {
  std::ostringstream os;
  os << "collective " << kolo_coll_name(coll);
  if (sched_rooted(coll)) os << " root " << root;
  os << "\nchannels " << nch << "\n";
  std::vector<int> order((size_t)n), pos((size_t)n);
  for (int ch = 0; ch < nch; ch++) {
    for (int i = 0; i < n; i++) order[(size_t)i] = ch % 2 ? n - 1 - i : i, pos[(size_t)order[(size_t)i]] = i;
    kolo_ring ring{n, order.data(), pos.data()};
    for (int r = 0; r < n; r++) {
      kolo_program p{};
      EXPECT_EQ(kolo_schedule_build(coll, &ring, r, root, algo, &p), koloSuccess);
      if (ch == 0 && r == 0) os << "layout " << (p.layout == KOLO_LAYOUT_RING ? "ring" : "flat") << "\n";
      os << sched_program_text(p, r, ch);
      if (built) built->push_back(p);
      else kolo_program_free(&p);
    }
  }
  return os.str();
}

}  // namespace kt
