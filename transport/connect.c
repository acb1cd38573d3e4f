/* connect.c - setting up pipes with peers over the bootstrap mesh.
 *
 * Three phases, so that no rank waits for a message its peer has not been
 * able to send yet: (1) every receiver creates its pipes and sends their
 * descriptors; (2) every sender waits for its descriptors, attaches and
 * acknowledges; (3) every receiver waits for the acks and unlinks. */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "transport/transport.h"

/* Every transport, by the number a descriptor message names it with. */
static const kolo_transport *const transports[] = {&kolo_transport_local, &kolo_transport_shm,
                                                   &kolo_transport_p2p, &kolo_transport_net};
#define NTRANSPORTS (int)(sizeof transports / sizeof transports[0])
#define ACK_TAG_BIT 0x80000000u

/* The candidates, in order, for each memory kind. */
static const int host_candidates[] = {0, 3, 1}; /* local, net, shm */
static const int cuda_candidates[] = {2, 3}; /* p2p, net */

static const kolo_conn_mem host_mem = {koloMemHost, -1, 0, NULL};

static const int *candidates(const kolo_conn_mem *mem, int *n) {
  *n = mem->memory == koloMemCuda ? (int)(sizeof cuda_candidates / sizeof cuda_candidates[0])
                                  : (int)(sizeof host_candidates / sizeof host_candidates[0]);
  return mem->memory == koloMemCuda ? cuda_candidates : host_candidates;
}

static int is_candidate(const kolo_conn_mem *mem, uint32_t t) {
  int n;
  const int *list = candidates(mem, &n);
  for (int i = 0; i < n; i++)
    if ((uint32_t)list[i] == t) return 1;
  return 0;
}

static void setup_for(kolo_conn_set *set, const kolo_conn_request *r, kolo_conn_setup *s) {
  if (set->local_ranks == 0) set->local_ranks = kolo_bootstrap_host_ranks(set->bs);
  s->local_ranks = set->local_ranks;
  s->job = set->job;
  s->self = kolo_bootstrap_peer(set->bs, kolo_bootstrap_rank(set->bs));
  s->peer = kolo_bootstrap_peer(set->bs, r->peer);
  s->slot_bytes = set->slot_bytes;
  s->nslots = set->nslots;
  s->tag = r->tag;
  s->eb = set->eb;
  s->mem = set->mem ? set->mem : &host_mem;
}

static uint32_t ll_bytes_of(const kolo_conn_setup *s) {
  return s->mem->memory == koloMemCuda ? s->mem->ll_slot_bytes : 0;
}

static koloResult_t recv_create(kolo_bootstrap *bs, const kolo_conn_setup *s,
                                kolo_conn_request *r) {
  int ncand;
  const int *cand = candidates(s->mem, &ncand);
  for (int i = 0; i < ncand; i++) { /* in the list's order of preference */
    int t = cand[i];
    if (!transports[t]->can_connect(s)) continue;
    kolo_conn_offer msg = {.transport = (uint32_t)t, .slot_bytes = s->slot_bytes,
                           .nslots = s->nslots, .ll_slot_bytes = ll_bytes_of(s)};
    kolo_connector *c = r->conn;
    memset(c, 0, sizeof *c);
    c->transport = transports[t];
    c->peer = r->peer;
    c->channel = r->channel;
    c->nslots = s->nslots;
    c->slot_bytes = s->slot_bytes;
    koloResult_t res = transports[t]->recv_create(s, c, (char *)msg.desc);
    if (res != koloSuccess) return res;
    KOLO_INFO("rank %d: pipe from rank %d (channel %d, tag 0x%x) over %s: %u slots of %zu bytes",
              s->self->rank, r->peer, r->channel, r->tag, transports[t]->name, s->nslots,
              s->slot_bytes);
    uint8_t wire[KOLO_CONN_OFFER_BYTES];
    kolo_encode_conn_offer(&msg, wire);
    res = kolo_bootstrap_send(bs, r->peer, r->tag, wire, sizeof wire);
    if (res != koloSuccess) transports[t]->close(c);
    return res;
  }
  if (s->mem->memory == koloMemCuda)
    return kolo_error(s->eb, koloInvalidUsage,
                      "no transport connects rank %d to rank %d in device memory (ranks on "
                      "different hosts need the net transport, which does not carry device memory yet)",
                      s->peer->rank, s->self->rank);
  return kolo_error(s->eb, koloInvalidUsage,
                    "no transport connects rank %d to rank %d (KOLO_SHM_DISABLE is set; "
                    "KOLO_NET_FORCE=1 would connect them over the network)",
                    s->peer->rank, s->self->rank);
}

/* The receiver's offer, decoded (conn_wire.h): a garbled one is refused
 * with the decoder's sentence, which names the peer. */
static koloResult_t read_offer(kolo_bootstrap *bs, const kolo_conn_setup *s, const kolo_conn_request *r,
                               kolo_conn_offer *msg) {
  uint8_t wire[KOLO_CONN_OFFER_BYTES];
  koloResult_t res = kolo_bootstrap_recv(bs, r->peer, r->tag, wire, sizeof wire);
  if (res != koloSuccess) return res;
  char why[KOLO_ERR_LEN];
  if (kolo_decode_conn_offer(wire, sizeof wire, (uint32_t)NTRANSPORTS, r->peer, msg, why, sizeof why) !=
      KOLO_CONN_WIRE_OK)
    return kolo_error(s->eb, koloRemoteError, "%s", why);
  return koloSuccess;
}

static koloResult_t send_attach(kolo_bootstrap *bs, const kolo_conn_setup *s,
                                kolo_conn_request *r) {
  kolo_conn_offer msg;
  koloResult_t res = read_offer(bs, s, r, &msg);
  if (res != koloSuccess) return res;
  if (msg.slot_bytes != s->slot_bytes ||
      msg.nslots != s->nslots || msg.ll_slot_bytes != ll_bytes_of(s))
    return kolo_error(s->eb, koloInvalidUsage,
                      "rank %d offers a pipe of %u slots of %llu bytes (LL %u, transport %u), rank %d "
                      "expects %u of %zu (LL %u): are KOLO_BUFFSIZE / KOLO_P2P_BUFFSIZE / KOLO_NSLOTS / "
                      "KOLO_LL_SLOT_BYTES the same on all ranks?",
                      r->peer, msg.nslots, (unsigned long long)msg.slot_bytes, msg.ll_slot_bytes, msg.transport,
                      s->self->rank, s->nslots, s->slot_bytes, ll_bytes_of(s));
  if (!is_candidate(s->mem, msg.transport))
    return kolo_error(s->eb, koloInvalidUsage,
                      "rank %d offers a pipe over %s, which rank %d cannot use for %s memory: "
                      "are both communicators of the same memory kind?",
                      r->peer, transports[msg.transport]->name, s->self->rank,
                      s->mem->memory == koloMemCuda ? "device" : "host");
  kolo_connector *c = r->conn;
  memset(c, 0, sizeof *c);
  c->transport = transports[msg.transport];
  c->peer = r->peer;
  c->is_send = 1;
  c->channel = r->channel;
  c->nslots = s->nslots;
  c->slot_bytes = s->slot_bytes;
  res = c->transport->send_attach(s, c, (const char *)msg.desc);
  if (res != koloSuccess) return res;
  uint8_t ack = 1;
  res = kolo_bootstrap_send(bs, r->peer, r->tag | ACK_TAG_BIT, &ack, sizeof ack);
  if (res != koloSuccess) c->transport->close(c);
  return res;
}

/* One phase over one set; stops at the set's first failure. */
static void run_phase(kolo_conn_set *set, int phase, kolo_conn_setup *s) {
  for (int i = 0; i < set->n && set->res == koloSuccess; i++) {
    kolo_conn_request *r = &set->reqs[i];
    if ((phase == 1) != (r->is_send != 0)) continue; /* phases 0, 2: receivers */
    setup_for(set, r, s);
    if (phase == 0) {
      set->res = recv_create(set->bs, s, r);
      set->made[i] = set->res == koloSuccess;
    } else if (phase == 1) {
      set->res = send_attach(set->bs, s, r);
      set->made[i] = set->res == koloSuccess;
    } else {
      uint8_t ack;
      set->res = kolo_bootstrap_recv(set->bs, r->peer, r->tag | ACK_TAG_BIT, &ack, sizeof ack);
      if (set->res == koloSuccess && r->conn->transport->recv_accept)
        set->res = r->conn->transport->recv_accept(s, r->conn);
      r->conn->transport->recv_attached(r->conn);
    }
  }
}

/* A send end that never attached: every transport that could have carried
 * it removes what its receiver may have left for this sender alone. */
static void abandon_send(kolo_conn_set *set, kolo_conn_request *r, kolo_conn_setup *s) {
  setup_for(set, r, s);
  int ncand;
  const int *cand = candidates(s->mem, &ncand);
  for (int i = 0; i < ncand; i++) {
    const kolo_transport *t = transports[cand[i]];
    if (t->send_abandon != NULL && t->can_connect(s)) t->send_abandon(s);
  }
}

/* A failed set: what it made is closed, what its senders never attached to
 * is abandoned. */
static void undo_failed_set(kolo_conn_set *set, kolo_conn_setup *s) {
  for (int i = 0; i < set->n; i++) {
    kolo_conn_request *r = &set->reqs[i];
    if (!set->made[i] && r->is_send) abandon_send(set, r, s);
    else if (set->made[i] && !(set->keep_exported && kolo_connector_ipc_exported(r->conn)))
      kolo_connector_close(r->conn);
  }
}

koloResult_t kolo_connect_sets(kolo_conn_set *sets, int nsets) {
  koloResult_t res = koloSuccess;
  for (int k = 0; k < nsets; k++) {
    sets[k].res = koloSuccess;
    sets[k].made = calloc((size_t)sets[k].n + 1, sizeof *sets[k].made);
    if (sets[k].made == NULL) sets[k].res = kolo_error(sets[k].eb, koloSystemError, "out of memory setting up pipes");
  }
  /* Each phase runs for every set before the next starts: sets of ranks
   * driven by this one thread only wait for what an earlier phase sent. */
  kolo_conn_setup s;
  for (int phase = 0; phase < 3; phase++)
    for (int k = 0; k < nsets; k++) run_phase(&sets[k], phase, &s);
  for (int k = 0; k < nsets; k++) {
    kolo_conn_set *set = &sets[k];
    if (set->res != koloSuccess && set->made) undo_failed_set(set, &s);
    if (res == koloSuccess) res = set->res;
    free(set->made);
    set->made = NULL;
  }
  return res;
}

koloResult_t kolo_connect(kolo_bootstrap *bs, uint64_t job, size_t slot_bytes, uint32_t nslots,
                          const kolo_conn_mem *mem, kolo_conn_request *reqs, int n,
                          kolo_errbuf *eb) {
  kolo_conn_set set = {bs, job, slot_bytes, nslots, mem, reqs, n, eb, NULL, koloSuccess, 0, 0};
  return kolo_connect_sets(&set, 1);
}

void kolo_connector_close(kolo_connector *c) { kolo_connector_close_by(c, 0); }

void kolo_connector_close_by(kolo_connector *c, int64_t deadline) {
  if (c == NULL || c->transport == NULL) return;
  c->close_by = deadline;
  c->transport->close(c);
  c->transport = NULL;
}
