/* mem_kind.c - the memory kinds this build of kolo has (see mem_kind.h).
 *
 * The one place that knows whether the build has CUDA: its table is
 * listed here only then (CMakeLists.txt builds core/cuda_kind.c and the
 * CUDA files behind it only then), as the net registry lists ib only in
 * builds with libibverbs. */
#include "core/mem_kind.h"

static const kolo_mem_kind *const kinds[] = {
#ifdef KOLO_HAVE_CUDA
    &kolo_mem_kind_cuda,
#endif
    NULL, /* so that the list is never empty */
};

const kolo_mem_kind *kolo_mem_kind_find(int memory) {
  for (size_t i = 0; kinds[i] != NULL; i++)
    if (kinds[i]->memory == memory) return kinds[i];
  return NULL;
}
