/* fault.c - a device fault as a GPU has one (KOLO_SIM_FAULT): a kernel
 * that touches an illegal address loses its whole context.  The error is
 * sticky: every later call on the context returns it, the context's other
 * kernels are killed, and nothing more runs there until the process ends.
 *
 * KOLO_SIM_FAULT=<name>:<n>[:<device>] picks the n-th launch (counted from
 * 1, in launch order) of a kernel whose name contains <name>, on any
 * device or only on <device>; it faults when it starts on the device
 * (when the stream was idle, during the launch call itself, which then
 * returns the error; otherwise later, as a GPU reports a fault at the next
 * call that looks).  The model raises cudaErrorIllegalAddress. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudasim/sim.h"

/* The armed fault (sim_lock). */
static struct {
  char name[128];
  unsigned long nth, seen;
  int device; /* -1: any */
  int armed;
} plan;

/* Parses "<name>:<n>[:<device>]" into plan (lock held); -1 when malformed. */
static int parse_plan(const char *spec) {
  const char *colon = strchr(spec, ':');
  size_t len = colon ? (size_t)(colon - spec) : 0;
  if (colon == NULL || len == 0 || len >= sizeof plan.name) return -1;
  char *end = NULL;
  errno = 0;
  unsigned long nth = strtoul(colon + 1, &end, 10);
  long dev = -1;
  if (*end == ':') dev = strtol(end + 1, &end, 10);
  if (errno != 0 || *end != '\0' || nth == 0 || dev < -1 || dev >= SIM_MAX_DEVICES) return -1;
  memset(plan.name, 0, sizeof plan.name);
  memcpy(plan.name, spec, len);
  plan.nth = nth;
  plan.seen = 0;
  plan.device = (int)dev;
  plan.armed = 1;
  return 0;
}

int kolo_sim_set_fault(const char *spec) {
  sim_init();
  pthread_mutex_lock(&sim_lock);
  int rc = 0;
  if (spec == NULL || *spec == '\0') plan.armed = 0;
  else rc = parse_plan(spec);
  pthread_mutex_unlock(&sim_lock);
  return rc;
}

/* At the model's start: a bad value is said, and no fault is armed (a
 * run that meant to fault must not pass without one unnoticed). */
void sim_fault_read_env(void) {
  const char *v = getenv("KOLO_SIM_FAULT");
  if (v == NULL || *v == '\0') return;
  if (parse_plan(v) != 0)
    fprintf(stderr, "kolo cuda model: KOLO_SIM_FAULT=%s is not <kernel-name-part>:<n>[:<device>] (n >= 1): "
                    "no fault armed\n", v);
}

int sim_fault_picks(const sim_kernel *k, const sim_device *d) {
  if (!plan.armed || (plan.device >= 0 && plan.device != d->ordinal)) return 0;
  if (strstr(k->desc.name, plan.name) == NULL || ++plan.seen != plan.nth) return 0;
  plan.armed = 0;
  return 1;
}

cudaError_t sim_sticky(const sim_device *d) {
  return d ? __atomic_load_n(&d->fault, __ATOMIC_RELAXED) : cudaSuccess;
}

cudaError_t sim_sticky_current(void) {
  if (sim_init() != cudaSuccess) return cudaSuccess;
  return sim_sticky(sim_device_get(sim_thread()->device));
}

void sim_dispatch(sim_device *d);
void sim_wake_queues(void);

void sim_fault_device(sim_device *d, const sim_op *culprit) {
  if (sim_sticky(d) != cudaSuccess) return;
  __atomic_store_n(&d->fault, cudaErrorIllegalAddress, __ATOMIC_RELAXED);
  fprintf(stderr, "kolo cuda model: KOLO_SIM_FAULT: launch %llu of device %d (%s) faulted: the device's context "
                  "is lost (cudaErrorIllegalAddress, sticky)\n",
          (unsigned long long)culprit->u.kern.launch_no, d->ordinal, culprit->u.kern.kernel->desc.name);
  sim_dispatch(d); /* drops the blocks not yet placed */
  sim_wake_queues();
  pthread_cond_broadcast(&sim_changed);
}

/* Not CUDA's (a process must end to use a device again after a sticky
 * error): lets one test process go on after a fault test. */
void kolo_sim_clear_faults(void) {
  sim_init();
  pthread_mutex_lock(&sim_lock);
  for (int i = 0; i < sim_cfg.ndevices; i++) __atomic_store_n(&sim_device_get(i)->fault, cudaSuccess, __ATOMIC_RELAXED);
  plan.armed = 0;
  pthread_mutex_unlock(&sim_lock);
}
