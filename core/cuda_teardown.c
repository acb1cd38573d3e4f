/* cuda_teardown.c - ending a CUDA communicator: waiting for its own work
 * (not the whole device's), then closing its pipes with CUDA IPC's rule
 * that a process frees memory it exported only after every process that
 * opened it has closed it.
 *
 * Why not cudaDeviceSynchronize: it waits for every communicator of the
 * device, and another one may have kernels spinning for a call this thread
 * has yet to make: a hang.  A communicator's calls are chained (each call
 * waits for the order event the last one recorded), so its order event
 * done means all of them are, and its setup stream holds the rest.
 * (cudaFree itself still waits for the whole device, as CUDA defines it:
 * destroy a communicator when no other one on its device waits for this
 * thread; README, "CUDA communicators".)
 *
 * koloCommDestroy of a CUDA communicator whose ranks share a host across
 * processes is therefore an intra-host collective, as NCCL's is: each rank
 * closes what it opened of its peers' memory and tells them; each frees what
 * it exported once the opener said so (or is gone).  A peer that is alive
 * but never says so within the timeout gets its block leaked, with a
 * warning, instead of freed under its mapping.  A failed connection is
 * not "gone": a peer whose sockets were cut (or that failed and has not
 * closed yet) still maps the memory, so its process must have ended. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "core/cuda_comm.h"
#include "core/cuda_wait.h"

#include <cuda_runtime.h>

#define TAG_IPC_CLOSED 0x40u

/* ---- the communicator's own work ---------------------------------------- */

static int busy(cudaError_t e) { return e == cudaErrorNotReady; }

/* Whether the comm's work is still running; 0 once done or failed. */
static int work_pending(kolo_cuda_comm *cc) {
  /* A NotReady is no error: CUDA leaves the thread's last error as it was. */
  return (cc->order_event && busy((cudaError_t)kolo_cuda_event_query(cc->order_event))) ||
         (cc->setup_stream && busy((cudaError_t)kolo_cuda_stream_query(cc->setup_stream)));
}

/* The comm's work outlived the timeout of `fn`: the comm fails with that
 * (before the kernels' "aborted" status can say it) and its kernels are
 * aborted (they stop at their next poll). */
static void give_up(struct koloComm *c, const char *fn) {
  int expected = koloSuccess;
  if (atomic_compare_exchange_strong(&c->failed, &expected, (int)koloTimeout))
    kolo_error(&c->err, koloTimeout, "rank %d: %s: the communicator's kernels did not finish within %d ms: aborted them",
               c->rank, fn, c->timeout_ms);
  KOLO_WARN("rank %d: the communicator's kernels did not finish within %d ms of %s: aborting them", c->rank,
            c->timeout_ms, fn);
  kolo_cuda_comm_abort(c);
}

/* Event and stream queries need no current device: the caller's stays. */
int kolo_cuda_comm_busy(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  return cc != NULL && cc->dev >= 0 && work_pending(cc);
}

/* Waits for the comm's own work; past the timeout, aborts its kernels and
 * waits for that. */
void kolo_cuda_comm_quiesce(struct koloComm *c, const char *fn) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc == NULL || cc->dev < 0) return;
  if (cudaSetDevice(cc->dev) != cudaSuccess) return; /* no context: nothing of ours runs */
  int64_t deadline = c->timeout_ms > 0 ? kolo_now_ms() + c->timeout_ms : -1;
  int aborted = 0;
  while (work_pending(cc)) {
    if (!aborted && deadline >= 0 && kolo_now_ms() > deadline) {
      give_up(c, fn);
      aborted = 1;
    }
    kolo_nap_us(200);
  }
}

/* ---- pipes: CUDA IPC's order --------------------------------------------- */

typedef void (*end_fn)(struct koloComm *c, kolo_connector *end, void *arg);

/* Calls f on every pipe end of c that exists. */
static void each_end(struct koloComm *c, end_fn f, void *arg) {
  for (int ch = 0; ch < KOLO_MAX_CHANNELS; ch++) {
    f(c, &c->ring_send[ch], arg);
    f(c, &c->ring_recv[ch], arg);
    for (int k = 0; k < 2; k++) {
      f(c, &c->hier_send[k][ch], arg);
      f(c, &c->hier_recv[k][ch], arg);
    }
  }
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  for (size_t i = 0; c->p2p_send && i < np; i++) {
    if (c->p2p_send_ready[i]) f(c, &c->p2p_send[i], arg);
    if (c->p2p_recv_ready[i]) f(c, &c->p2p_recv[i], arg);
  }
}

/* Closes an imported end and marks its peer as one to tell. */
static void close_imported(struct koloComm *c, kolo_connector *end, void *arg) {
  (void)c;
  if (!kolo_connector_ipc_imported(end)) return;
  ((unsigned char *)arg)[end->peer] = 1;
  kolo_connector_close(end);
}

static void mark_exporting(struct koloComm *c, kolo_connector *end, void *arg) {
  (void)c;
  if (kolo_connector_ipc_exported(end)) ((unsigned char *)arg)[end->peer] = 1;
}

/* What to do with an exported end of one peer: 1 close, 0 abandon. */
typedef struct {
  int peer, close;
} peer_verdict;

static void settle_exported(struct koloComm *c, kolo_connector *end, void *arg) {
  (void)c;
  const peer_verdict *v = arg;
  if (end->peer != v->peer || !kolo_connector_ipc_exported(end)) return;
  if (v->close) kolo_connector_close(end);
  else kolo_connector_abandon(end);
}

/* Whether process pid has ended.  A zombie has (its mappings went when it
 * exited; kill(pid, 0) still succeeds for it until its parent reaps it). */
static int process_ended(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0; /* no /proc: as kill says */
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
  return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* The peer's connection failed: its process (CUDA IPC peers share this
 * host) must end before `deadline` for its mapping to be gone. */
static int peer_process_ended(struct koloComm *c, int peer, int64_t deadline) {
  const kolo_peer_info *info = kolo_bootstrap_peer(c->bs, peer);
  if (info == NULL || info->pid <= 0) return 0;
  while (!process_ended(info->pid)) {
    if (kolo_now_ms() > deadline) return 0;
    kolo_nap_us(1000);
  }
  return 1;
}

/* Waits for `peer` to say it closed our memory; 1 when it did or its
 * process ended by `deadline`. */
static int peer_closed(struct koloComm *c, int peer, int64_t deadline) {
  uint8_t ack = 0;
  koloResult_t res = kolo_bootstrap_recv(c->bs, peer, TAG_IPC_CLOSED, &ack, sizeof ack);
  if (res == koloSuccess) return 1;
  /* A goodbye "left" comes after its sender closed what it opened: its
   * koloCommDestroy closes first, and so does a failed init (connect.c
   * closes what it attached).  It may not send the ack to a rank that
   * said goodbye itself, as one whose init failed has. */
  if (kolo_bootstrap_peer_dead(c->bs, peer) == KOLO_PEER_LEFT) return 1;
  if (res != koloTimeout && peer_process_ended(c, peer, deadline)) return 1;
  KOLO_WARN("rank %d: rank %d did not close its mapping of this rank's pipe memory within %d ms of "
            "koloCommDestroy (%s): the memory is left allocated rather than freed under its mapping",
            c->rank, peer, c->timeout_ms,
            res == koloTimeout ? "is it destroying the communicator too?"
                               : "its connection failed but its process still runs");
  return 0;
}

void kolo_cuda_comm_close_ipc(struct koloComm *c) {
  unsigned char *opened = calloc((size_t)c->nranks, 1), *exported = calloc((size_t)c->nranks, 1);
  if (opened == NULL || exported == NULL) { /* cannot follow the order: keep the memory */
    free(opened);
    free(exported);
    return;
  }
  each_end(c, close_imported, opened);
  uint8_t ack = 1;
  for (int r = 0; r < c->nranks; r++)
    if (opened[r] && kolo_bootstrap_send(c->bs, r, TAG_IPC_CLOSED, &ack, sizeof ack) != koloSuccess)
      KOLO_INFO("rank %d: could not tell rank %d that its pipe memory is closed (it is gone?)", c->rank, r);
  each_end(c, mark_exporting, exported);
  /* one deadline for every peer whose connection failed: teardown stays
   * within one timeout however many there are */
  int64_t deadline = kolo_now_ms() + (c->timeout_ms > 0 ? c->timeout_ms : 0);
  for (int r = 0; r < c->nranks; r++) {
    if (!exported[r]) continue;
    peer_verdict v = {r, peer_closed(c, r, deadline)};
    each_end(c, settle_exported, &v);
  }
  free(opened);
  free(exported);
}
