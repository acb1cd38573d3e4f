/* nccl_env.c - NCCL's environment variables as aliases of kolo's, in a
 * process that loaded kolo's NCCL layer (installed when the library loads).
 *
 * A kolo setting whose KOLO_* variable is unset takes its NCCL twin's value,
 * translated where the two spell it differently (NCCL_NET=IB is kolo's ib,
 * NCCL_ALGO=Ring its ring, NCCL_DEBUG=VERSION a WARN log with the version
 * line); kolo's own name wins when both are set.  A value kolo cannot honour
 * (NCCL_ALGO=Tree: kolo has no all-reduce tree yet; NCCL_PROTO=LL128) is said once at
 * WARN and kolo's own choice is used; an NCCL_PROTO kolo cannot read fails
 * init, as KOLO_PROTO does (and NCCL does).  At the first init, the NCCL_*
 * variables set that kolo does not know are listed once at INFO. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/config.h"
#include "common/log.h"
#include "core/proto_select.h"
#include "nccl/nccl_layer.h"
#include "ring/algo_select.h"

extern char **environ;

typedef struct alias alias;
typedef const char *(*translate_fn)(alias *a, const char *value);

struct alias {
  const char *kolo, *nccl;
  translate_fn translate; /* NULL: the same spelling */
  atomic_int refused;     /* a value of it was said at WARN already */
};

/* A value kolo cannot honour: said once per variable, then ignored. */
static const char *refuse(alias *a, const char *value, const char *why) {
  if (atomic_exchange(&a->refused, 1) == 0) KOLO_WARN("%s=%s: %s; kolo's own choice is used", a->nccl, value, why);
  return NULL;
}

static const char *debug_level(alias *name, const char *v) {
  if (strcasecmp(v, "VERSION") == 0 || strcasecmp(v, "WARN") == 0 || strcasecmp(v, "ABORT") == 0) return "WARN";
  if (strcasecmp(v, "INFO") == 0) return "INFO";
  if (strcasecmp(v, "TRACE") == 0) return "TRACE";
  return refuse(name, v, "not a level kolo knows (VERSION, WARN, INFO or TRACE)");
}

static const char *net_name(alias *name, const char *v) {
  if (strcasecmp(v, "IB") == 0) return "ib";
  if (strcasecmp(v, "Socket") == 0) return "socket";
  return refuse(name, v, "kolo's network providers are IB and Socket");
}

/* kolo's all-reduce algorithms are ring, hier, rd, rabenseifner and direct,
 * its broadcast's ring, tree and dbtree, its all-gather's ring and bruck (a name
 * NCCL lacks, taken as KOLO_ALGO takes it); NCCL's Ring is kolo's ring
 * (NCCL's Tree is an all-reduce algorithm, so a bare "Tree" is refused as
 * KOLO_ALGO's is).
 * A value naming only those (KOLO_ALGO takes
 * NCCL_ALGO's syntax: ring/algo_select.h) is taken as it is; an exclusion
 * of NCCL's other algorithms that leaves Ring in changes nothing. */
static const char *algo_name(alias *name, const char *v) {
  char why[256];
  if (kolo_algo_allow_parse(v, why, sizeof why) >= 0) return v;
  if (v[0] == '^' && strcasestr(v, "ring") == NULL) return NULL;
  return refuse(name, v,
                "kolo has the ring, its hierarchical ring, recursive doubling, Rabenseifner's and direct (binomial "
                "and double binary trees for broadcast and Bruck's for all-gather only), no all-reduce tree, NVLS "
                "or CollNet yet");
}

/* NCCL_PROTO takes KOLO_PROTO's syntax (core/proto_select.h), which is
 * NCCL's.  A value NCCL takes that leaves kolo no protocol, since it asks
 * for LL128 only ("LL128", "allreduce:LL128"), is said and kolo's own
 * choice used; any other value goes to kolo as it is, so that one kolo
 * cannot read fails init naming it (as NCCL fails on a name it lacks). */
static const char *proto_list(alias *name, const char *v) {
  char why[256];
  int ll128 = 0;
  if (kolo_proto_off_parse(v, &ll128, why, sizeof why) != KOLO_PROTO_NONE_LEFT || !ll128) return v;
  return refuse(name, v, "kolo has LL and Simple, no LL128");
}

static alias aliases[] = {
    {"KOLO_DEBUG", "NCCL_DEBUG", debug_level, 0},
    {"KOLO_DEBUG_FILE", "NCCL_DEBUG_FILE", NULL, 0},
    {"KOLO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", NULL, 0},
    {"KOLO_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", NULL, 0},
    {"KOLO_IB_HCA", "NCCL_IB_HCA", NULL, 0},
    {"KOLO_IB_GID_INDEX", "NCCL_IB_GID_INDEX", NULL, 0},
    {"KOLO_IB_TIMEOUT", "NCCL_IB_TIMEOUT", NULL, 0},
    {"KOLO_IB_QPS_PER_CONN", "NCCL_IB_QPS_PER_CONNECTION", NULL, 0},
    {"KOLO_NET", "NCCL_NET", net_name, 0},
    {"KOLO_ALGO", "NCCL_ALGO", algo_name, 0},
    {"KOLO_PROTO", "NCCL_PROTO", proto_list, 0},
    {"KOLO_BUFFSIZE", "NCCL_BUFFSIZE", NULL, 0},
    {"KOLO_MIN_NCHANNELS", "NCCL_MIN_NCHANNELS", NULL, 0},
    {"KOLO_MAX_NCHANNELS", "NCCL_MAX_NCHANNELS", NULL, 0},
    {"KOLO_HOSTID", "NCCL_HOSTID", NULL, 0},
    {"KOLO_COMM_ID", "NCCL_COMM_ID", NULL, 0},
};
#define NALIASES (sizeof aliases / sizeof aliases[0])

static const char *nccl_fallback(const char *kolo_name) {
  for (size_t i = 0; i < NALIASES; i++) {
    if (strcmp(aliases[i].kolo, kolo_name) != 0) continue;
    const char *v = getenv(aliases[i].nccl);
    if (v == NULL || *v == '\0') return NULL;
    return aliases[i].translate ? aliases[i].translate(&aliases[i], v) : v;
  }
  return NULL;
}

__attribute__((constructor)) static void install_aliases(void) { kolo_param_set_fallback(nccl_fallback); }

static int known(const char *entry) {
  for (size_t i = 0; i < NALIASES; i++) {
    size_t n = strlen(aliases[i].nccl);
    if (strncmp(entry, aliases[i].nccl, n) == 0 && entry[n] == '=') return 1;
  }
  return 0;
}

/* The NCCL_* variables set that no kolo setting reads, in one line. */
static void list_unknown(void) {
  char line[1024] = "";
  size_t len = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "NCCL_", 5) != 0 || known(*e)) continue;
    size_t n = strcspn(*e, "=");
    if (len + n + 2 < sizeof line) len += (size_t)snprintf(line + len, sizeof line - len, " %.*s", (int)n, *e);
  }
  if (len > 0) KOLO_INFO("NCCL layer: these NCCL variables have no kolo setting and are ignored:%s", line);
}

void nccl_env_announce(void) {
  static atomic_int once;
  if (atomic_exchange(&once, 1)) return;
  const char *dbg = getenv("NCCL_DEBUG");
  if (dbg && (strcasecmp(dbg, "VERSION") == 0 || strcasecmp(dbg, "INFO") == 0 || strcasecmp(dbg, "TRACE") == 0))
    fprintf(stderr, "NCCL version %d.%d.%d (kolo %d.%d.%d: kolo's NCCL layer, not NVIDIA's NCCL)\n", NCCL_MAJOR,
            NCCL_MINOR, NCCL_PATCH, KOLO_MAJOR, KOLO_MINOR, KOLO_PATCH);
  list_unknown();
}
