/* comm_peek.c - see comm_peek.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include "util/comm_peek.h"

#include "core/comm_state.h"
#include "core/register.h"
#include "core/plan.h"
#include "core/mem.h"
#include "ring/algo_select.h"
#include "transport/proxy.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

void kt_ring_steps(koloComm_t comm, int ch, uint32_t *send, uint32_t *recv) {
  *send = comm->ring_send[ch].ctrl ? comm->ring_send[ch].step : 0;
  *recv = comm->ring_recv[ch].ctrl ? comm->ring_recv[ch].step : 0;
}

void kt_p2p_steps(koloComm_t comm, int peer, int ch, uint32_t *send, uint32_t *recv) {
  size_t k = (size_t)peer * (size_t)comm->nchannels + (size_t)ch;
  *send = comm->p2p_send_ready[k] == 1 ? comm->p2p_send[k].step : 0;
  *recv = comm->p2p_recv_ready[k] == 1 ? comm->p2p_recv[k].step : 0;
}

void kt_comm_shape(koloComm_t comm, int *nchannels, uint32_t *nslots, size_t *slot_bytes,
                   size_t *min_channel_bytes) {
  *nchannels = comm->nchannels;
  *nslots = comm->nslots;
  *slot_bytes = comm->slot_bytes;
  *min_channel_bytes = comm->min_channel_bytes;
}

size_t kt_comm_chunk_cap(koloComm_t comm) { return comm->chunk_cap; }

int kt_comm_algo(koloComm_t comm, size_t bytes, int channels) {
  return kolo_algo_choose(&comm->algo, bytes, channels);
}

int kt_fresh_algo(koloComm_t comm, int coll, size_t count, koloDataType_t type) {
  kolo_op op = {coll, NULL, NULL, count, type, koloSum, 0, comm, NULL, KOLO_PREMUL_NONE, 0, 0};
  const size_t bytes = count * koloTypeSize(type);
  const int nch = kolo_comm_op_channels(comm, &op);
  const kolo_algo_topo *t = &comm->algo;
  switch (coll) {
  case KOLO_COLL_BROADCAST: return kolo_bcast_choose(t, bytes, nch);
  case KOLO_COLL_ALL_GATHER: return kolo_ag_choose(t, bytes, nch);
  case KOLO_COLL_REDUCE: return kolo_reduce_choose(t, bytes, nch);
  default: {
    int a = kolo_algo_choose(t, bytes, nch);
    return a == KOLO_ALGO_HIER && !comm->hier_ready ? KOLO_ALGO_RING : a;
  }
  }
}

struct kt_memo {
  kolo_algo_memo m;
};

kt_memo *kt_memo_new(void) { return calloc(1, sizeof(kt_memo)); }
void kt_memo_free(kt_memo *m) { free(m); }
int kt_memo_kinds(void) { return KOLO_MEMO_KINDS; }
int kt_memo_ways(void) { return KOLO_MEMO_WAYS; }
size_t kt_memo_max_bytes(void) { return KOLO_MEMO_MAX_BYTES; }
unsigned kt_memo_way(size_t bytes) { return kolo_memo_way(bytes); }
int kt_memo_get(kt_memo *m, int kind, size_t bytes) { return kolo_memo_get(&m->m, kind, bytes); }
void kt_memo_put(kt_memo *m, int kind, size_t bytes, int algo) { kolo_memo_put(&m->m, kind, bytes, algo); }

size_t kt_comm_p2p_slot_bytes(koloComm_t comm) { return comm->p2p_slot_bytes; }

size_t kt_pipe_slot_bytes(koloComm_t comm, int p2p, int peer, int ch, int send) {
  if (!p2p) {
    const kolo_connector *c = send ? &comm->ring_send[ch] : &comm->ring_recv[ch];
    return c->ctrl ? c->slot_bytes : 0;
  }
  size_t k = (size_t)peer * (size_t)comm->nchannels + (size_t)ch;
  if ((send ? comm->p2p_send_ready : comm->p2p_recv_ready)[k] != 1) return 0;
  return (send ? comm->p2p_send : comm->p2p_recv)[k].slot_bytes;
}

uint64_t kt_proxy_caller_turns(void) { return kolo_proxy_caller_turns(); }

int kt_reg_count(koloComm_t comm) { return kolo_reg_count(comm); }

int kt_program_shape(koloComm_t comm, int coll, int arg, int ch, int *nsteps, int *npeers) {
  const kolo_program *p = NULL;
  if (kolo_comm_program(comm, coll, arg, ch, &p) != koloSuccess) return -1;
  *nsteps = p->nsteps;
  *npeers = p->npeers;
  return 0;
}

int kt_mem_device(const void *p, size_t size) {
  int dev = -2;
  return kolo_mem_block_of(p, size, &dev) ? dev : -2;
}

static uint64_t tail_of(const kolo_connector *c) {
  return c->ctrl ? atomic_load_explicit(&c->ctrl->tail, memory_order_acquire) : 0;
}

uint64_t kt_slices_in(koloComm_t comm) {
  uint64_t n = 0;
  for (int ch = 0; ch < comm->nchannels; ch++) n += tail_of(&comm->ring_recv[ch]);
  size_t np2p = comm->p2p_recv ? (size_t)comm->nranks * (size_t)comm->nchannels : 0;
  for (size_t k = 0; k < np2p; k++)
    if (comm->p2p_recv_ready[k] == 1) n += tail_of(&comm->p2p_recv[k]);
  return n;
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int kt_wait_slices_in(koloComm_t comm, uint64_t above, double bound_ms) {
  const double t0 = mono_ms();
  const struct timespec tick = {0, 1000000};
  while (kt_slices_in(comm) <= above && mono_ms() - t0 < bound_ms) nanosleep(&tick, NULL);
  return kt_slices_in(comm) > above;
}
