/* comm_agree.c - what every rank must agree on (comm_wire.h's
 * kolo_comm_shape), checked at init: the LL settings and KOLO_PROTO matter
 * for CUDA communicators only (they choose each call's protocol and
 * pipes), KOLO_ALGO for all (ranks choosing differently would not meet). */
#include "core/comm_agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "core/comm_gather.h"
#include "core/comm_wire.h"
#include "core/proto_select.h"
#include "ring/algo_select.h"

#define TAG_CONFIG 0x10u

static kolo_comm_shape my_shape(const struct koloComm *c) {
  return (kolo_comm_shape){c->nchannels, (int32_t)c->nslots, c->memory, (int32_t)c->ll_slot_bytes,
                           c->slot_bytes, c->ll_threshold, c->algo.forced, c->sched_hash, c->algo.allowed,
                           c->tuning_hash, c->algo.bcast_allowed, c->proto_off, c->algo.ag_allowed,
                           (uint64_t)c->min_channel_bytes, c->algo.reduce_allowed, (uint32_t)c->channels_fixed,
                           (uint32_t)c->host_cpus, (uint32_t)c->host_ranks, (uint64_t)c->net_chunk_bytes};
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

/* Over the network a round's chunk follows KOLO_NET_CHUNK_BYTES: ranks that
 * differ in it would split a call into rounds their peers do not expect. */
static koloResult_t net_chunk_differs(struct koloComm *c, int r, uint64_t theirs) {
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d: KOLO_NET_CHUNK_BYTES differs between ranks, and must be alike on all (it sets the "
                    "rounds each call moves in over the network): rank %d has %llu, this rank %llu (0: the default)",
                    c->rank, r, (unsigned long long)theirs, (unsigned long long)c->net_chunk_bytes);
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

/* The encoding is canonical: two shapes are equal when their bytes are,
 * but for their hosts' CPUs and ranks, which hosts may differ in.
 * mine_enc: this rank's shape, encoded. */
static int same_shape(kolo_comm_shape theirs, const kolo_comm_shape *mine, const uint8_t *mine_enc) {
  uint8_t a[KOLO_COMM_SHAPE_BYTES];
  theirs.host_cpus = mine->host_cpus;
  theirs.host_ranks = mine->host_ranks;
  kolo_encode_comm_shape(&theirs, a);
  return memcmp(a, mine_enc, sizeof a) == 0;
}

/* Rank r let the channel count default and this rank did not, or the
 * other way round: the default may drop (comm_topology.c), a set count not. */
static koloResult_t fixed_differs(struct koloComm *c, int r) {
  return kolo_error(&c->err, koloInvalidUsage,
                    "rank %d: the channel count is %s on this rank and %s on rank %d: set config.nChannels, "
                    "KOLO_NCHANNELS, KOLO_MIN_NCHANNELS or the tuning file alike on all ranks",
                    c->rank, c->channels_fixed ? "set" : "left to its default",
                    c->channels_fixed ? "left to its default" : "set", r);
}

koloResult_t kolo_comm_check_shapes(struct koloComm *c) {
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
    else if (theirs.net_chunk_bytes != mine.net_chunk_bytes)
      res = net_chunk_differs(c, r, theirs.net_chunk_bytes);
    else if (theirs.channels_fixed != mine.channels_fixed)
      res = fixed_differs(c, r);
    else if (!same_shape(theirs, &mine, enc))
      res = shape_differs(c, r, &theirs, &mine);
    else {
      c->cpus_short |= theirs.host_cpus < 2 * theirs.host_ranks;
      c->cpus_crowded |= theirs.host_cpus < theirs.host_ranks;
      int per_cpu = (int)((theirs.host_ranks + theirs.host_cpus - 1) / theirs.host_cpus);
      if (per_cpu > c->ranks_per_cpu) c->ranks_per_cpu = per_cpu;
    }
  }
  free(all);
  return res;
}

