/* layout.c - buckets carved from one arena (see layout.h). */
#include "fusion/layout.h"

#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

size_t kf_decl_bytes(const kf_decl *d) { return d->count * koloTypeSize((koloDataType_t)d->dtype); }

int kf_order_valid(const int *order, int n) {
  unsigned char *seen = calloc((size_t)(n > 0 ? n : 1), 1);
  int ok = seen != NULL;
  for (int i = 0; i < n && ok; i++) {
    ok = order[i] >= 0 && order[i] < n && !seen[order[i]];
    if (ok) seen[order[i]] = 1;
  }
  free(seen);
  return ok;
}

/* FNV-1a over each word's bytes, least significant first: ranks on hosts
 * of another byte order compute the same hash (and it is the one of the
 * host-order bytes on little-endian hosts, as before). */
uint64_t kf_decl_hash(const kf_decl *decl, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    uint64_t w[3] = {decl[i].count, (uint64_t)decl[i].dtype, (uint64_t)decl[i].storage};
    for (size_t k = 0; k < 3 * 8; k++) h = (h ^ ((w[k / 8] >> (8 * (k % 8))) & 0xff)) * 1099511628211ull;
  }
  return h;
}

size_t kf_layout_cap(const kf_decl *decl, int n, size_t cap, size_t first_cap, int min_buckets) {
  if (min_buckets <= 1) return cap;
  size_t total = 0;
  for (int i = 0; i < n; i++)
    if (decl[i].storage != 1 /* EXTERNAL */) total += align_up(kf_decl_bytes(&decl[i]), KF_VIEW_ALIGN);
  size_t share = (total + (size_t)min_buckets - 1) / (size_t)min_buckets;
  if (share < first_cap) share = first_cap;
  return share < cap ? share : cap;
}

void kf_layout_free(kf_layout *l) {
  free(l->buckets);
  free(l->members);
  free(l->bucket_of);
  free(l->offset);
  memset(l, 0, sizeof *l);
}

static koloResult_t layout_alloc(kf_layout *l, int n) {
  size_t m = (size_t)(n > 0 ? n : 1);
  memset(l, 0, sizeof *l);
  l->ntensors = n;
  l->buckets = calloc(m, sizeof *l->buckets);
  l->members = calloc(m, sizeof *l->members);
  l->bucket_of = calloc(m, sizeof *l->bucket_of);
  l->offset = calloc(m, sizeof *l->offset);
  if (l->buckets && l->members && l->bucket_of && l->offset) return koloSuccess;
  kf_layout_free(l);
  return koloSystemError;
}

/* Pass 1: bucket of every ALLOCATE tensor, and each bucket's byte size
 * with its members' offsets inside it (offset[] relative for now). */
static void assign_buckets(const kf_decl *decl, const int *order, size_t cap, size_t first_cap,
                           kf_layout *l) {
  int open[koloNumTypes];
  for (int t = 0; t < koloNumTypes; t++) open[t] = -1;
  for (int i = 0; i < l->ntensors; i++) {
    int id = order ? order[i] : i;
    const kf_decl *d = &decl[id];
    l->bucket_of[id] = -1;
    if (d->storage != 1 /* EXTERNAL */) {
      size_t bytes = kf_decl_bytes(d);
      int b = open[d->dtype];
      if (b >= 0) {
        size_t bcap = b == 0 ? first_cap : cap;
        size_t end = align_up(l->buckets[b].bytes, KF_VIEW_ALIGN) + bytes;
        if (end > bcap) b = -1;
      }
      if (b < 0) {
        b = l->nbuckets++;
        l->buckets[b].dtype = d->dtype;
        open[d->dtype] = b;
      }
      kf_bucket *bk = &l->buckets[b];
      l->offset[id] = bk->n == 0 ? 0 : align_up(bk->bytes, KF_VIEW_ALIGN);
      bk->bytes = l->offset[id] + bytes;
      bk->n++;
      l->bucket_of[id] = b;
      /* a bucket filled to its cap (or past it, alone) takes no more */
      if (bk->bytes >= (b == 0 ? first_cap : cap)) open[d->dtype] = -1;
    }
  }
}

koloResult_t kf_layout_build(const kf_decl *decl, int n, const int *order, size_t cap,
                             size_t first_cap, kf_layout *out) {
  if (cap == 0 || first_cap == 0 || n < 0 || (order && !kf_order_valid(order, n)))
    return koloInvalidArgument;
  kf_layout l;
  if (layout_alloc(&l, n) != koloSuccess) return koloSystemError;
  assign_buckets(decl, order, cap, first_cap, &l);
  /* Pass 2: bucket offsets in the arena, members listed bucket by bucket. */
  size_t at = 0;
  int m = 0;
  for (int b = 0; b < l.nbuckets; b++) {
    l.buckets[b].offset = at;
    l.buckets[b].first = m;
    m += l.buckets[b].n;
    l.buckets[b].n = 0;
    at = align_up(at + l.buckets[b].bytes, KF_BUCKET_ALIGN);
  }
  l.arena_bytes = at;
  for (int i = 0; i < n; i++) {
    int id = order ? order[i] : i;
    int b = l.bucket_of[id];
    if (b < 0) continue;
    kf_bucket *bk = &l.buckets[b];
    l.members[bk->first + bk->n++] = id;
    l.offset[id] += bk->offset;
  }
  *out = l;
  return koloSuccess;
}

int kf_layout_equal(const kf_layout *a, const kf_layout *b) {
  if (a->ntensors != b->ntensors || a->nbuckets != b->nbuckets) return 0;
  for (int i = 0; i < a->ntensors; i++)
    if (a->bucket_of[i] != b->bucket_of[i] || (a->bucket_of[i] >= 0 && a->offset[i] != b->offset[i]))
      return 0;
  return 1;
}
