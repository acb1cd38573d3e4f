/* split_group.c - koloCommSplit inside a group (NCCL 2.18+): from one
 * thread, ncclGroupStart; ncclCommSplit(comm[i], ...) for each rank;
 * ncclGroupEnd.  A split needs every rank of its parent at once (an
 * allgather of colors and keys), so inside a group it is only recorded;
 * koloGroupEnd runs the recorded splits together, each on a thread of its
 * own (outside any group there), and *newcomm is set when they are done. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/comm_state.h"
#include "core/group.h"
#include "core/split_group.h"

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

/* ---- the group's job of one split (group.h) ---- */

static void *split_main(void *arg) {
  split_call *s = arg;
  s->res = koloCommSplit(s->parent, s->color, s->key, s->newcomm, s->has_config ? &s->config : NULL);
  if (s->res != koloSuccess) snprintf(s->why, sizeof s->why, "%s", kolo_thread_errbuf()->msg);
  return NULL;
}

static koloResult_t job_start(void *arg) {
  split_call *s = arg;
  s->started = pthread_create(&s->thread, NULL, split_main, s) == 0;
  if (s->started) return koloSuccess;
  snprintf(s->why, sizeof s->why, "koloGroupEnd: pthread_create failed for a split");
  return s->res = koloSystemError;
}

static koloResult_t job_finish(void *arg, int wait) {
  split_call *s = arg;
  (void)wait; /* a split always has the group's end wait */
  if (s->started) pthread_join(s->thread, NULL);
  s->started = 0;
  return s->res;
}

static void job_say(void *arg) {
  split_call *s = arg;
  kolo_error(NULL, s->res, "%s", s->why);
}

/* A split the group will not run: *newcomm stays NULL. */
static void job_refuse(void *arg, const char *why) { (void)arg, (void)why; }

koloResult_t kolo_group_add_split(struct koloComm *parent, int color, int key, koloComm_t *newcomm,
                                  const koloConfig_t *config) {
  split_call *s = calloc(1, sizeof *s);
  if (s == NULL) return kolo_error(&parent->err, koloSystemError, "koloCommSplit: out of memory recording a group call");
  *s = (split_call){.parent = parent, .color = color, .key = key, .newcomm = newcomm, .has_config = config != NULL};
  if (config) s->config = *config;
  kolo_group_job job = {KOLO_JOB_SPLIT, s, 1, job_start, job_finish, job_say, job_refuse, free};
  koloResult_t res = kolo_group_add_job(&job);
  if (res != koloSuccess) free(s);
  else *newcomm = NULL; /* set by koloGroupEnd */
  return res;
}
