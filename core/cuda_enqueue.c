/* cuda_enqueue.c - calls of CUDA communicators: checks, point-to-point
 * pipes made on first use, then the planner's launches on the caller's
 * stream.  Returns without synchronizing: the result is there when the
 * stream gets past the launches; failures seen later by the kernels show
 * in koloCommGetAsyncError (and make later calls fail at once).
 *
 * Streams.  Ranks that wait for each other must not share a stream: their
 * kernels would run one after the other and the first would wait for the
 * second forever.  So two ranks of one job may not use one stream in a
 * group, and with several ranks of this process on one device the NULL
 * (legacy default) stream is refused: it is one stream per device, and it
 * also waits for every blocking stream.  Calls of one comm on different
 * streams are ordered by the comm (the new stream waits for an event
 * recorded after the last call), because consecutive kernels of a comm
 * continue each other's step counters. */
#include <stdlib.h>
#include <string.h>

#include "core/cuda_comm.h"
#include "core/p2p_pipes.h"
#include "common/log.h"
#include "transport/proxy.h"

#include <cuda_runtime.h>

static int is_legacy(koloStream_t s) {
  return s == NULL || (cudaStream_t)s == cudaStreamLegacy;
}

static koloResult_t check_comm(const kolo_op *ops, int nops, int i) {
  struct koloComm *c = ops[i].comm;
  koloResult_t res = kolo_cuda_comm_status(c);
  if (res != koloSuccess) return kolo_comm_failed_earlier(c, res, kolo_coll_name(ops[i].coll));
  koloStream_t s = ops[i].stream;
  for (int j = i + 1; j < nops; j++)
    if (ops[j].comm == c && ops[j].stream != s)
      return kolo_error(&c->err, koloInvalidUsage,
                        "rank %d: the calls of one communicator in a group must use one stream "
                        "(%s and %s were given different streams)",
                        c->rank, kolo_coll_name(ops[i].coll), kolo_coll_name(ops[j].coll));
  if (is_legacy(s) && c->cuda->ranks_on_dev > 1)
    return kolo_error(&c->err, koloInvalidUsage,
                      "rank %d: %s on the NULL (legacy default) stream, but %d ranks of this process "
                      "share CUDA device %d: their kernels wait for each other and would run one "
                      "after the other on that one stream, a deadlock; give each rank its own "
                      "stream (cudaStreamCreateWithFlags(..., cudaStreamNonBlocking))",
                      c->rank, kolo_coll_name(ops[i].coll), c->cuda->ranks_on_dev, c->cuda->dev);
  for (int j = 0; j < i; j++) {
    const struct koloComm *d = ops[j].comm;
    if (d != c && d->job == c->job && ops[j].stream == s && d->cuda->dev == c->cuda->dev)
      return kolo_error(&c->err, koloInvalidUsage,
                        "ranks %d and %d of one communicator were given the same stream on CUDA "
                        "device %d: their kernels would wait for each other in one queue, a "
                        "deadlock; give each rank its own stream",
                        d->rank, c->rank, c->cuda->dev);
  }
  return koloSuccess;
}

static koloResult_t set_device(struct koloComm *c) {
  cudaError_t e = cudaSetDevice(c->cuda->dev);
  if (e == cudaSuccess) return koloSuccess;
  return kolo_error(&c->err, koloUnhandledCudaError, "rank %d: cudaSetDevice(%d) failed: %s", c->rank,
                    c->cuda->dev, cudaGetErrorString(e));
}

static koloResult_t capturing(struct koloComm *c, koloStream_t s, int *yes) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing((cudaStream_t)s, &st);
  *yes = st != cudaStreamCaptureStatusNone;
  if (e == cudaSuccess) return koloSuccess;
  return kolo_error(&c->err, koloUnhandledCudaError, "rank %d: cudaStreamIsCapturing failed: %s", c->rank,
                    cudaGetErrorString(e));
}

/* A missing pipe (kolo_pipe_fn): the first one found, in *(int[2])arg. */
static koloResult_t find_missing(struct koloComm *c, int peer, int is_send, void *arg) {
  int *missing = arg;
  const unsigned char *ready = is_send ? c->p2p_send_ready : c->p2p_recv_ready;
  for (int ch = 0; ch < c->nchannels && missing[0] < 0; ch++)
    if (ready[(size_t)peer * (size_t)c->nchannels + (size_t)ch] != 1) {
      missing[0] = peer;
      missing[1] = is_send;
    }
  return koloSuccess;
}

/* An op of c with a point-to-point pipe (of a send/recv or of a multi-peer
 * collective's peers) that does not exist yet, or NULL; missing: the peer
 * and direction. */
static const kolo_op *needs_pipe(const kolo_op *ops, int nops, struct koloComm *c, int missing[2]) {
  missing[0] = -1;
  for (int i = 0; i < nops; i++) {
    if (ops[i].comm != c) continue;
    kolo_op_pipes(c, &ops[i], find_missing, missing); /* programs are built at init: no failure */
    if (missing[0] >= 0) return &ops[i];
  }
  return NULL;
}

/* Makes the missing point-to-point pipes of every comm of the call. */
static koloResult_t make_pipes(kolo_op *ops, int nops) {
  int any = 0;
  for (int i = 0; i < nops; i++) {
    struct koloComm *c = ops[i].comm;
    if (!kolo_op_first_of_comm(ops, i)) continue; /* ops of one comm share checks */
    int missing[2];
    const kolo_op *op = needs_pipe(ops, nops, c, missing);
    if (op == NULL) continue;
    any = 1;
    int cap = 0;
    koloResult_t res = capturing(c, ops[i].stream, &cap);
    if (res != koloSuccess) return res;
    if (cap)
      return kolo_error(&c->err, koloInvalidUsage,
                        "rank %d: the first %s with rank %d (%s) is being captured into a CUDA graph, but "
                        "it makes the pipe, which allocates device memory: do one call with each peer "
                        "before capturing (a warm-up)",
                        c->rank, missing[1] ? "send to" : "receive from", missing[0], kolo_coll_name(op->coll));
  }
  if (!any) return koloSuccess;
  koloResult_t res = kolo_p2p_connect(ops, nops);
  for (int i = 0; i < nops; i++) { /* every end made, even when another failed */
    koloResult_t r = kolo_op_pipes(ops[i].comm, &ops[i], kolo_cuda_comm_p2p_ready, NULL);
    if (res == koloSuccess) res = r;
  }
  return res;
}

/* A comm that could not launch its part leaves its peers waiting: it
 * fails for good and tells them. */
static koloResult_t fail_comm(struct koloComm *c, koloResult_t res) {
  int expected = koloSuccess;
  if (atomic_compare_exchange_strong(&c->failed, &expected, (int)res)) kolo_cuda_comm_stop_all(c, KOLO_STOP_ERROR);
  return res;
}

/* post_net_slices for a multi-peer task: the slices of each of its ends
 * that is a net pipe's.  koloSystemError when out of memory. */
static koloResult_t post_peer_slices(const kolo_op *op, const kolo_cuda_plan_comm *pc, kolo_cuda_comm *cc,
                                     const kolo_cuda_plan_item *it, const kolo_dev_task *t, int protocol) {
  uint64_t *counts = malloc(2 * (size_t)t->npeers * sizeof *counts);
  if (counts == NULL) return koloSystemError;
  kolo_cuda_plan_peer_slices(op, pc, it, t, protocol, counts);
  for (int e = 0; e < 2 * t->npeers; e++) {
    const kolo_dev_conn *c = kolo_cuda_plan_peer_end(op, pc, it->channel, e);
    if (c != NULL && c->net) kolo_proxy_post(cc->net_pipes[c->net - 1], (uint32_t)counts[e]);
  }
  free(counts);
  return koloSuccess;
}

/* After a launch: tells the proxy how many slices the kernel will move
 * through each net pipe end of the batch (tasks [0, ntasks) came from
 * items[first ...], in order).  koloSystemError when out of memory (the
 * kernel then waits for slices the proxy never moves: the caller fails the
 * comm). */
static koloResult_t post_net_slices(const kolo_op *mine, const kolo_cuda_plan_comm *pc, kolo_cuda_comm *cc,
                                    const kolo_cuda_plan_item *items, int first, const kolo_dev_batch *b) {
  for (int j = 0; j < b->ntasks; j++) {
    const kolo_dev_task *t = &b->tasks[j];
    if (t->npeers > 0) {
      koloResult_t res = post_peer_slices(&mine[items[first + j].op], pc, cc, &items[first + j], t, b->protocol);
      if (res != koloSuccess) return res;
      continue;
    }
    int snet = t->has_send ? t->send.net : 0, rnet = t->has_recv ? t->recv.net : 0;
    if (snet == 0 && rnet == 0) continue;
    const kolo_cuda_plan_item *it = &items[first + j];
    uint64_t sends = 0, recvs = 0;
    kolo_cuda_plan_slices(&mine[it->op], pc, it, t, b->protocol, &sends, &recvs);
    /* Counters are 32-bit and wrap: so do the posts. */
    if (snet) kolo_proxy_post(cc->net_pipes[snet - 1], (uint32_t)sends);
    if (rnet) kolo_proxy_post(cc->net_pipes[rnet - 1], (uint32_t)recvs);
  }
  return koloSuccess;
}

/* Plans and launches the ops of one comm (all of them on `stream`); *record:
 * whether its order event is to be recorded (record_order). */
static koloResult_t launch_comm(struct koloComm *c, const kolo_op *mine, int n, koloStream_t stream, int *record) {
  *record = 0;
  kolo_cuda_comm *cc = c->cuda;
  kolo_cuda_plan_comm *pc = &cc->plan;
  int cap = 0;
  koloResult_t res = set_device(c);
  if (res == koloSuccess) res = capturing(c, stream, &cap);
  if (res != koloSuccess) return res;
  int nitems = kolo_cuda_plan_count(mine, n, pc);
  if (nitems == 0) return koloSuccess;
  if (cap && cc->may_use_net)
    /* The proxy learns of each kernel's slices when it is launched; a
     * graph replays kernels without a launch to learn from. */
    return kolo_error(&c->err, koloInvalidUsage,
                      "rank %d: %s is being captured into a CUDA graph, but this communicator talks to "
                      "other hosts through the network proxy, which graph replays would not drive: "
                      "capture is supported within one host only",
                      c->rank, kolo_coll_name(mine[0].coll));
  /* Single calls (the latency path) plan on the stack. */
  kolo_cuda_plan_item local[KOLO_MAX_CHANNELS];
  kolo_cuda_plan_item *items = nitems <= KOLO_MAX_CHANNELS ? local : malloc((size_t)nitems * sizeof *items);
  if (items == NULL) return kolo_error(&c->err, koloSystemError, "out of memory planning a call");
  kolo_cuda_plan_items(mine, n, pc, items);
  cudaStream_t st = (cudaStream_t)stream;
  cudaError_t e = cudaSuccess;
  /* Order after the comm's last call when it went to another stream (not
   * while capturing: a graph orders its own nodes). */
  if (!cap && cc->have_last && cc->last_stream != (void *)stream)
    e = cudaStreamWaitEvent(st, (cudaEvent_t)cc->order_event, 0);
  if (e != cudaSuccess)
    res = kolo_error(&c->err, koloUnhandledCudaError, "rank %d: cudaStreamWaitEvent failed: %s", c->rank,
                     cudaGetErrorString(e));
  kolo_dev_batch batch;
  int next = 0, launches = 0, r;
  for (int first = 0; res == koloSuccess && (r = kolo_cuda_plan_next(mine, pc, items, nitems, &next, &batch)) != 0;
       first = next) {
    if (r < 0) {
      const kolo_op *op = &mine[items[next].op];
      res = kolo_error(&c->err, koloInternalError,
                       "rank %d: %s (root/peer/algorithm %d) on channel %d has no program, pipe or scratch on the "
                       "device (a kolo bug)",
                       c->rank, kolo_coll_name(op->coll), op->arg, items[next].channel);
      break;
    }
    if (++cc->launches == 0) cc->launches = 1; /* 0: no launch, in the stall slot */
    batch.launch = cc->launches;
    int err = kolo_cuda_exec_launch(&batch, st);
    if (err != cudaSuccess) {
      res = kolo_error(&c->err, koloUnhandledCudaError,
                       "rank %d: launching the executor kernel (%d task(s), %s first) on CUDA device %d "
                       "failed: %s",
                       c->rank, batch.ntasks, kolo_coll_name(mine[items[next - batch.ntasks].op].coll), cc->dev,
                       cudaGetErrorString((cudaError_t)err));
      break;
    }
    if (cc->may_use_net && post_net_slices(mine, pc, cc, items, first, &batch) != koloSuccess) {
      res = kolo_error(&c->err, koloSystemError, "rank %d: out of memory telling the network proxy of a launch",
                       c->rank);
      break;
    }
    launches++;
  }
  if (items != local) free(items);
  if (launches > 0) kolo_cuda_stall_watch(c); /* KOLO_STALL_WARN_S: someone must read the kernels' notes */
  if (res == koloSuccess && launches > 0 && !cap) *record = 1;
  return res == koloSuccess ? res : fail_comm(c, res);
}

/* After every comm of the call launched: records each comm's order event.
 * Not between the launches of a group: in a hardware queue that streams
 * share (CUDA_DEVICE_MAX_CONNECTIONS), an event record waits for the
 * kernel before it, and would hold back a peer rank's kernel queued after
 * it, which that kernel waits for. */
static koloResult_t record_order(struct koloComm *c, koloStream_t stream) {
  kolo_cuda_comm *cc = c->cuda;
  /* the NULL stream is the current device's: make it the comm's */
  koloResult_t res = set_device(c);
  if (res != koloSuccess) return fail_comm(c, res);
  cudaError_t e = cudaEventRecord((cudaEvent_t)cc->order_event, (cudaStream_t)stream);
  if (e != cudaSuccess)
    return fail_comm(c, kolo_error(&c->err, koloUnhandledCudaError, "rank %d: cudaEventRecord failed: %s", c->rank,
                                   cudaGetErrorString(e)));
  cc->last_stream = (void *)stream;
  cc->have_last = 1;
  return koloSuccess;
}

/* Numbers the collectives of ops in each comm's order of collective calls
 * (kolo_op.seq, the signature's seq: as the host enqueue counts them,
 * count-0 calls included; never 0, which means send / recv). */
static void number_calls(kolo_op *ops, int nops) {
  for (int i = 0; i < nops; i++) {
    struct koloComm *c = ops[i].comm;
    if (kolo_coll_is_p2p(ops[i].coll)) continue;
    if (++c->ncollectives == 0) c->ncollectives = 1;
    ops[i].seq = c->ncollectives;
  }
}

static koloResult_t run_ops_on_devices(kolo_op *ops, int nops) {
  if (nops <= 0) return koloSuccess;
  for (int i = 0; i < nops; i++) {
    if (!kolo_op_first_of_comm(ops, i)) continue;
    koloResult_t res = check_comm(ops, nops, i);
    if (res == koloSuccess) res = set_device(ops[i].comm);
    if (res != koloSuccess) return res;
  }
  number_calls(ops, nops);
  koloResult_t res = make_pipes(ops, nops);
  if (res != koloSuccess) return res;
  int record = 0;
  if (nops == 1) {
    res = launch_comm(ops[0].comm, ops, 1, ops[0].stream, &record);
    return res == koloSuccess && record ? record_order(ops[0].comm, ops[0].stream) : res;
  }
  kolo_op *mine = malloc((size_t)nops * sizeof *mine);
  char *records = calloc((size_t)nops, 1);
  if (mine == NULL || records == NULL) {
    free(mine);
    free(records);
    return kolo_error(&ops[0].comm->err, koloSystemError, "out of memory enqueueing a group");
  }
  for (int i = 0; i < nops && res == koloSuccess; i++) {
    if (!kolo_op_first_of_comm(ops, i)) continue;
    int n = 0;
    for (int j = i; j < nops; j++)
      if (ops[j].comm == ops[i].comm) mine[n++] = ops[j];
    res = launch_comm(ops[i].comm, mine, n, ops[i].stream, &record);
    records[i] = (char)record;
  }
  for (int i = 0; i < nops; i++) { /* every comm that launched, even when a later one failed */
    koloResult_t r = records[i] ? record_order(ops[i].comm, ops[i].stream) : koloSuccess;
    if (res == koloSuccess) res = r;
  }
  free(mine);
  free(records);
  return res;
}

/* Each comm's work goes to its device; the caller's current device is
 * restored after (as NCCL does), so that its own CUDA calls after a group
 * of several devices' comms still go where it pointed them. */
koloResult_t kolo_cuda_run_ops(kolo_op *ops, int nops) {
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  koloResult_t res = run_ops_on_devices(ops, nops);
  if (saved >= 0) cudaSetDevice(saved);
  return res;
}
