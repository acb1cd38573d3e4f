/* threads.c - several ranks in one process: koloCommInitAll makes one
 * communicator per rank, and each rank's calls run on a thread of its own
 * (a host communicator's call returns when its result is in place, so one
 * thread cannot wait in two ranks' calls at once).  Here: an all-gather of
 * each rank's 3 values among 4 ranks. */
#include <kolo.h>
#include <pthread.h>
#include <stdio.h>

#define NRANKS 4
#define PER_RANK 3

typedef struct {
  koloComm_t comm;
  int rank;
  int ok;
} rank_arg;

static void *run_rank(void *p) {
  rank_arg *a = p;
  int mine[PER_RANK], all[NRANKS * PER_RANK];
  for (int i = 0; i < PER_RANK; i++) mine[i] = 10 * a->rank + i;
  koloResult_t r = koloAllGather(mine, all, PER_RANK, koloInt32, a->comm, NULL);
  if (r != koloSuccess) fprintf(stderr, "rank %d: %s\n", a->rank, koloGetLastError(a->comm));
  int sum = 0, expect = 0;
  for (int k = 0; k < NRANKS * PER_RANK; k++) {
    sum += all[k];
    expect += 10 * (k / PER_RANK) + k % PER_RANK; /* rank k / PER_RANK's value k % PER_RANK */
  }
  printf("rank %d: sum of the gathered values = %d (expect %d)\n", a->rank, sum, expect);
  a->ok = r == koloSuccess && sum == expect;
  return NULL;
}

int main(void) {
  koloComm_t comms[NRANKS];
  if (koloCommInitAll(comms, NRANKS, NULL) != koloSuccess) { /* host memory: no devices */
    fprintf(stderr, "koloCommInitAll: %s\n", koloGetLastError(NULL));
    return 1;
  }
  pthread_t threads[NRANKS];
  rank_arg args[NRANKS];
  int ok = 1;
  for (int r = 0; r < NRANKS; r++) {
    args[r] = (rank_arg){comms[r], r, 0};
    if (pthread_create(&threads[r], NULL, run_rank, &args[r]) != 0) {
      fprintf(stderr, "pthread_create failed for rank %d\n", r);
      return 1; /* the ranks started wait for it until KOLO_TIMEOUT_MS */
    }
  }
  for (int r = 0; r < NRANKS; r++) {
    pthread_join(threads[r], NULL);
    ok &= args[r].ok;
    koloCommDestroy(comms[r]);
  }
  return !ok;
}
