/* comm_wire.h - what the ranks of a communicator tell each other over the
 * bootstrap mesh at init, split and shrink, encoded explicitly
 * (transport/wire_codec.h: fixed widths, little-endian) (internal).
 *
 * Each record has an encoder and a decoder (comm_codec.c).  The mesh hello
 * has already checked that both ends speak KOLO_WIRE_VERSION, so records
 * carry no version of their own (the unique id inside a shrink message
 * carries its own).  Decoders take the rank that sent the record, refuse
 * any other length and any field out of the range a rank of this version
 * sends, and say so in a sentence naming that rank ("rank 3 sent a
 * communicator shape with 0 channels (1..16)").  No system calls: the fuzz
 * targets link it.
 */
#ifndef KOLO_CORE_COMM_WIRE_H
#define KOLO_CORE_COMM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"
#include "transport/wire_codec.h"

/* Verdicts, as the bootstrap's decoders (KOLO_WIRE_OK, KOLO_WIRE_GARBLED). */
enum { KOLO_COMM_WIRE_OK = 0, KOLO_COMM_WIRE_GARBLED = -1 };

/* ---- init: what every rank must agree on (tag 0x10, allgather) ------------ */

typedef struct {
  int32_t nchannels;     /* 1..KOLO_MAX_CHANNELS */
  int32_t nslots;        /* a power of two, 2..64 */
  int32_t memory;        /* koloMemHost or koloMemCuda */
  int32_t ll_slot_bytes; /* 0 (host), or a multiple of 1 KiB in 1 KiB..1 MiB */
  uint64_t slot_bytes;   /* a multiple of 4 KiB in 4 KiB..2 GiB */
  uint64_t ll_threshold; /* 0..2^40 */
  int32_t algo;          /* KOLO_ALGO_AUTO or an algorithm (ring/algo.h) */
  uint64_t sched_hash;   /* KOLO_SCHEDULE_FILE's hash, 0: none (any value) */
  /* encoded after algo, before sched_hash (which stays last) */
  uint32_t algo_allowed; /* KOLO_ALGO's set (ring/algo_select.h): 0, or within KOLO_ALGO_ALL */
  uint64_t tuning_hash;  /* KOLO_TUNING_FILE's hash, 0: none (any value) */
  /* encoded after algo_allowed, in this order, before tuning_hash */
  uint32_t bcast_allowed; /* KOLO_ALGO's broadcast set: 0, or within KOLO_ALGO_BCAST_SET */
  uint32_t proto_off;     /* KOLO_PROTO's protocols left out per collective (core/proto_select.h); 0: none */
  uint32_t ag_allowed;    /* KOLO_ALGO's all-gather set: 0, or within KOLO_ALGO_AG_SET */
  /* encoded after ag_allowed, before tuning_hash */
  uint64_t min_channel_bytes; /* KOLO_MIN_CHANNEL_BYTES: 0..2^62 (a call's channels follow it) */
  /* encoded after min_channel_bytes, before tuning_hash */
  uint32_t reduce_allowed; /* KOLO_ALGO's reduce set: 0, or within KOLO_ALGO_REDUCE_SET */
  /* encoded after reduce_allowed, before tuning_hash */
  uint32_t channels_fixed; /* 0 or 1: nchannels was set, not defaulted (compared) */
  uint32_t host_cpus;      /* the sender's host: kolo_host_cpus(), 1..2^20 (may differ) */
  uint32_t host_ranks;     /* ranks of the communicator on that host, 1..2^20 (may differ) */
  /* encoded after host_ranks, before tuning_hash */
  uint64_t net_chunk_bytes; /* KOLO_NET_CHUNK_BYTES: 0 (the default rule), or a multiple of 4 KiB in 4 KiB..1 GiB */
} kolo_comm_shape;
#define KOLO_COMM_SHAPE_BYTES (4 * 4 + 2 * 8 + 4 + 4 + 4 + 4 + 4 + 8 + 4 + 3 * 4 + 8 + 8 + 8)

void kolo_encode_comm_shape(const kolo_comm_shape *s, uint8_t out[KOLO_COMM_SHAPE_BYTES]);
int kolo_decode_comm_shape(const void *in, size_t len, int peer, kolo_comm_shape *s, char *why, size_t why_len);

/* ---- koloCommSplit: each rank's color and key (tag 0x20, allgather) ------- */

typedef struct {
  int32_t color; /* KOLO_SPLIT_NOCOLOR or 0 and up */
  int32_t key;
  int32_t rank;  /* the sender's rank in the parent */
} kolo_split_entry;
#define KOLO_SPLIT_ENTRY_BYTES 12

void kolo_encode_split_entry(const kolo_split_entry *e, uint8_t out[KOLO_SPLIT_ENTRY_BYTES]);
/* Refuses a color below KOLO_SPLIT_NOCOLOR and a rank other than peer. */
int kolo_decode_split_entry(const void *in, size_t len, int peer, kolo_split_entry *e, char *why, size_t why_len);

/* ---- koloCommShrink: the lowest survivor's new id (tag 0x22, send) ---------- */

typedef struct {
  koloUniqueId id;    /* as kolo_uid_encode writes it (its own magic and version) */
  uint64_t digest;    /* of the exclusion list, as a set */
  int32_t nsurvivors; /* 1..the parent's ranks */
} kolo_shrink_msg;
#define KOLO_SHRINK_MSG_BYTES (KOLO_UNIQUE_ID_BYTES + 8 + 4)

void kolo_encode_shrink_msg(const kolo_shrink_msg *m, uint8_t out[KOLO_SHRINK_MSG_BYTES]);
/* Checks the id (kolo_decode_unique_id) and 1 <= nsurvivors <= nranks. */
int kolo_decode_shrink_msg(const void *in, size_t len, int peer, int nranks, kolo_shrink_msg *m, char *why,
                           size_t why_len);

/* ---- CUDA communicators: each rank's device (tag 0x30, allgather) --------- */

#define KOLO_WIRE_MAX_CUDA_ERROR 65535 /* cudaError_t values are below */
#define KOLO_WIRE_MAX_DEVICES 4096     /* device ordinals and counts beyond are garbage */

typedef struct {
  int32_t err;   /* cudaError_t of selecting it */
  int32_t dev;   /* ordinal in its process (-1: none found; any the user asked for) */
  int32_t count; /* devices its process sees, 0..KOLO_WIRE_MAX_DEVICES */
} kolo_device_choice;
#define KOLO_DEVICE_CHOICE_BYTES 12

void kolo_encode_device_choice(const kolo_device_choice *d, uint8_t out[KOLO_DEVICE_CHOICE_BYTES]);
/* Checks the ranges, and that a device selected without error is one of
 * those its process sees. */
int kolo_decode_device_choice(const void *in, size_t len, int peer, kolo_device_choice *d, char *why, size_t why_len);

/* ---- CUDA communicators: each rank's room for blocks (tag 0x31, allgather) */

typedef struct {
  int32_t err;     /* cudaError_t of asking */
  int32_t dev;     /* 0..KOLO_WIRE_MAX_DEVICES - 1 */
  int32_t sms;     /* SMs of the device, 0..65535 */
  int32_t per_sm;  /* executor blocks one SM holds (worst kernel), 0..65535 */
  int32_t sharing; /* ranks of its process on the device, 1 and up */
  int32_t mps;     /* 1: the device's contexts share its SMs (MPS), else 0 */
  uint64_t gpu;    /* the physical GPU (a hash of its UUID; 0: unknown), alike in every process */
} kolo_device_room;
#define KOLO_DEVICE_ROOM_BYTES 32

void kolo_encode_device_room(const kolo_device_room *f, uint8_t out[KOLO_DEVICE_ROOM_BYTES]);
/* nranks: the communicator's, which bounds sharing. */
int kolo_decode_device_room(const void *in, size_t len, int peer, int nranks, kolo_device_room *f, char *why,
                            size_t why_len);

#endif
