/* perf_topo_ib.c - kolo-perf topo's RDMA devices: every ibverbs device and
 * port (state, link layer, speed, MTU, GIDs), then the ports kolo's ib
 * provider would use (transport/ib_dev.c's choice, KOLO_IB_HCA and
 * KOLO_IB_GID_INDEX applied) or why none. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "perf/perf_topo.h"

#ifdef KOLO_HAVE_IBVERBS
#include <infiniband/verbs.h>

#include "transport/ib_dev.h"

#define TOPO_MAX_GIDS 8

/* ibv_port_attr's active_speed and active_width are one bit each: bit k
 * stands for speeds[k] Gb/s per lane, widths[k] lanes; 0 for no such bit. */
static int bit_of(uint8_t v) { return v != 0 && (v & (v - 1)) == 0 ? __builtin_ctz(v) : -1; }

static double lane_gbps(uint8_t speed) {
  static const double speeds[8] = {2.5, 5.0, 10.0, 10.0, 14.0, 25.0, 50.0, 100.0};
  return bit_of(speed) >= 0 ? speeds[bit_of(speed)] : 0;
}

static int lanes(uint8_t width) {
  static const int widths[5] = {1, 4, 8, 12, 2};
  return bit_of(width) >= 0 && bit_of(width) < 5 ? widths[bit_of(width)] : 0;
}

static void gids(FILE *out, struct ibv_context *ctx, const char *dev, int port, int tbl_len) {
  int shown = 0;
  for (int i = 0; i < tbl_len && shown < TOPO_MAX_GIDS; i++) {
    union ibv_gid g;
    static const union ibv_gid zero;
    if (ibv_query_gid(ctx, (uint8_t)port, i, &g) != 0 || memcmp(&g, &zero, sizeof g) == 0) continue;
    char text[64], type[32] = "", path[256];
    kolo_ib_gid_str(&g, text, sizeof text);
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, i);
    perf_topo_read_line(path, type, sizeof type);
    fprintf(out, "#       GID %d: %s%s%s\n", i, text, type[0] ? ", " : "", type);
    shown++;
  }
  if (shown == 0) fprintf(out, "#       GIDs: none set\n");
}

static void device(FILE *out, struct ibv_device *d) {
  const char *name = ibv_get_device_name(d);
  struct ibv_context *ctx = ibv_open_device(d);
  struct ibv_device_attr da;
  if (ctx == NULL || ibv_query_device(ctx, &da) != 0) {
    fprintf(out, "#   %s: cannot open or query it: %s\n", name, strerror(errno));
    if (ctx) ibv_close_device(ctx);
    return;
  }
  fprintf(out, "#   %s: %d port(s), firmware %s\n", name, da.phys_port_cnt, da.fw_ver);
  for (int port = 1; port <= da.phys_port_cnt; port++) {
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, (uint8_t)port, &pa) != 0) {
      fprintf(out, "#     port %d: ibv_query_port failed: %s\n", port, strerror(errno));
      continue;
    }
    fprintf(out, "#     port %d: %s, %s, %dx %.1f Gb/s = %.0f Gb/s, MTU %d, LID %u\n", port,
            ibv_port_state_str(pa.state), pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand",
            lanes(pa.active_width), lane_gbps(pa.active_speed), lanes(pa.active_width) * lane_gbps(pa.active_speed),
            128 << pa.active_mtu, (unsigned)pa.lid);
    gids(out, ctx, name, port, pa.gid_tbl_len);
  }
  ibv_close_device(ctx);
}

/* What kolo's ib provider picks (ib_dev.h), or why nothing. */
static void kolo_choice(FILE *out) {
  kolo_ib_port ports[16];
  char why[1024], gid[64];
  int n = 0;
  kolo_errbuf eb = {0};
  if (kolo_ib_ports(ports, 16, &n, why, sizeof why, &eb) != koloSuccess) {
    fprintf(out, "#   kolo would use: nothing: %s\n", eb.msg);
    return;
  }
  if (n == 0) fprintf(out, "#   kolo would use: none (%s)\n", why[0] ? why : "no usable port");
  for (int i = 0; i < n && i < 16; i++) {
    kolo_ib_gid_str(&ports[i].gid, gid, sizeof gid);
    fprintf(out, "#   kolo would use: %s port %d, GID index %d (%s)\n", ports[i].name, ports[i].port,
            ports[i].gid_index, gid);
  }
}

void perf_topo_rdma(FILE *out) {
  int n = 0;
  fprintf(out, "# RDMA devices (ibverbs)\n");
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list == NULL) {
    fprintf(out, "#   none found (ibv_get_device_list: %s; is the ib_uverbs module loaded?)\n", strerror(errno));
    return;
  }
  if (n == 0) fprintf(out, "#   none found (no RDMA device is present)\n");
  for (int i = 0; i < n; i++) device(out, list[i]);
  ibv_free_device_list(list);
  if (n > 0) kolo_choice(out);
}

#else /* no ibverbs */

void perf_topo_rdma(FILE *out) {
  fprintf(out, "# RDMA devices (ibverbs)\n#   none found (this build has no libibverbs: kolo runs over TCP "
               "only)\n");
}

#endif
