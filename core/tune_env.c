/* tune_env.c - KOLO_TUNING_FILE: the cost model's constants measured by
 * `kolo-perf tune` (ring/tuning.h, docs/tuning.md), loaded at init.
 *
 * Ranks that load different files (or one none) could choose different
 * algorithms and never meet: the file's hash goes into the shape every
 * rank compares at init (comm.c).  The network constants are ib's when
 * KOLO_NET=ib, or KOLO_NET is unset and the file measured ib (the tuner
 * writes ib only where an RDMA device exists); socket's otherwise: a
 * function of the file and KOLO_NET alone, so equal on every rank. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "core/comm_state.h"
#include "core/tune_env.h"
#include "core/env_file.h"

#define MAX_TUNING_BYTES (64 * 1024)

static int net_link(const kolo_tuning *f) {
  const char *net = kolo_param_str("KOLO_NET");
  if (net && strcmp(net, "ib") == 0) return KOLO_LINK_IB;
  if (net == NULL && f->link[KOLO_LINK_IB].set) return KOLO_LINK_IB;
  return KOLO_LINK_SOCKET;
}

koloResult_t kolo_comm_load_tuning(struct koloComm *c, const char *fn) {
  const char *path = kolo_param_str("KOLO_TUNING_FILE");
  if (path == NULL || *path == '\0') return koloSuccess;
  size_t len = 0;
  char *text = kolo_read_env_file(path, MAX_TUNING_BYTES, &len);
  if (text == NULL)
    return kolo_syserror(NULL, errno, "%s: KOLO_TUNING_FILE=%s cannot be read%s", fn, path,
                         errno == EFBIG ? " (a tuning file holds at most 64 KiB)" : "");
  kolo_tuning f;
  char why[KOLO_ERR_LEN / 2];
  int bad = kolo_tuning_parse(text, len, path, &f, why, sizeof why);
  free(text);
  if (bad) return kolo_error(NULL, koloInvalidUsage, "%s: KOLO_TUNING_FILE: %s", fn, why);
  int host = c->memory == koloMemCuda ? KOLO_LINK_CUDA_P2P : KOLO_LINK_SHM;
  kolo_tuning_resolve(&f, host, net_link(&f), &c->tuned);
  c->algo.tuned = &c->tuned;
  c->tuning_hash = f.hash;
  if (c->rank == 0)
    KOLO_INFO("KOLO_TUNING_FILE=%s: %s and %s constants, %d override(s) (hash %016llx)", path, kolo_link_name(host),
              kolo_link_name(net_link(&f)), f.noverrides, (unsigned long long)f.hash);
  return koloSuccess;
}
