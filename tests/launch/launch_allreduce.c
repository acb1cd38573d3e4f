/* launch_allreduce.c - one rank of a job a real launcher started (mpirun,
 * torchrun's variables): koloCommInitFromEnv, then an all-reduce of 4099
 * doubles checked element by element.  Prints "rank R of N: all-reduce
 * checked" on success; exits 1 with the reason otherwise. */
#include <kolo.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT 4099

int main(void) {
  koloComm_t comm;
  if (koloCommInitFromEnv(&comm, NULL) != koloSuccess) {
    fprintf(stderr, "koloCommInitFromEnv: %s\n", koloGetLastError(NULL));
    return 1;
  }
  int rank = -1, n = 0;
  koloCommUserRank(comm, &rank);
  koloCommCount(comm, &n);
  double *x = malloc(COUNT * sizeof *x);
  if (x == NULL) return 1;
  for (int i = 0; i < COUNT; i++) x[i] = (rank + 1) * 1000.0 + i; /* sum: n(n+1)/2*1000 + n*i */
  koloResult_t r = koloAllReduce(x, x, COUNT, koloFloat64, koloSum, comm, NULL);
  if (r != koloSuccess) fprintf(stderr, "rank %d: koloAllReduce: %s\n", rank, koloGetLastError(comm));
  int wrong = 0;
  for (int i = 0; r == koloSuccess && i < COUNT; i++) {
    double want = n * (n + 1) / 2.0 * 1000.0 + (double)n * i;
    if (x[i] != want && wrong++ < 3) fprintf(stderr, "rank %d: x[%d] = %g, expected %g\n", rank, i, x[i], want);
  }
  if (r == koloSuccess && wrong == 0) printf("rank %d of %d: all-reduce checked\n", rank, n);
  free(x);
  koloCommDestroy(comm);
  return r != koloSuccess || wrong != 0;
}
