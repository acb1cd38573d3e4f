/* nccl_config.c - a caller's ncclConfig_t as kolo's koloConfig_t.
 *
 * NCCL's struct grows by appending fields, and its size says how much of it
 * the caller has: a field is read only when the caller's struct holds it
 * (older programs pass shorter structs; newer ones longer, whose extra
 * fields are ignored).  The magic and version must be NCCL_CONFIG_
 * INITIALIZER's (an uninitialized struct is an error, as in NCCL).
 *
 * What kolo honours: blocking; minCTAs / maxCTAs as bounds on the channels
 * (kolo runs one block per channel).  What it accepts and leaves to its own
 * choice, said once at INFO: cgaClusterSize, netName (kolo's net provider
 * comes from NCCL_NET / KOLO_NET), splitShare, trafficClass, commName,
 * collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs, nChannelsPerNetPeer,
 * nvlinkCentricSched. */
#include <stdatomic.h>

#include "common/log.h"
#include "nccl/nccl_layer.h"

_Static_assert(offsetof(ncclConfig_t, blocking) == 16, "NCCL's config layout");
_Static_assert(offsetof(ncclConfig_t, netName) == 32, "NCCL's config layout");
_Static_assert(offsetof(ncclConfig_t, nvlinkCentricSched) == 76, "NCCL's config layout");
_Static_assert(sizeof(ncclConfig_t) == 80, "NCCL's config size");

/* The magic comes from the header's NCCL_CONFIG_INITIALIZER (NCCL names it
 * nowhere else), so that each build checks against its own header's. */
static const ncclConfig_t config_initializer = NCCL_CONFIG_INITIALIZER;
#define CONFIG_MAGIC (config_initializer.magic)

/* Whether the caller's struct (of cfg->size bytes) holds `field`. */
#define HAS(cfg, field) ((cfg)->size >= offsetof(ncclConfig_t, field) + sizeof((cfg)->field))
#define SET_INT(cfg, field) (HAS(cfg, field) && (cfg)->field != NCCL_CONFIG_UNDEF_INT)

#define MIN_SIZE (offsetof(ncclConfig_t, blocking) + sizeof(int)) /* NCCL 2.14's struct */

static koloResult_t check_header(const ncclConfig_t *in, const char *fn) {
  if (in->magic != CONFIG_MAGIC)
    return kolo_error(NULL, koloInvalidArgument,
                      "%s: config.magic is 0x%x, not NCCL_CONFIG_INITIALIZER's 0x%x (was the config initialized?)",
                      fn, in->magic, CONFIG_MAGIC);
  if (in->size < MIN_SIZE || in->version < (unsigned)NCCL_VERSION(2, 14, 0))
    return kolo_error(NULL, koloInvalidArgument,
                      "%s: config.size %zu / version %u is not an ncclConfig_t of NCCL 2.14 or later", fn, in->size,
                      in->version);
  return koloSuccess;
}

static koloResult_t read_blocking(const ncclConfig_t *in, koloConfig_t *out, const char *fn) {
  if (!SET_INT(in, blocking)) return koloSuccess;
  if (in->blocking != 0 && in->blocking != 1)
    return kolo_error(NULL, koloInvalidArgument, "%s: config.blocking = %d is neither 0 nor 1", fn, in->blocking);
  out->blocking = in->blocking;
  return koloSuccess;
}

/* minCTAs / maxCTAs: kolo's channels within them (kolo_comm: KOLO_MIN /
 * KOLO_MAX_NCHANNELS do the same from the environment). */
static koloResult_t read_ctas(const ncclConfig_t *in, koloConfig_t *out, const char *fn) {
  int lo = SET_INT(in, minCTAs) ? in->minCTAs : 1, hi = SET_INT(in, maxCTAs) ? in->maxCTAs : 64;
  if (lo < 1 || hi < lo)
    return kolo_error(NULL, koloInvalidArgument, "%s: config.minCTAs = %d / maxCTAs = %d is not a range of 1 or more",
                      fn, lo, hi);
  out->minChannels = lo;
  out->maxChannels = hi;
  return koloSuccess;
}

/* The fields kolo leaves to its own choice, named once per process. */
static void note_ignored(const ncclConfig_t *in) {
  static atomic_int said;
  int any = (SET_INT(in, cgaClusterSize) || (HAS(in, netName) && in->netName) || SET_INT(in, splitShare) ||
             SET_INT(in, trafficClass) || SET_INT(in, collnetEnable) || SET_INT(in, CTAPolicy) ||
             SET_INT(in, shrinkShare) || SET_INT(in, nvlsCTAs) || SET_INT(in, nChannelsPerNetPeer) ||
             SET_INT(in, nvlinkCentricSched));
  if (any && atomic_exchange(&said, 1) == 0)
    KOLO_INFO("NCCL layer: ncclConfig_t fields other than blocking, minCTAs and maxCTAs are accepted and left "
              "to kolo's own choice");
}

koloResult_t nccl_config(const ncclConfig_t *in, koloConfig_t *out, const char *fn) {
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  *out = def;
  out->memory = koloMemCuda; /* NCCL programs pass device pointers */
  out->cudaDev = -1;         /* the caller's current device */
  if (in == NULL) return koloSuccess;
  koloResult_t res = check_header(in, fn);
  if (res == koloSuccess) res = read_blocking(in, out, fn);
  if (res == koloSuccess) res = read_ctas(in, out, fn);
  if (res == koloSuccess) note_ignored(in);
  return res;
}
