/* fault_trial.h - one trial of the fault matrix, run from the parent: forks
 * the ranks (fault_rank.h), acts on the victim where the victim cannot
 * (SIGCONT, a veth link down), bounds every survivor's time to error and
 * judges the trial: named errors in time, correct data where calls
 * succeeded, nothing left behind (shm segments, fds, threads, children). */
#ifndef KOLO_FAULT_TRIAL_H
#define KOLO_FAULT_TRIAL_H

#include "fault_rank.h"

typedef enum {
  FK_KILL,       /* SIGKILL */
  FK_STOP,       /* SIGSTOP, never resumed (killed once the survivors reported) */
  FK_STOP_EARLY, /* SIGSTOP, SIGCONT after timeout / 5: the job must succeed */
  FK_STOP_LATE,  /* SIGSTOP, SIGCONT after timeout + 2.5 s: every rank fails, named */
  FK_CUT,        /* shutdown() of every socket of the victim */
  FK_LINK_DOWN,  /* its veth down (network namespaces only; the victim waits for it); up after the trial */
  FK_NUM
} fault_kind;

typedef struct {
  int nranks, victim;
  fault_at at;
  fault_kind kind;
  double delay_ms; /* moments init, mid, destroy */
  unsigned long long seed;
  int timeout_ms; /* KOLO_TIMEOUT_MS of the ranks */
  int bound_ms;   /* time to error may exceed the timeout by this much */
  int tcp;        /* the net transport (TCP) instead of shared memory */
  int cuda;       /* CUDA communicators on device 0 (fault_cuda.c) */
  /* KOLO_NET=ib between "hosts": "DEV:IFNAME:ADDR,..." (rank r is host
   * r % entries, on that HCA and interface; rank 0's address is the root's);
   * NULL: not ib */
  const char *ib;
  const char *netns; /* namespaces <netns>r<i>, hub <netns>hub; NULL: this one */
  int port;       /* of the rendezvous (rank 0) */
  int verbose;
} trial_spec;

typedef struct {
  int violations;
  double max_tte_ms; /* longest time from the fault to a rank's error */
  int ok_ranks, err_ranks;
  int named_victim; /* survivors' errors that name the victim */
  int leak_shm, leak_fd, leak_thread, leak_child;
  int dev_abandoned; /* CUDA: pipe memory kept because a stopped peer maps it */
} trial_result;

const char *fault_kind_name(fault_kind k);
/* Runs the trial; prints its line (and each violation) on stdout. */
trial_result fault_trial_run(const trial_spec *s, int index);

#endif
