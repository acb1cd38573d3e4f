/* shm_ends.c - see shm_ends.h. */
#include "util/shm_ends.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/transport.h"

struct kt_shm_receiver {
  kolo_connector conn;
};

static const kolo_conn_mem host_mem = {koloMemHost, -1, 0, NULL};

/* A setup between ranks self and peer of this host. */
static kolo_conn_setup setup(uint64_t job, const kolo_peer_info *self, const kolo_peer_info *peer,
                             uint32_t tag, kolo_errbuf *eb) {
  kolo_conn_setup s = {.job = job, .self = self, .peer = peer, .slot_bytes = 4096, .nslots = 2,
                       .tag = tag, .eb = eb, .mem = &host_mem, .local_ranks = 2};
  return s;
}

static kolo_peer_info peer_info(int rank, pid_t pid) {
  kolo_peer_info p;
  memset(&p, 0, sizeof p);
  p.host_hash = 1;
  p.proc_token = (uint64_t)rank + 1;
  p.pid = (int32_t)pid;
  p.rank = rank;
  return p;
}

kt_shm_receiver *kt_shm_receiver_make(uint64_t job, int from, int to, uint32_t tag) {
  kt_shm_receiver *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  kolo_peer_info self = peer_info(to, getpid()), peer = peer_info(from, getpid());
  kolo_errbuf eb;
  memset(&eb, 0, sizeof eb);
  kolo_conn_setup s = setup(job, &self, &peer, tag, &eb);
  char desc[KOLO_CONN_DESC_BYTES];
  r->conn.transport = &kolo_transport_shm;
  if (kolo_transport_shm.recv_create(&s, &r->conn, desc) != koloSuccess) {
    free(r);
    return NULL;
  }
  return r;
}

const char *kt_shm_receiver_name(const kt_shm_receiver *r) { return r->conn.name; }

void kt_shm_receiver_close(kt_shm_receiver *r) {
  if (r == NULL) return;
  kolo_transport_shm.close(&r->conn);
  free(r);
}

void kt_shm_sender_abandon(uint64_t job, int from, int to, pid_t to_pid, uint32_t tag) {
  kolo_peer_info self = peer_info(from, getpid()), peer = peer_info(to, to_pid);
  kolo_errbuf eb;
  memset(&eb, 0, sizeof eb);
  kolo_conn_setup s = setup(job, &self, &peer, tag, &eb);
  kolo_transport_shm.send_abandon(&s);
}
