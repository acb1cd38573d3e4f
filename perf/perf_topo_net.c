/* perf_topo_net.c - kolo-perf topo's socket interfaces: every interface
 * with an IP address, which of them KOLO_SOCKET_IFNAME selects, and the
 * address kolo's bootstrap (and its TCP net pipes) would take
 * (kolo_bootstrap_pick_addr, NCCL's order of preference). */
#define _GNU_SOURCE /* IFF_UP, IFF_LOOPBACK (net/if.h under -std=c11) */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>

#include "common/config.h"
#include "perf/perf_topo.h"
#include "transport/bootstrap.h"
#include "transport/iface_select.h"

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

static void kolo_choice(FILE *out, const struct ifaddrs *ifs) {
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

void perf_topo_ifaces(FILE *out) {
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
  kolo_choice(out, ifs);
  freeifaddrs(ifs);
}
