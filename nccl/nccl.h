/*
 * nccl.h - kolo's NCCL layer: the API of NCCL 2.28.9's nccl.h, implemented
 * by kolo (libnccl.so.2 built from kolo; README, "Using kolo in place of
 * NCCL").  Written for kolo from NCCL's published interface: the same
 * names, types, enum values, struct layouts and initializers, so that a
 * program compiled against NCCL's header loads this library unchanged, and a
 * program compiled against this header runs with NCCL's library.
 *
 * Every function has its pnccl* twin (the profiling entry points); the
 * nccl* names are weak aliases of them, as in NCCL.  NCCL's device API
 * (nccl_device.h) and its plugin interfaces are not part of this layer.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if defined(__cplusplus)
#include <cuda_fp8.h>
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
/* Versions up to 2.8.x were X*1000 + Y*100 + Z, later ones X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

#include <limits.h>
#include <stddef.h>

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6, /* also a peer that stopped answering (kolo's timeout) */
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister's flags. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink's flags: shrink as is, or end the parent's operations first. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke's flags (none defined yet: 0). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator configuration: start from NCCL_CONFIG_INITIALIZER.  The
 * library reads the fields a caller's struct has by its size (older
 * programs pass shorter structs). */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
  int trafficClass;
  const char *commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC_VALUE 0xcafebeef
#define NCCL_CONFIG_INITIALIZER                                                                    \
  {                                                                                                \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC_VALUE, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,  \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                                               \
  }

/* What ncclGroupSimulateEnd reports: start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_MAGIC_VALUE 0x74685283
#define NCCL_SIM_INFO_INITIALIZER                                                                       \
  {                                                                                                     \
    sizeof(ncclSimInfo_t), NCCL_SIM_INFO_MAGIC_VALUE, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_UNDEF_FLOAT                                                                                \
  }

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5, /* built-in ops; ops made by ncclRedOpCreate* are >= this */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where a premul-sum scalar is read: on the device while the collective
 * runs, or on the host before ncclRedOpCreatePreMulSum returns. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Each function comes as nccl* and pnccl*. */
#define NCCL_LAYER_DECLARE(ret, name, args) \
  ret name args;                            \
  ret p##name args

NCCL_LAYER_DECLARE(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size));
NCCL_LAYER_DECLARE(ncclResult_t, ncclMemFree, (void *ptr));
NCCL_LAYER_DECLARE(ncclResult_t, ncclGetVersion, (int *version));
NCCL_LAYER_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                   (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommSplit,
                   (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommShrink,
                   (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                    ncclConfig_t *config, int shrinkFlags));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                   (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                    ncclConfig_t *config));
NCCL_LAYER_DECLARE(const char *, ncclGetErrorString, (ncclResult_t result));
NCCL_LAYER_DECLARE(const char *, ncclGetLastError, (ncclComm_t comm));
NCCL_LAYER_DECLARE(void, ncclResetDebugInit, ());
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void *buff, size_t size, void **handle));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommWindowRegister,
                   (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags));
NCCL_LAYER_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
NCCL_LAYER_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                   (ncclRedOp_t * op, void *scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                    ncclComm_t comm));
NCCL_LAYER_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

/* Collectives: enqueued on `stream`, NCCL's argument order and in-place
 * rules (kolo's koloXxx of the same name document them). */
NCCL_LAYER_DECLARE(ncclResult_t, ncclReduce,
                   (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    int root, ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclBcast,
                   (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                    cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclBroadcast,
                   (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclAllReduce,
                   (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclReduceScatter,
                   (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclAllGather,
                   (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                    ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclAlltoAll,
                   (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                    cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclGather,
                   (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclScatter,
                   (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclSend,
                   (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                    cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclRecv,
                   (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                    cudaStream_t stream));
NCCL_LAYER_DECLARE(ncclResult_t, ncclGroupStart, ());
NCCL_LAYER_DECLARE(ncclResult_t, ncclGroupEnd, ());
NCCL_LAYER_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

#undef NCCL_LAYER_DECLARE

#ifdef __cplusplus
}
#endif

#endif
