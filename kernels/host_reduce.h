/* host_reduce.h - the host executor's data primitives: copy, reduce, and
 * reduce-copy into one or two destinations, for every dtype x op.
 *
 * One pass over the inputs writes every output (a reduce-copy-send step
 * writes the user's buffer and the next slot from the same loads).  Loops
 * are written so that the compiler vectorizes them; the hot ones are built
 * for several ISAs (SSE2 baseline, AVX2, AVX-512) and picked at load time.
 * float16, bfloat16 and float8 are widened to float32, combined, and rounded
 * back to nearest-even (float8 saturating: kernels/fp8_convert.h).  Integer
 * arithmetic wraps (as in NCCL), without undefined behaviour.
 */
#ifndef KOLO_KERNELS_HOST_REDUCE_H
#define KOLO_KERNELS_HOST_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "kolo.h"

/* out0[i] = post(a[i] OP b[i]) for i < n, and the same into out1 when out1
 * is not NULL.  b == NULL: no reduction, out = post(a[i]).  OP for koloAvg is
 * a sum.  post divides by `div` when div > 1 (the last step of an average),
 * else is the identity.  Outputs may alias a or b exactly (same pointer), but
 * must not partially overlap them.  No alignment is required. */
void kolo_host_reduce(void *out0, void *out1, const void *a, const void *b,
                      size_t n, koloDataType_t type, koloRedOp_t op, int div);

/* NCCL's premul-sum: out0[i] = a[i] + pre(b[i]), or pre(a[i]) when b is
 * NULL (and the same into out1 when not NULL), where pre(x) is x times the
 * element at `scalar` (one element of `type`, any alignment), rounded to the
 * type (integers wrap).  Aliasing and alignment as kolo_host_reduce. */
void kolo_host_reduce_premul(void *out0, void *out1, const void *a, const void *b, size_t n,
                             koloDataType_t type, const void *scalar);

/* IEEE binary16 / bfloat16 <-> float, round to nearest even, NaN kept. */
float kolo_half_to_float(uint16_t h);
uint16_t kolo_float_to_half(float f);
float kolo_bf16_to_float(uint16_t h);
uint16_t kolo_float_to_bf16(float f);

#endif
