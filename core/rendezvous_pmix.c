/* rendezvous_pmix.c - the id of a job, exchanged through PMIx
 * (rendezvous_pmix.h).  Built only where pkg-config finds pmix
 * (KOLO_HAVE_PMIX); elsewhere PMIx is never present. */
#include "core/rendezvous_pmix.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#ifdef KOLO_HAVE_PMIX
#include <pmix.h>

#define KOLO_PMIX_KEY "kolo.root.id"

static koloResult_t pmix_fail(const char *call, pmix_status_t rc) {
  return kolo_error(NULL, koloSystemError, "koloCommInitFromEnv: %s failed: %s", call, PMIx_Error_string(rc));
}

/* Rank 0: a root with a random secret, its id put under kolo's key. */
static koloResult_t publish_root(int timeout_ms, kolo_root **root) {
  kolo_uid uid;
  koloResult_t res = kolo_bootstrap_root_start_owned(NULL, NULL, timeout_ms, &uid, NULL, root);
  if (res != koloSuccess) return res;
  koloUniqueId id;
  kolo_uid_encode(&uid, &id);
  pmix_value_t val;
  memset(&val, 0, sizeof val);
  val.type = PMIX_BYTE_OBJECT;
  val.data.bo.bytes = id.internal;
  val.data.bo.size = sizeof id.internal;
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, KOLO_PMIX_KEY, &val);
  if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Put", rc);
  rc = PMIx_Commit();
  return rc == PMIX_SUCCESS ? koloSuccess : pmix_fail("PMIx_Commit", rc);
}

/* Every process of the namespace, data collected: rank 0's put is then
 * readable everywhere. */
static koloResult_t fence(void) {
  pmix_info_t info;
  bool collect = true;
  PMIX_INFO_CONSTRUCT(&info);
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  pmix_status_t rc = PMIx_Fence(NULL, 0, &info, 1);
  PMIX_INFO_DESTRUCT(&info);
  return rc == PMIX_SUCCESS ? koloSuccess : pmix_fail("PMIx_Fence", rc);
}

static koloResult_t read_root(const pmix_proc_t *me, kolo_uid *uid) {
  pmix_proc_t zero;
  PMIX_PROC_CONSTRUCT(&zero);
  PMIX_LOAD_PROCID(&zero, me->nspace, 0);
  pmix_value_t *val = NULL;
  pmix_status_t rc = PMIx_Get(&zero, KOLO_PMIX_KEY, NULL, 0, &val);
  if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Get of rank 0's kolo root", rc);
  koloResult_t res = koloSuccess;
  koloUniqueId id;
  if (val->type != PMIX_BYTE_OBJECT || val->data.bo.size != sizeof id.internal)
    res = kolo_error(NULL, koloSystemError, "koloCommInitFromEnv: PMIx key %s of rank 0 is not a kolo id",
                     KOLO_PMIX_KEY);
  else memcpy(id.internal, val->data.bo.bytes, sizeof id.internal);
  PMIX_VALUE_RELEASE(val);
  return res == koloSuccess ? kolo_uid_decode(&id, uid, NULL) : res;
}

int kolo_pmix_present(void) { return getenv("PMIX_NAMESPACE") != NULL && getenv("PMIX_RANK") != NULL; }

koloResult_t kolo_pmix_uid(int timeout_ms, kolo_uid *uid, kolo_root **root) {
  *root = NULL;
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS) return pmix_fail("PMIx_Init", rc);
  /* Rank 0 fences even when its root failed, so the others learn it from
   * the missing key instead of waiting. */
  koloResult_t res = me.rank == 0 ? publish_root(timeout_ms, root) : koloSuccess;
  koloResult_t fenced = fence();
  if (res == koloSuccess) res = fenced;
  if (res == koloSuccess) res = read_root(&me, uid);
  if (res == koloSuccess) KOLO_INFO("rendezvous through PMIx (namespace %s, rank %u)", me.nspace, me.rank);
  rc = PMIx_Finalize(NULL, 0);
  if (res == koloSuccess && rc != PMIX_SUCCESS) res = pmix_fail("PMIx_Finalize", rc);
  if (res != koloSuccess) {
    kolo_bootstrap_root_stop(*root);
    *root = NULL;
  }
  return res;
}

#else

int kolo_pmix_present(void) { return 0; }

koloResult_t kolo_pmix_uid(int timeout_ms, kolo_uid *uid, kolo_root **root) {
  *root = NULL;
  (void)timeout_ms;
  (void)uid;
  return kolo_error(NULL, koloInvalidUsage, "koloCommInitFromEnv: kolo was built without PMIx");
}

#endif
