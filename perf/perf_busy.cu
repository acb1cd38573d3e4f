// perf_busy.cu - the calibrated busy kernel of `kolo-perf overlap --mem cuda`
// (perf_compute.h): stands in for a layer's backward compute on the GPU.
#include "kernels/cuda/device_prims.cuh"

__global__ void perf_busy_kernel(long long cycles) {
  long long start = kolo_dev::clock_cycles();
  while (kolo_dev::clock_cycles() - start < cycles) kolo_dev::poll();
}

extern "C" int perf_busy_launch(void *stream, long long cycles) {
  return kolo_dev::launch<perf_busy_kernel>(1, 1, 0, (cudaStream_t)stream, cycles) == cudaSuccess ? 0 : -1;
}
