/* device.c - memory, copies, streams and events of a fusion: host memory
 * and a pass on the calling thread, or CUDA memory and stream-ordered work.
 * Everything CUDA-specific of fusion/ is here (and in pack_kernel.cu).
 *
 * CUDA contract (who records, who waits):
 *  - MarkReady(ready): the user's thread makes the fusion's stream wait for
 *    `ready` (cudaStreamWaitEvent) before it flags the tensor, so every
 *    launch that includes the tensor is behind the event; the user may
 *    record the event again after MarkReady returns.
 *  - the fusion's thread enqueues scale / pack / all-reduce / unpack on the
 *    fusion's stream, in launch order;
 *  - StepEnd, once the thread issued the step, records the done event on
 *    the stream: the optimizer's stream waits on it;
 *  - the pack descriptors of a step live in mapped pinned memory, reused by
 *    the next step after the done event of this one has fired. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "core/comm_state.h"
#include "fusion/internal.h"

static koloResult_t host_alloc(size_t bytes, void **p, kolo_errbuf *eb, int rank) {
  size_t sz = (bytes + 63) / 64 * 64;
  *p = aligned_alloc(64, sz > 0 ? sz : 64);
  if (*p == NULL) return kolo_error(eb, koloSystemError, "fusion on rank %d: out of memory (%zu bytes)", rank, bytes);
  memset(*p, 0, sz);
  return koloSuccess;
}

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/cuda_comm.h"
#include "core/cuda_wait.h"

struct kf_device {
  int dev;
  cudaStream_t stream;
  int own_stream;
  cudaEvent_t done;
  int done_recorded;
  kf_copy *desc_host, *desc_dev; /* mapped pinned memory */
  int desc_cap, desc_used;
};

static koloResult_t cuda_fail(koloFusion_t f, kolo_errbuf *eb, cudaError_t e, const char *what) {
  return kolo_error(eb, koloUnhandledCudaError, "fusion on rank %d (CUDA device %d): %s failed: %s", f->rank,
                    f->dev ? f->dev->dev : -1, what, cudaGetErrorString(e));
}

koloResult_t kf_dev_setup(koloFusion_t f, koloStream_t user_stream) {
  if (!f->cuda) return koloSuccess;
  struct kf_device *d = calloc(1, sizeof *d);
  if (d == NULL) return kolo_error(&f->err, koloSystemError, "koloFusionCommit: out of memory");
  d->dev = f->comm->cuda->dev;
  f->dev = d;
  cudaError_t e = cudaSetDevice(d->dev);
  if (e != cudaSuccess) return cuda_fail(f, &f->err, e, "cudaSetDevice");
  if (user_stream) {
    d->stream = (cudaStream_t)user_stream;
  } else {
    e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cuda_fail(f, &f->err, e, "cudaStreamCreateWithFlags");
    d->own_stream = 1;
  }
  e = cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming);
  if (e != cudaSuccess) return cuda_fail(f, &f->err, e, "cudaEventCreateWithFlags");
  /* per step at most: a scale per launch, a pack and an unpack per
   * EXTERNAL tensor, a move per tensor at a rebuild */
  d->desc_cap = 5 * f->ntensors + 8;
  e = cudaHostAlloc((void **)&d->desc_host, (size_t)d->desc_cap * sizeof(kf_copy), cudaHostAllocMapped);
  if (e != cudaSuccess) return cuda_fail(f, &f->err, e, "cudaHostAlloc of the pack descriptors");
  e = cudaHostGetDevicePointer((void **)&d->desc_dev, d->desc_host, 0);
  if (e != cudaSuccess) return cuda_fail(f, &f->err, e, "cudaHostGetDevicePointer");
  return koloSuccess;
}

void kf_dev_teardown(koloFusion_t f) {
  struct kf_device *d = f->dev;
  if (d == NULL) return;
  if (cudaSetDevice(d->dev) == cudaSuccess && d->stream) cudaStreamSynchronize(d->stream);
  if (d->desc_host) cudaFreeHost(d->desc_host);
  if (d->done) cudaEventDestroy(d->done);
  if (d->own_stream) cudaStreamDestroy(d->stream);
  free(d);
  f->dev = NULL;
}

/* Zeroes new bucket memory on the communicator's setup stream (kolo's own,
 * non-blocking) and waits for it, within the communicator's timeout.  Not
 * cudaMemset: it runs on the legacy stream, after the work of every
 * blocking stream of the device, such as a kernel of another communicator
 * waiting for a call this thread makes later; the zeroing would then land
 * after the gradients written into the buckets meanwhile (the fusion's and
 * the user's streams do not wait for the legacy stream). */
static koloResult_t zero_buckets(koloFusion_t f, void *p, size_t bytes, kolo_errbuf *eb) {
  struct koloComm *c = f->comm;
  cudaError_t e = cudaMemsetAsync(p, 0, bytes, (cudaStream_t)c->cuda->setup_stream);
  if (e != cudaSuccess) return cuda_fail(f, eb, e, "cudaMemsetAsync of fusion buckets");
  e = (cudaError_t)kolo_cuda_stream_wait(c->cuda->setup_stream, c->timeout_ms);
  if (e == cudaErrorNotReady)
    return kolo_error(eb, koloTimeout,
                      "fusion on rank %d: zeroing %zu bytes of buckets on CUDA device %d did not finish within "
                      "%d ms: the communicator's setup stream shares a hardware queue with work that waits "
                      "(set CUDA_DEVICE_MAX_CONNECTIONS=32)",
                      f->rank, bytes, f->dev->dev, c->timeout_ms);
  return e == cudaSuccess ? koloSuccess : cuda_fail(f, eb, e, "zeroing fusion buckets");
}

koloResult_t kf_dev_alloc(koloFusion_t f, size_t bytes, void **p, kolo_errbuf *eb) {
  if (!f->cuda) return host_alloc(bytes, p, eb, f->rank);
  if (bytes == 0) bytes = 256;
  cudaError_t e = cudaMalloc(p, bytes);
  if (e != cudaSuccess) return cuda_fail(f, eb, e, "cudaMalloc of fusion buckets");
  koloResult_t res = zero_buckets(f, *p, bytes, eb);
  if (res == koloTimeout) { /* the set may still run: leave the memory to it */
    KOLO_WARN("fusion on rank %d: %zu bytes of buckets left allocated, their zeroing still queued", f->rank, bytes);
    *p = NULL;
  } else if (res != koloSuccess) {
    kf_dev_free(f, *p);
    *p = NULL;
  }
  return res;
}

/* cudaFree waits for the whole device, other communicators' kernels
 * included, and CUDA has no stream-ordered free for cudaMalloc's memory:
 * the fusion frees only once its own work on the memory drained (the
 * callers synchronize its stream first: a rebuild after its moves,
 * koloFusionDestroy after the last step), which keeps the wait short
 * unless another communicator on the device has a kernel waiting for this
 * thread -- destroy a fusion when none does (README, "CUDA communicators").
 * A rebuild frees while every rank's fusion thread is between negotiation
 * rounds, so no kernel of the fusion's communicator waits then. */
void kf_dev_free(koloFusion_t f, void *p) {
  if (p == NULL) return;
  if (!f->cuda) {
    free(p);
    return;
  }
  cudaError_t e = cudaFree(p);
  if (e != cudaSuccess)
    KOLO_WARN("fusion on rank %d: cudaFree of buckets on CUDA device %d failed: %s", f->rank, f->dev->dev,
              cudaGetErrorString(e));
}

koloResult_t kf_dev_copy(koloFusion_t f, const kf_copy *c, int n, int dtype, double scale, kolo_errbuf *eb) {
  if (!f->cuda) {
    kf_pack_host(c, n, dtype, scale);
    return koloSuccess;
  }
  struct kf_device *d = f->dev;
  if (n <= 0) return koloSuccess;
  if (d->desc_used + n > d->desc_cap)
    return kolo_error(eb, koloInternalError, "fusion on rank %d: %d pack descriptors in one step (room for %d)",
                      f->rank, d->desc_used + n, d->desc_cap);
  size_t max_bytes = 0;
  for (int i = 0; i < n; i++) {
    d->desc_host[d->desc_used + i] = c[i];
    if (c[i].bytes > max_bytes) max_bytes = c[i].bytes;
  }
  int e = kf_pack_cuda(d->desc_dev + d->desc_used, n, max_bytes, dtype, scale, d->stream);
  d->desc_used += n;
  return e == (int)cudaSuccess ? koloSuccess : cuda_fail(f, eb, (cudaError_t)e, "the pack kernel launch");
}

koloResult_t kf_dev_thread_init(koloFusion_t f, kolo_errbuf *eb) {
  if (!f->cuda) return koloSuccess;
  cudaError_t e = cudaSetDevice(f->dev->dev);
  return e == cudaSuccess ? koloSuccess : cuda_fail(f, eb, e, "cudaSetDevice on the fusion thread");
}

koloResult_t kf_dev_step_begin(koloFusion_t f, kolo_errbuf *eb) {
  if (!f->cuda) return koloSuccess;
  struct kf_device *d = f->dev;
  if (d->done_recorded) {
    cudaError_t e = cudaEventSynchronize(d->done);
    if (e != cudaSuccess) return cuda_fail(f, eb, e, "cudaEventSynchronize of the last step's done event");
  }
  d->desc_used = 0;
  return koloSuccess;
}

koloResult_t kf_dev_wait_ready(koloFusion_t f, koloEvent_t ready, kolo_errbuf *eb) {
  if (!f->cuda || ready == NULL) return koloSuccess;
  cudaError_t e = cudaStreamWaitEvent(f->dev->stream, (cudaEvent_t)ready, 0);
  return e == cudaSuccess ? koloSuccess : cuda_fail(f, eb, e, "cudaStreamWaitEvent on the ready event");
}

koloResult_t kf_dev_record_done(koloFusion_t f, koloEvent_t *done, kolo_errbuf *eb) {
  if (!f->cuda) {
    if (done) *done = NULL;
    return koloSuccess;
  }
  cudaError_t e = cudaEventRecord(f->dev->done, f->dev->stream);
  if (e != cudaSuccess) return cuda_fail(f, eb, e, "cudaEventRecord of the done event");
  f->dev->done_recorded = 1;
  if (done) *done = (koloEvent_t)f->dev->done;
  return koloSuccess;
}

koloResult_t kf_dev_sync_done(koloFusion_t f, kolo_errbuf *eb) {
  if (!f->cuda || !f->dev->done_recorded) return koloSuccess;
  cudaError_t e = cudaEventSynchronize(f->dev->done);
  if (e != cudaSuccess) return cuda_fail(f, eb, e, "cudaEventSynchronize of the done event");
  koloResult_t async = koloSuccess;
  koloCommGetAsyncError(f->comm, &async);
  return async == koloSuccess ? koloSuccess
                              : kolo_error(eb, async, "fusion on rank %d: the communicator failed: %s", f->rank,
                                           koloGetLastError(f->comm));
}

koloStream_t kf_dev_stream(koloFusion_t f) { return f->cuda ? (koloStream_t)f->dev->stream : NULL; }

koloResult_t kf_dev_sync_stream(koloFusion_t f, kolo_errbuf *eb) {
  if (!f->cuda) return koloSuccess;
  cudaError_t e = cudaStreamSynchronize(f->dev->stream);
  return e == cudaSuccess ? koloSuccess : cuda_fail(f, eb, e, "cudaStreamSynchronize of the fusion stream");
}

#else /* no CUDA: host memory only (CUDA communicators cannot exist) */

koloResult_t kf_dev_setup(koloFusion_t f, koloStream_t user_stream) {
  (void)f;
  (void)user_stream;
  return koloSuccess;
}
void kf_dev_teardown(koloFusion_t f) { (void)f; }
koloResult_t kf_dev_alloc(koloFusion_t f, size_t bytes, void **p, kolo_errbuf *eb) {
  return host_alloc(bytes, p, eb, f->rank);
}
void kf_dev_free(koloFusion_t f, void *p) {
  (void)f;
  free(p);
}
koloResult_t kf_dev_copy(koloFusion_t f, const kf_copy *c, int n, int dtype, double scale, kolo_errbuf *eb) {
  (void)f;
  (void)eb;
  kf_pack_host(c, n, dtype, scale);
  return koloSuccess;
}
koloResult_t kf_dev_thread_init(koloFusion_t f, kolo_errbuf *eb) {
  (void)f;
  (void)eb;
  return koloSuccess;
}
koloResult_t kf_dev_step_begin(koloFusion_t f, kolo_errbuf *eb) {
  (void)f;
  (void)eb;
  return koloSuccess;
}
koloResult_t kf_dev_wait_ready(koloFusion_t f, koloEvent_t ready, kolo_errbuf *eb) {
  (void)f;
  (void)ready;
  (void)eb;
  return koloSuccess;
}
koloResult_t kf_dev_record_done(koloFusion_t f, koloEvent_t *done, kolo_errbuf *eb) {
  (void)f;
  (void)eb;
  if (done) *done = NULL;
  return koloSuccess;
}
koloResult_t kf_dev_sync_done(koloFusion_t f, kolo_errbuf *eb) {
  (void)f;
  (void)eb;
  return koloSuccess;
}
koloStream_t kf_dev_stream(koloFusion_t f) {
  (void)f;
  return NULL;
}
koloResult_t kf_dev_sync_stream(koloFusion_t f, kolo_errbuf *eb) {
  (void)f;
  (void)eb;
  return koloSuccess;
}
#endif
