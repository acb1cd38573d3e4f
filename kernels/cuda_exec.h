/* cuda_exec.h - the CUDA executor's plain-struct interface.
 *
 * STATUS: the kernel (kernels/cuda/exec_kernel.cu) compiles for sm_90 with
 * no spills but is not yet wired to communicators (koloMemCuda is refused)
 * and has never run on a GPU: the p2p transport, stream enqueue and tests
 * are the rest of issue 3.
 *
 * What crosses from host to device is a kolo_dev_batch passed by value as
 * the kernel's parameter (so a launch is capturable in a CUDA graph): one
 * task per thread block, each a step program (steps in device memory) with
 * its two buffers and its two connector ends.  Nothing else: the kernel
 * knows no communicator, topology or transport.
 *
 * Connector ends on the device: slots and the two counters live in the
 * receiver's GPU memory (or mapped pinned host memory for a proxy); `step`
 * is this end's running count, kept in device memory between launches so
 * that consecutive kernels on one stream continue where the last stopped.
 * Counters are written with st.release.sys after a __threadfence_system(),
 * read with ld.acquire.sys: correct for peers on the same GPU, on peer GPUs
 * and for a host proxy.
 *
 * Failure: thread 0 of a waiting block polls the abort word (mapped host
 * memory, set by koloCommAbort) and a global-timer deadline; either ends the
 * kernel and records why in `status` (mapped host memory) for the host to
 * report.  Plain C: no CUDA header needed.
 */
#ifndef KOLO_KERNELS_CUDA_EXEC_H
#define KOLO_KERNELS_CUDA_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "ring/program.h"

#define KOLO_DEV_MAX_TASKS 16
#define KOLO_DEV_THREADS 256

/* Why a kernel stopped early (status[0]); status[1] = task, status[2] = peer. */
enum {
  KOLO_DEV_OK = 0,
  KOLO_DEV_ABORTED = 1,
  KOLO_DEV_TIMEOUT = 2,
  KOLO_DEV_PEER_STOPPED = 3
};

typedef struct {
  char *slots;
  uint32_t *tail;  /* bumped by the sender */
  uint32_t *head;  /* bumped by the receiver */
  uint32_t *stop;  /* non-zero: the other end stopped (connector.h words) */
  uint32_t *step;  /* this end's running count (device memory) */
  uint32_t nslots;
  uint32_t slot_bytes;
  int32_t peer;
  int32_t pad;
} kolo_dev_conn;

typedef struct {
  const kolo_step *steps; /* device copy of the program's steps */
  int32_t nsteps;
  uint8_t in_blocked, out_blocked, pad[2];
  kolo_geometry geo;
  char *in, *out;
  int32_t type, op, div, channel;
  int32_t has_send, has_recv;
  kolo_dev_conn send, recv;
} kolo_dev_task;

typedef struct {
  int32_t ntasks;
  int32_t pad;
  uint64_t timeout_ns;        /* 0: none */
  volatile uint32_t *abort;   /* mapped host memory */
  uint32_t *status;           /* mapped host memory, 3 words */
  kolo_dev_task tasks[KOLO_DEV_MAX_TASKS];
} kolo_dev_batch;

#ifdef __cplusplus
extern "C" {
#endif
/* Launches the batch on `stream` (a cudaStream_t); returns a cudaError_t. */
int kolo_cuda_exec_launch(const kolo_dev_batch *batch, void *stream);
#ifdef __cplusplus
}
#endif

#endif
