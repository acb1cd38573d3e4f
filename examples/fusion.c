/* fusion.c - gradient fusion (kolo_fusion.h) on 2 processes: three gradients
 * declared once, two of them views into kolo's buckets (ALLOCATE: reduced
 * in place), one in the program's own memory (EXTERNAL: packed into the
 * fusion buffer); each step marks them ready in backward order and waits
 * for their average over the ranks. */
#include <kolo.h>
#include <kolo_fusion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRANKS 2
#define STEPS 3
#define NTENSORS 3

static const size_t counts[NTENSORS] = {1000, 65536, 7};
static const koloFusionStorage_t kinds[NTENSORS] = {KOLO_FUSION_ALLOCATE, KOLO_FUSION_ALLOCATE,
                                                    KOLO_FUSION_EXTERNAL};

#define CHECK(call)                                                                     \
  do {                                                                                  \
    if ((call) != koloSuccess) {                                                        \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, koloFusionGetLastError(f));     \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

/* One step: rank r's gradients hold r + 1 + step; their average is the mean
 * of 1..NRANKS, plus step. */
static int step(koloFusion_t f, int rank, int s, const int *ids, float *external) {
  float *grad[NTENSORS];
  CHECK(koloFusionStepBegin(f));
  for (int t = NTENSORS - 1; t >= 0; t--) { /* backward: the last layer's gradient first */
    if (kinds[t] == KOLO_FUSION_ALLOCATE) CHECK(koloFusionTensorPtr(f, ids[t], (void **)&grad[t]));
    else grad[t] = external;
    for (size_t i = 0; i < counts[t]; i++) grad[t][i] = (float)(rank + 1 + s);
    CHECK(koloFusionMarkReady(f, ids[t], kinds[t] == KOLO_FUSION_EXTERNAL ? external : NULL, NULL));
  }
  CHECK(koloFusionStepEnd(f, NULL));
  CHECK(koloFusionWait(f));
  float expect = (NRANKS + 1) / 2.0f + (float)s;
  int wrong = 0;
  for (int t = 0; t < NTENSORS; t++) {
    if (kinds[t] == KOLO_FUSION_ALLOCATE) CHECK(koloFusionTensorPtr(f, ids[t], (void **)&grad[t])); /* may move after step 0 */
    for (size_t i = 0; i < counts[t]; i++) wrong += grad[t][i] != expect;
  }
  printf("rank %d step %d: gradient average = %g (expect %g), %d elements wrong\n", rank, s, grad[0][0],
         expect, wrong);
  return wrong != 0;
}

static int run_rank(koloUniqueId id, int rank) {
  koloComm_t comm;
  koloFusion_t f = NULL;
  if (koloCommInitRank(&comm, NRANKS, id, rank) != koloSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, koloGetLastError(NULL));
    return 1;
  }
  koloFusionConfig_t cfg = KOLO_FUSION_CONFIG_INITIALIZER; /* op: koloAvg */
  CHECK(koloFusionCreate(&f, comm, &cfg));
  int ids[NTENSORS];
  for (int t = 0; t < NTENSORS; t++) CHECK(koloFusionAddTensor(f, counts[t], koloFloat32, kinds[t], &ids[t]));
  CHECK(koloFusionCommit(f));
  float *external = malloc(counts[2] * sizeof *external);
  int bad = external == NULL;
  for (int s = 0; s < STEPS && !bad; s++) bad = step(f, rank, s, ids, external);
  free(external);
  koloFusionDestroy(f);
  koloCommDestroy(comm);
  return bad;
}

int main(void) {
  koloUniqueId id;
  if (koloGetUniqueId(&id) != koloSuccess) return 1;
  for (int rank = 0; rank < NRANKS; rank++) {
    if (fork() != 0) continue;
    int bad = run_rank(id, rank);
    fflush(stdout);
    _exit(bad);
  }
  int status, bad = 0;
  while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
  return bad;
}
