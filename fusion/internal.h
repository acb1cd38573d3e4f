/* internal.h - the koloFusion object and what its files share.
 *
 * Files: fusion.c (API: create, declare, commit, steps, stats, errors),
 * layout.c (buckets), negotiate.c (the per-round exchange between ranks
 * and the messages of a mismatch), scheduler.c (the background thread:
 * rounds and launches), pack_host.c / pack_kernel.cu (batched copies),
 * device.c (memory, streams and events: host or CUDA), timeline.c.
 *
 * Threads.  The user's thread calls the API; the fusion's thread runs the
 * rounds.  They share the fields marked [lock] under `lock`; fields marked
 * [thread] belong to the fusion's thread while a step is in flight, to the
 * user's thread otherwise; everything else is set before the thread starts
 * (Commit) and only read after. */
#ifndef KOLO_FUSION_INTERNAL_H
#define KOLO_FUSION_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "common/error.h"
#include "fusion/layout.h"
#include "fusion/negotiate.h"
#include "fusion/pack.h"
#include "fusion/timeline.h"
#include "kolo_fusion.h"

/* One all-reduce a round decided on: a run of a bucket, a fused group of
 * EXTERNAL tensors, or one EXTERNAL tensor too large to pack. */
typedef enum { KF_LAUNCH_BUCKET, KF_LAUNCH_FUSED, KF_LAUNCH_DIRECT } kf_launch_kind;

struct koloFusion {
  koloComm_t comm;
  int rank, nranks;
  int cuda; /* 1: koloMemCuda communicator */
  int timeout_ms;
  /* configuration, resolved */
  size_t bucket_bytes, first_bucket_bytes, fusion_bytes;
  int min_buckets;
  size_t bucket_cap;      /* the cap of buckets after the first (kf_layout_cap), set at Commit */
  int cycle_us, op, rebuild;
  double prescale;
  char *timeline_path;
  koloStream_t stream_cfg; /* config.stream (CUDA) */
  /* declarations (user's thread, before Commit) */
  kf_decl *decl;
  int ntensors, decl_cap;
  int committed;
  /* layout and memory [thread] */
  kf_layout layout;
  int version;
  void *arena;            /* ALLOCATE buckets (host or device memory) */
  void *fbuf;             /* fusion buffer for EXTERNAL tensors */
  size_t fbuf_bytes;
  kf_neg neg;
  struct kf_device *dev;  /* CUDA state (device.c); NULL on host */
  kf_timeline *tl;        /* NULL: no timeline */
  /* the thread */
  pthread_t thread;
  int thread_started;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;               /* [lock] */
  /* the step [lock] */
  uint64_t step;          /* steps begun */
  int in_step;            /* between StepBegin and the end of Wait */
  int ended;              /* StepEnd was called */
  int issued;             /* the thread launched the whole step (host: and finished it) */
  unsigned char *marked;  /* [ntensors] */
  void **ext_buf;         /* [ntensors] EXTERNAL buffers of this step */
  int *mark_order;        /* [ntensors] this step's marks in call order */
  int nmarked;
  int marks_since_round;
  int *bucket_marked;     /* [ntensors >= nbuckets] marks of each bucket's tensors this step */
  int completed_since_round; /* buckets whose last tensor was marked since the last round */
  koloResult_t failed;    /* sticky: first failure of a step */
  kolo_errbuf thread_err; /* its sentence, written by the thread */
  koloFusionStats_t stats;
  /* the user's last error (user's thread only) */
  kolo_errbuf err;
};

/* ---- scheduler.c ------------------------------------------------------- */
koloResult_t kf_thread_start(koloFusion_t f);
/* Stops and joins the thread (after the step in flight, if any). */
void kf_thread_stop(koloFusion_t f);

/* ---- device.c: memory and launches, host or CUDA ------------------------ */
/* CUDA state: stream, done event, descriptor memory (nothing on host). */
koloResult_t kf_dev_setup(koloFusion_t f, koloStream_t user_stream);
void kf_dev_teardown(koloFusion_t f);
/* Zeroed memory of the communicator's kind. */
koloResult_t kf_dev_alloc(koloFusion_t f, size_t bytes, void **p, kolo_errbuf *eb);
void kf_dev_free(koloFusion_t f, void *p);
/* One batched copy (pack.h): a pass on host, a kernel on the stream. */
koloResult_t kf_dev_copy(koloFusion_t f, const kf_copy *d, int n, int dtype, double scale,
                         kolo_errbuf *eb);
/* The fusion's thread: select the device (CUDA). */
koloResult_t kf_dev_thread_init(koloFusion_t f, kolo_errbuf *eb);
/* A new step: descriptor memory may be reused once the last step is done. */
koloResult_t kf_dev_step_begin(koloFusion_t f, kolo_errbuf *eb);
/* MarkReady: the stream waits for `ready` (NULL: nothing). */
koloResult_t kf_dev_wait_ready(koloFusion_t f, koloEvent_t ready, kolo_errbuf *eb);
/* StepEnd: records the done event on the stream and returns it. */
koloResult_t kf_dev_record_done(koloFusion_t f, koloEvent_t *done, kolo_errbuf *eb);
/* Wait: blocks until the done event fired. */
koloResult_t kf_dev_sync_done(koloFusion_t f, kolo_errbuf *eb);
/* The stream all-reduces go to (NULL on host). */
koloStream_t kf_dev_stream(koloFusion_t f);
/* Blocks until the stream's work is done (CUDA; nothing on host). */
koloResult_t kf_dev_sync_stream(koloFusion_t f, kolo_errbuf *eb);

/* ---- fusion.c ---------------------------------------------------------- */
const char *kf_type_name(int dtype);
const char *kf_storage_name(int storage);
int kf_is_float(int dtype);
/* Waits for a host call that returned koloInProgress (non-blocking comm). */
koloResult_t kf_comm_wait(koloComm_t comm, koloResult_t res);

#endif
