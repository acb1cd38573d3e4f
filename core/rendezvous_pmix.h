/* rendezvous_pmix.h - koloCommInitFromEnv's rendezvous through the
 * launcher's own key-value store (PMIx: Open MPI's mpirun, Slurm's srun with
 * --mpi=pmix): rank 0 starts a root with a random secret and publishes its
 * id there; every rank reads it back after a fence.  Nothing is derived from
 * the environment, so nobody outside the job learns the secret. */
#ifndef KOLO_CORE_RENDEZVOUS_PMIX_H
#define KOLO_CORE_RENDEZVOUS_PMIX_H

#include "transport/bootstrap.h"

/* 1 when kolo was built with PMIx and this process was started by a PMIx
 * launcher (PMIX_NAMESPACE and PMIX_RANK are set). */
int kolo_pmix_present(void);
/* The job's id (magic KOLO_UID_MAGIC: its root already runs on rank 0,
 * which gets it in *root for its communicator to own; NULL elsewhere).
 * Collective over the launcher's processes; timeout_ms bounds the root. */
koloResult_t kolo_pmix_uid(int timeout_ms, kolo_uid *uid, kolo_root **root);

#endif
