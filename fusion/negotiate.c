/* negotiate.c - the exchanges between the ranks of a fusion and the
 * sentences of a mismatch (see negotiate.h). */
#include "fusion/negotiate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_state.h"
#include "fusion/internal.h"
#include "fusion/negotiate_wire.h"

/* Bootstrap tags of the fusion's messages (core uses 0x10..0x3fff); what
 * they carry is encoded (negotiate_wire.h). */
#define TAG_FUSION_ROUND 0x4600u
#define TAG_FUSION_VIEW 0x4601u
#define TAG_FUSION_BCAST 0x4602u
#define TAG_FUSION_DECL 0x4603u

koloResult_t kf_neg_init(kf_neg *n, koloComm_t comm, kolo_errbuf *eb) {
  memset(n, 0, sizeof *n);
  n->comm = comm;
  n->rank = comm->rank;
  n->nranks = comm->nranks;
  n->bootstrap = comm->memory == koloMemCuda;
  (void)eb;
  return koloSuccess;
}

void kf_neg_free(kf_neg *n) {
  free(n->scratch);
  n->scratch = NULL;
  n->scratch_bytes = 0;
}

static koloResult_t scratch(kf_neg *n, size_t bytes, kolo_errbuf *eb) {
  if (bytes <= n->scratch_bytes) return koloSuccess;
  unsigned char *p = realloc(n->scratch, bytes);
  if (p == NULL) return kolo_error(eb, koloSystemError, "fusion on rank %d: out of memory (%zu bytes of negotiation buffer)", n->rank, bytes);
  n->scratch = p;
  n->scratch_bytes = bytes;
  return koloSuccess;
}

/* The communicator's own sentence for a failed call, into eb. */
static koloResult_t comm_failed(kf_neg *n, koloResult_t res, const char *what, kolo_errbuf *eb) {
  return kolo_error(eb, res, "fusion on rank %d: %s failed: %s", n->rank, what, koloGetLastError(n->comm));
}

static koloResult_t bs_allgather(kf_neg *n, uint32_t tag, void *all, size_t len, const char *what,
                                 kolo_errbuf *eb) {
  koloResult_t res = kolo_bootstrap_allgather(n->comm->bs, tag, all, len);
  return res == koloSuccess ? res : comm_failed(n, res, what, eb);
}

koloResult_t kf_neg_minmax(kf_neg *n, const unsigned char *mine, size_t len, unsigned char *vmin,
                           unsigned char *vmax, kolo_errbuf *eb) {
  if (n->bootstrap) {
    koloResult_t res = scratch(n, len * (size_t)n->nranks, eb);
    if (res != koloSuccess) return res;
    memcpy(n->scratch + len * (size_t)n->rank, mine, len);
    res = bs_allgather(n, TAG_FUSION_ROUND, n->scratch, len, "the negotiation round (bootstrap allgather)", eb);
    if (res != koloSuccess) return res;
    memcpy(vmin, n->scratch, len);
    memcpy(vmax, n->scratch, len);
    for (int r = 1; r < n->nranks; r++) {
      const unsigned char *v = n->scratch + len * (size_t)r;
      for (size_t i = 0; i < len; i++) {
        if (v[i] < vmin[i]) vmin[i] = v[i];
        if (v[i] > vmax[i]) vmax[i] = v[i];
      }
    }
    return koloSuccess;
  }
  koloResult_t res = scratch(n, 2 * len, eb);
  if (res != koloSuccess) return res;
  for (size_t i = 0; i < len; i++) {
    n->scratch[i] = mine[i];
    n->scratch[len + i] = (unsigned char)~mine[i];
  }
  res = kf_comm_wait(n->comm, koloAllReduce(n->scratch, n->scratch, 2 * len, koloUint8, koloMin, n->comm, NULL));
  if (res != koloSuccess) return comm_failed(n, res, "the negotiation round (min all-reduce)", eb);
  for (size_t i = 0; i < len; i++) {
    vmin[i] = n->scratch[i];
    vmax[i] = (unsigned char)~n->scratch[len + i];
  }
  return koloSuccess;
}

static koloResult_t allgather_tag(kf_neg *n, uint32_t tag, void *all, size_t len, kolo_errbuf *eb) {
  if (n->bootstrap) return bs_allgather(n, tag, all, len, "an allgather of the fusion", eb);
  char *base = all;
  koloResult_t res = kf_comm_wait(
      n->comm, koloAllGather(base + len * (size_t)n->rank, base, len, koloUint8, n->comm, NULL));
  return res == koloSuccess ? res : comm_failed(n, res, "an allgather of the fusion", eb);
}

koloResult_t kf_neg_allgather(kf_neg *n, void *all, size_t len, kolo_errbuf *eb) {
  return allgather_tag(n, TAG_FUSION_VIEW, all, len, eb);
}

koloResult_t kf_neg_bcast(kf_neg *n, void *buf, size_t len, kolo_errbuf *eb) {
  koloResult_t res = koloSuccess;
  if (!n->bootstrap) {
    res = kf_comm_wait(n->comm, koloBroadcast(buf, buf, len, koloUint8, 0, n->comm, NULL));
  } else if (n->rank == 0) {
    for (int r = 1; r < n->nranks && res == koloSuccess; r++)
      res = kolo_bootstrap_send(n->comm->bs, r, TAG_FUSION_BCAST, buf, len);
  } else {
    res = kolo_bootstrap_recv(n->comm->bs, 0, TAG_FUSION_BCAST, buf, len);
  }
  return res == koloSuccess ? res : comm_failed(n, res, "a broadcast of the fusion", eb);
}

/* A record from another rank that its decoder refused (why names it). */
static koloResult_t garbled(kf_neg *n, const char *why, kolo_errbuf *eb) {
  return kolo_error(eb, koloRemoteError, "fusion on rank %d: %s", n->rank, why);
}

koloResult_t kf_neg_bcast_order(kf_neg *n, int *order, int count, kolo_errbuf *eb) {
  size_t bytes = (size_t)count * 4;
  koloResult_t res = scratch(n, bytes > 0 ? bytes : 1, eb);
  if (res != koloSuccess) return res;
  if (n->rank == 0) kf_encode_order(order, count, n->scratch);
  if (count > 0) res = kf_neg_bcast(n, n->scratch, bytes, eb);
  char why[KOLO_ERR_LEN - 64];
  if (res == koloSuccess && kf_decode_order(n->scratch, bytes, 0, count, order, why, sizeof why) != KF_WIRE_OK)
    res = garbled(n, why, eb);
  return res;
}

/* ---- Commit ------------------------------------------------------------- */

static void decl_text(const kf_decl *d, char *out, size_t len) {
  snprintf(out, len, "%s x %zu (%s)", kf_type_name(d->dtype), d->count, kf_storage_name(d->storage));
}

static void shape_text(const kf_shape *s, char *out, size_t len) {
  snprintf(out, len,
           "bucketBytes %llu, firstBucketBytes %llu, minBuckets %d, fusionBytes %llu, op %s, preScale %g, "
           "rebuildBuckets %d",
           (unsigned long long)s->bucket_bytes, (unsigned long long)s->first_bucket_bytes, s->min_buckets,
           (unsigned long long)s->fusion_bytes, s->op == koloAvg ? "avg" : "sum", s->prescale, s->rebuild);
}

/* The first index where mine differs from rank 0's list, or -1. */
static int first_difference(const kf_decl *mine, int n, const kf_decl *zero, int n0) {
  int m = n < n0 ? n : n0;
  for (int i = 0; i < m; i++)
    if (mine[i].count != zero[i].count || mine[i].dtype != zero[i].dtype || mine[i].storage != zero[i].storage)
      return i;
  return n == n0 ? -1 : m;
}

int kf_decl_sentence(const kf_decl_summary *all, const kf_decl_diff *diffs, int nranks, const kf_decl *zero,
                     char *out, size_t len) {
  int n0 = all[0].ntensors, r = 1;
  while (r < nranks && diffs[r].first_diff < 0) r++;
  if (r == nranks) {
    snprintf(out, len, "the declarations differ between ranks but no difference was found");
    return 0;
  }
  int i = diffs[r].first_diff;
  char a[96] = "", b[96] = "";
  if (diffs[r].has) decl_text(&diffs[r].decl, a, sizeof a);
  if (i < n0) decl_text(&zero[i], b, sizeof b);
  if (diffs[r].has && i < n0)
    snprintf(out, len,
             "koloFusionCommit: rank %d declared tensor %d as %s but rank 0 declared it as %s "
             "(every rank must declare the same tensors in the same order)", r, i, a, b);
  else
    snprintf(out, len,
             "koloFusionCommit: rank %d declared %d tensors but rank 0 declared %d (the first %d agree; "
             "tensor %d is %s on rank %d only)", r, all[r].ntensors, n0, i, i, diffs[r].has ? a : b,
             diffs[r].has ? r : 0);
  return 1;
}

/* Rank 0's n0 declarations onto every rank, into zero. */
static koloResult_t bcast_decls(kf_neg *n, const kf_decl *decl, int n0, kf_decl *zero, kolo_errbuf *eb) {
  size_t bytes = (size_t)n0 * KF_DECL_WIRE_BYTES;
  koloResult_t res = scratch(n, bytes > 0 ? bytes : 1, eb);
  if (res != koloSuccess || n0 == 0) return res;
  if (n->rank == 0) kf_encode_decls(decl, n0, n->scratch);
  res = kf_neg_bcast(n, n->scratch, bytes, eb);
  char why[KOLO_ERR_LEN - 64];
  if (res == koloSuccess && kf_decode_decls(n->scratch, bytes, 0, n0, zero, why, sizeof why) != KF_WIRE_OK)
    res = garbled(n, why, eb);
  return res;
}

/* Every rank's first difference from rank 0's list, into diffs. */
static koloResult_t gather_diffs(kf_neg *n, const kf_decl_diff *mine, kf_decl_diff *diffs, kolo_errbuf *eb) {
  koloResult_t res = scratch(n, (size_t)n->nranks * KF_DIFF_WIRE_BYTES, eb);
  if (res != koloSuccess) return res;
  kf_encode_diff(mine, n->scratch + (size_t)n->rank * KF_DIFF_WIRE_BYTES);
  res = allgather_tag(n, TAG_FUSION_DECL, n->scratch, KF_DIFF_WIRE_BYTES, eb);
  char why[KOLO_ERR_LEN - 64];
  for (int r = 0; r < n->nranks && res == koloSuccess; r++)
    if (kf_decode_diff(n->scratch + (size_t)r * KF_DIFF_WIRE_BYTES, KF_DIFF_WIRE_BYTES, r, &diffs[r], why,
                       sizeof why) != KF_WIRE_OK)
      res = garbled(n, why, eb);
  return res;
}

/* Every rank's summary, into all. */
static koloResult_t gather_summaries(kf_neg *n, const kf_decl_summary *mine, kf_decl_summary *all,
                                     kolo_errbuf *eb) {
  koloResult_t res = scratch(n, (size_t)n->nranks * KF_SUMMARY_WIRE_BYTES, eb);
  if (res != koloSuccess) return res;
  kf_encode_summary(mine, n->scratch + (size_t)n->rank * KF_SUMMARY_WIRE_BYTES);
  res = allgather_tag(n, TAG_FUSION_DECL, n->scratch, KF_SUMMARY_WIRE_BYTES, eb);
  char why[KOLO_ERR_LEN - 64];
  for (int r = 0; r < n->nranks && res == koloSuccess; r++)
    if (kf_decode_summary(n->scratch + (size_t)r * KF_SUMMARY_WIRE_BYTES, KF_SUMMARY_WIRE_BYTES, r, &all[r], why,
                          sizeof why) != KF_WIRE_OK)
      res = garbled(n, why, eb);
  return res;
}

/* Second phase of the check, run when the summaries differ: rank 0's list
 * to everyone, each rank's first difference from it back to everyone. */
static koloResult_t explain_decls(kf_neg *n, const kf_decl *decl, int ntensors, const kf_decl_summary *all,
                                  kolo_errbuf *eb) {
  int n0 = all[0].ntensors;
  kf_decl *zero = calloc((size_t)(n0 > 0 ? n0 : 1), sizeof *zero);
  kf_decl_diff *diffs = calloc((size_t)n->nranks, sizeof *diffs);
  koloResult_t res = zero && diffs ? koloSuccess : kolo_error(eb, koloSystemError, "fusion on rank %d: out of memory at Commit", n->rank);
  if (res == koloSuccess) res = bcast_decls(n, decl, n0, zero, eb);
  if (res == koloSuccess) {
    kf_decl_diff me = {first_difference(decl, ntensors, zero, n0), 0, {0, 0, 0}};
    me.has = me.first_diff >= 0 && me.first_diff < ntensors;
    if (me.has) me.decl = decl[me.first_diff];
    res = gather_diffs(n, &me, diffs, eb);
  }
  if (res == koloSuccess) {
    char s[KOLO_ERR_LEN];
    int found = kf_decl_sentence(all, diffs, n->nranks, zero, s, sizeof s);
    res = found ? kolo_error(eb, koloInvalidUsage, "%s", s)
                : kolo_error(eb, koloInternalError, "fusion on rank %d: %s", n->rank, s);
  }
  free(zero);
  free(diffs);
  return res;
}

koloResult_t kf_neg_check_decls(kf_neg *n, const kf_decl *decl, int ntensors, const kf_shape *shape,
                                kolo_errbuf *eb) {
  kf_decl_summary *all = calloc((size_t)n->nranks, sizeof *all);
  if (all == NULL) return kolo_error(eb, koloSystemError, "fusion on rank %d: out of memory at Commit", n->rank);
  kf_decl_summary mine = {*shape, kf_decl_hash(decl, ntensors), ntensors, 0};
  koloResult_t res = gather_summaries(n, &mine, all, eb);
  int bad_shape = -1, bad_decl = -1;
  for (int r = 1; r < n->nranks && res == koloSuccess; r++) {
    if (bad_shape < 0 && memcmp(&all[r].shape, &all[0].shape, sizeof *shape) != 0) bad_shape = r;
    if (bad_decl < 0 && (all[r].hash != all[0].hash || all[r].ntensors != all[0].ntensors)) bad_decl = r;
  }
  if (res == koloSuccess && bad_shape >= 0) {
    char a[256], b[256];
    shape_text(&all[bad_shape].shape, a, sizeof a);
    shape_text(&all[0].shape, b, sizeof b);
    res = kolo_error(eb, koloInvalidUsage, "koloFusionCommit: rank %d's fusion config (%s) differs from rank 0's (%s)",
                     bad_shape, a, b);
  } else if (res == koloSuccess && bad_decl >= 0) {
    res = explain_decls(n, decl, ntensors, all, eb);
  }
  free(all);
  return res;
}

/* ---- rounds ------------------------------------------------------------- */

static void view_text(const kf_view *v, int ntensors, char *out, size_t len) {
  int k = snprintf(out, len, "rank %d is in step %llu with %u tensors (layout version %u), marked %d of them%s",
                   v->rank, (unsigned long long)v->sig.step, v->sig.ntensors, v->sig.version, v->nmarked,
                   v->ended ? " and ended the step" : "");
  if (v->first_unmarked >= 0 && v->first_unmarked < ntensors && k > 0 && (size_t)k < len)
    snprintf(out + k, len - (size_t)k, " (tensor %d first unmarked)", v->first_unmarked);
}

void kf_mismatch_sentence(const kf_view *all, int nranks, int probe, const kf_decl *decl, int timeout_ms,
                          char *out, size_t len) {
  int ntensors = (int)all[0].sig.ntensors;
  int a = -1, b = -1; /* a: the rank at fault (if any), b: one that disagrees */
  for (int r = 1; r < nranks && a < 0; r++)
    if (memcmp(&all[r].sig, &all[0].sig, sizeof all[0].sig) != 0) a = r, b = 0;
  char va[256], vb[256], what[128] = "";
  if (a >= 0) {
    view_text(&all[a], ntensors, va, sizeof va);
    view_text(&all[b], ntensors, vb, sizeof vb);
    snprintf(out, len, "the ranks are out of step: %s, but %s", va, vb);
    return;
  }
  int stalled = 0;
  for (int r = 0; r < nranks; r++) stalled |= all[r].stalled != 0;
  if (probe >= 0) { /* a: first rank without the tensor (one that ended its step first), b: first rank with it */
    for (int r = 0; r < nranks; r++) {
      if (a < 0 && all[r].probe == 0 && all[r].ended) a = r;
      if (b < 0 && all[r].probe == 1) b = r;
    }
    for (int r = 0; r < nranks && a < 0; r++)
      if (all[r].probe == 0) a = r;
    snprintf(what, sizeof what, "tensor %d (%s x %zu) is marked ready on rank %d but not on rank %d; ", probe,
             kf_type_name(decl[probe].dtype), decl[probe].count, b, a);
  }
  for (int r = 0; r < nranks && a < 0; r++)
    if (all[r].ended && all[r].nmarked < ntensors) a = r;
  if (a < 0) a = 0;
  if (b < 0 || b == a) b = a == 0 ? (nranks > 1 ? 1 : 0) : 0;
  view_text(&all[a], ntensors, va, sizeof va);
  view_text(&all[b], ntensors, vb, sizeof vb);
  if (all[a].ended && all[a].nmarked < ntensors)
    snprintf(out, len, "%srank %d ended its step with tensors unmarked: %s; %s", what, a, va, vb);
  else if (stalled)
    snprintf(out, len, "%sno progress for more than %d ms: %s; %s", what, timeout_ms, va, vb);
  else
    snprintf(out, len, "%s%s; %s", what, va, vb);
}

/* Every rank's view, into all. */
static koloResult_t gather_views(kf_neg *n, const kf_view *mine, kf_view *all, kolo_errbuf *eb) {
  koloResult_t res = scratch(n, (size_t)n->nranks * KF_VIEW_WIRE_BYTES, eb);
  if (res != koloSuccess) return res;
  kf_encode_view(mine, n->scratch + (size_t)n->rank * KF_VIEW_WIRE_BYTES);
  res = kf_neg_allgather(n, n->scratch, KF_VIEW_WIRE_BYTES, eb);
  char why[KOLO_ERR_LEN - 64];
  for (int r = 0; r < n->nranks && res == koloSuccess; r++)
    if (kf_decode_view(n->scratch + (size_t)r * KF_VIEW_WIRE_BYTES, KF_VIEW_WIRE_BYTES, r, &all[r], why,
                       sizeof why) != KF_WIRE_OK)
      res = garbled(n, why, eb);
  return res;
}

koloResult_t kf_neg_mismatch(kf_neg *n, const kf_view *mine, int probe, const kf_decl *decl, int timeout_ms,
                             kolo_errbuf *eb) {
  kf_view *all = calloc((size_t)n->nranks, sizeof *all);
  if (all == NULL) return kolo_error(eb, koloSystemError, "fusion on rank %d: out of memory gathering views", n->rank);
  koloResult_t res = gather_views(n, mine, all, eb);
  if (res == koloSuccess) {
    char s[KOLO_ERR_LEN - 64];
    kf_mismatch_sentence(all, n->nranks, probe, decl, timeout_ms, s, sizeof s);
    res = kolo_error(eb, koloInvalidUsage, "fusion on rank %d: calls do not match: the ranks' steps differ: %s", n->rank, s);
  }
  free(all);
  return res;
}
