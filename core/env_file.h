/* env_file.h - reading a file a KOLO_* variable names (KOLO_SCHEDULE_FILE,
 * KOLO_TUNING_FILE) whole, with a bound on its size. */
#ifndef KOLO_CORE_ENV_FILE_H
#define KOLO_CORE_ENV_FILE_H

#include <stddef.h>

/* The bytes of path (malloc'd, *len of them, one spare byte after them),
 * or NULL with errno set: EFBIG when it holds more than max bytes, EIO on
 * a read error, ENOMEM, or fopen's. */
char *kolo_read_env_file(const char *path, size_t max, size_t *len);

#endif
