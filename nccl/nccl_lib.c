/* nccl_lib.c - the library-wide calls of kolo's NCCL layer: version, error
 * strings, last error, unique ids, debug re-init, and the result mapping. */
#include "nccl/nccl_layer.h"

/* The layer's own assertions of NCCL's ABI: they hold against both headers
 * (nccl_layer.h). */
_Static_assert(NCCL_UNIQUE_ID_BYTES == KOLO_UNIQUE_ID_BYTES, "unique id size");
_Static_assert(sizeof(ncclUniqueId) == sizeof(koloUniqueId), "unique id layout");
_Static_assert(ncclSuccess == (int)koloSuccess && ncclInProgress == (int)koloInProgress, "results 0..7");
_Static_assert(ncclRemoteError == (int)koloRemoteError && ncclInvalidUsage == (int)koloInvalidUsage, "results");
_Static_assert(ncclNumResults == 8, "NCCL's count of results");
_Static_assert(ncclSum == (int)koloSum && ncclAvg == (int)koloAvg && ncclNumOps == (int)koloNumOps, "ops");
_Static_assert(ncclBfloat16 == (int)koloBfloat16 && ncclFloat64 == (int)koloFloat64, "types");
_Static_assert(ncclFloat8e4m3 == (int)koloFloat8e4m3 && ncclFloat8e5m2 == (int)koloFloat8e5m2, "fp8 types");
_Static_assert(ncclNumTypes == (int)koloNumTypes, "type count");
_Static_assert(sizeof(ncclRedOp_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int), "enum sizes");

ncclResult_t nccl_result(koloResult_t r) {
  if ((int)r >= 0 && (int)r < ncclNumResults) return (ncclResult_t)r;
  return r == koloTimeout ? ncclRemoteError : ncclInternalError;
}

NCCL_LAYER_EXPORT ncclResult_t pncclGetVersion(int *version) {
  if (version == NULL) return nccl_result(kolo_error(NULL, koloInvalidArgument, "ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NCCL_LAYER_ALIAS(ncclGetVersion) ncclResult_t ncclGetVersion(int *version);

NCCL_LAYER_EXPORT const char *pncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "a CUDA call failed (ncclGetLastError says which)";
  case ncclSystemError: return "a system call failed (ncclGetLastError says which)";
  case ncclInternalError: return "internal error of kolo's NCCL layer (ncclGetLastError says where)";
  case ncclInvalidArgument: return "an argument is invalid (ncclGetLastError names it)";
  case ncclInvalidUsage: return "a call is not allowed here (ncclGetLastError says why)";
  case ncclRemoteError: return "a peer failed, went away or stopped answering";
  case ncclInProgress: return "the operation is in progress";
  default: return "unknown result code";
  }
}
NCCL_LAYER_ALIAS(ncclGetErrorString) const char *ncclGetErrorString(ncclResult_t result);

NCCL_LAYER_EXPORT const char *pncclGetLastError(ncclComm_t comm) { return koloGetLastError(kolo_of(comm)); }
NCCL_LAYER_ALIAS(ncclGetLastError) const char *ncclGetLastError(ncclComm_t comm);

NCCL_LAYER_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (uniqueId == NULL)
    return nccl_result(kolo_error(NULL, koloInvalidArgument, "ncclGetUniqueId: uniqueId is NULL"));
  nccl_env_announce();
  return nccl_result(koloGetUniqueId((koloUniqueId *)(void *)uniqueId));
}
NCCL_LAYER_ALIAS(ncclGetUniqueId) ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);

NCCL_LAYER_EXPORT void pncclResetDebugInit() { koloResetDebugInit(); }
NCCL_LAYER_ALIAS(ncclResetDebugInit) void ncclResetDebugInit();
