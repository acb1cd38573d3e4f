/* init_env.c - koloCommInitFromEnv: joining a job started by a launcher.
 *
 * Rank and size come from the first launcher whose variables are set:
 * kolo's own (KOLO_RANK / KOLO_WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK /
 * OMPI_COMM_WORLD_SIZE), Slurm (SLURM_PROCID / SLURM_NTASKS), torchrun
 * (RANK / WORLD_SIZE).  The rendezvous is KOLO_ROOT=host:port, else torchrun's
 * MASTER_ADDR / MASTER_PORT; rank 0 starts the root there at init
 * (core/rendezvous.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/rendezvous.h"
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

/* KOLO_ROOT, else torchrun's MASTER_ADDR:MASTER_PORT. */
static koloResult_t rendezvous(char *where, size_t len, const char **what) {
  const char *root = kolo_param_str("KOLO_ROOT");
  if (root != NULL) {
    snprintf(where, len, "%s", root);
    *what = "KOLO_ROOT";
    return koloSuccess;
  }
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr == NULL || port == NULL)
    return kolo_error(NULL, koloInvalidUsage,
                      "koloCommInitFromEnv: set KOLO_ROOT=host:port (or MASTER_ADDR and MASTER_PORT)");
  snprintf(where, len, strchr(addr, ':') ? "[%s]:%s" : "%s:%s", addr, port);
  *what = "MASTER_ADDR:MASTER_PORT";
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
  char where[300];
  const char *what = NULL;
  if (res == koloSuccess) res = rendezvous(where, sizeof where, &what);
  if (res == koloSuccess) res = kolo_rendezvous_uid(what, where, size, &uid);
  if (res != koloSuccess) return res;
  KOLO_INFO("rank %d of %d from %s variables", rank, size, who);
  koloUniqueId id;
  kolo_uid_encode(&uid, &id);
  return koloCommInitRankConfig(comm, size, id, rank, config);
}
