// sched_text.h - kolo's built-in schedules written out as schedule files
// (docs/schedule-format.md), for the tests that read them back
// (test_sched_file) and run them (test_e2e_schedule).
#ifndef KOLO_TESTS_UTIL_SCHED_TEXT_H
#define KOLO_TESTS_UTIL_SCHED_TEXT_H

#include <string>
#include <vector>

extern "C" {
#include "ring/program.h"
}

namespace kt {

// Rank's program p on channel ch, as the format writes it ("rank R channel
// C" and one line per step, every chunk index written).
std::string sched_program_text(const kolo_program &p, int rank, int ch);

// A `collective` section of coll (with its root where rooted) on n ranks,
// nch channels: channel ch holds the built-in programs on the ring in rank
// order (even ch) or reversed (odd ch).  *built, when given, gets those
// programs ([ch * n + rank]; the caller frees them).
// algo: the all-reduce's (ring/algo.h); the other collectives take their one.
std::string sched_builtin_section(int coll, int n, int root, int nch, std::vector<kolo_program> *built = nullptr,
                                  int algo = 0);

// 1 for broadcast, reduce, gather and scatter.
bool sched_rooted(int coll);

}  // namespace kt

#endif
