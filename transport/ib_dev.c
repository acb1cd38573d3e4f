/* ib_dev.c - usable RDMA ports, opening and registering (see ib_dev.h). */
#include "transport/ib_dev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "common/config.h"
#include "transport/ib_select.h"

static int is_ipv4_mapped(const union ibv_gid *g) {
  static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g->raw, pfx, sizeof pfx) == 0;
}

void kolo_ib_gid_str(const union ibv_gid *g, char *buf, size_t len) {
  const void *src = is_ipv4_mapped(g) ? (const void *)(g->raw + 12) : (const void *)g->raw;
  if (inet_ntop(is_ipv4_mapped(g) ? AF_INET : AF_INET6, src, buf, (socklen_t)len) == NULL)
    snprintf(buf, len, "(unprintable GID)");
}

/* Appends a sentence to why ("; "-separated), bounded. */
static void add_why(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_why(char *why, size_t len, const char *fmt, ...) {
  size_t used = strlen(why);
  if (used + 3 >= len) return;
  if (used > 0) used += (size_t)snprintf(why + used, len - used, "; ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + used, len - used, fmt, ap);
  va_end(ap);
}

/* sysfs's word for GID `i`'s type ("RoCE v2", "IB/RoCE v1"); 0 when known. */
static int sysfs_gid_type(const char *dev, int port, int i, char *type, size_t len) {
  char path[256];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, i);
  FILE *f = fopen(path, "re");
  if (f == NULL) return -1;
  int ok = fgets(type, (int)len, f) != NULL;
  fclose(f);
  return ok ? 0 : -1;
}

/* RoCE: the first RoCEv2 GID holding an IPv4 address, or -1. */
static int find_rocev2_ipv4(struct ibv_context *ctx, const char *dev, int port, int tbl_len) {
  for (int i = 0; i < tbl_len; i++) {
    struct ibv_gid_entry e;
    if (ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)i, &e, 0) == 0) {
      if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && is_ipv4_mapped(&e.gid)) return i;
      continue;
    }
    /* An empty entry, or a kernel without the entry query: sysfs knows. */
    char type[32] = "";
    union ibv_gid g;
    if (sysfs_gid_type(dev, port, i, type, sizeof type) == 0 && strncmp(type, "RoCE v2", 7) == 0 &&
        ibv_query_gid(ctx, (uint8_t)port, i, &g) == 0 && is_ipv4_mapped(&g))
      return i;
  }
  return -1;
}

/* Fills p's GID; 0, or -1 with the reason added to why. */
static int pick_gid(struct ibv_context *ctx, const struct ibv_port_attr *pa, kolo_ib_port *p,
                    char *why, size_t why_len) {
  int64_t want = kolo_param_int("KOLO_IB_GID_INDEX");
  int idx = 0;
  if (want >= 0) {
    if (want >= pa->gid_tbl_len) {
      add_why(why, why_len, "KOLO_IB_GID_INDEX=%lld is outside %s port %d's GID table (0..%d)",
              (long long)want, p->name, p->port, pa->gid_tbl_len - 1);
      return -1;
    }
    idx = (int)want;
  } else if (pa->link_layer == IBV_LINK_LAYER_ETHERNET) {
    idx = find_rocev2_ipv4(ctx, p->name, p->port, pa->gid_tbl_len);
    if (idx < 0) {
      add_why(why, why_len,
              "%s port %d has no RoCEv2 GID with an IPv4 address (give its network interface an IPv4 "
              "address, or set KOLO_IB_GID_INDEX)", p->name, p->port);
      return -1;
    }
  }
  if (ibv_query_gid(ctx, (uint8_t)p->port, idx, &p->gid) != 0) {
    add_why(why, why_len, "ibv_query_gid(%s port %d index %d) failed: %s", p->name, p->port, idx,
            strerror(errno));
    return -1;
  }
  p->gid_index = idx;
  return 0;
}

/* The usable ports of one open device, appended to out[*n..max). */
static void device_ports(struct ibv_context *ctx, const char *name, const kolo_ib_hca_list *sel,
                         kolo_ib_port *out, int max, int *n, char *why, size_t why_len) {
  struct ibv_device_attr da;
  if (ibv_query_device(ctx, &da) != 0) {
    add_why(why, why_len, "ibv_query_device(%s) failed: %s", name, strerror(errno));
    return;
  }
  for (int port = 1; port <= da.phys_port_cnt; port++) {
    if (!kolo_ib_hca_match(sel, name, port)) {
      add_why(why, why_len, "KOLO_IB_HCA=%s leaves out %s port %d", kolo_param_str("KOLO_IB_HCA"), name,
              port);
      continue;
    }
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, (uint8_t)port, &pa) != 0) {
      add_why(why, why_len, "ibv_query_port(%s, %d) failed: %s", name, port, strerror(errno));
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      add_why(why, why_len, "%s port %d is %s, not ACTIVE (is its link up and cabled?)", name, port,
              ibv_port_state_str(pa.state));
      continue;
    }
    kolo_ib_port p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "%s", name);
    p.port = port;
    p.lid = pa.lid;
    p.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                            : IBV_LINK_LAYER_INFINIBAND;
    p.mtu = pa.active_mtu;
    p.max_msg = pa.max_msg_sz;
    if (pick_gid(ctx, &pa, &p, why, why_len) != 0) continue;
    if (*n < max) out[*n] = p;
    (*n)++;
  }
}

koloResult_t kolo_ib_ports(kolo_ib_port *out, int max, int *n, char *why, size_t why_len,
                           kolo_errbuf *eb) {
  *n = 0;
  why[0] = '\0';
  const char *spec = kolo_param_str("KOLO_IB_HCA");
  kolo_ib_hca_list sel;
  char bad[160];
  if (kolo_ib_hca_parse(spec, &sel, bad, sizeof bad) != 0)
    return kolo_error(eb, koloInvalidArgument, "KOLO_IB_HCA=%s: %s", spec, bad);
  int ndev = 0;
  struct ibv_device **list = ibv_get_device_list(&ndev);
  if (list == NULL) {
    add_why(why, why_len, "ibv_get_device_list failed: %s (is the ib_uverbs module loaded?)",
            strerror(errno));
    return koloSuccess;
  }
  if (ndev == 0) add_why(why, why_len, "no RDMA device is present");
  for (int i = 0; i < ndev; i++) {
    const char *name = ibv_get_device_name(list[i]);
    struct ibv_context *ctx = ibv_open_device(list[i]);
    if (ctx == NULL) {
      add_why(why, why_len, "ibv_open_device(%s) failed: %s", name, strerror(errno));
      continue;
    }
    device_ports(ctx, name, &sel, out, max, n, why, why_len);
    if (ibv_close_device(ctx) != 0) add_why(why, why_len, "ibv_close_device(%s) failed", name);
  }
  ibv_free_device_list(list);
  return koloSuccess;
}

koloResult_t kolo_ib_open(const kolo_ib_port *p, struct ibv_context **ctx, kolo_errbuf *eb) {
  *ctx = NULL;
  int ndev = 0;
  struct ibv_device **list = ibv_get_device_list(&ndev);
  if (list == NULL) return kolo_syserror(eb, errno, "ibv_get_device_list failed");
  for (int i = 0; i < ndev && *ctx == NULL; i++) {
    if (strcmp(ibv_get_device_name(list[i]), p->name) != 0) continue;
    *ctx = ibv_open_device(list[i]);
    if (*ctx == NULL) {
      int err = errno;
      ibv_free_device_list(list);
      return kolo_syserror(eb, err, "ibv_open_device(%s) failed", p->name);
    }
  }
  ibv_free_device_list(list);
  if (*ctx == NULL) return kolo_error(eb, koloSystemError, "the RDMA device %s went away", p->name);
  return koloSuccess;
}

const char *kolo_ib_memlock_hint(int err, char *buf, size_t len) {
  struct rlimit rl;
  buf[0] = '\0';
  if ((err == ENOMEM || err == EPERM || err == EAGAIN) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
      rl.rlim_cur != RLIM_INFINITY)
    snprintf(buf, len,
             " (the locked-memory limit is %llu KiB: raise it with ulimit -l unlimited, memlock in "
             "/etc/security/limits.conf, or docker run --ulimit memlock=-1)",
             (unsigned long long)rl.rlim_cur / 1024);
  return buf;
}

koloResult_t kolo_ib_reg(struct ibv_pd *pd, const char *dev, void *addr, size_t len, int access,
                         struct ibv_mr **mr, kolo_errbuf *eb) {
  *mr = ibv_reg_mr(pd, addr, len, access);
  if (*mr != NULL) return koloSuccess;
  int err = errno;
  char hint[200];
  return kolo_error(eb, koloSystemError, "ibv_reg_mr(%s, %zu bytes at %p) failed: %s%s", dev, len, addr,
                    strerror(err), kolo_ib_memlock_hint(err, hint, sizeof hint));
}
