/* nccl_comm.c - NCCL's communicator calls on kolo's: init (device memory by
 * default), split, shrink, finalize, destroy, abort, revoke, queries and
 * buffer registration. */
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_layer.h"

#define COMM_API(name) NCCL_LAYER_EXPORT ncclResult_t p##name

COMM_API(ncclCommInitRankConfig)(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config) {
  koloConfig_t kc;
  koloResult_t res = nccl_config(config, &kc, "ncclCommInitRankConfig");
  if (res != koloSuccess) return nccl_result(res);
  nccl_env_announce();
  koloUniqueId id;
  memcpy(&id, &commId, sizeof id);
  return nccl_result(koloCommInitRankConfig((koloComm_t *)(void *)comm, nranks, id, rank, &kc));
}
NCCL_LAYER_ALIAS(ncclCommInitRankConfig)
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);

COMM_API(ncclCommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}
NCCL_LAYER_ALIAS(ncclCommInitRank) ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);

/* NCCL: devlist NULL means devices 0 .. ndev-1. */
COMM_API(ncclCommInitAll)(ncclComm_t *comm, int ndev, const int *devlist) {
  koloConfig_t kc;
  nccl_config(NULL, &kc, "ncclCommInitAll");
  nccl_env_announce();
  if (ndev < 1 || comm == NULL)
    return nccl_result(kolo_error(NULL, koloInvalidArgument, "ncclCommInitAll: %s",
                                  comm == NULL ? "comm is NULL" : "ndev must be at least 1"));
  int *devs = malloc((size_t)ndev * sizeof *devs);
  if (devs == NULL) return nccl_result(kolo_error(NULL, koloSystemError, "ncclCommInitAll: out of memory"));
  for (int i = 0; i < ndev; i++) devs[i] = devlist ? devlist[i] : i;
  koloResult_t res = koloCommInitAllConfig((koloComm_t *)(void *)comm, ndev, devs, &kc);
  free(devs);
  return nccl_result(res);
}
NCCL_LAYER_ALIAS(ncclCommInitAll) ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);

COMM_API(ncclCommInitRankScalable)(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                   ncclConfig_t *config) {
  koloConfig_t kc;
  koloResult_t res = nccl_config(config, &kc, "ncclCommInitRankScalable");
  if (res != koloSuccess) return nccl_result(res);
  nccl_env_announce();
  return nccl_result(koloCommInitRankScalable((koloComm_t *)(void *)newcomm, nranks, myrank, nId,
                                              (koloUniqueId *)(void *)commIds, &kc));
}
NCCL_LAYER_ALIAS(ncclCommInitRankScalable)
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                      ncclConfig_t *config);

COMM_API(ncclCommSplit)(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  koloConfig_t kc;
  koloResult_t res = nccl_config(config, &kc, "ncclCommSplit");
  if (res != koloSuccess) return nccl_result(res);
  return nccl_result(koloCommSplit(kolo_of(comm), color, key, (koloComm_t *)(void *)newcomm, config ? &kc : NULL));
}
NCCL_LAYER_ALIAS(ncclCommSplit)
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config);

COMM_API(ncclCommShrink)(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                         ncclConfig_t *config, int shrinkFlags) {
  koloConfig_t kc;
  koloResult_t res = nccl_config(config, &kc, "ncclCommShrink");
  if (res != koloSuccess) return nccl_result(res);
  return nccl_result(koloCommShrink(kolo_of(comm), excludeRanksList, excludeRanksCount, (koloComm_t *)(void *)newcomm,
                                    config ? &kc : NULL, shrinkFlags));
}
NCCL_LAYER_ALIAS(ncclCommShrink)
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                            ncclConfig_t *config, int shrinkFlags);

COMM_API(ncclCommFinalize)(ncclComm_t comm) { return nccl_result(koloCommFinalize(kolo_of(comm))); }
NCCL_LAYER_ALIAS(ncclCommFinalize) ncclResult_t ncclCommFinalize(ncclComm_t comm);

COMM_API(ncclCommDestroy)(ncclComm_t comm) { return nccl_result(koloCommDestroy(kolo_of(comm))); }
NCCL_LAYER_ALIAS(ncclCommDestroy) ncclResult_t ncclCommDestroy(ncclComm_t comm);

COMM_API(ncclCommAbort)(ncclComm_t comm) { return nccl_result(koloCommAbort(kolo_of(comm))); }
NCCL_LAYER_ALIAS(ncclCommAbort) ncclResult_t ncclCommAbort(ncclComm_t comm);

COMM_API(ncclCommRevoke)(ncclComm_t comm, int revokeFlags) {
  return nccl_result(koloCommRevoke(kolo_of(comm), revokeFlags));
}
NCCL_LAYER_ALIAS(ncclCommRevoke) ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* A kolo result that is still in progress stays so (koloInProgress is 7). */
COMM_API(ncclCommGetAsyncError)(ncclComm_t comm, ncclResult_t *asyncError) {
  if (asyncError == NULL)
    return nccl_result(kolo_error(NULL, koloInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL"));
  koloResult_t async = koloSuccess;
  koloResult_t res = koloCommGetAsyncError(kolo_of(comm), &async);
  *asyncError = nccl_result(async);
  return nccl_result(res);
}
NCCL_LAYER_ALIAS(ncclCommGetAsyncError) ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

COMM_API(ncclCommCount)(const ncclComm_t comm, int *count) { return nccl_result(koloCommCount(kolo_of(comm), count)); }
NCCL_LAYER_ALIAS(ncclCommCount) ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);

COMM_API(ncclCommCuDevice)(const ncclComm_t comm, int *device) {
  return nccl_result(koloCommCuDevice(kolo_of(comm), device));
}
NCCL_LAYER_ALIAS(ncclCommCuDevice) ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);

COMM_API(ncclCommUserRank)(const ncclComm_t comm, int *rank) {
  return nccl_result(koloCommUserRank(kolo_of(comm), rank));
}
NCCL_LAYER_ALIAS(ncclCommUserRank) ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);

COMM_API(ncclCommRegister)(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  return nccl_result(koloCommRegister(kolo_of(comm), buff, size, handle));
}
NCCL_LAYER_ALIAS(ncclCommRegister) ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);

COMM_API(ncclCommDeregister)(const ncclComm_t comm, void *handle) {
  return nccl_result(koloCommDeregister(kolo_of(comm), handle));
}
NCCL_LAYER_ALIAS(ncclCommDeregister) ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);

COMM_API(ncclCommWindowRegister)(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags) {
  return nccl_result(koloCommWindowRegister(kolo_of(comm), buff, size, (koloWindow_t *)(void *)win, winFlags));
}
NCCL_LAYER_ALIAS(ncclCommWindowRegister)
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags);

COMM_API(ncclCommWindowDeregister)(ncclComm_t comm, ncclWindow_t win) {
  return nccl_result(koloCommWindowDeregister(kolo_of(comm), (koloWindow_t)(void *)win));
}
NCCL_LAYER_ALIAS(ncclCommWindowDeregister) ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

COMM_API(ncclMemAlloc)(void **ptr, size_t size) { return nccl_result(koloMemAlloc(ptr, size)); }
NCCL_LAYER_ALIAS(ncclMemAlloc) ncclResult_t ncclMemAlloc(void **ptr, size_t size);

COMM_API(ncclMemFree)(void *ptr) { return nccl_result(koloMemFree(ptr)); }
NCCL_LAYER_ALIAS(ncclMemFree) ncclResult_t ncclMemFree(void *ptr);
