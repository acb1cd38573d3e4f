/* perf_topo.c - `kolo-perf topo` (see perf_topo.h): its command line, the
 * order of the sections, and the host's own: name, boot id, KOLO_HOSTID,
 * CPUs and NUMA nodes as /sys lists them. */
#define _GNU_SOURCE /* gethostname */
#include "perf/perf_topo.h"

#include <dirent.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void perf_topo_host(FILE *out) {
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
    else if (c == 'c' && (channels = atoi(optarg)) >= 1 && channels <= 64) continue;
    else if (c == 'c') return fprintf(stderr, "kolo-perf topo: --channels %s: expected 1..64\n", optarg), 2;
    else return fprintf(stderr, "kolo-perf topo: %s %s (see --help)\n", c == ':' ? "missing value for" : "unknown option", argv[optind - 1]), 2;
  }
  if (optind != argc) return fprintf(stderr, "kolo-perf topo: unexpected argument '%s'\n", argv[optind]), 2;
  perf_topo_host(stdout);
  int ngpus = perf_topo_gpus(stdout);
  perf_topo_rdma(stdout);
  perf_topo_ifaces(stdout);
  char dflt[16];
  snprintf(dflt, sizeof dflt, "1x%d", ngpus > 0 ? ngpus : 4);
  int bad = perf_topo_rings(stdout, layout ? layout : dflt, channels);
  fflush(stdout);
  return bad ? 2 : 0;
}
