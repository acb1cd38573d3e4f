/* perf_check.h - check data for the sweeps: every rank's input is a function
 * of (seed, rank, index), so any rank can work out what every other rank
 * sent and check each element of its result without a copy of them.  The
 * values keep every result exact in the type, so results are compared bit
 * for bit except for avg (docs/benchmarking.md, "How #wrong is counted"). */
#ifndef KOLO_PERF_CHECK_H
#define KOLO_PERF_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "perf/perf_args.h"

typedef struct {
  perf_type type;
  perf_op op;
  int nranks;
  uint64_t seed;
  int amp;      /* values of sum/avg/max/min lie in [-amp, amp] ([0, amp] unsigned) */
  int prod_two; /* products may use 2 */
} perf_gen;

void perf_gen_init(perf_gen *g, perf_type type, perf_op op, int nranks, uint64_t seed);

/* buf[i] = the type's value of x (integers wrap; floats round to nearest). */
void perf_store(perf_type t, void *buf, size_t i, double x);

/* buf[i] = rank's input element first + i (a small integer) for i < n. */
void perf_fill(const perf_gen *g, int rank, void *buf, size_t first, size_t n);
/* Fills n elements with a value no check expects (NaN for floats). */
void perf_poison(perf_type t, void *buf, size_t n);

/* Elements of `got` (n of them) that differ from the expected result:
 * reduced:    got[i] = OP over ranks of value(r, first + i)            (AR, RS, reduce)
 * copied:     got[i] = value(src, first + i)                            (bcast, sendrecv)
 * transposed: got[j*per_rank + i] = value(j, rank*per_rank + i)  (all-to-all; rank 0: all-gather, gather) */
uint64_t perf_check_reduced(const perf_gen *g, const void *got, size_t first, size_t n);
uint64_t perf_check_copied(const perf_gen *g, int src, const void *got, size_t first, size_t n);
uint64_t perf_check_transposed(const perf_gen *g, const void *got, int rank, size_t per_rank);

/* The average's post-op as kolo defines it: buf[i] /= div, integers with C's
 * truncating division of the wrapped sum, floats in their own precision
 * (float16 / bfloat16 in float32).  For peers that only have a sum. */
void perf_divide(perf_type t, void *buf, size_t n, int div);

/* Rank `rank`'s premul-sum scalar (PERF_MULSUM): 1, -1 or 2. */
double perf_premul_scalar(int rank);

/* splitmix64's finalizer: the check data's (and kolo-perf net's) hash. */
uint64_t perf_mix64(uint64_t z);

#endif
