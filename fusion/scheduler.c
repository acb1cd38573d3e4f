/* scheduler.c - the fusion's thread: lockstep rounds with the other ranks,
 * and the launches each round decides (see kolo_fusion.h, negotiate.h).
 *
 * A round runs while a step is in flight on this rank and something is
 * marked or the step was ended: at most one per cycle, and at once when
 * every tensor of the step is marked (or StepEnd was called), or when the
 * last tensor of a bucket was marked here, since the last one.  (The peers
 * complete the bucket at about the same time in backward, and their
 * rounds then run at once too, and a rank that completed a bucket its
 * peers have not runs its next round after an eighth of a cycle: the
 * bucket launches about one round latency after the last rank completed it
 * instead of up to a cycle later.)
 * Every rank runs the same rounds (a step ends in the same round
 * everywhere), so the exchanges pair up; each rank then decides the same
 * launches from the same min / max vectors, in this order:
 *   1. buckets in layout order: a bucket whose tensors are all ready
 *      everywhere, in place and whole; otherwise its runs of consecutive
 *      tensors that were ready everywhere already in an earlier round (a
 *      partial bucket waits one cycle for the rest, then is flushed) - in
 *      place too, never copied;
 *   2. EXTERNAL tensors ready everywhere, per dtype in declared order,
 *      packed into the fusion buffer until the next one would not fit: one
 *      pack, one all-reduce, one unpack per buffer; a tensor larger than
 *      the buffer is all-reduced where it is.
 * The last round of a step is the one that launches its last tensor. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "fusion/internal.h"
#include "fusion/negotiate_wire.h"

typedef struct {
  kf_launch_kind kind;
  int bucket, dtype;
  int first, last; /* BUCKET: member indices; FUSED/DIRECT: into rs.group */
} kf_launch;

/* The thread's own state. */
typedef struct {
  int n;
  size_t veclen;
  unsigned char *vec, *vmin, *vmax;
  unsigned char *launched;
  int64_t *ready_round;
  void **ext;
  int *group;       /* EXTERNAL tensors of this round's fused / direct launches */
  size_t *goff;     /* their offsets in the fusion buffer */
  kf_copy *copies;
  kf_launch *launches;
  int nlaunches, ngroup, nlaunched;
  uint64_t step;    /* the step the rounds belong to */
  int64_t round;
  int64_t stall_since_us;
  int stalled;
  int peer_pending; /* the last round saw a bucket complete here and not yet everywhere */
  int64_t exchanged_us; /* when the last round's exchange ended: the same instant on every rank */
  int ended, nmarked, first_unmarked;
  koloFusionStats_t delta;
  kolo_errbuf eb;
} kf_rounds;

static int64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

static void rounds_free(kf_rounds *rs) {
  free(rs->vec);
  free(rs->vmin);
  free(rs->vmax);
  free(rs->launched);
  free(rs->ready_round);
  free(rs->ext);
  free(rs->group);
  free(rs->goff);
  free(rs->copies);
  free(rs->launches);
}

static koloResult_t rounds_init(koloFusion_t f, kf_rounds *rs) {
  memset(rs, 0, sizeof *rs);
  size_t n = (size_t)f->ntensors, m = n > 0 ? n : 1;
  rs->n = f->ntensors;
  rs->veclen = n + KF_ROUND_TAIL;
  rs->vec = calloc(rs->veclen, 1);
  rs->vmin = calloc(rs->veclen, 1);
  rs->vmax = calloc(rs->veclen, 1);
  rs->launched = calloc(m, 1);
  rs->ready_round = calloc(m, sizeof *rs->ready_round);
  rs->ext = calloc(m, sizeof *rs->ext);
  rs->group = calloc(m, sizeof *rs->group);
  rs->goff = calloc(m, sizeof *rs->goff);
  rs->copies = calloc(m, sizeof *rs->copies);
  rs->launches = calloc(2 * m, sizeof *rs->launches);
  if (rs->vec && rs->vmin && rs->vmax && rs->launched && rs->ready_round && rs->ext && rs->group &&
      rs->goff && rs->copies && rs->launches)
    return koloSuccess;
  rounds_free(rs);
  memset(rs, 0, sizeof *rs);
  return kolo_error(&rs->eb, koloSystemError, "fusion on rank %d: out of memory starting the thread", f->rank);
}

/* ---- deciding ------------------------------------------------------------ */

static int ready_all(const kf_rounds *rs, int t) { return rs->vmin[t] != 0; }

static void add_launch(kf_rounds *rs, kf_launch_kind kind, int bucket, int dtype, int first, int last) {
  rs->launches[rs->nlaunches++] = (kf_launch){kind, bucket, dtype, first, last};
}

static void plan_buckets(koloFusion_t f, kf_rounds *rs) {
  const kf_layout *l = &f->layout;
  rs->peer_pending = 0;
  for (int b = 0; b < l->nbuckets; b++) {
    const kf_bucket *bk = &l->buckets[b];
    const int *m = l->members + bk->first;
    int whole = 1, mine = 1;
    for (int j = 0; j < bk->n && whole; j++) whole = ready_all(rs, m[j]);
    for (int j = 0; j < bk->n && mine; j++) mine = rs->vec[m[j]] != 0;
    rs->peer_pending |= mine && !whole;
    int run = -1;
    for (int j = 0; j <= bk->n; j++) {
      int ok = j < bk->n && !rs->launched[m[j]] && ready_all(rs, m[j]) &&
               (whole || rs->ready_round[m[j]] < rs->round);
      if (ok && run < 0) run = j;
      if (!ok && run >= 0) {
        add_launch(rs, KF_LAUNCH_BUCKET, b, bk->dtype, run, j - 1);
        run = -1;
      }
    }
  }
}

static int external_ready(koloFusion_t f, const kf_rounds *rs, int t, int dt) {
  const kf_decl *d = &f->decl[t];
  return d->storage == KOLO_FUSION_EXTERNAL && d->dtype == dt && !rs->launched[t] && ready_all(rs, t);
}

static void plan_external(koloFusion_t f, kf_rounds *rs) {
  for (int dt = 0; dt < koloNumTypes; dt++) {
    for (int t = 0; t < rs->n; t++) { /* too large for the buffer: where they are */
      if (!external_ready(f, rs, t, dt) || kf_decl_bytes(&f->decl[t]) <= f->fbuf_bytes) continue;
      rs->group[rs->ngroup] = t;
      add_launch(rs, KF_LAUNCH_DIRECT, -1, dt, rs->ngroup, rs->ngroup);
      rs->ngroup++;
    }
    int start = rs->ngroup;
    size_t at = 0;
    for (int t = 0; t < rs->n; t++) {
      size_t bytes = kf_decl_bytes(&f->decl[t]);
      if (!external_ready(f, rs, t, dt) || bytes > f->fbuf_bytes) continue;
      size_t off = rs->ngroup == start ? 0 : align16(at);
      if (rs->ngroup > start && off + bytes > f->fbuf_bytes) {
        add_launch(rs, KF_LAUNCH_FUSED, -1, dt, start, rs->ngroup - 1);
        start = rs->ngroup;
        off = 0;
      }
      rs->goff[rs->ngroup] = off;
      at = off + bytes;
      rs->group[rs->ngroup++] = t;
    }
    if (rs->ngroup > start) add_launch(rs, KF_LAUNCH_FUSED, -1, dt, start, rs->ngroup - 1);
  }
}

/* ---- launching ----------------------------------------------------------- */

static koloResult_t all_reduce(koloFusion_t f, kf_rounds *rs, void *p, size_t count, int dtype) {
  koloResult_t res = koloAllReduce(p, p, count, (koloDataType_t)dtype, (koloRedOp_t)f->op, f->comm, kf_dev_stream(f));
  if (!f->cuda) res = kf_comm_wait(f->comm, res);
  rs->delta.allReduces++;
  if (res == koloSuccess) return res;
  return kolo_error(&rs->eb, res, "fusion on rank %d: the all-reduce of %zu %s failed: %s", f->rank, count,
                    kf_type_name(dtype), koloGetLastError(f->comm));
}

static koloResult_t scale_in_place(koloFusion_t f, kf_rounds *rs, void *p, size_t bytes, int dtype) {
  if (f->prescale == 1.0) return koloSuccess;
  kf_copy c = {p, p, bytes};
  return kf_dev_copy(f, &c, 1, dtype, f->prescale, &rs->eb);
}

static koloResult_t run_bucket(koloFusion_t f, kf_rounds *rs, const kf_launch *ln) {
  const kf_layout *l = &f->layout;
  const int *m = l->members + l->buckets[ln->bucket].first;
  size_t lo = l->offset[m[ln->first]];
  size_t hi = l->offset[m[ln->last]] + kf_decl_bytes(&f->decl[m[ln->last]]);
  char *p = (char *)f->arena + lo;
  int ntens = ln->last - ln->first + 1;
  kf_timeline_launch(f->tl, ln->bucket, "bucket", ntens, hi - lo, rs->step);
  koloResult_t res = scale_in_place(f, rs, p, hi - lo, ln->dtype);
  if (res == koloSuccess) res = all_reduce(f, rs, p, (hi - lo) / koloTypeSize((koloDataType_t)ln->dtype), ln->dtype);
  kf_timeline_done(f->tl, ln->bucket);
  for (int j = ln->first; j <= ln->last; j++) rs->launched[m[j]] = 1;
  rs->nlaunched += ntens;
  return res;
}

static koloResult_t run_direct(koloFusion_t f, kf_rounds *rs, const kf_launch *ln) {
  int t = rs->group[ln->first];
  size_t bytes = kf_decl_bytes(&f->decl[t]);
  kf_timeline_launch(f->tl, KF_TL_EXTERNAL_TID + ln->dtype, "external, unpacked", 1, bytes, rs->step);
  koloResult_t res = scale_in_place(f, rs, rs->ext[t], bytes, ln->dtype);
  if (res == koloSuccess) res = all_reduce(f, rs, rs->ext[t], f->decl[t].count, ln->dtype);
  kf_timeline_done(f->tl, KF_TL_EXTERNAL_TID + ln->dtype);
  rs->launched[t] = 1;
  rs->nlaunched++;
  return res;
}

static koloResult_t run_fused(koloFusion_t f, kf_rounds *rs, const kf_launch *ln) {
  int k = 0;
  size_t end = 0, bytes = 0;
  char *buf = f->fbuf;
  for (int g = ln->first; g <= ln->last; g++) {
    int t = rs->group[g];
    size_t b = kf_decl_bytes(&f->decl[t]);
    rs->copies[k++] = (kf_copy){rs->ext[t], buf + rs->goff[g], b};
    end = rs->goff[g] + b;
    bytes += b;
  }
  int tid = KF_TL_EXTERNAL_TID + ln->dtype;
  kf_timeline_launch(f->tl, tid, "external, packed", k, bytes, rs->step);
  koloResult_t res = kf_dev_copy(f, rs->copies, k, ln->dtype, f->prescale, &rs->eb);
  rs->delta.packCalls++;
  rs->delta.packedBytes += bytes;
  if (res == koloSuccess) res = all_reduce(f, rs, buf, end / koloTypeSize((koloDataType_t)ln->dtype), ln->dtype);
  if (res == koloSuccess) {
    for (int i = 0; i < k; i++) rs->copies[i] = (kf_copy){rs->copies[i].dst, (void *)(uintptr_t)rs->copies[i].src, rs->copies[i].bytes};
    res = kf_dev_copy(f, rs->copies, k, ln->dtype, 1.0, &rs->eb);
    rs->delta.unpackCalls++;
    rs->delta.unpackedBytes += bytes;
  }
  kf_timeline_done(f->tl, tid);
  for (int g = ln->first; g <= ln->last; g++) rs->launched[rs->group[g]] = 1;
  rs->nlaunched += k;
  return res;
}

static koloResult_t run_launches(koloFusion_t f, kf_rounds *rs) {
  koloResult_t res = koloSuccess;
  for (int i = 0; i < rs->nlaunches && res == koloSuccess; i++) {
    const kf_launch *ln = &rs->launches[i];
    if (ln->kind == KF_LAUNCH_BUCKET) res = run_bucket(f, rs, ln);
    else if (ln->kind == KF_LAUNCH_DIRECT) res = run_direct(f, rs, ln);
    else res = run_fused(f, rs, ln);
  }
  return res;
}

/* ---- a round --------------------------------------------------------------- */

static kf_sig my_sig(koloFusion_t f, const kf_rounds *rs) {
  kf_sig s;
  memset(&s, 0, sizeof s);
  s.step = rs->step;
  s.decl_hash = kf_decl_hash(f->decl, f->ntensors);
  s.version = (uint32_t)f->version;
  s.ntensors = (uint32_t)f->ntensors;
  return s;
}

/* The tensor a mismatch sentence names (-1: none), the same on every rank.
 * When a rank ended its step with tensors unmarked (one more exchange says
 * which): one of those that another rank marked, certainly missing since
 * the rank that ended can no longer mark it; none when no rank marked any
 * of them yet (the sentence then names the rank that ended and its first
 * unmarked tensor).  Tensors marked on some ranks only are no evidence
 * then: the others may merely not have reached them.  Otherwise (a stall,
 * ranks in different steps): the first tensor marked on some ranks only. */
static koloResult_t pick_probe(koloFusion_t f, kf_rounds *rs, int *probe) {
  size_t n = (size_t)rs->n;
  unsigned char *u = malloc(3 * n + 1);
  if (u == NULL) return kolo_error(&rs->eb, koloSystemError, "fusion on rank %d: out of memory explaining a mismatch", f->rank);
  for (size_t t = 0; t < n; t++) u[t] = (unsigned char)(rs->ended && !rs->vec[t]);
  koloResult_t res = kf_neg_minmax(&f->neg, u, n, u + n, u + 2 * n, &rs->eb);
  int bad_end = 0;
  *probe = -1;
  for (int t = 0; res == koloSuccess && t < rs->n; t++) {
    bad_end |= u[2 * n + (size_t)t];
    if (*probe < 0 && u[2 * n + (size_t)t] && rs->vmax[t] && !rs->launched[t]) *probe = t;
  }
  for (int t = 0; res == koloSuccess && !bad_end && t < rs->n && *probe < 0; t++)
    if (rs->vmin[t] != rs->vmax[t] && !rs->launched[t]) *probe = t;
  free(u);
  return res;
}

static koloResult_t mismatch(koloFusion_t f, kf_rounds *rs, const kf_sig *sig) {
  int probe = -1;
  koloResult_t res = pick_probe(f, rs, &probe);
  if (res != koloSuccess) return res;
  kf_view v = {*sig, f->rank, rs->ended, rs->nmarked, rs->first_unmarked, rs->stalled,
               probe >= 0 ? rs->vec[probe] : -1};
  return kf_neg_mismatch(&f->neg, &v, probe, f->decl, f->timeout_ms, &rs->eb);
}

/* Tracks tensors ready on some ranks only; sets the stall flag (sent in the
 * next round) once that lasted the communicator's timeout without a launch. */
static void track_stall(koloFusion_t f, kf_rounds *rs) {
  int partial = 0;
  for (int t = 0; t < rs->n && !partial; t++) partial = !rs->launched[t] && rs->vmax[t] && !rs->vmin[t];
  if (!partial || rs->nlaunches > 0) {
    rs->stall_since_us = -1;
    return;
  }
  int64_t now = now_us();
  if (rs->stall_since_us < 0) rs->stall_since_us = now;
  else if (f->timeout_ms > 0 && now - rs->stall_since_us > (int64_t)f->timeout_ms * 1000) rs->stalled = 1;
}

static koloResult_t run_round(koloFusion_t f, kf_rounds *rs) {
  int64_t begin = f->tl ? now_us() : 0;
  kf_sig sig = my_sig(f, rs);
  unsigned char *tail = rs->vec + rs->n;
  kf_encode_sig(&sig, tail); /* the same bytes on hosts of any byte order */
  tail[KF_SIG_WIRE_BYTES + KF_FLAG_BAD_END] = rs->ended && rs->nmarked < rs->n;
  tail[KF_SIG_WIRE_BYTES + KF_FLAG_STALLED] = (unsigned char)rs->stalled;
  koloResult_t res = kf_neg_minmax(&f->neg, rs->vec, rs->veclen, rs->vmin, rs->vmax, &rs->eb);
  rs->exchanged_us = now_us();
  rs->delta.rounds++;
  if (res != koloSuccess) return res;
  const unsigned char *mn = rs->vmin + rs->n, *mx = rs->vmax + rs->n;
  if (memcmp(mn, mx, KF_SIG_WIRE_BYTES) != 0 || mx[KF_SIG_WIRE_BYTES + KF_FLAG_BAD_END] ||
      mx[KF_SIG_WIRE_BYTES + KF_FLAG_STALLED])
    return mismatch(f, rs, &sig);
  for (int t = 0; t < rs->n; t++)
    if (ready_all(rs, t) && rs->ready_round[t] < 0) rs->ready_round[t] = rs->round;
  rs->nlaunches = rs->ngroup = 0;
  plan_buckets(f, rs);
  plan_external(f, rs);
  if (f->tl) kf_timeline_round(f->tl, begin, now_us(), rs->step, rs->nlaunches);
  res = run_launches(f, rs);
  track_stall(f, rs);
  rs->round++;
  return res;
}

/* ---- the end of a step: the rebuild ------------------------------------------ */

/* After the first step: rank 0's order of marks, to every rank; a new
 * layout from it when it places any tensor elsewhere; contents moved. */
static koloResult_t rebuild(koloFusion_t f, kf_rounds *rs, int *order) {
  koloResult_t res = kf_neg_bcast_order(&f->neg, order, rs->n, &rs->eb); /* refuses a non-permutation */
  if (res != koloSuccess) return res;
  kf_layout nl;
  res = kf_layout_build(f->decl, rs->n, order, f->bucket_cap, f->first_bucket_bytes, &nl);
  if (res != koloSuccess) return kolo_error(&rs->eb, res, "fusion on rank %d: out of memory rebuilding buckets", f->rank);
  if (kf_layout_equal(&nl, &f->layout)) {
    kf_layout_free(&nl);
    return koloSuccess;
  }
  void *arena = NULL;
  res = kf_dev_alloc(f, nl.arena_bytes, &arena, &rs->eb);
  int k = 0;
  for (int t = 0; t < rs->n && res == koloSuccess; t++)
    if (nl.bucket_of[t] >= 0)
      rs->copies[k++] = (kf_copy){(char *)f->arena + f->layout.offset[t], (char *)arena + nl.offset[t],
                                  kf_decl_bytes(&f->decl[t])};
  if (res == koloSuccess) res = kf_dev_copy(f, rs->copies, k, koloUint8, 1.0, &rs->eb);
  if (res != koloSuccess) {
    kf_dev_free(f, arena);
    kf_layout_free(&nl);
    return res;
  }
  void *old = f->arena;
  pthread_mutex_lock(&f->lock);
  kf_layout_free(&f->layout);
  f->layout = nl;
  f->arena = arena;
  f->version++;
  f->stats.rebuilds++;
  pthread_mutex_unlock(&f->lock);
  res = kf_dev_sync_stream(f, &rs->eb); /* the moves read the old arena */
  kf_dev_free(f, old);
  KOLO_INFO("fusion rank %d: buckets rebuilt in rank 0's ready order (%d buckets, layout version %d)", f->rank,
            f->layout.nbuckets, f->version);
  return res;
}

/* ---- the thread ------------------------------------------------------------ */

static void publish(koloFusion_t f, kf_rounds *rs) {
  koloFusionStats_t *s = &f->stats, *d = &rs->delta;
  s->allReduces += d->allReduces;
  s->packedBytes += d->packedBytes;
  s->unpackedBytes += d->unpackedBytes;
  s->packCalls += d->packCalls;
  s->unpackCalls += d->unpackCalls;
  s->rounds += d->rounds;
  memset(d, 0, sizeof *d);
}

static void fail_step(koloFusion_t f, kf_rounds *rs, koloResult_t res) {
  if (f->failed == koloSuccess) {
    f->failed = res;
    kolo_error_copy(&f->thread_err, &rs->eb);
    kf_timeline_error(f->tl, rs->eb.msg);
  }
  f->issued = 1;
  pthread_cond_broadcast(&f->cond);
}

/* Under the lock: a new step resets the thread's view of it. */
static void start_step(koloFusion_t f, kf_rounds *rs) {
  rs->step = f->step;
  memset(rs->launched, 0, (size_t)rs->n);
  for (int t = 0; t < rs->n; t++) rs->ready_round[t] = -1;
  rs->nlaunched = 0;
  rs->stall_since_us = -1;
  rs->stalled = 0;
}

/* Under the lock: what this rank's user marked so far. */
static void snapshot(koloFusion_t f, kf_rounds *rs) {
  memcpy(rs->vec, f->marked, (size_t)rs->n);
  memcpy(rs->ext, f->ext_buf, (size_t)rs->n * sizeof *rs->ext);
  rs->ended = f->ended;
  rs->nmarked = f->nmarked;
  rs->first_unmarked = -1;
  for (int t = 0; t < rs->n && rs->first_unmarked < 0; t++)
    if (!f->marked[t]) rs->first_unmarked = t;
  f->marks_since_round = 0;
  f->completed_since_round = 0;
}

/* Under the lock: whether a round is due now; else *wait_until. */
static int round_due(koloFusion_t f, int64_t next_round, int64_t *wait_until) {
  if (f->nmarked == 0 && !f->ended) {
    *wait_until = -1;
    return 0;
  }
  if (f->marks_since_round > 0 && (f->nmarked == f->ntensors || f->ended || f->completed_since_round > 0))
    return 1;
  if (now_us() >= next_round) return 1;
  *wait_until = next_round;
  return 0;
}

static void timed_wait(koloFusion_t f, int64_t until_us) {
  if (until_us < 0) {
    pthread_cond_wait(&f->cond, &f->lock);
    return;
  }
  /* the condition variable waits on CLOCK_MONOTONIC (fusion.c) */
  struct timespec ts = {(time_t)(until_us / 1000000), (long)(until_us % 1000000) * 1000};
  int e = pthread_cond_timedwait(&f->cond, &f->lock, &ts);
  if (e != 0 && e != ETIMEDOUT) KOLO_WARN("fusion rank %d: pthread_cond_timedwait: %s", f->rank, strerror(e));
}

/* The step's last round was run: the rebuild after the first step, then
 * the step is issued. */
static void finish_step(koloFusion_t f, kf_rounds *rs) {
  koloResult_t res = koloSuccess;
  if (rs->step == 1 && f->rebuild && rs->n > 0) {
    int *order = malloc((size_t)rs->n * sizeof *order);
    if (order == NULL) {
      res = kolo_error(&rs->eb, koloSystemError, "fusion on rank %d: out of memory at a rebuild", f->rank);
    } else {
      pthread_mutex_lock(&f->lock);
      memcpy(order, f->mark_order, (size_t)rs->n * sizeof *order);
      pthread_mutex_unlock(&f->lock);
      res = rebuild(f, rs, order);
      free(order);
    }
  }
  kf_timeline_flush(f->tl);
  pthread_mutex_lock(&f->lock);
  if (res != koloSuccess) fail_step(f, rs, res);
  else f->stats.steps++;
  f->issued = 1;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
}

static void *thread_main(void *arg) {
  koloFusion_t f = arg;
  kf_rounds rs;
  koloResult_t res = rounds_init(f, &rs);
  if (res == koloSuccess) res = kf_dev_thread_init(f, &rs.eb);
  pthread_mutex_lock(&f->lock);
  if (res != koloSuccess) fail_step(f, &rs, res);
  int64_t next_round = 0;
  while (!f->stop) {
    int busy = f->in_step && !f->issued && f->failed == koloSuccess;
    int64_t until = -1;
    if (!busy || !round_due(f, next_round, &until)) {
      timed_wait(f, busy ? until : -1);
      continue;
    }
    int fresh = rs.step != f->step;
    if (fresh) start_step(f, &rs);
    snapshot(f, &rs);
    pthread_mutex_unlock(&f->lock);
    rs.exchanged_us = now_us(); /* if the round fails before its exchange */
    res = fresh ? kf_dev_step_begin(f, &rs.eb) : koloSuccess;
    if (res == koloSuccess) res = run_round(f, &rs);
    /* The cycle counts from the end of the round's exchange, which every
     * rank leaves at about the same time: counted from each rank's own
     * start, a rank that waited in the exchange for a later peer would come
     * to the next round that much early and wait again, round after round.
     * A bucket complete here but not on some peer: that peer's round comes
     * at once when it completes it (round_due), and pairs with ours, so
     * ours comes soon; not at once, in case two ranks each wait for the
     * other's bucket. */
    next_round = rs.exchanged_us + (rs.peer_pending ? f->cycle_us / 8 : f->cycle_us);
    pthread_mutex_lock(&f->lock);
    publish(f, &rs);
    if (res != koloSuccess) {
      fail_step(f, &rs, res);
    } else if (rs.nlaunched == rs.n) {
      pthread_mutex_unlock(&f->lock);
      finish_step(f, &rs);
      pthread_mutex_lock(&f->lock);
    }
  }
  pthread_mutex_unlock(&f->lock);
  rounds_free(&rs);
  return NULL;
}

koloResult_t kf_thread_start(koloFusion_t f) {
  int e = pthread_create(&f->thread, NULL, thread_main, f);
  if (e != 0) return kolo_syserror(&f->err, e, "koloFusionCommit: cannot start the fusion thread of rank %d", f->rank);
  f->thread_started = 1;
  return koloSuccess;
}

void kf_thread_stop(koloFusion_t f) {
  if (!f->thread_started) return;
  pthread_mutex_lock(&f->lock);
  f->stop = 1;
  pthread_cond_broadcast(&f->cond);
  pthread_mutex_unlock(&f->lock);
  int e = pthread_join(f->thread, NULL);
  if (e != 0) KOLO_WARN("fusion rank %d: pthread_join: %s", f->rank, strerror(e));
  f->thread_started = 0;
}
