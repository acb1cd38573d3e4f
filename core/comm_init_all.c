/* comm_init_all.c - koloCommInitAll: every rank of a job in this
 * process, one per device, made together. */
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/comm.h"
#include "core/init_async.h"
#include "core/mem_kind.h"

/* The calling thread's current CUDA device, or -1 (no CUDA, or none). */
static int current_device(void) {
  const kolo_mem_kind *k = kolo_mem_kind_find(koloMemCuda);
  return k ? k->current_device() : -1;
}

/* The config of rank r of koloCommInitAll: the caller's, with the device
 * from devlist (a negative entry: the caller's current device), else
 * config.cudaDev when set, else device r (as NCCL: devices 0..ndev-1).
 * Host communicators ignore the device. */
static koloConfig_t *rank_config(koloConfig_t *config, const int *devlist, int r, koloConfig_t *out) {
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  *out = def;
  if (config != NULL) {
    if (config->magic != KOLO_CONFIG_MAGIC || config->size < offsetof(koloConfig_t, cudaDev))
      return config; /* as given: init says what is wrong with it */
    memcpy(out, config, config->size < sizeof *out ? config->size : sizeof *out);
    out->size = sizeof *out;
    if (config->size < sizeof *out) out->cudaDev = KOLO_CONFIG_UNDEF;
  }
  int asked = out->cudaDev != KOLO_CONFIG_UNDEF && out->cudaDev >= 0;
  if (devlist != NULL) out->cudaDev = devlist[r] >= 0 ? devlist[r] : current_device();
  else if (!asked) out->cudaDev = r;
  return out;
}

/* ndev ranks of one new job, created (not connected) into comms. */
static koloResult_t create_all(koloComm_t *comms, int ndev, const int *devlist, koloConfig_t *config) {
  koloUniqueId id;
  kolo_uid uid;
  koloResult_t res = koloGetUniqueId(&id);
  if (res == koloSuccess) res = kolo_uid_decode(&id, &uid, NULL);
  for (int r = 0; r < ndev && res == koloSuccess; r++) {
    koloConfig_t one;
    koloConfig_t *cfg = rank_config(config, devlist, r, &one);
    res = kolo_comm_create("koloCommInitAll", ndev, r, &uid, 1, cfg, &comms[r]);
  }
  return res;
}

/* As before groups existed: every rank's init on a thread of its own, and
 * the call returns when all are done (whatever config.blocking says); on
 * a failure no communicator is left. */
koloResult_t koloCommInitAllConfig(koloComm_t *comms, int ndev, const int *devlist,
                                   koloConfig_t *config) {
  if (comms == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommInitAll: comms is NULL");
  if (ndev < 1) return kolo_error(NULL, koloInvalidArgument, "koloCommInitAll: ndev = %d is below 1", ndev);
  struct koloComm **made = calloc((size_t)ndev, sizeof *made);
  if (made == NULL) return kolo_error(NULL, koloSystemError, "koloCommInitAll: out of memory");
  koloResult_t res = create_all(made, ndev, devlist, config);
  if (res == koloSuccess) res = kolo_init_run_all(made, ndev);
  for (int r = 0; r < ndev; r++) {
    if (res == koloSuccess) comms[r] = made[r];
    else if (made[r]) kolo_comm_free(made[r]);
  }
  free(made);
  return res;
}

koloResult_t koloCommInitAll(koloComm_t *comms, int ndev, const int *devlist) {
  return koloCommInitAllConfig(comms, ndev, devlist, NULL);
}

