/* perf_cuda.h - kolo-perf's questions to CUDA before it runs: is there a
 * device, and how to name one.  Declared only in builds with CUDA. */
#ifndef KOLO_PERF_CUDA_H
#define KOLO_PERF_CUDA_H

#include <stddef.h>

#ifdef KOLO_HAVE_CUDA
/* Counts the visible devices: 0 with *ndev >= 1, or -1 with `why` holding
 * CUDA's own words (cudaGetErrorString).  fork_first: ask from a child
 * process, so that this process makes no CUDA call before it forks ranks
 * (a CUDA context does not survive fork). */
int perf_cuda_probe(int fork_first, int *ndev, char *why, size_t len);
/* "cuda device 0 [0x19] NVIDIA H100 80GB HBM3" (the name left out when
 * CUDA cannot say). */
void perf_cuda_describe(int dev, char *buf, size_t len);
#endif

#endif
