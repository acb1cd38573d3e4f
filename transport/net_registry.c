/* net_registry.c - network providers by name, and the one net pipes use
 * (see net.h).
 *
 * KOLO_NET=ib|socket forces a provider.  Unset, ib wins when kolo was built
 * with libibverbs and ib's devices() finds a usable device (an ACTIVE port
 * with an address, as KOLO_IB_HCA filters them), else socket: a machine
 * without RDMA runs over TCP without any setting.  The probe opens devices,
 * so its answer is kept for the process; KOLO_NET is read at every call so
 * tests may switch it.  Thread safe. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/net.h"

static const kolo_net_provider *const providers[] = {
#ifdef KOLO_HAVE_IBVERBS
    &kolo_net_ib,
#endif
    &kolo_net_socket,
};
#define NPROVIDERS (sizeof providers / sizeof providers[0])

const kolo_net_provider *kolo_net_find(const char *name) {
  if (name == NULL) return NULL;
  for (size_t i = 0; i < NPROVIDERS; i++)
    if (strcmp(providers[i]->name, name) == 0) return providers[i];
  return NULL;
}

/* ---- the automatic choice --------------------------------------------------- */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static const kolo_net_provider *probed;
static char probe_why[KOLO_ERR_LEN];

static void probe(void) {
  probed = &kolo_net_socket;
#ifdef KOLO_HAVE_IBVERBS
  kolo_errbuf eb = {0};
  int ndev = 0;
  /* devices() reports "no device" into eb without logging it as an error:
   * falling back to TCP is the normal case on machines without RDMA. */
  if (kolo_net_ib.devices(&ndev, &eb) == koloSuccess && ndev > 0) {
    probed = &kolo_net_ib;
    strcpy(probe_why, "an RDMA device is usable");
    return;
  }
  memcpy(probe_why, eb.msg[0] ? eb.msg : "no RDMA device", sizeof probe_why - 1);
#else
  strcpy(probe_why, "kolo was built without libibverbs");
#endif
}

/* Logs the choice once per provider, not once per pipe. */
static void log_choice(const kolo_net_provider *p, const char *why) {
  static _Atomic unsigned logged;
  unsigned bit = p == &kolo_net_socket ? 1u : 2u;
  if (atomic_fetch_or(&logged, bit) & bit) return;
  KOLO_INFO("net pipes use the %s provider (%s)", p->name, why);
}

const kolo_net_provider *kolo_net_default(kolo_errbuf *eb) {
  const char *want = kolo_param_str("KOLO_NET");
  if (want != NULL) {
    const kolo_net_provider *p = kolo_net_find(want);
    if (p == NULL) {
#ifdef KOLO_HAVE_IBVERBS
      const char *known = "ib or socket";
#else
      const char *known = "socket (kolo was built without libibverbs, so not ib)";
#endif
      kolo_error(eb, koloInvalidArgument, "KOLO_NET=%s names no network provider (known: %s)", want,
                 known);
      return NULL;
    }
    log_choice(p, "KOLO_NET");
    return p;
  }
  pthread_once(&probe_once, probe);
  log_choice(probed, probe_why);
  return probed;
}
