/* perf_names.c - the names kolo-perf's command line takes and prints
 * (collectives, types, ops: nccl-tests' spellings) and its numbers. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf_args.h"

static const char *const coll_names[PERF_NUM_COLLS] = {
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "sendrecv", "alltoall", "gather", "scatter"};
/* nccl-tests' spelling first; aliases after. */
static const char *const type_names[PERF_NUM_TYPES] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
static const struct {
  const char *name;
  perf_type type;
} type_aliases[] = {{"char", PERF_INT8},       {"int", PERF_INT32},       {"uint", PERF_UINT32},
                    {"float16", PERF_FLOAT16}, {"fp16", PERF_FLOAT16},    {"float32", PERF_FLOAT32},
                    {"fp32", PERF_FLOAT32},    {"float64", PERF_FLOAT64}, {"fp64", PERF_FLOAT64},
                    {"bf16", PERF_BFLOAT16},   {"float8e4m3", PERF_FLOAT8E4M3}, {"float8e5m2", PERF_FLOAT8E5M2}};
static const char *const op_names[PERF_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};
static const size_t type_sizes[PERF_NUM_TYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

const char *perf_coll_name(perf_coll c) { return (unsigned)c < PERF_NUM_COLLS ? coll_names[c] : "?"; }
const char *perf_type_name(perf_type t) { return (unsigned)t < PERF_NUM_TYPES ? type_names[t] : "?"; }
const char *perf_op_name(perf_op o) { return (unsigned)o < PERF_NUM_OPS ? op_names[o] : "?"; }
size_t perf_type_size(perf_type t) { return (unsigned)t < PERF_NUM_TYPES ? type_sizes[t] : 0; }

int perf_coll_has_op(perf_coll c) { return c == PERF_ALL_REDUCE || c == PERF_REDUCE_SCATTER || c == PERF_REDUCE; }
int perf_coll_has_root(perf_coll c) {
  return c == PERF_BROADCAST || c == PERF_REDUCE || c == PERF_GATHER || c == PERF_SCATTER;
}

int perf_parse_name(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

int perf_parse_coll(const char *s) { return perf_parse_name(s, coll_names, PERF_NUM_COLLS); }
int perf_parse_op(const char *s) { return perf_parse_name(s, op_names, PERF_NUM_OPS); }

int perf_parse_type(const char *s) {
  int t = perf_parse_name(s, type_names, PERF_NUM_TYPES);
  for (size_t i = 0; t < 0 && i < sizeof type_aliases / sizeof type_aliases[0]; i++)
    if (strcmp(s, type_aliases[i].name) == 0) t = (int)type_aliases[i].type;
  return t;
}

int perf_parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (end == s || errno != 0 || s[0] == '-') return -1;
  const char *units = "kmg", *u = *end ? strchr(units, tolower((unsigned char)*end)) : NULL;
  unsigned long long mult = u ? 1ull << (10 * (u - units + 1)) : 1;
  if (u) end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0' || v > SIZE_MAX / mult) return -1;
  *out = (size_t)(v * mult);
  return 0;
}

int perf_parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}
