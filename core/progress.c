/* progress.c - the progress thread of a non-blocking communicator.
 *
 * Calls on a communicator with config.blocking = 0 are queued here and
 * return koloInProgress; the thread runs them in issue order.  It sleeps on
 * a condition variable when the queue is empty.  A call made of several
 * exchanges with computation between them (koloAdasum) is queued as a
 * function that the thread runs in its turn. */
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/enqueue.h"
#include "core/progress.h"

typedef struct nb_batch {
  struct nb_batch *next;
  kolo_nb_fn fn; /* a call composed of others (koloAdasum): run instead of ops */
  void *fn_arg;
  int nops;
  kolo_op ops[];
} nb_batch;

struct kolo_nb_queue {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  nb_batch *head, *tail;
  int pending; /* batches queued or running */
  int stop;
};

static void *progress_main(void *arg) {
  struct koloComm *c = arg;
  struct kolo_nb_queue *q = c->nbq;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (q->head == NULL && !q->stop) pthread_cond_wait(&q->cond, &q->lock);
    if (q->head == NULL) break;
    nb_batch *b = q->head;
    q->head = b->next;
    if (q->head == NULL) q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    int run = c->failed == koloSuccess && !atomic_load(&c->aborted);
    if (b->fn != NULL) b->fn(b->fn_arg, run); /* told not to run, it still frees its argument */
    else if (run) kolo_run_ops_here(b->ops, b->nops);
    free(b);
    pthread_mutex_lock(&q->lock);
    q->pending--;
    pthread_cond_broadcast(&q->cond);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

koloResult_t kolo_nb_start(struct koloComm *c) {
  struct kolo_nb_queue *q = calloc(1, sizeof *q);
  if (q == NULL) return kolo_error(&c->err, koloSystemError, "out of memory starting the progress thread");
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->cond, NULL);
  c->nbq = q;
  int err = pthread_create(&q->thread, NULL, progress_main, c);
  if (err != 0) {
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    free(q);
    c->nbq = NULL;
    return kolo_syserror(&c->err, err, "cannot start the progress thread of rank %d", c->rank);
  }
  return koloSuccess;
}

static koloResult_t queue_batch(struct koloComm *c, nb_batch *b) {
  struct kolo_nb_queue *q = c->nbq;
  pthread_mutex_lock(&q->lock);
  if (q->tail) q->tail->next = b;
  else q->head = b;
  q->tail = b;
  q->pending++;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->lock);
  return koloInProgress;
}

koloResult_t kolo_nb_submit(struct koloComm *c, kolo_op *ops, int nops) {
  nb_batch *b = malloc(sizeof *b + (size_t)nops * sizeof(kolo_op));
  if (b == NULL) return kolo_error(&c->err, koloSystemError, "out of memory queueing a call");
  *b = (nb_batch){NULL, NULL, NULL, nops};
  memcpy(b->ops, ops, (size_t)nops * sizeof(kolo_op));
  return queue_batch(c, b);
}

koloResult_t kolo_nb_submit_fn(struct koloComm *c, kolo_nb_fn fn, void *arg) {
  nb_batch *b = malloc(sizeof *b);
  if (b == NULL) return kolo_error(&c->err, koloSystemError, "out of memory queueing a call");
  *b = (nb_batch){NULL, fn, arg, 0};
  return queue_batch(c, b);
}

koloResult_t kolo_nb_status(struct koloComm *c) {
  struct kolo_nb_queue *q = c->nbq;
  pthread_mutex_lock(&q->lock);
  koloResult_t res = q->pending > 0 ? koloInProgress : c->failed;
  pthread_mutex_unlock(&q->lock);
  return res;
}

void kolo_nb_stop(struct koloComm *c) {
  struct kolo_nb_queue *q = c->nbq;
  if (q == NULL) return;
  pthread_mutex_lock(&q->lock);
  q->stop = 1;
  pthread_cond_broadcast(&q->cond);
  pthread_mutex_unlock(&q->lock);
  pthread_join(q->thread, NULL);
  pthread_cond_destroy(&q->cond);
  pthread_mutex_destroy(&q->lock);
  free(q);
  c->nbq = NULL;
}
