/* fusion.c - the koloFusion API: create, declare, commit, steps, queries
 * and errors (see kolo_fusion.h; the thread is in scheduler.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/dtype.h"
#include "core/comm_state.h"
#include "common/config.h"
#include "fusion/internal.h"

/* ---- small helpers -------------------------------------------------------- */

const char *kf_type_name(int t) { return kolo_type_name(t); }

const char *kf_storage_name(int s) {
  return s == KOLO_FUSION_ALLOCATE ? "allocate" : s == KOLO_FUSION_EXTERNAL ? "external" : "invalid";
}

int kf_is_float(int t) { return t == koloFloat16 || t == koloFloat32 || t == koloFloat64 || t == koloBfloat16; }

koloResult_t kf_comm_wait(koloComm_t comm, koloResult_t res) {
  while (res == koloInProgress) {
    kolo_nap_us(20);
    if (koloCommGetAsyncError(comm, &res) != koloSuccess) return koloInternalError;
  }
  return res;
}

/* The thread's failure, once, into the user's error buffer; returns it. */
static koloResult_t take_failure(koloFusion_t f) {
  pthread_mutex_lock(&f->lock);
  koloResult_t res = f->failed;
  if (res != koloSuccess) kolo_error_copy(&f->err, &f->thread_err);
  pthread_mutex_unlock(&f->lock);
  return res;
}

#define KF_CHECK_FUSION(fn)                                                                     \
  do {                                                                                          \
    if (f == NULL) return kolo_error(NULL, koloInvalidArgument, "%s: fusion is NULL", fn);      \
  } while (0)

/* ---- create / destroy --------------------------------------------------- */

static size_t pick_size(size_t from_config, const char *env) {
  return from_config != KOLO_FUSION_UNDEF_SIZE ? from_config : (size_t)kolo_param_int(env);
}

static koloResult_t resolve(koloFusion_t f, const koloFusionConfig_t *cfg, const char **timeline,
                            koloStream_t *stream) {
  koloFusionConfig_t def = KOLO_FUSION_CONFIG_INITIALIZER;
  if (cfg == NULL) cfg = &def;
  if (cfg->size != sizeof *cfg)
    return kolo_error(NULL, koloInvalidArgument,
                      "koloFusionCreate: config.size = %zu, not %zu (start from KOLO_FUSION_CONFIG_INITIALIZER)",
                      cfg->size, sizeof *cfg);
  f->bucket_bytes = pick_size(cfg->bucketBytes, "KOLO_FUSION_BUCKET_BYTES");
  f->first_bucket_bytes = pick_size(cfg->firstBucketBytes, "KOLO_FUSION_FIRST_BUCKET_BYTES");
  f->fusion_bytes = pick_size(cfg->fusionBytes, "KOLO_FUSION_THRESHOLD");
  /* 64-bit from the environment, checked below like the config's value. */
  int64_t mb = cfg->minBuckets != KOLO_CONFIG_UNDEF ? cfg->minBuckets : kolo_param_int("KOLO_FUSION_MIN_BUCKETS");
  f->min_buckets = mb < 0 || mb > (1 << 20) ? -1 : (int)mb;
  f->cycle_us = cfg->cycleTimeUs != KOLO_CONFIG_UNDEF ? cfg->cycleTimeUs : (int)kolo_param_int("KOLO_FUSION_CYCLE_US");
  f->op = cfg->op != KOLO_CONFIG_UNDEF ? cfg->op : koloAvg;
  f->prescale = cfg->preScale != 0.0 ? cfg->preScale : 1.0;
  /* Off unless asked for: a rebuild moves the tensors, and the header's
   * sketch keeps a TensorPtr from before the step loop. */
  f->rebuild = cfg->rebuildBuckets != KOLO_CONFIG_UNDEF ? cfg->rebuildBuckets : 0;
  const char *what = NULL;
  if (f->bucket_bytes == 0 || f->bucket_bytes > ((size_t)1 << 40)) what = "bucketBytes (KOLO_FUSION_BUCKET_BYTES) is outside 1..2^40";
  else if (f->first_bucket_bytes == 0 || f->first_bucket_bytes > ((size_t)1 << 40)) what = "firstBucketBytes (KOLO_FUSION_FIRST_BUCKET_BYTES) is outside 1..2^40";
  else if (f->min_buckets < 1 || f->min_buckets > (1 << 20)) what = "minBuckets (KOLO_FUSION_MIN_BUCKETS) is outside 1..2^20";
  else if (f->fusion_bytes == 0 || f->fusion_bytes > ((size_t)1 << 40)) what = "fusionBytes (KOLO_FUSION_THRESHOLD) is outside 1..2^40";
  else if (f->cycle_us < 0 || f->cycle_us > 10000000) what = "cycleTimeUs (KOLO_FUSION_CYCLE_US) is outside 0..10^7";
  else if (f->op != koloSum && f->op != koloAvg) what = "op is neither koloSum nor koloAvg";
  else if (!isfinite(f->prescale)) what = "preScale is not finite";
  else if (f->rebuild != 0 && f->rebuild != 1) what = "rebuildBuckets is neither 0 nor 1";
  if (what) return kolo_error(NULL, koloInvalidArgument, "koloFusionCreate: %s", what);
  *timeline = cfg->timeline ? cfg->timeline : kolo_param_str("KOLO_TIMELINE");
  *stream = cfg->stream;
  return koloSuccess;
}

static koloResult_t init_sync(koloFusion_t f) {
  pthread_condattr_t ca;
  int e = pthread_condattr_init(&ca);
  if (e == 0) e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (e == 0) e = pthread_cond_init(&f->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (e != 0) return kolo_syserror(NULL, e, "koloFusionCreate: pthread_cond_init");
  e = pthread_mutex_init(&f->lock, NULL);
  if (e != 0) {
    pthread_cond_destroy(&f->cond);
    return kolo_syserror(NULL, e, "koloFusionCreate: pthread_mutex_init");
  }
  return koloSuccess;
}

koloResult_t koloFusionCreate(koloFusion_t *fusion, koloComm_t comm, const koloFusionConfig_t *config) {
  if (fusion == NULL) return kolo_error(NULL, koloInvalidArgument, "koloFusionCreate: fusion is NULL");
  if (comm == NULL) return kolo_error(NULL, koloInvalidArgument, "koloFusionCreate: comm is NULL");
  koloResult_t ready = kolo_comm_check_ready(comm, "koloFusionCreate", 0);
  if (ready != koloSuccess) return ready;
  if (comm->failed != koloSuccess) return kolo_comm_failed_earlier(comm, comm->failed, "koloFusionCreate");
  koloFusion_t f = calloc(1, sizeof *f);
  if (f == NULL) return kolo_error(NULL, koloSystemError, "koloFusionCreate: out of memory");
  f->comm = comm;
  f->rank = comm->rank;
  f->nranks = comm->nranks;
  f->cuda = comm->memory == koloMemCuda;
  f->timeout_ms = comm->timeout_ms;
  const char *timeline = NULL;
  koloStream_t stream = NULL;
  koloResult_t res = resolve(f, config, &timeline, &stream);
  if (res == koloSuccess && stream != NULL && !f->cuda)
    res = kolo_error(NULL, koloInvalidArgument, "koloFusionCreate: config.stream is set but the communicator of rank %d is a host one", f->rank);
  if (res == koloSuccess && timeline && *timeline && (f->timeline_path = strdup(timeline)) == NULL)
    res = kolo_error(NULL, koloSystemError, "koloFusionCreate: out of memory");
  if (res == koloSuccess) res = init_sync(f);
  if (res != koloSuccess) {
    free(f->timeline_path);
    free(f);
    return res;
  }
  f->stream_cfg = stream;
  *fusion = f;
  return koloSuccess;
}

static void free_step_arrays(koloFusion_t f) {
  free(f->marked);
  free(f->ext_buf);
  free(f->mark_order);
  free(f->bucket_marked);
  f->bucket_marked = NULL;
  f->marked = NULL;
  f->ext_buf = NULL;
  f->mark_order = NULL;
}

/* Undoes Commit, in reverse (also after a Commit that failed half way). */
static void uncommit(koloFusion_t f) {
  kf_thread_stop(f);
  kf_timeline_close(f->tl);
  f->tl = NULL;
  if (f->dev) kf_dev_sync_stream(f, &f->err); /* nothing may still use the buffers */
  kf_dev_free(f, f->fbuf);
  kf_dev_free(f, f->arena);
  f->fbuf = f->arena = NULL;
  kf_dev_teardown(f);
  free_step_arrays(f);
  kf_layout_free(&f->layout);
  kf_neg_free(&f->neg);
  f->committed = 0;
}

koloResult_t koloFusionDestroy(koloFusion_t f) {
  KF_CHECK_FUSION("koloFusionDestroy");
  pthread_mutex_lock(&f->lock);
  /* a step that was ended finishes (or fails) first; one that was not is
   * abandoned after the round in progress */
  while (f->thread_started && f->in_step && f->ended && !f->issued) pthread_cond_wait(&f->cond, &f->lock);
  pthread_mutex_unlock(&f->lock);
  uncommit(f);
  pthread_cond_destroy(&f->cond);
  pthread_mutex_destroy(&f->lock);
  free(f->decl);
  free(f->timeline_path);
  free(f);
  return koloSuccess;
}

/* ---- declarations and layout --------------------------------------------- */

koloResult_t koloFusionAddTensor(koloFusion_t f, size_t count, koloDataType_t datatype,
                                 koloFusionStorage_t storage, int *tensorId) {
  const char *fn = "koloFusionAddTensor";
  KF_CHECK_FUSION(fn);
  if (tensorId == NULL) return kolo_error(&f->err, koloInvalidArgument, "%s: tensorId is NULL", fn);
  if (f->committed)
    return kolo_error(&f->err, koloInvalidUsage, "%s: the fusion was committed already (declare every tensor before koloFusionCommit)", fn);
  if ((int)datatype < 0 || datatype >= koloNumTypes)
    return kolo_error(&f->err, koloInvalidArgument, "%s: datatype %d is not a koloDataType_t", fn, (int)datatype);
  if (storage != KOLO_FUSION_ALLOCATE && storage != KOLO_FUSION_EXTERNAL)
    return kolo_error(&f->err, koloInvalidArgument, "%s: storage %d is neither KOLO_FUSION_ALLOCATE nor KOLO_FUSION_EXTERNAL", fn, (int)storage);
  if (count == 0 || count > ((size_t)1 << 40) / koloTypeSize(datatype))
    return kolo_error(&f->err, koloInvalidArgument, "%s: count %zu is outside 1..2^40 bytes of %s", fn, count, kf_type_name(datatype));
  if (f->prescale != 1.0 && !kf_is_float(datatype))
    return kolo_error(&f->err, koloInvalidArgument,
                      "%s: preScale = %g applies to float16, bfloat16, float32 and float64 tensors only, and tensor %d is %s", fn, f->prescale,
                      f->ntensors, kf_type_name(datatype));
  if (f->ntensors == (1 << 24)) return kolo_error(&f->err, koloInvalidUsage, "%s: more than 2^24 tensors", fn);
  if (f->ntensors == f->decl_cap) {
    int cap = f->decl_cap ? 2 * f->decl_cap : 64;
    kf_decl *d = realloc(f->decl, (size_t)cap * sizeof *d);
    if (d == NULL) return kolo_error(&f->err, koloSystemError, "%s: out of memory", fn);
    f->decl = d;
    f->decl_cap = cap;
  }
  f->decl[f->ntensors] = (kf_decl){count, (int)datatype, (int)storage};
  *tensorId = f->ntensors++;
  return koloSuccess;
}

static size_t fusion_buffer_bytes(const koloFusion_t f) {
  size_t sum = 0;
  for (int t = 0; t < f->ntensors; t++) {
    size_t b = kf_decl_bytes(&f->decl[t]);
    if (f->decl[t].storage == KOLO_FUSION_EXTERNAL && b <= f->fusion_bytes) sum += (b + 15) & ~(size_t)15;
  }
  return sum < f->fusion_bytes ? sum : f->fusion_bytes;
}

static koloResult_t commit_steps(koloFusion_t f) {
  kf_shape shape = {f->bucket_bytes, f->first_bucket_bytes, f->fusion_bytes, f->prescale, f->op, f->rebuild,
                    f->min_buckets, 0};
  koloResult_t res = kf_neg_init(&f->neg, f->comm, &f->err);
  if (res == koloSuccess) res = kf_neg_check_decls(&f->neg, f->decl, f->ntensors, &shape, &f->err);
  if (res != koloSuccess) return res;
  f->bucket_cap = kf_layout_cap(f->decl, f->ntensors, f->bucket_bytes, f->first_bucket_bytes, f->min_buckets);
  res = kf_layout_build(f->decl, f->ntensors, NULL, f->bucket_cap, f->first_bucket_bytes, &f->layout);
  if (res != koloSuccess) return kolo_error(&f->err, res, "koloFusionCommit: out of memory laying out buckets");
  size_t n = (size_t)f->ntensors;
  f->marked = calloc(n, 1);
  f->ext_buf = calloc(n, sizeof *f->ext_buf);
  f->mark_order = calloc(n, sizeof *f->mark_order);
  f->bucket_marked = calloc(n, sizeof *f->bucket_marked); /* a rebuild never makes more buckets than tensors */
  if (!f->marked || !f->ext_buf || !f->mark_order || !f->bucket_marked) return kolo_error(&f->err, koloSystemError, "koloFusionCommit: out of memory");
  res = kf_dev_setup(f, f->stream_cfg);
  if (res == koloSuccess && f->layout.arena_bytes > 0) res = kf_dev_alloc(f, f->layout.arena_bytes, &f->arena, &f->err);
  f->fbuf_bytes = fusion_buffer_bytes(f);
  if (res == koloSuccess && f->fbuf_bytes > 0) res = kf_dev_alloc(f, f->fbuf_bytes, &f->fbuf, &f->err);
  if (res == koloSuccess && f->timeline_path) res = kf_timeline_open(f->timeline_path, f->rank, &f->tl, &f->err);
  if (res == koloSuccess) res = kf_thread_start(f);
  return res;
}

koloResult_t koloFusionCommit(koloFusion_t f) {
  KF_CHECK_FUSION("koloFusionCommit");
  if (f->committed) return kolo_error(&f->err, koloInvalidUsage, "koloFusionCommit: the fusion was committed already");
  if (f->ntensors == 0) return kolo_error(&f->err, koloInvalidUsage, "koloFusionCommit: no tensor was declared (koloFusionAddTensor)");
  koloResult_t res = commit_steps(f);
  if (res != koloSuccess) {
    uncommit(f);
    return res;
  }
  f->committed = 1;
  return koloSuccess;
}

static koloResult_t check_tensor(koloFusion_t f, const char *fn, int id) {
  if (!f->committed) return kolo_error(&f->err, koloInvalidUsage, "%s: call koloFusionCommit first", fn);
  if (id < 0 || id >= f->ntensors)
    return kolo_error(&f->err, koloInvalidArgument, "%s: tensorId %d is not a declared tensor (0..%d)", fn, id, f->ntensors - 1);
  return koloSuccess;
}

koloResult_t koloFusionTensorPtr(koloFusion_t f, int id, void **ptr) {
  const char *fn = "koloFusionTensorPtr";
  KF_CHECK_FUSION(fn);
  if (ptr == NULL) return kolo_error(&f->err, koloInvalidArgument, "%s: ptr is NULL", fn);
  koloResult_t res = check_tensor(f, fn, id);
  if (res != koloSuccess) return res;
  if (f->decl[id].storage != KOLO_FUSION_ALLOCATE)
    return kolo_error(&f->err, koloInvalidArgument, "%s: tensor %d is EXTERNAL: kolo holds no storage for it", fn, id);
  pthread_mutex_lock(&f->lock);
  *ptr = (char *)f->arena + f->layout.offset[id];
  pthread_mutex_unlock(&f->lock);
  return koloSuccess;
}

koloResult_t koloFusionLayoutVersion(koloFusion_t f, int *version) {
  KF_CHECK_FUSION("koloFusionLayoutVersion");
  if (version == NULL) return kolo_error(&f->err, koloInvalidArgument, "koloFusionLayoutVersion: version is NULL");
  pthread_mutex_lock(&f->lock);
  *version = f->version;
  pthread_mutex_unlock(&f->lock);
  return koloSuccess;
}

koloResult_t koloFusionBucketCount(koloFusion_t f, int *nbuckets) {
  KF_CHECK_FUSION("koloFusionBucketCount");
  if (nbuckets == NULL) return kolo_error(&f->err, koloInvalidArgument, "koloFusionBucketCount: nbuckets is NULL");
  if (!f->committed) return kolo_error(&f->err, koloInvalidUsage, "koloFusionBucketCount: call koloFusionCommit first");
  pthread_mutex_lock(&f->lock);
  *nbuckets = f->layout.nbuckets;
  pthread_mutex_unlock(&f->lock);
  return koloSuccess;
}

koloResult_t koloFusionTensorBucket(koloFusion_t f, int id, int *bucket) {
  const char *fn = "koloFusionTensorBucket";
  KF_CHECK_FUSION(fn);
  if (bucket == NULL) return kolo_error(&f->err, koloInvalidArgument, "%s: bucket is NULL", fn);
  koloResult_t res = check_tensor(f, fn, id);
  if (res != koloSuccess) return res;
  pthread_mutex_lock(&f->lock);
  *bucket = f->layout.bucket_of[id];
  pthread_mutex_unlock(&f->lock);
  return koloSuccess;
}

/* ---- steps ------------------------------------------------------------------ */

static koloResult_t check_usable(koloFusion_t f, const char *fn) {
  if (!f->committed) return kolo_error(&f->err, koloInvalidUsage, "%s: call koloFusionCommit first", fn);
  koloResult_t res = take_failure(f);
  if (res == koloSuccess) return res;
  kolo_errbuf why = {0};
  kolo_error_copy(&why, &f->err);
  return kolo_error(&f->err, res, "%s: the fusion failed in an earlier step: %s", fn, why.msg);
}

koloResult_t koloFusionStepBegin(koloFusion_t f) {
  const char *fn = "koloFusionStepBegin";
  KF_CHECK_FUSION(fn);
  koloResult_t res = check_usable(f, fn);
  if (res != koloSuccess) return res;
  if (f->in_step && !f->ended)
    return kolo_error(&f->err, koloInvalidUsage, "%s: step %llu is still open (call koloFusionStepEnd and koloFusionWait)",
                      fn, (unsigned long long)f->step);
  if (f->in_step && (res = koloFusionWait(f)) != koloSuccess) return res;
  pthread_mutex_lock(&f->lock);
  f->step++;
  memset(f->marked, 0, (size_t)f->ntensors);
  memset(f->ext_buf, 0, (size_t)f->ntensors * sizeof *f->ext_buf);
  memset(f->bucket_marked, 0, (size_t)f->ntensors * sizeof *f->bucket_marked);
  f->nmarked = 0;
  f->marks_since_round = 0;
  f->completed_since_round = 0;
  f->ended = 0;
  f->issued = 0;
  f->in_step = 1;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  return koloSuccess;
}

koloResult_t koloFusionMarkReady(koloFusion_t f, int id, void *buf, koloEvent_t ready) {
  const char *fn = "koloFusionMarkReady";
  KF_CHECK_FUSION(fn);
  koloResult_t res = check_tensor(f, fn, id);
  if (res == koloSuccess) res = check_usable(f, fn);
  if (res != koloSuccess) return res;
  if (!f->in_step || f->ended)
    return kolo_error(&f->err, koloInvalidUsage, "%s: tensor %d is marked outside a step (%s)", fn, id,
                      f->in_step ? "after koloFusionStepEnd" : "call koloFusionStepBegin first");
  int external = f->decl[id].storage == KOLO_FUSION_EXTERNAL;
  if (external && buf == NULL)
    return kolo_error(&f->err, koloInvalidArgument, "%s: tensor %d is EXTERNAL but buf is NULL", fn, id);
  if (!external && buf != NULL)
    return kolo_error(&f->err, koloInvalidArgument,
                      "%s: tensor %d is ALLOCATE (it lives at koloFusionTensorPtr) but buf is not NULL", fn, id);
  if (f->marked[id])
    return kolo_error(&f->err, koloInvalidUsage, "%s: tensor %d was marked ready twice in step %llu", fn, id,
                      (unsigned long long)f->step);
  res = kf_dev_wait_ready(f, ready, &f->err);
  if (res != koloSuccess) return res;
  pthread_mutex_lock(&f->lock);
  f->marked[id] = 1;
  f->ext_buf[id] = buf;
  f->mark_order[f->nmarked++] = id;
  f->marks_since_round++;
  int tid = external ? KF_TL_EXTERNAL_TID + f->decl[id].dtype : f->layout.bucket_of[id];
  /* a bucket complete here: a round at once, not at the next cycle (with
   * compute and comm about equal, every cycle of delay before a bucket's
   * all-reduce adds to the step) */
  int completed = !external && ++f->bucket_marked[tid] == f->layout.buckets[tid].n;
  f->completed_since_round += completed;
  /* the thread sleeps until the first mark of a step, and rounds are due at
   * once when the last one comes */
  if (f->nmarked == 1 || f->nmarked == f->ntensors || completed) pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  kf_timeline_ready(f->tl, tid, id, f->step);
  return koloSuccess;
}

koloResult_t koloFusionStepEnd(koloFusion_t f, koloEvent_t *done) {
  const char *fn = "koloFusionStepEnd";
  KF_CHECK_FUSION(fn);
  if (done) *done = NULL;
  koloResult_t res = check_usable(f, fn);
  if (res != koloSuccess) return res;
  if (!f->in_step || f->ended)
    return kolo_error(&f->err, koloInvalidUsage, "%s: no step is open (%s)", fn,
                      f->in_step ? "koloFusionStepEnd was called already" : "call koloFusionStepBegin first");
  int first_unmarked = -1;
  pthread_mutex_lock(&f->lock);
  f->ended = 1;
  f->marks_since_round++;
  pthread_cond_broadcast(&f->cond);
  for (int t = 0; t < f->ntensors && first_unmarked < 0; t++)
    if (!f->marked[t]) first_unmarked = t;
  pthread_mutex_unlock(&f->lock);
  if (first_unmarked >= 0) /* the next round fails every rank, naming this one */
    return kolo_error(&f->err, koloInvalidUsage, "%s: rank %d ended step %llu with %d of %d tensors marked ready (tensor %d is not)",
                      fn, f->rank, (unsigned long long)f->step, f->nmarked, f->ntensors, first_unmarked);
  if (!f->cuda) return koloSuccess;
  pthread_mutex_lock(&f->lock);
  while (!f->issued) pthread_cond_wait(&f->cond, &f->lock);
  pthread_mutex_unlock(&f->lock);
  res = take_failure(f);
  if (res != koloSuccess) return res;
  return kf_dev_record_done(f, done, &f->err);
}

koloResult_t koloFusionWait(koloFusion_t f) {
  const char *fn = "koloFusionWait";
  KF_CHECK_FUSION(fn);
  if (!f->committed) return kolo_error(&f->err, koloInvalidUsage, "%s: call koloFusionCommit first", fn);
  if (!f->in_step || !f->ended)
    return kolo_error(&f->err, koloInvalidUsage, "%s: %s", fn,
                      f->in_step ? "call koloFusionStepEnd first" : "no step is in flight");
  pthread_mutex_lock(&f->lock);
  while (!f->issued) pthread_cond_wait(&f->cond, &f->lock);
  pthread_mutex_unlock(&f->lock);
  koloResult_t res = take_failure(f);
  if (res == koloSuccess) res = kf_dev_sync_done(f, &f->err);
  pthread_mutex_lock(&f->lock);
  f->in_step = 0;
  pthread_mutex_unlock(&f->lock);
  return res;
}

/* ---- queries ------------------------------------------------------------------ */

koloResult_t koloFusionGetStats(koloFusion_t f, koloFusionStats_t *stats) {
  KF_CHECK_FUSION("koloFusionGetStats");
  if (stats == NULL) return kolo_error(&f->err, koloInvalidArgument, "koloFusionGetStats: stats is NULL");
  pthread_mutex_lock(&f->lock);
  *stats = f->stats;
  pthread_mutex_unlock(&f->lock);
  return koloSuccess;
}

const char *koloFusionGetLastError(koloFusion_t f) {
  if (f == NULL) return kolo_thread_errbuf()->msg;
  take_failure(f);
  return f->err.msg;
}
