/* coll.c - the collective and point-to-point API: argument checks, then
 * kolo_enqueue (group.c). */
#include <stdint.h>

#include "common/dtype.h"
#include "core/adasum.h"
#include "core/comm_state.h"
#include "core/group.h"
#include "core/redop.h"

/* Checks what every call shares; `blocks` = number of count-sized blocks in
 * the larger buffer (nranks for reduce-scatter / all-gather, else 1). */
static koloResult_t check_common(const char *fn, koloComm_t comm, size_t count,
                                 koloDataType_t type, int with_op, koloRedOp_t op, int blocks) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "%s: comm is NULL", fn);
  if (atomic_load(&comm->finalized))
    return kolo_error(&comm->err, koloInvalidUsage,
                      "%s: rank %d: the communicator was finalized (koloCommFinalize): only koloCommDestroy "
                      "may follow", fn, comm->rank);
  koloResult_t ready = kolo_comm_check_ready(comm, fn, 0);
  if (ready != koloSuccess) return ready;
  if (comm->failed != koloSuccess) return kolo_comm_failed_earlier(comm, comm->failed, fn);
  if ((int)type < 0 || type >= koloNumTypes)
    return kolo_error(&comm->err, koloInvalidArgument, "%s: datatype %d is not a koloDataType_t", fn, (int)type);
  /* ops >= koloNumOps are checked when the call is bound to them (redop.c) */
  if (with_op && (int)op < 0)
    return kolo_error(&comm->err, koloInvalidArgument, "%s: op %d is not a koloRedOp_t", fn, (int)op);
  size_t esz = koloTypeSize(type);
  if (count > SIZE_MAX / esz / (size_t)blocks || count > (size_t)INT64_MAX / esz / (size_t)blocks)
    return kolo_error(&comm->err, koloInvalidArgument,
                      "%s: count %zu x %d rank(s) x %zu bytes (%s) overflows", fn, count, blocks, esz,
                      kolo_type_name(type));
  return koloSuccess;
}

static koloResult_t check_ptr(const char *fn, koloComm_t comm, const void *p, const char *name,
                              size_t count) {
  if (p == NULL && count > 0)
    return kolo_error(&comm->err, koloInvalidArgument, "%s: %s is NULL with count %zu", fn, name, count);
  return koloSuccess;
}

static koloResult_t check_rank(const char *fn, koloComm_t comm, int r, const char *name) {
  if (r < 0 || r >= comm->nranks)
    return kolo_error(&comm->err, koloInvalidArgument, "%s: %s %d is outside 0..%d", fn, name, r,
                      comm->nranks - 1);
  return koloSuccess;
}

#define KOLO_CHECK(call)                                                     \
  do {                                                                       \
    koloResult_t res_ = (call);                                              \
    if (res_ != koloSuccess) return res_;                                    \
  } while (0)

koloResult_t koloAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           koloDataType_t datatype, koloRedOp_t op, koloComm_t comm,
                           koloStream_t stream) {
  const char *fn = "koloAllReduce";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 1, op, 1));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", count));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", count));
  kolo_op o = {KOLO_COLL_ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  KOLO_CHECK(kolo_redop_resolve(fn, &o));
  return kolo_enqueue(&o);
}

koloResult_t koloReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               koloDataType_t datatype, koloRedOp_t op, koloComm_t comm,
                               koloStream_t stream) {
  const char *fn = "koloReduceScatter";
  KOLO_CHECK(check_common(fn, comm, recvcount, datatype, 1, op, comm ? comm->nranks : 1));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", recvcount));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", recvcount));
  kolo_op o = {KOLO_COLL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  KOLO_CHECK(kolo_redop_resolve(fn, &o));
  return kolo_enqueue(&o);
}

koloResult_t koloAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           koloDataType_t datatype, koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloAllGather";
  KOLO_CHECK(check_common(fn, comm, sendcount, datatype, 0, koloSum, comm ? comm->nranks : 1));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", sendcount));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", sendcount));
  kolo_op o = {KOLO_COLL_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, koloSum, 0, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

koloResult_t koloBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           koloDataType_t datatype, int root, koloComm_t comm,
                           koloStream_t stream) {
  const char *fn = "koloBroadcast";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, 1));
  KOLO_CHECK(check_rank(fn, comm, root, "root"));
  if (comm->rank == root) KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff (on the root)", count));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", count));
  kolo_op o = {KOLO_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, koloSum, root, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

koloResult_t koloReduce(const void *sendbuff, void *recvbuff, size_t count,
                        koloDataType_t datatype, koloRedOp_t op, int root, koloComm_t comm,
                        koloStream_t stream) {
  const char *fn = "koloReduce";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 1, op, 1));
  KOLO_CHECK(check_rank(fn, comm, root, "root"));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", count));
  if (comm->rank == root) KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff (on the root)", count));
  kolo_op o = {KOLO_COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  KOLO_CHECK(kolo_redop_resolve(fn, &o));
  return kolo_enqueue(&o);
}

koloResult_t koloSend(const void *sendbuff, size_t count, koloDataType_t datatype, int peer,
                      koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloSend";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, 1));
  KOLO_CHECK(check_rank(fn, comm, peer, "peer"));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", count));
  kolo_op o = {KOLO_COLL_SEND, sendbuff, NULL, count, datatype, koloSum, peer, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

koloResult_t koloRecv(void *recvbuff, size_t count, koloDataType_t datatype, int peer,
                      koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloRecv";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, 1));
  KOLO_CHECK(check_rank(fn, comm, peer, "peer"));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", count));
  kolo_op o = {KOLO_COLL_RECV, NULL, recvbuff, count, datatype, koloSum, peer, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

/* ---- all-to-all, gather, scatter, in-place broadcast ---------------------- */

/* 1 when the byte ranges [a, a + an) and [b, b + bn) overlap (device
 * pointers too: CUDA's addresses are unified). */
static int overlap(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/* The root's one-block buffer `one` must be block `root` of its n-block
 * buffer `all`, or not overlap it (gather, scatter). */
static koloResult_t check_root_overlap(const char *fn, koloComm_t comm, const void *one, const char *one_name,
                                       const void *all, const char *all_name, size_t block_bytes, int root) {
  const char *in_place = (const char *)all + (size_t)root * block_bytes;
  if ((const char *)one == in_place || !overlap(one, block_bytes, all, block_bytes * (size_t)comm->nranks))
    return koloSuccess;
  return kolo_error(&comm->err, koloInvalidArgument,
                    "%s: rank %d (the root): %s overlaps %s but is not %s + root*count (the in-place position, "
                    "%zu bytes in)",
                    fn, comm->rank, one_name, all_name, all_name, (size_t)root * block_bytes);
}

koloResult_t koloAlltoAll(const void *sendbuff, void *recvbuff, size_t count, koloDataType_t datatype,
                          koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloAlltoAll";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, comm ? comm->nranks : 1));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", count));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", count));
  size_t bytes = count * koloTypeSize(datatype) * (size_t)comm->nranks;
  if (overlap(sendbuff, bytes, recvbuff, bytes))
    return kolo_error(&comm->err, koloInvalidArgument,
                      "%s: rank %d: sendbuff and recvbuff overlap (%zu bytes each): all-to-all has no in-place form",
                      fn, comm->rank, bytes);
  kolo_op o = {KOLO_COLL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, koloSum, 0, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

koloResult_t koloGather(const void *sendbuff, void *recvbuff, size_t count, koloDataType_t datatype, int root,
                        koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloGather";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, comm ? comm->nranks : 1));
  KOLO_CHECK(check_rank(fn, comm, root, "root"));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", count));
  if (comm->rank == root) {
    KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff (on the root)", count));
    KOLO_CHECK(check_root_overlap(fn, comm, sendbuff, "sendbuff", recvbuff, "recvbuff",
                                  count * koloTypeSize(datatype), root));
  }
  kolo_op o = {KOLO_COLL_GATHER, sendbuff, recvbuff, count, datatype, koloSum, root, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

koloResult_t koloScatter(const void *sendbuff, void *recvbuff, size_t count, koloDataType_t datatype, int root,
                         koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloScatter";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, comm ? comm->nranks : 1));
  KOLO_CHECK(check_rank(fn, comm, root, "root"));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", count));
  if (comm->rank == root) {
    KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff (on the root)", count));
    KOLO_CHECK(check_root_overlap(fn, comm, recvbuff, "recvbuff", sendbuff, "sendbuff",
                                  count * koloTypeSize(datatype), root));
  }
  kolo_op o = {KOLO_COLL_SCATTER, sendbuff, recvbuff, count, datatype, koloSum, root, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

koloResult_t koloBcast(void *buff, size_t count, koloDataType_t datatype, int root, koloComm_t comm,
                       koloStream_t stream) {
  const char *fn = "koloBcast";
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, 1));
  KOLO_CHECK(check_rank(fn, comm, root, "root"));
  KOLO_CHECK(check_ptr(fn, comm, buff, "buff", count));
  kolo_op o = {KOLO_COLL_BROADCAST, buff, buff, count, datatype, koloSum, root, comm, stream, KOLO_PREMUL_NONE, 0, 0};
  return kolo_enqueue(&o);
}

/* ---- Adasum (adasum.c) -------------------------------------------------- */

koloResult_t koloAdasum(const void *sendbuff, void *recvbuff, size_t count, koloDataType_t datatype,
                        koloComm_t comm, koloStream_t stream) {
  const char *fn = "koloAdasum";
  (void)stream; /* host communicators only: their calls ignore it */
  KOLO_CHECK(check_common(fn, comm, count, datatype, 0, koloSum, 1));
  KOLO_CHECK(check_ptr(fn, comm, sendbuff, "sendbuff", count));
  KOLO_CHECK(check_ptr(fn, comm, recvbuff, "recvbuff", count));
  size_t bytes = count * koloTypeSize(datatype);
  if (sendbuff != recvbuff && overlap(sendbuff, bytes, recvbuff, bytes))
    return kolo_error(&comm->err, koloInvalidArgument,
                      "%s: rank %d: sendbuff and recvbuff overlap (%zu bytes each) but are not the same buffer "
                      "(in place is recvbuff == sendbuff)", fn, comm->rank, bytes);
  return kolo_adasum(fn, comm, sendbuff, recvbuff, count, datatype);
}
