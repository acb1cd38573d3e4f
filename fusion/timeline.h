/* timeline.h - Chrome trace JSON of a fusion (chrome://tracing, Perfetto).
 *
 * One file per rank: {"traceEvents":[ ... ]} with pid = rank and tid = the
 * bucket (EXTERNAL tensors: KF_TL_EXTERNAL_TID + dtype).  Events:
 *   "ready"   instant (ph "i") when a tensor is marked, args tensor / step;
 *   "launch"  ph "B" when an all-reduce is started, args tensors / bytes;
 *   "done"    ph "E" when it finished (host) or was enqueued (CUDA: device
 *             completion is not traced per launch);
 *   "round"   complete event (ph "X", ts and dur) of each negotiation round,
 *             tid KF_TL_ROUND_TID, args step and launches (all-reduces it
 *             decided): the time from a tensor's "ready" to its bucket's
 *             "launch" is these rounds and the launches before it;
 *   "error"   instant, when a step fails, with the sentence.
 * The closing "]}" is written by kf_timeline_close, also after failures;
 * writes are buffered and flushed at every step's end.  Thread safe. */
#ifndef KOLO_FUSION_TIMELINE_H
#define KOLO_FUSION_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "kolo.h"

#define KF_TL_EXTERNAL_TID 100000
#define KF_TL_ROUND_TID 200000

typedef struct kf_timeline kf_timeline;

/* path: "%r" is replaced by the rank; without "%r", ".rank<N>" is appended. */
koloResult_t kf_timeline_open(const char *path, int rank, kf_timeline **out, kolo_errbuf *eb);
void kf_timeline_close(kf_timeline *tl);
void kf_timeline_ready(kf_timeline *tl, int tid, int tensor, uint64_t step);
void kf_timeline_launch(kf_timeline *tl, int tid, const char *what, int ntensors, size_t bytes, uint64_t step);
void kf_timeline_done(kf_timeline *tl, int tid);
/* begin_us, end_us: CLOCK_MONOTONIC microseconds. */
void kf_timeline_round(kf_timeline *tl, int64_t begin_us, int64_t end_us, uint64_t step, int launches);
void kf_timeline_error(kf_timeline *tl, const char *sentence);
void kf_timeline_flush(kf_timeline *tl);

#endif
