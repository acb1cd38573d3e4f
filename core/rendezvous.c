/* rendezvous.c - ids of a rendezvous at a known address (rendezvous.h). */
#include "core/rendezvous.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "transport/socket.h"

/* "host:port" or "[v6]:port" into host and port. */
static koloResult_t split_host_port(const char *what, const char *where, char *host, size_t len,
                                    const char **port) {
  const char *colon = strrchr(where, ':');
  if (colon == NULL || colon == where || colon[1] == '\0' || (size_t)(colon - where) >= len)
    return kolo_error(NULL, koloInvalidArgument, "%s=%s is not host:port", what, where);
  memcpy(host, where, (size_t)(colon - where));
  host[colon - where] = '\0';
  *port = colon + 1;
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    memmove(host, host + 1, n - 2);
    host[n - 2] = '\0';
  }
  return koloSuccess;
}

static koloResult_t resolve(const char *what, const char *where, struct sockaddr_storage *addr) {
  char host[256];
  const char *port = NULL;
  koloResult_t res = split_host_port(what, where, host, sizeof host, &port);
  if (res != koloSuccess) return res;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  int err = getaddrinfo(host, port, &hints, &ai);
  if (err != 0)
    return kolo_error(NULL, koloInvalidArgument, "%s=%s: cannot resolve %s port %s: %s", what, where, host, port,
                      gai_strerror(err));
  memset(addr, 0, sizeof *addr);
  memcpy(addr, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (kolo_addr_port(addr) == 0) return kolo_error(NULL, koloInvalidArgument, "%s=%s: port 0", what, where);
  return koloSuccess;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static koloResult_t secret_from_hex(const char *hex, uint8_t *secret) {
  if (strlen(hex) != 2 * KOLO_SECRET_BYTES)
    return kolo_error(NULL, koloInvalidArgument, "KOLO_SECRET must be %d hex digits", 2 * KOLO_SECRET_BYTES);
  for (int i = 0; i < KOLO_SECRET_BYTES; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return kolo_error(NULL, koloInvalidArgument, "KOLO_SECRET is not hex");
    secret[i] = (uint8_t)(hi * 16 + lo);
  }
  return koloSuccess;
}

/* Every rank can compute it, but so can anyone who knows the job. */
static void secret_from_job(const char *where, int nranks, uint8_t *secret) {
  static const char *ids[] = {"MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "OMPI_MCA_orte_ess_jobid",
                              "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"};
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull ^ (uint64_t)nranks;
  for (size_t i = 0; i <= sizeof ids / sizeof ids[0]; i++) {
    const char *v = i == 0 ? where : getenv(ids[i - 1]);
    for (const char *p = v ? v : ""; *p; p++) {
      h1 = (h1 ^ (uint8_t)*p) * 1099511628211ull;
      h2 = (h2 ^ h1) * 0xff51afd7ed558ccdull;
    }
  }
  memcpy(secret, &h1, 8);
  memcpy(secret + 8, &h2, 8);
  KOLO_WARN("KOLO_SECRET is not set: the bootstrap secret is derived from the job's environment, "
            "which keeps strays out but not an attacker who can read it");
}

koloResult_t kolo_rendezvous_uid(const char *what, const char *where, int nranks, kolo_uid *uid) {
  memset(uid, 0, sizeof *uid);
  koloResult_t res = resolve(what, where, &uid->root);
  if (res != koloSuccess) return res;
  const char *hex = kolo_param_str("KOLO_SECRET");
  if (hex != NULL) {
    res = secret_from_hex(hex, uid->secret);
    if (res != koloSuccess) return res;
  } else {
    secret_from_job(where, nranks, uid->secret);
  }
  uid->magic = KOLO_UID_MAGIC_ROOT_AT_INIT;
  /* The job id names shm segments: derived from the secret and the root. */
  memcpy(&uid->job, uid->secret, sizeof uid->job);
  uid->job ^= ((const uint64_t *)(const void *)&uid->root)[0];
  return koloSuccess;
}

koloResult_t kolo_rendezvous_start_root(const kolo_uid *uid, int rank, int timeout_ms, kolo_errbuf *eb) {
  if (uid->magic != KOLO_UID_MAGIC_ROOT_AT_INIT || rank != 0) return koloSuccess;
  kolo_uid served;
  return kolo_bootstrap_root_start(&uid->root, uid->secret, timeout_ms, &served, eb);
}

/* The pure reader of host:port alone (rendezvous.h). */
koloResult_t kolo_rendezvous_split(const char *where, char *host, size_t len, const char **port) {
  return split_host_port("KOLO_ROOT", where, host, len, port);
}
