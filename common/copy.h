/* copy.h - kolo's copy of host bytes, for the data path: memcpy, except
 * where the destination sits 1 to 63 bytes past the source within a 4 KiB
 * page (copy.c says why). */
#ifndef KOLO_COMMON_COPY_H
#define KOLO_COMMON_COPY_H

#include <stddef.h>

/* Copies n bytes from src to dst (they must not overlap). */
void kolo_copy(void *dst, const void *src, size_t n);

/* The distances kolo keeps clear of: dst - src, modulo 4 KiB, from 1 to
 * this (copy.c says why). */
#define KOLO_COPY_ALIAS_MAX 63

/* 1 when dst - src, modulo 4 KiB, is 1..KOLO_COPY_ALIAS_MAX: where a REP
 * MOVSB copy can run an order of magnitude slower (copy.c). */
int kolo_copy_aliases(const void *dst, const void *src);

#endif
