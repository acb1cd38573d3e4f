/* fuzz_fusion_decl.c - what a fusion decodes of other ranks' bytes
 * (fusion/negotiate.c, fusion/layout.c), from any input; its first byte
 * picks which:
 *   0: rank 0's ready order, broadcast at the bucket rebuild, over
 *      declarations as koloFusionAddTensor admits them: a non-permutation
 *      must be refused, and a layout built from it must place every
 *      ALLOCATE tensor aligned, inside its bucket and the arena, apart from
 *      the others;
 *   1: the summaries and first differences gathered at Commit, and rank
 *      0's declarations (kf_decl_sentence);
 *   2: the step views gathered after a mismatched round
 *      (kf_mismatch_sentence).
 * Sentences must be terminated within their buffer. */
#include <stdint.h>
#include <string.h>

#include "fusion/layout.h"
#include "fusion/negotiate.h"
#include "kolo_fusion.h"
#include "tests/fuzz/fuzz_util.h"

#define MAX_TENSORS 64
#define MAX_RANKS 16

/* Reads n bytes of the input (zeros past its end). */
typedef struct {
  const uint8_t *p;
  size_t left;
} input;

static void take(input *in, void *out, size_t n) {
  size_t k = n < in->left ? n : in->left;
  memcpy(out, in->p, k);
  memset((char *)out + k, 0, n - k);
  in->p += k;
  in->left -= k;
}

static unsigned take_byte(input *in) {
  uint8_t b = 0;
  take(in, &b, 1);
  return b;
}

/* A declaration as AddTensor admits it: a dtype, a storage, 1..2^40 bytes. */
static kf_decl take_decl(input *in) {
  kf_decl d;
  uint32_t count = 0;
  take(in, &count, sizeof count);
  d.dtype = (int)(take_byte(in) % koloNumTypes);
  d.storage = (int)(take_byte(in) & 1);
  d.count = 1 + (size_t)count;
  return d;
}

static void check_layout(const kf_decl *decl, int n, const kf_layout *l) {
  for (int t = 0; t < n; t++) {
    int b = l->bucket_of[t];
    FUZZ_REQUIRE(b >= -1 && b < l->nbuckets);
    FUZZ_REQUIRE((b < 0) == (decl[t].storage == KOLO_FUSION_EXTERNAL));
    if (b < 0) continue;
    const kf_bucket *bk = &l->buckets[b];
    size_t end = l->offset[t] + kf_decl_bytes(&decl[t]);
    FUZZ_REQUIRE(bk->dtype == decl[t].dtype && l->offset[t] % KF_VIEW_ALIGN == 0);
    FUZZ_REQUIRE(l->offset[t] >= bk->offset && end <= bk->offset + bk->bytes && end <= l->arena_bytes);
    for (int u = t + 1; u < n; u++) /* disjoint from every later tensor */
      if (l->bucket_of[u] >= 0)
        FUZZ_REQUIRE(l->offset[u] >= end || l->offset[u] + kf_decl_bytes(&decl[u]) <= l->offset[t]);
  }
}

static void fuzz_order(input *in) {
  int n = (int)(take_byte(in) % (MAX_TENSORS + 1));
  kf_decl decl[MAX_TENSORS];
  int order[MAX_TENSORS];
  for (int t = 0; t < n; t++) decl[t] = take_decl(in);
  for (int t = 0; t < n; t++) order[t] = (int)(int8_t)take_byte(in);
  uint32_t cap = 0, first = 0;
  take(in, &cap, sizeof cap);
  take(in, &first, sizeof first);
  size_t bucket_cap = kf_layout_cap(decl, n, (size_t)cap + 1, (size_t)first + 1, (int)take_byte(in) % 12);
  kf_layout l;
  koloResult_t res = kf_layout_build(decl, n, order, bucket_cap, (size_t)first + 1, &l);
  FUZZ_REQUIRE((res == koloSuccess) == (kf_order_valid(order, n) != 0));
  if (res != koloSuccess) return;
  check_layout(decl, n, &l);
  kf_layout_free(&l);
}

static void fuzz_decl_sentence(input *in) {
  int nranks = 1 + (int)(take_byte(in) % MAX_RANKS);
  kf_decl_summary all[MAX_RANKS];
  kf_decl_diff diffs[MAX_RANKS];
  take(in, all, (size_t)nranks * sizeof all[0]);
  take(in, diffs, (size_t)nranks * sizeof diffs[0]);
  /* rank 0's list as the broadcast delivers it: all[0].ntensors of them */
  int n0 = all[0].ntensors;
  size_t bytes = (size_t)(n0 > 0 && n0 <= MAX_TENSORS ? n0 : 1) * sizeof(kf_decl);
  if (n0 > MAX_TENSORS) return; /* a list this long would be broadcast whole */
  kf_decl *zero = malloc(bytes);
  FUZZ_REQUIRE(zero != NULL);
  take(in, zero, bytes);
  char s[KOLO_ERR_LEN];
  (void)kf_decl_sentence(all, diffs, nranks, zero, s, sizeof s);
  FUZZ_REQUIRE(memchr(s, '\0', sizeof s) != NULL);
  free(zero);
}

static void fuzz_view_sentence(input *in) {
  int nranks = 1 + (int)(take_byte(in) % MAX_RANKS);
  kf_view all[MAX_RANKS];
  take(in, all, (size_t)nranks * sizeof all[0]);
  kf_decl decl[4];
  for (int t = 0; t < 4; t++) decl[t] = take_decl(in);
  int probe = (int)(take_byte(in) % 5) - 1; /* the probe is this rank's own: -1 or a tensor */
  char s[KOLO_ERR_LEN - 64];
  kf_mismatch_sentence(all, nranks, probe, decl, 1000, s, sizeof s);
  FUZZ_REQUIRE(memchr(s, '\0', sizeof s) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  switch (take_byte(&in) % 3) {
  case 0: fuzz_order(&in); break;
  case 1: fuzz_decl_sentence(&in); break;
  default: fuzz_view_sentence(&in); break;
  }
  return 0;
}
