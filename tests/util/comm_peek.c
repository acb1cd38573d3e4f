/* comm_peek.c - see comm_peek.h. */
#include "util/comm_peek.h"

#include "core/comm.h"
#include "core/comm_init.h"
#include "core/mem.h"
#include "transport/proxy.h"

void kt_ring_steps(koloComm_t comm, int ch, uint32_t *send, uint32_t *recv) {
  *send = comm->ring_send[ch].ctrl ? comm->ring_send[ch].step : 0;
  *recv = comm->ring_recv[ch].ctrl ? comm->ring_recv[ch].step : 0;
}

void kt_comm_shape(koloComm_t comm, int *nchannels, uint32_t *nslots, size_t *slot_bytes,
                   size_t *min_channel_bytes) {
  *nchannels = comm->nchannels;
  *nslots = comm->nslots;
  *slot_bytes = comm->slot_bytes;
  *min_channel_bytes = comm->min_channel_bytes;
}

uint64_t kt_proxy_caller_turns(void) { return kolo_proxy_caller_turns(); }

int kt_reg_count(koloComm_t comm) { return kolo_reg_count(comm); }

int kt_mem_device(const void *p, size_t size) {
  int dev = -2;
  return kolo_mem_block_of(p, size, &dev) ? dev : -2;
}
