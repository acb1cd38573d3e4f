/* fuzz_nccl_config.c - the NCCL layer's reading of a caller's ncclConfig_t
 * (nccl/nccl_config.c), from any bytes: a struct of exactly the input's
 * length (an older NCCL's shorter one, a newer one's longer), whose size
 * field says that length as NCCL_CONFIG_INITIALIZER would; magic, version
 * and fields as given.  ASan catches a read of a field the struct does not
 * have; an accepted config must give channels within 1 <= min <= max. */
#include <stddef.h>
#include <stdint.h>

#include "nccl/nccl_layer.h"
#include "tests/fuzz/fuzz_util.h"

/* size, magic and version: NCCL reads them from any struct. */
#define HEADER_BYTES offsetof(ncclConfig_t, blocking)
#define MAX_BYTES 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HEADER_BYTES || size > MAX_BYTES) return 0;
  ncclConfig_t *in = malloc(size);
  FUZZ_REQUIRE(in != NULL);
  memcpy(in, data, size);
  in->size = size;
  koloConfig_t out;
  if (nccl_config(in, &out, "fuzz_nccl_config") == koloSuccess) {
    FUZZ_REQUIRE(out.blocking == 0 || out.blocking == 1 || out.blocking == KOLO_CONFIG_UNDEF);
    FUZZ_REQUIRE(out.minChannels >= 1 && out.maxChannels >= out.minChannels);
  }
  free(in);
  return 0;
}
