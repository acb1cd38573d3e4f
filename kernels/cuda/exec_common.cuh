/* exec_common.cuh - what every part of the CUDA executor (exec_kernel.cu)
 * uses: its headers, the device primitives it names, how long a waiting
 * thread spins between looks at the stop conditions.
 *
 * The executor's parts (exec_*.cuh) are headers of one translation unit,
 * exec_kernel.cu, in the order it includes them: every device function of
 * the kernel is compiled in one unit, as when they were one file, so that
 * inlining and the kernels' registers do not depend on the split. */
#ifndef KOLO_KERNELS_CUDA_EXEC_COMMON_CUH_
#define KOLO_KERNELS_CUDA_EXEC_COMMON_CUH_

#ifndef KOLO_HAVE_CUDA
#define KOLO_HAVE_CUDA 1
#endif

#include "kernels/cuda/device_prims.cuh"
#include "kernels/cuda/ll_format.h"
#include "kernels/cuda/reduce_prims.cuh"
#include "kernels/cuda_exec.h"
#include "kolo.h"
#include "ring/geometry.h"
#include "ring/schedule.h"

namespace {

using namespace kolo_cuda;
using kolo_dev::ld_acquire;
using kolo_dev::ld_line;
using kolo_dev::ld_relaxed;
using kolo_dev::st_line;
using kolo_dev::st_relaxed;
using kolo_dev::st_release;

/* Code run once per block, kept out of the kernel's body on the GPU so that
 * it does not raise the registers the body's loops are allocated. */
#if KOLO_DEV_HOST_BUILD
#define KOLO_OUT_OF_LINE
#else
#define KOLO_OUT_OF_LINE __noinline__
#endif

/* A waiting thread checks abort / stop / deadline every kPollSpins spins. */
constexpr unsigned kPollSpins = 256;
/* LL lines a thread has in flight (loads issued before the first poll). */
constexpr int kLLUnroll = 4;

}  // namespace

#endif
