/* negotiate_codec.c - the fusion's records as bytes (negotiate_wire.h): one
 * encoder and one decoder each, on wire_codec.h's cursors.  Decoders take
 * a buffer (the fuzz targets call them on raw input), read every field,
 * then check the length and each field's range, and name the sending rank
 * in their sentence.  No system calls.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fusion/negotiate_wire.h"
#include "kolo_fusion.h"

/* ---- pieces ------------------------------------------------------------------ */

static int whole(const kolo_wire_in *r, size_t want, int peer, const char *what, char *why, size_t why_len) {
  return kolo_wire_whole(r, want, peer, what, why, why_len) == 0 ? KF_WIRE_OK : KF_WIRE_GARBLED;
}

/* wrong: NULL (the record is fine) or what is wrong with it. */
static int verdict(const char *wrong, int peer, const char *what, char *why, size_t why_len) {
  if (wrong == NULL) return KF_WIRE_OK;
  snprintf(why, why_len, "rank %d sent a %s %s", peer, what, wrong);
  return KF_WIRE_GARBLED;
}

static int in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

static int is_flag(int32_t v) { return v == 0 || v == 1; }

static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double bits_double(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---- the signature ------------------------------------------------------------- */

static void put_sig(kolo_wire_out *w, const kf_sig *s) {
  kolo_put_u64(w, s->step);
  kolo_put_u64(w, s->decl_hash);
  kolo_put_u32(w, s->version);
  kolo_put_u32(w, s->ntensors);
}

static void get_sig(kolo_wire_in *r, kf_sig *s) {
  s->step = kolo_get_u64(r);
  s->decl_hash = kolo_get_u64(r);
  s->version = kolo_get_u32(r);
  s->ntensors = kolo_get_u32(r);
}

void kf_encode_sig(const kf_sig *s, uint8_t out[KF_SIG_WIRE_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KF_SIG_WIRE_BYTES);
  put_sig(&w, s);
}

/* ---- views ----------------------------------------------------------------------- */

void kf_encode_view(const kf_view *v, uint8_t out[KF_VIEW_WIRE_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KF_VIEW_WIRE_BYTES);
  put_sig(&w, &v->sig);
  kolo_put_i32(&w, v->rank);
  kolo_put_i32(&w, v->ended);
  kolo_put_i32(&w, v->nmarked);
  kolo_put_i32(&w, v->first_unmarked);
  kolo_put_i32(&w, v->stalled);
  kolo_put_i32(&w, v->probe);
}

static const char *view_wrong(const kf_view *v, int peer, char *buf, size_t n) {
  int64_t nt = v->sig.ntensors;
  if (nt > KF_WIRE_MAX_TENSORS)
    snprintf(buf, n, "of a step with %lld tensors (0..2^24)", (long long)nt);
  else if (v->rank != peer)
    snprintf(buf, n, "for rank %d", v->rank);
  else if (!is_flag(v->ended) || !is_flag(v->stalled) || !in_range(v->probe, -1, 1))
    snprintf(buf, n, "with flags ended %d, stalled %d, probe %d (0 or 1; probe -1 too)", v->ended, v->stalled,
             v->probe);
  else if (!in_range(v->nmarked, 0, nt) || !in_range(v->first_unmarked, -1, nt - 1))
    snprintf(buf, n, "marking %d of %lld tensors, the first unmarked %d", v->nmarked, (long long)nt,
             v->first_unmarked);
  else
    return NULL;
  return buf;
}

int kf_decode_view(const void *in, size_t len, int peer, kf_view *v, char *why, size_t why_len) {
  static const char what[] = "fusion step view";
  kolo_wire_in r = kolo_wire_reader(in, len);
  get_sig(&r, &v->sig);
  v->rank = kolo_get_i32(&r);
  v->ended = kolo_get_i32(&r);
  v->nmarked = kolo_get_i32(&r);
  v->first_unmarked = kolo_get_i32(&r);
  v->stalled = kolo_get_i32(&r);
  v->probe = kolo_get_i32(&r);
  if (whole(&r, KF_VIEW_WIRE_BYTES, peer, what, why, why_len) != KF_WIRE_OK) return KF_WIRE_GARBLED;
  char buf[128];
  return verdict(view_wrong(v, peer, buf, sizeof buf), peer, what, why, why_len);
}

/* ---- declarations ---------------------------------------------------------------- */

static void put_decl(kolo_wire_out *w, const kf_decl *d) {
  kolo_put_u64(w, d->count);
  kolo_put_i32(w, d->dtype);
  kolo_put_i32(w, d->storage);
}

static void get_decl(kolo_wire_in *r, kf_decl *d) {
  d->count = (size_t)kolo_get_u64(r);
  d->dtype = kolo_get_i32(r);
  d->storage = kolo_get_i32(r);
}

/* What koloFusionAddTensor would have refused in d, or NULL. */
static const char *decl_wrong(const kf_decl *d, char *buf, size_t n) {
  if (!in_range(d->dtype, 0, koloNumTypes - 1))
    snprintf(buf, n, "of datatype %d (0..%d)", d->dtype, koloNumTypes - 1);
  else if (d->storage != KOLO_FUSION_ALLOCATE && d->storage != KOLO_FUSION_EXTERNAL)
    snprintf(buf, n, "of storage %d (0 ALLOCATE, 1 EXTERNAL)", d->storage);
  else if (d->count == 0 || d->count > ((size_t)1 << 40) / koloTypeSize((koloDataType_t)d->dtype))
    snprintf(buf, n, "of %llu elements (1..2^40 bytes)", (unsigned long long)d->count);
  else
    return NULL;
  return buf;
}

void kf_encode_decls(const kf_decl *d, int n, uint8_t *out) {
  kolo_wire_out w = kolo_wire_writer(out, (size_t)(n > 0 ? n : 0) * KF_DECL_WIRE_BYTES);
  for (int i = 0; i < n; i++) put_decl(&w, &d[i]);
}

int kf_decode_decls(const void *in, size_t len, int peer, int n, kf_decl *d, char *why, size_t why_len) {
  static const char what[] = "list of fusion declarations";
  kolo_wire_in r = kolo_wire_reader(in, len);
  size_t want = (size_t)(n > 0 ? n : 0) * KF_DECL_WIRE_BYTES;
  if (len != want) return whole(&r, want, peer, what, why, why_len);
  char buf[96], wrong[128];
  for (int i = 0; i < n; i++) {
    get_decl(&r, &d[i]);
    if (decl_wrong(&d[i], buf, sizeof buf) == NULL) continue;
    snprintf(wrong, sizeof wrong, "whose tensor %d is %s", i, buf);
    return verdict(wrong, peer, what, why, why_len);
  }
  return KF_WIRE_OK;
}

/* ---- the ready order ---------------------------------------------------------------- */

void kf_encode_order(const int *order, int n, uint8_t *out) {
  kolo_wire_out w = kolo_wire_writer(out, (size_t)(n > 0 ? n : 0) * 4);
  for (int i = 0; i < n; i++) kolo_put_i32(&w, order[i]);
}

int kf_decode_order(const void *in, size_t len, int peer, int n, int *order, char *why, size_t why_len) {
  static const char what[] = "ready order for the bucket rebuild";
  kolo_wire_in r = kolo_wire_reader(in, len);
  size_t want = (size_t)(n > 0 ? n : 0) * 4;
  if (len != want) return whole(&r, want, peer, what, why, why_len);
  for (int i = 0; i < n; i++) order[i] = kolo_get_i32(&r);
  char buf[64];
  snprintf(buf, sizeof buf, "that is not a permutation of 0..%d", n - 1);
  return verdict(kf_order_valid(order, n) ? NULL : buf, peer, what, why, why_len);
}

/* ---- Commit's summary ---------------------------------------------------------------- */

void kf_encode_summary(const kf_decl_summary *s, uint8_t out[KF_SUMMARY_WIRE_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KF_SUMMARY_WIRE_BYTES);
  kolo_put_u64(&w, s->shape.bucket_bytes);
  kolo_put_u64(&w, s->shape.first_bucket_bytes);
  kolo_put_u64(&w, s->shape.fusion_bytes);
  kolo_put_u64(&w, double_bits(s->shape.prescale));
  kolo_put_i32(&w, s->shape.op);
  kolo_put_i32(&w, s->shape.rebuild);
  kolo_put_i32(&w, s->shape.min_buckets);
  kolo_put_u64(&w, s->hash);
  kolo_put_i32(&w, s->ntensors);
}

static int is_size(uint64_t v) { return v >= 1 && v <= ((uint64_t)1 << 40); }

/* What koloFusionCreate would have refused in s, or NULL. */
static const char *summary_wrong(const kf_decl_summary *s, char *buf, size_t n) {
  const kf_shape *h = &s->shape;
  if (!is_size(h->bucket_bytes) || !is_size(h->first_bucket_bytes) || !is_size(h->fusion_bytes))
    snprintf(buf, n, "with bucketBytes %llu, firstBucketBytes %llu, fusionBytes %llu (1..2^40 each)",
             (unsigned long long)h->bucket_bytes, (unsigned long long)h->first_bucket_bytes,
             (unsigned long long)h->fusion_bytes);
  else if (!isfinite(h->prescale))
    snprintf(buf, n, "with a preScale that is not finite");
  else if ((h->op != koloSum && h->op != koloAvg) || !is_flag(h->rebuild))
    snprintf(buf, n, "with op %d, rebuildBuckets %d (sum or avg; 0 or 1)", h->op, h->rebuild);
  else if (!in_range(h->min_buckets, 1, 1 << 20))
    snprintf(buf, n, "with minBuckets %d (1..2^20)", h->min_buckets);
  else if (!in_range(s->ntensors, 0, KF_WIRE_MAX_TENSORS))
    snprintf(buf, n, "declaring %d tensors (0..2^24)", s->ntensors);
  else
    return NULL;
  return buf;
}

int kf_decode_summary(const void *in, size_t len, int peer, kf_decl_summary *s, char *why, size_t why_len) {
  static const char what[] = "fusion summary";
  kolo_wire_in r = kolo_wire_reader(in, len);
  memset(s, 0, sizeof *s); /* the pads: shapes are compared with memcmp */
  s->shape.bucket_bytes = kolo_get_u64(&r);
  s->shape.first_bucket_bytes = kolo_get_u64(&r);
  s->shape.fusion_bytes = kolo_get_u64(&r);
  s->shape.prescale = bits_double(kolo_get_u64(&r));
  s->shape.op = kolo_get_i32(&r);
  s->shape.rebuild = kolo_get_i32(&r);
  s->shape.min_buckets = kolo_get_i32(&r);
  s->hash = kolo_get_u64(&r);
  s->ntensors = kolo_get_i32(&r);
  if (whole(&r, KF_SUMMARY_WIRE_BYTES, peer, what, why, why_len) != KF_WIRE_OK) return KF_WIRE_GARBLED;
  char buf[160];
  return verdict(summary_wrong(s, buf, sizeof buf), peer, what, why, why_len);
}

/* ---- Commit's first differences --------------------------------------------------------- */

void kf_encode_diff(const kf_decl_diff *d, uint8_t out[KF_DIFF_WIRE_BYTES]) {
  kolo_wire_out w = kolo_wire_writer(out, KF_DIFF_WIRE_BYTES);
  kolo_put_i32(&w, d->first_diff);
  kolo_put_i32(&w, d->has);
  if (d->has) put_decl(&w, &d->decl);
  kolo_put_zeros(&w);
}

static const char *diff_wrong(const kf_decl_diff *d, int zeros, char *buf, size_t n) {
  char what[96];
  if (!in_range(d->first_diff, -1, KF_WIRE_MAX_TENSORS) || !is_flag(d->has) || (d->has && d->first_diff < 0))
    snprintf(buf, n, "at tensor %d with has %d (-1..2^24; 0 or 1, 1 only from tensor 0 on)", d->first_diff, d->has);
  else if (d->has && decl_wrong(&d->decl, what, sizeof what) != NULL)
    snprintf(buf, n, "whose tensor %d is %s", d->first_diff, what);
  else if (!d->has && !zeros)
    snprintf(buf, n, "with garbage in its unused declaration");
  else
    return NULL;
  return buf;
}

int kf_decode_diff(const void *in, size_t len, int peer, kf_decl_diff *d, char *why, size_t why_len) {
  static const char what[] = "fusion declaration difference";
  kolo_wire_in r = kolo_wire_reader(in, len);
  memset(d, 0, sizeof *d);
  d->first_diff = kolo_get_i32(&r);
  d->has = kolo_get_i32(&r);
  kolo_wire_in rest = r; /* the declaration, read twice: as one, and as padding */
  get_decl(&r, &d->decl);
  int zeros = kolo_wire_rest_is_zero(&rest) == 0;
  if (whole(&r, KF_DIFF_WIRE_BYTES, peer, what, why, why_len) != KF_WIRE_OK) return KF_WIRE_GARBLED;
  char buf[192];
  const char *wrong = diff_wrong(d, zeros, buf, sizeof buf);
  if (!d->has) memset(&d->decl, 0, sizeof d->decl);
  return verdict(wrong, peer, what, why, why_len);
}
