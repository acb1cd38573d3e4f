/* split.c - koloCommSplit: the ranks of a communicator that pass the same
 * color make a new one, ordered by key, then by parent rank.
 *
 * Every rank's color and key are allgathered over the parent's bootstrap
 * mesh (comm_wire.h's split entry, decoded naming its sender); the first
 * member of each color starts a rendezvous root and sends its unique id
 * (uid_codec.c's bytes) to the other members, which check it, naming the
 * sender, before all of them init the new communicator.  Inside a group
 * the split is recorded and run at koloGroupEnd (split_group.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/group.h"
#include "core/comm.h"
#include "core/comm_gather.h"
#include "core/split_group.h"
#include "core/comm_wire.h"
#include "transport/bootstrap_wire.h"

#define TAG_SPLIT 0x20u
#define TAG_SPLIT_ID 0x21u

static int cmp_split(const void *a, const void *b) {
  const kolo_split_entry *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static koloResult_t check_args(koloComm_t comm, int color, koloComm_t *newcomm) {
  if (comm == NULL || newcomm == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommSplit: %s is NULL", comm ? "newcomm" : "comm");
  if (color < KOLO_SPLIT_NOCOLOR)
    return kolo_error(&comm->err, koloInvalidArgument, "koloCommSplit: color %d is negative (use KOLO_SPLIT_NOCOLOR)", color);
  if (atomic_load(&comm->finalized))
    return kolo_error(&comm->err, koloInvalidUsage,
                      "koloCommSplit: rank %d: the communicator was finalized (koloCommFinalize): only "
                      "koloCommDestroy may follow", comm->rank);
  return kolo_comm_check_ready(comm, "koloCommSplit", 1);
}

/* Every rank's entry, decoded, into *all (nranks entries; the caller
 * frees it, on failure too). */
static koloResult_t gather_entries(struct koloComm *c, int color, int key, kolo_split_entry **all) {
  uint8_t mine[KOLO_SPLIT_ENTRY_BYTES], *raw = NULL;
  kolo_encode_split_entry(&(kolo_split_entry){color, key, c->rank}, mine);
  koloResult_t res = kolo_comm_gather(c, TAG_SPLIT, mine, sizeof mine, &raw);
  *all = res == koloSuccess ? calloc((size_t)c->nranks, sizeof **all) : NULL;
  if (res == koloSuccess && *all == NULL) res = kolo_error(&c->err, koloSystemError, "koloCommSplit: out of memory");
  char why[KOLO_ERR_LEN - 64];
  for (int r = 0; r < c->nranks && res == koloSuccess; r++)
    if (kolo_decode_split_entry(raw + (size_t)r * sizeof mine, sizeof mine, r, &(*all)[r], why, sizeof why) !=
        KOLO_COMM_WIRE_OK)
      res = kolo_error(&c->err, koloRemoteError, "koloCommSplit: rank %d: %s", c->rank, why);
  free(raw);
  return res;
}

/* The members of color, in their new order, into all[0..n); this rank's
 * place among them in *newrank (-1: none). */
static int members(kolo_split_entry *all, int nranks, int color, int rank, int *newrank) {
  int n = 0;
  *newrank = -1;
  if (color == KOLO_SPLIT_NOCOLOR) return 0;
  for (int r = 0; r < nranks; r++)
    if (all[r].color == color) all[n++] = all[r];
  qsort(all, (size_t)n, sizeof *all, cmp_split);
  for (int i = 0; i < n; i++)
    if (all[i].rank == rank) *newrank = i;
  return n;
}

static koloResult_t receive_id(struct koloComm *c, int leader, int color, koloUniqueId *id) {
  koloResult_t res = kolo_bootstrap_recv(c->bs, leader, TAG_SPLIT_ID, id->internal, sizeof id->internal);
  if (res != koloSuccess) return res;
  char who[96], why[KOLO_ERR_LEN - 64];
  kolo_uid uid;
  snprintf(who, sizeof who, "the unique id rank %d sent for color %d", leader, color);
  if (kolo_decode_unique_id(id->internal, sizeof id->internal, who, &uid, why, sizeof why) == KOLO_WIRE_OK)
    return koloSuccess;
  return kolo_error(&c->err, koloRemoteError, "koloCommSplit: rank %d: %s", c->rank, why);
}

/* The new communicator's id: made by its first member, sent to the others. */
static koloResult_t exchange_id(struct koloComm *c, const kolo_split_entry *m, int n, int newrank, int color,
                                koloUniqueId *id, kolo_root **root) {
  if (newrank > 0) return receive_id(c, m[0].rank, color, id);
  kolo_uid uid;
  koloResult_t res = kolo_bootstrap_root_start_owned(NULL, NULL, c->timeout_ms, &uid, &c->err, root);
  if (res == koloSuccess) kolo_uid_encode(&uid, id);
  for (int i = 1; i < n && res == koloSuccess; i++)
    res = kolo_bootstrap_send(c->bs, m[i].rank, TAG_SPLIT_ID, id->internal, sizeof id->internal);
  return res;
}

koloResult_t koloCommSplit(koloComm_t comm, int color, int key, koloComm_t *newcomm, koloConfig_t *config) {
  koloResult_t res = check_args(comm, color, newcomm);
  if (res != koloSuccess) return res;
  if (kolo_group_depth() > 0) return kolo_group_add_split(comm, color, key, newcomm, config);
  kolo_split_entry *all = NULL;
  res = gather_entries(comm, color, key, &all);
  int newrank = -1, n = res == koloSuccess ? members(all, comm->nranks, color, comm->rank, &newrank) : 0;
  koloUniqueId id;
  kolo_root *root = NULL; /* the new communicator's, on its leader */
  if (res == koloSuccess && newrank >= 0) res = exchange_id(comm, all, n, newrank, color, &id, &root);
  int leader = n > 0 ? all[0].rank : -1;
  free(all);
  *newcomm = NULL;
  if (res != koloSuccess || newrank < 0) {
    kolo_bootstrap_root_stop(root);
    return res;
  }
  koloConfig_t inherit;
  kolo_comm_inherit(comm, &inherit);
  res = kolo_comm_init_owning(newcomm, n, id, newrank, config ? config : &inherit, root);
  if (res != koloSuccess && res != koloInProgress) /* in progress: config.blocking = 0 */
    kolo_error(&comm->err, res, "koloCommSplit: color %d (leader rank %d): %s", color, leader,
               kolo_thread_errbuf()->msg);
  return res;
}
