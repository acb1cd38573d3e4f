/* fuzz_util.h - what kolo's libFuzzer targets share: the input as a C
 * string (as getenv would give it: up to its first NUL), and a check that
 * fails the run loudly.  Header-only, so that every fuzz_*.c stays one
 * binary (tests/fuzz/CMakeLists.txt). */
#ifndef KOLO_TESTS_FUZZ_UTIL_H
#define KOLO_TESTS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'd, NUL-terminated copy of the input (exactly size + 1 bytes, so
 * ASan sees a read past its end); aborts when out of memory. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (s == NULL) abort();
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* A property the parser promises: its violation is a finding. */
#define FUZZ_REQUIRE(cond)                                                      \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

/* The byte a target fills an output with before a decode, to see what the
 * decoder wrote; fuzz_is_poison: n bytes at p are all of it (untouched). */
#define FUZZ_POISON 0xA5
static inline int fuzz_is_poison(const void *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (((const uint8_t *)p)[i] != FUZZ_POISON) return 0;
  return 1;
}

/* A refusal's sentence: not empty, and terminated within its len bytes. */
static inline int fuzz_said(const char *why, size_t len) { return memchr(why, '\0', len) != NULL && why[0] != '\0'; }

#endif
