/* ib_dev.h - RDMA devices for the ib provider (net_ib.c): which ports are
 * usable, their addresses (LID, GID), opening them, and registering memory
 * with errors that say what to do.  Built only with libibverbs.
 *
 * A port is usable when KOLO_IB_HCA selects it (ib_select.h), it is
 * ACTIVE, and on Ethernet (RoCE) it has a GID to route by: the one at
 * KOLO_IB_GID_INDEX, or else the first RoCEv2 GID holding an IPv4 address
 * (ibv_query_gid_ex, or sysfs gid_attrs/types where that query fails).  On
 * InfiniBand the port's LID routes and GID index 0 is kept for reference.
 * Thread safe (no state). */
#ifndef KOLO_TRANSPORT_IB_DEV_H
#define KOLO_TRANSPORT_IB_DEV_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct {
  char name[64];
  int port;
  int gid_index;
  union ibv_gid gid;
  uint16_t lid;
  uint8_t link_layer; /* IBV_LINK_LAYER_ETHERNET or _INFINIBAND */
  enum ibv_mtu mtu;   /* the port's active MTU */
  uint32_t max_msg;   /* the port's largest message */
} kolo_ib_port;

/* The usable ports in device order, up to max of them in out; *n their
 * number.  When none is usable, why says why (every device and port that
 * was left out, and for what); nothing is logged: having no RDMA is normal.
 * Fails (logged, in eb) only for a malformed KOLO_IB_HCA. */
koloResult_t kolo_ib_ports(kolo_ib_port *out, int max, int *n, char *why, size_t why_len,
                           kolo_errbuf *eb);
/* Opens the device of port p. */
koloResult_t kolo_ib_open(const kolo_ib_port *p, struct ibv_context **ctx, kolo_errbuf *eb);
/* ibv_reg_mr; on failure names the device and, when pinning was refused,
 * the locked-memory limit (RLIMIT_MEMLOCK) and how to raise it. */
koloResult_t kolo_ib_reg(struct ibv_pd *pd, const char *dev, void *addr, size_t len, int access,
                         struct ibv_mr **mr, kolo_errbuf *eb);
/* "10.77.0.1" for IPv4-mapped GIDs, else the IPv6 form. */
void kolo_ib_gid_str(const union ibv_gid *g, char *buf, size_t len);
/* A hint to append to a failed create (QP, CQ, PD) when errno says that
 * locked memory ran out; "" otherwise. */
const char *kolo_ib_memlock_hint(int err, char *buf, size_t len);

#endif
