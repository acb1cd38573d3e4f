/* cuda_comm.c - the device side of koloMemCuda communicators (see
 * cuda_comm.h): device choice, mapped words, programs, counters, device
 * connector ends, failure status and teardown. */
#include "core/cuda_comm.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common/config.h"
#include "common/log.h"
#include "core/comm_state.h"
#include "core/plan.h"
#include "core/comm_gather.h"
#include "core/comm_wire.h"
#include "core/cuda_status.h"
#include "core/cuda_wait.h"
#include "core/proto_select.h"
#include "ring/algo_select.h"
#include "kernels/stall_text.h"
#include "transport/proxy.h"

/* The kernel finds a net pipe's `filled` words from its tail word. */
_Static_assert(offsetof(kolo_conn_ctrl, filled) - offsetof(kolo_conn_ctrl, tail) == KOLO_DEV_FILLED_FROM_TAIL,
               "kernels/cuda_exec.h's KOLO_DEV_FILLED_FROM_TAIL must match connector.h");
_Static_assert(KOLO_DEV_FILLED_WORDS == KOLO_CONN_MAX_SLOTS, "one filled word per slot");

/* What every rank tells the others about its device: comm_wire.h's
 * kolo_device_choice, encoded. */
#define TAG_CUDA_DEV 0x30u

int kolo_cuda_current_device(void) {
  int dev = -1;
  return cudaGetDevice(&dev) == cudaSuccess ? dev : -1;
}

static koloResult_t cuda_fail(struct koloComm *c, cudaError_t e, const char *what) {
  return kolo_error(&c->err, koloUnhandledCudaError, "rank %d (CUDA device %d): %s failed: %s", c->rank,
                    c->cuda ? c->cuda->dev : c->cuda_dev, what, cudaGetErrorString(e));
}

/* Selects this rank's device; returns the CUDA error of doing so. */
static cudaError_t select_device(struct koloComm *c, kolo_device_choice *me) {
  int count = 0, dev = c->cuda_dev;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && dev < 0) e = cudaGetDevice(&dev);
  if (e == cudaSuccess && (dev < 0 || dev >= count)) e = cudaErrorInvalidDevice;
  if (e == cudaSuccess) e = cudaSetDevice(dev);
  /* cudaSetDevice does not always create the context: make sure now, so
   * that a broken device fails here, named, and not in the first call. */
  if (e == cudaSuccess) e = cudaFree(NULL);
  *me = (kolo_device_choice){(int32_t)e, dev, count};
  return e;
}

/* What a failed device selection means on a machine without CUDA: kolo's
 * CUDA runtime is linked in (cudart_static) and loads the driver,
 * libcuda.so.1, at the first CUDA call; without one it says "insufficient
 * driver".  Host communicators never get here. */
static const char *device_hint(cudaError_t e) {
  if (e == cudaErrorInsufficientDriver)
    return "; koloMemCuda needs an NVIDIA driver (libcuda.so.1) no older than kolo's CUDA runtime: none such was found";
  if (e == cudaErrorNoDevice) return "; koloMemCuda needs a CUDA GPU, and the driver reports none";
  return "";
}

static koloResult_t check_devices(struct koloComm *c, const kolo_device_choice *all) {
  for (int r = 0; r < c->nranks; r++) {
    const kolo_device_choice *d = &all[r];
    if (d->err == cudaSuccess) continue;
    char devname[32];
    if (d->dev >= 0) snprintf(devname, sizeof devname, "CUDA device %d", d->dev);
    else snprintf(devname, sizeof devname, "a current CUDA device");
    cudaError_t e = (cudaError_t)d->err;
    if (r == c->rank)
      return kolo_error(&c->err, koloUnhandledCudaError,
                        "rank %d cannot use %s: %s (this process sees %d CUDA device(s))%s", r, devname,
                        cudaGetErrorString(e), d->count, device_hint(e));
    return kolo_error(&c->err, koloRemoteError, "rank %d cannot use %s: %s (its process sees %d CUDA device(s))%s",
                      r, devname, cudaGetErrorString(e), d->count, device_hint(e));
  }
  return koloSuccess;
}

/* Ring ends, point-to-point ends, then the hierarchical all-reduce's ends
 * (made whether or not the comm turns out to have it: init makes the
 * counters before the topology is known). */
static size_t nends(const struct koloComm *c) {
  return 2 * (size_t)c->nchannels + 2 * (size_t)c->nranks * (size_t)c->nchannels + 4 * (size_t)c->nchannels;
}

/* The step counter (and owner word) of end number i. */
static uint32_t *end_words(struct koloComm *c, size_t i) { return c->cuda->counters + KOLO_DEV_END_WORDS * i; }

/* The step counter of an end: ring ends first, then point-to-point ones,
 * then the hierarchical ones (pipe 0 intra, 1 inter). */
static uint32_t *ring_counter(struct koloComm *c, int ch, int is_send) {
  return end_words(c, (size_t)(is_send ? 0 : c->nchannels) + (size_t)ch);
}
static uint32_t *p2p_counter(struct koloComm *c, size_t k, int is_send) {
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  return end_words(c, 2 * (size_t)c->nchannels + (is_send ? 0 : np) + k);
}
static uint32_t *hier_counter(struct koloComm *c, int pipe, int ch, int is_send) {
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  size_t end = (size_t)(2 * pipe + (is_send ? 0 : 1));
  return end_words(c, 2 * (size_t)c->nchannels + 2 * np + end * (size_t)c->nchannels + (size_t)ch);
}

static koloResult_t make_resources(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  cudaStream_t st;
  cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaStreamCreateWithFlags");
  cc->setup_stream = st;
  cudaEvent_t ev;
  e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaEventCreateWithFlags");
  cc->order_event = ev;
  void *words = NULL;
  e = cudaHostAlloc(&words, KOLO_CW_BYTES, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaHostAlloc of the abort and status words");
  cc->words = words;
  memset(words, 0, KOLO_CW_BYTES);
  void *dw = NULL;
  e = cudaHostGetDevicePointer(&dw, words, 0);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaHostGetDevicePointer of the abort and status words");
  cc->dev_words = dw;
  size_t cbytes = nends(c) * KOLO_DEV_END_WORDS * sizeof(uint32_t);
  void *counters = NULL;
  e = cudaMalloc(&counters, cbytes);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaMalloc of the step counters");
  cc->counters = counters;
  e = cudaMemsetAsync(counters, 0, cbytes, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  if (e != cudaSuccess) return cuda_fail(c, e, "clearing the step counters");
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  cc->p2p_send = calloc(np, sizeof *cc->p2p_send);
  cc->p2p_recv = calloc(np, sizeof *cc->p2p_recv);
  cc->net_pipes = calloc(nends(c), sizeof *cc->net_pipes);
  if (cc->p2p_send == NULL || cc->p2p_recv == NULL || cc->net_pipes == NULL)
    return kolo_error(&c->err, koloSystemError, "out of memory at init");
  cc->conn_mem = (kolo_conn_mem){koloMemCuda, cc->dev, c->ll_slot_bytes, cc->setup_stream};
  return koloSuccess;
}

/* Ranks sharing a GPU each bring a stream and kolo a setup stream per
 * communicator.  With more streams than CUDA_DEVICE_MAX_CONNECTIONS
 * hardware queues (8 unless set), streams share queues, and a queue
 * starts its work in order: work queued behind a kernel that waits for a
 * peer (that stream's next call, an event record) holds back the peer's
 * kernel or pipe setup queued after it in the same queue, until the
 * timeout.  One rank per GPU (the usual case) is not concerned. */
static void check_queues(struct koloComm *c) {
  if (c->cuda->ranks_on_dev < 2) return;
  const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  long queues = v && *v ? strtol(v, NULL, 10) : 8;
  int streams = 2 * c->cuda->ranks_on_dev + 1; /* theirs, kolo's setup streams, the legacy one */
  if (streams > queues)
    KOLO_WARN("rank %d: %d ranks of this process share CUDA device %d: about %d streams on %ld hardware queues "
              "(CUDA_DEVICE_MAX_CONNECTIONS); shared queues start work in order, so one rank's work queued "
              "behind a kernel waiting for a peer can hold back that peer until KOLO_TIMEOUT_MS: set "
              "CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts",
              c->rank, c->cuda->ranks_on_dev, c->cuda->dev, streams, queues);
}

/* Every rank's report, decoded into all (nranks). */
static koloResult_t gather_devices(struct koloComm *c, const kolo_device_choice *mine, kolo_device_choice *all) {
  uint8_t enc[KOLO_DEVICE_CHOICE_BYTES], *raw = NULL;
  kolo_encode_device_choice(mine, enc);
  koloResult_t res = kolo_comm_gather(c, TAG_CUDA_DEV, enc, sizeof enc, &raw);
  char why[KOLO_ERR_LEN - 32];
  for (int r = 0; r < c->nranks && res == koloSuccess; r++)
    if (kolo_decode_device_choice(raw + (size_t)r * sizeof enc, sizeof enc, r, &all[r], why, sizeof why) !=
        KOLO_COMM_WIRE_OK)
      res = kolo_error(&c->err, koloRemoteError, "rank %d: init: %s", c->rank, why);
  free(raw);
  return res;
}

koloResult_t kolo_cuda_comm_init(struct koloComm *c) {
  c->cuda = calloc(1, sizeof *c->cuda);
  kolo_device_choice *all = calloc((size_t)c->nranks, sizeof *all);
  if (c->cuda == NULL || all == NULL) {
    free(all);
    return kolo_error(&c->err, koloSystemError, "out of memory at init");
  }
  c->cuda->dev = -1;
  kolo_device_choice mine;
  select_device(c, &mine);
  /* Every rank learns about every device, so that one missing device fails
   * all ranks at once, naming it, instead of leaving them to time out. */
  koloResult_t res = gather_devices(c, &mine, all);
  if (res == koloSuccess) res = check_devices(c, all);
  if (res == koloSuccess) {
    c->cuda->dev = all[c->rank].dev;
    const kolo_peer_info *me = kolo_bootstrap_peer(c->bs, c->rank);
    for (int r = 0; r < c->nranks; r++)
      c->cuda->ranks_on_dev += kolo_same_process(kolo_bootstrap_peer(c->bs, r), me) && all[r].dev == c->cuda->dev;
  }
  free(all);
  if (res == koloSuccess) res = kolo_cuda_comm_residency(c);
  if (res == koloSuccess) res = make_resources(c);
  if (res == koloSuccess) {
    check_queues(c);
    char protos[160];
    KOLO_INFO("rank %d: CUDA device %d (%d rank(s) of this process on it), LL up to %zu bytes in "
              "slots of %u bytes; protocols allowed: %s",
              c->rank, c->cuda->dev, c->cuda->ranks_on_dev, c->ll_threshold, c->ll_slot_bytes,
              kolo_proto_off_text(c->proto_off, protos, sizeof protos));
  }
  return res;
}

/* ---- programs ------------------------------------------------------------ */

static int slots_of(int coll, int nranks) {
  return kolo_program_slots(coll, nranks); /* rooted and p2p: one per rank; all-reduce, all-gather: per algorithm */
}

/* Calls f(c, program index, program, arg) for every program of coll: each
 * root/peer slot on each variant, ring or channel (comm_state.h; core/op.h's
 * kolo_program_index). */
static koloResult_t each_program(struct koloComm *c, int k,
                                 void (*f)(struct koloComm *, int, int, const kolo_program *, void *),
                                 void *arg) {
  for (int s = 0; s < slots_of(k, c->nranks); s++)
    for (int v = 0; v < c->nvariants; v++) {
      const kolo_program *p;
      koloResult_t res = kolo_comm_program(c, k, s, v, &p);
      if (res != koloSuccess) return res;
      f(c, k, kolo_program_index(k, s, v, c->nvariants), p, arg);
    }
  return koloSuccess;
}

static void count_steps(struct koloComm *c, int k, int i, const kolo_program *p, void *arg) {
  (void)c, (void)k, (void)i;
  *(size_t *)arg += (size_t)p->nsteps;
}

typedef struct {
  kolo_step *host; /* staging copy, or NULL once uploaded */
  size_t at;
} step_cursor;

/* One program's place in the device copy.  First pass: stage its steps;
 * second pass (host NULL): point *dev at the device copy. */
static void place_program(struct koloComm *c, step_cursor *cur, const kolo_program *p, const kolo_step **dev) {
  if (cur->host) memcpy(cur->host + cur->at, p->steps, (size_t)p->nsteps * sizeof *cur->host);
  else *dev = c->cuda->dev_steps_mem + cur->at;
  cur->at += (size_t)p->nsteps;
}

static void place_steps(struct koloComm *c, int k, int i, const kolo_program *p, void *arg) {
  place_program(c, arg, p, &c->cuda->dev_steps[k][i]);
}

/* The hierarchical all-reduce's phase programs, after the others. */
static void place_hier_steps(struct koloComm *c, step_cursor *cur) {
  for (int k = 0; k < KOLO_HIER_PHASES && c->hier_ready; k++)
    place_program(c, cur, &c->hier_prog[k], &c->cuda->hier_steps[k]);
}

/* Sets *(int *)arg when p names scratch and may run: a schedule file's, an
 * all-reduce or reduce algorithm the comm may choose, or any other. */
static void find_scratch(struct koloComm *c, int k, int i, const kolo_program *p, void *arg) {
  const int slot = i / c->nvariants; /* kolo_program_index: slot * nvariants + variant */
  const int algo = kolo_arg_algo(k, slot, c->nranks);
  int may = 1;
  if (k == KOLO_COLL_ALL_REDUCE) may = kolo_algo_may_run(&c->algo, algo) && kolo_algo_possible(&c->algo, algo);
  if (k == KOLO_COLL_REDUCE) may = kolo_reduce_may_run(&c->algo, algo);
  if ((may || c->sched != NULL) && kolo_program_uses_scratch(p)) *(int *)arg = 1;
}

/* The launch's scratch, where a program that may run needs it: one part
 * per block, each as large as a task's can be (SIMPLE chunks: LL's are
 * smaller). */
static koloResult_t alloc_scratch(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  int needed = 0;
  for (int k = 0; k < KOLO_COLL_NUM; k++) each_program(c, k, find_scratch, &needed); /* built: no failure */
  if (!needed) return koloSuccess;
  cc->scratch_task_bytes = (size_t)KOLO_SCRATCH_CHUNKS * c->slot_bytes * (c->nslots / 2);
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, KOLO_DEV_MAX_TASKS * cc->scratch_task_bytes);
  if (e != cudaSuccess) return cuda_fail(c, e, "cudaMalloc of the scratch of the one-shot all-reduce, reduce tree or schedule");
  cc->scratch = p;
  KOLO_INFO("rank %d: %zu bytes of scratch on CUDA device %d", c->rank,
            KOLO_DEV_MAX_TASKS * cc->scratch_task_bytes, cc->dev);
  return koloSuccess;
}

koloResult_t kolo_cuda_comm_programs(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  size_t total = 0;
  for (int k = 0; k < KOLO_COLL_NUM; k++) {
    cc->dev_steps[k] = calloc((size_t)slots_of(k, c->nranks) * (size_t)c->nvariants, sizeof *cc->dev_steps[k]);
    if (cc->dev_steps[k] == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
    koloResult_t res = each_program(c, k, count_steps, &total);
    if (res != koloSuccess) return res;
  }
  for (int k = 0; k < KOLO_HIER_PHASES && c->hier_ready; k++) total += (size_t)c->hier_prog[k].nsteps;
  step_cursor cur = {malloc(total * sizeof *cur.host), 0};
  if (cur.host == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  for (int k = 0; k < KOLO_COLL_NUM; k++) each_program(c, k, place_steps, &cur); /* built: no failure */
  place_hier_steps(c, &cur);
  void *dmem = NULL;
  cudaError_t e = cudaMalloc(&dmem, total * sizeof *cur.host);
  if (e == cudaSuccess) {
    cc->dev_steps_mem = dmem;
    /* On the setup stream: a plain cudaMemcpy goes through the legacy
     * stream, which waits for kernels of other communicators that may be
     * spinning on this device. */
    e = cudaMemcpyAsync(dmem, cur.host, total * sizeof *cur.host, cudaMemcpyHostToDevice,
                        (cudaStream_t)cc->setup_stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)cc->setup_stream);
  }
  free(cur.host);
  if (e != cudaSuccess) return cuda_fail(c, e, "uploading the step programs");
  cur = (step_cursor){NULL, 0};
  for (int k = 0; k < KOLO_COLL_NUM; k++) each_program(c, k, place_steps, &cur);
  place_hier_steps(c, &cur);
  KOLO_INFO("rank %d: %zu program steps (%zu bytes) on CUDA device %d", c->rank, total,
            total * sizeof(kolo_step), cc->dev);
  koloResult_t res = alloc_scratch(c);
  return res != koloSuccess ? res : kolo_cuda_peers_init(c);
}

/* ---- device connector ends -------------------------------------------- */

static kolo_dev_conn dev_conn_of(kolo_cuda_comm *cc, const kolo_connector *k, uint32_t *step) {
  kolo_dev_conn d;
  memset(&d, 0, sizeof d);
  kolo_net_pipe *np = kolo_net_pipe_of(k);
  if (np != NULL) { /* the launcher posts to its proxy; the kernel writes filled[] */
    ptrdiff_t i = (step - cc->counters) / KOLO_DEV_END_WORDS;
    cc->net_pipes[i] = np;
    d.net = (int32_t)i + 1;
    d.flags = KOLO_DEV_CONN_FILLED;
  }
  d.slots = k->slots;
  d.ll_slots = k->dev.ll_slots;
  d.ll_slot_bytes = k->dev.ll_slot_bytes;
  d.tail = k->dev.tail;
  d.head = k->dev.head;
  d.stop = k->dev.stop;
  d.step = step;
  d.nslots = k->nslots;
  d.slot_bytes = (uint32_t)k->slot_bytes;
  d.peer = k->peer;
  return d;
}

/* Would some pair of ranks of the comm get a net pipe?  A ring connects
 * every rank, so some pair differs exactly when some rank differs from
 * rank 0 (kolo_net_between is one of "same process" and "same host",
 * both equivalences). */
static int may_use_net(struct koloComm *c) {
  const kolo_peer_info *first = kolo_bootstrap_peer(c->bs, 0);
  for (int r = 1; r < c->nranks; r++)
    if (kolo_net_between(first, kolo_bootstrap_peer(c->bs, r))) return 1;
  return 0;
}

/* 1 when KOLO_PROTO leaves some collective LL only (a comm over the
 * network cannot honour it, and says so). */
static int forces_ll(uint32_t proto_off) {
  for (int k = 0; k < KOLO_COLL_NUM; k++)
    if (kolo_proto_off_of(proto_off, k) == KOLO_PROTO_OFF_SIMPLE) return 1;
  return 0;
}

/* KOLO_STALL_WARN_S for the kernels (cuda_exec.h's stall_ms), read once
 * per comm: ms in 32 bits (49 days at most). */
static uint32_t stall_ms(void) {
  const int64_t ms = kolo_exec_stall_warn_ns() / 1000000;
  return ms > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

void kolo_cuda_comm_ring_ready(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  for (int ch = 0; ch < c->nchannels && c->nranks > 1; ch++) {
    cc->ring_send[ch] = dev_conn_of(cc, &c->ring_send[ch], ring_counter(c, ch, 1));
    cc->ring_recv[ch] = dev_conn_of(cc, &c->ring_recv[ch], ring_counter(c, ch, 0));
    for (int k = 0; k < 2 && c->hier_ready; k++) {
      cc->hier_send[k][ch] = dev_conn_of(cc, &c->hier_send[k][ch], hier_counter(c, k, ch, 1));
      cc->hier_recv[k][ch] = dev_conn_of(cc, &c->hier_recv[k][ch], hier_counter(c, k, ch, 0));
    }
  }
  kolo_cuda_plan_comm *pc = &cc->plan;
  pc->rank = c->rank;
  pc->nranks = c->nranks;
  pc->nchannels = c->nchannels;
  pc->nslots = c->nslots;
  pc->slot_bytes = c->slot_bytes;
  pc->p2p_slot_bytes = c->p2p_slot_bytes;
  pc->min_channel_bytes = c->min_channel_bytes;
  pc->tuned = c->algo.tuned;
  pc->max_tasks = cc->max_blocks;
  /* Net pipes have no LL region.  Which pipes are net differs by rank, but
   * the protocol of a call must be the same on both ends of every pipe:
   * the rule looks at every rank, so every rank reaches the same answer. */
  cc->may_use_net = may_use_net(c);
  for (int k = 0; k < KOLO_COLL_NUM; k++)
    pc->ll_threshold[k] = cc->may_use_net ? 0 : kolo_proto_ll_threshold(c->proto_off, k, c->ll_threshold);
  if (cc->may_use_net && c->ll_threshold > 0 && c->rank == 0)
    KOLO_INFO("CUDA communicator of %d ranks on %d host(s) talks over the network: SIMPLE protocol only "
              "(no LL, KOLO_LL_THRESHOLD ignored)", c->nranks, c->nhosts);
  if (cc->may_use_net && forces_ll(c->proto_off) && c->rank == 0)
    KOLO_WARN("KOLO_PROTO / NCCL_PROTO \"%s\" forces LL, but this CUDA communicator of %d ranks on %d host(s) talks "
              "over the network, whose pipes have no LL: it uses SIMPLE", kolo_param_str("KOLO_PROTO"), c->nranks,
              c->nhosts);
  pc->timeout_ns = (uint64_t)c->timeout_ms * 1000000ull;
  pc->stall_ms = stall_ms();
  pc->abort = cc->dev_words + KOLO_CW_ABORT;
  pc->status = cc->dev_words + KOLO_CW_STATUS;
  pc->nrings = c->nvariants; /* the planner indexes programs by it */
  for (int k = 0; k < KOLO_COLL_NUM; k++) {
    pc->programs[k] = c->programs[k];
    pc->dev_steps[k] = cc->dev_steps[k];
    pc->end_tables[k] = cc->end_tables[k];
  }
  pc->ring_send = cc->ring_send;
  pc->ring_recv = cc->ring_recv;
  pc->p2p_send = cc->p2p_send;
  pc->p2p_recv = cc->p2p_recv;
  pc->hier_programs = c->hier_ready ? c->hier_prog : NULL;
  pc->scratch = cc->scratch;
  pc->scratch_task_bytes = cc->scratch_task_bytes;
  for (int k = 0; k < KOLO_HIER_PHASES; k++) pc->hier_steps[k] = cc->hier_steps[k];
  for (int k = 0; k < 2; k++) {
    pc->hier_send[k] = cc->hier_send[k];
    pc->hier_recv[k] = cc->hier_recv[k];
  }
}

koloResult_t kolo_cuda_comm_p2p_ready(struct koloComm *c, int peer, int is_send, void *arg) {
  (void)arg;
  kolo_cuda_comm *cc = c->cuda;
  int made = 0;
  koloResult_t res = koloSuccess;
  for (int ch = 0; ch < c->nchannels && res == koloSuccess; ch++) {
    size_t k = (size_t)peer * (size_t)c->nchannels + (size_t)ch;
    kolo_dev_conn *d = is_send ? &cc->p2p_send[k] : &cc->p2p_recv[k];
    unsigned char ready = is_send ? c->p2p_send_ready[k] : c->p2p_recv_ready[k];
    if (d->step != NULL || ready != 1) continue;
    *d = dev_conn_of(cc, is_send ? &c->p2p_send[k] : &c->p2p_recv[k], p2p_counter(c, k, is_send));
    /* the device copy the end tables of multi-peer programs point to */
    res = kolo_cuda_peers_publish(c, (is_send ? 0 : (size_t)c->nranks * (size_t)c->nchannels) + k);
    made = 1;
  }
  return res == koloSuccess && made ? kolo_cuda_peers_sync(c) : res;
}

/* ---- failure ------------------------------------------------------------- */

/* The stop word (KOLO_CW_STOP_SRC) into end d, after the mismatch report
 * (KOLO_CW_REPORT_SRC) when `report`. */
static void stop_end(kolo_cuda_comm *cc, const kolo_dev_conn *d, int report, cudaStream_t st) {
  if (d->step == NULL || d->stop == NULL) return;
  if (report) kolo_cuda_mismatch_copy(cc, d, st);
  cudaError_t e = cudaMemcpyAsync(d->stop, &cc->words[KOLO_CW_STOP_SRC], sizeof(uint32_t), cudaMemcpyDefault, st);
  if (e != cudaSuccess) KOLO_WARN("writing a stop word for rank %d failed: %s", d->peer, cudaGetErrorString(e));
}

void kolo_cuda_comm_stop_all(struct koloComm *c, int reason) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc == NULL || cc->setup_stream == NULL) return;
  cudaStream_t st = (cudaStream_t)cc->setup_stream;
  cudaSetDevice(cc->dev);
  /* The copies read this word when they run: it holds one value until the
   * stream has drained. */
  volatile uint32_t *src = &cc->words[KOLO_CW_STOP_SRC];
  *src = KOLO_DEV_STOP_WORD(reason, c->rank);
  /* calls that do not match: the report goes before each stop word */
  const int report = reason == KOLO_STOP_MISMATCH && kolo_cuda_mismatch_stage(cc);
  for (int ch = 0; ch < c->nchannels; ch++) {
    stop_end(cc, &cc->ring_send[ch], report, st);
    stop_end(cc, &cc->ring_recv[ch], report, st);
    for (int k = 0; k < 2; k++) {
      stop_end(cc, &cc->hier_send[k][ch], report, st);
      stop_end(cc, &cc->hier_recv[k][ch], report, st);
    }
  }
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  for (size_t k = 0; cc->p2p_send && k < np; k++) {
    stop_end(cc, &cc->p2p_send[k], report, st);
    stop_end(cc, &cc->p2p_recv[k], report, st);
  }
  cudaError_t e = cudaStreamSynchronize(st);
  if (e != cudaSuccess) KOLO_WARN("rank %d: writing stop words failed: %s", c->rank, cudaGetErrorString(e));
}

void kolo_cuda_comm_abort(struct koloComm *c) {
  if (c->cuda == NULL || c->cuda->words == NULL) return;
  __atomic_store_n(&c->cuda->words[KOLO_CW_ABORT], 1u, __ATOMIC_SEQ_CST);
}

/* How much a peer's fate explains a stalled kernel: a process lost or
 * exited without destroying its communicator (the origin) over one that
 * left (it destroyed its communicator, perhaps after failing itself). */
static int fate_rank(int fate, int waited_on) {
  int origin = fate == KOLO_PEER_LOST || fate == KOLO_PEER_EXITED;
  return fate == KOLO_PEER_ALIVE ? 0 : 2 * (1 + origin) + waited_on;
}

/* A kernel that waited on a peer cannot tell a dead process from a slow
 * one, and a stop word names the rank that wrote it, not the origin: the
 * bootstrap mesh can (a killed rank's connections close).  The gone peer
 * that explains most (fate_rank; the lowest of equals); -1 when none. */
static int dead_peer(struct koloComm *c, int waited_on, int *fate) {
  int best = -1, best_rank = 0;
  for (int r = 0; c->bs != NULL && r < c->nranks; r++) {
    int f = kolo_bootstrap_peer_dead(c->bs, r);
    int k = fate_rank(f, r == waited_on);
    if (k > best_rank) best = r, best_rank = k, *fate = f;
  }
  return best;
}

/* The sentence of a kernel's stop when a peer's process is gone. */
static koloResult_t status_dead_peer(struct koloComm *c, uint32_t task, int peer, int dead, int fate) {
  return kolo_error(&c->err, koloRemoteError,
                    "rank %d: rank %d %s while a kernel of rank %d (block %u) waited for rank %d", c->rank, dead,
                    kolo_peer_fate_text(fate), c->rank, task, peer);
}

/* The result of a kernel's status word `why` and the stop reason it sends on. */
static koloResult_t status_result(uint32_t why, int *reason) {
  *reason = KOLO_STOP_ERROR;
  switch (why) {
  case KOLO_DEV_ABORTED: *reason = KOLO_STOP_ABORT; return koloRemoteError;
  case KOLO_DEV_TIMEOUT: *reason = KOLO_STOP_TIMEOUT; return koloTimeout;
  case KOLO_DEV_PEER_STOPPED: return koloRemoteError;
  case KOLO_DEV_CONCURRENT: return koloInvalidUsage;
  default: return koloInternalError;
  }
}

static void status_sentence(struct koloComm *c, koloResult_t res, uint32_t why, uint32_t task, int peer);

/* Answers of a query that say nothing of the context: it is busy, or the
 * query was refused because of a capture. */
static int context_answer_is_benign(cudaError_t e) {
  return e == cudaSuccess || e == cudaErrorNotReady || e == cudaErrorStreamCaptureUnsupported ||
         e == cudaErrorStreamCaptureImplicit || e == cudaErrorCapturedEvent;
}

/* A device fault (an illegal address, in any kernel of the context, the
 * user's too) is a sticky CUDA error: the kernels died without writing a
 * status word, so the context itself is asked, through the order event.
 * Nothing can be written through a lost context: the peers learn of it
 * from their own timeout, which names this rank. */
static koloResult_t context_lost(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc->order_event == NULL || !cc->have_last) return koloSuccess;
  cudaError_t e = (cudaError_t)kolo_cuda_event_query(cc->order_event);
  if (context_answer_is_benign(e)) {
    if (e != cudaSuccess && e != cudaErrorNotReady && cudaPeekAtLastError() == e) (void)cudaGetLastError();
    return koloSuccess;
  }
  int expected = koloSuccess;
  if (!atomic_compare_exchange_strong(&c->failed, &expected, (int)koloUnhandledCudaError))
    return (koloResult_t)expected;
  return kolo_error(&c->err, koloUnhandledCudaError,
                    "rank %d: CUDA device %d's context failed while this communicator had work on it: %s (%s), "
                    "a fault of a kernel there (this communicator's or another's); the error is sticky: no CUDA "
                    "work can run on the device again in this process",
                    c->rank, cc->dev, cudaGetErrorName(e), cudaGetErrorString(e));
}

koloResult_t kolo_cuda_comm_status(struct koloComm *c) {
  koloResult_t res = (koloResult_t)atomic_load(&c->failed);
  kolo_cuda_comm *cc = c->cuda;
  if (res != koloSuccess || cc == NULL || cc->words == NULL) return res;
  const kolo_cuda_stop st = kolo_cuda_status_read(&cc->words[KOLO_CW_STATUS]); /* as the stopping block wrote it */
  if (st.why == KOLO_DEV_OK) return context_lost(c);
  kolo_cuda_stall_check(c); /* a stall the kernel noted before it stopped: its warning first */
  if (kolo_cuda_status_mismatch(c, &st, &res)) return res; /* calls that do not match (cuda_mismatch.c) */
  int reason, fate = KOLO_PEER_ALIVE;
  res = status_result(st.why, &reason);
  int waited = st.why == KOLO_DEV_TIMEOUT || st.why == KOLO_DEV_PEER_STOPPED;
  int dead = waited ? dead_peer(c, st.peer, &fate) : -1;
  if (dead >= 0) res = koloRemoteError;
  int expected = koloSuccess;
  if (!atomic_compare_exchange_strong(&c->failed, &expected, (int)res)) return (koloResult_t)expected;
  if (dead >= 0) status_dead_peer(c, st.task, st.peer, dead, fate);
  else status_sentence(c, res, st.why, st.task, st.peer);
  kolo_cuda_comm_stop_all(c, reason); /* so that the peers stop too */
  return res;
}

static void status_sentence(struct koloComm *c, koloResult_t res, uint32_t why, uint32_t task, int peer) {
  switch (why) {
  case KOLO_DEV_ABORTED:
    kolo_error(&c->err, res, "rank %d: a kernel of this communicator stopped: koloCommAbort was called", c->rank);
    break;
  case KOLO_DEV_TIMEOUT:
    kolo_error(&c->err, res,
               "rank %d: a kernel (block %u) waited %d ms for rank %d without progress: is rank %d "
               "running the same calls?",
               c->rank, task, c->timeout_ms, peer, peer);
    break;
  case KOLO_DEV_PEER_STOPPED:
    kolo_error(&c->err, res,
               "rank %d: rank %d stopped its end of a pipe (it failed, timed out or was aborted) "
               "while a kernel of rank %d (block %u) waited for it",
               c->rank, peer, c->rank, task);
    break;
  case KOLO_DEV_CONCURRENT:
    kolo_error(&c->err, res,
               "rank %d: two kernels of this communicator ran at once on one pipe (with rank %d): a CUDA "
               "graph of its calls replayed concurrently with other calls of it; order them on one stream",
               c->rank, peer);
    break;
  default:
    kolo_error(&c->err, res, "rank %d: a kernel stopped with unknown status %u (a kolo bug)", c->rank, why);
    break;
  }
}

/* ---- teardown ------------------------------------------------------------ */

void kolo_cuda_comm_free(struct koloComm *c) {
  kolo_cuda_comm *cc = c->cuda;
  if (cc == NULL) return;
  kolo_cuda_stall_unwatch(c); /* before the words it polls go */
  if (cc->dev >= 0) cudaSetDevice(cc->dev);
  kolo_cuda_peers_free(c);
  if (cc->dev_steps_mem) cudaFree(cc->dev_steps_mem);
  if (cc->scratch) cudaFree(cc->scratch);
  if (cc->counters) cudaFree(cc->counters);
  if (cc->words) cudaFreeHost(cc->words);
  if (cc->order_event) cudaEventDestroy((cudaEvent_t)cc->order_event);
  if (cc->setup_stream) cudaStreamDestroy((cudaStream_t)cc->setup_stream);
  for (int k = 0; k < KOLO_COLL_NUM; k++) free(cc->dev_steps[k]);
  free(cc->p2p_send);
  free(cc->p2p_recv);
  free(cc->net_pipes);
  free(cc);
  c->cuda = NULL;
}
