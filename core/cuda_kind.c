/* cuda_kind.c - koloMemCuda's memory-kind table (core/mem_kind.h): the
 * device side of CUDA communicators (cuda_comm.h) as the core calls it.
 * Built only where kolo has CUDA (real, or on the CPU model). */
#include "core/comm_state.h"
#include "core/cuda_comm.h"
#include "core/mem_kind.h"

static const kolo_conn_mem *conn_mem(const struct koloComm *c) { return c->cuda ? &c->cuda->conn_mem : NULL; }

static int device(const struct koloComm *c) { return c->cuda ? c->cuda->dev : -1; }

/* A comm whose init stopped before its device state has no device pipes
 * to close in CUDA IPC's order. */
static void close_shared(struct koloComm *c) {
  if (c->cuda) kolo_cuda_comm_close_ipc(c);
}

const kolo_mem_kind kolo_mem_kind_cuda = {
    .name = "cuda",
    .memory = koloMemCuda,
    .init = kolo_cuda_comm_init,
    .programs = kolo_cuda_comm_programs,
    .ring_ready = kolo_cuda_comm_ring_ready,
    .p2p_ready = kolo_cuda_comm_p2p_ready,
    .conn_mem = conn_mem,
    .device = device,
    .current_device = kolo_cuda_current_device,
    .run = kolo_cuda_run_ops,
    .status = kolo_cuda_comm_status,
    .busy = kolo_cuda_comm_busy,
    .stop = kolo_cuda_comm_stop_all,
    .abort = kolo_cuda_comm_abort,
    .quiesce = kolo_cuda_comm_quiesce,
    .close_shared = close_shared,
    .free = kolo_cuda_comm_free,
    .alloc_device = kolo_cuda_mem_device,
    .alloc = kolo_cuda_mem_alloc,
    .release = kolo_cuda_mem_release,
    .check_buffer = kolo_cuda_mem_check,
};
