/* revoke.c - koloCommRevoke (NCCL 2.28's ncclCommRevoke).
 *
 * Revoking stops what the communicator has in flight, as koloCommAbort
 * does, but keeps the communicator: its out-of-band links stay up, so the
 * surviving ranks can still split or shrink it.  The abort flag stops the
 * host executor at its next wait and the progress thread skips what is
 * queued; the abort word stops its kernels; the stop words of its pipes
 * tell the peers waiting on this rank, so that they fail at once instead
 * of at their timeout.  New calls are refused (kolo_comm_check_ready);
 * koloCommGetAsyncError says koloInProgress until the stopped work has
 * drained, then koloSuccess: the failures the stop caused are the revoke's
 * doing, not errors to report. */
#include "core/comm_state.h"
#include "core/revoke.h"
#include "core/progress.h"
#include "core/mem_kind.h"

koloResult_t koloCommRevoke(koloComm_t comm, int revokeFlags) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommRevoke: comm is NULL");
  if (revokeFlags != KOLO_REVOKE_DEFAULT)
    return kolo_error(&comm->err, koloInvalidArgument,
                      "koloCommRevoke: rank %d: revokeFlags = 0x%x, and KOLO_REVOKE_DEFAULT (0) is the only value",
                      comm->rank, (unsigned)revokeFlags);
  koloResult_t res = kolo_comm_check_ready(comm, "koloCommRevoke", 1);
  if (res != koloSuccess || atomic_exchange(&comm->revoked, 1)) return res; /* twice: done already */
  atomic_store(&comm->aborted, 1);
  if (comm->kind) comm->kind->abort(comm);
  kolo_comm_stop(comm, KOLO_STOP_ABORT);
  return koloSuccess;
}

koloResult_t kolo_revoke_status(struct koloComm *c) {
  if (c->nbq && kolo_nb_status(c) == koloInProgress) return koloInProgress;
  if (c->kind && c->kind->busy(c)) return koloInProgress;
  return koloSuccess;
}
