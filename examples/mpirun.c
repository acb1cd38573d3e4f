/* mpirun.c - ranks started by a launcher join one kolo job with
 * koloCommInitFromEnv: rank and size from Open MPI's OMPI_COMM_WORLD_RANK /
 * OMPI_COMM_WORLD_SIZE (or Slurm's, torchrun's, kolo's own), the rendezvous
 * from KOLO_ROOT=host:port, which rank 0 serves, and the job's secret from
 * KOLO_SECRET (32 hex digits).  No MPI library is linked: mpirun only starts
 * the processes.
 *
 *   mpirun -np 2 -x KOLO_ROOT=127.0.0.1:29500 \
 *          -x KOLO_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n') ./mpirun_allreduce
 */
#include <kolo.h>
#include <stdio.h>

#define COUNT 1000

int main(void) {
  koloComm_t comm;
  if (koloCommInitFromEnv(&comm, NULL) != koloSuccess) {
    fprintf(stderr, "koloCommInitFromEnv: %s\n", koloGetLastError(NULL));
    return 1;
  }
  int rank = -1, n = 0;
  koloCommUserRank(comm, &rank);
  koloCommCount(comm, &n);
  static double x[COUNT];
  for (int i = 0; i < COUNT; i++) x[i] = rank + 1 + i; /* rank r adds r + 1 + i */
  koloResult_t r = koloAllReduce(x, x, COUNT, koloFloat64, koloSum, comm, NULL);
  if (r != koloSuccess) fprintf(stderr, "rank %d: %s\n", rank, koloGetLastError(comm));
  int wrong = 0;
  for (int i = 0; i < COUNT; i++) wrong += x[i] != n * (n + 1) / 2.0 + (double)n * i;
  printf("rank %d of %d: x[0] = %g (expect %g), %d of %d elements wrong\n", rank, n, x[0],
         n * (n + 1) / 2.0, wrong, COUNT);
  koloCommDestroy(comm);
  return r != koloSuccess || wrong != 0;
}
