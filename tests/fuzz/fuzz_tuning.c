/* fuzz_tuning.c - the tuner's readers of outside bytes, on any input: the
 * first byte picks the reader, the rest is its input.
 *   even: a tuning file (ring/tuning.c) -- refused with "name:LINE: ...",
 *     or parsed into values in their ranges that, written back, parse to
 *     the same links, overrides, channels and chunk lines;
 *   odd: KOLO_ALGO in NCCL's syntax (ring/algo_select.c) -- refused with a
 *     sentence naming KOLO_ALGO, or sets each within its collective's
 *     algorithms (all-reduce, broadcast, all-gather). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/algo.h"
#include "ring/algo_select.h"
#include "ring/schedule.h"
#include "ring/tuning.h"
#include "tests/fuzz/fuzz_util.h"

static void check_ranges(const kolo_tuning *f) {
  for (int l = 0; l < KOLO_LINK_NUM; l++)
    if (f->link[l].set) FUZZ_REQUIRE(f->link[l].alpha_us > 0 && f->link[l].beta_gbs > 0);
  FUZZ_REQUIRE(f->noverrides >= 0 && f->noverrides <= KOLO_TUNING_MAX_OVERRIDES);
  for (int i = 0; i < f->noverrides; i++) {
    const kolo_tune_override *o = &f->ov[i];
    unsigned set = o->coll == KOLO_COLL_ALL_REDUCE  ? KOLO_ALGO_ALL_REDUCE_SET
                   : o->coll == KOLO_COLL_BROADCAST ? KOLO_ALGO_BCAST_SET
                   : o->coll == KOLO_COLL_ALL_GATHER ? KOLO_ALGO_AG_SET
                   : o->coll == KOLO_COLL_REDUCE     ? KOLO_ALGO_REDUCE_SET
                                                     : 0u;
    FUZZ_REQUIRE(o->algo >= 0 && o->algo < KOLO_ALGO_NUM && ((set >> o->algo) & 1u) && o->lo <= o->hi);
    FUZZ_REQUIRE(o->mem >= KOLO_TUNE_MEM_ANY && o->mem <= KOLO_TUNE_MEM_CUDA && o->nranks >= 0);
    FUZZ_REQUIRE(o->link >= KOLO_TUNE_LINK_ANY && o->link < KOLO_LINK_NUM);
  }
  FUZZ_REQUIRE(f->nchannel_lines >= 0 && f->nchannel_lines <= KOLO_TUNING_MAX_CHANNEL_LINES);
  for (int i = 0; i < f->nchannel_lines; i++) {
    const kolo_tune_channels *l = &f->ch[i];
    FUZZ_REQUIRE(strcmp(kolo_tuning_coll_name(l->coll), "?") != 0 && l->lo <= l->hi);
    FUZZ_REQUIRE(l->channels >= 1 && l->channels <= KOLO_TUNING_MAX_CHANNELS && l->nranks >= 0);
    FUZZ_REQUIRE(l->mem >= KOLO_TUNE_MEM_ANY && l->mem <= KOLO_TUNE_MEM_CUDA);
    FUZZ_REQUIRE(l->link >= KOLO_TUNE_LINK_ANY && l->link < KOLO_LINK_NUM);
  }
  FUZZ_REQUIRE(f->nchunk_lines >= 0 && f->nchunk_lines <= KOLO_TUNING_MAX_CHUNK_LINES);
  for (int i = 0; i < f->nchunk_lines; i++) {
    const kolo_tune_chunk *k = &f->chunk[i];
    FUZZ_REQUIRE(k->link == KOLO_LINK_SOCKET || k->link == KOLO_LINK_IB);
    FUZZ_REQUIRE(k->bytes >= 4096 && k->bytes <= (1ull << 30) && k->bytes % 4096 == 0 && k->nranks >= 0);
  }
}

static void check_file(const uint8_t *data, size_t size) {
  kolo_tuning f, g;
  char why[256];
  if (kolo_tuning_parse((const char *)data, size, "f", &f, why, sizeof why) != 0) {
    FUZZ_REQUIRE(strncmp(why, "f:", 2) == 0);
    return;
  }
  check_ranges(&f);
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  FUZZ_REQUIRE(m != NULL && kolo_tuning_write(m, &f, NULL) == 0);
  fclose(m);
  FUZZ_REQUIRE(kolo_tuning_parse(text, len, "again", &g, why, sizeof why) == 0);
  FUZZ_REQUIRE(g.noverrides == f.noverrides && memcmp(g.ov, f.ov, sizeof f.ov) == 0);
  FUZZ_REQUIRE(g.nchannel_lines == f.nchannel_lines && memcmp(g.ch, f.ch, sizeof f.ch) == 0);
  FUZZ_REQUIRE(g.nchunk_lines == f.nchunk_lines && memcmp(g.chunk, f.chunk, sizeof f.chunk) == 0);
  for (int l = 0; l < KOLO_LINK_NUM; l++) FUZZ_REQUIRE(g.link[l].set == f.link[l].set);
  free(text);
}

static void check_algo(const char *v) {
  char why[256] = "";
  kolo_algo_sets s;
  if (kolo_algo_allow_parse_sets(v, &s, why, sizeof why) < 0) {
    FUZZ_REQUIRE(strncmp(why, "KOLO_ALGO", 9) == 0);
    return;
  }
  FUZZ_REQUIRE((s.all_reduce & ~KOLO_ALGO_ALL_REDUCE_SET) == 0 && (s.broadcast & ~KOLO_ALGO_BCAST_SET) == 0 &&
               (s.all_gather & ~KOLO_ALGO_AG_SET) == 0);
  FUZZ_REQUIRE(*v != '\0' || (s.all_reduce | s.broadcast | s.all_gather) == 0);
  FUZZ_REQUIRE(kolo_algo_allow_parse(v, why, sizeof why) == (int)s.all_reduce);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    check_file(data + 1, size - 1);
    return 0;
  }
  char *v = fuzz_cstr(data + 1, size - 1);
  check_algo(v);
  free(v);
  return 0;
}
