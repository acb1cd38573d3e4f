/* config.h - every KOLO_* environment variable, in one table.
 *
 * Components ask for a parameter by name; the table (config.c) holds its
 * default and help text, so `kolo-perf --params` can print all of them and no
 * getenv() is scattered through the code.  Values are read from the
 * environment at each call (cheap; calls happen at init, not on hot paths).
 */
#ifndef KOLO_COMMON_CONFIG_H
#define KOLO_COMMON_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/* The integer value of `name` (decimal, 0x hex, or with a K/M/G suffix).
 * An unparsable value yields the default, and says so on stderr (even
 * without KOLO_DEBUG) once per parameter and process.  Aborts on a
 * name that is not in the table (a programming error). */
int64_t kolo_param_int(const char *name);
/* How kolo_param_int reads a value: 0 and *out, or -1 when s is not an
 * integer (with an optional K/M/G suffix) that fits in int64_t.  Pure. */
int kolo_param_parse_int(const char *s, int64_t *out);
/* The string value, or the default (may be NULL when unset and no default).
 * The pointer stays valid until the environment changes. */
const char *kolo_param_str(const char *name);
/* 1 when the parameter has a value of its own (its variable, or the
 * fallback's), 0 when it has its default. */
int kolo_param_is_set(const char *name);
/* The CPUs of this host as kolo counts them: KOLO_HOST_CPUS where it is
 * 1 or more, else the CPUs online; 1..2^20. */
long kolo_host_cpus(void);
/* Prints every parameter, its current value and help. */
void kolo_param_print(FILE *out);
/* A second source of values, asked for a parameter whose KOLO_* variable
 * is unset (kolo's own name always wins): the NCCL layer (nccl/) installs one
 * that reads NCCL's names for the same settings.  It returns the value as
 * kolo spells it, or NULL.  NULL uninstalls it. */
typedef const char *(*kolo_param_fallback)(const char *name);
void kolo_param_set_fallback(kolo_param_fallback fn);

#endif
