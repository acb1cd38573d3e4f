/* sched_file.c - a parsed schedule file: proving its sections, finding a
 * program, freeing (sched_file.h). */
#include <stdio.h>
#include <stdlib.h>

#include "ring/check.h"
#include "ring/sched_file.h"
#include "ring/schedule.h"

uint64_t kolo_sched_hash(const char *text, size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 0x100000001b3ull;
  return h;
}

static koloResult_t check_section(const kolo_sched_file *f, const kolo_sched_section *sec, const char *name,
                                  char *why, size_t whylen) {
  size_t all = (size_t)sec->nchannels * (size_t)f->nranks;
  const kolo_program **ptrs = malloc(all * sizeof *ptrs);
  if (ptrs == NULL) {
    snprintf(why, whylen, "%s: out of memory checking the schedule", name);
    return koloSystemError;
  }
  for (size_t i = 0; i < all; i++) ptrs[i] = &sec->progs[i];
  kolo_check_spec spec = {sec->coll, f->nranks, sec->root, -1, sec->nchannels, ptrs};
  char sentence[768];
  koloResult_t res = kolo_schedule_check(&spec, sentence, sizeof sentence);
  free(ptrs);
  if (res != koloSuccess) snprintf(why, whylen, "%s:%d: %s", name, sec->line, sentence);
  return res;
}

koloResult_t kolo_sched_check(const kolo_sched_file *f, const char *name, char *why, size_t whylen) {
  if (whylen) why[0] = '\0';
  for (int i = 0; i < f->nsections; i++) {
    koloResult_t res = check_section(f, &f->sections[i], name, why, whylen);
    if (res != koloSuccess) return res;
  }
  return koloSuccess;
}

static int rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER;
}

const kolo_program *kolo_sched_find(const kolo_sched_file *f, int coll, int root, int ch, int rank) {
  if (f == NULL || rank < 0 || rank >= f->nranks || ch < 0) return NULL;
  for (int i = 0; i < f->nsections; i++) {
    const kolo_sched_section *sec = &f->sections[i];
    if (sec->coll != coll || (rooted(coll) && sec->root != root)) continue;
    return &sec->progs[(size_t)(ch % sec->nchannels) * (size_t)f->nranks + (size_t)rank];
  }
  return NULL;
}

int kolo_sched_has(const kolo_sched_file *f, int coll) {
  for (int i = 0; f != NULL && i < f->nsections; i++)
    if (f->sections[i].coll == coll) return 1;
  return 0;
}

void kolo_sched_free(kolo_sched_file *f) {
  for (int i = 0; f->sections && i < f->nsections; i++) {
    kolo_sched_section *sec = &f->sections[i];
    for (size_t k = 0; sec->progs && k < (size_t)sec->nchannels * (size_t)f->nranks; k++)
      kolo_program_free(&sec->progs[k]);
    free(sec->progs);
  }
  free(f->sections);
  f->sections = NULL;
  f->nsections = 0;
}
