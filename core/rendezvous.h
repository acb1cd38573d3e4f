/* rendezvous.h - ids of a rendezvous at a known address (KOLO_COMM_ID,
 * NCCL_COMM_ID, koloCommInitFromEnv's KOLO_ROOT): every process computes the
 * same id from its environment, and rank 0 starts the root there at init
 * instead of koloGetUniqueId starting one at a random port. */
#ifndef KOLO_CORE_RENDEZVOUS_H
#define KOLO_CORE_RENDEZVOUS_H

#include "transport/bootstrap.h"

/* The id of a rendezvous at host:port `where` (IPv6 as [addr]:port), named
 * `what` in errors (e.g. "KOLO_COMM_ID"); a port outside 1..65535 is
 * refused.  Its secret comes from kolo_job_secret (job_secret.h); `nranks`
 * (0: unknown) enters a derived one's
 * derivation.  The id's magic is KOLO_UID_MAGIC_ROOT_AT_INIT. */
koloResult_t kolo_rendezvous_uid(const char *what, const char *where, int nranks, kolo_uid *uid);

/* Starts the root of a KOLO_UID_MAGIC_ROOT_AT_INIT id on rank 0 (at its
 * address, with its secret), owned by the caller (*root, to be given to
 * kolo_bootstrap_root_stop); nothing (*root NULL) for other ids and ranks. */
koloResult_t kolo_rendezvous_start_root(const kolo_uid *uid, int rank, int timeout_ms, kolo_errbuf *eb,
                                        kolo_root **root);

/* The reader of `where` alone, pure, for tests and fuzzing
 * (tests/fuzz/fuzz_env_config.c): "host:port" or "[v6]:port" into host
 * [len] and *port (pointing into where); koloInvalidArgument with the
 * error set when malformed. */
koloResult_t kolo_rendezvous_split(const char *where, char *host, size_t len, const char **port);

#endif
