/* comm.c - communicator lifecycle: init, finalize, destroy, abort (split:
 * split.c, shrink: shrink.c). */
#include "core/comm_state.h"
#include "core/group.h"
#include "core/comm.h"
#include "core/comm_gather.h"
#include "core/init_async.h"
#include "core/register.h"
#include "core/revoke.h"
#include "core/doubling_pipes.h"
#include "core/tree_pipes.h"
#include "core/ag_pipes.h"
#include "core/proto_env.h"
#include "core/sched_env.h"
#include "core/tune_env.h"
#include "core/progress.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "core/comm_wire.h"
#include "core/mem_kind.h"
#include "core/proto_select.h"
#include "core/redop.h"
#include "core/rendezvous.h"
#include "common/log.h"
#include "ring/algo_select.h"
#include "ring/topology.h"
#include "ring/tuning.h"
#include "transport/socket.h"
#include "transport/transport.h"

/* What every rank must agree on (comm_wire.h's kolo_comm_shape), checked
 * at init: the LL settings and KOLO_PROTO matter for CUDA communicators
 * only (they choose each call's protocol and pipes), KOLO_ALGO for all
 * (ranks choosing differently would not meet). */
#define TAG_CONFIG 0x10u
#define TAG_RING_PIPE 0x1000u
#define TAG_HIER_PIPE 0x3000u /* | ring (0 intra, 1 inter) << 8 | channel */


koloResult_t koloGetVersion(int *version) {
  if (version == NULL) return kolo_error(NULL, koloInvalidArgument, "koloGetVersion: version is NULL");
  *version = KOLO_VERSION_CODE;
  return koloSuccess;
}

/* A snapshot, so that the caller reads a whole sentence even while another
 * of the communicator's threads reports a failure. */
const char *koloGetLastError(koloComm_t comm) {
  static _Thread_local char last[KOLO_ERR_LEN];
  return kolo_error_read(comm ? &comm->err : kolo_thread_errbuf(), last, sizeof last);
}

void koloResetDebugInit(void) { kolo_log_reset(); }

koloResult_t koloGetUniqueId(koloUniqueId *id) {
  if (id == NULL) return kolo_error(NULL, koloInvalidArgument, "koloGetUniqueId: uniqueId is NULL");
  kolo_uid uid;
  const char *at = kolo_param_str("KOLO_COMM_ID");
  int timeout = (int)kolo_param_int("KOLO_TIMEOUT_MS");
  /* KOLO_COMM_ID: the id of that address, the same in every process; rank 0
   * starts the root there at init (as NCCL_COMM_ID does in NCCL). */
  koloResult_t res = at ? kolo_rendezvous_uid("KOLO_COMM_ID", at, 0, &uid)
                        : kolo_bootstrap_root_start(NULL, NULL, timeout, &uid, NULL);
  if (res != koloSuccess) return res;
  kolo_uid_encode(&uid, id);
  return koloSuccess;
}

/* ---- configuration ------------------------------------------------------ */

static int pick(int from_config, int64_t from_env) {
  return from_config != KOLO_CONFIG_UNDEF ? from_config : (int)from_env;
}

/* config.min/maxChannels and KOLO_MIN/MAX_NCHANNELS bound the channels. */
static koloResult_t bound_channels(struct koloComm *c, const koloConfig_t *cfg) {
  int has = cfg->size >= offsetof(koloConfig_t, maxChannels) + sizeof cfg->maxChannels;
  int lo = pick(has ? cfg->minChannels : KOLO_CONFIG_UNDEF, kolo_param_int("KOLO_MIN_NCHANNELS"));
  int hi = pick(has ? cfg->maxChannels : KOLO_CONFIG_UNDEF, kolo_param_int("KOLO_MAX_NCHANNELS"));
  if (lo < 1 || hi < lo)
    return kolo_error(NULL, koloInvalidArgument,
                      "channel bounds %d..%d (config.minChannels / maxChannels or KOLO_MIN_NCHANNELS / "
                      "KOLO_MAX_NCHANNELS) are not a range of 1 or more",
                      lo, hi);
  if (hi > KOLO_MAX_CHANNELS) hi = KOLO_MAX_CHANNELS;
  if (c->nchannels < lo) c->nchannels = lo < hi ? lo : hi;
  if (c->nchannels > hi) c->nchannels = hi;
  return koloSuccess;
}

/* A tuning file whose `channels` lines name more channels than the
 * default gets them, unless config.nChannels or KOLO_NCHANNELS says how
 * many (a call never uses more than the communicator has). */
static koloResult_t tuned_channels(struct koloComm *c, const koloConfig_t *cfg) {
  _Static_assert(KOLO_TUNING_MAX_CHANNELS == KOLO_MAX_CHANNELS, "a channels line names at most KOLO_MAX_CHANNELS");
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  if (cfg == NULL) cfg = &def;
  int most = c->algo.tuned != NULL ? kolo_tuned_max_channels(c->algo.tuned, c->nranks) : 0;
  if (most <= c->nchannels || cfg->nChannels != KOLO_CONFIG_UNDEF || kolo_param_is_set("KOLO_NCHANNELS"))
    return koloSuccess;
  if (c->rank == 0) KOLO_INFO("KOLO_TUNING_FILE names %d channels: the communicator has them (was %d)", most, c->nchannels);
  c->nchannels = most;
  return bound_channels(c, cfg);
}

/* The point-to-point pipes' slots (comm_state.h): KOLO_P2P_BUFFSIZE over the
 * same slot count, 4 KiB multiples, capped by the collectives' slots (a
 * communicator given a small bufferSize keeps it for every pipe). */
static koloResult_t resolve_p2p_slots(struct koloComm *c) {
  int64_t bytes = kolo_param_int("KOLO_P2P_BUFFSIZE");
  if (bytes < (int64_t)c->nslots * 4096 || bytes > ((int64_t)1 << 40))
    return kolo_error(NULL, koloInvalidArgument, "KOLO_P2P_BUFFSIZE = %lld is outside %u..2^40 (nslots x 4 KiB at least)",
                      (long long)bytes, c->nslots * 4096u);
  size_t slot = ((size_t)bytes / c->nslots) & ~(size_t)4095;
  c->p2p_slot_bytes = slot < c->slot_bytes ? slot : c->slot_bytes;
  return koloSuccess;
}

static koloResult_t resolve_config(struct koloComm *c, const koloConfig_t *cfg) {
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  if (cfg == NULL) cfg = &def;
  if (cfg->magic != KOLO_CONFIG_MAGIC || cfg->size < offsetof(koloConfig_t, cudaDev))
    return kolo_error(NULL, koloInvalidArgument,
                      "config was not set up with KOLO_CONFIG_INITIALIZER (bad magic or size)");
  const char *mem = kolo_param_str("KOLO_MEMORY");
  int env_mem = (mem && strcmp(mem, "cuda") == 0) ? koloMemCuda : koloMemHost;
  c->memory = pick(cfg->memory, env_mem);
  c->blocking = pick(cfg->blocking, 1);
  c->timeout_ms = pick(cfg->timeoutMs, kolo_param_int("KOLO_TIMEOUT_MS"));
  int bufsize = pick(cfg->bufferSize, kolo_param_int("KOLO_BUFFSIZE"));
  c->nslots = (uint32_t)kolo_param_int("KOLO_NSLOTS");
  c->nchannels = pick(cfg->nChannels, kolo_param_int("KOLO_NCHANNELS"));
  int64_t min_channel_bytes = kolo_param_int("KOLO_MIN_CHANNEL_BYTES");
  if (min_channel_bytes < 0 || min_channel_bytes > ((int64_t)1 << 62))
    return kolo_error(NULL, koloInvalidArgument, "KOLO_MIN_CHANNEL_BYTES = %lld is outside 0..2^62",
                      (long long)min_channel_bytes);
  c->min_channel_bytes = (size_t)min_channel_bytes;
  int has_dev = cfg->size >= offsetof(koloConfig_t, cudaDev) + sizeof cfg->cudaDev;
  c->cuda_dev = pick(has_dev ? cfg->cudaDev : KOLO_CONFIG_UNDEF, -1);
  int64_t ll_threshold = kolo_param_int("KOLO_LL_THRESHOLD");
  char why[KOLO_ERR_LEN / 2];
  kolo_algo_sets sets;
  if (kolo_algo_allow_parse_sets(kolo_param_str("KOLO_ALGO"), &sets, why, sizeof why) < 0)
    return kolo_error(NULL, koloInvalidArgument, "%s", why);
  c->algo.allowed = sets.all_reduce;
  c->algo.bcast_allowed = sets.broadcast;
  c->algo.ag_allowed = sets.all_gather;
  c->algo.reduce_allowed = sets.reduce;
  c->algo.forced = kolo_algo_allow_single(c->algo.allowed); /* one name: forced, as before */
  int64_t ll_slot = kolo_param_int("KOLO_LL_SLOT_BYTES");
  if (c->memory != koloMemHost && c->memory != koloMemCuda)
    return kolo_error(NULL, koloInvalidArgument, "config.memory = %d is neither koloMemHost nor koloMemCuda", c->memory);
  c->kind = kolo_mem_kind_find(c->memory); /* NULL: host memory */
  if (c->memory == koloMemCuda && c->kind == NULL)
    return kolo_error(NULL, koloInvalidUsage,
                      "koloMemCuda communicators need CUDA, and this build of kolo has none (it was "
                      "configured with KOLO_CUDA=OFF or without nvcc)");
  if (c->memory == koloMemCuda) {
    if (c->cuda_dev < -1)
      return kolo_error(NULL, koloInvalidArgument, "config.cudaDev = %d is negative (-1: the current device)", c->cuda_dev);
    if (ll_threshold < 0 || ll_threshold > ((int64_t)1 << 40))
      return kolo_error(NULL, koloInvalidArgument, "KOLO_LL_THRESHOLD = %lld is outside 0..2^40", (long long)ll_threshold);
    if (ll_slot < 1024 || ll_slot > (1 << 20) || ll_slot % 1024 != 0)
      return kolo_error(NULL, koloInvalidArgument,
                        "KOLO_LL_SLOT_BYTES = %lld is not a multiple of 1 KiB in 1 KiB..1 MiB", (long long)ll_slot);
    c->ll_threshold = (size_t)ll_threshold;
    koloResult_t res = kolo_proto_apply(c);
    if (res != koloSuccess) return res;
    c->ll_slot_bytes = (uint32_t)ll_slot;
  }
  if (c->timeout_ms < 0) return kolo_error(NULL, koloInvalidArgument, "config.timeoutMs = %d is negative", c->timeout_ms);
  if (c->nchannels >= 1 && c->nchannels <= KOLO_MAX_CHANNELS) {
    koloResult_t res = bound_channels(c, cfg);
    if (res != koloSuccess) return res;
  }
  if (c->nchannels < 1 || c->nchannels > KOLO_MAX_CHANNELS)
    return kolo_error(NULL, koloInvalidArgument, "nChannels = %d is outside 1..%d", c->nchannels, KOLO_MAX_CHANNELS);
  /* A power of two: step % nslots must go on from slot nslots - 1 to 0 when
   * the 32-bit step counts wrap, or a slot would be reused before it drained. */
  if (c->nslots < 2 || c->nslots > 64 || (c->nslots & (c->nslots - 1)) != 0)
    return kolo_error(NULL, koloInvalidArgument, "KOLO_NSLOTS = %u is not a power of two in 2..64", c->nslots);
  if (bufsize < (int)(c->nslots * 4096u))
    return kolo_error(NULL, koloInvalidArgument, "bufferSize = %d is below %u (nslots x 4 KiB)", bufsize, c->nslots * 4096u);
  /* Slots are a multiple of 4 KiB: chunks stay 64-byte aligned for every type. */
  c->slot_bytes = ((size_t)bufsize / c->nslots) & ~(size_t)4095;
  return resolve_p2p_slots(c);
}


/* ---- init --------------------------------------------------------------- */

static kolo_comm_shape my_shape(const struct koloComm *c) {
  return (kolo_comm_shape){c->nchannels, (int32_t)c->nslots, c->memory, (int32_t)c->ll_slot_bytes,
                           c->slot_bytes, c->ll_threshold, c->algo.forced, c->sched_hash, c->algo.allowed,
                           c->tuning_hash, c->algo.bcast_allowed, c->proto_off, c->algo.ag_allowed,
                           (uint64_t)c->min_channel_bytes, c->algo.reduce_allowed};
}

/* "none", or "a file of hash H" (with its path: this rank's) */
static const char *sched_text(uint64_t hash, const char *path, char *out, size_t len) {
  if (hash == 0) return "none";
  if (path) snprintf(out, len, "%s (hash %016llx)", path, (unsigned long long)hash);
  else snprintf(out, len, "a file of hash %016llx", (unsigned long long)hash);
  return out;
}

/* Rank r loaded another file of `var` (KOLO_SCHEDULE_FILE, a "schedule
 * file"; KOLO_TUNING_FILE, a "tuning file") than this rank, or one of them
 * none; `why`: what depends on it. */
static koloResult_t file_differs(struct koloComm *c, int r, const char *var, const char *kind, uint64_t theirs,
                                 uint64_t mine, const char *why) {
  char a[64], b[KOLO_ERR_LEN / 2];
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d: %s differs between ranks: rank %d loaded %s, this rank loaded %s: "
                    "every rank must load the same %s%s",
                    c->rank, var, r, sched_text(theirs, NULL, a, sizeof a),
                    sched_text(mine, kolo_param_str(var), b, sizeof b), kind, why);
}

static koloResult_t shape_differs(struct koloComm *c, int r, const kolo_comm_shape *a, const kolo_comm_shape *mine) {
  char sa[64], sm[64], ba[32], bm[32], ga[32], gm[32], ra[32], rm[32];
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d has channels=%d slots=%d slot bytes=%llu memory=%d LL=%llu/%d algo=%s broadcast=%s "
                    "allgather=%s reduce=%s but rank %d has %d/%d/%llu/%d/%llu/%d/%s/%s/%s/%s: set KOLO_NCHANNELS, "
                    "KOLO_NSLOTS, KOLO_BUFFSIZE, memory, KOLO_LL_THRESHOLD, KOLO_LL_SLOT_BYTES and KOLO_ALGO "
                    "alike on all ranks",
                    r, a->nchannels, a->nslots, (unsigned long long)a->slot_bytes, a->memory,
                    (unsigned long long)a->ll_threshold, a->ll_slot_bytes, kolo_algo_allow_text(a->algo_allowed, sa, sizeof sa),
                    kolo_algo_allow_text(a->bcast_allowed, ba, sizeof ba),
                    kolo_algo_allow_text(a->ag_allowed, ga, sizeof ga),
                    kolo_algo_allow_text(a->reduce_allowed, ra, sizeof ra), c->rank, mine->nchannels, mine->nslots,
                    (unsigned long long)mine->slot_bytes, mine->memory, (unsigned long long)mine->ll_threshold,
                    mine->ll_slot_bytes, kolo_algo_allow_text(mine->algo_allowed, sm, sizeof sm),
                    kolo_algo_allow_text(mine->bcast_allowed, bm, sizeof bm),
                    kolo_algo_allow_text(mine->ag_allowed, gm, sizeof gm),
                    kolo_algo_allow_text(mine->reduce_allowed, rm, sizeof rm));
}

/* A call's channels follow KOLO_MIN_CHANNEL_BYTES (core/op.h): ranks that
 * differ in it would wait on channels their peers never use. */
static koloResult_t min_channel_differs(struct koloComm *c, int r, uint64_t theirs) {
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d: KOLO_MIN_CHANNEL_BYTES differs between ranks, and must be alike on all (it sets how "
                    "many channels each call uses): rank %d has %llu, this rank %llu",
                    c->rank, r, (unsigned long long)theirs, (unsigned long long)c->min_channel_bytes);
}

/* Rank r gave another KOLO_PROTO than this rank: a transfer between them
 * would run LL at one end and Simple at the other. */
static koloResult_t proto_differs(struct koloComm *c, int r, uint32_t theirs) {
  char a[160], b[160];
  const char *v = kolo_param_str("KOLO_PROTO");
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d: KOLO_PROTO (or NCCL_PROTO) differs between ranks, and must be alike on all: rank %d "
                    "allows %s, this rank allows %s (its value: \"%s\")",
                    c->rank, r, kolo_proto_off_text(theirs, a, sizeof a), kolo_proto_off_text(c->proto_off, b, sizeof b),
                    v && *v ? v : "unset");
}

/* The encoding is canonical: two shapes are equal when their bytes are. */
static koloResult_t check_shapes(struct koloComm *c) {
  kolo_comm_shape mine = my_shape(c), theirs;
  uint8_t enc[KOLO_COMM_SHAPE_BYTES], *all = NULL;
  kolo_encode_comm_shape(&mine, enc);
  koloResult_t res = kolo_comm_gather(c, TAG_CONFIG, enc, sizeof enc, &all);
  char why[KOLO_ERR_LEN - 32];
  for (int r = 0; r < c->nranks && res == koloSuccess; r++) {
    const uint8_t *rec = all + (size_t)r * sizeof enc;
    if (kolo_decode_comm_shape(rec, sizeof enc, r, &theirs, why, sizeof why) != KOLO_COMM_WIRE_OK)
      res = kolo_error(&c->err, koloRemoteError, "rank %d: init: %s", c->rank, why);
    else if (theirs.sched_hash != mine.sched_hash)
      res = file_differs(c, r, "KOLO_SCHEDULE_FILE", "schedule file", theirs.sched_hash, mine.sched_hash, "");
    else if (theirs.tuning_hash != mine.tuning_hash)
      res = file_differs(c, r, "KOLO_TUNING_FILE", "tuning file", theirs.tuning_hash, mine.tuning_hash,
                         ", or they could choose different algorithms");
    else if (theirs.proto_off != mine.proto_off)
      res = proto_differs(c, r, theirs.proto_off);
    else if (theirs.min_channel_bytes != mine.min_channel_bytes)
      res = min_channel_differs(c, r, theirs.min_channel_bytes);
    else if (memcmp(rec, enc, sizeof enc) != 0)
      res = shape_differs(c, r, &theirs, &mine);
  }
  free(all);
  return res;
}

/* Hierarchical all-reduce on this comm (host or CUDA memory: the host
 * executor runs its phases as dependent tasks, the CUDA planner as
 * consecutive launches): a topology that allows it, not forced off. */
static koloResult_t build_hier(struct koloComm *c, const kolo_hosts *h) {
  int possible = kolo_algo_hier_possible(&c->algo);
  if (c->algo.forced == KOLO_ALGO_HIER && !possible && c->rank == 0)
    KOLO_INFO("KOLO_ALGO=hier: all-reduce runs the flat ring, since it needs 2 or more hosts with the same "
              "number (2 or more) of ranks");
  if (!possible || !kolo_algo_may_run(&c->algo, KOLO_ALGO_HIER)) return koloSuccess;
  if (kolo_sched_has(c->sched, KOLO_COLL_ALL_REDUCE)) {
    if (c->rank == 0) KOLO_INFO("KOLO_SCHEDULE_FILE gives the all-reduce: no hierarchical all-reduce");
    return koloSuccess;
  }
  kolo_ring intra, inter;
  if (kolo_ring_build_intra(h, c->rank, &intra) != koloSuccess) return koloSystemError;
  if (kolo_ring_build_inter(h, c->rank, &inter) != koloSuccess) {
    kolo_ring_free(&intra);
    return koloSystemError;
  }
  koloResult_t res = koloSuccess;
  int built = 0;
  while (built < KOLO_HIER_PHASES && res == koloSuccess) {
    res = kolo_sched_all_reduce_hier(&intra, &inter, c->rank, built, &c->hier_prog[built]);
    if (res == koloSuccess) built++;
  }
  while (res != koloSuccess && built > 0) kolo_program_free(&c->hier_prog[--built]);
  kolo_ring_free(&intra);
  kolo_ring_free(&inter);
  c->hier_ready = res == koloSuccess;
  return res;
}

/* Programs per slot: one per ring, or per channel with a schedule file;
 * and two at least where the double binary tree may run on several
 * channels, whose even and odd channels run different trees (its rings
 * are 1 or nchannels: with nchannels, variant ch is channel ch). */
static int program_variants(const struct koloComm *c) {
  if (c->sched) return c->nchannels;
  int dbtree = c->nranks > 2 && (kolo_bcast_may_run(&c->algo, KOLO_ALGO_DBTREE) ||
                                 kolo_reduce_may_run(&c->algo, KOLO_ALGO_DBTREE));
  return c->nrings == 1 && c->nchannels > 1 && dbtree ? 2 : c->nrings;
}

static koloResult_t build_topology(struct koloComm *c) {
  uint64_t *ids = malloc((size_t)c->nranks * sizeof *ids);
  if (ids == NULL) return kolo_error(&c->err, koloSystemError, "out of memory at init");
  for (int r = 0; r < c->nranks; r++) ids[r] = kolo_bootstrap_peer(c->bs, r)->host_hash;
  kolo_hosts h;
  koloResult_t res = kolo_hosts_build(c->nranks, ids, &h);
  free(ids);
  if (res != koloSuccess) return kolo_error(&c->err, res, "out of memory grouping ranks by host");
  c->nhosts = h.nhosts;
  c->algo.nranks = c->nranks;
  c->algo.nhosts = h.nhosts;
  c->algo.local = kolo_hosts_uniform(&h) ? h.host_size[0] : 0;
  c->algo.no_auto_peers = c->memory == koloMemCuda; /* ring/algo.h: never measured on a GPU */
  /* Rotating a ring moves its off-host hops: pointless on one host or with
   * one rank per host, where every channel keeps one ring. */
  c->nrings = h.nhosts > 1 && kolo_hosts_max_size(&h) > 1 ? c->nchannels : 1;
  c->nvariants = program_variants(c);
  for (int ch = 0; ch < c->nrings && res == koloSuccess; ch++)
    res = kolo_ring_build_channel(&h, ch, &c->rings[ch]);
  if (res == koloSuccess) res = build_hier(c, &h);
  kolo_hosts_free(&h);
  if (res != koloSuccess) return kolo_error(&c->err, res, "out of memory building the rings");
  for (int ch = 0; ch < c->nrings; ch++)
    KOLO_INFO("rank %d/%d: %d host(s), channel %d ring prev %d next %d", c->rank, c->nranks,
              c->nhosts, ch, kolo_ring_prev(&c->rings[ch], c->rank), kolo_ring_next(&c->rings[ch], c->rank));
  KOLO_INFO("rank %d: %d channel(s) on %d ring(s), %u slots of %zu bytes, hierarchical all-reduce %s",
            c->rank, c->nchannels, c->nrings, c->nslots, c->slot_bytes,
            c->hier_ready ? "available" : "off");
  return koloSuccess;
}

static koloResult_t connect_ring(struct koloComm *c) {
  if (c->nranks == 1) return koloSuccess;
  kolo_conn_request reqs[6 * KOLO_MAX_CHANNELS];
  int n = 0;
  for (int ch = 0; ch < c->nchannels; ch++) {
    const kolo_ring *ring = &c->rings[ch % c->nrings];
    reqs[n++] = (kolo_conn_request){&c->ring_recv[ch], kolo_ring_prev(ring, c->rank), 0, ch,
                                    TAG_RING_PIPE | (uint32_t)ch};
    reqs[n++] = (kolo_conn_request){&c->ring_send[ch], kolo_ring_next(ring, c->rank), 1, ch,
                                    TAG_RING_PIPE | (uint32_t)ch};
    for (int k = 0; k < 2 && c->hier_ready; k++) {
      /* the intra programs share their peers, as do the inter one's */
      const kolo_program *p = &c->hier_prog[k == 0 ? KOLO_HIER_INTRA_RS : KOLO_HIER_INTER_AR];
      uint32_t tag = TAG_HIER_PIPE | (uint32_t)k << 8 | (uint32_t)ch;
      reqs[n++] = (kolo_conn_request){&c->hier_recv[k][ch], p->recv_peer, 0, ch, tag};
      reqs[n++] = (kolo_conn_request){&c->hier_send[k][ch], p->send_peer, 1, ch, tag};
    }
  }
  /* the ring and hierarchy pipes are closed by free_comm (CUDA: in IPC's order) */
  kolo_conn_set set = {c->bs, c->job, c->slot_bytes, c->nslots, kolo_comm_conn_mem(c), reqs, n, &c->err, NULL,
                       koloSuccess, 1, 0};
  return kolo_connect_sets(&set, 1);
}

/* How long closing may take to flush the pipes, all of them together:
 * after an abort or a failure only their stop words matter (a stopped or
 * cut-off peer reads nothing, so waiting longer only delays the survivor);
 * otherwise the last calls' data, within the communicator's timeout. */
#define ABORT_FLUSH_MS 200
#define CLOSE_FLUSH_MAX_MS 10000

static int64_t close_deadline(const struct koloComm *c) {
  int stopped = atomic_load(&c->aborted) || atomic_load(&c->failed) != koloSuccess || atomic_load(&c->revoked);
  int t = c->timeout_ms > 0 && c->timeout_ms < CLOSE_FLUSH_MAX_MS ? c->timeout_ms : CLOSE_FLUSH_MAX_MS;
  return kolo_deadline(stopped ? ABORT_FLUSH_MS : t);
}

static void close_pipes(struct koloComm *c) {
  int64_t dl = close_deadline(c);
  for (int ch = 0; ch < KOLO_MAX_CHANNELS; ch++) {
    kolo_connector_close_by(&c->ring_send[ch], dl);
    kolo_connector_close_by(&c->ring_recv[ch], dl);
    for (int k = 0; k < 2; k++) {
      kolo_connector_close_by(&c->hier_send[k][ch], dl);
      kolo_connector_close_by(&c->hier_recv[k][ch], dl);
    }
  }
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  for (size_t i = 0; c->p2p_send && i < np; i++) {
    if (c->p2p_send_ready[i]) kolo_connector_close_by(&c->p2p_send[i], dl);
    if (c->p2p_recv_ready[i]) kolo_connector_close_by(&c->p2p_recv[i], dl);
  }
}

/* Entries of collective k's program table: one per root/peer/algorithm
 * and variant (ring, or channel: comm_state.h). */
static size_t program_slots(const struct koloComm *c, int k) {
  return (size_t)kolo_program_slots(k, c->nranks) * (size_t)(c->nvariants > 0 ? c->nvariants : 1);
}

static void free_comm(struct koloComm *c) {
  /* Kernels may still use the pipes, counters and programs: wait first. */
  if (c->kind) {
    c->kind->quiesce(c, "koloCommDestroy");
    c->kind->close_shared(c);
  }
  /* Before the pipes close: peers that see them close know why already. */
  if (c->bs) kolo_bootstrap_goodbye(c->bs, KOLO_BYE_LEFT);
  close_pipes(c);
  if (c->kind) c->kind->free(c);
  for (int k = 0; k < KOLO_COLL_NUM; k++) {
    for (size_t i = 0; c->programs[k] && i < program_slots(c, k); i++)
      if (c->program_ready[k][i]) kolo_program_free(&c->programs[k][i]);
    free(c->programs[k]);
    free(c->program_ready[k]);
  }
  free(c->scratch);
  free(c->p2p_send);
  free(c->p2p_recv);
  free(c->p2p_send_ready);
  free(c->p2p_recv_ready);
  for (int ch = 0; ch < c->nrings; ch++) kolo_ring_free(&c->rings[ch]);
  for (int k = 0; k < KOLO_HIER_PHASES && c->hier_ready; k++) kolo_program_free(&c->hier_prog[k]);
  kolo_comm_free_schedule(c);
  if (c->bs) kolo_bootstrap_destroy(c->bs);
  kolo_bootstrap_root_stop(c->root); /* an init that never ran */
  if (c->init_job) free(c->init_job->uids);
  free(c->init_job);
  kolo_redop_free(c);
  free(c);
}

void kolo_comm_free(struct koloComm *c) {
  kolo_init_join(c); /* an init still running uses c */
  kolo_reg_release_comm(c);
  free_comm(c);
}


static koloResult_t alloc_tables(struct koloComm *c) {
  size_t np = (size_t)c->nranks * (size_t)c->nchannels;
  c->p2p_send = calloc(np, sizeof *c->p2p_send);
  c->p2p_recv = calloc(np, sizeof *c->p2p_recv);
  c->p2p_send_ready = calloc(np, 1);
  c->p2p_recv_ready = calloc(np, 1);
  int ok = c->p2p_send && c->p2p_recv && c->p2p_send_ready && c->p2p_recv_ready;
  for (int k = 0; k < KOLO_COLL_NUM && ok; k++) {
    c->programs[k] = calloc(program_slots(c, k), sizeof(kolo_program));
    c->program_ready[k] = calloc(program_slots(c, k), 1);
    ok = c->programs[k] && c->program_ready[k];
  }
  return ok ? koloSuccess : kolo_error(&c->err, koloSystemError, "out of memory at init");
}

/* Spinning only pays while every rank of this host has a CPU: with more
 * ranks than CPUs a spinning rank holds the CPU its peer needs, so waits
 * yield after 8 polls (unless KOLO_SPIN says otherwise), and keep yielding
 * for CROWDED_YIELD_NS before they sleep (unless KOLO_YIELDS says how
 * often): a sleeper wakes late when the CPUs are shared, a yielding rank
 * gives its CPU to whoever is due and is there when its turn comes.  4
 * processes on 2 CPUs, 8-byte all-reduce over shared memory beside two
 * busy loops at nice 19, medians of 4 alternating runs: 64 yields then a
 * futex 42 us, yielding 31 us, Open MPI 39 us; over TCP, quiet: 8 B 58 /
 * 42 / 35 us, 256 KiB 837 / 450 / 494 us.  Measured on 2
 * cores, medians of 5 alternating runs, 8 polls against 64: 4 ranks 8 B
 * 2.4 vs 5.0 us, 128 KiB 23 vs 34 us; 8 ranks 8 B 13.1 vs 17.3 us, 4 KiB
 * 16.9 vs 26.3 us; 1 poll was no better than 8, 8 MiB the same for all. */
#define CROWDED_YIELD_NS (5 * 1000 * 1000LL)

static void tune_waits(struct koloComm *c) {
  int local = 0;
  uint64_t me = kolo_bootstrap_peer(c->bs, c->rank)->host_hash;
  for (int r = 0; r < c->nranks; r++) local += kolo_bootstrap_peer(c->bs, r)->host_hash == me;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int crowded = cpus > 0 && local > cpus;
  if (getenv("KOLO_SPIN") == NULL && crowded) c->owner.spin = 8;
  if (getenv("KOLO_YIELDS") == NULL && crowded) c->owner.yield_ns = CROWDED_YIELD_NS;
  if (c->owner.yield_ns > 0)
    KOLO_INFO("rank %d: %d rank(s) on this host, %ld CPU(s): waits spin %d polls, then yield for %lld us",
              c->rank, local, cpus, c->owner.spin, (long long)(c->owner.yield_ns / 1000));
  else
    KOLO_INFO("rank %d: %d rank(s) on this host, %ld CPU(s): waits spin %d polls, then yield %d times",
              c->rank, local, cpus, c->owner.spin, c->owner.yields);
}

static koloResult_t init_steps(struct koloComm *c) {
  const kolo_init_job *j = c->init_job;
  koloResult_t res = kolo_bootstrap_init_multi(j->uids, j->nids, c->rank, c->nranks, c->timeout_ms, &c->err, &c->bs);
  if (res == koloSuccess) tune_waits(c);
  if (res == koloSuccess) res = check_shapes(c);
  const kolo_mem_kind *kind = c->kind; /* NULL: host memory */
  if (res == koloSuccess && kind) res = kind->init(c);
  if (res == koloSuccess) res = build_topology(c);
  if (res == koloSuccess) res = alloc_tables(c);
  if (res == koloSuccess && kind) res = kind->programs(c);
  if (res == koloSuccess) res = connect_ring(c);
  if (res == koloSuccess && kind) kind->ring_ready(c);
  if (res == koloSuccess) res = kolo_comm_connect_doubling(c);
  if (res == koloSuccess) res = kolo_comm_connect_tree(c);
  if (res == koloSuccess) res = kolo_comm_connect_bruck(c);
  /* CUDA calls enqueue and return whatever config.blocking says: no
   * progress thread. */
  if (res == koloSuccess && !c->blocking && !kind) res = kolo_nb_start(c);
  return res;
}

/* "rank V" with no digit after it. */
static int names_rank(const char *text, int v) {
  char pat[24];
  int len = snprintf(pat, sizeof pat, "rank %d", v);
  for (const char *p = strstr(text, pat); p != NULL; p = strstr(p + 1, pat))
    if (p[len] < '0' || p[len] > '9') return 1;
  return 0;
}

/* A failed init names the rank that failed first: a survivor that fails
 * because another one gave up (its shm segment gone, its message never
 * sent) would otherwise name that other survivor.  The bootstrap knows
 * which peer's connection closed first without a goodbye, or whom a
 * peer's goodbye blamed; then peers are told the same in this rank's. */
static void name_first_failure(struct koloComm *c, koloResult_t res) {
  if (c->bs == NULL) return;
  int via = -1;
  int culprit = kolo_bootstrap_culprit(c->bs, &via);
  char was[KOLO_ERR_LEN], because[160];
  kolo_error_read(&c->err, was, sizeof was);
  if (culprit >= 0 && culprit != c->rank && !names_rank(was, culprit)) {
    if (via >= 0) snprintf(because, sizeof because, "rank %d gave up after rank %d failed", via, culprit);
    else snprintf(because, sizeof because, "rank %d %s", culprit, kolo_peer_fate_text(KOLO_PEER_LOST));
    kolo_error_clear(&c->err);
    kolo_error(&c->err, res, "rank %d: init failed after %s: %s", c->rank, because, was);
  }
  kolo_bootstrap_goodbye(c->bs, KOLO_BYE_LEFT); /* now, not at destroy: peers may be waiting on this rank */
}

koloResult_t kolo_comm_connect(struct koloComm *c) {
  koloResult_t res = init_steps(c);
  if (res != koloSuccess) name_first_failure(c, res);
  /* The root this rank started has served (it exits once every rank has
   * its answer) or cannot any more: a failed init leaves no thread or
   * socket of it behind. */
  kolo_bootstrap_root_stop(c->root);
  c->root = NULL;
  if (res != koloSuccess) {
    atomic_store(&c->failed, (int)res);
    return res;
  }
  KOLO_INFO("rank %d of %d: communicator ready; %d bootstrap connection(s) to other ranks", c->rank, c->nranks,
            kolo_bootstrap_links(c->bs));
  atomic_store(&c->ready, 1);
  return res;
}

static koloResult_t new_init_job(struct koloComm *c, const kolo_uid *uids, int nids) {
  c->init_job = calloc(1, sizeof *c->init_job);
  if (c->init_job != NULL) c->init_job->uids = malloc((size_t)nids * sizeof *uids);
  if (c->init_job == NULL || c->init_job->uids == NULL)
    return kolo_error(NULL, koloSystemError, "out of memory at init");
  memcpy(c->init_job->uids, uids, (size_t)nids * sizeof *uids);
  c->init_job->nids = nids;
  return koloSuccess;
}

koloResult_t kolo_comm_create(const char *fn, int nranks, int rank, const kolo_uid *uids, int nids,
                              koloConfig_t *config, struct koloComm **out) {
  kolo_errbuf *teb = kolo_thread_errbuf();
  if (nranks < 1 || nranks > (1 << 20))
    return kolo_error(teb, koloInvalidArgument, "%s: nranks = %d is outside 1..%d", fn, nranks, 1 << 20);
  if (rank < 0 || rank >= nranks)
    return kolo_error(teb, koloInvalidArgument, "%s: rank %d is outside 0..%d", fn, rank, nranks - 1);
  struct koloComm *c = calloc(1, sizeof *c);
  if (c == NULL) return kolo_error(teb, koloSystemError, "%s: out of memory", fn);
  kolo_errbuf_make_sticky(&c->err);
  c->rank = rank;
  c->nranks = nranks;
  c->job = uids[0].job; /* every rank's: the first id's */
  c->failed = koloSuccess;
  koloResult_t res = new_init_job(c, uids, nids);
  if (res == koloSuccess) res = resolve_config(c, config);
  if (res == koloSuccess) res = kolo_comm_load_schedule(c, fn);
  if (res == koloSuccess) res = kolo_comm_load_tuning(c, fn);
  if (res == koloSuccess) res = tuned_channels(c, config);
  if (res == koloSuccess && nids == 1)
    res = kolo_rendezvous_start_root(&uids[0], rank, c->timeout_ms, teb, &c->root);
  if (res != koloSuccess) {
    kolo_comm_free(c);
    return res;
  }
  c->owner = (kolo_exec_owner){.rank = rank,
                               .timeout_ms = c->timeout_ms,
                               .spin = (int)kolo_param_int("KOLO_SPIN"),
                               .yields = (int)kolo_param_int("KOLO_YIELDS"),
                               .abort_flag = &c->aborted,
                               .eb = &c->err,
                               .failed = koloSuccess};
  kolo_comm_owner_hooks(&c->owner);
  *out = c;
  return koloSuccess;
}

/* Runs c's init now, inside a group, or on a thread of its own
 * (config.blocking = 0); sets *comm unless a blocking init failed. */
koloResult_t kolo_comm_init_or_defer(struct koloComm *c, koloComm_t *comm) {
  if (kolo_group_depth() > 0) return kolo_group_add_init(c, comm);
  if (!c->blocking) {
    koloResult_t res = kolo_init_start(c);
    if (res != koloSuccess) {
      kolo_comm_free(c);
      return res;
    }
    *comm = c;
    return koloInProgress;
  }
  koloResult_t res = kolo_comm_connect(c);
  if (res != koloSuccess) {
    kolo_error_copy(kolo_thread_errbuf(), &c->err);
    kolo_comm_free(c);
    return res;
  }
  *comm = c;
  return koloSuccess;
}

koloResult_t kolo_comm_init_owning(koloComm_t *comm, int nranks, koloUniqueId commId, int rank,
                                   koloConfig_t *config, kolo_root *root) {
  kolo_errbuf *teb = kolo_thread_errbuf();
  kolo_uid uid;
  struct koloComm *c = NULL;
  koloResult_t res = comm != NULL ? kolo_uid_decode(&commId, &uid, teb)
                                  : kolo_error(teb, koloInvalidArgument, "koloCommInitRank: comm is NULL");
  if (res == koloSuccess) res = kolo_comm_create("koloCommInitRank", nranks, rank, &uid, 1, config, &c);
  if (res != koloSuccess) {
    kolo_bootstrap_root_stop(root);
    return res;
  }
  if (root != NULL) c->root = root; /* stopped once init ends, or when c is freed */
  return kolo_comm_init_or_defer(c, comm);
}

koloResult_t koloCommInitRankConfig(koloComm_t *comm, int nranks, koloUniqueId commId, int rank,
                                    koloConfig_t *config) {
  return kolo_comm_init_owning(comm, nranks, commId, rank, config, NULL);
}

koloResult_t koloCommInitRank(koloComm_t *comm, int nranks, koloUniqueId commId, int rank) {
  return koloCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* ---- several ranks in one process --------------------------------------- */

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

/* ---- queries and teardown ----------------------------------------------- */

/* NCCL has no host communicators; a host one has no device: -1, refused. */
koloResult_t koloCommCuDevice(const koloComm_t comm, int *device) {
  if (comm == NULL || device == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommCuDevice: %s is NULL", comm ? "device" : "comm");
  koloResult_t res = kolo_comm_check_ready(comm, "koloCommCuDevice", 1);
  if (res != koloSuccess) return res;
  if (comm->kind == NULL) {
    *device = -1;
    return kolo_error(&comm->err, koloInvalidUsage,
                      "koloCommCuDevice: rank %d: this is a host communicator (koloMemHost), which has no CUDA device",
                      comm->rank);
  }
  *device = comm->kind->device(comm);
  return koloSuccess;
}

koloResult_t koloCommCount(const koloComm_t comm, int *count) {
  if (comm == NULL || count == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommCount: %s is NULL", comm ? "count" : "comm");
  *count = comm->nranks;
  return koloSuccess;
}

koloResult_t koloCommUserRank(const koloComm_t comm, int *rank) {
  if (comm == NULL || rank == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommUserRank: %s is NULL", comm ? "rank" : "comm");
  *rank = comm->rank;
  return koloSuccess;
}

koloResult_t koloCommGetAsyncError(koloComm_t comm, koloResult_t *asyncError) {
  if (comm == NULL || asyncError == NULL)
    return kolo_error(NULL, koloInvalidArgument, "koloCommGetAsyncError: %s is NULL",
                      comm ? "asyncError" : "comm");
  /* Init still running: nothing else may be read yet.  Revoked: whether
   * the stopped work has drained.  CUDA: the kernels' status word (no
   * stream query: koloSuccess says no failure was seen, not that the work
   * is done). */
  *asyncError = atomic_load(&comm->init_busy) ? koloInProgress
                : atomic_load(&comm->revoked)  ? kolo_revoke_status(comm)
                : comm->kind                   ? comm->kind->status(comm)
                : comm->nbq                    ? kolo_nb_status(comm)
                                               : (koloResult_t)comm->failed;
  return koloSuccess;
}

/* As NCCL's: the work issued so far completes (a non-blocking comm's queue
 * drains, a CUDA comm's kernels end), its status is returned, and every
 * later call but koloCommDestroy (and the queries) is refused. */
koloResult_t koloCommFinalize(koloComm_t comm) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommFinalize: comm is NULL");
  if (atomic_load(&comm->init_busy) || atomic_load(&comm->revoked))
    return kolo_comm_check_ready(comm, "koloCommFinalize", 0);
  if (atomic_exchange(&comm->finalized, 1))
    return kolo_error(&comm->err, koloInvalidUsage, "koloCommFinalize: rank %d: the communicator was finalized already",
                      comm->rank);
  if (comm->nbq) kolo_nb_stop(comm); /* drains the queue */
  if (comm->kind == NULL) return (koloResult_t)comm->failed;
  comm->kind->quiesce(comm, "koloCommFinalize");
  return comm->kind->status(comm);
}

koloResult_t koloCommDestroy(koloComm_t comm) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommDestroy: comm is NULL");
  kolo_init_join(comm);
  if (comm->nbq) kolo_nb_stop(comm);
  kolo_comm_free(comm);
  return koloSuccess;
}

koloResult_t koloCommAbort(koloComm_t comm) {
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloCommAbort: comm is NULL");
  kolo_init_join(comm); /* an init cannot be cut short: its waits are bounded */
  atomic_store(&comm->aborted, 1);
  if (comm->kind) comm->kind->abort(comm); /* this comm's kernels stop at their next poll */
  kolo_comm_stop_from(comm, KOLO_STOP_ABORT, comm->rank, NULL);
  if (comm->nbq) kolo_nb_stop(comm);
  kolo_comm_free(comm);
  return koloSuccess;
}

/* ---- children (split.c, shrink.c) --------------------------------------- */

void kolo_comm_inherit(const struct koloComm *c, koloConfig_t *out) {
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  *out = def;
  out->blocking = c->blocking;
  out->timeoutMs = c->timeout_ms;
  out->nChannels = c->nchannels;
  out->bufferSize = (int)(c->slot_bytes * c->nslots);
  out->memory = c->memory;
  if (c->kind) out->cudaDev = c->kind->device(c);
}
