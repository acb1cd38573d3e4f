/* perf_topo_gpu.c - kolo-perf topo's GPUs: what CUDA reports of each (name,
 * PCI bus, memory, SMs), its NUMA node from /sys, which pairs can reach
 * each other's memory (cudaDeviceCanAccessPeer: kolo's p2p transport needs
 * it), and NVLink from NVML where the driver has it. */
#include <stdio.h>

#include "perf/perf_topo.h"

#ifdef KOLO_HAVE_CUDA
#include <cuda_runtime.h>

#define TOPO_MAX_GPUS 64

/* "node 0", or why there is none. */
static void numa_of(const char *bus, char *buf, size_t len) {
#ifdef KOLO_CUDA_SIM
  (void)bus;
  snprintf(buf, len, "n/a (model device)");
#else
  char path[128], v[32];
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", bus);
  if (perf_topo_read_line(path, v, sizeof v) != 0) snprintf(buf, len, "? (no %s)", path);
  else if (v[0] == '-') snprintf(buf, len, "none (the kernel knows no NUMA node for it)");
  else snprintf(buf, len, "%s", v);
#endif
}

static void one_gpu(FILE *out, int dev, char *bus, size_t len) {
  struct cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, dev);
  if (e != cudaSuccess) {
    snprintf(bus, len, "?");
    fprintf(out, "#   GPU %d: cudaGetDeviceProperties failed: %s\n", dev, cudaGetErrorString(e));
    return;
  }
  p.name[sizeof p.name - 1] = '\0';
  snprintf(bus, len, "%04x:%02x:%02x.0", (unsigned)p.pciDomainID, (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
  char numa[160];
  numa_of(bus, numa, sizeof numa);
  fprintf(out, "#   GPU %d: %s, PCI %s, NUMA node %s, %.1f GiB, %d SMs, compute %d.%d\n", dev, p.name, bus, numa,
          (double)p.totalGlobalMem / (1 << 30), p.multiProcessorCount, p.major, p.minor);
}

static void peer_matrix(FILE *out, int n) {
  fprintf(out, "#   peer access (cudaDeviceCanAccessPeer: the row's GPU can map the column's memory):\n#        ");
  for (int j = 0; j < n; j++) fprintf(out, " GPU%-2d", j);
  fprintf(out, "\n");
  for (int i = 0; i < n; i++) {
    fprintf(out, "#   GPU%-2d", i);
    for (int j = 0; j < n; j++) {
      int can = 0;
      cudaError_t e = i == j ? cudaSuccess : cudaDeviceCanAccessPeer(&can, i, j);
      fprintf(out, " %5s", i == j ? "-" : e != cudaSuccess ? "err" : can ? "yes" : "no");
    }
    fprintf(out, "\n");
  }
}

int perf_topo_gpus(FILE *out) {
  static char buses[TOPO_MAX_GPUS][16];
  const char *bus_ptrs[TOPO_MAX_GPUS];
  int n = 0;
  fprintf(out, "# GPUs\n");
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    fprintf(out, "#   none found (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
    return 0;
  }
#ifdef KOLO_CUDA_SIM
  fprintf(out, "#   kolo's CPU model of the GPU (-DKOLO_CUDA=SIM): model devices, not GPUs; no NVLink\n");
#endif
  if (n > TOPO_MAX_GPUS) n = TOPO_MAX_GPUS;
  for (int d = 0; d < n; d++) {
    one_gpu(out, d, buses[d], sizeof buses[d]);
    bus_ptrs[d] = buses[d];
  }
  peer_matrix(out, n);
#ifndef KOLO_CUDA_SIM
  for (int d = 0; d < n; d++) {
    fprintf(out, "#   GPU %d NVLink: ", d);
    perf_topo_nvlink(out, buses[d], bus_ptrs, n);
  }
  perf_topo_nvml_close();
#else
  (void)bus_ptrs;
#endif
  return n;
}

#else /* no CUDA */

int perf_topo_gpus(FILE *out) {
  fprintf(out, "# GPUs\n#   none found (this build has no CUDA: nvcc was not found when it was configured, "
               "or KOLO_CUDA=OFF)\n");
  return 0;
}

#endif
