/* rendezvous.c - ids of a rendezvous at a known address (rendezvous.h). */
#include "core/rendezvous.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "core/job_secret.h"
#include "transport/socket.h"

/* "host:port" or "[v6]:port" into host and port. */
static koloResult_t split_host_port(const char *what, const char *where, char *host, size_t len,
                                    const char **port) {
  const char *colon = strrchr(where, ':');
  if (colon == NULL || colon == where || colon[1] == '\0' || (size_t)(colon - where) >= len)
    return kolo_error(NULL, koloInvalidArgument, "%s=%s is not host:port", what, where);
  char *end;
  long port_no = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port_no < 1 || port_no > 65535)
    return kolo_error(NULL, koloInvalidArgument, "%s=%s: the port %s is not a number in 1..65535", what, where,
                      colon + 1);
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

koloResult_t kolo_rendezvous_uid(const char *what, const char *where, int nranks, kolo_uid *uid) {
  memset(uid, 0, sizeof *uid);
  koloResult_t res = resolve(what, where, &uid->root);
  if (res != koloSuccess) return res;
  res = kolo_job_secret(where, nranks, uid->secret);
  if (res != koloSuccess) return res;
  uid->magic = KOLO_UID_MAGIC_ROOT_AT_INIT;
  /* The job id names shm segments: derived from the secret and the root. */
  memcpy(&uid->job, uid->secret, sizeof uid->job);
  uid->job ^= ((const uint64_t *)(const void *)&uid->root)[0];
  return koloSuccess;
}

koloResult_t kolo_rendezvous_start_root(const kolo_uid *uid, int rank, int timeout_ms, kolo_errbuf *eb,
                                        kolo_root **root) {
  *root = NULL;
  if (uid->magic != KOLO_UID_MAGIC_ROOT_AT_INIT || rank != 0) return koloSuccess;
  kolo_uid served;
  return kolo_bootstrap_root_start_owned(&uid->root, uid->secret, timeout_ms, &served, eb, root);
}

/* The pure reader of host:port alone (rendezvous.h). */
koloResult_t kolo_rendezvous_split(const char *where, char *host, size_t len, const char **port) {
  return split_host_port("KOLO_ROOT", where, host, len, port);
}
