#include <kolo.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

/* 4 processes on one machine sum a vector: 0 + 1 + 2 + 3 */
int main(void) {
  koloUniqueId id;
  if (koloGetUniqueId(&id) != koloSuccess) return 1;  /* starts the rendezvous here */
  for (int rank = 0; rank < 4; rank++) {
    if (fork() != 0) continue;
    koloComm_t comm;
    koloResult_t r = koloCommInitRank(&comm, 4, id, rank);
    if (r != koloSuccess) { fprintf(stderr, "%s\n", koloGetLastError(NULL)); _exit(1); }
    size_t n = 1 << 20;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rank;
    r = koloAllReduce(x, x, n, koloFloat32, koloSum, comm, NULL); /* in place */
    if (r != koloSuccess) fprintf(stderr, "rank %d: %s\n", rank, koloGetLastError(comm));
    printf("rank %d: x[0] = %g (expect 6)\n", rank, x[0]);
    fflush(stdout); /* _exit does not flush: piped output would be lost */
    koloCommDestroy(comm);
    _exit(r != koloSuccess);
  }
  int status, bad = 0;
  while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
  return bad;
}
