/* transport.h - connector transports as ops tables, and connection setup.
 *
 * Transports are tried in order (local -> shm; net joins later) and the
 * first whose can_connect says yes wins; callers never switch on the
 * transport.  Setting up a pipe takes three messages over the bootstrap
 * mesh: the receiver creates the memory and sends a descriptor, the sender
 * attaches and acknowledges, the receiver then drops what let others attach
 * (e.g. unlinks the shm name, so no segment outlives a crash).
 */
#ifndef KOLO_TRANSPORT_TRANSPORT_H
#define KOLO_TRANSPORT_TRANSPORT_H

#include "transport/bootstrap.h"
#include "transport/connector.h"

#define KOLO_CONN_DESC_BYTES 128

typedef struct kolo_conn_setup {
  uint64_t job;          /* names shm segments */
  const kolo_peer_info *self, *peer;
  size_t slot_bytes;
  uint32_t nslots;
  uint32_t tag;          /* unique per pipe within the communicator */
  kolo_errbuf *eb;
} kolo_conn_setup;

typedef struct kolo_transport {
  const char *name;
  int (*can_connect)(const kolo_conn_setup *s);
  /* receiver: create the pipe's memory, write a descriptor for the sender */
  koloResult_t (*recv_create)(const kolo_conn_setup *s, kolo_connector *c, char *desc);
  /* sender: attach to the receiver's memory */
  koloResult_t (*send_attach)(const kolo_conn_setup *s, kolo_connector *c, const char *desc);
  /* receiver, after the sender attached (or gave up): stop further attaches */
  void (*recv_attached)(kolo_connector *c);
  /* either end: release this end's share */
  void (*close)(kolo_connector *c);
} kolo_transport;

extern const kolo_transport kolo_transport_local;
extern const kolo_transport kolo_transport_shm;

/* One pipe to set up: this rank is its sender (is_send) or receiver. */
typedef struct {
  kolo_connector *conn; /* filled on success */
  int peer;
  int is_send;
  int channel;
  uint32_t tag;
} kolo_conn_request;

/* Sets up every requested pipe with the peers doing the matching requests.
 * On failure every pipe set up so far by this call is closed. */
koloResult_t kolo_connect(kolo_bootstrap *bs, uint64_t job, size_t slot_bytes,
                          uint32_t nslots, kolo_conn_request *reqs, int n,
                          kolo_errbuf *eb);
void kolo_connector_close(kolo_connector *c);

/* The pipes of one communicator, for kolo_connect_sets. */
typedef struct {
  kolo_bootstrap *bs;
  uint64_t job;
  size_t slot_bytes;
  uint32_t nslots;
  kolo_conn_request *reqs;
  int n;
  kolo_errbuf *eb;
  int *made;        /* internal */
  koloResult_t res; /* this set's outcome */
} kolo_conn_set;

/* Sets up the pipes of several communicators of this thread at once (one
 * thread driving several ranks in a group). */
koloResult_t kolo_connect_sets(kolo_conn_set *sets, int nsets);

#endif
