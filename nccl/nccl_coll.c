/* nccl_coll.c - NCCL's collectives, point-to-point calls, groups and
 * reduction operators on kolo's: the same arguments, in the same order, with
 * kolo's types (whose values are NCCL's). */
#include "nccl/nccl_layer.h"

/* The magic comes from the header's NCCL_SIM_INFO_INITIALIZER (NCCL names
 * it nowhere else), so that each build checks against its own header's. */
static const ncclSimInfo_t sim_info_initializer = NCCL_SIM_INFO_INITIALIZER;
#define SIM_INFO_MAGIC (sim_info_initializer.magic)

#define COLL_API(name) NCCL_LAYER_EXPORT ncclResult_t p##name
#define T(d) ((koloDataType_t)(d))
#define OP(o) ((koloRedOp_t)(o))

COLL_API(ncclAllReduce)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(koloAllReduce(sendbuff, recvbuff, count, T(datatype), OP(op), kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclAllReduce)
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclReduceScatter)(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(
      koloReduceScatter(sendbuff, recvbuff, recvcount, T(datatype), OP(op), kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclReduceScatter)
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclAllGather)(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                        ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(koloAllGather(sendbuff, recvbuff, sendcount, T(datatype), kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclAllGather)
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclBroadcast)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(koloBroadcast(sendbuff, recvbuff, count, T(datatype), root, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclBroadcast)
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclBcast)(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(koloBcast(buff, count, T(datatype), root, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclBcast)
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);

COLL_API(ncclReduce)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     int root, ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(
      koloReduce(sendbuff, recvbuff, count, T(datatype), OP(op), root, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclReduce)
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclAlltoAll)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                       cudaStream_t stream) {
  return nccl_result(koloAlltoAll(sendbuff, recvbuff, count, T(datatype), kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclAlltoAll)
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);

COLL_API(ncclGather)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(koloGather(sendbuff, recvbuff, count, T(datatype), root, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclGather)
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclScatter)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                      ncclComm_t comm, cudaStream_t stream) {
  return nccl_result(koloScatter(sendbuff, recvbuff, count, T(datatype), root, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclScatter)
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

COLL_API(ncclSend)(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream) {
  return nccl_result(koloSend(sendbuff, count, T(datatype), peer, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclSend)
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

COLL_API(ncclRecv)(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream) {
  return nccl_result(koloRecv(recvbuff, count, T(datatype), peer, kolo_of(comm), kolo_stream(stream)));
}
NCCL_LAYER_ALIAS(ncclRecv)
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

COLL_API(ncclGroupStart)() { return nccl_result(koloGroupStart()); }
NCCL_LAYER_ALIAS(ncclGroupStart) ncclResult_t ncclGroupStart();

COLL_API(ncclGroupEnd)() { return nccl_result(koloGroupEnd()); }
NCCL_LAYER_ALIAS(ncclGroupEnd) ncclResult_t ncclGroupEnd();

/* ncclSimInfo_t and koloSimInfo_t share their layout (size, magic, version,
 * estimated time): the caller's struct is read as NCCL wrote it. */
COLL_API(ncclGroupSimulateEnd)(ncclSimInfo_t *simInfo) {
  if (simInfo == NULL)
    return nccl_result(kolo_error(NULL, koloInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL"));
  if (simInfo->magic != SIM_INFO_MAGIC || simInfo->size < sizeof(ncclSimInfo_t))
    return nccl_result(kolo_error(NULL, koloInvalidArgument,
                                  "ncclGroupSimulateEnd: simInfo was not set up with NCCL_SIM_INFO_INITIALIZER "
                                  "(magic 0x%x, size %zu)",
                                  simInfo->magic, simInfo->size));
  koloSimInfo_t k = KOLO_SIM_INFO_INITIALIZER;
  koloResult_t res = koloGroupSimulateEnd(&k);
  if (res == koloSuccess) simInfo->estimatedTime = k.estimatedTime;
  return nccl_result(res);
}
NCCL_LAYER_ALIAS(ncclGroupSimulateEnd) ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo);

COLL_API(ncclRedOpCreatePreMulSum)(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                   ncclScalarResidence_t residence, ncclComm_t comm) {
  return nccl_result(koloRedOpCreatePreMulSum((koloRedOp_t *)(void *)op, scalar, T(datatype),
                                              (koloScalarResidence_t)residence, kolo_of(comm)));
}
NCCL_LAYER_ALIAS(ncclRedOpCreatePreMulSum)
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);

COLL_API(ncclRedOpDestroy)(ncclRedOp_t op, ncclComm_t comm) { return nccl_result(koloRedOpDestroy(OP(op), kolo_of(comm))); }
NCCL_LAYER_ALIAS(ncclRedOpDestroy) ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
