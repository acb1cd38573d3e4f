/* comm_config.h - a communicator's settings, from its config and the environment. */
#ifndef KOLO_CORE_COMM_CONFIG_H
#define KOLO_CORE_COMM_CONFIG_H

#include "core/comm_state.h"

/* Reads config and the KOLO_* parameters into c (memory kind, channels,
 * slots, timeouts, protocols, algorithms); koloInvalidArgument or
 * koloInvalidUsage with a sentence (the thread's buffer) for a value kolo
 * cannot take. */
koloResult_t kolo_comm_resolve_config(struct koloComm *c, const koloConfig_t *cfg);
/* The channels a tuning file asks for, where config does not say. */
koloResult_t kolo_comm_tuned_channels(struct koloComm *c, const koloConfig_t *cfg);
/* After kolo_tuned_narrow: a host-memory communicator whose channels the
 * file raised keeps only as many as the lines of its own link name (the
 * raise counted both links' lines: the hosts were not known yet), and no
 * fewer than it had before the raise. */
void kolo_comm_narrowed_channels(struct koloComm *c);
/* How blocked waits spin, yield and sleep, from the ranks on this host
 * and its CPUs (after the bootstrap: it knows who shares the host). */
void kolo_comm_tune_waits(struct koloComm *c);

#endif
