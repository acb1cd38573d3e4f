/* fuzz_conn_desc.c - what a rank decodes when a peer offers it a pipe
 * (transport/conn_wire.h): the offer, then its descriptor as the offered
 * transport's decoder reads it (local, shm, p2p, net), and for net the
 * provider's handle as both providers read it.  Input: an encoded offer
 * (KOLO_CONN_OFFER_BYTES); shorter or longer inputs exercise the offer's
 * length check, and every descriptor decoder is also fed the raw input. */
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "transport/conn_wire.h"

/* Transports by their number in connect.c's table. */
enum { T_LOCAL, T_SHM, T_P2P, T_NET, NTRANSPORTS };

static void net_handle(const kolo_net_handle *h) {
  kolo_net_listen_info l;
  char why[512];
  for (int i = 0; i < 2; i++) {
    uint32_t magic = i ? KOLO_NET_HANDLE_IB_MAGIC : KOLO_NET_HANDLE_SOCK_MAGIC;
    if (kolo_decode_net_handle(h, magic, "rank 1", &l, why, sizeof why) != KOLO_CONN_WIRE_OK) continue;
    FUZZ_REQUIRE(l.magic == magic && l.nconns >= 1 && l.nconns <= KOLO_NET_MAX_STREAMS);
    FUZZ_REQUIRE(l.addr.ss_family == AF_INET || l.addr.ss_family == AF_INET6);
  }
}

static void descriptor(uint32_t t, const uint8_t *d, size_t len) {
  char why[512], name[KOLO_SHM_NAME_BYTES], provider[KOLO_NET_PROVIDER_BYTES];
  uint64_t addr;
  kolo_p2p_desc p;
  kolo_net_handle h;
  if (t == T_LOCAL && kolo_decode_local_desc(d, len, 1, &addr, why, sizeof why) == KOLO_CONN_WIRE_OK)
    FUZZ_REQUIRE(addr != 0);
  if (t == T_SHM && kolo_decode_shm_desc(d, len, 1, name, why, sizeof why) == KOLO_CONN_WIRE_OK)
    FUZZ_REQUIRE(strncmp(name, "/kolo-", 6) == 0 && strchr(name + 1, '/') == NULL);
  if (t == T_P2P && kolo_decode_p2p_desc(d, len, 1, &p, why, sizeof why) == KOLO_CONN_WIRE_OK)
    FUZZ_REQUIRE((p.mode == KOLO_P2P_LOCAL || p.mode == KOLO_P2P_IPC) && p.dev >= 0 && p.bytes > 0);
  if (t == T_NET && kolo_decode_net_desc(d, len, 1, &h, provider, why, sizeof why) == KOLO_CONN_WIRE_OK) {
    FUZZ_REQUIRE(strnlen(provider, sizeof provider) < sizeof provider);
    net_handle(&h);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kolo_conn_offer o;
  char why[512];
  if (kolo_decode_conn_offer(data, size, NTRANSPORTS, 1, &o, why, sizeof why) == KOLO_CONN_WIRE_OK) {
    FUZZ_REQUIRE(o.transport < NTRANSPORTS);
    descriptor(o.transport, o.desc, sizeof o.desc);
  }
  for (uint32_t t = 0; t < NTRANSPORTS; t++) descriptor(t, data, size);
  if (size >= KOLO_NET_HANDLE_BYTES) {
    kolo_net_handle h;
    memcpy(h.bytes, data, sizeof h.bytes);
    net_handle(&h);
  }
  return 0;
}
