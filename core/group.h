/* group.h - koloGroupStart / koloGroupEnd: this thread's group, the calls
 * it records, and the jobs it runs at its end (communicator inits and
 * splits: one record for every kind, each kind filling in what the group's
 * end does with its jobs). */
#ifndef KOLO_CORE_GROUP_H
#define KOLO_CORE_GROUP_H

#include "core/comm_state.h"

/* Kinds of job a group runs besides calls.  A group holds calls, or inits,
 * or splits, never two of these (as in NCCL). */
typedef enum { KOLO_JOB_INIT, KOLO_JOB_SPLIT, KOLO_JOB_KINDS } kolo_job_kind;

/* One recorded job: its kind's record (arg) and what the group's end does
 * with it.  Jobs of a group meet other ranks, so they run together: start
 * begins each (on a thread of its own), then finish waits for each when
 * `wait` (else it goes on after the group: koloInProgress) and returns its
 * result; say puts a failed job's sentence in the thread's error buffer
 * (the group's first failure); refuse fails a job the group will not run,
 * saying why; release (may be NULL) frees the record, last. */
typedef struct {
  kolo_job_kind kind;
  void *arg;
  int wait; /* the group's end waits for every job when one has this set */
  koloResult_t (*start)(void *arg);
  koloResult_t (*finish)(void *arg, int wait);
  void (*say)(void *arg);
  void (*refuse)(void *arg, const char *why);
  void (*release)(void *arg);
} kolo_group_job;

/* koloGroupStart calls not yet ended on this thread. */
int kolo_group_depth(void);
/* Records job (copied) for the end of the current group. */
koloResult_t kolo_group_add_job(const kolo_group_job *job);
/* Forgets the recorded job whose record is arg (its communicator was freed
 * before the group ended); nothing when there is none. */
void kolo_group_forget_job(const void *arg);

/* Runs op now, or records it in the current group.  Returns what the API
 * call returns. */
koloResult_t kolo_enqueue(const kolo_op *op);

#endif
