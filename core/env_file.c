/* env_file.c - see env_file.h.  Read in pieces until EOF, so that a pipe
 * works as well as a file and no more than the file holds (plus a piece)
 * is allocated. */
#include "core/env_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define PIECE (64 * 1024)

char *kolo_read_env_file(const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  int err = 0;
  while (err == 0 && !feof(f) && n <= max) {
    char *grown = n + PIECE + 1 > cap ? realloc(buf, cap = n + PIECE + 1) : buf;
    if (grown == NULL) err = ENOMEM;
    else n += fread((buf = grown) + n, 1, PIECE, f);
    if (err == 0 && ferror(f)) err = EIO;
  }
  fclose(f);
  if (err == 0 && n > max) err = EFBIG;
  if (err != 0) {
    free(buf);
    errno = err;
    return NULL;
  }
  *len = n;
  return buf;
}
