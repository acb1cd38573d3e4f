/* negotiate_wire.h - what the ranks of a fusion send each other
 * (negotiate.h), encoded explicitly (transport/wire_codec.h: fixed widths,
 * little-endian) whichever way it travels: over the bootstrap mesh (CUDA
 * communicators) or through the communicator's own collectives (host
 * ones), between hosts of any byte order.
 *
 * Each record has an encoder and a decoder (negotiate_codec.c).  The mesh
 * hello checked the wire version, so records carry none.  Decoders take
 * the rank that sent the record, refuse any other length and any field out
 * of the range a rank of this version sends (koloFusionCreate's and
 * koloFusionAddTensor's bounds), and say so in a sentence naming that rank
 * ("rank 2 sent a fusion step view marking 9 of 4 tensors").  No system
 * calls: the fuzz targets link it.
 */
#ifndef KOLO_FUSION_NEGOTIATE_WIRE_H
#define KOLO_FUSION_NEGOTIATE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "fusion/layout.h"
#include "fusion/negotiate.h"
#include "transport/wire_codec.h"

/* Verdicts, as the bootstrap's decoders. */
enum { KF_WIRE_OK = 0, KF_WIRE_GARBLED = -1 };

#define KF_WIRE_MAX_TENSORS (1 << 24) /* koloFusionAddTensor's bound */

/* ---- a round's signature (the tail of the byte map, tag 0x4600) ----------- */

/* step u64, decl_hash u64, version u32, ntensors u32: compared byte by
 * byte as the round's min and max, never decoded. */
void kf_encode_sig(const kf_sig *s, uint8_t out[KF_SIG_WIRE_BYTES]);

/* ---- a step view (tag 0x4601, allgather) ------------------------------------ */

#define KF_VIEW_WIRE_BYTES (KF_SIG_WIRE_BYTES + 6 * 4)
void kf_encode_view(const kf_view *v, uint8_t out[KF_VIEW_WIRE_BYTES]);
/* Checks rank == peer, the flags (0 or 1; probe -1, 0 or 1) and the
 * counts against the view's own ntensors. */
int kf_decode_view(const void *in, size_t len, int peer, kf_view *v, char *why, size_t why_len);

/* ---- declarations (tag 0x4602: rank 0's list; inside a difference) ------- */

#define KF_DECL_WIRE_BYTES 16 /* count u64, dtype i32, storage i32 */
/* n declarations: n * KF_DECL_WIRE_BYTES bytes. */
void kf_encode_decls(const kf_decl *d, int n, uint8_t *out);
/* Exactly n of them, each a datatype, a storage and 1..2^40 bytes. */
int kf_decode_decls(const void *in, size_t len, int peer, int n, kf_decl *d, char *why, size_t why_len);

/* ---- the ready order of the rebuild (tag 0x4602, from rank 0) -------------- */

/* n tensor indices, i32 each. */
void kf_encode_order(const int *order, int n, uint8_t *out);
/* Exactly n of them, a permutation of 0..n-1. */
int kf_decode_order(const void *in, size_t len, int peer, int n, int *order, char *why, size_t why_len);

/* ---- Commit's check (tag 0x4603, two allgathers) ------------------------------ */

/* shape (bucket, first bucket and fusion bytes u64, preScale as IEEE 754
 * binary64 bits u64, op i32, rebuild i32, minBuckets i32), hash u64,
 * ntensors i32. */
#define KF_SUMMARY_WIRE_BYTES (4 * 8 + 3 * 4 + 8 + 4)
void kf_encode_summary(const kf_decl_summary *s, uint8_t out[KF_SUMMARY_WIRE_BYTES]);
int kf_decode_summary(const void *in, size_t len, int peer, kf_decl_summary *s, char *why, size_t why_len);

/* first_diff i32, has i32, the declaration (zeros unless has). */
#define KF_DIFF_WIRE_BYTES (4 + 4 + KF_DECL_WIRE_BYTES)
void kf_encode_diff(const kf_decl_diff *d, uint8_t out[KF_DIFF_WIRE_BYTES]);
/* Checks -1 <= first_diff <= KF_WIRE_MAX_TENSORS, that has is 0 or 1 (1
 * only with first_diff >= 0), and the declaration when has (else zeros). */
int kf_decode_diff(const void *in, size_t len, int peer, kf_decl_diff *d, char *why, size_t why_len);

#endif
