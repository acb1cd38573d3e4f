/* comm_codec.c - the records of comm_wire.h as bytes: one encoder and one
 * decoder each, on wire_codec.h's cursors.  Decoders take a buffer (the
 * fuzz targets call them on raw input), read every field, then check the
 * length and each field's range, and name the sending rank in their
 * sentence.  No system calls.
 */
#include <stdio.h>
#include <string.h>

#include "core/comm_state.h"
#include "core/comm_wire.h"
#include "core/proto_select.h"
#include "ring/algo_select.h"
#include "transport/bootstrap_wire.h"

/* ---- pieces ------------------------------------------------------------------ */

/* The end of every decoder: each byte read, none left over. */
static int whole(const kolo_wire_in *r, size_t want, int peer, const char *what, char *why, size_t why_len) {
  return kolo_wire_whole(r, want, peer, what, why, why_len) == 0 ? KOLO_COMM_WIRE_OK : KOLO_COMM_WIRE_GARBLED;
}

/* wrong: NULL (the record is fine) or what is wrong with it. */
static int verdict(const char *wrong, int peer, const char *what, char *why, size_t why_len) {
  if (wrong == NULL) return KOLO_COMM_WIRE_OK;
  snprintf(why, why_len, "rank %d sent a %s %s", peer, what, wrong);
  return KOLO_COMM_WIRE_GARBLED;
}

static int in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

static int is_cuda_error(int32_t e) { return in_range(e, 0, KOLO_WIRE_MAX_CUDA_ERROR); }

/* ---- the communicator's shape ------------------------------------------------- */

void kolo_encode_comm_shape(const kolo_comm_shape *s, uint8_t out[KOLO_COMM_SHAPE_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_COMM_SHAPE_BYTES);
  kolo_put_i32(&w, s->nchannels);
  kolo_put_i32(&w, s->nslots);
  kolo_put_i32(&w, s->memory);
  kolo_put_i32(&w, s->ll_slot_bytes);
  kolo_put_u64(&w, s->slot_bytes);
  kolo_put_u64(&w, s->ll_threshold);
  kolo_put_i32(&w, s->algo);
  kolo_put_u32(&w, s->algo_allowed);
  kolo_put_u32(&w, s->bcast_allowed);
  kolo_put_u32(&w, s->proto_off);
  kolo_put_u32(&w, s->ag_allowed);
  kolo_put_u64(&w, s->min_channel_bytes);
  kolo_put_u32(&w, s->reduce_allowed);
  kolo_put_u32(&w, s->channels_fixed);
  kolo_put_u32(&w, s->host_cpus);
  kolo_put_u32(&w, s->host_ranks);
  kolo_put_u64(&w, s->net_chunk_bytes);
  kolo_put_u64(&w, s->tuning_hash);
  kolo_put_u64(&w, s->sched_hash);
}

/* The ranges resolve_config (comm.c) and kolo_proto_apply let through. */
static const char *shape_wrong(const kolo_comm_shape *s, char *buf, size_t n) {
  if (!in_range(s->nchannels, 1, KOLO_MAX_CHANNELS))
    snprintf(buf, n, "with %d channels (1..%d)", s->nchannels, KOLO_MAX_CHANNELS);
  else if (!in_range(s->nslots, 2, 64) || (s->nslots & (s->nslots - 1)) != 0)
    snprintf(buf, n, "with %d slots (a power of two in 2..64)", s->nslots);
  else if (s->memory != koloMemHost && s->memory != koloMemCuda)
    snprintf(buf, n, "of memory kind %d (0 host, 1 CUDA)", s->memory);
  else if (s->ll_slot_bytes != 0 && (!in_range(s->ll_slot_bytes, 1024, 1 << 20) || s->ll_slot_bytes % 1024 != 0))
    snprintf(buf, n, "with LL slots of %d bytes (0, or a multiple of 1 KiB in 1 KiB..1 MiB)", s->ll_slot_bytes);
  else if (s->slot_bytes < 4096 || s->slot_bytes > ((uint64_t)1 << 30) || s->slot_bytes % 4096 != 0)
    snprintf(buf, n, "with slots of %llu bytes (a multiple of 4 KiB in 4 KiB..1 GiB)",
             (unsigned long long)s->slot_bytes);
  else if (s->ll_threshold > ((uint64_t)1 << 40))
    snprintf(buf, n, "with an LL threshold of %llu bytes (0..2^40)", (unsigned long long)s->ll_threshold);
  else if (s->algo != KOLO_ALGO_AUTO &&
           !(in_range(s->algo, 0, KOLO_ALGO_NUM - 1) && ((KOLO_ALGO_ALL_REDUCE_SET >> s->algo) & 1u)))
    snprintf(buf, n, "with algorithm %d (-1 auto, 0 ring, 1 hier, 2 rd, 3 rabenseifner, 5 direct, 8 oneshot)", s->algo);
  else if ((s->algo_allowed & ~KOLO_ALGO_ALL_REDUCE_SET) != 0)
    snprintf(buf, n, "with allowed algorithms 0x%x (bits within 0x%x)", s->algo_allowed, KOLO_ALGO_ALL_REDUCE_SET);
  else if ((s->bcast_allowed & ~KOLO_ALGO_BCAST_SET) != 0)
    snprintf(buf, n, "with allowed broadcast algorithms 0x%x (bits within 0x%x)", s->bcast_allowed,
             KOLO_ALGO_BCAST_SET);
  else if ((s->ag_allowed & ~KOLO_ALGO_AG_SET) != 0)
    snprintf(buf, n, "with allowed all-gather algorithms 0x%x (bits within 0x%x)", s->ag_allowed, KOLO_ALGO_AG_SET);
  else if ((s->reduce_allowed & ~KOLO_ALGO_REDUCE_SET) != 0)
    snprintf(buf, n, "with allowed reduce algorithms 0x%x (bits within 0x%x)", s->reduce_allowed,
             KOLO_ALGO_REDUCE_SET);
  else if (s->algo != kolo_algo_allow_single(s->algo_allowed))
    snprintf(buf, n, "with algorithm %d that its allowed set 0x%x does not force", s->algo, s->algo_allowed);
  else if (s->min_channel_bytes > ((uint64_t)1 << 62))
    snprintf(buf, n, "with %llu bytes a channel (KOLO_MIN_CHANNEL_BYTES, 0..2^62)", (unsigned long long)s->min_channel_bytes);
  else if (s->channels_fixed > 1)
    snprintf(buf, n, "with channels fixed = %u (0 or 1)", s->channels_fixed);
  else if (!in_range(s->host_cpus, 1, 1 << 20) || !in_range(s->host_ranks, 1, 1 << 20))
    snprintf(buf, n, "with %u CPUs for %u ranks on its host (1..2^20 each)", s->host_cpus, s->host_ranks);
  else if (s->net_chunk_bytes > ((uint64_t)1 << 30) || s->net_chunk_bytes % 4096 != 0)
    snprintf(buf, n, "with chunks of %llu bytes over the network (KOLO_NET_CHUNK_BYTES: 0, or a multiple of 4 KiB "
             "in 4 KiB..1 GiB)", (unsigned long long)s->net_chunk_bytes);
  else if (kolo_proto_off_wrong(s->proto_off) != NULL)
    snprintf(buf, n, "with protocols left out 0x%x that %s", s->proto_off, kolo_proto_off_wrong(s->proto_off));
  else
    return NULL;
  return buf;
}

int kolo_decode_comm_shape(const void *in, size_t len, int peer, kolo_comm_shape *s, char *why, size_t why_len) {
  static const char what[] = "communicator shape";
  kolo_wire_in r = kolo_wire_reader(in, len);
  s->nchannels = kolo_get_i32(&r);
  s->nslots = kolo_get_i32(&r);
  s->memory = kolo_get_i32(&r);
  s->ll_slot_bytes = kolo_get_i32(&r);
  s->slot_bytes = kolo_get_u64(&r);
  s->ll_threshold = kolo_get_u64(&r);
  s->algo = kolo_get_i32(&r);
  s->algo_allowed = kolo_get_u32(&r);
  s->bcast_allowed = kolo_get_u32(&r);
  s->proto_off = kolo_get_u32(&r);
  s->ag_allowed = kolo_get_u32(&r);
  s->min_channel_bytes = kolo_get_u64(&r);
  s->reduce_allowed = kolo_get_u32(&r);
  s->channels_fixed = kolo_get_u32(&r);
  s->host_cpus = kolo_get_u32(&r);
  s->host_ranks = kolo_get_u32(&r);
  s->net_chunk_bytes = kolo_get_u64(&r);
  s->tuning_hash = kolo_get_u64(&r);
  s->sched_hash = kolo_get_u64(&r);
  if (whole(&r, KOLO_COMM_SHAPE_BYTES, peer, what, why, why_len) != KOLO_COMM_WIRE_OK) return KOLO_COMM_WIRE_GARBLED;
  char buf[128];
  return verdict(shape_wrong(s, buf, sizeof buf), peer, what, why, why_len);
}

/* ---- split ---------------------------------------------------------------------- */

void kolo_encode_split_entry(const kolo_split_entry *e, uint8_t out[KOLO_SPLIT_ENTRY_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_SPLIT_ENTRY_BYTES);
  kolo_put_i32(&w, e->color);
  kolo_put_i32(&w, e->key);
  kolo_put_i32(&w, e->rank);
}

int kolo_decode_split_entry(const void *in, size_t len, int peer, kolo_split_entry *e, char *why, size_t why_len) {
  static const char what[] = "split entry";
  kolo_wire_in r = kolo_wire_reader(in, len);
  e->color = kolo_get_i32(&r);
  e->key = kolo_get_i32(&r);
  e->rank = kolo_get_i32(&r);
  if (whole(&r, KOLO_SPLIT_ENTRY_BYTES, peer, what, why, why_len) != KOLO_COMM_WIRE_OK) return KOLO_COMM_WIRE_GARBLED;
  char buf[96];
  if (e->color < KOLO_SPLIT_NOCOLOR)
    snprintf(buf, sizeof buf, "of color %d (KOLO_SPLIT_NOCOLOR or 0 and up)", e->color);
  else if (e->rank != peer)
    snprintf(buf, sizeof buf, "for rank %d", e->rank);
  else
    return KOLO_COMM_WIRE_OK;
  return verdict(buf, peer, what, why, why_len);
}

/* ---- shrink --------------------------------------------------------------------- */

void kolo_encode_shrink_msg(const kolo_shrink_msg *m, uint8_t out[KOLO_SHRINK_MSG_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_SHRINK_MSG_BYTES);
  kolo_put_bytes(&w, m->id.internal, sizeof m->id.internal);
  kolo_put_u64(&w, m->digest);
  kolo_put_i32(&w, m->nsurvivors);
}

int kolo_decode_shrink_msg(const void *in, size_t len, int peer, int nranks, kolo_shrink_msg *m, char *why,
                           size_t why_len) {
  static const char what[] = "shrink message";
  kolo_wire_in r = kolo_wire_reader(in, len);
  kolo_get_bytes(&r, m->id.internal, sizeof m->id.internal);
  m->digest = kolo_get_u64(&r);
  m->nsurvivors = kolo_get_i32(&r);
  if (whole(&r, KOLO_SHRINK_MSG_BYTES, peer, what, why, why_len) != KOLO_COMM_WIRE_OK) return KOLO_COMM_WIRE_GARBLED;
  char buf[96];
  if (!in_range(m->nsurvivors, 1, nranks)) {
    snprintf(buf, sizeof buf, "for %d survivors (1..%d)", m->nsurvivors, nranks);
    return verdict(buf, peer, what, why, why_len);
  }
  kolo_uid uid;
  snprintf(buf, sizeof buf, "the unique id rank %d sent", peer);
  int v = kolo_decode_unique_id(m->id.internal, sizeof m->id.internal, buf, &uid, why, why_len);
  return v == KOLO_WIRE_OK ? KOLO_COMM_WIRE_OK : KOLO_COMM_WIRE_GARBLED;
}

/* ---- CUDA: devices -------------------------------------------------------------- */

void kolo_encode_device_choice(const kolo_device_choice *d, uint8_t out[KOLO_DEVICE_CHOICE_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_DEVICE_CHOICE_BYTES);
  kolo_put_i32(&w, d->err);
  kolo_put_i32(&w, d->dev);
  kolo_put_i32(&w, d->count);
}

static const char *choice_wrong(const kolo_device_choice *d, char *buf, size_t n) {
  if (!is_cuda_error(d->err))
    snprintf(buf, n, "with CUDA error %d (0..%d)", d->err, KOLO_WIRE_MAX_CUDA_ERROR);
  else if (!in_range(d->count, 0, KOLO_WIRE_MAX_DEVICES))
    snprintf(buf, n, "of %d devices (0..%d)", d->count, KOLO_WIRE_MAX_DEVICES);
  else if (d->dev < -1)
    snprintf(buf, n, "naming device %d (-1: none, else an ordinal)", d->dev);
  else if (d->err == 0 && !in_range(d->dev, 0, d->count - 1))
    snprintf(buf, n, "that selected device %d of the %d its process sees without an error", d->dev, d->count);
  else
    return NULL;
  return buf;
}

int kolo_decode_device_choice(const void *in, size_t len, int peer, kolo_device_choice *d, char *why, size_t why_len) {
  static const char what[] = "CUDA device choice";
  kolo_wire_in r = kolo_wire_reader(in, len);
  d->err = kolo_get_i32(&r);
  d->dev = kolo_get_i32(&r);
  d->count = kolo_get_i32(&r);
  if (whole(&r, KOLO_DEVICE_CHOICE_BYTES, peer, what, why, why_len) != KOLO_COMM_WIRE_OK) return KOLO_COMM_WIRE_GARBLED;
  char buf[128];
  return verdict(choice_wrong(d, buf, sizeof buf), peer, what, why, why_len);
}

/* ---- CUDA: room for blocks ------------------------------------------------------- */

void kolo_encode_device_room(const kolo_device_room *f, uint8_t out[KOLO_DEVICE_ROOM_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KOLO_DEVICE_ROOM_BYTES);
  kolo_put_i32(&w, f->err);
  kolo_put_i32(&w, f->dev);
  kolo_put_i32(&w, f->sms);
  kolo_put_i32(&w, f->per_sm);
  kolo_put_i32(&w, f->sharing);
  kolo_put_i32(&w, f->mps);
  kolo_put_u64(&w, f->gpu);
}

static const char *room_wrong(const kolo_device_room *f, int nranks, char *buf, size_t n) {
  if (!is_cuda_error(f->err))
    snprintf(buf, n, "with CUDA error %d (0..%d)", f->err, KOLO_WIRE_MAX_CUDA_ERROR);
  else if (!in_range(f->dev, 0, KOLO_WIRE_MAX_DEVICES - 1))
    snprintf(buf, n, "naming device %d (0..%d)", f->dev, KOLO_WIRE_MAX_DEVICES - 1);
  else if (!in_range(f->sms, 0, 65535) || !in_range(f->per_sm, 0, 65535))
    snprintf(buf, n, "of %d SMs holding %d blocks each (0..65535 each)", f->sms, f->per_sm);
  else if (!in_range(f->sharing, 1, nranks))
    snprintf(buf, n, "of a device shared by %d ranks of its process (1..%d)", f->sharing, nranks);
  else if (!in_range(f->mps, 0, 1))
    snprintf(buf, n, "saying MPS is %d (0 or 1)", f->mps);
  else
    return NULL;
  return buf;
}

int kolo_decode_device_room(const void *in, size_t len, int peer, int nranks, kolo_device_room *f, char *why,
                            size_t why_len) {
  static const char what[] = "record of its CUDA device's room";
  kolo_wire_in r = kolo_wire_reader(in, len);
  f->err = kolo_get_i32(&r);
  f->dev = kolo_get_i32(&r);
  f->sms = kolo_get_i32(&r);
  f->per_sm = kolo_get_i32(&r);
  f->sharing = kolo_get_i32(&r);
  f->mps = kolo_get_i32(&r);
  f->gpu = kolo_get_u64(&r);
  if (whole(&r, KOLO_DEVICE_ROOM_BYTES, peer, what, why, why_len) != KOLO_COMM_WIRE_OK) return KOLO_COMM_WIRE_GARBLED;
  char buf[128];
  return verdict(room_wrong(f, nranks, buf, sizeof buf), peer, what, why, why_len);
}
