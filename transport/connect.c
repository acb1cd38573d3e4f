/* connect.c - setting up pipes with peers over the bootstrap mesh.
 *
 * Three phases, so that no rank waits for a message its peer has not been
 * able to send yet: (1) every receiver creates its pipes and sends their
 * descriptors; (2) every sender waits for its descriptors, attaches and
 * acknowledges; (3) every receiver waits for the acks and unlinks. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "transport/transport.h"

static const kolo_transport *const transports[] = {&kolo_transport_local, &kolo_transport_shm};
#define NTRANSPORTS (int)(sizeof transports / sizeof transports[0])
#define ACK_TAG_BIT 0x80000000u

typedef struct {
  uint32_t transport;
  uint32_t slot_bytes;
  uint32_t nslots;
  uint32_t pad;
  char desc[KOLO_CONN_DESC_BYTES];
} conn_msg;

static void setup_for(kolo_bootstrap *bs, uint64_t job, size_t slot_bytes, uint32_t nslots,
                      const kolo_conn_request *r, kolo_errbuf *eb, kolo_conn_setup *s) {
  s->job = job;
  s->self = kolo_bootstrap_peer(bs, kolo_bootstrap_rank(bs));
  s->peer = kolo_bootstrap_peer(bs, r->peer);
  s->slot_bytes = slot_bytes;
  s->nslots = nslots;
  s->tag = r->tag;
  s->eb = eb;
}

static koloResult_t recv_create(kolo_bootstrap *bs, const kolo_conn_setup *s,
                                kolo_conn_request *r) {
  for (int t = 0; t < NTRANSPORTS; t++) {
    if (!transports[t]->can_connect(s)) continue;
    conn_msg msg = {.transport = (uint32_t)t, .slot_bytes = (uint32_t)s->slot_bytes,
                    .nslots = s->nslots};
    kolo_connector *c = r->conn;
    memset(c, 0, sizeof *c);
    c->transport = transports[t];
    c->peer = r->peer;
    c->channel = r->channel;
    c->nslots = s->nslots;
    c->slot_bytes = s->slot_bytes;
    koloResult_t res = transports[t]->recv_create(s, c, msg.desc);
    if (res != koloSuccess) return res;
    KOLO_INFO("rank %d: pipe from rank %d (channel %d, tag 0x%x) over %s: %u slots of %zu bytes",
              s->self->rank, r->peer, r->channel, r->tag, transports[t]->name, s->nslots,
              s->slot_bytes);
    res = kolo_bootstrap_send(bs, r->peer, r->tag, &msg, sizeof msg);
    if (res != koloSuccess) transports[t]->close(c);
    return res;
  }
  return kolo_error(s->eb, koloInvalidUsage,
                    "no transport connects rank %d to rank %d (different hosts need the net "
                    "transport, or KOLO_SHM_DISABLE is set)",
                    s->peer->rank, s->self->rank);
}

static koloResult_t send_attach(kolo_bootstrap *bs, const kolo_conn_setup *s,
                                kolo_conn_request *r) {
  conn_msg msg;
  koloResult_t res = kolo_bootstrap_recv(bs, r->peer, r->tag, &msg, sizeof msg);
  if (res != koloSuccess) return res;
  if (msg.transport >= (uint32_t)NTRANSPORTS || msg.slot_bytes != s->slot_bytes ||
      msg.nslots != s->nslots)
    return kolo_error(s->eb, koloInvalidUsage,
                      "rank %d offers a pipe of %u slots of %u bytes (transport %u), rank %d "
                      "expects %u of %zu: are KOLO_BUFFSIZE / KOLO_NSLOTS the same on all ranks?",
                      r->peer, msg.nslots, msg.slot_bytes, msg.transport, s->self->rank, s->nslots,
                      s->slot_bytes);
  kolo_connector *c = r->conn;
  memset(c, 0, sizeof *c);
  c->transport = transports[msg.transport];
  c->peer = r->peer;
  c->is_send = 1;
  c->channel = r->channel;
  c->nslots = s->nslots;
  c->slot_bytes = s->slot_bytes;
  res = c->transport->send_attach(s, c, msg.desc);
  if (res != koloSuccess) return res;
  uint8_t ack = 1;
  res = kolo_bootstrap_send(bs, r->peer, r->tag | ACK_TAG_BIT, &ack, sizeof ack);
  if (res != koloSuccess) c->transport->close(c);
  return res;
}

koloResult_t kolo_connect(kolo_bootstrap *bs, uint64_t job, size_t slot_bytes, uint32_t nslots,
                          kolo_conn_request *reqs, int n, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  int *made = calloc((size_t)n + 1, sizeof *made);
  if (made == NULL) return kolo_error(eb, koloSystemError, "out of memory setting up pipes");
  kolo_conn_setup s;
  for (int i = 0; i < n && res == koloSuccess; i++) {
    if (reqs[i].is_send) continue;
    setup_for(bs, job, slot_bytes, nslots, &reqs[i], eb, &s);
    res = recv_create(bs, &s, &reqs[i]);
    made[i] = res == koloSuccess;
  }
  for (int i = 0; i < n && res == koloSuccess; i++) {
    if (!reqs[i].is_send) continue;
    setup_for(bs, job, slot_bytes, nslots, &reqs[i], eb, &s);
    res = send_attach(bs, &s, &reqs[i]);
    made[i] = res == koloSuccess;
  }
  for (int i = 0; i < n && res == koloSuccess; i++) {
    if (reqs[i].is_send) continue;
    uint8_t ack;
    res = kolo_bootstrap_recv(bs, reqs[i].peer, reqs[i].tag | ACK_TAG_BIT, &ack, sizeof ack);
    reqs[i].conn->transport->recv_attached(reqs[i].conn);
  }
  if (res != koloSuccess) {
    for (int i = 0; i < n; i++)
      if (made[i]) kolo_connector_close(reqs[i].conn);
  }
  free(made);
  return res;
}

void kolo_connector_close(kolo_connector *c) {
  if (c == NULL || c->transport == NULL) return;
  c->transport->close(c);
  c->transport = NULL;
}
