/* negotiate.h - what the ranks of a fusion tell each other, and how.
 *
 * Transport.  Host communicators negotiate over themselves: a min
 * all-reduce of uint8 (koloAllReduce), koloAllGather and koloBroadcast, from
 * the calling thread (non-blocking communicators are polled through
 * koloCommGetAsyncError).  CUDA communicators negotiate on the host over
 * the bootstrap mesh (transport/bootstrap.h: tagged TCP messages, bounded
 * by the communicator's timeout): a collective on device memory would need
 * device buffers and a stream synchronization per round, while the mesh is
 * idle after init and answers in microseconds.  The bootstrap is used by
 * one thread at a time: while a step is in flight the communicator belongs
 * to the fusion's thread, so nothing else uses it.
 *
 * Rounds.  Each rank contributes a byte vector: one readiness byte per
 * tensor, then the signature (step, declarations, layout version) and two
 * flags.  The exchange returns the element-wise min and max over ranks
 * (min of v and of ~v in one all-reduce): min of readiness = ready
 * everywhere, and any signature byte whose min differs from its max is a
 * mismatch.  A mismatch, or a flag set on any rank, is seen in the same
 * round by every rank; they then gather one view per rank and all fail with
 * the same sentence naming two ranks and what each of them did. */
#ifndef KOLO_FUSION_NEGOTIATE_H
#define KOLO_FUSION_NEGOTIATE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "fusion/layout.h"
#include "kolo.h"

typedef struct {
  koloComm_t comm;
  int rank, nranks;
  int bootstrap;            /* 1: over the bootstrap mesh (CUDA comms) */
  unsigned char *scratch;   /* grown on demand */
  size_t scratch_bytes;
} kf_neg;

koloResult_t kf_neg_init(kf_neg *n, koloComm_t comm, kolo_errbuf *eb);
void kf_neg_free(kf_neg *n);

/* vmin / vmax [len] = element-wise min / max over ranks of `mine` [len]. */
koloResult_t kf_neg_minmax(kf_neg *n, const unsigned char *mine, size_t len, unsigned char *vmin,
                           unsigned char *vmax, kolo_errbuf *eb);
/* all [nranks * len]: this rank's part filled in; every part on return.
 * Bytes only: what the fusion sends is encoded first (negotiate_wire.h). */
koloResult_t kf_neg_allgather(kf_neg *n, void *all, size_t len, kolo_errbuf *eb);
/* buf [len] of rank 0 onto every rank (bytes, as above). */
koloResult_t kf_neg_bcast(kf_neg *n, void *buf, size_t len, kolo_errbuf *eb);
/* Rank 0's order [count] onto every rank, encoded, and checked to be a
 * permutation of 0..count-1 (a sentence naming rank 0 otherwise). */
koloResult_t kf_neg_bcast_order(kf_neg *n, int *order, int count, kolo_errbuf *eb);

/* ---- Commit ------------------------------------------------------------- */
/* What must be equal on every rank besides the declarations. */
typedef struct {
  uint64_t bucket_bytes, first_bucket_bytes, fusion_bytes;
  double prescale;
  int32_t op, rebuild;
  int32_t min_buckets, pad; /* pad: 0 (the shapes are compared with memcmp) */
} kf_shape;

/* What each rank tells the others at Commit: its shape and a hash of its
 * declarations; when they differ, its first difference from rank 0's. */
typedef struct {
  kf_shape shape;
  uint64_t hash;      /* kf_decl_hash: the same on hosts of any byte order */
  int32_t ntensors, pad;
} kf_decl_summary;

typedef struct {
  int32_t first_diff; /* -1: same as rank 0's */
  int32_t has;        /* decl holds this rank's tensor first_diff */
  kf_decl decl;
} kf_decl_diff;

/* The sentence for gathered summaries and differences (zero: rank 0's
 * all[0].ntensors declarations); pure, for tests and fuzzing: every field
 * came from another rank.  1, or 0 when no rank differs (then a sentence
 * saying so). */
int kf_decl_sentence(const kf_decl_summary *all, const kf_decl_diff *diffs, int nranks, const kf_decl *zero,
                     char *out, size_t len);

/* Checks that every rank declared the same tensors with the same shape;
 * koloInvalidUsage on every rank otherwise, with a sentence naming the
 * first difference and both ranks. */
koloResult_t kf_neg_check_decls(kf_neg *n, const kf_decl *decl, int ntensors, const kf_shape *shape,
                                kolo_errbuf *eb);

/* ---- rounds ------------------------------------------------------------- */
typedef struct {
  uint64_t step;
  uint64_t decl_hash;
  uint32_t version;
  uint32_t ntensors;
} kf_sig;

/* kf_sig as negotiate_wire.h encodes it (the same bytes on every host). */
#define KF_SIG_WIRE_BYTES (8 + 8 + 4 + 4)
#define KF_ROUND_TAIL (KF_SIG_WIRE_BYTES + 2) /* signature, bad-end flag, stall flag */
#define KF_FLAG_BAD_END 0 /* the rank ended its step with tensors unmarked */
#define KF_FLAG_STALLED 1 /* a tensor ready elsewhere was not marked here for timeout ms */

/* One rank's view of the step, gathered when a round found a mismatch. */
typedef struct {
  kf_sig sig;
  int32_t rank, ended, nmarked, first_unmarked;
  int32_t stalled, probe; /* probe: marked the probe tensor (-1: no probe) */
} kf_view;

/* After a round whose min / max showed a mismatch: gathers the views
 * (mine->probe is filled for probe_tensor by the caller) and writes the
 * sentence.  Returns koloInvalidUsage, or the error of the gather. */
koloResult_t kf_neg_mismatch(kf_neg *n, const kf_view *mine, int probe_tensor, const kf_decl *decl,
                             int timeout_ms, kolo_errbuf *eb);
/* The sentence for gathered views (pure; for tests). */
void kf_mismatch_sentence(const kf_view *all, int nranks, int probe_tensor, const kf_decl *decl,
                          int timeout_ms, char *out, size_t len);

#endif
