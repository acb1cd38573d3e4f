/*
 * kolo_fusion.h - gradient fusion for data-parallel training
 * (docs/pytorch.md, docs/dev/architecture.md): Horovod's tensor fusion and DDP's buckets, in C,
 * for host and CUDA communicators.
 *
 * One koloFusion_t drives the gradient all-reduces of one communicator.
 * The user declares every gradient once, in the order backward produces
 * them, then runs steps:
 *
 *   koloFusionCreate(&f, comm, &cfg);
 *   koloFusionAddTensor(f, count, koloFloat32, KOLO_FUSION_ALLOCATE, &id);
 *   koloFusionAddTensor(f, count, koloFloat16, KOLO_FUSION_EXTERNAL, &id2);
 *   ...
 *   koloFusionCommit(f);                  // allocates the bucket buffers
 *   koloFusionTensorPtr(f, id, &grad);    // backward writes here, every step
 *   for each step:
 *     koloFusionStepBegin(f);
 *     ... backward: koloFusionMarkReady(f, id, NULL, event) per gradient,
 *                   koloFusionMarkReady(f, id2, buf, event) for external ones
 *     koloFusionStepEnd(f, &done);        // CUDA: event the optimizer waits on
 *     koloFusionWait(f);                  // or: block until reduced
 *
 * (examples/fusion_sketch.c is this sketch, built and run in CI.)  The
 * views stay where Commit put them for the life of the fusion unless the
 * caller asks for rebuilt buckets (rebuildBuckets = 1, "Bucket order").
 *
 * Two paths.  Tensors declared KOLO_FUSION_ALLOCATE are views into bucket
 * buffers that kolo owns (16-byte aligned, one dtype per bucket, a bucket
 * never exceeds bucketBytes except to hold one tensor larger than it; the
 * first bucket is capped at firstBucketBytes so communication starts
 * early): a bucket is all-reduced in place, with no pack and no unpack.
 * Tensors declared KOLO_FUSION_EXTERNAL live in the caller's memory: the
 * ones ready together, of one dtype, are packed into a fusion buffer of up
 * to fusionBytes with one batched copy, all-reduced once and unpacked with
 * one batched copy (one kernel each on a GPU, one pass each on a host).
 *
 * Scheduling.  MarkReady never blocks on communication.  A background
 * thread per koloFusion_t negotiates with the other ranks, in lockstep
 * rounds (one per cycleTimeUs while something is pending, counted from
 * the end of the last round's exchange, which the ranks leave together;
 * sooner when a bucket is complete, see below), which tensors are ready
 * everywhere, and launches their buckets / fused buffers in an order that
 * is identical on every rank by construction.  A whole bucket is launched as soon as
 * all its tensors are ready everywhere; the ready part of a partial bucket
 * waits one cycle, then its ready runs of tensors are launched in place
 * (the cycle flush).  Rounds run once something of the step is marked, at
 * once when every tensor is marked or StepEnd was called, at once when
 * this rank marked the last tensor of a bucket, and an eighth of a cycle
 * after the last one while a bucket complete here is not yet complete on
 * some other rank (so that a bucket launches about one round after its
 * last rank completed it).  Negotiation: host communicators use themselves
 * (a small min all-reduce per round), CUDA ones the bootstrap's TCP mesh
 * (no device synchronization).  Each round
 * also compares a signature of every rank's declared layout and step: on a
 * mismatch (a tensor marked on one rank and never on another, a rank in
 * another step; different declarations fail Commit, and a tensor marked
 * twice fails MarkReady) every rank fails with koloInvalidUsage and an error naming
 * both ranks' views, instead of hanging or summing the wrong bytes.  On a
 * CUDA communicator the all-reduces are enqueued on the fusion's
 * communication stream behind the event passed to MarkReady.
 *
 * Bucket order.  Opt-in (config.rebuildBuckets = 1): after the first
 * step, when the order in which tensors became ready (rank 0's order, so
 * that every rank agrees) differs from the declared one, the buckets are
 * rebuilt once in that order: the tensors' contents move with them, the
 * old buckets are freed, and pointers from koloFusionTensorPtr must be
 * fetched again (koloFusionLayoutVersion changes) before they are used
 * in the next step.  The rebuild is done before Wait (host) or StepEnd
 * (CUDA) of the first step returns.  Off by default, so that a view
 * fetched once, as in the sketch above, stays valid.
 *
 * Bucket size.  The buckets after the first are capped at bucketBytes
 * (25 MiB, as PyTorch DDP's bucket_cap_mb) and also at a tenth
 * (minBuckets = 10) of the ALLOCATE gradients' bytes, but not below
 * firstBucketBytes.  The reason: a bucket's all-reduce starts after its
 * last gradient and the step ends after the last all-reduce, so when
 * backward's compute and the communication take about as long, the step
 * lasts at least max(compute, comm) plus the largest bucket's share of
 * comm.  With DDP's caps alone a 100 MB model (ResNet-50) gets buckets of
 * up to 25 MiB, a quarter of its gradients, and exposes up to a quarter of
 * its communication; minBuckets = 10 bounds that at about a tenth, for one
 * more all-reduce latency per extra bucket.  Models of
 * more than 10 x 25 MiB of gradients are laid out as by DDP.  A single
 * tensor larger than the cap still gets a bucket of its own, and it still
 * bounds the step the same way when backward produces it last (BERT's word
 * embeddings: 21% of its gradients).
 *
 * Timeline.  With KOLO_TIMELINE=path (or config.timeline), every rank
 * writes ready / launch / done events per tensor and bucket as Chrome trace
 * JSON (path with "%r" replaced by the rank, or one file per rank with
 * ".rankN" appended), for chrome://tracing or Perfetto: "ready" instants
 * per tensor, "launch" / "done" (B / E) per all-reduce with tid = bucket
 * (EXTERNAL tensors: 100000 + dtype), "round" (X, with its duration) per
 * negotiation round on tid 200000; on CUDA "done" is when the work was
 * enqueued.  The file is closed (valid JSON) by Destroy, also after errors.
 *
 * Threading: the koloFusion_t functions are called from one thread at a
 * time; while a fusion has a step in flight, its communicator belongs to
 * its background thread (issue no other calls on it until Wait returns).
 */
#ifndef KOLO_FUSION_H
#define KOLO_FUSION_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libkolo.so, as kolo.h's declarations are. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct koloFusion *koloFusion_t;
/* Same layout as cudaEvent_t, so callers pass their CUDA event as is. */
typedef struct CUevent_st *koloEvent_t;

typedef enum {
  KOLO_FUSION_ALLOCATE = 0, /* kolo owns the storage: a view into a bucket */
  KOLO_FUSION_EXTERNAL = 1  /* the caller owns it; passed at MarkReady */
} koloFusionStorage_t;

/* Start from KOLO_FUSION_CONFIG_INITIALIZER; a field left at its UNDEF
 * value takes the environment's (KOLO_FUSION_*) or the default. */
#define KOLO_FUSION_UNDEF_SIZE ((size_t)-1)
typedef struct {
  size_t size;             /* sizeof(koloFusionConfig_t) as compiled */
  size_t bucketBytes;      /* cap per bucket; 25 MiB (KOLO_FUSION_BUCKET_BYTES) */
  size_t firstBucketBytes; /* cap of the first bucket; 1 MiB (KOLO_FUSION_FIRST_BUCKET_BYTES) */
  size_t fusionBytes;      /* fusion buffer; 64 MiB (KOLO_FUSION_THRESHOLD) */
  int cycleTimeUs;         /* negotiation period; 1000 (KOLO_FUSION_CYCLE_US) */
  int op;                  /* koloSum or koloAvg (integers: the wrapped sum
                              divided with C's truncation); default koloAvg */
  double preScale;         /* multiply every gradient first; 1.0; 0 = UNDEF;
                              floating dtypes only (AddTensor of an integer
                              tensor fails when it is not 1) */
  int rebuildBuckets;      /* 1: rebuild from the observed order after the
                              first step, moving the views ("Bucket
                              order"); default 0 */
  koloStream_t stream;     /* CUDA: communication stream; NULL: kolo creates
                              one (must be NULL on host communicators) */
  const char *timeline;    /* Chrome trace path; NULL: KOLO_TIMELINE or none */
  int minBuckets;          /* spread the ALLOCATE gradients over at least this
                              many buckets: the buckets after the first are
                              capped at min(bucketBytes, max(firstBucketBytes,
                              their bytes / minBuckets)); default 10; 1 = DDP's
                              layout (bucketBytes alone).  See "Bucket size". */
} koloFusionConfig_t;

#define KOLO_FUSION_CONFIG_INITIALIZER                                         \
  {                                                                            \
    sizeof(koloFusionConfig_t), KOLO_FUSION_UNDEF_SIZE, KOLO_FUSION_UNDEF_SIZE, \
        KOLO_FUSION_UNDEF_SIZE, KOLO_CONFIG_UNDEF, KOLO_CONFIG_UNDEF, 0.0,     \
        KOLO_CONFIG_UNDEF, NULL, NULL, KOLO_CONFIG_UNDEF                       \
  }

/* Counters, for tests and benchmarks (cumulative since Create). */
typedef struct {
  uint64_t steps;
  uint64_t allReduces;    /* collective calls issued for gradients */
  uint64_t packedBytes;   /* bytes copied into fusion buffers */
  uint64_t unpackedBytes; /* bytes copied out of fusion buffers */
  uint64_t packCalls;     /* batched pack launches / passes */
  uint64_t unpackCalls;   /* batched unpack launches / passes */
  uint64_t rounds;        /* negotiation rounds */
  uint64_t rebuilds;      /* bucket rebuilds */
} koloFusionStats_t;

koloResult_t koloFusionCreate(koloFusion_t *fusion, koloComm_t comm,
                              const koloFusionConfig_t *config);
/* Waits for a step in flight that was ended (a step begun and never ended
 * is abandoned after the round in progress), frees buckets and buffers,
 * stops the thread. */
koloResult_t koloFusionDestroy(koloFusion_t fusion);

/* Declares the next gradient (backward order).  Before Commit only. */
koloResult_t koloFusionAddTensor(koloFusion_t fusion, size_t count,
                                 koloDataType_t datatype,
                                 koloFusionStorage_t storage, int *tensorId);
/* Lays out buckets, allocates them once; checks every rank declared the
 * same tensors (error naming the first difference otherwise).  Collective:
 * every rank calls it; the configuration (caps, op, preScale,
 * rebuildBuckets) must match too.  kolo has no memory registration API:
 * buckets are plain allocations (host: aligned_alloc; CUDA: one cudaMalloc)
 * made here once.  The fusion buffer holds min(fusionBytes, the EXTERNAL
 * tensors that fit in it); an EXTERNAL tensor larger than fusionBytes is
 * all-reduced where it is, without packing. */
koloResult_t koloFusionCommit(koloFusion_t fusion);
/* The view of an ALLOCATE tensor (host or device pointer). */
koloResult_t koloFusionTensorPtr(koloFusion_t fusion, int tensorId, void **ptr);
/* Changes when buckets are rebuilt: fetch TensorPtr again. */
koloResult_t koloFusionLayoutVersion(koloFusion_t fusion, int *version);
/* Bucket count and the bucket of a tensor (for tests and the timeline);
 * *bucket = -1 for EXTERNAL tensors. */
koloResult_t koloFusionBucketCount(koloFusion_t fusion, int *nbuckets);
koloResult_t koloFusionTensorBucket(koloFusion_t fusion, int tensorId, int *bucket);

/* Opens the next step.  After StepEnd without Wait it waits first (host:
 * for the step; CUDA: until it is issued).  Once a step failed, the fusion
 * is failed for good: StepBegin, MarkReady and StepEnd return that error
 * (koloFusionGetLastError says it); Destroy still works. */
koloResult_t koloFusionStepBegin(koloFusion_t fusion);
/* The gradient is (or, on a GPU, will be once `ready` fires) complete.
 * buf: NULL for ALLOCATE tensors, the caller's buffer for EXTERNAL ones
 * (reduced in place; it must stay valid until Wait / the done event).
 * ready: a CUDA event recorded on the compute stream after the gradient's
 * producer (CUDA communicators; NULL means already complete), ignored on
 * host: the fusion's stream waits for it during this call
 * (cudaStreamWaitEvent), so the caller may record the event again as soon
 * as MarkReady returns.  Marking a tensor twice in a step is
 * koloInvalidUsage.  Returns at once. */
koloResult_t koloFusionMarkReady(koloFusion_t fusion, int tensorId, void *buf,
                                 koloEvent_t ready);
/* Every tensor of the step has been marked.  CUDA: *done (may be NULL) is
 * an event, recorded on the communication stream after the last bucket,
 * that the optimizer's stream waits on (owned by the fusion, valid until
 * the next StepEnd).  Host: *done is set to NULL; use Wait.  Returns once
 * every all-reduce of the step has been issued (CUDA) or handed to the
 * background thread (host), without waiting for them to finish.
 * A tensor left unmarked: koloInvalidUsage here, naming it, and the step
 * fails on every rank (their Wait returns koloInvalidUsage with both
 * ranks' views).  A tensor marked on some ranks and not on others for
 * longer than the communicator's timeout fails the step the same way. */
koloResult_t koloFusionStepEnd(koloFusion_t fusion, koloEvent_t *done);
/* Blocks until every all-reduce of the step has finished (CUDA: on the
 * device too); the first error of the step, naming it. */
koloResult_t koloFusionWait(koloFusion_t fusion);

koloResult_t koloFusionGetStats(koloFusion_t fusion, koloFusionStats_t *stats);
/* The last error of this fusion, in one sentence ("" if none); with
 * fusion == NULL, the calling thread's last error without a fusion (e.g. a
 * failed Create). */
const char *koloFusionGetLastError(koloFusion_t fusion);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* KOLO_FUSION_H */
