/* perf_gate.c - kolo-perf's exit gate (see perf_gate.h). */
#define _GNU_SOURCE /* pthread barriers */
#include "perf/perf_gate.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Milliseconds a process waits at the exit gate for the others. */
#define GATE_WAIT_MS 60000

int gate_init(exit_gate *g, int nthreads, int done_fd, int go_fd) {
  *g = (exit_gate){.nthreads = nthreads, .done_fd = done_fd, .go_fd = go_fd};
  int err = nthreads > 1 ? pthread_barrier_init(&g->barrier, NULL, (unsigned)nthreads) : 0;
  if (err != 0) fprintf(stderr, "kolo-perf: pthread_barrier_init: %s\n", strerror(err));
  return err != 0 ? -1 : 0;
}

void gate_fini(exit_gate *g) {
  if (g->nthreads > 1) pthread_barrier_destroy(&g->barrier);
}

/* One thread of the process tells the parent and waits for all processes,
 * unless a rank here failed: it aborted its communicator, so nobody waits
 * for it, and a peer that never finishes (stopped, say) must not hold it. */
static void gate_process(exit_gate *g) {
  if (g->done_fd < 0) return;
  char b = 'd';
  if (write(g->done_fd, &b, 1) != 1) return; /* the parent is gone: go on */
  if (atomic_load(&g->failed)) return;
  struct pollfd p = {g->go_fd, POLLIN, 0};
  int r;
  do r = poll(&p, 1, GATE_WAIT_MS);
  while (r < 0 && errno == EINTR);
  if (r > 0 && read(g->go_fd, &b, 1) < 0) b = 0; /* "go", or EOF: either way on */
}

void gate_pass(exit_gate *g, int failed) {
  if (g == NULL) return;
  if (failed) atomic_store(&g->failed, 1);
  if (g->nthreads == 1 || pthread_barrier_wait(&g->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) gate_process(g);
  if (g->nthreads > 1) pthread_barrier_wait(&g->barrier);
}
