/* shrink.c - koloCommShrink (NCCL 2.28's ncclCommShrink): the surviving
 * ranks of a communicator make one without the excluded ranks, which may
 * be dead.
 *
 * koloCommSplit cannot do it: its allgather over the parent's out-of-band
 * links needs every rank.  Those links are made between two ranks when
 * first needed, so survivors reach each other whatever other ranks died: the
 * lowest surviving rank starts a new rendezvous root and sends its id, with
 * a digest of the exclusion list, to each other survivor over those links
 * only; every survivor checks the digest against its own list (the same list
 * on every survivor, as NCCL requires) and joins the new job.  Each wait is
 * bounded by the parent's timeout: a survivor that is in fact dead, or a
 * list that differs, is an error naming a rank, never a hang.
 *
 * KOLO_SHRINK_ABORT first revokes the parent (koloCommRevoke: its
 * in-flight work stops, peers waiting on it too) and waits for that work
 * to drain; the default waits for the parent's queued non-blocking calls,
 * which end (or fail, naming the dead rank) on their own. */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "core/comm_state.h"
#include "core/comm.h"
#include "core/progress.h"
#include "core/comm_wire.h"
#include "core/mem_kind.h"

/* What the lowest survivor sends each other survivor: comm_wire.h's
 * kolo_shrink_msg, encoded. */
#define TAG_SHRINK 0x22u

/* Marks the excluded ranks in out (nranks bytes); refuses a bad list. */
static koloResult_t read_list(struct koloComm *c, const int *list, int count, unsigned char *out) {
  for (int i = 0; i < count; i++) {
    int r = list[i];
    if (r < 0 || r >= c->nranks)
      return kolo_error(&c->err, koloInvalidArgument, "koloCommShrink: excludeRanksList[%d] = %d is outside 0..%d", i, r,
                        c->nranks - 1);
    if (out[r])
      return kolo_error(&c->err, koloInvalidArgument, "koloCommShrink: rank %d is in excludeRanksList twice", r);
    if (r == c->rank)
      return kolo_error(&c->err, koloInvalidArgument,
                        "koloCommShrink: rank %d excludes itself (excluded ranks do not call koloCommShrink)", r);
    out[r] = 1;
  }
  return koloSuccess;
}

static koloResult_t check_args(struct koloComm *c, const int *list, int count, koloComm_t *newcomm, int flags) {
  if (c == NULL || newcomm == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommShrink: %s is NULL", c ? "newcomm" : "comm");
  if (flags & ~KOLO_SHRINK_ABORT)
    return kolo_error(&c->err, koloInvalidArgument,
                      "koloCommShrink: shrinkFlags = 0x%x: only KOLO_SHRINK_DEFAULT and KOLO_SHRINK_ABORT exist",
                      (unsigned)flags);
  if (count < 0 || count >= c->nranks || (count > 0 && list == NULL))
    return kolo_error(&c->err, koloInvalidArgument,
                      "koloCommShrink: excludeRanksCount = %d with excludeRanksList %s (0..%d ranks may be excluded)",
                      count, list ? "set" : "NULL", c->nranks - 1);
  if (atomic_load(&c->finalized))
    return kolo_error(&c->err, koloInvalidUsage, "koloCommShrink: rank %d: the communicator was finalized", c->rank);
  return kolo_comm_check_ready(c, "koloCommShrink", 1);
}

static uint64_t digest(const unsigned char *excluded, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int r = 0; r < n; r++)
    if (excluded[r]) h = (h ^ (uint64_t)r) * 1099511628211ull;
  return h;
}

/* The parent's in-flight work: stopped first (abort), then drained. */
static void settle_parent(struct koloComm *c, int abort) {
  if (abort) {
    koloCommRevoke(c, KOLO_REVOKE_DEFAULT);
    if (c->kind) c->kind->quiesce(c, "koloCommShrink");
  }
  while (c->nbq && kolo_nb_status(c) == koloInProgress) kolo_nap_us(1000);
}

/* The lowest survivor: a new root, its id to every other survivor. */
static koloResult_t lead(struct koloComm *c, const int *surv, int n, kolo_shrink_msg *m, kolo_root **root) {
  kolo_uid uid;
  koloResult_t res = kolo_bootstrap_root_start_owned(NULL, NULL, c->timeout_ms, &uid, &c->err, root);
  if (res != koloSuccess) return res;
  kolo_uid_encode(&uid, &m->id);
  uint8_t enc[KOLO_SHRINK_MSG_BYTES];
  kolo_encode_shrink_msg(m, enc);
  koloResult_t first = koloSuccess;
  for (int i = 1; i < n; i++) { /* on past a dead survivor: the others learn it at init */
    res = kolo_bootstrap_send(c->bs, surv[i], TAG_SHRINK, enc, sizeof enc);
    if (res != koloSuccess && first == koloSuccess) first = res;
  }
  return first;
}

static koloResult_t follow(struct koloComm *c, int leader, kolo_shrink_msg *m) {
  uint8_t enc[KOLO_SHRINK_MSG_BYTES];
  koloResult_t res = kolo_bootstrap_recv(c->bs, leader, TAG_SHRINK, enc, sizeof enc);
  if (res != koloSuccess)
    return kolo_error(&c->err, res, "koloCommShrink: rank %d: no new id from rank %d (the lowest survivor): %s",
                      c->rank, leader, kolo_error_read(&c->err, (char[KOLO_ERR_LEN]){0}, KOLO_ERR_LEN));
  kolo_shrink_msg got;
  char why[KOLO_ERR_LEN - 64];
  if (kolo_decode_shrink_msg(enc, sizeof enc, leader, c->nranks, &got, why, sizeof why) != KOLO_COMM_WIRE_OK)
    return kolo_error(&c->err, koloRemoteError, "koloCommShrink: rank %d: %s", c->rank, why);
  if (got.digest != m->digest || got.nsurvivors != m->nsurvivors)
    return kolo_error(&c->err, koloInvalidUsage,
                      "koloCommShrink: rank %d: rank %d excludes another set of ranks (%d survivors, this rank has %d): "
                      "every survivor must pass the same excludeRanksList", c->rank, leader, got.nsurvivors,
                      m->nsurvivors);
  m->id = got.id;
  return koloSuccess;
}

/* The survivors in parent order, and this rank's place among them. */
static int survivors(const struct koloComm *c, const unsigned char *excluded, int *surv, int *me) {
  int n = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (excluded[r]) continue;
    if (r == c->rank) *me = n;
    surv[n++] = r;
  }
  return n;
}

koloResult_t koloCommShrink(koloComm_t comm, int *excludeRanksList, int excludeRanksCount, koloComm_t *newcomm,
                            koloConfig_t *config, int shrinkFlags) {
  koloResult_t res = check_args(comm, excludeRanksList, excludeRanksCount, newcomm, shrinkFlags);
  if (res != koloSuccess) return res;
  *newcomm = NULL;
  unsigned char *excluded = calloc((size_t)comm->nranks, 1);
  int *surv = malloc((size_t)comm->nranks * sizeof *surv);
  res = excluded && surv ? read_list(comm, excludeRanksList, excludeRanksCount, excluded)
                         : kolo_error(&comm->err, koloSystemError, "koloCommShrink: out of memory");
  int n = 0, me = 0;
  kolo_root *root = NULL; /* the new communicator's, on the lowest survivor */
  kolo_shrink_msg m;
  memset(&m, 0, sizeof m);
  if (res == koloSuccess) {
    settle_parent(comm, shrinkFlags & KOLO_SHRINK_ABORT);
    n = survivors(comm, excluded, surv, &me);
    m.digest = digest(excluded, comm->nranks);
    m.nsurvivors = n;
    res = me == 0 ? lead(comm, surv, n, &m, &root) : follow(comm, surv[0], &m);
  }
  free(excluded);
  free(surv);
  if (res != koloSuccess) {
    kolo_bootstrap_root_stop(root);
    return res;
  }
  koloConfig_t inherit;
  kolo_comm_inherit(comm, &inherit);
  res = kolo_comm_init_owning(newcomm, n, m.id, me, config ? config : &inherit, root);
  if (res != koloSuccess && res != koloInProgress)
    kolo_error(&comm->err, res, "koloCommShrink: rank %d (new rank %d of %d): %s", comm->rank, me, n,
               kolo_thread_errbuf()->msg);
  return res;
}
