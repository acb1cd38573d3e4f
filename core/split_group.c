/* split_group.c - koloCommSplit inside a group (NCCL 2.18+): from one
 * thread, ncclGroupStart; ncclCommSplit(comm[i], ...) for each rank;
 * ncclGroupEnd.  A split needs every rank of its parent at once (an
 * allgather of colors and keys), so inside a group it is only recorded;
 * koloGroupEnd runs the recorded splits together, each on a thread of its
 * own (outside any group there), and *newcomm is set when they are done. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/comm_init.h"

typedef struct {
  struct koloComm *parent;
  int color, key, has_config;
  koloComm_t *newcomm;
  koloConfig_t config;
  koloResult_t res;
  char why[KOLO_ERR_LEN];
  pthread_t thread;
  int started;
} split_call;

typedef struct {
  split_call *v;
  int n, cap;
} group_splits;

static _Thread_local group_splits recorded;

koloResult_t kolo_group_add_split(struct koloComm *parent, int color, int key, koloComm_t *newcomm,
                                  const koloConfig_t *config) {
  if (recorded.n == recorded.cap) {
    int cap = recorded.cap ? 2 * recorded.cap : 8;
    split_call *v = realloc(recorded.v, (size_t)cap * sizeof *v);
    if (v == NULL) return kolo_error(&parent->err, koloSystemError, "koloCommSplit: out of memory recording a group call");
    recorded.v = v, recorded.cap = cap;
  }
  split_call *s = &recorded.v[recorded.n++];
  *s = (split_call){.parent = parent, .color = color, .key = key, .newcomm = newcomm, .has_config = config != NULL};
  if (config) s->config = *config;
  *newcomm = NULL; /* set by koloGroupEnd */
  return koloSuccess;
}

int kolo_group_has_splits(void) { return recorded.n > 0; }

static void *split_main(void *arg) {
  split_call *s = arg;
  s->res = koloCommSplit(s->parent, s->color, s->key, s->newcomm, s->has_config ? &s->config : NULL);
  if (s->res != koloSuccess) snprintf(s->why, sizeof s->why, "%s", kolo_thread_errbuf()->msg);
  return NULL;
}

/* The first failure, its sentence in the thread's buffer. */
static koloResult_t first_failure(const group_splits *g) {
  for (int i = 0; i < g->n; i++)
    if (g->v[i].res != koloSuccess) return kolo_error(NULL, g->v[i].res, "%s", g->v[i].why);
  return koloSuccess;
}

koloResult_t kolo_group_end_splits(int nops) {
  group_splits g = recorded;
  recorded = (group_splits){NULL, 0, 0};
  koloResult_t res = koloSuccess;
  if (nops > 0)
    res = kolo_error(NULL, koloInvalidUsage,
                     "koloGroupEnd: a group holds either communicator splits or other calls, not both (as in NCCL)");
  for (int i = 0; i < g.n && res == koloSuccess; i++) {
    g.v[i].started = pthread_create(&g.v[i].thread, NULL, split_main, &g.v[i]) == 0;
    if (!g.v[i].started) g.v[i].res = koloSystemError, snprintf(g.v[i].why, sizeof g.v[i].why, "koloGroupEnd: pthread_create failed for a split");
  }
  for (int i = 0; i < g.n; i++)
    if (g.v[i].started) pthread_join(g.v[i].thread, NULL);
  if (res == koloSuccess) res = first_failure(&g);
  free(g.v);
  return res;
}
