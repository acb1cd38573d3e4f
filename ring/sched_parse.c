/* sched_parse.c - schedule files, line by line: the directives and their
 * sections (sched_file.h; the format is docs/schedule-format.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/check.h"
#include "ring/sched_impl.h"
#include "ring/schedule.h"

#define WORD(w) (int)((w)->n > 64 ? 64 : (w)->n), (w)->p

static int rooted(int coll) {
  return coll == KOLO_COLL_BROADCAST || coll == KOLO_COLL_REDUCE || coll == KOLO_COLL_GATHER ||
         coll == KOLO_COLL_SCATTER;
}

/* Every program of the section being read was given. */
static int end_section(sp_state *s) {
  int r = sp_end_program(s);
  if (r < 0 || s->sec == NULL) return r;
  int n = s->f->nranks;
  for (int i = 0; i < s->sec->nchannels * n; i++)
    if (s->sec->progs == NULL || s->seen[i] == 0)
      return sp_fail(s, "the %s section of line %d has no program for rank %d channel %d", kolo_coll_name(s->sec->coll),
                     s->sec->line, i % n, i / n);
  free(s->seen);
  s->seen = NULL;
  return 0;
}

static int parse_coll(sp_state *s, const sp_word *w) {
  for (int c = 0; c < KOLO_COLL_NUM; c++)
    if (sp_is(w, kolo_coll_name(c), 1)) {
      if (c == KOLO_COLL_SEND || c == KOLO_COLL_RECV)
        return sp_fail(s, "%s is point-to-point: a schedule file holds collectives", kolo_coll_name(c));
      return c;
    }
  return sp_fail(s, "\"%.*s\" is no collective: AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AlltoAll, "
                 "Gather or Scatter", WORD(w));
}

/* `collective NAME [root R]` */
static int new_section(sp_state *s, const sp_word *w, int n) {
  if (s->f->nranks == 0) return sp_fail(s, "a collective before `ranks N`: for how many ranks is it?");
  int r = end_section(s);
  if (r < 0) return r;
  int coll = n >= 2 ? parse_coll(s, &w[1]) : sp_fail(s, "`collective` without a name");
  int root = -1, want = coll >= 0 && rooted(coll) ? 4 : 2;
  if (coll < 0) return -1;
  if (n != want || (want == 4 && !sp_is(&w[2], "root", 0)))
    return sp_fail(s, want == 4 ? "%s takes a root: `collective %s root R`" : "`collective %s` takes nothing after it",
                   kolo_coll_name(coll), kolo_coll_name(coll));
  if (want == 4 && sp_number(s, &w[3], "the root", 0, s->f->nranks - 1, &root) < 0) return -1;
  for (int i = 0; i < s->f->nsections; i++)
    if (s->f->sections[i].coll == coll && s->f->sections[i].root == root)
      return sp_fail(s, "a second %s section%s (the first is at line %d)", kolo_coll_name(coll),
                     root >= 0 ? " for that root" : "", s->f->sections[i].line);
  if (s->f->nsections == KOLO_SCHED_MAX_SECTIONS) return sp_fail(s, "more than %d sections", KOLO_SCHED_MAX_SECTIONS);
  s->sec = &s->f->sections[s->f->nsections++];
  *s->sec = (kolo_sched_section){coll, root, KOLO_LAYOUT_FLAT, 1, s->line, NULL};
  return 0;
}

/* `layout ring|flat`, `channels C`: before the section's first program. */
static int section_setting(sp_state *s, const sp_word *w, int n) {
  if (s->sec == NULL || s->sec->progs != NULL)
    return sp_fail(s, "`%.*s` belongs in a collective section, before its first `rank`", WORD(&w[0]));
  if (n != 2) return sp_fail(s, "`%.*s` takes one value", WORD(&w[0]));
  if (sp_is(&w[0], "channels", 0))
    return sp_number(s, &w[1], "the channel count", 1, KOLO_CHECK_MAX_CHANNELS, &s->sec->nchannels);
  if (sp_is(&w[1], "ring", 0)) s->sec->layout = KOLO_LAYOUT_RING;
  else if (sp_is(&w[1], "flat", 0)) s->sec->layout = KOLO_LAYOUT_FLAT;
  else return sp_fail(s, "the layout \"%.*s\" is neither ring nor flat", WORD(&w[1]));
  return 0;
}

/* `rank R [channel C]`: the steps that follow are its program. */
static int new_program(sp_state *s, const sp_word *w, int n) {
  int rank, ch = 0, nr = s->f->nranks;
  if (s->sec == NULL) return sp_fail(s, "`rank` outside a collective section");
  if (sp_end_program(s) < 0) return -2;
  if (n != 2 && (n != 4 || !sp_is(&w[2], "channel", 0))) return sp_fail(s, "`rank R` or `rank R channel C`");
  if (sp_number(s, &w[1], "the rank", 0, nr - 1, &rank) < 0) return -1;
  if (n == 4 && sp_number(s, &w[3], "the channel", 0, s->sec->nchannels - 1, &ch) < 0) return -1;
  size_t all = (size_t)s->sec->nchannels * (size_t)nr;
  if (s->sec->progs == NULL) {
    s->sec->progs = calloc(all, sizeof *s->sec->progs);
    s->seen = calloc(all, sizeof *s->seen);
    if (s->sec->progs == NULL || s->seen == NULL) return -2;
  }
  if (s->seen[(size_t)ch * (size_t)nr + (size_t)rank]++)
    return sp_fail(s, "a second program for rank %d channel %d in this section", rank, ch);
  s->rank = rank;
  s->ch = ch;
  return 0;
}

static int header(sp_state *s, const sp_word *w, int n) {
  if (sp_is(&w[0], "kolo-schedule", 0)) {
    int v;
    if (s->have_version) return sp_fail(s, "a second `kolo-schedule` line");
    if (n != 2) return sp_fail(s, "`kolo-schedule V` takes one number, the format version");
    if (sp_number(s, &w[1], "the format version", 0, 1 << 20, &v) < 0) return -1;
    if (v != KOLO_SCHED_VERSION) return sp_fail(s, "format version %d: this kolo reads version %d", v, KOLO_SCHED_VERSION);
    s->have_version = 1;
    return 0;
  }
  if (s->f->nranks > 0) return sp_fail(s, "a second `ranks` line");
  if (n != 2) return sp_fail(s, "`ranks N` takes one number");
  return sp_number(s, &w[1], "the rank count", 1, KOLO_CHECK_MAX_RANKS, &s->f->nranks);
}

/* One line's words. */
static int directive(sp_state *s, const sp_word *w, int n) {
  int head = sp_is(&w[0], "kolo-schedule", 0) || sp_is(&w[0], "ranks", 0);
  if (!s->have_version && !sp_is(&w[0], "kolo-schedule", 0))
    return sp_fail(s, "a schedule file starts with `kolo-schedule %d`", KOLO_SCHED_VERSION);
  if (head) return header(s, w, n);
  if (sp_is(&w[0], "collective", 0)) return new_section(s, w, n);
  if (sp_is(&w[0], "layout", 0) || sp_is(&w[0], "channels", 0)) return section_setting(s, w, n);
  if (sp_is(&w[0], "rank", 0)) return new_program(s, w, n);
  return sp_step(s, w, n);
}

/* The next line of text at *at: its words (comment cut). */
static int next_line(sp_state *s, const char *text, size_t len, size_t *at, sp_word *w) {
  const char *p = text + *at, *nl = memchr(p, '\n', len - *at);
  size_t n = nl ? (size_t)(nl - p) : len - *at;
  *at += n + (nl != NULL);
  s->line++;
  if (n > KOLO_SCHED_MAX_LINE) return sp_fail(s, "a line of more than %d bytes", KOLO_SCHED_MAX_LINE);
  if (memchr(p, '\0', n)) return sp_fail(s, "a NUL byte: a schedule file is text");
  const char *hash = memchr(p, '#', n);
  return sp_words(s, p, hash ? (size_t)(hash - p) : n, w);
}

static int parse_all(sp_state *s, const char *text, size_t len) {
  sp_word w[SP_MAX_WORDS];
  for (size_t at = 0; at < len;) {
    int n = next_line(s, text, len, &at, w);
    if (n < 0) return n;
    int r = n > 0 ? directive(s, w, n) : 0;
    if (r < 0) return r;
  }
  if (s->line == 0) s->line = 1; /* an empty file: its first line */
  int r = end_section(s);
  if (r < 0) return r;
  if (!s->have_version) return sp_fail(s, "empty: a schedule file starts with `kolo-schedule %d`", KOLO_SCHED_VERSION);
  if (s->f->nsections == 0) return sp_fail(s, "no collective: a schedule file holds at least one `collective` section");
  return 0;
}

koloResult_t kolo_sched_parse(const char *text, size_t len, const char *name, kolo_sched_file *out, char *why,
                              size_t whylen) {
  memset(out, 0, sizeof *out);
  if (whylen) why[0] = '\0';
  sp_state s = {name ? name : "schedule", 0, why, whylen, out, 0, NULL, NULL, -1, 0, NULL, 0, 0, NULL, 0, 0};
  int r = len > KOLO_SCHED_MAX_BYTES ? sp_fail(&s, "%zu bytes: a schedule file holds at most %u", len, KOLO_SCHED_MAX_BYTES) : 0;
  out->sections = calloc(KOLO_SCHED_MAX_SECTIONS, sizeof *out->sections);
  if (r == 0) r = out->sections ? parse_all(&s, text, len) : -2;
  sp_free_program(&s);
  free(s.seen);
  if (r == -2) snprintf(why, whylen, "%s: out of memory reading the schedule", s.name);
  if (r < 0) kolo_sched_free(out);
  else out->hash = kolo_sched_hash(text, len);
  return r == 0 ? koloSuccess : r == -2 ? koloSystemError : koloInvalidArgument;
}
