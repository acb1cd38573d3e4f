/* nccl.c - an unmodified NCCL program (NCCL's own example of one process
 * driving every GPU it sees, one rank each, through a group) built against
 * kolo's NCCL layer: its libnccl.so.2 and nccl.h.  Built only where the
 * installed kolo has that layer (the CMake target kolo::nccl); exits 77
 * (skipped) on a machine without a CUDA device. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_DEVS 16
#define COUNT (1 << 20)

#define CUDA_OK(call)                                                                \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                     \
      return 1;                                                                      \
    }                                                                                \
  } while (0)
#define NCCL_OK(call)                                                                \
  do {                                                                               \
    ncclResult_t r_ = (call);                                                        \
    if (r_ != ncclSuccess) {                                                         \
      fprintf(stderr, "%s: %s\n", #call, ncclGetErrorString(r_));                     \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  if (ndev > MAX_DEVS) ndev = MAX_DEVS;
  ncclComm_t comms[MAX_DEVS];
  float *buf[MAX_DEVS];
  cudaStream_t streams[MAX_DEVS];
  float *host = malloc(COUNT * sizeof *host);
  if (host == NULL) return 1;
  for (int d = 0; d < ndev; d++) { /* rank d's buffer holds d + 1 */
    for (size_t i = 0; i < COUNT; i++) host[i] = (float)(d + 1);
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaMalloc((void **)&buf[d], COUNT * sizeof *host));
    CUDA_OK(cudaMemcpy(buf[d], host, COUNT * sizeof *host, cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamCreate(&streams[d]));
  }
  NCCL_OK(ncclCommInitAll(comms, ndev, NULL));
  NCCL_OK(ncclGroupStart());
  for (int d = 0; d < ndev; d++) NCCL_OK(ncclAllReduce(buf[d], buf[d], COUNT, ncclFloat, ncclSum, comms[d], streams[d]));
  NCCL_OK(ncclGroupEnd());
  int bad = 0;
  float expect = ndev * (ndev + 1) / 2.0f;
  for (int d = 0; d < ndev; d++) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaStreamSynchronize(streams[d]));
    CUDA_OK(cudaMemcpy(host, buf[d], COUNT * sizeof *host, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (size_t i = 0; i < COUNT; i++) wrong += host[i] != expect;
    printf("rank %d: buf[0] = %g (expect %g), %d elements wrong\n", d, host[0], expect, wrong);
    bad |= wrong != 0;
    ncclCommDestroy(comms[d]);
    cudaFree(buf[d]);
  }
  free(host);
  return bad;
}
