/* cuda_peek.h - test-only writes into a CUDA communicator's device state:
 * starting its step counts where a long-running job would have them (the
 * 32-bit wrap), without moving 2^32 slices first. */
#ifndef KOLO_TESTS_UTIL_CUDA_PEEK_H
#define KOLO_TESTS_UTIL_CUDA_PEEK_H

#include <stdint.h>

#include "kolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the step count of every device connector end of comm (ring,
 * hierarchical and existing point-to-point ends) to `step`, and the head
 * and tail words of every pipe this rank receives on: as if every pipe had
 * moved `step` slices, all consumed.  Call it on every rank of the comm
 * (ranks of this process), none of its kernels running, and launch nothing
 * on the comm before all ranks returned.  Returns a cudaError_t (-1 for a
 * host communicator or a build without CUDA). */
int kt_cuda_set_steps(koloComm_t comm, uint32_t step);

#ifdef __cplusplus
}
#endif

#endif
