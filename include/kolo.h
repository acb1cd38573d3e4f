/*
 * kolo.h - public API of kolo, a collectives library with its own kernels.
 *
 * The API is NCCL-shaped: same argument order, same in-place rules and the
 * same enum values, with the prefix `kolo`, so that an NCCL ABI shim is a
 * thin layer.  This header needs no CUDA header: streams are passed as
 * koloStream_t, which is the same type as cudaStream_t.
 *
 * Memory kinds.  A communicator moves either host memory (koloMemHost:
 * buffers are host pointers, the stream argument is ignored and may be NULL)
 * or CUDA device memory (koloMemCuda: buffers are device pointers, calls are
 * enqueued on the stream).  On a host communicator a call returns when its
 * result is in the output buffer, unless the communicator was created with
 * config.blocking = 0: then the call returns koloInProgress at once, runs on
 * the communicator's progress thread in issue order, and koloCommGetAsyncError
 * reports koloInProgress until every call issued so far has completed.
 *
 * Thread safety: calls on one communicator must come from one thread at a
 * time (as in NCCL); different communicators may be used concurrently.
 */
#ifndef KOLO_H
#define KOLO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function this header declares is exported from libkolo.so and
 * nothing else is: kolo is compiled with -fvisibility=hidden, so a new public
 * function needs no mark but its declaration here (tests/check_exports.sh
 * checks the exports against this header and kolo_fusion.h). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define KOLO_MAJOR 0
#define KOLO_MINOR 1
#define KOLO_PATCH 0
#define KOLO_VERSION_CODE (KOLO_MAJOR * 10000 + KOLO_MINOR * 100 + KOLO_PATCH)

/* Same layout as cudaStream_t, so callers pass their CUDA stream as is. */
typedef struct CUstream_st *koloStream_t;

typedef struct koloComm *koloComm_t;

/* Opaque bytes, as NCCL's: copy them to every rank as they are (MPI_Bcast,
 * a file).  They read the same on hosts of any byte order; a process of
 * another kolo version refuses them, saying so. */
#define KOLO_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[KOLO_UNIQUE_ID_BYTES];
} koloUniqueId;

/* Result codes: values 0..7 equal NCCL's; 8 is NCCL's ncclNumResults and
 * stays unused, so that no kolo code reads as NCCL's count (or a code a
 * later NCCL may give that value); kolo's own codes start at 9. */
typedef enum {
  koloSuccess = 0,
  koloUnhandledCudaError = 1,
  koloSystemError = 2,
  koloInternalError = 3,
  koloInvalidArgument = 4,
  koloInvalidUsage = 5,
  koloRemoteError = 6, /* a peer failed or went away */
  koloInProgress = 7,
  /* 8: reserved (NCCL's ncclNumResults) */
  koloTimeout = 9, /* kolo extension: a bounded wait expired */
  koloNumResults = 10
} koloResult_t;

typedef enum {
  koloSum = 0,
  koloProd = 1,
  koloMax = 2,
  koloMin = 3,
  koloAvg = 4,
  /* The number of built-in ops, and the least value of the ops that
   * koloRedOpCreatePreMulSum makes. */
  koloNumOps = 5,
  koloMaxRedOp = 0x7fffffff /* the largest value an op may have */
} koloRedOp_t;

typedef enum {
  koloInt8 = 0,
  koloChar = 0,
  koloUint8 = 1,
  koloInt32 = 2,
  koloInt = 2,
  koloUint32 = 3,
  koloInt64 = 4,
  koloUint64 = 5,
  koloFloat16 = 6,
  koloHalf = 6,
  koloFloat32 = 7,
  koloFloat = 7,
  koloFloat64 = 8,
  koloDouble = 8,
  koloBfloat16 = 9,
  koloFloat8e4m3 = 10, /* fp8: 4 exponent bits, 3 mantissa; no inf; 448 max */
  koloFloat8e5m2 = 11, /* fp8: 5 exponent bits, 2 mantissa; 57344 max */
  koloNumTypes = 12
} koloDataType_t;

typedef enum {
  koloMemHost = 0, /* buffers are host pointers */
  koloMemCuda = 1  /* buffers are CUDA device pointers */
} koloMemKind_t;

/* Communicator configuration.  Start from KOLO_CONFIG_INITIALIZER; a field
 * left at KOLO_CONFIG_UNDEF takes its value from the environment (KOLO_*
 * variables) or the built-in default.  `size` versions the struct: fields
 * are only ever appended. */
#define KOLO_CONFIG_UNDEF (-2147483647 - 1)
typedef struct {
  size_t size;      /* sizeof(koloConfig_t) as the caller compiled it */
  unsigned magic;   /* KOLO_CONFIG_MAGIC */
  unsigned version; /* KOLO_VERSION_CODE */
  int memory;       /* koloMemKind_t; default koloMemHost (KOLO_MEMORY) */
  int blocking;     /* 1: calls return when done; 0: koloInProgress */
  int timeoutMs;    /* bound on any wait for a peer; 0 = none (KOLO_TIMEOUT_MS) */
  int bufferSize;   /* bytes per connector: slots x slot size (KOLO_BUFFSIZE) */
  int nChannels;    /* rings run side by side (KOLO_NCHANNELS) */
  int cudaDev;      /* device of a koloMemCuda communicator; -1 = current */
  int minChannels;  /* channels at least / at most, whatever nChannels and the */
  int maxChannels;  /* cost model say (KOLO_MIN_NCHANNELS, KOLO_MAX_NCHANNELS) */
} koloConfig_t;

#define KOLO_CONFIG_MAGIC 0x6b6f6c6fu /* "kolo" */
#define KOLO_CONFIG_INITIALIZER                                              \
  {                                                                          \
    sizeof(koloConfig_t), KOLO_CONFIG_MAGIC, KOLO_VERSION_CODE,              \
        KOLO_CONFIG_UNDEF, KOLO_CONFIG_UNDEF, KOLO_CONFIG_UNDEF,             \
        KOLO_CONFIG_UNDEF, KOLO_CONFIG_UNDEF, KOLO_CONFIG_UNDEF,             \
        KOLO_CONFIG_UNDEF, KOLO_CONFIG_UNDEF                                 \
  }

/* ---- library ---------------------------------------------------------- */
koloResult_t koloGetVersion(int *version);
const char *koloGetErrorString(koloResult_t result);
/* The sentence of the error that the last failing call on `comm` returned,
 * naming the argument, rank or peer; "" when there was none.  The rule, with
 * several threads at work (the caller, kolo's progress thread, its network
 * proxy): once the communicator has failed (a peer died or left, a timeout,
 * an abort, a system error) every call returns that failure and the
 * sentence stays the *first* failure's, whichever thread saw it first; a
 * later call refused for a bad argument or bad usage shows its own
 * sentence, and the next failing call shows the first failure again.
 * With comm == NULL: the last error of this thread that had no communicator
 * (a failed init), or a call's words on a failed communicator ("...: the
 * communicator failed earlier: <first failure>").  The text is a copy,
 * valid until this thread calls koloGetLastError again. */
const char *koloGetLastError(koloComm_t comm);

/* ---- communicators ---------------------------------------------------- */
/* Starts a rendezvous point in this process and returns its id: the root's
 * address and a random per-job secret.  Pass it to every rank out of band. */
koloResult_t koloGetUniqueId(koloUniqueId *uniqueId);
koloResult_t koloCommInitRank(koloComm_t *comm, int nranks, koloUniqueId commId,
                              int rank);
koloResult_t koloCommInitRankConfig(koloComm_t *comm, int nranks,
                                    koloUniqueId commId, int rank,
                                    koloConfig_t *config);
/* ndev ranks in this process, one thread each during init.  For host
 * communicators devlist may be NULL; for CUDA ones it lists the device of
 * each rank (NULL: device 0..ndev-1; the same device may repeat). */
koloResult_t koloCommInitAll(koloComm_t *comms, int ndev, const int *devlist);
koloResult_t koloCommInitAllConfig(koloComm_t *comms, int ndev,
                                   const int *devlist, koloConfig_t *config);
/* Joins a job started by a launcher.  Rank and size come from the first of
 * KOLO_RANK / KOLO_WORLD_SIZE, OMPI_COMM_WORLD_RANK / _SIZE, SLURM_PROCID /
 * SLURM_NTASKS, RANK / WORLD_SIZE (torchrun) that is set.  The rendezvous:
 * KOLO_ROOT=host:port; else, under a PMIx launcher (mpirun, srun --mpi=pmix),
 * an id that rank 0 publishes in the launcher's store; else MASTER_ADDR at
 * MASTER_PORT + KOLO_TORCH_PORT_OFFSET (default 1; torchrun's own store holds
 * MASTER_PORT).  Rank 0 serves the rendezvous itself.  The per-job secret
 * comes from KOLO_SECRET (32 hex digits) or KOLO_SECRET_FILE; under PMIx
 * without KOLO_ROOT it is random; else it is derived from the job's
 * variables, and a warning says so (docs/running.md). */
koloResult_t koloCommInitFromEnv(koloComm_t *comm, koloConfig_t *config);
/* color < 0 (KOLO_SPLIT_NOCOLOR): this rank gets *newcomm = NULL. */
#define KOLO_SPLIT_NOCOLOR (-1)
koloResult_t koloCommSplit(koloComm_t comm, int color, int key,
                           koloComm_t *newcomm, koloConfig_t *config);
koloResult_t koloCommFinalize(koloComm_t comm);
koloResult_t koloCommDestroy(koloComm_t comm);
koloResult_t koloCommAbort(koloComm_t comm);
koloResult_t koloCommGetAsyncError(koloComm_t comm, koloResult_t *asyncError);
koloResult_t koloCommCount(const koloComm_t comm, int *count);
koloResult_t koloCommUserRank(const koloComm_t comm, int *rank);

/* ---- collectives (NCCL's argument order and in-place rules) ----------- */
/* In place when recvbuff == sendbuff. */
koloResult_t koloAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           koloDataType_t datatype, koloRedOp_t op,
                           koloComm_t comm, koloStream_t stream);
/* sendbuff holds nranks*recvcount elements; in place when
 * recvbuff == sendbuff + rank*recvcount. */
koloResult_t koloReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, koloDataType_t datatype,
                               koloRedOp_t op, koloComm_t comm,
                               koloStream_t stream);
/* recvbuff holds nranks*sendcount elements; in place when
 * sendbuff == recvbuff + rank*sendcount. */
koloResult_t koloAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, koloDataType_t datatype,
                           koloComm_t comm, koloStream_t stream);
/* sendbuff is read on root only; in place when sendbuff == recvbuff. */
koloResult_t koloBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           koloDataType_t datatype, int root, koloComm_t comm,
                           koloStream_t stream);
/* recvbuff is written on root only. */
koloResult_t koloReduce(const void *sendbuff, void *recvbuff, size_t count,
                        koloDataType_t datatype, koloRedOp_t op, int root,
                        koloComm_t comm, koloStream_t stream);
koloResult_t koloSend(const void *sendbuff, size_t count,
                      koloDataType_t datatype, int peer, koloComm_t comm,
                      koloStream_t stream);
koloResult_t koloRecv(void *recvbuff, size_t count, koloDataType_t datatype,
                      int peer, koloComm_t comm, koloStream_t stream);

/* ---- all-to-all, gather, scatter, in-place broadcast (NCCL 2.28) ------- */
/* sendbuff and recvbuff hold nranks*count elements each: block j of
 * sendbuff goes to rank j, block i of recvbuff comes from rank i.  Not in
 * place: overlapping buffers are refused (koloInvalidArgument). */
koloResult_t koloAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          koloDataType_t datatype, koloComm_t comm,
                          koloStream_t stream);
/* Every rank sends count elements to root, which puts rank i's at
 * recvbuff + i*count (nranks*count elements); recvbuff is not used on the
 * other ranks (may be NULL).  In place when sendbuff == recvbuff +
 * root*count on the root. */
koloResult_t koloGather(const void *sendbuff, void *recvbuff, size_t count,
                        koloDataType_t datatype, int root, koloComm_t comm,
                        koloStream_t stream);
/* root sends sendbuff + i*count (count elements) to rank i's recvbuff;
 * sendbuff is not used on the other ranks (may be NULL).  In place when
 * recvbuff == sendbuff + root*count on the root. */
koloResult_t koloScatter(const void *sendbuff, void *recvbuff, size_t count,
                         koloDataType_t datatype, int root, koloComm_t comm,
                         koloStream_t stream);
/* NCCL's legacy in-place broadcast: koloBroadcast(buff, buff, ...). */
koloResult_t koloBcast(void *buff, size_t count, koloDataType_t datatype,
                       int root, koloComm_t comm, koloStream_t stream);

/* ---- Adasum (Horovod's adaptive summation) ----------------------------- */
/* recvbuff = the Adasum of every rank's count elements of sendbuff, the
 * same on every rank; in place when recvbuff == sendbuff (other overlaps
 * are refused).  Two vectors combine as
 *   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
 * (dot products and norms in double; a squared norm below 1e-8 counts as
 * zero and its coefficient is 1), over Horovod's tree: vector halving,
 * distance doubling, rank r's group combined with rank r ^ L's at level
 * L = 1, 2, 4, ...  With p the largest power of two <= nranks, rank p + i
 * is first folded into rank i: adasum(rank i's, rank p + i's).  datatype:
 * float16, bfloat16, float32, float64.  Host communicators only (a CUDA
 * one is refused, koloInvalidUsage: the dot products are computed on the
 * host between exchanges); not inside a group (koloInvalidUsage).  On a
 * non-blocking communicator it returns koloInProgress and runs on the
 * progress thread in issue order.  stream is ignored (may be NULL). */
koloResult_t koloAdasum(const void *sendbuff, void *recvbuff, size_t count,
                        koloDataType_t datatype, koloComm_t comm,
                        koloStream_t stream);

/* Calls between GroupStart and GroupEnd are issued together at GroupEnd
 * (send/recv pairs among several peers cannot deadlock).  Groups nest. */
koloResult_t koloGroupStart(void);
koloResult_t koloGroupEnd(void);

/* Size in bytes of one element of `datatype`; 0 for an invalid type. */
size_t koloTypeSize(koloDataType_t datatype);

/* ---- NCCL 2.19 .. 2.28: init, fault tolerance, registration --------------
 * (kolo's README, "NCCL 2.28 calls", says what each does in kolo.) */

/* Init inside a group: koloCommInitRank[Config] calls between GroupStart and
 * GroupEnd (from one thread, for several ranks) return at once with a handle
 * that is usable after GroupEnd, which runs them together; a group holds
 * either inits or other calls, not both.  With config.blocking = 0 an init
 * returns koloInProgress at once (inside a group: GroupEnd does), and
 * koloCommGetAsyncError(comm) says koloInProgress until it is done.  A
 * handle whose init failed must still be destroyed. */

/* nId unique ids, made by nId koloGetUniqueId calls (each starts a
 * rendezvous root), the same ids in the same order on every rank.  Rank r
 * meets the others at the root of commIds[r * nId / nranks]: each root
 * receives only its block of ranks, and the roots of commIds[1..] forward
 * theirs to the root of commIds[0], so no root is reached by every rank. */
koloResult_t koloCommInitRankScalable(koloComm_t *newcomm, int nranks, int myrank,
                                      int nId, koloUniqueId *commIds,
                                      koloConfig_t *config);

/* koloCommShrink flags */
#define KOLO_SHRINK_DEFAULT 0x00 /* the parent has no operation in flight */
#define KOLO_SHRINK_ABORT 0x01   /* end the parent's in-flight operations first */
/* A communicator of the parent's ranks but excludeRanksList (parent ranks),
 * ranked in the parent's order.  Called by every surviving rank with the
 * same list; the excluded ranks may be dead.  The survivors meet over the
 * parent's out-of-band links among themselves only, bounded by the parent's
 * timeout.  config NULL: the parent's. */
koloResult_t koloCommShrink(koloComm_t comm, int *excludeRanksList,
                            int excludeRanksCount, koloComm_t *newcomm,
                            koloConfig_t *config, int shrinkFlags);

/* koloCommRevoke flags */
#define KOLO_REVOKE_DEFAULT 0x00 /* the only value */
/* Stops the communicator's in-flight operations (peers waiting on this rank
 * stop too) and refuses new ones; koloCommGetAsyncError says koloInProgress
 * until its work has drained, then koloSuccess.  Afterwards only
 * koloCommDestroy, koloCommAbort, koloCommSplit and koloCommShrink (and the
 * queries) are allowed; koloCommFinalize is refused. */
koloResult_t koloCommRevoke(koloComm_t comm, int revokeFlags);

/* The CUDA device of a koloMemCuda communicator.  A host communicator has
 * none: *device = -1 and koloInvalidUsage. */
koloResult_t koloCommCuDevice(const koloComm_t comm, int *device);

/* Reads KOLO_DEBUG and KOLO_DEBUG_FILE again (NCCL deprecates its
 * ncclResetDebugInit; kolo keeps it for programs that call it). */
void koloResetDebugInit(void);

/* Memory for registration.  Builds with CUDA where the process sees a CUDA
 * device: device memory of the calling thread's current device, as
 * ncclMemAlloc.  Elsewhere (no CUDA in the build, or no device visible):
 * host memory, page-aligned and zeroed.  koloMemFree takes only what
 * koloMemAlloc gave (NULL: nothing to do). */
koloResult_t koloMemAlloc(void **ptr, size_t size);
koloResult_t koloMemFree(void *ptr);

/* Registers [buff, buff + size) with comm (host memory for host
 * communicators, memory of the comm's device for CUDA ones).  kolo keeps
 * the registrations (per communicator, released by koloCommDestroy) but
 * does not yet use them to save a copy: calls move registered and
 * unregistered buffers alike (README). */
koloResult_t koloCommRegister(const koloComm_t comm, void *buff, size_t size,
                              void **handle);
koloResult_t koloCommDeregister(const koloComm_t comm, void *handle);

/* Windows (NCCL 2.27): registrations with flags. */
typedef struct koloWindow_vidmem *koloWindow_t;
#define KOLO_WIN_DEFAULT 0x00
#define KOLO_WIN_COLL_SYMMETRIC 0x01 /* buff lies in one koloMemAlloc block */
#define KOLO_WIN_REQUIRED_ALIGNMENT 4096
koloResult_t koloCommWindowRegister(koloComm_t comm, void *buff, size_t size,
                                    koloWindow_t *win, int winFlags);
koloResult_t koloCommWindowDeregister(koloComm_t comm, koloWindow_t win);

/* koloGroupSimulateEnd: ends the group as koloGroupEnd would but issues
 * none of its calls; estimatedTime is the time kolo's cost model gives
 * them, in microseconds (per communicator its calls one after another,
 * communicators side by side).  A model figure, not a measurement. */
typedef struct {
  size_t size;          /* sizeof(koloSimInfo_t) */
  unsigned magic;       /* KOLO_SIM_INFO_MAGIC */
  unsigned version;     /* KOLO_VERSION_CODE */
  float estimatedTime;  /* out: microseconds */
} koloSimInfo_t;
#define KOLO_SIM_INFO_MAGIC 0x6b6f6c73u /* "kols" */
#define KOLO_SIM_INFO_INITIALIZER \
  { sizeof(koloSimInfo_t), KOLO_SIM_INFO_MAGIC, KOLO_VERSION_CODE, -1.0f }
koloResult_t koloGroupSimulateEnd(koloSimInfo_t *simInfo);

/* ---- reductions: fp8 and premul-sum ----------------------------------- *
 * fp8 (koloFloat8e4m3, koloFloat8e5m2) reduces as NCCL does on sm_90: each
 * operation widens its operands to float, computes, and rounds back to the
 * nearest value, ties to even, saturating: a result beyond the largest
 * finite value, an infinity included, becomes that value with its sign
 * (so an e5m2 infinity that goes through a reduction comes out as +-57344);
 * NaN stays NaN.  max and min return the other operand when one is NaN, and
 * +0 is above -0.  avg is NCCL's: every rank's input multiplied by 1/nranks
 * rounded to the type (e4m3: 1/3 is 0.34375), then summed.  A ring rounds
 * each partial sum, so a sum of many ranks depends on their order. */

/* Where the scalar of a premul-sum lives. */
typedef enum {
  /* Read when the call runs: a device pointer for koloMemCuda
   * communicators (the kernel reads it, so a value written there between
   * the call and the kernel's start counts; also at every replay of a CUDA
   * graph), a host pointer for host ones (read when the executor starts the
   * call, on the progress thread for non-blocking communicators).  It must
   * stay valid until then. */
  koloScalarDevice = 0,
  /* Read by koloRedOpCreatePreMulSum before it returns. */
  koloScalarHostImmediate = 1
} koloScalarResidence_t;

/* Makes *op: a sum in which this rank's input is first multiplied by
 * *scalar (one element of `datatype`, the product rounded to the type;
 * integers wrap), for calls on `comm` with `datatype` only.  Any datatype.
 * The value of *op is >= koloNumOps and differs from the ops of other
 * communicators; each rank makes its own (scalars may differ by rank). */
koloResult_t koloRedOpCreatePreMulSum(koloRedOp_t *op, void *scalar, koloDataType_t datatype,
                                      koloScalarResidence_t residence, koloComm_t comm);
/* Frees op (made on comm).  Calls are bound to an op when they are made, so
 * it may be destroyed as soon as the last call that uses it has returned,
 * before that work has run. */
koloResult_t koloRedOpDestroy(koloRedOp_t op, koloComm_t comm);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* KOLO_H */
