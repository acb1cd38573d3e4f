/* sched_lex.c - words and numbers of schedule file lines (sched_impl.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ring/sched_impl.h"

int sp_fail(sp_state *s, const char *fmt, ...) {
  int k = snprintf(s->why, s->whylen, "%s:%d: ", s->name, s->line);
  if (k >= 0 && (size_t)k < s->whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why + k, s->whylen - (size_t)k, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

int sp_words(sp_state *s, const char *line, size_t len, sp_word *w) {
  int n = 0;
  for (size_t i = 0; i < len;) {
    if (blank(line[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < len && !blank(line[j])) j++;
    if (n == SP_MAX_WORDS) return sp_fail(s, "more than %d words on one line", SP_MAX_WORDS);
    w[n++] = (sp_word){line + i, j - i};
    i = j;
  }
  return n;
}

int sp_is(const sp_word *w, const char *lit, int nocase) {
  size_t n = strlen(lit);
  return w->n == n && (nocase ? strncasecmp(w->p, lit, n) : strncmp(w->p, lit, n)) == 0;
}

int sp_number(sp_state *s, const sp_word *w, const char *what, int lo, int hi, int *out) {
  long v = 0;
  size_t i = 0;
  for (; i < w->n && i < 10 && w->p[i] >= '0' && w->p[i] <= '9'; i++) v = v * 10 + (w->p[i] - '0');
  if (i == 0 || i != w->n || v < lo || v > hi)
    return sp_fail(s, "%s \"%.*s\" is not a number in %d..%d", what, (int)(w->n > 64 ? 64 : w->n), w->p, lo, hi);
  *out = (int)v;
  return 0;
}
