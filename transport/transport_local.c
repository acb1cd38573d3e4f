/* transport_local.c - pipes between ranks of one process: plain memory.
 *
 * The receiver allocates control block + slots and passes the pointer; both
 * ends hold a reference and the last one to close frees the memory, so
 * neither end has to outlive the other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

static int local_can_connect(const kolo_conn_setup *s) {
  /* The pid and host also count: a child made by a raw clone() skips the
   * atfork handler that redraws the token, and sharing malloc'd memory with
   * a process that only has a copy of it would corrupt data silently. */
  return s->self->proc_token == s->peer->proc_token && s->self->pid == s->peer->pid &&
         s->self->host_hash == s->peer->host_hash;
}

static koloResult_t local_recv_create(const kolo_conn_setup *s, kolo_connector *c, char *desc) {
  size_t bytes = KOLO_CONN_CTRL_BYTES + s->slot_bytes * s->nslots;
  void *mem = aligned_alloc(4096, bytes);
  if (mem == NULL)
    return kolo_error(s->eb, koloSystemError, "cannot allocate %zu bytes for the pipe from rank %d",
                      bytes, s->peer->rank);
  memset(mem, 0, KOLO_CONN_CTRL_BYTES);
  c->ctrl = mem;
  c->sig_box = 1; /* both ends use this control block */
  atomic_store(&c->ctrl->refs, 2);
  c->slots = (char *)mem + KOLO_CONN_CTRL_BYTES;
  c->mem = mem;
  c->mem_bytes = bytes;
  /* The address means something in this process only: the sender is in
   * it (local_can_connect), yet it still travels as a little-endian u64. */
  kolo_encode_local_desc((uint64_t)(uintptr_t)mem, (uint8_t *)desc);
  return koloSuccess;
}

static koloResult_t local_send_attach(const kolo_conn_setup *s, kolo_connector *c,
                                      const char *desc) {
  uint64_t addr;
  char why[KOLO_ERR_LEN];
  if (kolo_decode_local_desc(desc, KOLO_CONN_DESC_BYTES, s->peer->rank, &addr, why, sizeof why) != KOLO_CONN_WIRE_OK)
    return kolo_error(s->eb, koloRemoteError, "%s", why);
  void *mem = (void *)(uintptr_t)addr;
  c->ctrl = mem;
  c->sig_box = 1;
  c->slots = (char *)mem + KOLO_CONN_CTRL_BYTES;
  c->mem = mem;
  c->mem_bytes = KOLO_CONN_CTRL_BYTES + s->slot_bytes * s->nslots;
  return koloSuccess;
}

static void local_recv_attached(kolo_connector *c) { (void)c; }

static void local_close(kolo_connector *c) {
  if (c->mem == NULL) return;
  if (atomic_fetch_sub(&c->ctrl->refs, 1) == 1) free(c->mem);
  c->mem = NULL;
  c->ctrl = NULL;
}

const kolo_transport kolo_transport_local = {
    .name = "local",
    .can_connect = local_can_connect,
    .recv_create = local_recv_create,
    .send_attach = local_send_attach,
    .recv_attached = local_recv_attached,
    .close = local_close,
};
