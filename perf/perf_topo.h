/* perf_topo.h - `kolo-perf topo`: what kolo sees on this machine and would
 * use, section by section (docs/benchmarking.md); each section says "none
 * found" (and why, where it can) when there is nothing. */
#ifndef KOLO_PERF_TOPO_H
#define KOLO_PERF_TOPO_H

#include <stddef.h>
#include <stdio.h>

/* `kolo-perf topo ...`: its exit code. */
int perf_topo_main(int argc, char **argv);

/* The sections (perf_topo_*.c), each printing to out. */
/* Returns the number of GPUs found (0 without CUDA or a device). */
int perf_topo_gpus(FILE *out);
void perf_topo_rdma(FILE *out);
/* The rings of a layout: "HxR" (H hosts of R ranks) or each rank's host
 * index, "0,0,1,1"; channels 0: as many as the largest host has ranks.
 * 0, or -1 with a sentence on stderr for a bad layout. */
int perf_topo_rings(FILE *out, const char *layout, int channels);

/* NVLink of the GPU at PCI bus id `bus` ("0000:19:00.0") through NVML,
 * loaded with dlopen (never linked): one line to out, "unknown" with why
 * when NVML is not there. */
void perf_topo_nvlink(FILE *out, const char *bus, const char *const *gpu_buses, int ngpus);
/* Releases NVML if it was loaded. */
void perf_topo_nvml_close(void);

/* The first line of a file, without its newline; 0, or -1 when unreadable. */
int perf_topo_read_line(const char *path, char *buf, size_t len);

#endif
