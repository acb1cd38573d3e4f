/* mpi_ref.c - kolo-mpi-ref: the same sweeps as kolo-perf over MPI, the peer
 * library kolo's figures are compared with on the same ranks.
 *
 *   mpirun -np N kolo-mpi-ref COLL [-b -e -f -i -n -w -m -N -c -d -o -r -a -z -C --inplace --json FILE]
 *
 * The calls: MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather,
 * MPI_Bcast, MPI_Reduce, MPI_Sendrecv (to rank+1, from rank-1),
 * MPI_Alltoall, MPI_Gather and MPI_Scatter; the in-place column passes
 * MPI_IN_PLACE (gather: as the root's sendbuf, scatter: as its recvbuf).
 * Where MPI's rules differ from NCCL's, the call does what the NCCL-shaped
 * one must:
 *   - avg is MPI_SUM, then the result divided here (as kolo divides: integers
 *     truncate, floats divide in their own precision), inside the timing;
 *   - out-of-place broadcast: the root also copies sendbuff to recvbuff;
 *   - in-place reduce-scatter leaves the result at the buffer's start (MPI's
 *     rule); the check looks there.
 * float16 and bfloat16 have no MPI type and are refused.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_args.h"
#include "perf/perf_check.h"
#include "perf/perf_sweep.h"

typedef struct {
  MPI_Comm comm;
  int rank, nranks;
} mpi_ctx;

static MPI_Datatype mpi_type(perf_type t) {
  switch (t) {
    case PERF_INT8: return MPI_INT8_T;
    case PERF_UINT8: return MPI_UINT8_T;
    case PERF_INT32: return MPI_INT32_T;
    case PERF_UINT32: return MPI_UINT32_T;
    case PERF_INT64: return MPI_INT64_T;
    case PERF_UINT64: return MPI_UINT64_T;
    case PERF_FLOAT32: return MPI_FLOAT;
    case PERF_FLOAT64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(perf_op o) {
  switch (o) {
    case PERF_PROD: return MPI_PROD;
    case PERF_MAX: return MPI_MAX;
    case PERF_MIN: return MPI_MIN;
    default: return MPI_SUM; /* sum, and avg before its division */
  }
}

static int check_mpi(const mpi_ctx *m, int err, const char *what) {
  if (err == MPI_SUCCESS) return 0;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", err);
  fprintf(stderr, "rank %d: %s failed: %s\n", m->rank, what, msg);
  return -1;
}

/* MPI's name of each call, for the sentence of a failed one. */
static const char *const call_names[PERF_NUM_COLLS] = {
    [PERF_ALL_REDUCE] = "MPI_Allreduce", [PERF_REDUCE_SCATTER] = "MPI_Reduce_scatter_block",
    [PERF_ALL_GATHER] = "MPI_Allgather", [PERF_BROADCAST] = "MPI_Bcast", [PERF_REDUCE] = "MPI_Reduce",
    [PERF_SENDRECV] = "MPI_Sendrecv", [PERF_ALL_TO_ALL] = "MPI_Alltoall", [PERF_GATHER] = "MPI_Gather",
    [PERF_SCATTER] = "MPI_Scatter"};

static int broadcast(mpi_ctx *m, const perf_call *c, int count, MPI_Datatype t) {
  if (!c->in_place && m->rank == c->root && count > 0) {
    int size = 0;
    MPI_Type_size(t, &size);
    memcpy(c->recv, c->send, (size_t)count * (size_t)size);
  }
  return MPI_Bcast(c->recv, count, t, c->root, m->comm);
}

static int run_call(mpi_ctx *m, const perf_call *c, int count, MPI_Datatype t, MPI_Op op) {
  const void *send = c->in_place ? MPI_IN_PLACE : c->send;
  void *recv = c->recv;
  int root_here = m->rank == c->root;
  switch (c->coll) {
    case PERF_ALL_REDUCE: return MPI_Allreduce(send, recv, count, t, op, m->comm);
    case PERF_REDUCE_SCATTER: return MPI_Reduce_scatter_block(send, recv, count, t, op, m->comm);
    case PERF_ALL_GATHER: return MPI_Allgather(send, count, t, recv, count, t, m->comm);
    case PERF_BROADCAST: return broadcast(m, c, count, t);
    case PERF_REDUCE: /* MPI_IN_PLACE is the root's alone; recvbuf is not the others' */
      return MPI_Reduce(root_here ? send : c->send, root_here ? recv : NULL, count, t, op, c->root, m->comm);
    case PERF_ALL_TO_ALL: return MPI_Alltoall(c->send, count, t, recv, count, t, m->comm);
    case PERF_GATHER: return MPI_Gather(root_here ? send : c->send, count, t, recv, count, t, c->root, m->comm);
    case PERF_SCATTER:
      return MPI_Scatter(c->send, count, t, root_here && c->in_place ? MPI_IN_PLACE : recv, count, t, c->root,
                         m->comm);
    default:
      return MPI_Sendrecv(c->send, count, t, c->send_peer, 7, recv, count, t, c->recv_peer, 7, m->comm,
                          MPI_STATUS_IGNORE);
  }
}

static int mpi_run(void *ctx, const perf_call *c) {
  mpi_ctx *m = ctx;
  if (c->count > INT_MAX) {
    fprintf(stderr, "rank %d: count %zu is beyond MPI's int counts\n", m->rank, c->count);
    return -1;
  }
  int err = run_call(m, c, (int)c->count, mpi_type(c->type), mpi_op(c->op));
  if (check_mpi(m, err, call_names[c->coll]) != 0) return -1;
  /* avg: the division where the result lands */
  int reduced = c->coll == PERF_ALL_REDUCE || c->coll == PERF_REDUCE_SCATTER ||
                (c->coll == PERF_REDUCE && m->rank == c->root);
  if (c->op == PERF_AVG && reduced) perf_divide(c->type, c->recv, c->count, m->nranks);
  return 0;
}

static int mpi_allreduce_double(void *ctx, double *v, int n, int max) {
  mpi_ctx *m = ctx;
  return check_mpi(m, MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, max ? MPI_MAX : MPI_SUM, m->comm),
                   "MPI_Allreduce(double)");
}

static int mpi_allgather_bytes(void *ctx, const void *mine, void *all, size_t bytes) {
  mpi_ctx *m = ctx;
  return check_mpi(m, MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, m->comm),
                   "MPI_Allgather(info)");
}

static void *mpi_alloc(void *ctx, size_t bytes) {
  mpi_ctx *m = ctx;
  size_t b = bytes < 4096 ? 4096 : (bytes + 4095) & ~(size_t)4095;
  void *p = aligned_alloc(4096, b);
  if (p == NULL) fprintf(stderr, "rank %d: out of memory for a %zu-byte buffer\n", m->rank, b);
  return p;
}

static void mpi_release(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

/* "Open MPI v4.1.4" out of MPI_Get_library_version's first line. */
static void library_name(char *out, size_t n) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) snprintf(v, sizeof v, "MPI");
  size_t len_first = strcspn(v, ",\n");
  if (len_first >= n) len_first = n - 1;
  memcpy(out, v, len_first);
  out[len_first] = '\0';
}

int main(int argc, char **argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "kolo-mpi-ref: MPI_Init failed\n");
    return 2;
  }
  mpi_ctx m = {MPI_COMM_WORLD, 0, 1};
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m.comm, &m.rank);
  MPI_Comm_size(m.comm, &m.nranks);
  perf_args a;
  int r = perf_args_parse(&a, argc, argv, PERF_TOOL_MPI); /* every rank: same argv, same verdict */
  if (r == 0 && mpi_type(a.type) == MPI_DATATYPE_NULL) {
    if (m.rank == 0) fprintf(stderr, "kolo-mpi-ref: MPI has no %s type\n", perf_type_name(a.type));
    r = -1;
  }
  if (r == 0 && a.op == PERF_MULSUM && perf_coll_has_op(a.coll)) {
    if (m.rank == 0) fprintf(stderr, "kolo-mpi-ref: MPI has no premul-sum (mulsum)\n");
    r = -1;
  }
  if (r != 0) {
    MPI_Finalize();
    return r > 0 ? 0 : 2;
  }
  char lib[128];
  library_name(lib, sizeof lib);
  perf_config cfg = {"kolo-mpi-ref", lib, "mpirun", "host", m.nranks, m.nranks, 1, NULL};
  perf_backend be = {.ctx = &m, .rank = m.rank, .nranks = m.nranks, .rs_result_at_start = 1, .run = mpi_run,
                     .allreduce_double = mpi_allreduce_double, .allgather_bytes = mpi_allgather_bytes,
                     .alloc = mpi_alloc, .release = mpi_release};
  int code = perf_sweep_run(&a, &be, &cfg, "host memory", stdout);
  fflush(stdout);
  if (code == 2) MPI_Abort(m.comm, 2); /* the others may wait on this rank */
  MPI_Finalize();
  return code;
}
