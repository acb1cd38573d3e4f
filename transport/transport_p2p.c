/* transport_p2p.c - pipes in GPU memory, for CUDA communicators.
 *
 * The receiver allocates one block in its own GPU (cudaMalloc): control
 * words (tail, head, stop; KOLO_DEV_CTRL_* offsets), the SIMPLE slots
 * (nslots * slot_bytes), then the LL region (nslots * ll_slot_bytes).  The
 * control words and the LL region start zeroed (LL flags are step + 1, so a
 * zero line is never mistaken for data); slots need no clearing.  Only the
 * sender's kernel touches the other rank's memory (it writes slots and tail,
 * reads head and stop), so only the sender needs a mapping:
 *
 *  - ranks of one process pass the raw device pointer, inside a refcounted
 *    owner record so that the memory is freed by whichever end closes last
 *    (a host write of a stop word after the receiver closed would otherwise
 *    land in freed, perhaps reused, memory); when the devices differ the
 *    sender enables peer access, and refuses with a sentence when
 *    cudaDeviceCanAccessPeer says no;
 *  - ranks of different processes pass a cudaIpcMemHandle_t, which the
 *    sender opens (this works between processes on one GPU too) and closes
 *    at the end; the receiver cudaFrees its block.
 *
 * Setup may run while kernels of other ranks spin on this device, so it
 * never touches the legacy stream: clearing uses the communicator's
 * non-blocking setup stream (kolo_conn_mem.cuda_stream). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "transport/transport.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#define KOLO_DEV_CTRL_BYTES 4096 /* slots start 4 KiB aligned */

enum { P2P_LOCAL = KOLO_P2P_LOCAL, P2P_IPC = KOLO_P2P_IPC };

/* Same-process pipes: both ends hold a reference, the last frees. */
typedef struct {
  _Atomic int refs;
  int dev;
  void *dptr;
} p2p_share;

/* The descriptor as the code uses it; on the wire it is a kolo_p2p_desc
 * (conn_wire.h): the pointer as a u64, the IPC handle as its 64 bytes. */
typedef struct {
  uint32_t mode;   /* P2P_LOCAL or P2P_IPC */
  int32_t dev;     /* the receiver's device ordinal (in its process) */
  uint64_t bytes;  /* size of the block */
  p2p_share *share;         /* P2P_LOCAL */
  cudaIpcMemHandle_t ipc;   /* P2P_IPC */
} p2p_desc;

_Static_assert(sizeof(cudaIpcMemHandle_t) == KOLO_P2P_IPC_BYTES, "a CUDA IPC handle is 64 opaque bytes");

static void desc_encode(const p2p_desc *d, char *desc) {
  kolo_p2p_desc w = {d->mode, d->dev, d->bytes, (uint64_t)(uintptr_t)d->share, {0}};
  if (d->mode == P2P_IPC) memcpy(w.ipc, &d->ipc, sizeof w.ipc);
  kolo_encode_p2p_desc(&w, (uint8_t *)desc);
}

static koloResult_t desc_decode(const kolo_conn_setup *s, const char *desc, p2p_desc *d) {
  kolo_p2p_desc w;
  char why[KOLO_ERR_LEN];
  if (kolo_decode_p2p_desc(desc, KOLO_CONN_DESC_BYTES, s->peer->rank, &w, why, sizeof why) != KOLO_CONN_WIRE_OK)
    return kolo_error(s->eb, koloRemoteError, "%s", why);
  d->mode = w.mode;
  d->dev = w.dev;
  d->bytes = w.bytes;
  d->share = (p2p_share *)(uintptr_t)w.share;
  memcpy(&d->ipc, w.ipc, sizeof w.ipc);
  return koloSuccess;
}

/* Drops one reference; the last frees the block on its own device. */
static void share_release(p2p_share *sh) {
  if (atomic_fetch_sub(&sh->refs, 1) != 1) return;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  cudaSetDevice(sh->dev);
  cudaError_t e = cudaFree(sh->dptr);
  if (e != cudaSuccess) KOLO_WARN("cudaFree of a device pipe on device %d failed: %s", sh->dev, cudaGetErrorString(e));
  if (prev >= 0) cudaSetDevice(prev);
  free(sh);
}

static size_t block_bytes(const kolo_conn_setup *s) {
  return KOLO_DEV_CTRL_BYTES + s->slot_bytes * s->nslots + (size_t)s->mem->ll_slot_bytes * s->nslots;
}

/* Points the connector's fields into a block that starts at `base`. */
static void map_block(const kolo_conn_setup *s, kolo_connector *c, char *base, size_t bytes) {
  c->mem = base;
  c->mem_bytes = bytes;
  c->ctrl = NULL; /* device connector: the host never touches the words directly */
  c->slots = base + KOLO_DEV_CTRL_BYTES;
  c->dev.tail = (uint32_t *)(base + KOLO_DEV_CTRL_TAIL);
  c->dev.head = (uint32_t *)(base + KOLO_DEV_CTRL_HEAD);
  c->dev.stop = (uint32_t *)(base + KOLO_DEV_CTRL_STOP);
  c->dev.ll_slots = c->slots + s->slot_bytes * s->nslots;
  c->dev.ll_slot_bytes = s->mem->ll_slot_bytes;
  c->dev.cuda_dev = s->mem->cuda_dev;
}

static int p2p_can_connect(const kolo_conn_setup *s) {
  /* IPC and peer pointers work within one host only; KOLO_NET_FORCE=1
   * sends other processes of this host through the network instead (the
   * staged net path, testable on one machine). */
  return s->mem->memory == koloMemCuda && s->self->host_hash == s->peer->host_hash &&
         !kolo_net_between(s->self, s->peer);
}

static koloResult_t cuda_fail(const kolo_conn_setup *s, cudaError_t e, const char *what) {
  return kolo_error(s->eb, koloUnhandledCudaError,
                    "rank %d (device %d): %s for the pipe %s rank %d failed: %s", s->self->rank,
                    s->mem->cuda_dev, what, "with", s->peer->rank, cudaGetErrorString(e));
}

/* Zeroes the control words and the LL region on the setup stream. */
static cudaError_t clear_block(const kolo_conn_setup *s, char *base) {
  cudaStream_t st = (cudaStream_t)s->mem->cuda_stream;
  size_t ll = (size_t)s->mem->ll_slot_bytes * s->nslots;
  cudaError_t e = cudaMemsetAsync(base, 0, KOLO_DEV_CTRL_BYTES, st);
  if (e == cudaSuccess && ll > 0)
    e = cudaMemsetAsync(base + KOLO_DEV_CTRL_BYTES + s->slot_bytes * s->nslots, 0, ll, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  return e;
}

static koloResult_t p2p_recv_create(const kolo_conn_setup *s, kolo_connector *c, char *desc) {
  size_t bytes = block_bytes(s);
  cudaError_t e = cudaSetDevice(s->mem->cuda_dev);
  if (e != cudaSuccess) return cuda_fail(s, e, "cudaSetDevice");
  void *base = NULL;
  e = cudaMalloc(&base, bytes);
  if (e != cudaSuccess)
    return kolo_error(s->eb, koloUnhandledCudaError,
                      "rank %d: cudaMalloc of %zu bytes on device %d for the pipe from rank %d "
                      "failed: %s (lower KOLO_BUFFSIZE or KOLO_NCHANNELS)",
                      s->self->rank, bytes, s->mem->cuda_dev, s->peer->rank, cudaGetErrorString(e));
  e = clear_block(s, base);
  p2p_desc d;
  memset(&d, 0, sizeof d);
  d.dev = s->mem->cuda_dev;
  d.bytes = bytes;
  if (e == cudaSuccess && kolo_same_process(s->self, s->peer)) {
    d.mode = P2P_LOCAL;
    d.share = malloc(sizeof *d.share);
    if (d.share == NULL) {
      cudaFree(base);
      return kolo_error(s->eb, koloSystemError, "out of memory setting up the pipe from rank %d",
                        s->peer->rank);
    }
    /* Two references at once, as the local transport does: the sender's
     * end exists as soon as it attaches, and the receiver may close first. */
    atomic_init(&d.share->refs, 2);
    d.share->dev = s->mem->cuda_dev;
    d.share->dptr = base;
  } else if (e == cudaSuccess) {
    d.mode = P2P_IPC;
    e = cudaIpcGetMemHandle(&d.ipc, base);
  }
  if (e != cudaSuccess) {
    cudaFree(base);
    return cuda_fail(s, e, d.mode == P2P_IPC ? "cudaIpcGetMemHandle" : "clearing the control words");
  }
  map_block(s, c, base, bytes);
  c->dev.share = d.share;
  c->dev.ipc_mapped = 0;
  desc_encode(&d, desc);
  return koloSuccess;
}

/* Same process, different devices: the sender's device must reach the
 * receiver's memory. */
static koloResult_t enable_peer(const kolo_conn_setup *s, int peer_dev) {
  int me = s->mem->cuda_dev, can = 0;
  if (peer_dev == me) return koloSuccess;
  cudaError_t e = cudaDeviceCanAccessPeer(&can, me, peer_dev);
  if (e != cudaSuccess || !can)
    return kolo_error(s->eb, koloInvalidUsage,
                      "rank %d on device %d cannot write into the memory of rank %d on device %d: "
                      "cudaDeviceCanAccessPeer says %s; put both ranks on one device or use "
                      "devices with a peer path (NVLink or PCIe peer-to-peer)",
                      s->self->rank, me, s->peer->rank, peer_dev,
                      e != cudaSuccess ? cudaGetErrorString(e) : "no");
  e = cudaDeviceEnablePeerAccess(peer_dev, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError(); /* not an error: clear it so no later check sees it */
    e = cudaSuccess;
  }
  return e == cudaSuccess ? koloSuccess : cuda_fail(s, e, "cudaDeviceEnablePeerAccess");
}

static koloResult_t p2p_send_attach(const kolo_conn_setup *s, kolo_connector *c,
                                    const char *desc) {
  p2p_desc d;
  memset(&d, 0, sizeof d);
  koloResult_t dres = desc_decode(s, desc, &d);
  if (dres != koloSuccess) return dres;
  size_t bytes = block_bytes(s);
  if (d.bytes != bytes || (d.mode != P2P_LOCAL && d.mode != P2P_IPC))
    return kolo_error(s->eb, koloInvalidUsage,
                      "rank %d offers a device pipe of %llu bytes (mode %u), rank %d expects %zu: "
                      "are KOLO_BUFFSIZE, KOLO_NSLOTS and KOLO_LL_SLOT_BYTES the same on all ranks?",
                      s->peer->rank, (unsigned long long)d.bytes, d.mode, s->self->rank, bytes);
  cudaError_t e = cudaSetDevice(s->mem->cuda_dev);
  if (e != cudaSuccess) return cuda_fail(s, e, "cudaSetDevice");
  if (d.mode == P2P_LOCAL) {
    if (!kolo_same_process(s->self, s->peer))
      return kolo_error(s->eb, koloInternalError,
                        "rank %d passed a device pointer to rank %d of another process", s->peer->rank,
                        s->self->rank);
    koloResult_t res = enable_peer(s, d.dev);
    if (res != koloSuccess) {
      share_release(d.share); /* the receiver counted this end's reference */
      return res;
    }
    map_block(s, c, d.share->dptr, bytes);
    c->dev.share = d.share;
    c->dev.ipc_mapped = 0;
    return koloSuccess;
  }
  void *base = NULL;
  e = cudaIpcOpenMemHandle(&base, d.ipc, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess)
    return kolo_error(s->eb, koloUnhandledCudaError,
                      "rank %d (device %d) cannot open the CUDA IPC handle of rank %d's pipe memory "
                      "(device %d of its process): %s",
                      s->self->rank, s->mem->cuda_dev, s->peer->rank, d.dev, cudaGetErrorString(e));
  map_block(s, c, base, bytes);
  c->dev.share = NULL;
  c->dev.ipc_mapped = 1;
  return koloSuccess;
}

static void p2p_recv_attached(kolo_connector *c) {
  (void)c; /* an IPC handle cannot be revoked; the block goes with cudaFree */
}

static void warn_if(cudaError_t e, const char *what, int dev) {
  if (e != cudaSuccess) KOLO_WARN("closing a device pipe on device %d: %s failed: %s", dev, what, cudaGetErrorString(e));
}

static void p2p_close(kolo_connector *c) {
  if (c->mem == NULL) return;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  p2p_share *sh = c->dev.share;
  if (c->dev.ipc_mapped) {
    cudaSetDevice(c->dev.cuda_dev);
    warn_if(cudaIpcCloseMemHandle(c->mem), "cudaIpcCloseMemHandle", c->dev.cuda_dev);
  } else if (sh != NULL) {
    share_release(sh);
  } else {
    cudaSetDevice(c->dev.cuda_dev);
    warn_if(cudaFree(c->mem), "cudaFree", c->dev.cuda_dev);
  }
  if (prev >= 0) cudaSetDevice(prev);
  c->mem = NULL;
  c->slots = NULL;
  memset(&c->dev, 0, sizeof c->dev);
}

#else /* no CUDA in this build: the transport connects nothing */

static int p2p_can_connect(const kolo_conn_setup *s) {
  (void)s;
  return 0;
}
static koloResult_t p2p_recv_create(const kolo_conn_setup *s, kolo_connector *c, char *desc) {
  (void)c;
  (void)desc;
  return kolo_error(s->eb, koloInvalidUsage, "device pipes need CUDA, which this build of kolo does not have");
}
static koloResult_t p2p_send_attach(const kolo_conn_setup *s, kolo_connector *c, const char *desc) {
  return p2p_recv_create(s, c, (char *)(uintptr_t)desc);
}
static void p2p_recv_attached(kolo_connector *c) { (void)c; }
static void p2p_close(kolo_connector *c) { (void)c; }

#endif

int kolo_connector_ipc_imported(const kolo_connector *c) {
  return c->transport == &kolo_transport_p2p && c->mem != NULL && c->dev.ipc_mapped;
}

int kolo_connector_ipc_exported(const kolo_connector *c) {
  return c->transport == &kolo_transport_p2p && c->mem != NULL && !c->is_send && c->dev.share == NULL;
}

void kolo_connector_abandon(kolo_connector *c) {
  c->transport = NULL;
  c->mem = NULL;
  c->slots = NULL;
}

const kolo_transport kolo_transport_p2p = {
    .name = "p2p",
    .can_connect = p2p_can_connect,
    .recv_create = p2p_recv_create,
    .send_attach = p2p_send_attach,
    .recv_attached = p2p_recv_attached,
    .close = p2p_close,
};
