/* fusion_sketch.c - kolo_fusion.h's usage sketch, as its header writes it,
 * on 2 processes: the views of the ALLOCATE gradients are fetched once
 * after Commit and backward writes through them every step; the EXTERNAL
 * gradient (float16) lives in the program's memory.  They are declared in
 * the model's forward order and backward marks them in reverse, as when a
 * program cannot know backward's order up front (that moved the views, and
 * broke this program, while bucket rebuilds were on by default).  Each
 * step checks the averages. */
#include <kolo.h>
#include <kolo_fusion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NRANKS 2
#define STEPS 4
#define COUNT 4096
#define COUNT2 100
#define COUNT3 1000
#define HALF_ONE 0x3c00   /* float16 1.0: rank 0's external gradient */
#define HALF_TWO 0x4000   /* 2.0: rank 1's */
#define HALF_MEAN 0x3e00  /* 1.5: their average */

#define CHECK(call)                                                                   \
  do {                                                                                \
    if ((call) != koloSuccess) {                                                      \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, koloFusionGetLastError(f));   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

/* Rank r's gradients hold r + 1 + step (grad3: twice that); the average
 * over the ranks is 1.5 + step. */
static void backward_fills(float *g, int n, int rank, int step, float scale) {
  for (int i = 0; i < n; i++) g[i] = scale * (float)(rank + 1 + step);
}

static int wrong_elements(const float *grad, const float *grad3, const uint16_t *buf, int step) {
  int wrong = 0;
  for (int i = 0; i < COUNT; i++) wrong += grad[i] != 1.5f + (float)step;
  for (int i = 0; i < COUNT3; i++) wrong += grad3[i] != 2 * (1.5f + (float)step);
  for (int i = 0; i < COUNT2; i++) wrong += buf[i] != HALF_MEAN;
  return wrong;
}

static int train(koloFusion_t f, int rank) {
  int id, id2, id3;
  float *grad, *grad3;
  uint16_t buf[COUNT2];
  CHECK(koloFusionAddTensor(f, COUNT, koloFloat32, KOLO_FUSION_ALLOCATE, &id));
  CHECK(koloFusionAddTensor(f, COUNT2, koloFloat16, KOLO_FUSION_EXTERNAL, &id2));
  CHECK(koloFusionAddTensor(f, COUNT3, koloFloat32, KOLO_FUSION_ALLOCATE, &id3));
  CHECK(koloFusionCommit(f));                          /* allocates the bucket buffers */
  CHECK(koloFusionTensorPtr(f, id, (void **)&grad));   /* backward writes here, every step */
  CHECK(koloFusionTensorPtr(f, id3, (void **)&grad3));
  for (int step = 0; step < STEPS; step++) {
    CHECK(koloFusionStepBegin(f));
    /* backward: the last layer's gradient first */
    backward_fills(grad3, COUNT3, rank, step, 2.0f);
    CHECK(koloFusionMarkReady(f, id3, NULL, NULL));
    for (int i = 0; i < COUNT2; i++) buf[i] = rank == 0 ? HALF_ONE : HALF_TWO;
    CHECK(koloFusionMarkReady(f, id2, buf, NULL));
    backward_fills(grad, COUNT, rank, step, 1.0f);
    CHECK(koloFusionMarkReady(f, id, NULL, NULL));
    CHECK(koloFusionStepEnd(f, NULL)); /* host: no event; Wait below */
    CHECK(koloFusionWait(f));
    int wrong = wrong_elements(grad, grad3, buf, step);
    printf("rank %d step %d: gradient average = %g (expect %g), %d elements wrong\n", rank, step, grad[0], 1.5 + step, wrong);
    if (wrong) return 1;
  }
  return 0;
}

static int run_rank(koloUniqueId uid, int rank) {
  koloComm_t comm;
  koloFusion_t f = NULL;
  if (koloCommInitRank(&comm, NRANKS, uid, rank) != koloSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, koloGetLastError(NULL));
    return 1;
  }
  koloFusionConfig_t cfg = KOLO_FUSION_CONFIG_INITIALIZER; /* op: koloAvg */
  int bad = koloFusionCreate(&f, comm, &cfg) != koloSuccess;
  if (bad) fprintf(stderr, "rank %d: koloFusionCreate: %s\n", rank, koloFusionGetLastError(NULL));
  else bad = train(f, rank);
  if (f) koloFusionDestroy(f);
  koloCommDestroy(comm);
  return bad;
}

int main(void) {
  koloUniqueId uid;
  if (koloGetUniqueId(&uid) != koloSuccess) return 1;
  for (int rank = 0; rank < NRANKS; rank++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid != 0) continue;
    int bad = run_rank(uid, rank);
    fflush(stdout);
    _exit(bad);
  }
  int status, bad = 0;
  while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
  return bad;
}
