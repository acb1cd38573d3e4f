/* dtype.c - see dtype.h. */
#include "common/dtype.h"

const char *kolo_type_name(int t) {
  static const char *const names[koloNumTypes] = {
      "int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
      "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return (t >= 0 && t < koloNumTypes) ? names[t] : "invalid";
}

/* Here rather than with the communicator: every layer sizes buffers by it. */
size_t koloTypeSize(koloDataType_t t) {
  static const size_t sizes[koloNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return ((int)t >= 0 && t < koloNumTypes) ? sizes[t] : 0;
}
