/* sched_impl.h - the schedule file parser's parts (sched_file.h): words of
 * a line (sched_lex.c), directives and sections (sched_parse.c), step
 * lines and programs (sched_step.c). */
#ifndef KOLO_RING_SCHED_IMPL_H
#define KOLO_RING_SCHED_IMPL_H

#include "ring/sched_file.h"

#define SP_MAX_WORDS 16

typedef struct {
  const char *p;
  size_t n;
} sp_word;

typedef struct {
  const char *name; /* of the file, for messages */
  int line;
  char *why;
  size_t whylen;
  kolo_sched_file *f;
  int have_version;
  kolo_sched_section *sec; /* the section being read, NULL before the first */
  unsigned char *seen;     /* [nchannels * nranks]: programs of sec read */
  int rank, ch;            /* the program being read; rank -1: none */
  kolo_step *steps;        /* its steps so far */
  int nsteps, cap;
  int32_t *peers;          /* its peers so far, by first use */
  int npeers, peers_cap;
} sp_state;

/* "name:line: what" into why; returns -1. */
int sp_fail(sp_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Splits a line (no newline, comment cut) into words; their number, or -1
 * (with the sentence) when there are more than SP_MAX_WORDS. */
int sp_words(sp_state *s, const char *line, size_t len, sp_word *w);
/* 1 when the word is `lit` (case-insensitively when nocase). */
int sp_is(const sp_word *w, const char *lit, int nocase);
/* A decimal number in lo..hi into *out; -1 (with the sentence naming
 * `what`) otherwise. */
int sp_number(sp_state *s, const sp_word *w, const char *what, int lo, int hi, int *out);

/* A step line of the program being read. */
int sp_step(sp_state *s, const sp_word *w, int n);
/* Ends the program being read (if any): it becomes its section's. */
int sp_end_program(sp_state *s);
void sp_free_program(sp_state *s);

#endif
