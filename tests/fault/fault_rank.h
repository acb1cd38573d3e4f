/* fault_rank.h - one rank of a fault trial, as a forked process: joins the
 * job (koloCommInitFromEnv), runs a fixed list of checked collectives and
 * tears down; the victim injects its fault at the chosen moment.  Each rank
 * writes lines to the parent on report_fd:
 *   F <t_ns>                  the victim, just before its fault
 *   S <stage>                 where the rank is (for a hang's report)
 *   R <rank> <rc> <t_ns> <bad> <calls> <fd0> <fd1> <thr0> <thr1> <where>|<text>
 * rc: the first failing call's result (0: every call succeeded); t_ns: when
 * it returned (CLOCK_MONOTONIC); bad: wrong elements of calls that
 * succeeded; fd0/thr0 before init, fd1/thr1 after destroy or abort. */
#ifndef KOLO_FAULT_RANK_H
#define KOLO_FAULT_RANK_H

typedef enum { AT_INIT, AT_FIRST_CALL, AT_MID, AT_GROUP, AT_DESTROY, AT_NUM } fault_at;
/* What the victim does at its moment (the parent does the rest: SIGCONT, link down). */
typedef enum { ACT_KILL, ACT_STOP, ACT_CUT, ACT_TELL, ACT_NUM } fault_act;

typedef struct {
  int rank, nranks;
  int victim;      /* this rank is the victim */
  fault_at at;
  fault_act act;
  double delay_ms; /* init, mid, destroy: after the moment's start, on a thread */
  int report_fd;
  unsigned long long seed;
} rank_plan;

const char *fault_at_name(fault_at at);
/* The rank's body; returns the process's exit status. */
int fault_rank_main(const rank_plan *p);

#endif
