/* proto_env.c - KOLO_PROTO: which protocols CUDA communicators may use,
 * per collective.
 *
 * NCCL_PROTO's syntax, per-collective entries included (core/proto_select.h;
 * the NCCL layer reads NCCL_PROTO into it): "Simple", "^LL",
 * "allreduce:LL;sendrecv:Simple".  kolo has LL and Simple (LL128 is not in
 * kolo: said once, and left out).  For each collective: only Simple, LL is
 * never used; only LL, every call uses LL; both or unset, LL up to
 * KOLO_LL_THRESHOLD.  A value kolo cannot read, or one that leaves a
 * collective neither protocol, fails init with a sentence naming it: a
 * forced choice that kolo silently replaced by its own would measure
 * something else than the user asked for.  Every rank must give the same
 * value (comm.c compares it at init). */
#include <stdatomic.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "core/comm_state.h"
#include "core/proto_env.h"
#include "core/proto_select.h"

koloResult_t kolo_proto_apply(struct koloComm *c) {
  const char *v = kolo_param_str("KOLO_PROTO");
  char why[KOLO_ERR_LEN / 2];
  int ll128 = 0, off = kolo_proto_off_parse(v, &ll128, why, sizeof why);
  if (off < 0) return kolo_error(NULL, koloInvalidArgument, "%s", why);
  static atomic_int said;
  if (ll128 && atomic_exchange(&said, 1) == 0)
    KOLO_WARN("KOLO_PROTO / NCCL_PROTO \"%s\": kolo has no LL128 protocol; it uses LL and Simple only", v);
  c->proto_off = (uint32_t)off;
  return koloSuccess;
}
