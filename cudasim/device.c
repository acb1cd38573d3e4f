/* device.c - the model's devices: choosing one, what they report
 * (attributes, properties, occupancy) and peer access.
 *
 * Each device is an H100 SXM as far as kolo can ask (compute capability 9.0,
 * KOLO_SIM_SMS SMs, sm_90's per-SM limits); occupancy comes from the
 * toolkit's own calculator (cuda_occupancy.h) fed with the registers and
 * shared memory of the kernel's ptxas report (kernel.c). */
#include <cuda_occupancy.h>
#include <stdlib.h>
#include <string.h>

#include "cudasim/sim.h"

static sim_device devices[SIM_MAX_DEVICES];

sim_device *sim_device_get(int ordinal) {
  if (ordinal < 0 || ordinal >= sim_cfg.ndevices) return NULL;
  return &devices[ordinal];
}

cudaError_t sim_current(sim_device **out) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return e;
  sim_device *d = sim_device_get(sim_thread()->device);
  if (d == NULL) return cudaErrorInvalidDevice;
  pthread_mutex_lock(&sim_lock);
  e = sim_device_start(d);
  pthread_mutex_unlock(&sim_lock);
  *out = d;
  return e;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (count == NULL) return sim_ret(cudaErrorInvalidValue);
  *count = 0;
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  *count = sim_cfg.ndevices;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (sim_device_get(dev) == NULL) return sim_ret(cudaErrorInvalidDevice);
  sim_thread()->device = dev;
  sim_device *d;
  return sim_ret(sim_current(&d));
}

cudaError_t cudaGetDevice(int *dev) {
  if (dev == NULL) return sim_ret(cudaErrorInvalidValue);
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  *dev = sim_thread()->device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e != cudaSuccess) return sim_ret(e);
  if (sim_capture_forbids(NULL)) return sim_ret(cudaErrorStreamCaptureUnsupported);
  sim_device_wait(d);
  return sim_ret(sim_sticky(d));
}

/* ---- what a device reports ---------------------------------------------- */

static void occ_props(cudaOccDeviceProp *p) {
  memset(p, 0, sizeof *p);
  p->computeMajor = 9;
  p->computeMinor = 0;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsPerMultiprocessor = 2048;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->numSms = sim_cfg.sms;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->reservedSharedMemPerBlock = 1024;
}

int sim_blocks_per_sm(const sim_kernel *k, int threads, size_t dyn_smem) {
  if (k->regs == 0) return threads <= 1024 ? 1 : 0; /* unknown to the report: a whole SM */
  cudaOccDeviceProp p;
  occ_props(&p);
  cudaOccFuncAttributes a;
  memset(&a, 0, sizeof a);
  a.maxThreadsPerBlock = 1024;
  a.numRegs = k->regs;
  a.sharedSizeBytes = (size_t)k->smem;
  cudaOccDeviceState st;
  memset(&st, 0, sizeof st);
  cudaOccResult r;
  memset(&r, 0, sizeof r);
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &st, threads, dyn_smem) != CUDA_OCC_SUCCESS) return 0;
  return r.activeBlocksPerMultiprocessor;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *func, int threads,
                                                         size_t dyn_smem) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (blocks == NULL || threads <= 0) return sim_ret(cudaErrorInvalidValue);
  const sim_kernel *k = sim_kernel_find(func);
  if (k == NULL) return sim_ret(cudaErrorInvalidDeviceFunction);
  *blocks = sim_blocks_per_sm(k, threads, dyn_smem);
  return cudaSuccess;
}

/* Each device its own bus, as GPUs of one host have (a GPU's is rarely
 * below 0x10). */
static int pci_bus(int dev) { return 0x10 + dev; }

/* The attributes kolo and its tests ask about; others are refused as an
 * unknown attribute would be. */
static int attribute(enum cudaDeviceAttr a, int *v) {
  switch (a) {
  case cudaDevAttrMultiProcessorCount: *v = sim_cfg.sms; return 1;
  case cudaDevAttrComputeCapabilityMajor: *v = 9; return 1;
  case cudaDevAttrComputeCapabilityMinor: *v = 0; return 1;
  case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return 1;
  case cudaDevAttrMaxThreadsPerMultiProcessor: *v = 2048; return 1;
  case cudaDevAttrMaxBlocksPerMultiprocessor: *v = 32; return 1;
  case cudaDevAttrMaxRegistersPerMultiprocessor: *v = 65536; return 1;
  case cudaDevAttrMaxRegistersPerBlock: *v = 65536; return 1;
  case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = 228 * 1024; return 1;
  case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; return 1;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; return 1;
  case cudaDevAttrWarpSize: *v = 32; return 1;
  case cudaDevAttrUnifiedAddressing: *v = 1; return 1;
  case cudaDevAttrCanMapHostMemory: *v = 1; return 1;
  case cudaDevAttrConcurrentKernels: *v = 1; return 1;
  case cudaDevAttrAsyncEngineCount: *v = 2; return 1;
  case cudaDevAttrIntegrated: *v = 0; return 1;
  case cudaDevAttrGlobalMemoryBusWidth: *v = 5120; return 1;
  case cudaDevAttrClockRate: *v = 1980000; return 1;
  case cudaDevAttrMemoryClockRate: *v = 2619000; return 1;
  case cudaDevAttrL2CacheSize: *v = 50 * 1024 * 1024; return 1;
  case cudaDevAttrPciDeviceId: *v = 0; return 1;
  case cudaDevAttrPciDomainId: *v = 0; return 1;
  /* The model has no NIC to write into its memory: GPUDirect RDMA is off,
   * and kolo falls back to staging as it does on such GPUs. */
  case cudaDevAttrGPUDirectRDMASupported: *v = 0; return 1;
  case cudaDevAttrGPUDirectRDMAWritesOrdering: *v = cudaGPUDirectRDMAWritesOrderingNone; return 1;
  case cudaDevAttrGPUDirectRDMAFlushWritesOptions: *v = 0; return 1;
  case cudaDevAttrMemoryPoolsSupported: *v = 0; return 1;
  case cudaDevAttrCooperativeLaunch: *v = 0; return 1;
  /* KOLO_SIM_SHARE: processes share the SMs (mps) or time-slice (0). */
  case cudaDevAttrMpsEnabled: *v = sim_share_mps(); return 1;
  default: return 0;
  }
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (value == NULL) return sim_ret(cudaErrorInvalidValue);
  if (sim_device_get(dev) == NULL) return sim_ret(cudaErrorInvalidDevice);
  if (attr == cudaDevAttrPciBusId) {
    *value = pci_bus(dev);
    return cudaSuccess;
  }
  return attribute(attr, value) ? cudaSuccess : sim_ret(cudaErrorInvalidValue);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (p == NULL) return sim_ret(cudaErrorInvalidValue);
  if (sim_device_get(dev) == NULL) return sim_ret(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  strncpy(p->name, "kolo CPU model of an H100 (not a GPU)", sizeof p->name - 1);
  p->totalGlobalMem = sim_cfg.mem_bytes;
  p->sharedMemPerBlock = 48 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = sim_cfg.sms;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxBlocksPerMultiProcessor = 32;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->regsPerMultiprocessor = 65536;
  p->unifiedAddressing = 1;
  p->canMapHostMemory = 1;
  p->concurrentKernels = 1;
  p->asyncEngineCount = 2;
  p->l2CacheSize = 50 * 1024 * 1024;
  p->pciDeviceID = dev;
  p->pciBusID = pci_bus(dev);
  sim_share_uuid(dev, p->uuid.bytes);
  return cudaSuccess;
}

/* ---- peer access --------------------------------------------------------- */

cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer) {
  cudaError_t e = sim_init();
  if (e != cudaSuccess) return sim_ret(e);
  if (can == NULL) return sim_ret(cudaErrorInvalidValue);
  if (sim_device_get(dev) == NULL || sim_device_get(peer) == NULL) return sim_ret(cudaErrorInvalidDevice);
  *can = dev != peer; /* CUDA answers 0 for a device and itself */
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e != cudaSuccess) return sim_ret(e);
  if (flags != 0) return sim_ret(cudaErrorInvalidValue);
  if (sim_device_get(peer) == NULL || peer == d->ordinal) return sim_ret(cudaErrorInvalidDevice);
  pthread_mutex_lock(&sim_lock);
  int was = d->peer_enabled[peer];
  d->peer_enabled[peer] = 1;
  pthread_mutex_unlock(&sim_lock);
  return was ? sim_ret(cudaErrorPeerAccessAlreadyEnabled) : cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  sim_device *d;
  cudaError_t e = sim_current(&d);
  if (e != cudaSuccess) return sim_ret(e);
  if (sim_device_get(peer) == NULL) return sim_ret(cudaErrorInvalidDevice);
  pthread_mutex_lock(&sim_lock);
  int was = d->peer_enabled[peer];
  d->peer_enabled[peer] = 0;
  pthread_mutex_unlock(&sim_lock);
  return was ? cudaSuccess : sim_ret(cudaErrorPeerAccessNotEnabled);
}

/* ---- what the model cannot do ---------------------------------------------- */

/* No driver behind the model: kolo asks for cuMemGetHandleForAddressRange
 * (GPUDirect RDMA), which is not there. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status) {
  (void)version;
  (void)flags;
  if (symbol == NULL || fn == NULL) return sim_ret(cudaErrorInvalidValue);
  *fn = NULL;
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                               enum cudaFlushGPUDirectRDMAWritesScope scope) {
  (void)target;
  (void)scope;
  return sim_ret(cudaErrorNotSupported);
}
