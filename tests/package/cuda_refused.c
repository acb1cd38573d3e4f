/* cuda_refused.c - run by tests/check_install.sh on a machine without a CUDA
 * driver: a host communicator works there (libkolo needs no CUDA library),
 * and asking for koloMemCuda fails with a sentence that says what is
 * missing.  Prints the refusal; exit 0 when both hold, 77 where CUDA works. */
#include <kolo.h>
#include <stdio.h>

int main(void) {
  koloComm_t comm;
  koloConfig_t cfg = KOLO_CONFIG_INITIALIZER;
  cfg.memory = koloMemHost;
  koloResult_t r = koloCommInitAllConfig(&comm, 1, NULL, &cfg);
  if (r != koloSuccess) {
    fprintf(stderr, "a host communicator failed: %s\n", koloGetLastError(NULL));
    return 1;
  }
  koloCommDestroy(comm);
  cfg.memory = koloMemCuda;
  r = koloCommInitAllConfig(&comm, 1, NULL, &cfg);
  if (r == koloSuccess) { /* a machine with a driver and a GPU: nothing to check */
    printf("SKIP: this machine has CUDA (a koloMemCuda communicator was made)\n");
    koloCommDestroy(comm);
    return 77;
  }
  printf("koloMemCuda refused: %s: %s\n", koloGetErrorString(r), koloGetLastError(NULL));
  return 0;
}
