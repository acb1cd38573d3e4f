/* shm_ends.h - the two ends of one shm pipe's setup, driven by hand: a
 * receiver that makes its segment and a sender that gives up on it, for
 * tests of what a failed setup leaves in /dev/shm. */
#ifndef KOLO_TEST_SHM_ENDS_H
#define KOLO_TEST_SHM_ENDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kt_shm_receiver kt_shm_receiver;

/* Rank `to` (this process) makes the segment of the pipe from rank `from`
 * with `tag`, as a setup does before it sends the name; NULL on failure. */
kt_shm_receiver *kt_shm_receiver_make(uint64_t job, int from, int to, uint32_t tag);
/* The segment's name ("/kolo-..."), "" once the receiver dropped it. */
const char *kt_shm_receiver_name(const kt_shm_receiver *r);
/* Unmaps (and unlinks the name if still held) and frees. */
void kt_shm_receiver_close(kt_shm_receiver *r);

/* Rank `from` gives up on the pipe to rank `to` (process `to_pid`) before
 * attaching, as a failed setup does. */
void kt_shm_sender_abandon(uint64_t job, int from, int to, pid_t to_pid, uint32_t tag);

#ifdef __cplusplus
}
#endif

#endif
