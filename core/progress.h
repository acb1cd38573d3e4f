/* progress.h - the progress thread of non-blocking communicators. */
#ifndef KOLO_CORE_PROGRESS_H
#define KOLO_CORE_PROGRESS_H

#include "core/comm_state.h"

/* Non-blocking communicators: the progress thread and its queue. */
koloResult_t kolo_nb_start(struct koloComm *comm);
koloResult_t kolo_nb_submit(struct koloComm *comm, kolo_op *ops, int nops);
/* Queues fn(arg, run) to be called on the progress thread in issue order,
 * for a call made of several exchanges (koloAdasum): run is 0 when the
 * communicator failed or was aborted before its turn (fn must still free
 * arg).  Returns koloInProgress, or an error when it could not queue. */
typedef void (*kolo_nb_fn)(void *arg, int run);
koloResult_t kolo_nb_submit_fn(struct koloComm *comm, kolo_nb_fn fn, void *arg);
/* koloInProgress while submitted ops remain, else the first failure. */
koloResult_t kolo_nb_status(struct koloComm *comm);
void kolo_nb_stop(struct koloComm *comm);

#endif
