/* comm_config.c - a communicator's settings: config fields first, then
 * the KOLO_* parameters, then what a tuning file says; and how its waits
 * spin, yield and sleep on this host. */
#include "core/comm_config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "core/mem_kind.h"
#include "core/proto_env.h"
#include "ring/algo_select.h"

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
  if (lo > 1) c->channels_fixed = 1;
  if (c->nchannels < lo) c->nchannels = lo < hi ? lo : hi;
  if (c->nchannels > hi) c->nchannels = hi;
  return koloSuccess;
}

/* A tuning file whose `channels` lines name more channels than the
 * default gets them, unless config.nChannels or KOLO_NCHANNELS says how
 * many (a call never uses more than the communicator has). */
koloResult_t kolo_comm_tuned_channels(struct koloComm *c, const koloConfig_t *cfg) {
  _Static_assert(KOLO_TUNING_MAX_CHANNELS == KOLO_MAX_CHANNELS, "a channels line names at most KOLO_MAX_CHANNELS");
  koloConfig_t def = KOLO_CONFIG_INITIALIZER;
  if (cfg == NULL) cfg = &def;
  int most = c->algo.tuned != NULL ? kolo_tuned_max_channels(c->algo.tuned, c->nranks) : 0;
  if (most <= c->nchannels || cfg->nChannels != KOLO_CONFIG_UNDEF || kolo_param_is_set("KOLO_NCHANNELS"))
    return koloSuccess;
  if (c->rank == 0) KOLO_INFO("KOLO_TUNING_FILE names %d channels: the communicator has them (was %d)", most, c->nchannels);
  c->untuned_channels = c->nchannels, c->untuned_fixed = c->channels_fixed;
  c->nchannels = most;
  c->channels_fixed = 1;
  return bound_channels(c, cfg);
}

void kolo_comm_narrowed_channels(struct koloComm *c) {
  if (c->untuned_channels == 0 || c->kind != NULL) return;
  int most = kolo_tuned_max_channels(c->algo.tuned, c->nranks);
  if (most >= c->nchannels) return;
  const int keep = most > c->untuned_channels ? most : c->untuned_channels;
  if (c->rank == 0)
    KOLO_INFO("KOLO_TUNING_FILE's lines for this communicator's link name %d channels at most (0: none): it has %d, "
              "not %d",
              most, keep, c->nchannels);
  if (keep == c->untuned_channels) c->channels_fixed = c->untuned_fixed;
  c->nchannels = keep;
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

/* KOLO_NET_CHUNK_BYTES: 0 leaves a round's chunk over the network to
 * comm_topology.c's rule; whole pages keep chunks 64-byte aligned for
 * every type, as the slots are. */
static koloResult_t resolve_net_chunk(struct koloComm *c) {
  int64_t bytes = kolo_param_int("KOLO_NET_CHUNK_BYTES");
  if (bytes < 0 || bytes > ((int64_t)1 << 30) || bytes % 4096 != 0)
    return kolo_error(NULL, koloInvalidArgument,
                      "KOLO_NET_CHUNK_BYTES = %lld is neither 0 nor a multiple of 4 KiB in 4 KiB..1 GiB",
                      (long long)bytes);
  c->net_chunk_bytes = (size_t)bytes;
  return koloSuccess;
}

koloResult_t kolo_comm_resolve_config(struct koloComm *c, const koloConfig_t *cfg) {
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
  c->channels_fixed = cfg->nChannels != KOLO_CONFIG_UNDEF || kolo_param_is_set("KOLO_NCHANNELS");
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
  koloResult_t res = resolve_net_chunk(c);
  return res != koloSuccess ? res : resolve_p2p_slots(c);
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
/* ... except on network pipes: their wait sleeps on the pipe's own socket
 * or completion channel, and the data that ends it wakes it through the
 * kernel, which the sender pays for anyway (a syscall per frame).  A rank
 * that yields meanwhile only takes CPU from the ranks whose sends it waits
 * for.  4 processes in network namespaces on 2 CPUs, 8-byte all-reduce
 * over TCP, perf/compare.sh ns, 7 alternating rounds, two runs each, kolo /
 * Open MPI: yielding for 5 ms 1.14 and 1.16, 16 yields then the pipe's
 * sleep 0.82 and 0.88; over loopback, medians of 11: 57.1 us, 50.0 us (4
 * yields 50.4, 64 yields 53.4, none 105). */
#define CROWDED_WAKE_YIELDS 16

void kolo_comm_tune_waits(struct koloComm *c) {
  int local = kolo_bootstrap_host_ranks(c->bs);
  long cpus = kolo_host_cpus();
  c->host_ranks = local;
  c->host_cpus = (int)cpus;
  int crowded = local > cpus;
  if (getenv("KOLO_SPIN") == NULL && crowded) c->owner.spin = 8;
  if (getenv("KOLO_YIELDS") == NULL && crowded) {
    c->owner.yield_ns = CROWDED_YIELD_NS;
    c->owner.wake_yields = CROWDED_WAKE_YIELDS;
  }
  if (c->owner.yield_ns > 0)
    KOLO_INFO("rank %d: %d rank(s) on this host, %ld CPU(s): waits spin %d polls, then yield for %lld us "
              "(on network pipes %d times)",
              c->rank, local, cpus, c->owner.spin, (long long)(c->owner.yield_ns / 1000), c->owner.wake_yields);
  else
    KOLO_INFO("rank %d: %d rank(s) on this host, %ld CPU(s): waits spin %d polls, then yield %d times",
              c->rank, local, cpus, c->owner.spin, c->owner.yields);
}

