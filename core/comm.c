/* comm.c - communicator lifecycle: init, finalize, destroy, abort (split:
 * split.c, shrink: shrink.c). */
#include "core/comm_state.h"
#include "core/group.h"
#include "core/comm.h"
#include "core/init_async.h"
#include "core/register.h"
#include "core/revoke.h"
#include "core/doubling_pipes.h"
#include "core/tree_pipes.h"
#include "core/ag_pipes.h"
#include "core/sched_env.h"
#include "core/tune_env.h"
#include "core/progress.h"
#include "core/comm_agree.h"
#include "core/comm_config.h"
#include "core/comm_topology.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "core/mem_kind.h"
#include "core/redop.h"
#include "core/rendezvous.h"
#include "common/log.h"
#include "ring/topology.h"

koloResult_t koloGetVersion(int *version) {
  if (version == NULL) return kolo_error(NULL, koloInvalidArgument, "koloGetVersion: version is NULL");
  *version = KOLO_VERSION_CODE;
  return koloSuccess;
}

/* A snapshot, so that the caller reads a whole sentence even while another
 * of the communicator's threads reports a failure. */
const char *koloGetLastError(koloComm_t comm) {
  static _Thread_local char last[KOLO_ERR_LEN];
  return kolo_error_read(comm ? &comm->err : kolo_thread_errbuf(), last, sizeof last);
}

void koloResetDebugInit(void) { kolo_log_reset(); }

koloResult_t koloGetUniqueId(koloUniqueId *id) {
  if (id == NULL) return kolo_error(NULL, koloInvalidArgument, "koloGetUniqueId: uniqueId is NULL");
  kolo_uid uid;
  const char *at = kolo_param_str("KOLO_COMM_ID");
  int timeout = (int)kolo_param_int("KOLO_TIMEOUT_MS");
  /* KOLO_COMM_ID: the id of that address, the same in every process; rank 0
   * starts the root there at init (as NCCL_COMM_ID does in NCCL). */
  koloResult_t res = at ? kolo_rendezvous_uid("KOLO_COMM_ID", at, 0, &uid)
                        : kolo_bootstrap_root_start(NULL, NULL, timeout, &uid, NULL);
  if (res != koloSuccess) return res;
  kolo_uid_encode(&uid, id);
  return koloSuccess;
}

/* Entries of collective k's program table: one per root/peer/algorithm
 * and variant (ring, or channel: comm_state.h). */
static size_t program_slots(const struct koloComm *c, int k) {
  return (size_t)kolo_program_slots(k, c->nranks) * (size_t)(c->nvariants > 0 ? c->nvariants : 1);
}

static void free_comm(struct koloComm *c) {
  /* Kernels may still use the pipes, counters and programs: wait first. */
  if (c->kind) {
    c->kind->quiesce(c, "koloCommDestroy");
    c->kind->close_shared(c);
  }
  /* Before the pipes close: peers that see them close know why already. */
  if (c->bs) kolo_bootstrap_goodbye(c->bs, KOLO_BYE_LEFT);
  kolo_comm_close_pipes(c);
  if (c->kind) c->kind->free(c);
  for (int k = 0; k < KOLO_COLL_NUM; k++) {
    for (size_t i = 0; c->programs[k] && i < program_slots(c, k); i++)
      if (c->program_ready[k][i]) kolo_program_free(&c->programs[k][i]);
    free(c->programs[k]);
    free(c->program_ready[k]);
  }
  free(c->scratch);
  free(c->p2p_send);
  free(c->p2p_recv);
  free(c->p2p_send_ready);
  free(c->p2p_recv_ready);
  for (int ch = 0; ch < c->nrings; ch++) kolo_ring_free(&c->rings[ch]);
  for (int k = 0; k < KOLO_HIER_PHASES && c->hier_ready; k++) kolo_program_free(&c->hier_prog[k]);
  kolo_comm_free_schedule(c);
  if (c->bs) kolo_bootstrap_destroy(c->bs);
  kolo_bootstrap_root_stop(c->root); /* an init that never ran */
  if (c->init_job) free(c->init_job->uids);
  free(c->init_job);
  kolo_redop_free(c);
  free(c);
}

void kolo_comm_free(struct koloComm *c) {
  kolo_init_join(c); /* an init still running uses c */
  kolo_reg_release_comm(c);
  free_comm(c);
}

static koloResult_t alloc_tables(struct koloComm *c) {
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  c->p2p_send = calloc(np, sizeof *c->p2p_send);
  c->p2p_recv = calloc(np, sizeof *c->p2p_recv);
  c->p2p_send_ready = calloc(np, 1);
  c->p2p_recv_ready = calloc(np, 1);
  int ok = c->p2p_send && c->p2p_recv && c->p2p_send_ready && c->p2p_recv_ready;
  for (int k = 0; k < KOLO_COLL_NUM && ok; k++) {
    c->programs[k] = calloc(program_slots(c, k), sizeof(kolo_program));
    c->program_ready[k] = calloc(program_slots(c, k), 1);
    ok = c->programs[k] && c->program_ready[k];
  }
  return ok ? koloSuccess : kolo_error(&c->err, koloSystemError, "out of memory at init");
}

static koloResult_t init_steps(struct koloComm *c) {
  const kolo_init_job *j = c->init_job;
  koloResult_t res = kolo_bootstrap_init_multi(j->uids, j->nids, c->rank, c->nranks, c->timeout_ms, &c->err, &c->bs);
  if (res == koloSuccess) kolo_comm_tune_waits(c);
  if (res == koloSuccess) res = kolo_comm_check_shapes(c);
  const kolo_mem_kind *kind = c->kind; /* NULL: host memory */
  if (res == koloSuccess && kind) res = kind->init(c);
  if (res == koloSuccess) res = kolo_comm_build_topology(c);
  if (res == koloSuccess) res = alloc_tables(c);
  if (res == koloSuccess && kind) res = kind->programs(c);
  if (res == koloSuccess) res = kolo_comm_connect_ring(c);
  if (res == koloSuccess && kind) kind->ring_ready(c);
  if (res == koloSuccess) res = kolo_comm_connect_doubling(c);
  if (res == koloSuccess) res = kolo_comm_connect_tree(c);
  if (res == koloSuccess) res = kolo_comm_connect_bruck(c);
  /* CUDA calls enqueue and return whatever config.blocking says: no
   * progress thread. */
  if (res == koloSuccess && !c->blocking && !kind) res = kolo_nb_start(c);
  return res;
}

/* "rank V" with no digit after it. */
static int names_rank(const char *text, int v) {
  char pat[24];
  int len = snprintf(pat, sizeof pat, "rank %d", v);
  for (const char *p = strstr(text, pat); p != NULL; p = strstr(p + 1, pat))
    if (p[len] < '0' || p[len] > '9') return 1;
  return 0;
}

/* A failed init names the rank that failed first: a survivor that fails
 * because another one gave up (its shm segment gone, its message never
 * sent) would otherwise name that other survivor.  The bootstrap knows
 * which peer's connection closed first without a goodbye, or whom a
 * peer's goodbye blamed; then peers are told the same in this rank's. */
static void name_first_failure(struct koloComm *c, koloResult_t res) {
  if (c->bs == NULL) return;
  int via = -1;
  int culprit = kolo_bootstrap_culprit(c->bs, &via);
  char was[KOLO_ERR_LEN], because[160];
  kolo_error_read(&c->err, was, sizeof was);
  if (culprit >= 0 && culprit != c->rank && !names_rank(was, culprit)) {
    if (via >= 0) snprintf(because, sizeof because, "rank %d gave up after rank %d failed", via, culprit);
    else snprintf(because, sizeof because, "rank %d %s", culprit, kolo_peer_fate_text(KOLO_PEER_LOST));
    kolo_error_clear(&c->err);
    kolo_error(&c->err, res, "rank %d: init failed after %s: %s", c->rank, because, was);
  }
  kolo_bootstrap_goodbye(c->bs, KOLO_BYE_LEFT); /* now, not at destroy: peers may be waiting on this rank */
}

koloResult_t kolo_comm_connect(struct koloComm *c) {
  koloResult_t res = init_steps(c);
  if (res != koloSuccess) name_first_failure(c, res);
  /* The root this rank started has served (it exits once every rank has
   * its answer) or cannot any more: a failed init leaves no thread or
   * socket of it behind. */
  kolo_bootstrap_root_stop(c->root);
  c->root = NULL;
  if (res != koloSuccess) {
    atomic_store(&c->failed, (int)res);
    return res;
  }
  KOLO_INFO("rank %d of %d: communicator ready; %d bootstrap connection(s) to other ranks", c->rank, c->nranks,
            kolo_bootstrap_links(c->bs));
  atomic_store(&c->ready, 1);
  return res;
}

static koloResult_t new_init_job(struct koloComm *c, const kolo_uid *uids, int nids) {
  c->init_job = calloc(1, sizeof *c->init_job);
  if (c->init_job != NULL) c->init_job->uids = malloc((size_t)nids * sizeof *uids);
  if (c->init_job == NULL || c->init_job->uids == NULL)
    return kolo_error(NULL, koloSystemError, "out of memory at init");
  memcpy(c->init_job->uids, uids, (size_t)nids * sizeof *uids);
  c->init_job->nids = nids;
  return koloSuccess;
}

koloResult_t kolo_comm_create(const char *fn, int nranks, int rank, const kolo_uid *uids, int nids,
                              koloConfig_t *config, struct koloComm **out) {
  kolo_errbuf *teb = kolo_thread_errbuf();
  if (nranks < 1 || nranks > (1 << 20))
    return kolo_error(teb, koloInvalidArgument, "%s: nranks = %d is outside 1..%d", fn, nranks, 1 << 20);
  if (rank < 0 || rank >= nranks)
    return kolo_error(teb, koloInvalidArgument, "%s: rank %d is outside 0..%d", fn, rank, nranks - 1);
  struct koloComm *c = calloc(1, sizeof *c);
  if (c == NULL) return kolo_error(teb, koloSystemError, "%s: out of memory", fn);
  kolo_errbuf_make_sticky(&c->err);
  c->rank = rank;
  c->nranks = nranks;
  c->job = uids[0].job; /* every rank's: the first id's */
  c->failed = koloSuccess;
  koloResult_t res = new_init_job(c, uids, nids);
  if (res == koloSuccess) res = kolo_comm_resolve_config(c, config);
  if (res == koloSuccess) res = kolo_comm_load_schedule(c, fn);
  if (res == koloSuccess) res = kolo_comm_load_tuning(c, fn);
  if (res == koloSuccess) res = kolo_comm_tuned_channels(c, config);
  if (res == koloSuccess && nids == 1)
    res = kolo_rendezvous_start_root(&uids[0], rank, c->timeout_ms, teb, &c->root);
  if (res != koloSuccess) {
    kolo_comm_free(c);
    return res;
  }
  c->owner = (kolo_exec_owner){.rank = rank,
                               .timeout_ms = c->timeout_ms,
                               .spin = (int)kolo_param_int("KOLO_SPIN"),
                               .yields = (int)kolo_param_int("KOLO_YIELDS"),
                               .abort_flag = &c->aborted,
                               .eb = &c->err,
                               .failed = koloSuccess};
  kolo_comm_owner_hooks(&c->owner);
  *out = c;
  return koloSuccess;
}

/* Runs c's init now, inside a group, or on a thread of its own
 * (config.blocking = 0); sets *comm unless a blocking init failed. */
koloResult_t kolo_comm_init_or_defer(struct koloComm *c, koloComm_t *comm) {
  if (kolo_group_depth() > 0) return kolo_group_add_init(c, comm);
  if (!c->blocking) {
    koloResult_t res = kolo_init_start(c);
    if (res != koloSuccess) {
      kolo_comm_free(c);
      return res;
    }
    *comm = c;
    return koloInProgress;
  }
  koloResult_t res = kolo_comm_connect(c);
  if (res != koloSuccess) {
    kolo_error_copy(kolo_thread_errbuf(), &c->err);
    kolo_comm_free(c);
    return res;
  }
  *comm = c;
  return koloSuccess;
}

koloResult_t kolo_comm_init_owning(koloComm_t *comm, int nranks, koloUniqueId commId, int rank,
                                   koloConfig_t *config, kolo_root *root) {
  kolo_errbuf *teb = kolo_thread_errbuf();
  kolo_uid uid;
  struct koloComm *c = NULL;
  koloResult_t res = comm != NULL ? kolo_uid_decode(&commId, &uid, teb)
                                  : kolo_error(teb, koloInvalidArgument, "koloCommInitRank: comm is NULL");
  if (res == koloSuccess) res = kolo_comm_create("koloCommInitRank", nranks, rank, &uid, 1, config, &c);
  if (res != koloSuccess) {
    kolo_bootstrap_root_stop(root);
    return res;
  }
  if (root != NULL) c->root = root; /* stopped once init ends, or when c is freed */
  return kolo_comm_init_or_defer(c, comm);
}

koloResult_t koloCommInitRankConfig(koloComm_t *comm, int nranks, koloUniqueId commId, int rank,
                                    koloConfig_t *config) {
  return kolo_comm_init_owning(comm, nranks, commId, rank, config, NULL);
}

koloResult_t koloCommInitRank(koloComm_t *comm, int nranks, koloUniqueId commId, int rank) {
  return koloCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* ---- queries and teardown ----------------------------------------------- */

/* NCCL has no host communicators; a host one has no device: -1, refused. */
koloResult_t koloCommCuDevice(const koloComm_t comm, int *device) {
  if (comm == NULL || device == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommCuDevice: %s is NULL", comm ? "device" : "comm");
  koloResult_t res = kolo_comm_check_ready(comm, "koloCommCuDevice", 1);
  if (res != koloSuccess) return res;
  if (comm->kind == NULL) {
    *device = -1;
    return kolo_error(&comm->err, koloInvalidUsage,
                      "koloCommCuDevice: rank %d: this is a host communicator (koloMemHost), which has no CUDA device",
                      comm->rank);
  }
  *device = comm->kind->device(comm);
  return koloSuccess;
}

koloResult_t koloCommCount(const koloComm_t comm, int *count) {
  if (comm == NULL || count == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommCount: %s is NULL", comm ? "count" : "comm");
  *count = comm->nranks;
  return koloSuccess;
}

koloResult_t koloCommUserRank(const koloComm_t comm, int *rank) {
  if (comm == NULL || rank == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommUserRank: %s is NULL", comm ? "rank" : "comm");
  *rank = comm->rank;
  return koloSuccess;
}

koloResult_t koloCommGetAsyncError(koloComm_t comm, koloResult_t *asyncError) {
  if (comm == NULL || asyncError == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommGetAsyncError: %s is NULL",
                      comm ? "asyncError" : "comm");
  /* Init still running: nothing else may be read yet.  Revoked: whether
   * the stopped work has drained.  CUDA: the kernels' status word (no
   * stream query: koloSuccess says no failure was seen, not that the work
   * is done). */
  *asyncError = atomic_load(&comm->init_busy) ? koloInProgress
                : atomic_load(&comm->revoked)  ? kolo_revoke_status(comm)
                : comm->kind                   ? comm->kind->status(comm)
                : comm->nbq                    ? kolo_nb_status(comm)
                                               : (koloResult_t)comm->failed;
  return koloSuccess;
}

/* As NCCL's: the work issued so far completes (a non-blocking comm's queue
 * drains, a CUDA comm's kernels end), its status is returned, and every
 * later call but koloCommDestroy (and the queries) is refused. */
koloResult_t koloCommFinalize(koloComm_t comm) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommFinalize: comm is NULL");
  if (atomic_load(&comm->init_busy) || atomic_load(&comm->revoked))
    return kolo_comm_check_ready(comm, "koloCommFinalize", 0);
  if (atomic_exchange(&comm->finalized, 1))
    return kolo_error(&comm->err, koloInvalidUsage, "koloCommFinalize: rank %d: the communicator was finalized already",
                      comm->rank);
  if (comm->nbq) kolo_nb_stop(comm); /* drains the queue */
  if (comm->kind == NULL) return (koloResult_t)comm->failed;
  comm->kind->quiesce(comm, "koloCommFinalize");
  return comm->kind->status(comm);
}

koloResult_t koloCommDestroy(koloComm_t comm) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommDestroy: comm is NULL");
  kolo_init_join(comm);
  if (comm->nbq) kolo_nb_stop(comm);
  kolo_comm_free(comm);
  return koloSuccess;
}

koloResult_t koloCommAbort(koloComm_t comm) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommAbort: comm is NULL");
  kolo_init_join(comm); /* an init cannot be cut short: its waits are bounded */
  atomic_store(&comm->aborted, 1);
  if (comm->kind) comm->kind->abort(comm); /* this comm's kernels stop at their next poll */
  kolo_comm_stop_from(comm, KOLO_STOP_ABORT, comm->rank, NULL);
  if (comm->nbq) kolo_nb_stop(comm);
  kolo_comm_free(comm);
  return koloSuccess;
}

/* ---- children (split.c, shrink.c) --------------------------------------- */

void kolo_comm_inherit(const struct koloComm *c, koloConfig_t *out) {
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  *out = def;
  out->blocking = c->blocking;
  out->timeoutMs = c->timeout_ms;
  out->nChannels = c->nchannels;
  out->bufferSize = (int)(c->slot_bytes * c->nslots);
  out->memory = c->memory;
  if (c->kind) out->cudaDev = c->kind->device(c);
}
