/* tuning.c - the tuning file's parser, writer and resolution (tuning.h). */
#include "ring/tuning.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ring/algo.h"
#include "ring/sched_file.h"
#include "ring/schedule.h"

#define MAX_LINE 256
#define MAX_WORDS 12

static const char *const link_names[KOLO_LINK_NUM] = {"shm", "socket", "ib", "cuda-p2p"};

/* The collectives `channels` lines name, by KOLO_COLL_* (NULL: send and
 * recv, whose channels follow their count alone). */
static const char *const coll_names[KOLO_COLL_NUM] = {
    [KOLO_COLL_ALL_REDUCE] = "allreduce", [KOLO_COLL_REDUCE_SCATTER] = "reducescatter",
    [KOLO_COLL_ALL_GATHER] = "allgather", [KOLO_COLL_BROADCAST] = "broadcast",
    [KOLO_COLL_REDUCE] = "reduce",        [KOLO_COLL_ALL_TO_ALL] = "alltoall",
    [KOLO_COLL_GATHER] = "gather",        [KOLO_COLL_SCATTER] = "scatter"};

const char *kolo_tuning_coll_name(int coll) {
  return coll >= 0 && coll < KOLO_COLL_NUM && coll_names[coll] ? coll_names[coll] : "?";
}

const char *kolo_link_name(int link) { return link >= 0 && link < KOLO_LINK_NUM ? link_names[link] : "?"; }

typedef struct {
  const char *name;
  int line;
  char *why;
  size_t why_len;
} ctx;

static int bad(const ctx *c, const char *what, const char *word) {
  snprintf(c->why, c->why_len, "%s:%d: %s%s%.40s%s", c->name, c->line, what, word ? " \"" : "", word ? word : "",
           word ? "\"" : "");
  return -1;
}

/* Splits a line (its comment cut) into at most MAX_WORDS words. */
static int split(char *line, char *w[MAX_WORDS]) {
  char *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
    if (n == MAX_WORDS) return MAX_WORDS + 1;
    w[n++] = tok;
  }
  return n;
}

/* A finite number in (0, max], the whole word. */
static int number(const ctx *c, const char *word, double max, const char *what, double *out) {
  char *end;
  double v = strtod(word, &end);
  if (*end != '\0' || !isfinite(v) || v <= 0 || v > max) return bad(c, what, word);
  *out = v;
  return 0;
}

static int bytes(const ctx *c, const char *word, uint64_t *out) {
  char *end;
  if (*word < '0' || *word > '9') return bad(c, "a size in bytes is a decimal number, not", word);
  unsigned long long v = strtoull(word, &end, 10);
  if (*end != '\0' || v >= (1ull << 62)) return bad(c, "a size in bytes is a decimal number below 2^62, not", word);
  *out = v;
  return 0;
}

/* The transport named w, or -1. */
static int link_of(const char *w) {
  for (int l = 0; l < KOLO_LINK_NUM; l++)
    if (strcmp(w, link_names[l]) == 0) return l;
  return -1;
}

static int link_line(const ctx *c, char *w[], int n, kolo_tuning *f) {
  if (n != 4) return bad(c, "a link line is: link TRANSPORT ALPHA_US BETA_GBS", NULL);
  const int l = link_of(w[1]);
  if (l < 0) return bad(c, "no transport (shm, socket, ib, cuda-p2p) named", w[1]);
  kolo_tune_link *k = &f->link[l];
  if (number(c, w[2], 1e6, "alpha (us) is a number in (0, 1e6], not", &k->alpha_us) ||
      number(c, w[3], 1e5, "beta (GB/s) is a number in (0, 1e5], not", &k->beta_gbs))
    return -1;
  k->set = 1;
  return 0;
}

/* "ranks N" at w[0..1]: N in 1..2^20 into *out. */
static int ranks_words(const ctx *c, char *w[], int *out) {
  char *end;
  long v = (*w[1] >= '1' && *w[1] <= '9') ? strtol(w[1], &end, 10) : -1;
  if (v < 1 || v > (1 << 20) || *end != '\0') return bad(c, "ranks is a whole number in 1..2^20, not", w[1]);
  *out = (int)v;
  return 0;
}

/* "mem host|cuda" at w[0..1] into *out. */
static int mem_words(const ctx *c, char *w[], int *out) {
  if (strcmp(w[1], "host") == 0) *out = KOLO_TUNE_MEM_HOST;
  else if (strcmp(w[1], "cuda") == 0) *out = KOLO_TUNE_MEM_CUDA;
  else return bad(c, "mem is host or cuda, not", w[1]);
  return 0;
}

typedef struct {
  uint64_t lo, hi;
  int nranks, mem, link; /* 0, 0, KOLO_TUNE_LINK_ANY: any */
} line_scope;

/* "link TRANSPORT" at w[0..1] into *out. */
static int link_words(const ctx *c, char *w[], int *out) {
  *out = link_of(w[1]);
  return *out < 0 ? bad(c, "link is shm, socket, ib or cuda-p2p, not", w[1]) : 0;
}

/* "MIN MAX [ranks N] [mem host|cuda] [link TRANSPORT]": the nwords words at w. */
static int scope_words(const ctx *c, char *w[], int nwords, line_scope *out) {
  *out = (line_scope){0, 0, 0, KOLO_TUNE_MEM_ANY, KOLO_TUNE_LINK_ANY};
  if (bytes(c, w[0], &out->lo) || bytes(c, w[1], &out->hi)) return -1;
  if (out->lo > out->hi) return bad(c, "the size range is empty: min is above max", NULL);
  int i = 2;
  if (i + 1 < nwords && strcmp(w[i], "ranks") == 0) {
    if (ranks_words(c, w + i, &out->nranks)) return -1;
    i += 2;
  }
  if (i + 1 < nwords && strcmp(w[i], "mem") == 0) {
    if (mem_words(c, w + i, &out->mem)) return -1;
    i += 2;
  }
  if (i + 1 < nwords && strcmp(w[i], "link") == 0) {
    if (link_words(c, w + i, &out->link)) return -1;
    i += 2;
  }
  if (i < nwords)
    return bad(c, "after MAX_BYTES a line takes \"ranks N\", then \"mem host|cuda\", then \"link TRANSPORT\", not", w[i]);
  return 0;
}

/* The collective named w, or -1. */
static int coll_of(const char *w) {
  for (int k = 0; k < KOLO_COLL_NUM; k++)
    if (coll_names[k] && strcmp(w, coll_names[k]) == 0) return k;
  return -1;
}

/* The algorithms an override of coll may name (ring/algo.h's sets), 0:
 * coll has no choice. */
static unsigned override_set(int coll) {
  return coll == KOLO_COLL_ALL_REDUCE  ? KOLO_ALGO_ALL_REDUCE_SET
         : coll == KOLO_COLL_BROADCAST ? KOLO_ALGO_BCAST_SET
         : coll == KOLO_COLL_ALL_GATHER ? KOLO_ALGO_AG_SET
         : coll == KOLO_COLL_REDUCE     ? KOLO_ALGO_REDUCE_SET
                                        : 0u;
}

static int override_line(const ctx *c, char *w[], int n, kolo_tuning *f) {
  if (n < 5)
    return bad(c, "an override line is: override COLLECTIVE ALGORITHM MIN_BYTES MAX_BYTES [ranks N] [mem host|cuda] "
               "[link TRANSPORT]",
               NULL);
  if (f->noverrides == KOLO_TUNING_MAX_OVERRIDES) return bad(c, "more than 128 overrides", NULL);
  kolo_tune_override *o = &f->ov[f->noverrides];
  o->coll = coll_of(w[1]);
  unsigned set = override_set(o->coll);
  if (set == 0)
    return bad(c, "only the all-reduce, the broadcast, the reduce and the all-gather have a choice of algorithm, not",
               w[1]);
  o->algo = kolo_algo_parse(w[2]);
  if (o->algo < 0 || !((set >> o->algo) & 1u)) {
    const char *what = o->coll == KOLO_COLL_ALL_REDUCE
                           ? "no all-reduce algorithm (ring, hier, rd, rabenseifner, direct, oneshot) named"
                       : o->coll == KOLO_COLL_BROADCAST ? "no broadcast algorithm (ring, tree, dbtree) named"
                       : o->coll == KOLO_COLL_REDUCE    ? "no reduce algorithm (ring, tree, dbtree) named"
                                                        : "no all-gather algorithm (ring, bruck) named";
    return bad(c, what, w[2]);
  }
  line_scope sc;
  if (scope_words(c, w + 3, n - 3, &sc)) return -1;
  o->lo = sc.lo, o->hi = sc.hi, o->nranks = sc.nranks, o->mem = sc.mem, o->link = sc.link;
  f->noverrides++;
  return 0;
}

static int channels_line(const ctx *c, char *w[], int n, kolo_tuning *f) {
  if (n < 5)
    return bad(c,
               "a channels line is: channels COLLECTIVE CHANNELS MIN_BYTES MAX_BYTES [ranks N] [mem host|cuda] "
               "[link TRANSPORT]",
               NULL);
  if (f->nchannel_lines == KOLO_TUNING_MAX_CHANNEL_LINES) return bad(c, "more than 128 channels lines", NULL);
  kolo_tune_channels *l = &f->ch[f->nchannel_lines];
  l->coll = coll_of(w[1]);
  if (l->coll < 0)
    return bad(c, "no collective (allreduce, reducescatter, allgather, broadcast, reduce, alltoall, gather, scatter) named",
               w[1]);
  char *end;
  long v = (*w[2] >= '1' && *w[2] <= '9') ? strtol(w[2], &end, 10) : -1;
  if (v < 1 || v > KOLO_TUNING_MAX_CHANNELS || *end != '\0') return bad(c, "channels is a whole number in 1..16, not", w[2]);
  l->channels = (int)v;
  line_scope sc;
  if (scope_words(c, w + 3, n - 3, &sc)) return -1;
  l->lo = sc.lo, l->hi = sc.hi, l->nranks = sc.nranks, l->mem = sc.mem, l->link = sc.link;
  f->nchannel_lines++;
  return 0;
}

/* "chunk TRANSPORT BYTES [ranks N]": TRANSPORT the network's. */
static int chunk_line(const ctx *c, char *w[], int n, kolo_tuning *f) {
  if (n != 3 && n != 5) return bad(c, "a chunk line is: chunk TRANSPORT BYTES [ranks N]", NULL);
  if (f->nchunk_lines == KOLO_TUNING_MAX_CHUNK_LINES) return bad(c, "more than 32 chunk lines", NULL);
  kolo_tune_chunk *k = &f->chunk[f->nchunk_lines];
  k->link = link_of(w[1]);
  k->nranks = 0;
  if (k->link != KOLO_LINK_SOCKET && k->link != KOLO_LINK_IB)
    return bad(c, "a chunk line names the network's transport (socket or ib), not", w[1]);
  if (bytes(c, w[2], &k->bytes)) return -1;
  if (k->bytes < 4096 || k->bytes > (1ull << 30) || k->bytes % 4096 != 0)
    return bad(c, "a chunk is a multiple of 4096 bytes in 4096..2^30, not", w[2]);
  if (n == 5 && strcmp(w[3], "ranks") != 0) return bad(c, "after BYTES a chunk line takes \"ranks N\", not", w[3]);
  if (n == 5 && ranks_words(c, w + 3, &k->nranks)) return -1;
  f->nchunk_lines++;
  return 0;
}

static int one_line(const ctx *c, char *line, kolo_tuning *f, int *seen_header) {
  char *w[MAX_WORDS];
  int n = split(line, w);
  if (n == 0) return 0;
  if (n > MAX_WORDS) return bad(c, "too many words", NULL);
  if (!*seen_header) {
    if (n != 2 || strcmp(w[0], "kolo-tuning") != 0) return bad(c, "the first line must be \"kolo-tuning 1\"", NULL);
    if (strcmp(w[1], "1") != 0) return bad(c, "this kolo reads tuning files of version 1, not", w[1]);
    return *seen_header = 1, 0;
  }
  if (strcmp(w[0], "link") == 0) return link_line(c, w, n, f);
  if (strcmp(w[0], "override") == 0) return override_line(c, w, n, f);
  if (strcmp(w[0], "channels") == 0) return channels_line(c, w, n, f);
  if (strcmp(w[0], "chunk") == 0) return chunk_line(c, w, n, f);
  return bad(c, "a line is \"link ...\", \"override ...\", \"channels ...\" or \"chunk ...\", not", w[0]);
}

int kolo_tuning_parse(const char *text, size_t len, const char *name, kolo_tuning *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  ctx c = {name ? name : "tuning file", 0, why, why_len};
  int header = 0;
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    c.line++;
    if (n >= MAX_LINE) return bad(&c, "a line is longer than 255 characters", NULL);
    char line[MAX_LINE];
    memcpy(line, text + at, n);
    line[n] = '\0';
    if (strlen(line) != n) return bad(&c, "a NUL byte in the line", NULL);
    if (one_line(&c, line, out, &header) < 0) return -1;
    at += n + 1;
  }
  if (!header) return c.line = 1, bad(&c, "empty: the first line must be \"kolo-tuning 1\"", NULL);
  out->hash = kolo_sched_hash(text, len);
  if (out->hash == 0) out->hash = 1; /* 0 says "no file" on the wire */
  return 0;
}

/* 1 when a line for memory kind `mem` and `link` holds on communicators
 * of memory `kind` whose links are host_link and net_link. */
static int for_comm(int mem, int link, int kind, int host_link, int net_link) {
  return (mem == KOLO_TUNE_MEM_ANY || mem == kind) &&
         (link == KOLO_TUNE_LINK_ANY || link == host_link || link == net_link);
}

void kolo_tuning_resolve(const kolo_tuning *f, int host_link, int net_link, kolo_tuned *out) {
  memset(out, 0, sizeof *out);
  out->host_link = host_link, out->net_link = net_link;
  const kolo_tune_link *h = &f->link[host_link], *n = &f->link[net_link];
  if (h->set) out->a_host = h->alpha_us * 1e-6, out->b_host = h->beta_gbs * 1e9;
  if (n->set) out->a_net = n->alpha_us * 1e-6, out->b_net = n->beta_gbs * 1e9;
  const int kind = host_link == KOLO_LINK_CUDA_P2P ? KOLO_TUNE_MEM_CUDA : KOLO_TUNE_MEM_HOST;
  for (int i = 0; i < f->noverrides; i++)
    if (for_comm(f->ov[i].mem, f->ov[i].link, kind, host_link, net_link)) out->ov[out->noverrides++] = f->ov[i];
  for (int i = 0; i < f->nchannel_lines; i++)
    if (for_comm(f->ch[i].mem, f->ch[i].link, kind, host_link, net_link)) out->ch[out->nchannel_lines++] = f->ch[i];
  for (int i = 0; i < f->nchunk_lines && kind == KOLO_TUNE_MEM_HOST; i++)
    if (f->chunk[i].link == net_link) out->chunk[out->nchunk_lines++] = f->chunk[i];
}

void kolo_tuned_narrow(kolo_tuned *t, int spans_hosts) {
  const int gone = spans_hosts ? t->host_link : t->net_link;
  int n = 0;
  for (int i = 0; i < t->noverrides; i++)
    if (t->ov[i].link != gone) t->ov[n++] = t->ov[i];
  t->noverrides = n, n = 0;
  for (int i = 0; i < t->nchannel_lines; i++)
    if (t->ch[i].link != gone) t->ch[n++] = t->ch[i];
  t->nchannel_lines = n;
}

/* 1 when a line for `line_ranks` ranks (0: any) holds on communicators of
 * nranks ranks. */
static int for_ranks(int line_ranks, int nranks) { return line_ranks == 0 || line_ranks == nranks; }

/* 1 when a line for lo..hi bytes on line_ranks ranks holds a call of
 * `bytes` on nranks ranks. */
static int holds(uint64_t lo, uint64_t hi, int line_ranks, size_t bytes, int nranks) {
  return bytes >= lo && bytes <= hi && for_ranks(line_ranks, nranks);
}

int kolo_tuned_names(const kolo_tuned *t, int coll, int algo, int nranks, int mem_only) {
  for (int i = 0; i < t->noverrides; i++) {
    const kolo_tune_override *o = &t->ov[i];
    if (o->coll == coll && o->algo == algo && for_ranks(o->nranks, nranks) && (!mem_only || o->mem != KOLO_TUNE_MEM_ANY))
      return 1;
  }
  return 0;
}

/* The first override of coll whose range (and rank count) holds the call
 * wins. */
int kolo_tuned_override(const kolo_tuned *t, int coll, size_t bytes, int nranks) {
  for (int i = 0; i < t->noverrides; i++)
    if (t->ov[i].coll == coll && holds(t->ov[i].lo, t->ov[i].hi, t->ov[i].nranks, bytes, nranks)) return t->ov[i].algo;
  return -1;
}

int kolo_tuned_channels(const kolo_tuned *t, int coll, size_t bytes, int nranks) {
  for (int i = 0; t != NULL && i < t->nchannel_lines; i++) {
    const kolo_tune_channels *l = &t->ch[i];
    if (l->coll == coll && holds(l->lo, l->hi, l->nranks, bytes, nranks)) return l->channels;
  }
  return 0;
}

size_t kolo_tuned_chunk(const kolo_tuned *t, int nranks) {
  for (int i = 0; t != NULL && i < t->nchunk_lines; i++)
    if (for_ranks(t->chunk[i].nranks, nranks)) return (size_t)t->chunk[i].bytes;
  return 0;
}

int kolo_tuned_max_channels(const kolo_tuned *t, int nranks) {
  int most = 0;
  for (int i = 0; i < t->nchannel_lines; i++)
    if (for_ranks(t->ch[i].nranks, nranks) && t->ch[i].channels > most) most = t->ch[i].channels;
  return most;
}

/* " ranks N", " mem host|cuda", " link TRANSPORT" where the line has
 * them, then "\n". */
static void write_scope(FILE *out, int nranks, int mem, int link) {
  if (nranks > 0) fprintf(out, " ranks %d", nranks);
  if (mem != KOLO_TUNE_MEM_ANY) fprintf(out, " mem %s", mem == KOLO_TUNE_MEM_CUDA ? "cuda" : "host");
  if (link != KOLO_TUNE_LINK_ANY) fprintf(out, " link %s", kolo_link_name(link));
  fputc('\n', out);
}

int kolo_tuning_write(FILE *out, const kolo_tuning *f, const char *comment) {
  fprintf(out, "kolo-tuning %d\n", KOLO_TUNING_VERSION);
  if (comment) fprintf(out, "# %s\n", comment);
  for (int l = 0; l < KOLO_LINK_NUM; l++)
    if (f->link[l].set) fprintf(out, "link %s %.6g %.6g\n", link_names[l], f->link[l].alpha_us, f->link[l].beta_gbs);
  for (int i = 0; i < f->noverrides; i++) {
    const kolo_tune_override *o = &f->ov[i];
    fprintf(out, "override %s %s %llu %llu", kolo_tuning_coll_name(o->coll), kolo_algo_name(o->algo),
            (unsigned long long)o->lo, (unsigned long long)o->hi);
    write_scope(out, o->nranks, o->mem, o->link);
  }
  for (int i = 0; i < f->nchannel_lines; i++) {
    const kolo_tune_channels *l = &f->ch[i];
    fprintf(out, "channels %s %d %llu %llu", kolo_tuning_coll_name(l->coll), l->channels, (unsigned long long)l->lo,
            (unsigned long long)l->hi);
    write_scope(out, l->nranks, l->mem, l->link);
  }
  for (int i = 0; i < f->nchunk_lines; i++) {
    const kolo_tune_chunk *k = &f->chunk[i];
    fprintf(out, "chunk %s %llu", kolo_link_name(k->link), (unsigned long long)k->bytes);
    write_scope(out, k->nranks, KOLO_TUNE_MEM_ANY, KOLO_TUNE_LINK_ANY);
  }
  return ferror(out) ? -1 : 0;
}
