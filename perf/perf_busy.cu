// perf_busy.cu - the calibrated busy kernel of `kolo-perf overlap --mem cuda`
// (perf_compute.h): stands in for a layer's backward compute on the GPU.
#include <cuda_runtime.h>

__global__ void perf_busy_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

extern "C" int perf_busy_launch(void *stream, long long cycles) {
  perf_busy_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(cycles);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
