/* init_env.c - koloCommInitFromEnv: joining a job started by a launcher.
 *
 * Rank and size come from the first launcher whose variables are set:
 * kolo's own (KOLO_RANK / KOLO_WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK /
 * OMPI_COMM_WORLD_SIZE), Slurm (SLURM_PROCID / SLURM_NTASKS), torchrun
 * (RANK / WORLD_SIZE).  The rendezvous is KOLO_ROOT=host:port, else torchrun's
 * MASTER_ADDR / MASTER_PORT; rank 0 listens there itself. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "common/config.h"
#include "common/log.h"

static const char *const launchers[][3] = {
    {"kolo", "KOLO_RANK", "KOLO_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
    {"torchrun", "RANK", "WORLD_SIZE"},
};

static int parse_nonneg(const char *s, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > (1 << 24)) return -1;
  *out = (int)v;
  return 0;
}

static koloResult_t find_rank(int *rank, int *size, const char **who) {
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
    const char *r = getenv(launchers[i][1]), *n = getenv(launchers[i][2]);
    if (r == NULL || n == NULL) continue;
    if (parse_nonneg(r, rank) != 0 || parse_nonneg(n, size) != 0 || *size < 1)
      return kolo_error(NULL, koloInvalidArgument, "koloCommInitFromEnv: %s=%s / %s=%s are not a rank and a size",
                        launchers[i][1], r, launchers[i][2], n);
    *who = launchers[i][0];
    return koloSuccess;
  }
  return kolo_error(NULL, koloInvalidUsage,
                    "koloCommInitFromEnv: no launcher variables (KOLO_RANK/KOLO_WORLD_SIZE, "
                    "OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS or RANK/WORLD_SIZE)");
}

static koloResult_t root_address(struct sockaddr_storage *addr) {
  char host[256];
  const char *port;
  const char *root = kolo_param_str("KOLO_ROOT");
  if (root != NULL) {
    const char *colon = strrchr(root, ':');
    if (colon == NULL || colon == root || (size_t)(colon - root) >= sizeof host)
      return kolo_error(NULL, koloInvalidArgument, "KOLO_ROOT=%s is not host:port", root);
    memcpy(host, root, (size_t)(colon - root));
    host[colon - root] = '\0';
    port = colon + 1;
    if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [v6]:port */
      memmove(host, host + 1, strlen(host));
      host[strlen(host) - 1] = '\0';
    }
  } else if (getenv("MASTER_ADDR") && getenv("MASTER_PORT")) {
    snprintf(host, sizeof host, "%s", getenv("MASTER_ADDR"));
    port = getenv("MASTER_PORT");
  } else {
    return kolo_error(NULL, koloInvalidUsage,
                      "koloCommInitFromEnv: set KOLO_ROOT=host:port (or MASTER_ADDR and MASTER_PORT)");
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int err = getaddrinfo(host, port, &hints, &res);
  if (err != 0)
    return kolo_error(NULL, koloInvalidArgument, "cannot resolve rendezvous %s port %s: %s", host, port,
                      gai_strerror(err));
  memset(addr, 0, sizeof *addr);
  memcpy(addr, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return koloSuccess;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* KOLO_SECRET, else a value derived from the job's identity: every rank can
 * compute it, but so can anyone who knows the job; a warning says so. */
static koloResult_t job_secret(uint8_t *secret, int size) {
  const char *hex = kolo_param_str("KOLO_SECRET");
  if (hex != NULL) {
    if (strlen(hex) != 2 * KOLO_SECRET_BYTES)
      return kolo_error(NULL, koloInvalidArgument, "KOLO_SECRET must be %d hex digits", 2 * KOLO_SECRET_BYTES);
    for (int i = 0; i < KOLO_SECRET_BYTES; i++) {
      int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) return kolo_error(NULL, koloInvalidArgument, "KOLO_SECRET is not hex");
      secret[i] = (uint8_t)(hi * 16 + lo);
    }
    return koloSuccess;
  }
  static const char *ids[] = {"KOLO_ROOT", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID",
                              "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"};
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull ^ (uint64_t)size;
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *v = getenv(ids[i]);
    for (const char *p = v ? v : ""; *p; p++) {
      h1 = (h1 ^ (uint8_t)*p) * 1099511628211ull;
      h2 = (h2 ^ h1) * 0xff51afd7ed558ccdull;
    }
  }
  memcpy(secret, &h1, 8);
  memcpy(secret + 8, &h2, 8);
  KOLO_WARN("KOLO_SECRET is not set: the bootstrap secret is derived from the job's environment, "
            "which keeps strays out but not an attacker who can read it");
  return koloSuccess;
}

koloResult_t koloCommInitFromEnv(koloComm_t *comm, koloConfig_t *config) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommInitFromEnv: comm is NULL");
  int rank = 0, size = 0;
  const char *who = NULL;
  kolo_uid uid;
  memset(&uid, 0, sizeof uid);
  koloResult_t res = find_rank(&rank, &size, &who);
  if (res == koloSuccess && rank >= size)
    res = kolo_error(NULL, koloInvalidArgument, "koloCommInitFromEnv: rank %d is not below size %d (%s)", rank, size, who);
  if (res == koloSuccess) res = root_address(&uid.root);
  if (res == koloSuccess) res = job_secret(uid.secret, size);
  if (res != koloSuccess) return res;
  uid.magic = KOLO_UID_MAGIC;
  /* The job id names shm segments: derive it from the secret and the root. */
  memcpy(&uid.job, uid.secret, sizeof uid.job);
  uid.job ^= ((const uint64_t *)(const void *)&uid.root)[0];
  KOLO_INFO("rank %d of %d from %s variables", rank, size, who);
  if (rank == 0) {
    kolo_uid served;
    int timeout = config && config->timeoutMs != KOLO_CONFIG_UNDEF ? config->timeoutMs
                                                                  : (int)kolo_param_int("KOLO_TIMEOUT_MS");
    res = kolo_bootstrap_root_start(&uid.root, uid.secret, timeout, &served, NULL);
    if (res != koloSuccess) return res;
  }
  koloUniqueId id;
  kolo_uid_encode(&uid, &id);
  return koloCommInitRankConfig(comm, size, id, rank, config);
}
