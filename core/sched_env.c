/* sched_env.c - KOLO_SCHEDULE_FILE: a communicator runs the collectives a
 * schedule file declares (ring/sched_file.h) with the file's programs.
 *
 * The file is read, parsed and proved by the checker for the
 * communicator's rank count when the communicator is created, before any
 * connection: a file that fails is refused on every rank with the same
 * sentence, at once.  Ranks that load different files (or one none) would
 * not meet: the file's hash goes into the shape every rank compares at
 * init (comm.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "core/comm_state.h"
#include "core/sched_env.h"
#include "core/env_file.h"

/* Parses and proves text for c's rank count into *out. */
static koloResult_t parse_and_prove(struct koloComm *c, const char *fn, const char *path, const char *text, size_t len,
                                    kolo_sched_file *out) {
  char why[KOLO_ERR_LEN];
  koloResult_t res = kolo_sched_parse(text, len, path, out, why, sizeof why);
  if (res != koloSuccess) return kolo_error(NULL, res, "%s: KOLO_SCHEDULE_FILE: %s", fn, why);
  if (out->nranks != c->nranks)
    res = kolo_error(NULL, koloInvalidUsage, "%s: KOLO_SCHEDULE_FILE=%s is written for %d ranks, and this communicator has %d",
                     fn, path, out->nranks, c->nranks);
  else if ((res = kolo_sched_check(out, path, why, sizeof why)) != koloSuccess)
    res = kolo_error(NULL, res, "%s: KOLO_SCHEDULE_FILE: %s", fn, why);
  if (res != koloSuccess) kolo_sched_free(out);
  return res;
}

koloResult_t kolo_comm_load_schedule(struct koloComm *c, const char *fn) {
  const char *path = kolo_param_str("KOLO_SCHEDULE_FILE");
  if (path == NULL) return koloSuccess;
  size_t len = 0;
  char *text = kolo_read_env_file(path, KOLO_SCHED_MAX_BYTES, &len);
  if (text == NULL)
    return kolo_syserror(NULL, errno, "%s: KOLO_SCHEDULE_FILE=%s cannot be read%s", fn, path,
                         errno == EFBIG ? " (a schedule file holds at most 16 MiB)" : "");
  kolo_sched_file *f = calloc(1, sizeof *f);
  koloResult_t res = f ? parse_and_prove(c, fn, path, text, len, f)
                       : kolo_error(NULL, koloSystemError, "%s: out of memory reading KOLO_SCHEDULE_FILE", fn);
  free(text);
  if (res != koloSuccess) {
    free(f);
    return res;
  }
  c->sched = f;
  c->sched_hash = f->hash;
  if (c->rank == 0)
    KOLO_INFO("KOLO_SCHEDULE_FILE=%s: %d collective section(s) proved for %d ranks (hash %016llx)", path,
              f->nsections, f->nranks, (unsigned long long)f->hash);
  return koloSuccess;
}

void kolo_comm_free_schedule(struct koloComm *c) {
  if (c->sched == NULL) return;
  kolo_sched_free(c->sched);
  free(c->sched);
  c->sched = NULL;
}
