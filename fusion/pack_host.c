/* pack_host.c - the host's batched copy (see pack.h): one pass over the
 * descriptors, memcpy, or a scaling loop per dtype. */
#include <stdint.h>
#include <string.h>

#include "common/copy.h"
#include "fusion/pack.h"
#include "kernels/host_reduce.h"
#include "kolo.h"

/* Scales n elements from s to d; elements may be unaligned (memcpy in and
 * out, which compilers turn into plain loads and stores). */
#define KF_SCALE_LOOP(T, W, TO_W, FROM_W)                                     \
  for (size_t i = 0; i < n; i++) {                                           \
    T x;                                                                     \
    memcpy(&x, s + i * sizeof(T), sizeof(T));                                \
    x = FROM_W((W)(TO_W(x) * (W)scale));                                     \
    memcpy(d + i * sizeof(T), &x, sizeof(T));                                \
  }
#define KF_SAME(x) (x)

static void scale_copy(char *d, const char *s, size_t bytes, int dtype, double scale) {
  size_t n = bytes / koloTypeSize((koloDataType_t)dtype);
  switch (dtype) {
  case koloFloat32: KF_SCALE_LOOP(float, float, KF_SAME, KF_SAME) break;
  case koloFloat64: KF_SCALE_LOOP(double, double, KF_SAME, KF_SAME) break;
  case koloFloat16: KF_SCALE_LOOP(uint16_t, float, kolo_half_to_float, kolo_float_to_half) break;
  case koloBfloat16: KF_SCALE_LOOP(uint16_t, float, kolo_bf16_to_float, kolo_float_to_bf16) break;
  default:
    if (d != s) memmove(d, s, bytes); /* integers are never scaled (checked) */
    break;
  }
}

void kf_pack_host(const kf_copy *d, int n, int dtype, double scale) {
  for (int i = 0; i < n; i++) {
    if (scale != 1.0) scale_copy(d[i].dst, d[i].src, d[i].bytes, dtype, scale);
    else if (d[i].dst != d[i].src) kolo_copy(d[i].dst, d[i].src, d[i].bytes);
  }
}
