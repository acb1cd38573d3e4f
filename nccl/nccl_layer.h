/* nccl_layer.h - the insides of kolo's NCCL layer (nccl/): NCCL's calls
 * onto kolo's.  The layer knows kolo only through include/kolo.h, plus
 * common/ for its "last error" sentences and the parameter table (NCCL's
 * environment variables as aliases of kolo's).
 *
 * It compiles against kolo's nccl.h (the product, libnccl.so.2) and against
 * the CUDA toolkit's own nccl.h (an ABI check that is built, never
 * shipped): a prototype, enum value or struct layout of kolo's header that
 * differs from NCCL's fails one of the two builds. */
#ifndef KOLO_NCCL_LAYER_H
#define KOLO_NCCL_LAYER_H

#include <nccl.h>
#include <stddef.h>

#include "common/error.h"
#include "kolo.h"

/* pncclX is the implementation, ncclX a weak alias of it (as in NCCL, so
 * that a profiler can interpose the nccl* names). */
#define NCCL_LAYER_EXPORT __attribute__((visibility("default")))
#define NCCL_LAYER_ALIAS(name) NCCL_LAYER_EXPORT __attribute__((weak, alias("p" #name)))

static inline koloComm_t kolo_of(ncclComm_t c) { return (koloComm_t)(void *)c; }
static inline ncclComm_t nccl_of(koloComm_t c) { return (ncclComm_t)(void *)c; }
static inline koloStream_t kolo_stream(cudaStream_t s) { return (koloStream_t)(void *)s; }

/* kolo's result as NCCL's: the same values 0..7; a peer that stopped
 * answering (koloTimeout) is NCCL's remote error, kolo's sentence kept. */
ncclResult_t nccl_result(koloResult_t r);

/* Checks a caller's ncclConfig_t (NULL: the defaults) and turns it into
 * kolo's, device memory by default.  koloSuccess or koloInvalidArgument with
 * the thread's last error naming the field. */
koloResult_t nccl_config(const ncclConfig_t *in, koloConfig_t *out, const char *fn);

/* Once per process, at the first init: NCCL_DEBUG=VERSION's line, and the
 * NCCL_* variables kolo does not know, at INFO. */
void nccl_env_announce(void);

#endif
