/* perf_gate.h - kolo-perf's exit gate.  No rank tears its communicator down
 * before every rank of this machine has finished its sweep: the threads of
 * a process meet at a barrier and, when forked, each process tells the
 * parent "done" on a pipe and waits for its "go" on the id pipe.  A rank
 * that is still draining the last call thus never sees a peer's
 * connections close under it.  (A launcher's job has no such channel:
 * there each rank destroys its communicator at once.) */
#ifndef KOLO_PERF_GATE_H
#define KOLO_PERF_GATE_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
  int nthreads;
  pthread_barrier_t barrier; /* the threads of this process (nthreads > 1) */
  int done_fd, go_fd;        /* to and from the parent when forked, else -1 */
  _Atomic int failed;        /* a rank of this process failed: do not wait for "go" */
} exit_gate;

/* 0, or -1 with a message. */
int gate_init(exit_gate *g, int nthreads, int done_fd, int go_fd);
void gate_fini(exit_gate *g);
/* Every rank of this machine has finished its sweep when this returns
 * (or, failed != 0 on any rank of this process, every rank of it).  g
 * NULL: no gate. */
void gate_pass(exit_gate *g, int failed);

#endif
