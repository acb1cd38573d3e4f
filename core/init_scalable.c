/* init_scalable.c - koloCommInitRankScalable (NCCL 2.28): one init through
 * several rendezvous roots, so that no root is reached by every rank of a
 * large job (transport/bootstrap_forward.c says how the roots share the
 * work). */
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/comm.h"

/* Decodes the ids; two ids of one root would make it serve two blocks. */
static koloResult_t decode_ids(const koloUniqueId *ids, int n, kolo_uid *out) {
  const char *fn = "koloCommInitRankScalable";
  for (int k = 0; k < n; k++) {
    kolo_errbuf eb = {0};
    if (kolo_uid_decode(&ids[k], &out[k], &eb) != koloSuccess)
      return kolo_error(NULL, koloInvalidArgument, "%s: commIds[%d]: %s", fn, k, eb.msg);
    for (int j = 0; j < k; j++)
      if (memcmp(&out[j], &out[k], sizeof out[k]) == 0)
        return kolo_error(NULL, koloInvalidArgument,
                          "%s: commIds[%d] and commIds[%d] are the same id (each root serves one block of ranks: "
                          "make one id per koloGetUniqueId call)", fn, j, k);
  }
  return koloSuccess;
}

koloResult_t koloCommInitRankScalable(koloComm_t *newcomm, int nranks, int myrank, int nId, koloUniqueId *commIds,
                                      koloConfig_t *config) {
  const char *fn = "koloCommInitRankScalable";
  if (newcomm == NULL || commIds == NULL)
    return kolo_error(NULL, koloInvalidArgument, "%s: %s is NULL", fn, newcomm ? "commIds" : "newcomm");
  if (nranks >= 1 && (nId < 1 || nId > nranks))
    return kolo_error(NULL, koloInvalidArgument, "%s: nId = %d is outside 1..nranks (%d)", fn, nId, nranks);
  if (nranks < 1) nId = 1; /* kolo_comm_create says what is wrong */
  kolo_uid *uids = calloc((size_t)nId, sizeof *uids);
  if (uids == NULL) return kolo_error(NULL, koloSystemError, "%s: out of memory", fn);
  struct koloComm *c = NULL;
  koloResult_t res = nranks < 1 ? koloSuccess : decode_ids(commIds, nId, uids);
  if (res == koloSuccess) res = kolo_comm_create(fn, nranks, myrank, uids, nId, config, &c);
  free(uids);
  return res == koloSuccess ? kolo_comm_init_or_defer(c, newcomm) : res;
}
