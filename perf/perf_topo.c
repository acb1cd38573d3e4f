/* perf_topo.c - `kolo-perf topo` (see perf_topo.h): its command line, the
 * order of the sections, the host's own (name, boot id, KOLO_HOSTID, CPUs
 * and NUMA nodes as /sys lists them) and its socket interfaces. */
#define _GNU_SOURCE /* gethostname; IFF_UP, IFF_LOOPBACK (net/if.h under -std=c11) */
#include "perf/perf_topo.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "perf/perf_args.h"
#include "transport/bootstrap.h"
#include "transport/iface_select.h"

int perf_topo_read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "re");
  if (f == NULL) return -1;
  int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "?". */
static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "?");
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
      snprintf(buf, len, "%s", strchr(line, ':') + 2);
      buf[strcspn(buf, "\n")] = '\0';
      break;
    }
  fclose(f);
}

static void numa_nodes(FILE *out) {
  DIR *d = opendir("/sys/devices/system/node");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "node", 4) != 0 || e->d_name[4] < '0' || e->d_name[4] > '9') continue;
    char path[300], cpus[256] = "?", mem[128] = "";
    snprintf(path, sizeof path, "/sys/devices/system/node/%s/cpulist", e->d_name);
    perf_topo_read_line(path, cpus, sizeof cpus);
    snprintf(path, sizeof path, "/sys/devices/system/node/%s/meminfo", e->d_name);
    if (perf_topo_read_line(path, mem, sizeof mem) == 0 && strstr(mem, "MemTotal:"))
      memmove(mem, strstr(mem, "MemTotal:") + 9, strlen(strstr(mem, "MemTotal:") + 9) + 1);
    fprintf(out, "#   NUMA %s: CPUs %s, memory%s\n", e->d_name + 4, cpus, mem[0] ? mem : " ?");
    n++;
  }
  if (d) closedir(d);
  if (n == 0) fprintf(out, "#   NUMA nodes: none found (no /sys/devices/system/node: not a NUMA kernel)\n");
}

static void host_section(FILE *out) {
  char host[256] = "?", boot[64] = "?", online[256] = "?", model[256];
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "? (gethostname failed)");
  perf_topo_read_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
  perf_topo_read_line("/sys/devices/system/cpu/online", online, sizeof online);
  cpu_model(model, sizeof model);
  const char *hostid = getenv("KOLO_HOSTID");
  fprintf(out, "# host\n#   name %s, boot id %s\n", host, boot);
  fprintf(out, "#   kolo's host identity: %s%s\n", hostid ? "KOLO_HOSTID=" : "hostname + boot id",
          hostid ? hostid : " (ranks with both equal share memory)");
  fprintf(out, "#   CPUs: %ld online (%s), %s\n", sysconf(_SC_NPROCESSORS_ONLN), online, model);
  numa_nodes(out);
}

/* Socket interfaces: every one with an IP address, which of them
 * KOLO_SOCKET_IFNAME selects, and the address kolo's bootstrap (and its TCP
 * net pipes) would take (kolo_bootstrap_pick_addr, NCCL's order). */
static const void *addr_of(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) return &((const struct sockaddr_in *)sa)->sin_addr;
  return &((const struct sockaddr_in6 *)sa)->sin6_addr;
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t len) {
  if (inet_ntop(sa->sa_family, addr_of(sa), buf, (socklen_t)len) == NULL) snprintf(buf, len, "?");
}

/* The interface holding address `want`, or "?". */
static const char *iface_of(const struct ifaddrs *ifs, const struct sockaddr_storage *want) {
  size_t n = want->ss_family == AF_INET ? sizeof(struct in_addr) : sizeof(struct in6_addr);
  for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == want->ss_family &&
        memcmp(addr_of(i->ifa_addr), addr_of((const struct sockaddr *)want), n) == 0)
      return i->ifa_name;
  return "?";
}

static void iface_choice(FILE *out, const struct ifaddrs *ifs) {
  struct sockaddr_storage a;
  kolo_errbuf eb = {0};
  char text[INET6_ADDRSTRLEN];
  if (kolo_bootstrap_pick_addr(&a, &eb) != koloSuccess) {
    fprintf(out, "#   kolo would use: none (%s)\n", eb.msg);
    return;
  }
  addr_text((const struct sockaddr *)&a, text, sizeof text);
  fprintf(out, "#   kolo would use: %s on %s (bootstrap, and TCP net pipes between hosts)\n", text, iface_of(ifs, &a));
}

static void ifaces(FILE *out) {
  struct ifaddrs *ifs;
  const char *spec = kolo_param_str("KOLO_SOCKET_IFNAME");
  fprintf(out, "# socket interfaces (KOLO_SOCKET_IFNAME=%s)\n", spec ? spec : "unset: NCCL's order");
  if (getifaddrs(&ifs) != 0) {
    fprintf(out, "#   none found (getifaddrs: %s)\n", strerror(errno));
    return;
  }
  int n = 0;
  for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    char text[INET6_ADDRSTRLEN];
    addr_text(i->ifa_addr, text, sizeof text);
    fprintf(out, "#   %-12s %-5s %-40s %s%s%s\n", i->ifa_name, i->ifa_addr->sa_family == AF_INET ? "IPv4" : "IPv6",
            text, (i->ifa_flags & IFF_UP) ? "up" : "down", (i->ifa_flags & IFF_LOOPBACK) ? ", loopback" : "",
            spec && kolo_iface_match(spec, i->ifa_name) ? ", selected by KOLO_SOCKET_IFNAME" : "");
    n++;
  }
  if (n == 0) fprintf(out, "#   none found (no interface has an IP address)\n");
  iface_choice(out, ifs);
  freeifaddrs(ifs);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: kolo-perf topo [--layout SPEC] [--channels N]\n"
          "  what kolo sees here and would use: host, CPUs and NUMA nodes, GPUs (CUDA; NVLink from\n"
          "  NVML when libnvidia-ml.so.1 is there), RDMA devices (ibverbs), socket interfaces, and\n"
          "  the rings kolo builds for a rank layout\n"
          "      --layout SPEC   HxR: H hosts of R ranks each (ranks numbered host by host), or\n"
          "                      each rank's host, e.g. 0,1,0,1 (default: this host, one rank per\n"
          "                      GPU found, or 4 ranks without one)\n"
          "      --channels N    rings to show (default: as many as the largest host has ranks,\n"
          "                      after which kolo's rings repeat)\n"
          "  -h, --help          this text\n");
}

int perf_topo_main(int argc, char **argv) {
  static const struct option longs[] = {{"layout", required_argument, NULL, 'l'},
                                        {"channels", required_argument, NULL, 'c'},
                                        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  const char *layout = NULL;
  int c, channels = 0;
  opterr = 0;
  optind = 2; /* past "topo" */
  while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
    if (c == 'h') return usage(stdout), 0;
    if (c == 'l') layout = optarg;
    else if (c == 'c' && perf_parse_int(optarg, 1, 64, &channels) == 0) continue;
    else if (c == 'c') return fprintf(stderr, "kolo-perf topo: --channels %s: expected 1..64\n", optarg), 2;
    else return fprintf(stderr, "kolo-perf topo: %s %s (see --help)\n", c == ':' ? "missing value for" : "unknown option", argv[optind - 1]), 2;
  }
  if (optind != argc) return fprintf(stderr, "kolo-perf topo: unexpected argument '%s'\n", argv[optind]), 2;
  host_section(stdout);
  int ngpus = perf_topo_gpus(stdout);
  perf_topo_rdma(stdout);
  ifaces(stdout);
  char dflt[16];
  snprintf(dflt, sizeof dflt, "1x%d", ngpus > 0 ? ngpus : 4);
  int bad = perf_topo_rings(stdout, layout ? layout : dflt, channels);
  fflush(stdout);
  return bad ? 2 : 0;
}
