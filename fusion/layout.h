/* layout.h - where fusion tensors live: buckets carved from one arena.
 *
 * Pure functions of the declarations, an order and the caps: no memory of
 * a device, no communicator, so that they are unit-tested alone and give
 * the same layout on every rank.
 *
 * Rules.  Tensors declared KOLO_FUSION_ALLOCATE are taken in `order`; each
 * dtype has one open bucket; a tensor joins its dtype's open bucket when the
 * bucket stays within its cap, else that bucket is closed and a new one
 * opened.  The first bucket made is capped at first_cap, the others at cap;
 * a tensor larger than the cap gets a bucket of its own.  Buckets are
 * numbered in the order they were opened, and that is the order in which
 * they are placed in the arena (each at a KF_BUCKET_ALIGN boundary) and
 * launched.  Inside a bucket tensors follow the order, each at a
 * KF_VIEW_ALIGN boundary; the padding between them is a whole number of
 * elements (alignments are multiples of every element size), so a bucket,
 * or any run of consecutive tensors of it, is one array of its dtype.
 * EXTERNAL tensors have no bucket (-1).
 */
#ifndef KOLO_FUSION_LAYOUT_H
#define KOLO_FUSION_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"

#define KF_VIEW_ALIGN 16
#define KF_BUCKET_ALIGN 256

typedef struct {
  size_t count;
  int dtype;   /* koloDataType_t */
  int storage; /* koloFusionStorage_t */
} kf_decl;

typedef struct {
  int dtype;
  size_t offset; /* in the arena */
  size_t bytes;  /* from the first tensor's start to the last one's end */
  int first, n;  /* members[first .. first + n) */
} kf_bucket;

typedef struct {
  int ntensors;
  int nbuckets;
  kf_bucket *buckets;
  int *members;     /* ALLOCATE tensors, bucket after bucket, in bucket order */
  int *bucket_of;   /* [tensor]: its bucket, -1 for EXTERNAL */
  size_t *offset;   /* [tensor]: byte offset in the arena (ALLOCATE) */
  size_t arena_bytes;
} kf_layout;

/* Bytes of a tensor (count x element size). */
size_t kf_decl_bytes(const kf_decl *d);

/* The cap of the buckets after the first: `cap`, lowered so that the
 * ALLOCATE tensors spread over at least min_buckets buckets (their bytes,
 * each rounded up to KF_VIEW_ALIGN, divided by min_buckets, rounded up),
 * but never below first_cap.  Why: when backward's compute and the
 * all-reduces take about as long, the all-reduce of a bucket cannot start
 * before its last gradient and cannot end before all later gradients are
 * reduced, so the step lasts at least max(compute, comm) plus the share of
 * the largest bucket in comm; capping every bucket at a share of the
 * gradients bounds that excess (perf/perf_overlap.c's ideal).  A
 * min_buckets of 1 or less leaves `cap` as it is. */
size_t kf_layout_cap(const kf_decl *decl, int n, size_t cap, size_t first_cap, int min_buckets);

/* Builds the layout of n tensors taken in `order` (a permutation of 0..n-1;
 * NULL: declared order).  Returns koloSuccess, koloInvalidArgument when
 * order is not a permutation or a cap is 0, koloSystemError when out of
 * memory (and *out is then empty). */
koloResult_t kf_layout_build(const kf_decl *decl, int n, const int *order, size_t cap,
                             size_t first_cap, kf_layout *out);
void kf_layout_free(kf_layout *l);
/* 1 when both place every tensor at the same offset in the same bucket. */
int kf_layout_equal(const kf_layout *a, const kf_layout *b);
/* 1 when order is a permutation of 0..n-1. */
int kf_order_valid(const int *order, int n);
/* FNV-1a over the declarations (count, dtype, storage of each). */
uint64_t kf_decl_hash(const kf_decl *decl, int n);

#endif
