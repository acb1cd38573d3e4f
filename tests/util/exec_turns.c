/* exec_turns.c - see exec_turns.h. */
#include "util/exec_turns.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/host_exec.h"
#include "ring/schedule.h"
#include "transport/connector.h"
#include "transport/transport.h"

#define MAX_COUNT 16

/* The stand-in's state: one run at a time (the transport's callbacks see
 * only the connector). */
static struct {
  int32_t sent[MAX_COUNT];
  int count, turns_left, landed;
  kt_exec_turns *out;
} fake;

static int fake_progress(kolo_connector *c) {
  if (fake.landed || fake.turns_left-- > 0) return 0;
  memcpy(c->slots, fake.sent, (size_t)fake.count * sizeof(int32_t));
  atomic_store_explicit(&c->ctrl->tail, 1, memory_order_release);
  fake.landed = 1;
  return 1;
}

static void fake_wait(kolo_connector *c, int timeout_us) {
  (void)timeout_us;
  fake.out->sleeps++;
  if (kolo_conn_can_recv(c)) fake.out->sleeps_with_slice++;
  fake_progress(c); /* as a net pipe's wait takes a turn when it wakes */
}

static kolo_transport fake_transport(void) {
  kolo_transport t;
  memset(&t, 0, sizeof t);
  t.name = "turns";
  t.progress = fake_progress;
  t.wait = fake_wait;
  return t;
}

static void fill_task(kolo_exec_task *t, const kolo_program *prog, kolo_connector *rc, kolo_exec_owner *o,
                      int32_t *in, int32_t *outbuf) {
  memset(t, 0, sizeof *t);
  t->prog = prog;
  t->geo = (kolo_geometry){.count = (size_t)fake.count, .elem_size = sizeof(int32_t), .nranks = 2,
                           .nchannels = 1, .chunk_elems = MAX_COUNT, .layout = KOLO_LAYOUT_FLAT};
  t->in = (char *)in;
  t->out = (char *)outbuf;
  t->type = koloInt32;
  t->op = koloSum;
  t->div = 1;
  t->call = 1;
  t->recv = rc;
  t->owner = o;
  t->dep[0] = t->dep[1] = t->dep[2] = -1;
  kolo_exec_task_init(t);
}

int kt_exec_turns_run(const kt_exec_turns_cfg *cfg, kt_exec_turns *out, char *err, size_t errlen) {
  int count = cfg->count;
  if (count < 1 || count > MAX_COUNT) {
    snprintf(err, errlen, "count %d is outside 1 .. %d", count, MAX_COUNT);
    return -1;
  }
  memset(out, 0, sizeof *out);
  memset(&fake, 0, sizeof fake);
  fake.count = count;
  fake.turns_left = cfg->turns_before_landing;
  fake.out = out;
  for (int i = 0; i < count; i++) fake.sent[i] = (int32_t)(rand() ^ (i << 20));
  kolo_program prog;
  memset(&prog, 0, sizeof prog);
  if (kolo_sched_p2p(KOLO_COLL_RECV, 0, 1, &prog) != koloSuccess) {
    snprintf(err, errlen, "kolo_sched_p2p failed");
    return -1;
  }
  kolo_conn_ctrl *ctrl = calloc(1, sizeof *ctrl);
  char *slots = calloc(2, MAX_COUNT * sizeof(int32_t));
  int32_t in[MAX_COUNT] = {0}, got[MAX_COUNT];
  memset(got, 0xA5, sizeof got);
  const kolo_transport tr = fake_transport();
  kolo_connector rc;
  memset(&rc, 0, sizeof rc);
  rc.ctrl = ctrl;
  rc.slots = slots;
  rc.nslots = 2;
  rc.slot_bytes = MAX_COUNT * sizeof(int32_t);
  rc.peer = 1;
  rc.transport = &tr;
  kolo_exec_owner owner;
  memset(&owner, 0, sizeof owner);
  owner.rank = 0;
  owner.spin = cfg->spin;
  owner.yields = cfg->yields;
  owner.yield_ns = cfg->yield_ns;
  owner.wake_yields = cfg->wake_yields;
  kolo_exec_task task;
  fill_task(&task, &prog, &rc, &owner, in, got);
  if (ctrl != NULL && slots != NULL) out->result = (int)kolo_host_exec_run(&task, 1);
  for (int i = 0; i < count; i++) out->bytes_wrong += got[i] != fake.sent[i];
  int ok = ctrl != NULL && slots != NULL;
  free(ctrl);
  free(slots);
  kolo_program_free(&prog);
  if (!ok) snprintf(err, errlen, "out of memory");
  return ok ? 0 : -1;
}
