/* comm_usage.c - what a communicator holds (see comm_usage.h). */
#include "core/comm_usage.h"

#include "core/comm_state.h"

/* Bytes of the first n connectors of c that are made (ready NULL: all). */
static int64_t pipe_bytes_of(const kolo_connector *c, size_t n, const unsigned char *ready) {
  int64_t bytes = 0;
  for (size_t i = 0; i < n; i++)
    if (ready == NULL || ready[i] == 1) bytes += (int64_t)c[i].mem_bytes;
  return bytes;
}

koloResult_t kolo_comm_usage_of(const koloComm_t comm, kolo_comm_usage *out) {
  if (comm == NULL || out == NULL) return koloInvalidArgument;
  size_t nch = (size_t)comm->nchannels, np = (size_t)comm->nranks * nch;
  out->pipe_bytes = pipe_bytes_of(comm->ring_send, nch, NULL) + pipe_bytes_of(comm->ring_recv, nch, NULL) +
                    pipe_bytes_of(comm->p2p_send, np, comm->p2p_send_ready) +
                    pipe_bytes_of(comm->p2p_recv, np, comm->p2p_recv_ready);
  out->bootstrap_links = kolo_bootstrap_links(comm->bs);
  return koloSuccess;
}
