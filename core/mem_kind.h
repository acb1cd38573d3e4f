/* mem_kind.h - what a communicator needs from a memory kind other than
 * host memory, as an operations table (the way transports are tables:
 * transport/transport.h).
 *
 * Host communicators have no table (struct koloComm's kind is NULL): the
 * core runs their calls itself.  A kind that this build of kolo has fills
 * a table in its own files (CUDA: core/cuda_kind.c, built only with CUDA,
 * real or on the CPU model) and is listed in mem_kind.c, the one place
 * that knows which kinds the build has.  The core calls a kind only
 * through its table, so that it builds, links and runs without any of
 * the kind's files.
 *
 * Every per-communicator operation may be called on a communicator whose
 * init stopped before the kind's own init ran (or finished); it then does
 * what the core would do without the kind (nothing, or the comm's sticky
 * failure). */
#ifndef KOLO_CORE_MEM_KIND_H
#define KOLO_CORE_MEM_KIND_H

#include <stddef.h>

#include "kolo.h"

struct koloComm;
struct kolo_op;
struct kolo_conn_mem;

typedef struct kolo_mem_kind {
  const char *name;
  int memory; /* the koloMemKind_t it serves */

  /* Init, in this order, each after the core's step named. */
  koloResult_t (*init)(struct koloComm *c);     /* after the ranks' shapes agree: device, streams, words */
  koloResult_t (*programs)(struct koloComm *c); /* after the program tables exist: programs uploaded */
  void (*ring_ready)(struct koloComm *c);       /* after the ring pipes are made: their ends */
  /* After point-to-point pipes were made (a kolo_pipe_fn, comm.h). */
  koloResult_t (*p2p_ready)(struct koloComm *c, int peer, int is_send, void *arg);
  /* Where the comm's pipes live (transport.h), for kolo_connect. */
  const struct kolo_conn_mem *(*conn_mem)(const struct koloComm *c);
  /* The comm's device, or -1 when its init has not chosen one. */
  int (*device)(const struct koloComm *c);
  /* The calling thread's current device, or -1 (config.cudaDev = -1). */
  int (*current_device)(void);

  /* Calls: enqueues ops of this kind's communicators (all of them). */
  koloResult_t (*run)(struct kolo_op *ops, int nops);
  /* koloSuccess or the comm's sticky failure, as the kind sees it. */
  koloResult_t (*status)(struct koloComm *c);
  /* 1 while work the comm enqueued has not finished (no wait). */
  int (*busy)(struct koloComm *c);

  /* Failure and teardown.  stop: every pipe end of the comm stopped by
   * this rank for `reason`; abort: the comm's running work stops; quiesce:
   * waits for the comm's own work within the timeout of the call `fn`;
   * close_shared: closes what other processes share with the comm, in the
   * order their rules ask, before the core closes its pipes; free: the
   * kind's state, after the pipes were closed. */
  void (*stop)(struct koloComm *c, int reason);
  void (*abort)(struct koloComm *c);
  void (*quiesce)(struct koloComm *c, const char *fn);
  void (*close_shared)(struct koloComm *c);
  void (*free)(struct koloComm *c);

  /* Memory (koloMemAlloc, registration).  alloc_device: the device
   * koloMemAlloc would allocate on, or -1 (none visible: host memory);
   * alloc / release: a block of that device, freed on it; check_buffer:
   * koloSuccess when buff is memory of the comm's kind and device, else
   * koloInvalidArgument, said in the comm's error naming fn. */
  int (*alloc_device)(void);
  koloResult_t (*alloc)(int device, size_t size, void **ptr);
  koloResult_t (*release)(int device, void *ptr);
  koloResult_t (*check_buffer)(struct koloComm *c, const void *buff, const char *fn);
} kolo_mem_kind;

/* The kinds a build may have; only those it has are defined. */
extern const kolo_mem_kind kolo_mem_kind_cuda;

/* The table of memory kind `memory` (a koloMemKind_t), or NULL: host
 * memory, or a kind this build of kolo does not have. */
const kolo_mem_kind *kolo_mem_kind_find(int memory);

#endif
