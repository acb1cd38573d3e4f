/* dtype.h - names of koloDataType_t values, for error sentences and logs:
 * one table, so that a new type cannot be missing from one of them; and
 * their sizes (koloTypeSize, declared in kolo.h, is defined in dtype.c). */
#ifndef KOLO_COMMON_DTYPE_H
#define KOLO_COMMON_DTYPE_H

#include "kolo.h"

/* "int8" ... "bfloat16", "float8e4m3", "float8e5m2"; "invalid" otherwise. */
const char *kolo_type_name(int datatype);

#endif
