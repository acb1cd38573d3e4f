/* init_env.c - koloCommInitFromEnv: joining a job started by a launcher.
 *
 * Rank and size come from the first launcher whose variables are set:
 * kolo's own (KOLO_RANK / KOLO_WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK /
 * OMPI_COMM_WORLD_SIZE), Slurm (SLURM_PROCID / SLURM_NTASKS), torchrun
 * (RANK / WORLD_SIZE).  The rendezvous is KOLO_ROOT=host:port; else, under a
 * PMIx launcher (mpirun, srun), an id exchanged through its store
 * (core/rendezvous_pmix.h); else torchrun's MASTER_ADDR at MASTER_PORT + 1
 * (its own store holds MASTER_PORT).  Rank 0 starts the root at init. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/comm.h"
#include "core/rendezvous.h"
#include "core/rendezvous_pmix.h"
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

/* torchrun's own store listens on MASTER_PORT: kolo's root takes
 * MASTER_PORT + KOLO_TORCH_PORT_OFFSET (default 1), a rule every rank
 * computes alone. */
static koloResult_t torchrun_root(char *where, size_t len) {
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (addr == NULL || port == NULL)
    return kolo_error(NULL, koloInvalidUsage,
                      "koloCommInitFromEnv: set KOLO_ROOT=host:port (or MASTER_ADDR and MASTER_PORT, or start "
                      "the ranks with a PMIx launcher)");
  int master = 0;
  int64_t offset = kolo_param_int("KOLO_TORCH_PORT_OFFSET");
  if (parse_nonneg(port, &master) != 0 || master < 1 || master > 65535)
    return kolo_error(NULL, koloInvalidArgument, "koloCommInitFromEnv: MASTER_PORT=%s is not a port in 1..65535", port);
  if (offset < 1 || master + offset > 65535)
    return kolo_error(NULL, koloInvalidArgument,
                      "koloCommInitFromEnv: MASTER_PORT %d + KOLO_TORCH_PORT_OFFSET %lld is not a port in %d..65535",
                      master, (long long)offset, master + 1);
  snprintf(where, len, strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, master + (int)offset);
  return koloSuccess;
}

/* KOLO_ROOT, else PMIx's store, else torchrun's MASTER_ADDR. */
static koloResult_t find_uid(int size, kolo_uid *uid, kolo_root **owned) {
  const char *root = kolo_param_str("KOLO_ROOT");
  if (root != NULL) return kolo_rendezvous_uid("KOLO_ROOT", root, size, uid);
  if (kolo_pmix_present()) return kolo_pmix_uid((int)kolo_param_int("KOLO_TIMEOUT_MS"), uid, owned);
  char where[300];
  koloResult_t res = torchrun_root(where, sizeof where);
  if (res == koloSuccess) res = kolo_rendezvous_uid("MASTER_ADDR:MASTER_PORT+KOLO_TORCH_PORT_OFFSET", where, size, uid);
  if (res == koloSuccess) KOLO_INFO("rendezvous at %s (torchrun's MASTER_PORT + KOLO_TORCH_PORT_OFFSET)", where);
  return res;
}

koloResult_t koloCommInitFromEnv(koloComm_t *comm, koloConfig_t *config) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommInitFromEnv: comm is NULL");
  int rank = 0, size = 0;
  const char *who = NULL;
  kolo_uid uid;
  memset(&uid, 0, sizeof uid);
  kolo_root *root = NULL; /* PMIx: rank 0's, for its communicator to own */
  koloResult_t res = find_rank(&rank, &size, &who);
  if (res == koloSuccess && rank >= size)
    res = kolo_error(NULL, koloInvalidArgument, "koloCommInitFromEnv: rank %d is not below size %d (%s)", rank, size, who);
  if (res == koloSuccess) res = find_uid(size, &uid, &root);
  if (res != koloSuccess) return res;
  KOLO_INFO("rank %d of %d from %s variables", rank, size, who);
  koloUniqueId id;
  kolo_uid_encode(&uid, &id);
  return kolo_comm_init_owning(comm, size, id, rank, config, root);
}
