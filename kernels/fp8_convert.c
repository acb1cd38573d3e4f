/* fp8_convert.c - the out-of-line float8 conversions (see fp8_convert.h). */
#include "kernels/fp8_convert.h"

float kolo_e4m3_to_float(uint8_t x) { return kolo_e4m3_to_float_inline(x); }
float kolo_e5m2_to_float(uint8_t x) { return kolo_e5m2_to_float_inline(x); }
uint8_t kolo_float_to_e4m3(float f) { return kolo_float_to_e4m3_inline(f); }
uint8_t kolo_float_to_e5m2(float f) { return kolo_float_to_e5m2_inline(f); }
