/* shm_sweep.h - the names of shm pipe segments whose creator died before
 * its sender mapped them (transport_shm.c). */
#ifndef KOLO_TRANSPORT_SHM_SWEEP_H
#define KOLO_TRANSPORT_SHM_SWEEP_H

#include <stdint.h>

/* Unlinks the kolo segment names in dir (/dev/shm) whose creator is no
 * process here, that are this user's and older than older_than_s (seconds
 * since last written); the number removed.  transport_shm.c runs it once
 * per process, before its first segment. */
int kolo_shm_sweep_stale(const char *dir, int64_t older_than_s);

#endif
