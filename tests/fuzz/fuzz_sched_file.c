/* fuzz_sched_file.c - schedule files (ring/sched_file.h) from any bytes:
 * KOLO_SCHEDULE_FILE is read by every rank at init, so the parser must
 * refuse anything malformed with a terminated sentence that names the
 * line, and what it accepts must be programs the executors can index:
 * ops that exist, buffers IN, OUT or SCRATCH, chunk indices in range
 * (ranks; scratch chunks) and peers that are ranks, every peer index in its
 * program's peer list.  What it accepts
 * then goes through the checker, which must answer within its bounds
 * (the input's size bounds the steps). */
#include <stdint.h>
#include <string.h>

#include "ring/sched_file.h"
#include "ring/schedule.h"
#include "ring/step_names.h"
#include "tests/fuzz/fuzz_util.h"

/* The chunk indices a buffer has: a rank's, or kolo's scratch chunks. */
static int chunks_of(int buf, int nranks) { return buf == KOLO_BUF_SCRATCH ? KOLO_SCRATCH_CHUNKS : nranks; }

static void check_program(const kolo_program *p, int nranks) {
  FUZZ_REQUIRE(p->nsteps >= 0 && p->nsteps <= KOLO_SCHED_MAX_STEPS);
  FUZZ_REQUIRE(p->npeers >= 0 && p->npeers <= nranks);
  FUZZ_REQUIRE(p->send_peer == -1 && p->recv_peer == -1);
  for (int i = 0; i < p->npeers; i++) FUZZ_REQUIRE(p->peers[i].rank >= 0 && p->peers[i].rank < nranks);
  for (int i = 0; i < p->nsteps; i++) {
    const kolo_step *s = &p->steps[i];
    FUZZ_REQUIRE(kolo_step_op_name(s->op) != NULL);
    FUZZ_REQUIRE(s->src_buf < KOLO_BUF_NUM && s->dst_buf < KOLO_BUF_NUM);
    FUZZ_REQUIRE(s->src_chunk >= 0 && s->src_chunk < chunks_of(s->src_buf, nranks));
    FUZZ_REQUIRE(s->dst_chunk >= 0 && s->dst_chunk < chunks_of(s->dst_buf, nranks));
    if (kolo_step_sends(s->op)) FUZZ_REQUIRE(s->to < p->npeers && p->peers[s->to].sends);
    if (kolo_step_recvs(s->op)) FUZZ_REQUIRE(s->from < p->npeers && p->peers[s->from].recvs);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kolo_sched_file f;
  char why[512];
  memset(why, 'x', sizeof why);
  koloResult_t res = kolo_sched_parse((const char *)data, size, "fuzz.sched", &f, why, sizeof why);
  FUZZ_REQUIRE(memchr(why, '\0', sizeof why) != NULL);
  if (res != koloSuccess) {
    FUZZ_REQUIRE(res == koloInvalidArgument && f.nsections == 0 && f.sections == NULL);
    FUZZ_REQUIRE(strncmp(why, "fuzz.sched:", 11) == 0);
    return 0;
  }
  FUZZ_REQUIRE(f.nranks >= 1 && f.nsections >= 1);
  for (int k = 0; k < f.nsections; k++) {
    const kolo_sched_section *sec = &f.sections[k];
    FUZZ_REQUIRE(kolo_sched_has(&f, sec->coll));
    for (int ch = 0; ch < sec->nchannels; ch++)
      for (int r = 0; r < f.nranks; r++) {
        const kolo_program *p = kolo_sched_find(&f, sec->coll, sec->root, ch, r);
        FUZZ_REQUIRE(p == &sec->progs[(size_t)ch * (size_t)f.nranks + (size_t)r]);
        check_program(p, f.nranks);
      }
  }
  memset(why, 'x', sizeof why);
  res = kolo_sched_check(&f, "fuzz.sched", why, sizeof why);
  FUZZ_REQUIRE(memchr(why, '\0', sizeof why) != NULL);
  FUZZ_REQUIRE(res == koloSuccess ? why[0] == '\0' : strncmp(why, "fuzz.sched:", 11) == 0);
  kolo_sched_free(&f);
  return 0;
}
