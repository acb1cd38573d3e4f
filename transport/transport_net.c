/* transport_net.c - pipes between hosts: local slots at each end, moved by
 * the proxy over a network provider (proxy.h, net.h).
 *
 * Chosen for peers on another host (host_hash differs), or for every peer
 * in another process when KOLO_NET_FORCE=1 (tests on one host).  Setup
 * follows the other transports' three messages over the bootstrap: the
 * receiver allocates its slots, listens on the bootstrap's interface
 * (KOLO_SOCKET_IFNAME) and sends the provider's handle (address + a random
 * per-pipe token) in the descriptor; the sender allocates its own slots,
 * connects, presents the token and acknowledges; the receiver then accepts
 * (connections without the token are refused) and closes its listener.
 * The provider is kolo_net_default()'s (KOLO_NET, else ib where a device is
 * usable, else socket); the descriptor names it, so ranks that chose
 * differently fail with a sentence.
 *
 * CUDA communicators (kolo_conn_mem says koloMemCuda): each end's control
 * block and slots are staging memory, pinned and mapped into the device
 * (net_devmem.h), so the kernel fills and drains the slots and moves the
 * counters itself; the connector's device fields point there.  Those
 * pipes are polled (proxy.h): the launcher posts each kernel's slices.
 * LL is not used on them (no LL region; the planner knows, cuda_comm.c).
 * With KOLO_NET_GDR=1 the slots may live in GPU memory instead (GPUDirect
 * RDMA, net_devmem.h), decided by each end for itself after connecting. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/net.h"
#include "transport/net_devmem.h"
#include "transport/proxy.h"
#include "transport/socket.h"
#include "transport/transport.h"

/* The descriptor (conn_wire.h) carries the provider's name after its
 * handle, so a sender whose KOLO_NET differs fails with a sentence instead
 * of misreading it. */
#define DESC_NAME_BYTES KOLO_NET_PROVIDER_BYTES
_Static_assert(KOLO_NET_HANDLE_BYTES + DESC_NAME_BYTES <= KOLO_CONN_DESC_BYTES, "provider name must fit");

int kolo_net_between(const kolo_peer_info *a, const kolo_peer_info *b) {
  if (kolo_same_process(a, b)) return 0;
  return a->host_hash != b->host_hash || kolo_param_int("KOLO_NET_FORCE") != 0;
}

uint64_t kolo_link_group(const kolo_peer_info *p) {
  if (kolo_param_int("KOLO_NET_FORCE") == 0) return p->host_hash;
  /* kolo_same_process's fields */
  uint64_t x = p->host_hash ^ (p->proc_token * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uint32_t)p->pid;
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ull;
}

static int net_can_connect(const kolo_conn_setup *s) { return kolo_net_between(s->self, s->peer); }

static int timeout_ms(void) {
  int64_t t = kolo_param_int("KOLO_TIMEOUT_MS");
  return t < 0 ? 0 : t > (1 << 30) ? (1 << 30) : (int)t;
}

static int on_device(const kolo_conn_setup *s) { return s->mem->memory == koloMemCuda; }

/* The largest slice the executor sends itself (proxy.h).  The proxy moves
 * larger ones while the executor reduces, where it has a CPU of its own:
 * with fewer than two CPUs per rank of this host it only takes the CPU its
 * executor (or a peer's) needs, and each hand-off costs a wake-up (2 ranks
 * on 2 CPUs, 16 MiB all-reduce over TCP: ~19.8 ms through the proxy, ~10.5
 * ms from the executor alone). */
static size_t caller_bytes(const kolo_conn_setup *s) {
  if (kolo_param_is_set("KOLO_NET_CALLER_BYTES")) {
    int64_t b = kolo_param_int("KOLO_NET_CALLER_BYTES");
    return b < 0 ? 0 : (size_t)b;
  }
  long cpus = kolo_host_cpus();
  return cpus >= 2L * s->local_ranks ? (size_t)64 << 10 : SIZE_MAX;
}

/* What a net pipe end owns besides the proxy's record (kolo_net_pipe). */
typedef struct {
  kolo_net_pipe pipe;  /* first: c->mem points at both */
  void *slot_mem;      /* device pipes: staged slots (pinned), NULL once GPUDirect took over */
  void *gdr_raw;       /* device pipes with GPUDirect: the device allocation */
  int dev;
} net_end;

static void mem_free(kolo_net_pipe *p) {
  net_end *e = (net_end *)p;
  if (p->polled) {
    kolo_net_devmem_free(p->mem);
    kolo_net_devmem_free(e->slot_mem);
    kolo_net_devmem_gdr_free(e->gdr_raw, e->dev);
    e->slot_mem = e->gdr_raw = NULL;
  } else {
    free(p->mem);
  }
  p->mem = NULL;
}

/* KOLO_NET_GDR=1 on a device pipe: its slots move to GPU memory registered
 * with the NIC, where the device, the driver and the provider allow;
 * otherwise it stays staged, and says why (net_devmem.h). */
static void try_gdr(kolo_connector *c, kolo_net_pipe *p) {
  net_end *e = (net_end *)p;
  if (!p->polled || kolo_param_int("KOLO_NET_GDR") == 0) return;
  kolo_errbuf eb = {0};
  size_t bytes = p->slot_bytes * p->nslots;
  void *raw = NULL, *slots = NULL;
  int fd = -1, flush = 1;
  if (p->net->reg_dmabuf == NULL) {
    kolo_error(&eb, koloInvalidUsage, "the %s provider cannot register device memory", p->net->name);
  } else if (kolo_net_devmem_gdr_alloc(bytes, e->dev, &raw, &slots, &fd, &flush, &eb) == koloSuccess) {
    koloResult_t res = p->net->reg_dmabuf(p->comm, slots, bytes, fd, 0, &eb);
    close(fd);
    if (res == koloSuccess) {
      kolo_net_devmem_free(e->slot_mem);
      e->slot_mem = NULL;
      e->gdr_raw = raw;
      p->slots = slots; /* the provider passes its addresses to the NIC, never reads it */
      p->devmem = 1;
      c->slots = slots;
      p->flush_dev1 = !p->is_send && flush ? e->dev + 1 : 0;
      KOLO_INFO("rank %d: network pipe %s %s: GPUDirect RDMA (dma-buf) on CUDA device %d%s", p->self,
                p->is_send ? "to" : "from", p->who, e->dev, p->flush_dev1 ? ", flushing writes" : "");
      return;
    }
    kolo_net_devmem_gdr_free(raw, e->dev);
  }
  KOLO_INFO("rank %d: network pipe %s %s stays staged in pinned host memory: %s", p->self,
            p->is_send ? "to" : "from", p->who, eb.msg);
}

static koloResult_t pipe_new(const kolo_conn_setup *s, kolo_connector *c, int is_send) {
  net_end *e = calloc(1, sizeof *e);
  kolo_net_pipe *p = &e->pipe;
  size_t slots_bytes = s->slot_bytes * s->nslots, bytes = KOLO_CONN_CTRL_BYTES + slots_bytes;
  if (e == NULL)
    return kolo_error(s->eb, koloSystemError, "cannot allocate the network pipe %s rank %d",
                      is_send ? "to" : "from", s->peer->rank);
  void *mem = NULL, *dev_ctrl = NULL, *dev_slots = NULL;
  char *slots = NULL;
  if (on_device(s)) { /* control block and slots apart: GPUDirect may replace the slots */
    p->polled = 1;
    e->dev = s->mem->cuda_dev;
    koloResult_t res = kolo_net_devmem_alloc(KOLO_CONN_CTRL_BYTES, e->dev, &mem, &dev_ctrl, s->eb);
    p->mem = mem;
    if (res == koloSuccess) res = kolo_net_devmem_alloc(slots_bytes, e->dev, &e->slot_mem, &dev_slots, s->eb);
    if (res != koloSuccess) {
      mem_free(p);
      free(e);
      return res;
    }
    slots = e->slot_mem;
  } else if ((mem = aligned_alloc(4096, bytes)) == NULL) {
    free(e);
    return kolo_error(s->eb, koloSystemError, "cannot allocate %zu bytes for the network pipe %s rank %d",
                      bytes, is_send ? "to" : "from", s->peer->rank);
  } else {
    slots = (char *)mem + KOLO_CONN_CTRL_BYTES;
  }
  memset(mem, 0, KOLO_CONN_CTRL_BYTES);
  p->mem = mem;
  p->net = kolo_net_default(s->eb);
  if (p->net == NULL) {
    mem_free(p);
    free(e);
    return koloInvalidArgument;
  }
  p->ctrl = mem;
  p->slots = slots;
  p->nslots = s->nslots;
  p->slot_bytes = s->slot_bytes;
  p->is_send = is_send;
  p->self = s->self->rank;
  p->peer = s->peer->rank;
  int t = timeout_ms();
  p->flush_ms = t > 0 && t < 10000 ? t : 10000;
  p->caller_bytes = caller_bytes(s);
  p->send_direct = is_send && !on_device(s) && p->net->send_slice_from != NULL &&
                   kolo_param_int("KOLO_NET_SEND_DIRECT") != 0;
  char addr[80];
  kolo_addr_str(&s->peer->addr, addr, sizeof addr);
  snprintf(p->who, sizeof p->who, "rank %d (%s)", s->peer->rank, addr);
  c->mem = p;
  c->mem_bytes = bytes;
  c->ctrl = p->ctrl;
  c->slots = p->slots;
  if (dev_ctrl != NULL) { /* what kernels address: the same bytes */
    char *d = dev_ctrl;
    c->slots = dev_slots;
    c->dev.tail = (uint32_t *)(d + offsetof(kolo_conn_ctrl, tail));
    c->dev.head = (uint32_t *)(d + offsetof(kolo_conn_ctrl, head));
    c->dev.stop = (uint32_t *)(d + offsetof(kolo_conn_ctrl, abort));
    c->dev.ll_slots = NULL;
    c->dev.ll_slot_bytes = 0;
    c->dev.cuda_dev = s->mem->cuda_dev;
  }
  return koloSuccess;
}

kolo_net_pipe *kolo_net_pipe_of(const kolo_connector *c) {
  return c != NULL && c->transport == &kolo_transport_net ? c->mem : NULL;
}

static koloResult_t net_recv_create(const kolo_conn_setup *s, kolo_connector *c, char *desc) {
  koloResult_t res = pipe_new(s, c, 0);
  if (res != koloSuccess) return res;
  c->sig_late = 1; /* the engine writes each call's signature with its slice */
  kolo_net_pipe *p = c->mem;
  int ndev = 0;
  res = p->net->devices(&ndev, s->eb);
  if (res == koloSuccess && ndev < 1) { /* devices() said why in eb */
    char why[KOLO_ERR_LEN];
    kolo_error_read(s->eb ? s->eb : kolo_thread_errbuf(), why, sizeof why);
    res = kolo_error(s->eb, koloSystemError, "the %s network provider has no usable device: %.400s",
                     p->net->name, why);
  }
  kolo_net_handle h;
  /* The bootstrap's address: the interface KOLO_SOCKET_IFNAME chose. */
  if (res == koloSuccess) res = p->net->listen(&s->self->addr, c->channel, &h, &p->lcomm, s->eb);
  if (res != koloSuccess) {
    c->transport->close(c);
    return res;
  }
  kolo_encode_net_desc(&h, p->net->name, (uint8_t *)desc);
  return koloSuccess;
}

static koloResult_t net_recv_accept(const kolo_conn_setup *s, kolo_connector *c) {
  kolo_net_pipe *p = c->mem;
  int t = timeout_ms();
  koloResult_t res = p->net->accept(p->lcomm, kolo_deadline(t), t, p->who, &p->comm, s->eb);
  p->net->close_listen(p->lcomm);
  p->lcomm = NULL;
  if (res == koloSuccess) try_gdr(c, p);
  if (res == koloSuccess) res = kolo_proxy_add(p, s->eb);
  return res;
}

static koloResult_t net_send_attach(const kolo_conn_setup *s, kolo_connector *c, const char *desc) {
  koloResult_t res = pipe_new(s, c, 1);
  if (res != koloSuccess) return res;
  kolo_net_pipe *p = c->mem;
  kolo_net_handle h;
  char theirs[DESC_NAME_BYTES], why[KOLO_ERR_LEN];
  if (kolo_decode_net_desc(desc, KOLO_CONN_DESC_BYTES, s->peer->rank, &h, theirs, why, sizeof why) !=
      KOLO_CONN_WIRE_OK) {
    res = kolo_error(s->eb, koloRemoteError, "%s", why);
    c->transport->close(c);
    return res;
  }
  if (strcmp(theirs, p->net->name) != 0) {
    res = kolo_error(s->eb, koloInvalidUsage,
                     "%s listens with the %s network provider, this rank uses %s (set the same KOLO_NET "
                     "on every rank)", p->who, theirs, p->net->name);
    c->transport->close(c);
    return res;
  }
  int t = timeout_ms();
  res = p->net->connect(&h, c->channel, kolo_deadline(t), t, p->who, &p->comm, s->eb);
  if (res == koloSuccess) try_gdr(c, p);
  if (res == koloSuccess) res = kolo_proxy_add(p, s->eb);
  if (res != koloSuccess) c->transport->close(c);
  return res;
}

static void net_recv_attached(kolo_connector *c) {
  kolo_net_pipe *p = c->mem;
  if (p == NULL || p->lcomm == NULL) return;
  p->net->close_listen(p->lcomm);
  p->lcomm = NULL;
}

static void net_close(kolo_connector *c) {
  kolo_net_pipe *p = c->mem;
  if (p == NULL) return;
  kolo_proxy_remove(p, c->close_by);
  if (p->lcomm) p->net->close_listen(p->lcomm);
  if (p->comm) p->net->close(p->comm); /* deregisters GPUDirect slots before they are freed */
  mem_free(p);
  free(p); /* the net_end */
  c->mem = NULL;
  c->ctrl = NULL;
  c->slots = NULL;
}

static void net_kick(kolo_connector *c) { kolo_net_pipe_kick(c->mem); }
static int net_sends_from(const kolo_connector *c, size_t bytes) { return kolo_net_pipe_sends_from(c->mem, bytes); }
static void net_send_from(kolo_connector *c, const void *src, size_t bytes) { kolo_net_pipe_send(c->mem, c, src, bytes); }
static int net_progress(kolo_connector *c) { return kolo_net_pipe_pull(c->mem); }
static void net_wait(kolo_connector *c, int timeout_us) { kolo_net_pipe_wait(c->mem, c, timeout_us); }

const kolo_transport kolo_transport_net = {
    .name = "net",
    .can_connect = net_can_connect,
    .recv_create = net_recv_create,
    .send_attach = net_send_attach,
    .recv_accept = net_recv_accept,
    .recv_attached = net_recv_attached,
    .close = net_close,
    .kick = net_kick,
    .sends_from = net_sends_from,
    .send_from = net_send_from,
    .progress = net_progress,
    .wait = net_wait,
};
