/* proto_env.c - KOLO_PROTO: which protocols CUDA communicators may use.
 *
 * NCCL_PROTO's syntax (the NCCL layer reads NCCL_PROTO into it): a comma
 * list of protocols, or "^" and a list to exclude; names in any case.  kolo
 * has LL and Simple (LL128 is not in kolo: said once, and left out).  Only
 * Simple: LL is never used (KOLO_LL_THRESHOLD 0); only LL: every call uses
 * LL; both or unset: LL up to KOLO_LL_THRESHOLD.  A value kolo cannot read
 * or that allows neither is said at WARN and kolo's own choice is kept: never
 * a failed init. */
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "common/config.h"
#include "common/log.h"
#include "core/comm.h"

enum { PROTO_LL = 1, PROTO_SIMPLE = 2 };

/* The protocols one name stands for; 0 for LL128 (not in kolo); -1 unknown. */
static int proto_bits(const char *name, size_t n) {
  if (n == 2 && strncasecmp(name, "LL", 2) == 0) return PROTO_LL;
  if (n == 6 && strncasecmp(name, "Simple", 6) == 0) return PROTO_SIMPLE;
  if (n == 5 && strncasecmp(name, "LL128", 5) == 0) return 0;
  return -1;
}

/* The set a value allows, or -1 when a name is unknown (comm.h). */
int kolo_proto_parse(const char *v, int *ll128) {
  int exclude = *v == '^', set = 0;
  for (const char *p = v + exclude; *p;) {
    size_t n = strcspn(p, ",");
    int bits = proto_bits(p, n);
    if (bits < 0) return -1;
    *ll128 |= bits == 0;
    set |= bits;
    p += n + (p[n] == ',');
  }
  return exclude ? (PROTO_LL | PROTO_SIMPLE) & ~set : set;
}

void kolo_proto_apply(struct koloComm *c) {
  const char *v = kolo_param_str("KOLO_PROTO");
  if (v == NULL || *v == '\0') return;
  int ll128 = 0, set = kolo_proto_parse(v, &ll128);
  static atomic_int said;
  if (ll128 && atomic_exchange(&said, 1) == 0)
    KOLO_WARN("KOLO_PROTO / NCCL_PROTO \"%s\": kolo has no LL128 protocol; it uses LL and Simple only", v);
  if (set <= 0) {
    KOLO_WARN("KOLO_PROTO / NCCL_PROTO \"%s\" allows neither LL nor Simple (or names an unknown protocol): "
              "kolo's own choice is used", v);
    return;
  }
  if (set == PROTO_SIMPLE) c->ll_threshold = 0;
  else if (set == PROTO_LL) c->ll_threshold = (size_t)1 << 40;
}
